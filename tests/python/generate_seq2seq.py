"""Greedy generation over hfexport encoder-decoder exports (Whisper, T5, the BART line: `encoder` + static-cache
`decode`) in the upstream Python runtimes, the way a Python user writes the loop, for the Rust
test suite.

usage: generate_seq2seq.py JOBS.json OUT.json

JOBS is a list of [EXPORT_DIR, INPUTS.safetensors (the encoder's inputs by name: Whisper's
`input_features` [1, mel, frames], T5's `input_ids` and `attention_mask` [1, L]), N];
OUT maps each EXPORT_DIR to its N tokens. The encoder runs once; its outputs named like decode
inputs (`cross.layers.<i>.keys|values`) are fed to every decode call beside `input_ids`,
`attention_mask` (bool [1, 1, q, cache_len]), `position_ids` and the caches. The first call is
`decoder_start_token_id` (config.json; else the BOS id, else the padding id) at position 0, then one token a step. Per format:
onnxruntime sessions, the caches fed back; OpenVINO's stateful `decode` (the caches live in the
infer request, `beam_idx` [0]; compiled with KV_CACHE_PRECISION=f32); the `.pt2` programs of
`load_pt2` called positionally in export.json's input order, the static caches updated in place;
the `.pte` methods in the ExecuTorch runtime, positionally, returning [caches, logits, caches],
the updated caches fed back.
"""
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import pt2_serde  # noqa: E402,F401  (a quicker .pt2 reader)
from safetensors.numpy import load_file  # noqa: E402
from static_cache import OV_CONFIG, feeds, zeros  # noqa: E402


def onnx_file(component):
    """A component's graph as export.json lists it (`onnx/<name>.onnx`)."""
    return next(f for f in component["files"] if f.endswith(".onnx"))


def main():
    jobs, out = sys.argv[1:3]
    result = {}
    for export, features, n in json.load(open(jobs)):
        meta = json.load(open(os.path.join(export, "export.json")))
        inputs = load_file(features)
        config = json.load(open(os.path.join(export, "config.json")))
        # as generate falls back: the BOS id (mBART's null start), else the padding id (T5's)
        start = next(config[k] for k in ("decoder_start_token_id", "bos_token_id", "pad_token_id")
                     if config.get(k) is not None)
        result[export] = RUNTIMES[meta["format"]](export, meta, inputs, start, n)
    json.dump(result, open(out, "w"))


def components(meta):
    comps = {c["name"]: c for c in meta["components"]}
    assert [c["role"] for c in meta["components"]] == ["encoder", "decode"], meta["components"]
    return comps["encoder"], comps["decode"], meta["symbols"]["cache_len"]["max"]




def onnx(export, meta, inputs, start, n):
    import onnxruntime as ort

    enc_c, dec_c, slots = components(meta)
    sess = {c["name"]: ort.InferenceSession(os.path.join(export, onnx_file(c))) for c in (enc_c, dec_c)}
    enc = dict(zip([o.name for o in sess["encoder"].get_outputs()], sess["encoder"].run(None, inputs)))
    names = [p["name"] for p in dec_c["inputs"]]
    caches = {p["name"]: zeros(p, slots) for p in dec_c["inputs"] if p["name"].startswith("past_key_values.")}
    outs = [o.name for o in sess["decode"].get_outputs()]
    tokens, token = [], start
    for pos in range(n):
        f = {**feeds([token], pos, slots), **caches, **{k: enc[k] for k in names if k in enc}}
        r = dict(zip(outs, sess["decode"].run(None, f)))
        caches = {"past_key_values." + k[len("present."):]: v for k, v in r.items() if k.startswith("present.")}
        token = int(r["logits"][0, -1].argmax())
        tokens.append(token)
    return tokens


def openvino(export, meta, inputs, start, n):
    import openvino as ov

    enc_c, dec_c, slots = components(meta)
    core = ov.Core()

    def compiled(c):
        xml, bin_ = (next(f for f in c["files"] if f.endswith(ext)) for ext in (".xml", ".bin"))
        return core.compile_model(core.read_model(os.path.join(export, xml), os.path.join(export, bin_)), "CPU", OV_CONFIG)

    enc = {k.get_any_name(): v for k, v in compiled(enc_c).create_infer_request().infer(inputs).items()}
    decode = compiled(dec_c)
    assert dec_c.get("states"), "the default OpenVINO export is stateful"
    cross = {i.get_any_name(): enc[i.get_any_name()] for i in decode.inputs if i.get_any_name() in enc}
    req = decode.create_infer_request()
    tokens, token = [], start
    for pos in range(n):
        f = {**feeds([token], pos, slots), **cross, "beam_idx": np.array([0], np.int32)}
        token = int(req.infer(f)["logits"][0, -1].argmax())
        tokens.append(token)
    return tokens


def dynamo(export, meta, inputs, start, n):
    from torch.export.pt2_archive._package import load_pt2

    enc_c, dec_c, slots = components(meta)
    (file,) = {f for f in enc_c["files"] if f.endswith(".pt2")}
    programs = load_pt2(os.path.join(export, file)).exported_programs
    encoder, decode = programs["encoder"].module(), programs["decode"].module()
    enc = dict(zip([p["name"] for p in enc_c["outputs"]], encoder(**{k: torch.from_numpy(v) for k, v in inputs.items()})))
    caches = {p["name"]: torch.from_numpy(zeros(p, slots)) for p in dec_c["inputs"] if p["name"].startswith("past_key_values.")}
    first = next(iter(caches.values()))
    tokens, token = [], start
    for pos in range(n):
        f = {k: torch.from_numpy(v) for k, v in feeds([token], pos, slots).items()}
        args = [f.get(p["name"], caches.get(p["name"], enc.get(p["name"]))) for p in dec_c["inputs"]]
        logits = decode(*args)  # the static caches are updated in place, not returned
        assert first[..., pos, :].abs().sum() > 0, "the cache was not updated in place"
        token = int(logits[0, -1].argmax())
        tokens.append(token)
    return tokens


def executorch(export, meta, inputs, start, n):
    from executorch.runtime import Runtime

    enc_c, dec_c, slots = components(meta)
    (file,) = {f for f in enc_c["files"] if f.endswith(".pte")}
    program = Runtime.get().load_program(os.path.join(export, file))
    encoder, decode = program.load_method("encoder"), program.load_method("decode")
    enc = {p["name"]: v.clone() for p, v in zip(enc_c["outputs"], encoder.execute([torch.from_numpy(inputs[p["name"]]) for p in enc_c["inputs"]]))}
    caches = {p["name"]: torch.from_numpy(zeros(p, slots)) for p in dec_c["inputs"] if p["name"].startswith("past_key_values.")}
    k = len(caches)
    tokens, token = [], start
    for pos in range(n):
        f = {k: torch.from_numpy(v) for k, v in feeds([token], pos, slots).items()}
        args = [f.get(p["name"], caches.get(p["name"], enc.get(p["name"]))) for p in dec_c["inputs"]]
        # the method returns [caches, logits, caches] (the caches in input order)
        outs = decode.execute(args)
        caches = {name: v.clone() for name, v in zip(caches, outs[k + 1:])}
        token = int(outs[k][0, -1].argmax())
        tokens.append(token)
    return tokens


RUNTIMES = {"onnx": onnx, "openvino": openvino, "dynamo": dynamo, "executorch": executorch}

if __name__ == "__main__":
    main()
