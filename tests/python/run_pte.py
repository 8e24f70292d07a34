"""Runs hfexport `.pte` exports in the upstream ExecuTorch Python runtime, for the Rust test
suite.

usage: run_pte.py JOBS.json

JOBS: a list of {"program": MODEL.pte, "out": OUT.safetensors, "cases": [CASE.safetensors, ...]},
all run in this one process (the runtime is imported once for every export). For each job,
`Runtime.get().load_program(path).load_method("forward").execute([input_ids, attention_mask])`
on each case (the executorch 1.5.1 wheel, its portable/optimized kernels and XNNPACK backend);
the logits of case i are written to OUT as `<i>`. A job that fails stops the run with an error
naming its program (the runtime's own message chained below it).
"""
import json
import sys
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402


def run(path, out_path, cases):
    method = Runtime.get().load_program(path).load_method("forward")
    outputs = {}
    for i, case in enumerate(cases):
        f = load_file(case)
        (logits,) = method.execute([f["input_ids"], f["attention_mask"]])
        outputs[str(i)] = logits.contiguous().clone()
    save_file(outputs, out_path)


def main():
    (jobs,) = sys.argv[1:]
    for job in json.load(open(jobs)):
        try:
            run(job["program"], job["out"], job["cases"])
        except Exception as e:
            raise RuntimeError(f"{job['program']}: {e}") from e


if __name__ == "__main__":
    with torch.no_grad():
        main()
