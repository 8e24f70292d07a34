"""Runs hfexport `.pt2` exports the way a Python user would, for the Rust test suite.

usage: run_pt2.py JOBS.json KINDS.json

JOBS: a list of {"model": MODEL.pt2, "out": OUT.safetensors, "cases": [CASE.safetensors, ...]},
all run in this one process (one torch import for every export). For each job,
`torch.export.load(path).module()(input_ids=…, attention_mask=…)` on each case; the logits of
case i are written to OUT as `<i>`. Then the program must be a well-formed ExportedProgram:
`run_decompositions()`, `torch.export.save` and `torch.export.load` again, and the reloaded
program must give the same logits (written as `<i>.resaved`), for the programs that bring an
operator or input signature no earlier one had (pt2_kinds.py): KINDS maps each MODEL to itself
when it was retraced, else to the last MODEL retraced before it. A job that fails stops the run
with an error naming its program.
"""
import json
import os
import sys
import tempfile
import warnings

from pt2_kinds import Coverage

warnings.filterwarnings("ignore")
import torch  # noqa: E402
import pt2_serde  # noqa: E402,F401  (a quicker .pt2 reader)
from safetensors.torch import load_file, save_file  # noqa: E402



def needs_retrace(coverage, path):
    """Whether a forward export's one program, `model`, brings something new to `coverage`."""
    meta = json.load(open(os.path.join(os.path.dirname(path), "export.json")))
    (comp,) = meta["components"]
    return coverage.needs_retrace(path, comp["name"], comp["inputs"])


def run(path, out_path, cases, retrace):
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
        module = ep.module()
        for i, f in enumerate(feeds):
            outputs[str(i)] = module(**f).contiguous()
        if not retrace:
            save_file(outputs, out_path)
            return
        with tempfile.TemporaryDirectory() as tmp:
            again = os.path.join(tmp, "resaved.pt2")
            torch.export.save(ep.run_decompositions(), again)
            reloaded = torch.export.load(again).module()
            for i, f in enumerate(feeds):
                outputs[f"{i}.resaved"] = reloaded(**f).contiguous()
    save_file(outputs, out_path)


def main():
    jobs, kinds_path = sys.argv[1:]
    coverage, kinds, last = Coverage(), {}, None
    for job in json.load(open(jobs)):
        model = job["model"]
        retrace = needs_retrace(coverage, model)
        last = model if retrace else last
        kinds[model] = last
        try:
            run(model, job["out"], job["cases"], retrace)
        except Exception as e:
            raise RuntimeError(f"{model}: {e}") from e
    json.dump(kinds, open(kinds_path, "w"))


if __name__ == "__main__":
    main()
