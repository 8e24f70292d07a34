"""Greedy generation over an hfexport OpenVINO generation export, the way a Python user would
write the loop, for the Rust test suite.

usage: generate_openvino.py JOBS.json OUT.json

JOBS is a list of [EXPORT_DIR, GOLDEN.safetensors]; OUT maps each EXPORT_DIR to its tokens.

Stateful exports (components with `states`): one `decode` model whose caches live in the infer
request (a fresh request starts from zeros); the prompt goes through one call when the query
length is symbolic, else token by token, with `beam_idx` = [0]. Stateless exports: the ONNX-style
`past_key_values.<name>`/`present.<name>` pairs, each output fed back as the next input; static caches are
sized from the model's own input metadata (one dynamic axis, set to `cache_len`'s maximum).
Compiled with INFERENCE_PRECISION_HINT=f32, KV_CACHE_PRECISION=f32 and DYNAMIC_QUANTIZATION_GROUP_SIZE=0.
"""
import json
import os
import sys

import numpy as np
import openvino as ov
from safetensors.numpy import load_file

CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}
DTYPES = {ov.Type.f32: np.float32, ov.Type.f16: np.float16}


def main():
    jobs, out = sys.argv[1:3]
    core = ov.Core()
    result = {export: generate(core, export, golden) for export, golden in json.load(open(jobs))}
    json.dump(result, open(out, "w"))


def generate(core, export, golden):
    meta = json.load(open(os.path.join(export, "export.json")))
    comps = {c["name"]: c for c in meta["components"]}
    gold = load_file(golden)
    prompt = gold["greedy.prompt_ids"][0].tolist()
    n_new = gold["greedy.tokens"].shape[1]

    def compiled(name):
        # the components share one weights file: read_model(xml, bin) with the .bin export.json lists
        files = comps[name]["files"]
        xml, bin_ = (next(f for f in files if f.endswith(ext)) for ext in (".xml", ".bin"))
        model = core.read_model(os.path.join(export, xml), os.path.join(export, bin_))
        return core.compile_model(model, "CPU", CONFIG)

    decode = compiled("decode")
    slots = meta["symbols"].get("cache_len", {}).get("max")
    names = {i.get_any_name() for i in decode.inputs}
    stateful = bool(comps["decode"].get("states"))
    assert stateful == ("beam_idx" in names), f"states {comps['decode'].get('states')} vs inputs {names}"

    def feeds(tokens, pos):
        q = len(tokens)
        f = {"input_ids": np.array([tokens], np.int64), "position_ids": np.arange(pos, pos + q, dtype=np.int64)[None]}
        if slots:
            f["attention_mask"] = (np.arange(slots)[None, :] <= (pos + np.arange(q))[:, None])[None, None]
        else:
            f["attention_mask"] = np.ones((1, pos + q), np.int64)
        return f

    fixed_q = decode.input("input_ids").get_partial_shape()[1]
    one_by_one = fixed_q.is_static and fixed_q.get_length() == 1
    tokens = []
    if stateful:
        req = decode.create_infer_request()
        pos, step_in = 0, prompt
        while len(tokens) < n_new:
            chunks = [[t] for t in step_in] if one_by_one else [step_in]
            for c in chunks:
                f = feeds(c, pos)
                f["beam_idx"] = np.array([0], np.int32)
                logits = req.infer(f)["logits"]
                pos += len(c)
            tokens.append(int(logits[0, -1].argmax()))
            step_in = [tokens[-1]]
    else:
        prefill = compiled("prefill") if "prefill" in comps else decode
        caches = {}
        for i in decode.inputs:
            n = i.get_any_name()
            if n.startswith("past_key_values."):
                ps = i.get_partial_shape()
                if slots:
                    dyn = [k for k in range(ps.rank.get_length()) if ps[k].is_dynamic]
                    assert len(dyn) == 1, f"{n}: expected one dynamic axis, got {ps}"
                    shape = [slots if ps[k].is_dynamic else ps[k].get_length() for k in range(ps.rank.get_length())]
                else:  # a growing cache starts empty
                    shape = [1 if k == 0 else (0 if ps[k].is_dynamic else ps[k].get_length()) for k in range(ps.rank.get_length())]
                caches[n[len("past_key_values."):]] = np.zeros(shape, DTYPES[i.get_element_type()])
        pos, step_in, model = 0, prompt, prefill
        while len(tokens) < n_new:
            f = feeds(step_in, pos)
            takes = {i.get_any_name() for i in model.inputs}
            f = {k: v for k, v in f.items() if k in takes}
            f.update({f"past_key_values.{k}": v for k, v in caches.items() if f"past_key_values.{k}" in takes})
            got = model.create_infer_request().infer(f)
            caches = {k: got[f"present.{k}"].copy() for k in caches}
            tokens.append(int(got["logits"][0, -1].argmax()))
            pos += len(step_in)
            step_in, model = [tokens[-1]], decode
    return tokens


if __name__ == "__main__":
    main()
