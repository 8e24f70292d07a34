"""The Python side of `cargo xtask bench generate-onnx [--python]`.

usage: bench_generate.py run LABEL EXPORT_DIR [PROMPT_LEN] [DECODE_STEPS]
       bench_generate.py export-transformers CHECKPOINT_DIR OUTPUT_DIR MAX_CACHE_LEN

`run`: a greedy loop in onnxruntime (CPU, float32) over a static-cache, multi-token `decode` graph,
the way tests/python/generate_onnx.py runs it in `iobinding` mode: every cache input is bound to
the same OrtValue as its cache output, so the graph writes the new keys/values into the buffer in
place and nothing is copied back. The prompt (PROMPT_LEN tokens, default 128) goes through one
call (prefill), then 2 warm-up single-token steps, then DECODE_STEPS (default 64) timed single-token
steps. Prints `GEN <label> <key> <value>` lines (load_s, prefill_tok_s, prefill_ms, decode_ms_tok,
inplace, tokens) for the bench to relay.

The graph's names are read from the session: hfexport's contract is `past_key_values.<cache>` /
`present.<cache>` (paired by name) with a float `[1, 1, q, cache_len]` boolean mask; transformers'
exporters name theirs `input.<path>` / `output.<path>`, or `past_key_values...` / `present...`
(paired in order), and their mask may be a 2-D `[batch, cache_len]` int64 padding mask. If the graph does not write the bound input buffer in
place (its outputs are separate tensors), the loop binds separate output buffers and swaps them
each step, and reports `inplace no`.

`export-transformers`: `transformers.exporters.OnnxExporter` for generation with a static cache
of MAX_CACHE_LEN and multi-token decode (`decompose_for_generation(..., multi_token_decode=True)`
with `GenerationConfig(cache_implementation="static", max_cache_len=N)`), `OnnxConfig(dynamic=True)`.
Only the `decode` component is exported (as `export_for_generation` would export it): with a
multi-token decode the `prefill` component is redundant, and the loop never runs it. Prints
`BENCH <phase> <seconds>` lines.
"""
import json
import os
import sys
import time

import numpy as np

DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64}


def find_decode(export):
    for cand in (os.path.join("onnx", "decode.onnx"), os.path.join("onnx", "model.onnx"), "decode.onnx", os.path.join("decode", "model.onnx"), "model.onnx"):
        p = os.path.join(export, cand)
        if os.path.exists(p):
            return p
    for root, _, files in os.walk(export):
        for f in files:
            if f.endswith(".onnx") and "decode" in (root + f):
                return os.path.join(root, f)
    raise SystemExit(f"no decode graph under {export}: {os.listdir(export)}")


