"""Greedy generation from generation exports of random checkpoints, against transformers'
own `generate`, for the Rust test suite (unseen checkpoints).

usage: unseen_generation.py JOBS.json OUT.json

JOBS: a list of {"checkpoint": DIR, "exports": {LABEL: EXPORT_DIR}}. For each checkpoint the
reference is transformers' greedy `generate(use_cache=False)` of 8 new tokens (float32, eager
attention) from the first 5 ids of its `single` golden input: the model's own forward, token by
token. (With its cache, transformers 5.23 can disagree with its own model: `DynamicCache(config)`
builds sliding-window layers from a `sliding_window` key that Llama's attention ignores, so a
cached `generate` forgets keys the model attends to. The cached tokens are reported too, as
`cached`, so the test can say when that happens.) The reference is it is written to `<DIR>/greedy.safetensors` as
`greedy.prompt_ids` / `greedy.tokens`, the keys the format loops read. Each export then runs the
plain Python loop of its format: `generate_onnx.static_loop` (fed back), `generate_openvino.generate`,
`generate_pt2.generate` (caches mutated in place) and `generate_pte.generate` (the ExecuTorch
runtime, the updated caches fed back). OUT maps "<DIR> <LABEL>" to
{"got": [...], "want": [...], "cached": [...], "unchecked": null or why no reference exists (dynamic
NTK rope past max_position_embeddings where the cached and uncached generate disagree)}.
"""
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate_onnx  # noqa: E402
import generate_openvino  # noqa: E402
import generate_pt2  # noqa: E402
import generate_pte  # noqa: E402
import openvino as ov  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from fixture_goldens import load_causal_lm  # noqa: E402

NEW_TOKENS = 8


def reference(checkpoint):
    gold = load_file(os.path.join(checkpoint, "golden.safetensors"))
    prompt = gold["single.input_ids"][:, :5]
    model = load_causal_lm(checkpoint)
    def greedy(use_cache):
        with torch.no_grad():
            out = model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                max_new_tokens=NEW_TOKENS,
                min_new_tokens=NEW_TOKENS,
                do_sample=False,
                pad_token_id=0,
                # no EOS: `min_new_tokens` would otherwise mask it, which a plain argmax loop does not
                eos_token_id=None,
                use_cache=use_cache,
            )
        return out[:, prompt.shape[1]:]

    want, cached = greedy(False), greedy(True)
    unchecked = None
    total = prompt.shape[1] + NEW_TOKENS
    if dynamic_rope(model.config) and total > model.config.max_position_embeddings and want.tolist() != cached.tolist():
        # dynamic NTK past max_position_embeddings rescales the frequencies as the sequence grows:
        # uncached, every step rotates every key anew; cached (transformers' own cache, and every
        # export's), each key keeps its step's frequencies; with a sliding cache transformers drops
        # keys as well. No one sequence is transformers' answer here
        unchecked = (
            f"dynamic NTK rope past max_position_embeddings ({model.config.max_position_embeddings} < {total} "
            f"positions): transformers' cached and uncached generate disagree"
        )
    path = os.path.join(checkpoint, "greedy.safetensors")
    save_file({"greedy.prompt_ids": prompt.contiguous(), "greedy.tokens": want.contiguous()}, path)
    return path, prompt[0].tolist(), want[0].tolist(), cached[0].tolist(), unchecked


def dynamic_rope(config):
    """Whether the rotary embedding is dynamic NTK (`rope_parameters` as transformers read it)."""
    rope = getattr(config, "rope_parameters", None) or {}
    return isinstance(rope, dict) and rope.get("rope_type") == "dynamic"


def run(export, golden, prompt):
    meta = json.load(open(os.path.join(export, "export.json")))
    if meta["format"] == "onnx":
        decode = generate_onnx.session(export, "decode")
        names = [c["name"] for c in meta["components"]]
        prefill = generate_onnx.session(export, "prefill") if "prefill" in names else decode
        slots = meta["symbols"]["cache_len"]["max"]
        return generate_onnx.static_loop(prefill, decode, slots, prompt, NEW_TOKENS, "feed")
    if meta["format"] == "openvino":
        return generate_openvino.generate(ov.Core(), export, golden)
    if meta["format"] == "executorch":
        return generate_pte.generate(export, golden)
    return generate_pt2.generate(export, golden)


def main():
    jobs, out = sys.argv[1:3]
    result = {}
    for job in json.load(open(jobs)):
        golden, prompt, want, cached, unchecked = reference(job["checkpoint"])
        for label, export in job["exports"].items():
            got = run(export, golden, prompt)
            entry = {"got": got, "want": want, "cached": cached, "unchecked": unchecked}
            result[f"{job['checkpoint']} {label}"] = entry
    json.dump(result, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
