"""Greedy generation over hfexport vision-language exports (LLaVA: `image_encoder` +
`multi_modal_projector` + static-cache `decode`; Qwen2-VL: `image_encoder` + M-RoPE `decode`) in
the upstream Python runtimes, the way a Python user writes the loop, for the Rust test suite.

usage: generate_vision.py JOBS.json OUT.json

JOBS is a list of [EXPORT_DIR, GOLDEN.safetensors, N] where GOLDEN is a random case's
(tests/python/random_llava.py, random_qwen2vl.py): the image processor's pixel values, the
expanded prompt and, for Qwen2-VL, the image grids and `get_rope_index`'s positions. OUT maps each
EXPORT_DIR to its N tokens. Each image runs through the image components alone (Qwen2-VL's
per-patch positions from transformers' `get_vision_position_ids`, frame ids from the grid); the
rows of all images become `image_embeds`, and Qwen2-VL's positions, extended past the prompt by
max + 1 + k, `rope_positions`: both fed to every decode call beside `input_ids`,
`attention_mask` (bool [1, 1, q, cache_len]), `position_ids` and the caches. The prompt is one
call, then one token a step. Per format as tests/python/generate_seq2seq.py: onnxruntime
sessions, the caches fed back; OpenVINO's stateful `decode` (KV_CACHE_PRECISION=f32); the `.pt2`
programs of `load_pt2`, positionally, the static caches updated in place; the `.pte` methods,
positionally, returning [caches, logits, caches].
"""
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import pt2_serde  # noqa: E402,F401  (a quicker .pt2 reader)
from safetensors.numpy import load_file  # noqa: E402
from static_cache import OV_CONFIG, feeds, zeros  # noqa: E402
from transformers.vision_utils import get_vision_position_ids  # noqa: E402


def onnx_file(component):
    """A component's graph as export.json lists it (`onnx/<name>.onnx`)."""
    return next(f for f in component["files"] if f.endswith(".onnx"))


def main():
    jobs, out = sys.argv[1:3]
    result = {}
    for export, golden, n in json.load(open(jobs)):
        meta = json.load(open(os.path.join(export, "export.json")))
        result[export] = generate(export, meta, load_file(golden), n)
    json.dump(result, open(out, "w"))


