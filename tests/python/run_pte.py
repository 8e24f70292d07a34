"""Runs an hfexport `.pte` export in the upstream ExecuTorch Python runtime, for the Rust test
suite.

usage: run_pte.py MODEL.pte OUT.safetensors CASE.safetensors [CASE.safetensors ...]

`Runtime.get().load_program(path).load_method("forward").execute([input_ids, attention_mask])`
on each case (the executorch 1.5.1 wheel, its portable/optimized kernels and XNNPACK backend);
the logits of case i are written to OUT as `<i>`.
"""
import sys
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402


def main():
    path, out_path, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
    method = Runtime.get().load_program(path).load_method("forward")
    outputs = {}
    for i, case in enumerate(cases):
        f = load_file(case)
        (logits,) = method.execute([f["input_ids"], f["attention_mask"]])
        outputs[str(i)] = logits.contiguous().clone()
    save_file(outputs, out_path)


if __name__ == "__main__":
    with torch.no_grad():
        main()
