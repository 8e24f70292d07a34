"""Runs an hfexport `.pt2` export the way a Python user would, for the Rust test suite.

usage: run_pt2.py MODEL.pt2 OUT.safetensors CASE.safetensors [CASE.safetensors ...]

`torch.export.load(path).module()(input_ids=…, attention_mask=…)` on each case; the logits of
case i are written to OUT as `<i>`. Then the program must be a well-formed ExportedProgram:
`run_decompositions()`, `torch.export.save` and `torch.export.load` again, and the reloaded
program must give the same logits (written as `<i>.resaved`).
"""
import os
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402


def main():
    path, out_path, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
    try:
        ep = torch.export.load(path)
    except RuntimeError:
        # torch.export.load hides the cause behind a generic message; this shows it
        from torch.export.pt2_archive._package import load_pt2

        load_pt2(path)
        raise
    feeds = [load_file(c) for c in cases]
    outputs = {}
    with torch.no_grad():
        for i, f in enumerate(feeds):
            outputs[str(i)] = ep.module()(**f).contiguous()
        with tempfile.TemporaryDirectory() as tmp:
            again = os.path.join(tmp, "resaved.pt2")
            torch.export.save(ep.run_decompositions(), again)
            reloaded = torch.export.load(again).module()
            for i, f in enumerate(feeds):
                outputs[f"{i}.resaved"] = reloaded(**f).contiguous()
    save_file(outputs, out_path)


if __name__ == "__main__":
    main()
