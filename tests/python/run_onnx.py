"""Runs an hfexport ONNX export the way a Python user would, for the Rust test suite.

usage: run_onnx.py [--ort-only | --check-only] MODEL.onnx OUT.safetensors CASE.safetensors [CASE.safetensors ...]

Each CASE file holds `input_ids` / `attention_mask`; the logits of case i are written to OUT as
`<i>.ort` (ONNX Runtime, CPU) and `<i>.openvino` (OpenVINO's ONNX reader, f32 precision).
Before running, `onnx.checker.check_model(full_check=True)` must accept the model.
`--ort-only` skips OpenVINO (for opsets its ONNX reader does not cover); `--check-only` runs
nothing (bfloat16 models: ONNX Runtime's CPU provider has no bfloat16 kernels).
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
import openvino as ov
from safetensors.numpy import load_file, save_file


def main():
    args = sys.argv[1:]
    mode = args.pop(0) if args[0].startswith("--") else ""
    model_path, out_path, cases = args[0], args[1], args[2:]
    onnx.checker.check_model(model_path, full_check=True)
    if mode == "--check-only":
        save_file({}, out_path)
        return
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    outputs = {}
    feeds = [load_file(c) for c in cases]
    for i, feed in enumerate(feeds):
        (logits,) = session.run(["logits"], feed)
        outputs[f"{i}.ort"] = np.ascontiguousarray(logits)
    if mode == "--ort-only":
        save_file(outputs, out_path)
        return
    core = ov.Core()
    compiled = core.compile_model(core.read_model(model_path), "CPU", {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"})
    for i, feed in enumerate(feeds):
        result = compiled(feed)
        outputs[f"{i}.openvino"] = np.ascontiguousarray(result[compiled.output("logits")])
    save_file(outputs, out_path)


if __name__ == "__main__":
    main()