def run(label, export, prompt_len=128, steps=64):
    import onnxruntime as ort

    path = find_decode(export)
    t0 = time.perf_counter()
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    load_s = time.perf_counter() - t0
    ins = {i.name: i for i in sess.get_inputs()}
    outs = [o.name for o in sess.get_outputs()]
    print(f"GEN {label} graph {path}", flush=True)
    def brief(infos):  # the first 4 names, then a count
        shown = "; ".join(f"{i.name}{i.shape}{i.type[7:-1]}" for i in infos[:4])
        return shown + (f"; ... ({len(infos)} in all)" if len(infos) > 4 else "")

    print(f"GEN {label} inputs {brief(sess.get_inputs())}", flush=True)
    print(f"GEN {label} outputs {brief(sess.get_outputs())}", flush=True)

    def dims(info):  # transformers' graphs spell some static axes as strings ('8')
        return [int(d) if isinstance(d, str) and d.isdigit() else d for d in info.shape]

    # cache inputs -> outputs; rank-0 state (transformers' per-layer `cumulative_length`, the
    # number of tokens already in the cache) is fed as the position, its output discarded
    scalars = [n for n in ins if n.startswith("input.") and len(ins[n].shape) == 0]
    if any(n.startswith("input.") for n in ins):
        cache_in = [n for n in ins if n.startswith("input.") and n not in scalars]
        pairs = {n: "output." + n[len("input."):] for n in cache_in + scalars}
    elif any(n.startswith("past_key_values.") and "present." + n[len("past_key_values."):] in outs for n in ins):
        cache_in = [n for n in ins if n.startswith("past_key_values.")]
        pairs = {n: "present." + n[len("past_key_values."):] for n in cache_in}
    else:
        cache_in = [n for n in ins if n.startswith("past")]
        cache_out = [n for n in outs if n.startswith("present") or n.startswith("past")]
        assert len(cache_in) == len(cache_out), (cache_in, cache_out)
        pairs = dict(zip(cache_in, cache_out))
    cache_len = None
    meta_path = os.path.join(export, "export.json")
    if os.path.exists(meta_path):
        meta = json.load(open(meta_path))
        cache_len = meta.get("symbols", {}).get("cache_len", {}).get("max")
    if cache_len is None:
        cache_len = int(os.environ.get("BENCH_CACHE_LEN", "512"))

    def shape_of(info, q):
        shape = []
        for d in dims(info):
            if isinstance(d, int):
                shape.append(d)
            elif d in ("batch", "batch_size") or "batch" in str(d):
                shape.append(1)
            else:
                shape.append(cache_len)
        return shape

    buffers = {}
    for n in cache_in:
        shape = shape_of(ins[n], 1)
        # a symbolic batch axis is 1, every other symbolic axis the cache length
        if not isinstance(dims(ins[n])[0], int):
            shape[0] = 1
        buffers[n] = ort.OrtValue.ortvalue_from_numpy(np.zeros(shape, dtype=DTYPES[ins[n].type]))
    spare = None  # separate output buffers when the graph does not write in place

    masks = [n for n in ins if n.startswith("attention_mask")]

    def feeds(tokens, pos):
        q = len(tokens)
        f = {"input_ids": np.array([tokens], dtype=np.int64)}
        if "position_ids" in ins:
            f["position_ids"] = np.arange(pos, pos + q, dtype=np.int64)[None]
        if "cache_position" in ins:
            f["cache_position"] = np.arange(pos, pos + q, dtype=np.int64)
        for n in scalars:
            f[n] = np.array(pos, dtype=np.int64)
        for name in masks:
            mask_info = ins[name]
            if len(mask_info.shape) == 4:
                m = np.arange(cache_len)[None, :] <= (pos + np.arange(q))[:, None]
                f[name] = m[None, None].astype(DTYPES.get(mask_info.type, bool)) if mask_info.type != "tensor(bool)" else m[None, None]
            else:
                f[name] = (np.arange(cache_len) < pos + q).astype(np.int64)[None]
        unknown = [n for n in ins if n not in f and n not in pairs]
        assert not unknown, f"inputs the loop does not know: {unknown}"
        return f

    first = cache_in[0]

    def step(tokens, pos):
        nonlocal buffers, spare
        binding = sess.io_binding()
        for k, v in feeds(tokens, pos).items():
            binding.bind_cpu_input(k, v)
        for n, v in buffers.items():
            binding.bind_ortvalue_input(n, v)
            binding.bind_ortvalue_output(pairs[n], spare[n] if spare is not None else v)
        for n in scalars:
            binding.bind_output(pairs[n])
        binding.bind_output("logits")
        sess.run_with_iobinding(binding)
        logits = binding.get_outputs()[-1].numpy()
        if spare is not None:
            buffers, spare = spare, buffers
        return int(logits[0, -1].argmax())

    # Probe in place: one call on one token, then check the bound buffer got the keys.
    step([1], 0)
    inplace = float(np.abs(buffers[first].numpy()).sum()) > 0
    if not inplace:
        print(f"GEN {label} note: the graph does not write the bound cache in place; using separate output buffers", flush=True)
        spare = {n: ort.OrtValue.ortvalue_from_numpy(np.zeros_like(v.numpy())) for n, v in buffers.items()}
    # reset caches (a fresh generation)
    for n, v in buffers.items():
        buffers[n] = ort.OrtValue.ortvalue_from_numpy(np.zeros_like(v.numpy()))

    rng = np.random.default_rng(0)
    vocab = next(o.shape[-1] for o in sess.get_outputs() if o.name in ("logits", outs[0]))
    prompt = rng.integers(0, vocab if isinstance(vocab, int) else 32000, size=prompt_len).tolist()
    t = time.perf_counter()
    tok = step(prompt, 0)
    prefill_s = time.perf_counter() - t
    tokens, pos = [tok], prompt_len
    for _ in range(2):  # warm-up
        tokens.append(step([tokens[-1]], pos))
        pos += 1
    t = time.perf_counter()
    for _ in range(steps):
        tokens.append(step([tokens[-1]], pos))
        pos += 1
    decode_s = time.perf_counter() - t
    print(f"GEN {label} load_s {load_s:.2f}")
    print(f"GEN {label} prefill_ms {prefill_s * 1e3:.1f}")
    print(f"GEN {label} prefill_tok_s {prompt_len / prefill_s:.1f}")
    print(f"GEN {label} decode_ms_tok {decode_s * 1e3 / steps:.2f}")
    print(f"GEN {label} inplace {'yes' if inplace else 'no'}")
    print(f"GEN {label} tokens {' '.join(map(str, tokens[:12]))}", flush=True)


def export_transformers(checkpoint, output, max_cache_len):
    t0 = time.perf_counter()
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig
    from transformers.exporters import OnnxConfig, OnnxExporter
    from transformers.exporters.base import ExportedModel
    from transformers.exporters.utils import decompose_for_generation

    t1 = time.perf_counter()
    print(f"BENCH import {t1 - t0:.2f}", flush=True)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    model.eval()
    t2 = time.perf_counter()
    print(f"BENCH load {t2 - t1:.2f}", flush=True)

    gen = GenerationConfig(cache_implementation="static", max_cache_len=max_cache_len, do_sample=False)
    ids = torch.randint(0, model.config.vocab_size, (1, 8), generator=torch.Generator().manual_seed(0))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    components = decompose_for_generation(model, inputs, generation_config=gen, multi_token_decode=True)
    submodel, subinputs = components["decode"]
    print(f"BENCH decode_inputs {list(subinputs)}", flush=True)
    exporter = OnnxExporter()
    component = exporter._export_component(submodel, subinputs, OnnxConfig(dynamic=True))
    t3 = time.perf_counter()
    print(f"BENCH export {t3 - t2:.2f}", flush=True)
    ExportedModel({"decode": component}, exporter.export_format, config=model.config, generation_config=gen).save_pretrained(output)
    t4 = time.perf_counter()
    print(f"BENCH save {t4 - t3:.2f}", flush=True)
    print(f"BENCH files {sorted(os.listdir(output))}", flush=True)


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], *(int(a) for a in sys.argv[4:6]))
    elif len(sys.argv) == 5 and sys.argv[1] == "export-transformers":
        export_transformers(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
