"""OpenVINO generation bench: transformers' own OpenVINO export vs hfexport's, both run greedily on the CPU plugin.

usage: bench_openvino.py export-transformers CHECKPOINT_DIR OUTPUT_DIR MAX_CACHE_LEN
       bench_openvino.py run LABEL EXPORT_DIR [PROMPT_LEN] [DECODE_STEPS]

Every line meant for a caller is `OV ...` (like bench_generate.py's `GEN ...` lines).

`export-transformers`: `transformers.exporters.OpenVINOExporter` with
`OpenVINOConfig(dynamic=True, stateful=True)` on the `decode` component of
`decompose_for_generation(model, inputs, generation_config=GenerationConfig(cache_implementation="static",
max_cache_len=N), multi_token_decode=True)` -- what `OpenVINOExporter().export_for_generation(...)` does, minus the
`prefill` component, which a multi-token decode makes redundant (bench_generate.py does the same for ONNX). The
result is then checked: a stateful model whose cache variables have a static sequence axis of N slots is a
"static-stateful" export. If that export raises, or does not come out as one, an `OV note` says why and the export
falls back to the exporter's default cache (a DynamicCache, folded into a growing stateful cache: the optimum-intel
layout), reported as `OV mode growing-stateful`. Prints `OV import|load|export|save <seconds>`, `OV mode ...`,
the model's inputs/outputs/variables and `OV files ...`. Exits non-zero if no export succeeds. Local files only.

`run`: a greedy loop on OpenVINO CPU (`INFERENCE_PRECISION_HINT=f32`, `KV_CACHE_PRECISION=f32`) over the `decode`
model of EXPORT_DIR, either
  - an hfexport export (its export.json has `"format": "openvino"` and a list of components; the cache is stateful
    when the component lists `states`; a static cache has `symbols.cache_len.max` slots), or
  - a transformers export (its export.json manifest has `export_format` and a dict of components), whose inputs are
    read off the model: feeds are built by input name (`input_ids`, `attention_mask` 2-D or 4-D of any element type,
    `position_ids`, `cache_position`, `beam_idx`); the cache is static when the state variables' sequence axis is.
A static cache gets a `[1, 1, q, slots]` mask (slot j visible to query i iff j <= pos + i); a growing one a
`[1, pos + q]` padding mask of ones (or a `[1, 1, q, pos + q]` causal one when the model takes 4-D).
The prompt is PROMPT_LEN (default 128) ids `(i * 7 + 3) % vocab`, prefilled in one call when the query axis is
dynamic (token by token otherwise). One untimed warm-up generation (prefill + 2 steps) runs on its own infer request
first, so that the timed generation does not pay the plugin's first-shape costs; then the timed generation runs on a
fresh infer request (fresh state): prefill, 2 warm-up steps, DECODE_STEPS (default 64) timed single-token steps.
Prints `OV <label> load_s|prefill_ms|prefill_tok_s|decode_ms_tok`, `OV <label> layer_<type> <count>` for the runtime
model's RMS, RoPE, ScaledDotProductAttention and FullyConnected nodes, and `OV <label> tokens` (the first 12).
"""

import json
import os
import sys
import time
import traceback
from collections import Counter

import numpy as np

CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"}
LAYER_TYPES = ("RMS", "RoPE", "ScaledDotProductAttention", "FullyConnected")


# ── run ─────────────────────────────────────────────────────────────────────


def describe(ports):
    return "; ".join(f"{sorted(p.get_names())[0]}{p.get_partial_shape()}{p.get_element_type().get_type_name()}" for p in ports)


