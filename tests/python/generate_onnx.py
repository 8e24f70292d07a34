"""Greedy generation over an hfexport static-cache `decode.onnx`, the way a Python user would
write the loop, for the Rust test suite.

usage: generate_onnx.py DECODE.onnx GOLDEN.safetensors MODE OUT.json
MODE: `feed` passes every `output.<name>` back as `input.<name>`; `iobinding` binds each
input/output pair to one OrtValue, so the graph updates the cache in place (and the script
checks that the bound buffer holds the new keys after each step, with no copy back).

Every cache buffer is sized from the graph's own input metadata: one symbolic axis (the cache
length), set to the cache length of export.json. Writes {"tokens": [...]} to OUT.json.
"""
import json
import os
import sys

import numpy as np
import onnxruntime as ort
from safetensors.numpy import load_file

DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


def main():
    model, golden, mode, out = sys.argv[1:5]
    meta = json.load(open(os.path.join(os.path.dirname(model), "export.json")))
    cache_len = meta["symbols"]["cache_len"]["max"]
    gold = load_file(golden)
    prompt = gold["greedy.prompt_ids"][0].tolist()
    n_new = gold["greedy.tokens"].shape[1]
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    caches = {}
    for i in sess.get_inputs():
        if not i.name.startswith("input."):
            continue
        symbolic = [d for d in i.shape if not isinstance(d, int)]
        assert len(symbolic) == 1, f"{i.name}: expected one symbolic axis, got {i.shape}"
        shape = [d if isinstance(d, int) else cache_len for d in i.shape]
        caches[i.name[len("input."):]] = np.zeros(shape, dtype=DTYPES[i.type])

    def feeds(tokens, pos):
        q = len(tokens)
        mask = np.arange(cache_len)[None, :] <= (pos + np.arange(q))[:, None]
        return {
            "input_ids": np.array([tokens], dtype=np.int64),
            "attention_mask": mask[None, None],
            "position_ids": np.arange(pos, pos + q, dtype=np.int64)[None],
        }

    tokens, pos, step_in = [], 0, prompt
    if mode == "feed":
        while len(tokens) < n_new:
            f = feeds(step_in, pos)
            f.update({f"input.{k}": v for k, v in caches.items()})
            names = ["logits"] + [f"output.{k}" for k in caches]
            outs = dict(zip(names, sess.run(names, f)))
            caches = {k: outs[f"output.{k}"] for k in caches}
            tokens.append(int(outs["logits"][0, -1].argmax()))
            pos += len(step_in)
            step_in = [tokens[-1]]
    elif mode == "iobinding":
        values = {k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in caches.items()}
        first = next(iter(values))
        while len(tokens) < n_new:
            binding = sess.io_binding()
            for k, v in feeds(step_in, pos).items():
                binding.bind_cpu_input(k, v)
            for k, v in values.items():
                binding.bind_ortvalue_input(f"input.{k}", v)
                binding.bind_ortvalue_output(f"output.{k}", v)
            binding.bind_output("logits")
            sess.run_with_iobinding(binding)
            logits = binding.copy_outputs_to_cpu()[-1]  # bound last
            # in place: the bound buffer itself now holds this step's keys at its slots
            written = values[first].numpy()[0, :, pos : pos + len(step_in)]
            assert np.abs(written).sum() > 0, f"step at position {pos}: {first} was not written in place"
            tokens.append(int(logits[0, -1].argmax()))
            pos += len(step_in)
            step_in = [tokens[-1]]
    else:
        raise SystemExit(f"unknown mode {mode}")
    json.dump({"tokens": tokens}, open(out, "w"))


if __name__ == "__main__":
    main()
