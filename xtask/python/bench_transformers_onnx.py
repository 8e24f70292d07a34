"""The Python side of `cargo xtask bench export-onnx --python`: exports a checkpoint to float32 ONNX
with dynamic batch and sequence through `transformers.exporters.OnnxExporter`, as a user of
transformers would (`from_pretrained`, `export`, `save_pretrained`).

usage: bench_transformers_onnx.py <checkpoint_dir> <output_dir>

Writes `model.onnx` + `model.onnx.data` (and export.json, config.json) into <output_dir>, and prints
one `BENCH <phase> <seconds>` line per phase (import, load, export, save) on stdout for the bench to
relay. The process as a whole (interpreter start and imports included) is what the bench times, as
`hfexport export` is timed from its process start.

The sample inputs are batch 2 x sequence 16: `dynamic=True` marks every axis `Dim.AUTO`, and
torch.export specialises an axis whose sample size is 1, so neither axis may be 1 in the sample.
`use_cache=False` makes the graph `(input_ids, attention_mask) -> logits`, the graph hfexport writes.
Needs torch, transformers, onnx and onnxscript (the ONNX exporter's `required_packages`).
"""

import sys
import time


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    checkpoint, output = sys.argv[1], sys.argv[2]
    t0 = time.perf_counter()

    import torch
    from transformers import AutoModelForCausalLM
    from transformers.exporters import OnnxConfig, OnnxExporter

    t1 = time.perf_counter()
    print(f"BENCH import {t1 - t0:.2f}", flush=True)

    # The checkpoint is bfloat16; the export is float32, as `hfexport export --dtype float32`.
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    model.eval()
    t2 = time.perf_counter()
    print(f"BENCH load {t2 - t1:.2f}", flush=True)

    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, model.config.vocab_size, (2, 16), generator=generator)
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "use_cache": False}
    exported = OnnxExporter().export(model, inputs, OnnxConfig(dynamic=True))
    t3 = time.perf_counter()
    print(f"BENCH export {t3 - t2:.2f}", flush=True)

    exported.save_pretrained(output)
    t4 = time.perf_counter()
    print(f"BENCH save {t4 - t3:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
