"""The installed `hfexport` package, as a Python user meets it: run by tests/python_package.rs
with the interpreter of a fresh venv into which `pip install ./python[onnxruntime]` put the
wheel, from a folder outside the repository (so `import hfexport` is the installed package).

    python test_package.py <repository root>

Exports the committed Qwen3 fixture through the Python API and the `hfexport` console script,
runs them in ONNX Runtime and compares with transformers' logits and greedy tokens recorded in
the fixture (golden.safetensors), and checks errors, progress events and `inspect`.
"""

import importlib.util
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import onnxruntime as ort

import hfexport

ROOT = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "qwen3"
# within transformers' logits, as the suite asks of ONNX Runtime on every fixture
ATOL = 1e-4


def read_safetensors(path):
    """The tensors of a safetensors file as numpy arrays (no safetensors package here)."""
    data = Path(path).read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    dtypes = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        raw = data[8 + size + start : 8 + size + end]
        out[name] = np.frombuffer(raw, dtype=dtypes[info["dtype"]]).reshape(info["shape"])
    return out


GOLDEN = read_safetensors(FIXTURE / "golden.safetensors")


class Package(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="hfexport-py-"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_no_torch_and_one_version(self):
        # the wheel pulls in neither torch nor transformers: the export is Rust
        self.assertIsNone(importlib.util.find_spec("torch"))
        self.assertIsNone(importlib.util.find_spec("transformers"))
        cli = subprocess.run([hfexport_command(), "--version"], capture_output=True, text=True, check=True)
        self.assertEqual(cli.stdout.split(), ["hfexport", hfexport.__version__])

    def test_export_runs_in_onnxruntime_like_transformers(self):
        out = self.tmp / "onnx"
        events = []
        meta = hfexport.export(FIXTURE, "onnx", out, dynamic=True, verify=True, progress=events.append)
        self.assertEqual(meta["source"]["architecture"], "Qwen3ForCausalLM")
        self.assertEqual(meta, json.loads((out / "export.json").read_text()))
        self.assertLessEqual(meta["verification"]["max_abs_diff"], meta["verification"]["atol"])
        # the batch of two padded prompts transformers ran, in the upstream runtime
        session = ort.InferenceSession(str(out / "onnx" / "model.onnx"))
        feeds = {"input_ids": GOLDEN["batch.input_ids"], "attention_mask": GOLDEN["batch.attention_mask"]}
        (logits,) = session.run(["logits"], feeds)
        np.testing.assert_allclose(logits, GOLDEN["batch.logits"], atol=ATOL, rtol=0)
        # every weight reported once, in order, then the end of the weights; verify's cases
        weights = [e for e in events if e["event"] == "weight"]
        self.assertGreater(len(weights), 0)
        self.assertEqual([e["done"] for e in weights], list(range(1, weights[0]["total"] + 1)))
        self.assertTrue(all(isinstance(e["tensor"], str) and e["bytes"] >= 0 for e in weights))
        kinds = [e["event"] for e in events]
        self.assertLess(kinds.index("weight"), kinds.index("weights_written"))
        self.assertIn("verify", kinds)
        self.assertTrue(any(e["event"] == "note" and "building onnx" in e["message"] for e in events), events)

    def test_generation_export_generates_transformers_tokens(self):
        out = self.tmp / "gen"
        meta = hfexport.export(
            FIXTURE, "onnx", out, dynamic=True, for_generation=True, static_cache=32, multi_token_decode=True, verify=True
        )
        self.assertEqual([c["name"] for c in meta["components"]], ["decode"])
        self.assertLessEqual(meta["verification"]["max_abs_diff"], meta["verification"]["atol"])
        # the console script of the same install runs the loop in ONNX Runtime from this venv
        prompt = ",".join(str(i) for i in GOLDEN["greedy.prompt_ids"][0])
        gen = subprocess.run(
            [hfexport_command(), "generate", str(out), "--prompt-ids", prompt, "--max-new-tokens", "16", "--json"],
            capture_output=True,
            text=True,
        )
        self.assertEqual(gen.returncode, 0, gen.stderr)
        self.assertEqual(json.loads(gen.stdout)["ids"], GOLDEN["greedy.tokens"][0].tolist())

    def test_quantized_export_from_a_config_dict_verifies(self):
        out = self.tmp / "int8"
        config = {"quantizer": {"weights": "int8"}}
        meta = hfexport.export(FIXTURE, "onnx", out, dynamic=True, config=config, verify=True, progress=None)
        self.assertEqual(meta["config"]["quantizer"]["weights"], "int8")
        v = meta["verification"]
        self.assertLessEqual(v["max_abs_diff"], v["atol"])
        self.assertGreater(v["against_float"]["top1_agreement"], 0.5)
        # int8 weights are transformers.js's `q8` dtype: `onnx/model_quantized.onnx`
        self.assertEqual(meta["components"][0]["files"], ["onnx/model_quantized.onnx", "onnx/model_quantized.onnx.data"])
        session = ort.InferenceSession(str(out / "onnx" / "model_quantized.onnx"))
        feeds = {"input_ids": GOLDEN["single.input_ids"], "attention_mask": GOLDEN["single.attention_mask"]}
        (logits,) = session.run(["logits"], feeds)
        # int8 weights move the logits, but not far on this tiny fixture
        self.assertLess(np.abs(logits - GOLDEN["single.logits"]).max(), 0.1 * np.abs(GOLDEN["single.logits"]).max())

    def test_console_script_exports(self):
        out = self.tmp / "cli"
        run = subprocess.run(
            [hfexport_command(), "export", "--model", str(FIXTURE), "--format", "openvino", "--output", str(out)],
            capture_output=True,
            text=True,
        )
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("exported Qwen3ForCausalLM", run.stdout)
        self.assertEqual(hfexport.inspect(out, check=True)["format"], "openvino")

    def test_errors_are_hfexport_errors_with_the_command_lines_message(self):
        out = self.tmp / "never"
        with self.assertRaises(hfexport.HfExportError) as e:
            hfexport.export(self.tmp / "no-such-model", "onnx", out, progress=None)
        self.assertIn("no-such-model", str(e.exception))
        with self.assertRaises(hfexport.HfExportError) as e:
            hfexport.export(FIXTURE, "onnx", out, colour=True, progress=None)
        self.assertIn("--colour", str(e.exception))
        with self.assertRaises(hfexport.HfExportError) as e:
            hfexport.export(FIXTURE, "onnx", out, quantize="int3", progress=None)
        self.assertIn("int3", str(e.exception))
        self.assertIn("int4", str(e.exception))
        with self.assertRaises(hfexport.HfExportError) as e:
            hfexport.export(FIXTURE, "tflite", out, progress=None)
        self.assertIn("tflite", str(e.exception))
        self.assertFalse(out.exists(), "a refused export leaves no output folder")
        cli = subprocess.run([hfexport_command(), "export", "--model", str(FIXTURE)], capture_output=True, text=True)
        self.assertEqual(cli.returncode, 2)
        self.assertIn("--output", cli.stderr)

    def test_a_callback_exception_cancels_the_export(self):
        def fail(event):
            if event["event"] == "weight":
                raise ValueError("stop at weight %d" % event["done"])

        out = self.tmp / "cb"
        with self.assertRaises(ValueError) as e:
            hfexport.export(FIXTURE, "onnx", out, progress=fail)
        self.assertEqual(str(e.exception), "stop at weight 1")
        self.assertFalse(out.exists(), "a cancelled export leaves no output folder")
        self.assertEqual([p.name for p in self.tmp.iterdir()], [], "nor a staging folder")

    def test_ctrl_c_cancels_the_export(self):
        def interrupt(event):
            if event["event"] == "weight" and event["done"] == 2:
                os.kill(os.getpid(), signal.SIGINT)

        out = self.tmp / "interrupted"
        # the handler an interactive interpreter has (a process started with SIGINT ignored,
        # as a background job of a shell script is, inherits no handler)
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            with self.assertRaises(KeyboardInterrupt):
                hfexport.export(FIXTURE, "onnx", out, verify=True, progress=interrupt)
        finally:
            signal.signal(signal.SIGINT, previous)
        self.assertFalse(out.exists(), "an interrupted export leaves no output folder")

    def test_inspect(self):
        ckpt = hfexport.inspect(FIXTURE)
        self.assertEqual(ckpt["architecture"], "Qwen3ForCausalLM")
        self.assertEqual(ckpt["sizes"]["vocab"], GOLDEN["single.logits"].shape[-1])
        out = self.tmp / "checked"
        hfexport.export(FIXTURE, "onnx", out, progress=None)
        whole = hfexport.inspect(out, check=True)
        self.assertEqual(whole["source"]["architecture"], "Qwen3ForCausalLM")
        data = out / "onnx" / "model.onnx.data"
        data.write_bytes(data.read_bytes()[:-1])
        self.assertEqual(hfexport.inspect(out)["format"], "onnx")  # no check: export.json only
        with self.assertRaises(hfexport.HfExportError) as e:
            hfexport.inspect(out, check=True)
        self.assertIn("model.onnx.data", str(e.exception))

    def test_options_mirror_the_command_line(self):
        # every flag of `hfexport export --help` is a keyword the docstring names
        help_text = subprocess.run([hfexport_command(), "export", "--help"], capture_output=True, text=True).stdout
        flags = set(re.findall(r"--([a-z][a-z0-9-]*)", help_text))
        self.assertIn("static-cache", flags)
        skipped = {"model", "format", "output", "help", "quiet"}
        for flag in sorted(flags - skipped):
            self.assertIn("``" + flag.replace("-", "_") + "``", hfexport.export.__doc__, flag)


def hfexport_command():
    """The console script of this interpreter's environment."""
    path = Path(sys.executable).parent / "hfexport"
    if not path.is_file():
        raise AssertionError(f"no hfexport console script beside {sys.executable}")
    return str(path)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
