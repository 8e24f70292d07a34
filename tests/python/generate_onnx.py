"""Greedy generation over an hfexport generation export, the way a Python user would write the
loop, for the Rust test suite.

usage: generate_onnx.py EXPORT_DIR GOLDEN.safetensors MODE OUT.json

The export holds `decode` (static cache, multi-token decode), or `prefill` + `decode` (static
cache with a one-token decode, or a growing cache). The prompt goes through one call (of
`prefill` if there is one), then one token a step through `decode`.
MODE: `feed` passes every `present.<name>` back as `past_key_values.<name>`; `iobinding` (static caches
only) binds each input/output pair to one OrtValue, so the graph updates the cache in place,
and checks after each step that the bound buffer holds the new keys, with no copy back;
`multitoken` (static cache, multi-token decode) checks that three tokens in one call after the
prompt give the logits (1e-4) and caches of three single-token calls.
Static cache buffers are sized from the graph's own input metadata: one symbolic axis, the
cache length, set to its maximum in export.json. Writes {"tokens": [...]} to OUT.json.
"""
import json
import os
import sys

import numpy as np
import onnxruntime as ort
from safetensors.numpy import load_file

DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


def session(export, name):
    """The component `name`'s graph, as export.json lists its file."""
    meta = json.load(open(os.path.join(export, "export.json")))
    comp = next(c for c in meta["components"] if c["name"] == name)
    graph = next(f for f in comp["files"] if f.endswith(".onnx"))
    return ort.InferenceSession(os.path.join(export, graph), providers=["CPUExecutionProvider"])


def main():
    export, golden, mode, out = sys.argv[1:5]
    meta = json.load(open(os.path.join(export, "export.json")))
    names = [c["name"] for c in meta["components"]]
    gold = load_file(golden)
    prompt = gold["greedy.prompt_ids"][0].tolist()
    n_new = gold["greedy.tokens"].shape[1]
    decode = session(export, "decode")
    prefill = session(export, "prefill") if "prefill" in names else decode
    if mode == "multitoken":
        tokens = multitoken_check(decode, meta["symbols"]["cache_len"]["max"], prompt)
    elif "cache_len" in meta["symbols"]:
        tokens = static_loop(prefill, decode, meta["symbols"]["cache_len"]["max"], prompt, n_new, mode)
    else:
        assert mode == "feed", "a growing cache changes shape every step: feed mode only"
        tokens = growing_loop(decode, prompt, n_new)
    json.dump({"tokens": tokens}, open(out, "w"))


def static_loop(prefill, decode, cache_len, prompt, n_new, mode):
    caches = {}
    for i in decode.get_inputs():
        if i.name.startswith("past_key_values."):
            symbolic = [d for d in i.shape if not isinstance(d, int)]
            assert len(symbolic) == 1, f"{i.name}: expected one symbolic axis, got {i.shape}"
            shape = [d if isinstance(d, int) else cache_len for d in i.shape]
            caches[i.name[len("past_key_values."):]] = np.zeros(shape, dtype=DTYPES[i.type])

    def feeds(tokens, pos):
        q = len(tokens)
        mask = np.arange(cache_len)[None, :] <= (pos + np.arange(q))[:, None]
        return {
            "input_ids": np.array([tokens], dtype=np.int64),
            "attention_mask": mask[None, None],
            "position_ids": np.arange(pos, pos + q, dtype=np.int64)[None],
        }

    values = {k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in caches.items()}
    first = next(iter(caches))
    tokens, pos, step_in, sess = [], 0, prompt, prefill
    while len(tokens) < n_new:
        if mode == "feed":
            f = feeds(step_in, pos)
            f.update({f"past_key_values.{k}": v for k, v in caches.items()})
            outs = ["logits"] + [f"present.{k}" for k in caches]
            got = dict(zip(outs, sess.run(outs, f)))
            caches = {k: got[f"present.{k}"] for k in caches}
            logits = got["logits"]
        elif mode == "iobinding":
            binding = sess.io_binding()
            for k, v in feeds(step_in, pos).items():
                binding.bind_cpu_input(k, v)
            for k, v in values.items():
                binding.bind_ortvalue_input(f"past_key_values.{k}", v)
                binding.bind_ortvalue_output(f"present.{k}", v)
            binding.bind_output("logits")
            sess.run_with_iobinding(binding)
            logits = binding.copy_outputs_to_cpu()[-1]  # bound last
            # in place: the bound buffer itself now holds this step's keys at its slots
            written = values[first].numpy()[0, :, pos : pos + len(step_in)]
            assert np.abs(written).sum() > 0, f"step at position {pos}: {first} was not written in place"
        else:
            raise SystemExit(f"unknown mode {mode}")
        tokens.append(int(logits[0, -1].argmax()))
        pos += len(step_in)
        step_in, sess = [tokens[-1]], decode
    return tokens


def multitoken_check(decode, cache_len, prompt):
    caches = {
        i.name[len("past_key_values."):]: np.zeros([d if isinstance(d, int) else cache_len for d in i.shape], DTYPES[i.type])
        for i in decode.get_inputs()
        if i.name.startswith("past_key_values.")
    }
    outs = ["logits"] + [f"present.{k}" for k in caches]

    def call(tokens, pos, caches):
        q = len(tokens)
        f = {
            "input_ids": np.array([tokens], dtype=np.int64),
            "attention_mask": (np.arange(cache_len)[None, :] <= (pos + np.arange(q))[:, None])[None, None],
            "position_ids": np.arange(pos, pos + q, dtype=np.int64)[None],
        }
        f.update({f"past_key_values.{k}": v for k, v in caches.items()})
        got = dict(zip(outs, decode.run(outs, f)))
        return got["logits"], {k: got[f"present.{k}"] for k in caches}

    _, after_prompt = call(prompt, 0, caches)
    more = [7, 64, 21]
    singles, c1 = [], after_prompt
    for i, t in enumerate(more):
        logits, c1 = call([t], len(prompt) + i, c1)
        singles.append(logits[0, -1])
    together, c3 = call(more, len(prompt), after_prompt)
    worst = max(float(np.abs(together[0, i] - singles[i]).max()) for i in range(3))
    assert worst < 1e-4, f"three tokens at once differ from three steps by {worst}"
    worst_cache = max(float(np.abs(c1[k] - c3[k]).max()) for k in caches)
    assert worst_cache < 1e-5, f"caches differ by {worst_cache}"
    return [int(together[0, -1].argmax())]


def growing_loop(decode, prompt, n_new):
    """The prompt over an empty past (batch 1, no positions), then a token per call."""
    caches = {
        i.name[len("past_key_values."):]: np.zeros([1 if d == "batch" else 0 if isinstance(d, str) else d
                                                   for d in i.shape], DTYPES[i.type])
        for i in decode.get_inputs()
        if i.name.startswith("past_key_values.")
    }
    outs = ["logits"] + [f"present.{k}" for k in caches]
    step, pos, tokens = prompt, 0, []
    while len(tokens) < n_new:
        f = {
            "input_ids": np.array([step], dtype=np.int64),
            "attention_mask": np.ones((1, pos + len(step)), dtype=np.int64),
            "position_ids": np.arange(pos, pos + len(step), dtype=np.int64)[None],
        }
        f.update({f"past_key_values.{k}": v for k, v in caches.items()})
        got = dict(zip(outs, decode.run(outs, f)))
        caches = {k: got[f"present.{k}"] for k in caches}
        tokens.append(int(got["logits"][0, -1].argmax()))
        pos += len(step)
        step = [tokens[-1]]
    return tokens


if __name__ == "__main__":
    main()
