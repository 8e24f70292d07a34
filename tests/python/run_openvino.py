"""Runs an hfexport OpenVINO IR export the way a Python user would, for the Rust test suite.

usage: run_openvino.py MODEL.xml OUT.safetensors REPORT.json CASE.safetensors [CASE.safetensors ...]

Reads the IR with `openvino.Core().read_model` (stdout/stderr of the read are captured and must
be empty: no warnings), compiles it on CPU with INFERENCE_PRECISION_HINT=f32, and writes the
logits of case i (`input_ids` / `attention_mask`) to OUT as `<i>`. REPORT gets what the reader
made of the file: every op as `type:opsetN` and the partial shape of every input and output,
and the layer types of the CPU plugin's compiled model (`RMS`, `RoPE`: fusions that matched).
"""
import json
import os
import sys
import tempfile

import numpy as np
import openvino as ov
from safetensors.numpy import load_file, save_file


def read_quietly(core, path):
    """read_model with fds 1 and 2 redirected; returns the model and whatever was printed."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            model = core.read_model(path)
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for f in saved:
                os.close(f)
        tmp.seek(0)
        return model, tmp.read().decode(errors="replace")


def main():
    model_path, out_path, report_path, cases = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    core = ov.Core()
    model, printed = read_quietly(core, model_path)
    model.validate_nodes_and_infer_types()
    report = {
        "printed": printed,
        "ops": sorted({f"{op.get_type_name()}:{op.get_type_info().version_id}" for op in model.get_ops()}),
        "inputs": {i.get_any_name(): str(i.get_partial_shape()) for i in model.inputs},
        "outputs": {o.get_any_name(): str(o.get_partial_shape()) for o in model.outputs},
    }
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"})
    report["compiled"] = sorted({op.get_rt_info()["layerType"].astype(str) for op in compiled.get_runtime_model().get_ops()})
    json.dump(report, open(report_path, "w"), indent=1)
    outputs = {}
    for i, case in enumerate(cases):
        result = compiled(load_file(case))
        outputs[str(i)] = np.ascontiguousarray(result[compiled.output("logits")])
    save_file(outputs, out_path)


if __name__ == "__main__":
    main()
