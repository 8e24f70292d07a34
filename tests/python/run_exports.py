"""Runs forward exports of one checkpoint in their own runtimes and compares with its goldens,
for the Rust test suite (unseen checkpoints).

usage: run_exports.py JOBS.json OUT.json

JOBS: a list of {"golden": GOLDEN.safetensors, "exports": {LABEL: PATH}} where PATH is a
`.onnx` (onnxruntime, CPU), an OpenVINO `.xml` (CPU, f32 precision), a `.pt2`
(`torch.export.load(p).module()(input_ids=…, attention_mask=…)`) or a `.pte` (the ExecuTorch
runtime, `load_method("forward").execute([input_ids, attention_mask])`). OUT maps "<golden> <label>"
to the worst |logits - golden| over the non-padded positions of the `single` and `batch` cases.
"""
import json
import sys
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import openvino as ov  # noqa: E402
import torch  # noqa: E402
import pt2_serde  # noqa: E402,F401  (a quicker .pt2 reader)
from safetensors.numpy import load_file  # noqa: E402


def runner(path):
    if path.endswith(".onnx"):
        s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        return lambda f: s.run(["logits"], f)[0]
    if path.endswith(".xml"):
        c = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"})
        return lambda f: c(f)[c.output("logits")]
    if path.endswith(".pte"):
        from executorch.runtime import Runtime

        method = Runtime.get().load_program(path).load_method("forward")
        feed = lambda f: [torch.from_numpy(f["input_ids"]), torch.from_numpy(f["attention_mask"])]
        return lambda f: method.execute(feed(f))[0].numpy()
    m = torch.export.load(path).module()
    return lambda f: m(**{k: torch.from_numpy(v) for k, v in f.items()}).detach().numpy()


def main():
    jobs, out = sys.argv[1:3]
    result = {}
    for job in json.load(open(jobs)):
        gold = load_file(job["golden"])
        for label, path in job["exports"].items():
            run = runner(path)
            worst = 0.0
            for case in ["single", "batch"]:
                feeds = {k: gold[f"{case}.{k}"] for k in ["input_ids", "attention_mask"]}
                logits = run(feeds)
                keep = feeds["attention_mask"].astype(bool)
                d = np.abs(logits.astype(np.float32) - gold[f"{case}.logits"])[keep]
                worst = max(worst, float(np.nan_to_num(d, nan=np.inf).max()))
            result[f"{job['golden']} {label}"] = worst
    json.dump(result, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