def image_feeds(gold, merge):
    """Each image's feeds of the first image component: LLaVA's pixel values [1, 3, H, W];
    Qwen2-VL's patch rows, positions and frame ids, grouped [tokens, merge^2, ...]."""
    if "image_grid_thw" not in gold:
        return [{"pixel_values": gold[f"pixel_values.{k}"]} for k in ("exact", "wide")]
    feeds, at = [], 0
    g = merge * merge
    for t, h, w in gold["image_grid_thw"].tolist():
        n = t * h * w
        rows = gold["pixel_values"][at:at + n]
        at += n
        pos = get_vision_position_ids(torch.tensor([[t, h, w]]), merge).numpy().astype(np.int64)
        frames = np.repeat(np.arange(t, dtype=np.int64), h * w)
        feeds.append({
            "pixel_values": np.ascontiguousarray(rows.reshape(n // g, g, -1)),
            "patch_positions": np.ascontiguousarray(pos.reshape(n // g, g, 2)),
            "frame_ids": np.ascontiguousarray(frames.reshape(n // g, g)),
        })
    return feeds


def fixed_inputs(gold, rows, slots):
    fixed = {"image_embeds": np.concatenate(rows, axis=0)}
    if "rope_positions" in gold:
        rope = gold["rope_positions"]
        extra = rope.max() + 1 + np.arange(slots - rope.shape[1], dtype=np.int64)
        fixed["rope_positions"] = np.ascontiguousarray(np.concatenate([rope, np.tile(extra, (3, 1))], axis=1))
    return fixed




def generate(export, meta, gold, n):
    comps = meta["components"]
    image_comps = [c for c in comps if c["role"] in ("image_encoder", "projector")]
    decode = next(c for c in comps if c["role"] == "decode")
    slots = meta["symbols"]["cache_len"]["max"]
    config = json.load(open(os.path.join(export, "config.json")))
    merge = config.get("vision_config", {}).get("spatial_merge_size", 1)
    run_image, loop = RUNTIMES[meta["format"]](export, image_comps, decode, slots)
    rows = []
    for feed in image_feeds(gold, merge):
        for c in image_comps:
            out = run_image(c, feed)
            feed = {"image_features": out["image_features"]} if "image_features" in out else out
        rows.append(out["image_embeds"].reshape(-1, out["image_embeds"].shape[-1]))
    return loop(gold["expanded"].tolist(), fixed_inputs(gold, rows, slots), n)


def greedy(call, prompt, n):
    """`call(tokens, pos)` -> the logits' last row; the prompt in one call, then a token a step."""
    tokens, feed, pos = [], prompt, 0
    while len(tokens) < n:
        token = int(call(feed, pos).argmax())
        tokens.append(token)
        pos += len(feed)
        feed = [token]
    return tokens


def onnx(export, image_comps, decode, slots):
    import onnxruntime as ort

    sess = {c["name"]: ort.InferenceSession(os.path.join(export, onnx_file(c))) for c in [*image_comps, decode]}

    def run_image(c, feed):
        s = sess[c["name"]]
        return dict(zip([o.name for o in s.get_outputs()], s.run(None, feed)))

    def loop(prompt, fixed, n):
        d = sess[decode["name"]]
        caches = {p["name"]: zeros(p, slots) for p in decode["inputs"] if p["name"].startswith("past_key_values.")}
        outs = [o.name for o in d.get_outputs()]

        def call(tokens, pos):
            nonlocal caches
            r = dict(zip(outs, d.run(None, {**feeds(tokens, pos, slots), **caches, **fixed})))
            caches = {"past_key_values." + k[len("present."):]: v for k, v in r.items() if k.startswith("present.")}
            return r["logits"][0, -1]

        return greedy(call, prompt, n)

    return run_image, loop


def openvino(export, image_comps, decode, slots):
    import openvino as ov

    core = ov.Core()

    def compiled(c):
        xml, bin_ = (next(f for f in c["files"] if f.endswith(ext)) for ext in (".xml", ".bin"))
        return core.compile_model(core.read_model(os.path.join(export, xml), os.path.join(export, bin_)), "CPU", OV_CONFIG)

    def run_image(c, feed):
        return {k.get_any_name(): v for k, v in compiled(c).create_infer_request().infer(feed).items()}

    def loop(prompt, fixed, n):
        assert decode.get("states"), "the default OpenVINO export is stateful"
        req = compiled(decode).create_infer_request()

        def call(tokens, pos):
            f = {**feeds(tokens, pos, slots), **fixed, "beam_idx": np.array([0], np.int32)}
            return req.infer(f)["logits"][0, -1]

        return greedy(call, prompt, n)

    return run_image, loop


def dynamo(export, image_comps, decode, slots):
    from torch.export.pt2_archive._package import load_pt2

    (file,) = {f for f in decode["files"] if f.endswith(".pt2")}
    programs = load_pt2(os.path.join(export, file)).exported_programs

    def run_image(c, feed):
        with torch.no_grad():
            out = programs[c["name"]].module()(**{k: torch.from_numpy(v) for k, v in feed.items()})
        out = out if isinstance(out, (tuple, list)) else (out,)
        return {p["name"]: v.numpy() for p, v in zip(c["outputs"], out)}

    def loop(prompt, fixed, n):
        module = programs[decode["name"]].module()
        caches = {p["name"]: torch.from_numpy(zeros(p, slots)) for p in decode["inputs"] if p["name"].startswith("past_key_values.")}
        held = {k: torch.from_numpy(v) for k, v in fixed.items()}

        def call(tokens, pos):
            f = {k: torch.from_numpy(v) for k, v in feeds(tokens, pos, slots).items()}
            with torch.no_grad():
                logits = module(*[f.get(p["name"], caches.get(p["name"], held.get(p["name"]))) for p in decode["inputs"]])
            return logits[0, -1]  # the static caches are updated in place, not returned

        return greedy(call, prompt, n)

    return run_image, loop


def executorch(export, image_comps, decode, slots):
    from executorch.runtime import Runtime

    (file,) = {f for f in decode["files"] if f.endswith(".pte")}
    program = Runtime.get().load_program(os.path.join(export, file))

    def run_image(c, feed):
        outs = program.load_method(c["name"]).execute([torch.from_numpy(feed[p["name"]]) for p in c["inputs"]])
        return {p["name"]: v.clone().numpy() for p, v in zip(c["outputs"], outs)}

    def loop(prompt, fixed, n):
        method = program.load_method(decode["name"])
        caches = {p["name"]: torch.from_numpy(zeros(p, slots)) for p in decode["inputs"] if p["name"].startswith("past_key_values.")}
        held = {k: torch.from_numpy(v) for k, v in fixed.items()}
        k = len(caches)

        def call(tokens, pos):
            nonlocal caches
            f = {key: torch.from_numpy(v) for key, v in feeds(tokens, pos, slots).items()}
            # the method returns [caches, logits, caches] (the caches in input order)
            outs = method.execute([f.get(p["name"], caches.get(p["name"], held.get(p["name"]))) for p in decode["inputs"]])
            caches = {name: v.clone() for name, v in zip(caches, outs[k + 1:])}
            return outs[k][0, -1]

        return greedy(call, prompt, n)

    return run_image, loop


RUNTIMES = {"onnx": onnx, "openvino": openvino, "dynamo": dynamo, "executorch": executorch}

if __name__ == "__main__":
    main()
