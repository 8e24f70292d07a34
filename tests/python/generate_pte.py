"""Greedy generation over hfexport `.pte` generation exports in the upstream ExecuTorch Python
runtime, the way a Python user writes the loop, for the Rust test suite.

usage: generate_pte.py JOBS.json OUT.json

JOBS is a list of [EXPORT_DIR, GOLDEN.safetensors]; OUT maps each EXPORT_DIR to its tokens.
The export is one program (the `.pte` export.json lists for every component) with a method per
component, named after it (`prefill`, `decode`). Each method takes `[input_ids, attention_mask,
position_ids, *cache]` and returns `[cache×N, logits, cache×N]` (DESIGN.md): the caches start as
zeros sized from export.json (`cache_len` at its maximum) and the last N outputs are fed back as
the next call's caches. The first N outputs must equal the last N (both are the caches updated
in place).

A default (`stateful`) export is ExecuTorch's LLM-runner layout instead: one method `forward`
taking `[input_ids, cache_position]` and returning `[logits]`, its caches the program's own
buffers (export.json lists them as `states`), beside the runner's constant methods; the prompt
goes in one call, then one token a call, each at its slots.
"""
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def main():
    jobs, out = sys.argv[1:3]
    result = {export: generate(export, golden) for export, golden in json.load(open(jobs))}
    json.dump(result, open(out, "w"))


def generate(export, golden):
    meta = json.load(open(os.path.join(export, "export.json")))
    comps = {c["name"]: c for c in meta["components"]}
    gold = load_file(golden)
    prompt = gold["greedy.prompt_ids"][0].tolist()
    n_new = gold["greedy.tokens"].shape[1]
    (file,) = {f for c in comps.values() for f in c["files"] if f.endswith(".pte")}
    program = Runtime.get().load_program(os.path.join(export, file))
    if comps["decode"]["positions"] == "slots":
        return generate_at_slots(program, prompt, n_new)
    assert program.method_names == set(comps), f"methods {program.method_names}, components {set(comps)}"
    methods = {n: program.load_method(n) for n in comps}
    decode_c = comps["decode"]
    slots = meta["symbols"]["cache_len"]["max"]
    cache_ports = [p for p in decode_c["inputs"] if p["name"].startswith("past_key_values.")]
    n = len(cache_ports)
    caches = [torch.zeros([slots if d == "cache_len" else int(d) for d in p["shape"]], dtype=DTYPES[p["dtype"]])
              for p in cache_ports]

    def call(name, tokens, pos):
        nonlocal caches
        q = len(tokens)
        feeds = {
            "input_ids": torch.tensor([tokens], dtype=torch.int64),
            "position_ids": torch.arange(pos, pos + q, dtype=torch.int64)[None],
            "attention_mask": (torch.arange(slots)[None, :] <= (pos + torch.arange(q))[:, None])[None, None],
        }
        inputs = [feeds[p["name"]] for p in comps[name]["inputs"] if not p["name"].startswith("past_key_values.")]
        outs = methods[name].execute(inputs + caches)
        assert len(outs) == 2 * n + 1, f"{name}: {len(outs)} outputs"
        for a, b in zip(outs[:n], outs[n + 1:]):
            assert torch.equal(a, b), "the mutated caches and the returned caches differ"
        assert outs[n + 1][..., pos:pos + q, :].abs().sum() > 0, "the call wrote no keys at its slots"
        caches = [c.clone() for c in outs[n + 1:]]
        return outs[n][0, -1]

    one_token = "prefill" not in comps and decode_c["inputs"][0]["shape"][1] == "1"
    if "prefill" in comps:
        logits = call("prefill", prompt, 0)
    elif one_token:
        for i, t in enumerate(prompt):
            logits = call("decode", [t], i)
    else:
        logits = call("decode", prompt, 0)
    tokens, pos = [], len(prompt)
    while True:
        tokens.append(int(torch.argmax(logits)))
        if len(tokens) == n_new:
            return tokens
        logits = call("decode", [tokens[-1]], pos)
        pos += 1


def generate_at_slots(program, prompt, n_new):
    """Greedy tokens through the LLM-runner layout's `forward(input_ids, cache_position)`, the
    constant methods read as the runners read them."""
    constant = {name: program.load_method(name).execute([]) for name in ("get_max_seq_len", "get_max_context_len")}
    assert len(prompt) <= constant["get_max_seq_len"][0] <= constant["get_max_context_len"][0], constant
    forward = program.load_method("forward")

    def call(tokens, pos):
        slots = torch.arange(pos, pos + len(tokens), dtype=torch.int64)
        (logits,) = forward.execute([torch.tensor([tokens], dtype=torch.int64), slots])
        return logits[0, -1]

    logits, tokens = call(prompt, 0), []
    while True:
        tokens.append(int(torch.argmax(logits)))
        if len(tokens) == n_new:
            return tokens
        logits = call([tokens[-1]], len(prompt) + len(tokens) - 1)


if __name__ == "__main__":
    with torch.no_grad():
        main()