def find_decode(export):
    """(xml path, layout) with layout "hfexport" or "transformers" (from export.json), or "unknown"."""
    meta_path = os.path.join(export, "export.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    components = meta.get("components")
    if isinstance(components, list):  # hfexport
        if meta.get("format") != "openvino":
            raise SystemExit(f"{export} is a {meta.get('format')!r} hfexport export, not openvino")
        component = next((c for c in components if c.get("name") == "decode"), components[0])
        xml = next(f for f in component["files"] if f.endswith(".xml"))
        return os.path.join(export, xml), "hfexport", meta, component
    if isinstance(components, dict):  # transformers' manifest
        if meta.get("export_format") != "openvino":
            raise SystemExit(f"{export} is a {meta.get('export_format')!r} transformers export, not openvino")
        name = "decode" if "decode" in components else next(iter(components))
        return os.path.join(export, components[name]["file"]), "transformers", meta, components[name]
    for cand in ("openvino_decode.xml", "openvino_model.xml"):
        if os.path.exists(os.path.join(export, cand)):
            return os.path.join(export, cand), "unknown", meta, {}
    raise SystemExit(f"no OpenVINO decode model under {export}: {sorted(os.listdir(export))}")


def run(label, export, prompt_len=128, steps=64):
    import openvino as ov

    xml, layout, meta, component = find_decode(export)
    core = ov.Core()
    t0 = time.perf_counter()
    model = core.read_model(xml)
    compiled = core.compile_model(model, "CPU", CONFIG)
    load_s = time.perf_counter() - t0
    print(f"OV {label} model {xml} ({layout})", flush=True)
    print(f"OV {label} inputs {describe(model.inputs)}", flush=True)
    print(f"OV {label} outputs {describe(model.outputs)}", flush=True)
    variables = [v.get_info() for v in model.get_variables()]
    if variables:
        shown = "; ".join(f"{v.variable_id}{v.data_shape}" for v in variables[:2])
        print(f"OV {label} states {shown}" + (f"; ... ({len(variables)} in all)" if len(variables) > 2 else ""), flush=True)
    props = {}
    for key in ("PERFORMANCE_HINT", "NUM_STREAMS", "INFERENCE_NUM_THREADS", "INFERENCE_PRECISION_HINT", "KV_CACHE_PRECISION"):
        try:
            props[key] = compiled.get_property(key)
        except Exception:  # noqa: BLE001 -- a property the plugin does not report
            pass
    print(f"OV {label} compiled " + " ".join(f"{k}={v}" for k, v in props.items()), flush=True)

    ins = {sorted(p.get_names())[0]: p for p in model.inputs}
    for p in model.inputs:  # every name of a port feeds it; key by the canonical one
        for n in p.get_names():
            ins.setdefault(n, p)
    names = {sorted(p.get_names())[0] for p in model.inputs}
    if not variables:
        raise SystemExit(f"{xml} is not stateful (no variables): inputs {describe(model.inputs)}; this loop needs a stateful model")
    if layout == "hfexport" and not component.get("states"):
        print(f"OV {label} note: export.json lists no states, but the model has {len(variables)} variables", flush=True)

    # Cache slots: hfexport's export.json, else a static sequence axis of the state variables (batch, heads, seq,
    # dim), else a static last mask axis; none of them -> a growing cache.
    slots = None
    masks = [n for n in names if n.startswith("attention_mask")]  # transformers: `attention_mask.<layer type>`
    if layout == "hfexport":
        slots = meta.get("symbols", {}).get("cache_len", {}).get("max")
    if slots is None:
        seq_dims = {v.data_shape[2].get_length() for v in variables if v.data_shape.rank.get_length() == 4 and v.data_shape[2].is_static}
        if len(seq_dims) == 1:
            slots = seq_dims.pop()
    for name in masks:
        shape = ins[name].get_partial_shape()
        if slots is None and shape.rank.get_length() == 4 and shape[-1].is_static:
            slots = shape[-1].get_length()
        # a growing cache takes a 2-D padding mask (hfexport's export.json may still carry a `cache_len` symbol)
        if layout == "hfexport" and shape.rank.get_length() == 2:
            slots = None
    cache = f"static {slots} slots" if slots else "growing"
    print(f"OV {label} cache {cache}", flush=True)
    if slots and prompt_len + steps + 2 > slots:
        raise SystemExit(f"{prompt_len}+{steps}+2 tokens do not fit in {slots} cache slots")

    ids_shape = ins["input_ids"].get_partial_shape()
    multi = ids_shape[1].is_dynamic or ids_shape[1].get_length() > 1
    vocab = model.output("logits").get_partial_shape()[-1] if "logits" in {n for o in model.outputs for n in o.get_names()} else None
    if vocab is None or vocab.is_dynamic:
        vocab = json.load(open(os.path.join(export, "config.json")))["vocab_size"]
    else:
        vocab = vocab.get_length()
    logits_index = next(i for i, o in enumerate(compiled.outputs) if "logits" in o.get_names()) if any("logits" in o.get_names() for o in compiled.outputs) else 0

    def np_type(port):
        return {
            "boolean": np.bool_, "f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32,
            "u8": np.uint8, "i8": np.int8,
        }[port.get_element_type().get_type_name()]

    def mask_of(port, pos, q):
        rank = port.get_partial_shape().rank.get_length()
        dtype = np_type(port)
        if rank == 2:  # a padding mask over the cache positions
            width = slots or pos + q
            m = np.arange(width)[None, :] < pos + q
        else:  # 4-D causal [1, 1, q, width]
            width = slots or pos + q
            m = (np.arange(width)[None, :] <= (pos + np.arange(q))[:, None])[None, None]
        if dtype == np.bool_:
            return m
        if np.issubdtype(dtype, np.floating) and rank == 4:  # transformers' additive float mask
            return np.where(m, 0.0, np.finfo(dtype).min).astype(dtype)
        return m.astype(dtype)

    def feeds(tokens, pos):
        q = len(tokens)
        f = {}
        for name in names:
            port = ins[name]
            if name == "input_ids":
                f[name] = np.array([tokens], dtype=np_type(port))
            elif name in masks:
                f[name] = mask_of(port, pos, q)
            elif name == "position_ids":
                p = np.arange(pos, pos + q, dtype=np_type(port))[None]
                if port.get_partial_shape().rank.get_length() == 3:  # m-rope [axes, batch, seq]
                    p = np.broadcast_to(p[None], (port.get_partial_shape()[0].get_length(), 1, q)).copy()
                f[name] = p
            elif name == "cache_position":
                f[name] = np.arange(pos, pos + q, dtype=np_type(port))
            elif name == "beam_idx":
                f[name] = np.zeros(1, dtype=np.int32)
            else:
                raise SystemExit(f"input the loop does not know: {name} {port.get_partial_shape()} {port.get_element_type()}")
        return f

    def step(request, tokens, pos):
        request.infer(feeds(tokens, pos), share_inputs=True)
        logits = request.get_output_tensor(logits_index).data
        return int(logits[0, -1].argmax())

    def prefill(request, prompt):
        if multi:
            return step(request, prompt, 0)
        tok = None
        for i, t in enumerate(prompt):
            tok = step(request, [t], i)
        return tok

    prompt = [(i * 7 + 3) % vocab for i in range(prompt_len)]
    print(f"OV {label} prefill {'one call' if multi else 'token by token'}", flush=True)

    # untimed warm-up generation on its own request: the plugin's first-shape costs
    warm = compiled.create_infer_request()
    tok = prefill(warm, prompt)
    for i in range(2):
        tok = step(warm, [tok], prompt_len + i)
    del warm

    request = compiled.create_infer_request()  # fresh state
    t = time.perf_counter()
    tok = prefill(request, prompt)
    prefill_s = time.perf_counter() - t
    tokens, pos = [tok], prompt_len
    for _ in range(2):  # warm-up
        tokens.append(step(request, [tokens[-1]], pos))
        pos += 1
    t = time.perf_counter()
    for _ in range(steps):
        tokens.append(step(request, [tokens[-1]], pos))
        pos += 1
    decode_s = time.perf_counter() - t

    layer_types = Counter(op.get_rt_info()["layerType"].astype(str) for op in compiled.get_runtime_model().get_ops())
    print(f"OV {label} load_s {load_s:.2f}")
    print(f"OV {label} prefill_ms {prefill_s * 1e3:.1f}")
    print(f"OV {label} prefill_tok_s {prompt_len / prefill_s:.1f}")
    print(f"OV {label} decode_ms_tok {decode_s * 1e3 / steps:.2f}")
    for kind in LAYER_TYPES:
        print(f"OV {label} layer_{kind} {layer_types.get(kind, 0)}")
    print(f"OV {label} tokens {' '.join(map(str, tokens[:12]))}", flush=True)


# ── export-transformers ─────────────────────────────────────────────────────


def ov_static_slots(ov_model):
    """The static cache's slots if `ov_model` is stateful with a static sequence axis on every 4-D variable."""
    infos = [v.get_info() for v in ov_model.get_variables()]
    if not infos:
        return None
    seq = {i.data_shape[2].get_length() if i.data_shape[2].is_static else None for i in infos if i.data_shape.rank.get_length() == 4}
    return seq.pop() if len(seq) == 1 and None not in seq else None


def brief_error(e):
    """An exception on one line: its type, its message's first line and, for a torch.export error, the model line
    that raised it."""
    text = str(e)
    first = text.strip().splitlines()[0] if text.strip() else ""
    where = ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("The following call raised this error:") and i + 2 < len(lines):
            where = f" [at {lines[i + 1].strip()}: {lines[i + 2].strip()}]"
    return f"{type(e).__name__}: {first}{where}"


def export_transformers(checkpoint, output, max_cache_len):
    t0 = time.perf_counter()
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig
    from transformers.exporters import ExportedModel, OpenVINOConfig, OpenVINOExporter
    from transformers.exporters.utils import decompose_for_generation

    t1 = time.perf_counter()
    print(f"OV import {t1 - t0:.2f}", flush=True)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32, local_files_only=True)
    model.eval()
    t2 = time.perf_counter()
    print(f"OV load {t2 - t1:.2f}", flush=True)

    ids = torch.randint(0, model.config.vocab_size, (1, 8), generator=torch.Generator().manual_seed(0))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    config = OpenVINOConfig(dynamic=True, stateful=True, compress_to_fp16=False)
    exporter = OpenVINOExporter()

    def export(gen):
        components = decompose_for_generation(model, inputs, generation_config=gen, multi_token_decode=True)
        submodel, subinputs = components["decode"]
        print(f"OV decode_sample_inputs {list(subinputs)}", flush=True)
        return exporter._export_component(submodel, subinputs, config)

    mode, gen, component = None, None, None
    static = GenerationConfig(cache_implementation="static", max_cache_len=max_cache_len, do_sample=False)
    try:
        component = export(static)
        slots = ov_static_slots(component.program)
        if slots == max_cache_len:
            mode, gen = "static-stateful", static
        else:
            variables = [f"{v.get_info().variable_id}{v.get_info().data_shape}" for v in component.program.get_variables()]
            print(f"OV note static+stateful not supported: the static-cache export came out with variables {variables or 'none'} "
                  f"and inputs {describe(component.program.inputs)}; falling back to the default (growing) cache", flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"OV note static-stateful export failed: {brief_error(e)}", flush=True)
        traceback.print_exc()
        print("OV note falling back to the default (growing) cache", flush=True)
    if mode is None:
        t2 = time.perf_counter()  # the failed attempt is not the export's time
        gen = GenerationConfig(do_sample=False)
        try:
            component = export(gen)
        except Exception as e:  # noqa: BLE001
            print(f"OV error growing-stateful export failed too: {brief_error(e)}", flush=True)
            traceback.print_exc()
            return 1
        if not component.program.get_variables():
            print(f"OV error the growing-cache export is not stateful: inputs {describe(component.program.inputs)}", flush=True)
            return 1
        mode = "growing-stateful"
    t3 = time.perf_counter()
    print(f"OV export {t3 - t2:.2f}", flush=True)
    print(f"OV mode {mode}", flush=True)
    ov_model = component.program
    print(f"OV inputs {describe(ov_model.inputs)}", flush=True)
    print(f"OV outputs {describe(ov_model.outputs)}", flush=True)
    infos = [v.get_info() for v in ov_model.get_variables()]
    print(f"OV states {len(infos)} " + "; ".join(f"{i.variable_id}{i.data_shape}" for i in infos[:2]), flush=True)
    ExportedModel({"decode": component}, exporter.export_format, config=model.config, generation_config=gen).save_pretrained(output)
    t4 = time.perf_counter()
    print(f"OV save {t4 - t3:.2f}", flush=True)
    print(f"OV files {' '.join(sorted(os.listdir(output)))}", flush=True)
    return 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], *(int(a) for a in sys.argv[4:6]))
        return 0
    if len(sys.argv) == 5 and sys.argv[1] == "export-transformers":
        return export_transformers(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
