"""Greedy generation over hfexport `.pt2` generation exports in torch, the way a Python user
would write the loop, for the Rust test suite.

usage: generate_pt2.py JOBS.json OUT.json

JOBS is a list of [EXPORT_DIR, GOLDEN.safetensors]; OUT maps each EXPORT_DIR to its tokens.
Every component is a program of the export's one archive (the `.pt2` its export.json entry
lists), loaded by name: `load_pt2(path).exported_programs["decode"]` (`torch.export.load`
returns only a program named `model`). Programs are called positionally, `module()(input_ids, attention_mask, position_ids, *cache)`
(DESIGN.md), in the input order of export.json. A static cache is a list of zero tensors sized
from export.json (the one symbolic axis, `cache_len`, at its maximum) that the program updates
in place: the loop never reads a cache back, and checks after every call that the caller's
first cache tensor holds new keys at the call's slots. A growing cache is returned by each call
(the user outputs after `logits`) and passed to the next. Also checks that each program
survives `run_decompositions()` + `torch.export.save` + `torch.export.load` when it brings an
operator or input signature no program before it had (pt2_kinds.py: in this process, or in
any sharing its coverage file).
"""
import json
import os
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402
import pt2_serde  # noqa: E402,F401  (a quicker .pt2 reader)
from safetensors.numpy import load_file  # noqa: E402
from torch.export.pt2_archive._package import load_pt2  # noqa: E402
from pt2_kinds import Coverage  # noqa: E402

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def main():
    jobs, out = sys.argv[1:3]
    result = {export: generate(export, golden) for export, golden in json.load(open(jobs))}
    json.dump(result, open(out, "w"))


# the operators and input signatures of the programs that went through run_decompositions +
# save + load here
RESAVED = Coverage()


def load(export, comp, archives):
    (file,) = [f for f in comp["files"] if f.endswith(".pt2")]
    path = os.path.join(export, file)
    if path not in archives:
        archives[path] = load_pt2(path).exported_programs
    ep = archives[path][comp["name"]]
    if RESAVED.needs_retrace(path, comp["name"], comp["inputs"]):
        with tempfile.TemporaryDirectory() as tmp:
            again = os.path.join(tmp, "resaved.pt2")
            torch.export.save(ep.run_decompositions(), again)
            torch.export.load(again)
    return ep.module()


def generate(export, golden):
    meta = json.load(open(os.path.join(export, "export.json")))
    comps = {c["name"]: c for c in meta["components"]}
    gold = load_file(golden)
    prompt = gold["greedy.prompt_ids"][0].tolist()
    n_new = gold["greedy.tokens"].shape[1]
    decode_c = comps["decode"]
    archives = {}
    decode = load(export, decode_c, archives)
    prefill_c = comps.get("prefill", decode_c)
    prefill = load(export, prefill_c, archives) if "prefill" in comps else decode
    slots = meta["symbols"].get("cache_len", {}).get("max")
    cache_ports = [p for p in decode_c["inputs"] if p["name"].startswith("past_key_values.")]

    def zeros(port, past):
        shape = [int(d) if d.isdigit() else (slots if d == "cache_len" else 1 if d == "batch" else past)
                 for d in port["shape"]]
        return torch.zeros(shape, dtype=DTYPES[port["dtype"]])

    def feeds(comp, tokens, pos, caches):
        q = len(tokens)
        values = {
            "input_ids": torch.tensor([tokens], dtype=torch.int64),
            "position_ids": torch.arange(pos, pos + q, dtype=torch.int64)[None],
            "attention_mask": (torch.arange(slots)[None, :] <= (pos + torch.arange(q))[:, None])[None, None]
            if slots
            else torch.ones((1, pos + q), dtype=torch.int64),
        }
        values.update(caches)
        return [values[p["name"]] for p in comp["inputs"]]

    tokens, pos, step_in, comp, program = [], 0, prompt, prefill_c, prefill
    caches = {p["name"]: zeros(p, 0) for p in cache_ports}  # a growing cache starts empty
    first = caches[cache_ports[0]["name"]]
    while len(tokens) < n_new:
        out = program(*feeds(comp, step_in, pos, caches))
        if slots:
            logits = out
            written = first[0, :, pos : pos + len(step_in)]
            assert written.abs().sum() > 0, f"{export}: the cache was not updated in place at {pos}"
        else:
            logits, *new = out
            names = [o["name"] for o in comp["outputs"] if o["name"].startswith("present.")]
            caches = {"past_key_values." + n[len("present."):]: t for n, t in zip(names, new)}
        tokens.append(int(logits[0, -1].argmax()))
        pos += len(step_in)
        step_in, comp, program = [tokens[-1]], decode_c, decode
    return tokens


if __name__ == "__main__":
    main()
