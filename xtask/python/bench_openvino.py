"""OpenVINO generation bench: transformers' own OpenVINO export vs hfexport's, both run greedily on the CPU plugin.

usage: bench_openvino.py export-transformers CHECKPOINT_DIR OUTPUT_DIR MAX_CACHE_LEN
       bench_openvino.py run LABEL EXPORT_DIR [PROMPT_LEN] [DECODE_STEPS]

Every line meant for a caller is `OV ...` (like bench_generate.py's `GEN ...` lines).

`export-transformers`: `transformers.exporters.OpenVINOExporter` with
`OpenVINOConfig(dynamic=True, stateful=True, compress_to_fp16=False)` on the `decode` component of
`decompose_for_generation(model, inputs, generation_config=GenerationConfig(cache_implementation="static",
max_cache_len=N), multi_token_decode=True)` -- what `OpenVINOExporter().export_for_generation(...)` does, minus the
`prefill` component, which a multi-token decode makes redundant (bench_generate.py does the same for ONNX). The
result is checked: its state variables must have a static sequence axis of N slots, and 8 greedy tokens after a
16-token prompt (run by the loop below, on a fresh request) must match the PyTorch model's `generate`
(`OV check <mode> ok|WRONG ...`). With transformers 5.23 the static export comes out stateful with N slots but
generates wrong tokens: `_freeze_batchless_states` bakes each `StaticLayer.cumulative_length` (a rank-0 round-tripped
tensor) into a constant, its value in the traced sample, so every call writes the cache at the same slots (the
`output.past_key_values.layers.*.cumulative_length` outputs left without a state are the trace of it). If the static
export raises, is not static-stateful or fails the check, `OV note` lines say why and the export falls back to the
exporter's default cache (a DynamicCache, folded into a growing stateful cache with `beam_idx`: the optimum-intel
layout; inputs `input_ids`, `position_ids`, `beam_idx`, no mask), `OV mode growing-stateful`.
`BENCH_OV_CACHE=static` keeps the static export whatever the check says (to time it), `=growing` skips it; the
default is `auto`. Prints `OV import|load|export|save <seconds>` (export: the kept export only, without the checks),
`OV mode`, the model's inputs/outputs/states and `OV files`. Exits 1 (after the traceback on stderr and an
`OV error` line) when no export could be made. Local files only (`local_files_only=True`).

`run`: a greedy loop on OpenVINO CPU (`INFERENCE_PRECISION_HINT=f32`, `KV_CACHE_PRECISION=f32`) over the `decode`
model of EXPORT_DIR, either
  - an hfexport export (its export.json has `"format": "openvino"` and a list of components; the cache is stateful
    when the component lists `states`; a static cache has `symbols.cache_len.max` slots), or
  - a transformers export (its export.json manifest has `export_format` and a dict of components), whose inputs are
    read off the model: feeds are built by input name (`input_ids`, `attention_mask` or `attention_mask.<layer type>`
    2-D or 4-D of any element type, `position_ids`, `cache_position`, `beam_idx`; any other input is an error); the
    cache is static when the state variables' sequence axis is. Only stateful models are run.
A static cache gets a `[1, 1, q, slots]` mask (slot j visible to query i iff j <= pos + i); a growing one a
`[1, pos + q]` padding mask of ones (or a `[1, 1, q, pos + q]` causal one when the model takes 4-D).
The prompt is PROMPT_LEN (default 128) ids `(i * 7 + 3) % vocab`, prefilled in one call when the query axis is
dynamic (token by token otherwise). One untimed warm-up generation (prefill + 2 steps) runs on its own infer request
first, so that the timed generation does not pay the plugin's first-shape costs; then the timed generation runs on a
fresh infer request (fresh state): prefill, 2 warm-up steps, DECODE_STEPS (default 64) timed single-token steps.
Prints `OV <label> load_s|prefill_ms|prefill_tok_s|decode_ms_tok`, `OV <label> layer_<type> <count>` for the runtime
model's RMS, RoPE, ScaledDotProductAttention and FullyConnected nodes (`layer_others`: the other node types but
`Const`, as `Type=count,...`), and `OV <label> tokens` (the first 12). Also `model`, `inputs`, `outputs`, `states`,
`compiled` (the plugin's effective properties), `cache` and `prefill` lines describing what ran.
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


NP_TYPES = {"boolean": np.bool_, "f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32, "u8": np.uint8, "i8": np.int8}


class Loop:
    """Feeds for a stateful OpenVINO decode model, built from its input names and shapes, and the greedy steps.

    `slots`: the static cache's size, or None for a growing cache. `compiled`: the model compiled for the CPU."""

    def __init__(self, model, compiled, slots):
        self.compiled, self.slots = compiled, slots
        self.ports = {sorted(p.get_names())[0]: p for p in model.inputs}
        # transformers names a hybrid model's masks `attention_mask.<layer type>` (one here: `.full_attention`)
        self.masks = [n for n in self.ports if n.startswith("attention_mask")]
        ids = self.ports["input_ids"].get_partial_shape()
        self.multi = ids[1].is_dynamic or ids[1].get_length() > 1
        self.logits = next((i for i, o in enumerate(compiled.outputs) if "logits" in o.get_names()), 0)
        for name, port in self.ports.items():
            known = name in ("input_ids", "position_ids", "cache_position", "beam_idx") or name in self.masks
            if not known:
                raise SystemExit(f"input the loop does not know: {name}{port.get_partial_shape()}{port.get_element_type()}")

    def mask(self, port, pos, q):
        rank = port.get_partial_shape().rank.get_length()
        dtype = NP_TYPES[port.get_element_type().get_type_name()]
        width = self.slots or pos + q
        if rank == 2:  # a padding mask over the cache: ones up to the last token
            m = np.arange(width)[None, :] < pos + q
        else:  # 4-D causal [1, 1, q, width]: slot j visible to query i iff j <= pos + i
            m = (np.arange(width)[None, :] <= (pos + np.arange(q))[:, None])[None, None]
        if dtype == np.bool_:
            return m
        if np.issubdtype(dtype, np.floating) and rank == 4:  # an additive float mask
            return np.where(m, 0.0, np.finfo(dtype).min).astype(dtype)
        return m.astype(dtype)

    def feeds(self, tokens, pos):
        q, f = len(tokens), {}
        for name, port in self.ports.items():
            dtype = NP_TYPES[port.get_element_type().get_type_name()]
            if name == "input_ids":
                f[name] = np.array([tokens], dtype=dtype)
            elif name in self.masks:
                f[name] = self.mask(port, pos, q)
            elif name == "position_ids":
                p = np.arange(pos, pos + q, dtype=dtype)[None]
                if port.get_partial_shape().rank.get_length() == 3:  # m-rope [axes, batch, seq]
                    p = np.broadcast_to(p[None], (port.get_partial_shape()[0].get_length(), 1, q)).copy()
                f[name] = p
            elif name == "cache_position":
                f[name] = np.arange(pos, pos + q, dtype=dtype)
            elif name == "beam_idx":
                f[name] = np.zeros(1, dtype=np.int32)
        return f

    def step(self, request, tokens, pos):
        request.infer(self.feeds(tokens, pos), share_inputs=True)
        return int(request.get_output_tensor(self.logits).data[0, -1].argmax())

    def prefill(self, request, prompt):
        if self.multi:
            return self.step(request, prompt, 0)
        for i, t in enumerate(prompt):
            tok = self.step(request, [t], i)
        return tok

    def generate(self, prompt, n):
        """n greedy tokens on a fresh infer request (fresh state)."""
        request = self.compiled.create_infer_request()
        tokens = [self.prefill(request, prompt)]
        while len(tokens) < n:
            tokens.append(self.step(request, [tokens[-1]], len(prompt) + len(tokens) - 1))
        return tokens


def static_slots(model):
    """The sequence axis of the state variables (batch, heads, seq, dim) when it is static and the same for all."""
    seq = set()
    for v in model.get_variables():
        shape = v.get_info().data_shape
        if shape.rank.is_static and shape.rank.get_length() == 4:
            seq.add(shape[2].get_length() if shape[2].is_static else None)
    return seq.pop() if len(seq) == 1 and None not in seq else None


def vocab_of(model, export=None):
    port = next((o for o in model.outputs if "logits" in o.get_names()), model.outputs[0])
    dim = port.get_partial_shape()[-1]
    if dim.is_static:
        return dim.get_length()
    return json.load(open(os.path.join(export, "config.json")))["vocab_size"]


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
    if not variables:
        raise SystemExit(f"{xml} is not stateful (no variables): inputs {describe(model.inputs)}; this loop needs a stateful model")
    shown = "; ".join(f"{v.variable_id}{v.data_shape}" for v in variables[:2])
    print(f"OV {label} states {shown}" + (f"; ... ({len(variables)} in all)" if len(variables) > 2 else ""), flush=True)
    if layout == "hfexport" and not component.get("states"):
        print(f"OV {label} note: export.json lists no states, but the model has {len(variables)} variables", flush=True)
    props = {}
    for key in ("PERFORMANCE_HINT", "NUM_STREAMS", "INFERENCE_NUM_THREADS", "INFERENCE_PRECISION_HINT", "KV_CACHE_PRECISION"):
        try:
            props[key] = str(compiled.get_property(key)).removeprefix("<Type: '").removesuffix("'>")
        except Exception:  # noqa: BLE001 -- a property the plugin does not report
            pass
    print(f"OV {label} compiled " + " ".join(f"{k}={v}" for k, v in props.items()), flush=True)

    # Cache slots: hfexport's export.json (`symbols.cache_len.max`), else a static sequence axis of the state
    # variables, else a static last axis of a 4-D mask; none of them: a growing cache. A 2-D mask means a growing cache.
    slots = meta.get("symbols", {}).get("cache_len", {}).get("max") if layout == "hfexport" else None
    slots = slots or static_slots(model)
    for port in model.inputs:
        if not any(n.startswith("attention_mask") for n in port.get_names()):
            continue
        shape = port.get_partial_shape()
        if shape.rank.get_length() == 2:
            slots = None
        elif slots is None and shape[-1].is_static:
            slots = shape[-1].get_length()
    print(f"OV {label} cache {f'static {slots} slots' if slots else 'growing'}", flush=True)
    if slots and prompt_len + steps + 3 > slots:
        raise SystemExit(f"{prompt_len} + {steps} + 3 tokens do not fit in {slots} cache slots")

    loop = Loop(model, compiled, slots)
    prompt = [(i * 7 + 3) % vocab_of(model, export) for i in range(prompt_len)]
    print(f"OV {label} prefill {'one call' if loop.multi else 'token by token'}", flush=True)

    loop.generate(prompt, 3)  # untimed warm-up generation (own request): the plugin's first-shape costs

    request = compiled.create_infer_request()  # fresh state
    t = time.perf_counter()
    tok = loop.prefill(request, prompt)
    prefill_s = time.perf_counter() - t
    tokens, pos = [tok], prompt_len
    for _ in range(2):  # warm-up
        tokens.append(loop.step(request, [tokens[-1]], pos))
        pos += 1
    t = time.perf_counter()
    for _ in range(steps):
        tokens.append(loop.step(request, [tokens[-1]], pos))
        pos += 1
    decode_s = time.perf_counter() - t

    layer_types = Counter(op.get_rt_info()["layerType"].astype(str) for op in compiled.get_runtime_model().get_ops())
    print(f"OV {label} load_s {load_s:.2f}")
    print(f"OV {label} prefill_ms {prefill_s * 1e3:.1f}")
    print(f"OV {label} prefill_tok_s {prompt_len / prefill_s:.1f}")
    print(f"OV {label} decode_ms_tok {decode_s * 1e3 / steps:.2f}")
    for kind in LAYER_TYPES:
        print(f"OV {label} layer_{kind} {layer_types.get(kind, 0)}")
    others = ",".join(f"{k}={v}" for k, v in sorted(layer_types.items()) if k not in LAYER_TYPES + ("Const",))
    print(f"OV {label} layer_others {others}")
    print(f"OV {label} tokens {' '.join(map(str, tokens[:12]))}", flush=True)


# ── export-transformers ─────────────────────────────────────────────────────


def brief_error(e):
    """An exception on one line: its type, its message's first line and, for a torch.export error, the model line
    that raised it."""
    text = str(e)
    lines = text.strip().splitlines()
    where = ""
    for i, line in enumerate(lines):
        if line.startswith("The following call raised this error:") and i + 2 < len(lines):
            where = f" [at {lines[i + 1].strip()}: {lines[i + 2].strip()}]"
    cause = f" (caused by {type(e.__cause__).__name__}: {str(e.__cause__).strip().splitlines()[0]})" if e.__cause__ else ""
    return f"{type(e).__name__}: {lines[0] if lines else ''}{where}{cause}"


def export_transformers(checkpoint, output, max_cache_len):
    """Exit status 0 when an export was saved, 1 when none could be made."""
    mode_wanted = os.environ.get("BENCH_OV_CACHE", "auto")
    if mode_wanted not in ("auto", "static", "growing"):
        raise SystemExit(f"BENCH_OV_CACHE must be auto, static or growing, not {mode_wanted!r}")
    t0 = time.perf_counter()
    import openvino as ov
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
        """`export_for_generation(model, inputs, config, generation_config=gen, multi_token_decode=True)`, decode only."""
        t = time.perf_counter()
        components = decompose_for_generation(model, inputs, generation_config=gen, multi_token_decode=True)
        submodel, subinputs = components["decode"]
        print(f"OV decode_sample_inputs {' '.join(subinputs)}", flush=True)
        component = exporter._export_component(submodel, subinputs, config)
        return component, time.perf_counter() - t

    # A check of the export against the PyTorch model: 8 greedy tokens after a 16-token prompt, both in float32.
    check_prompt = [(i * 7 + 3) % model.config.vocab_size for i in range(16)]
    with torch.no_grad():
        ids = torch.tensor([check_prompt])
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=GenerationConfig(
            max_new_tokens=8, min_new_tokens=8, do_sample=False, pad_token_id=0))
    reference = out[0, len(check_prompt):].tolist()

    def check(component, slots, mode):
        t = time.perf_counter()
        program = component.program.clone()
        loop = Loop(program, ov.Core().compile_model(program, "CPU", CONFIG), slots)
        tokens = loop.generate(check_prompt, len(reference))
        ok = tokens == reference
        print(f"OV check {mode} {'ok' if ok else 'WRONG'} openvino {' '.join(map(str, tokens))} torch {' '.join(map(str, reference))} "
              f"({time.perf_counter() - t:.2f} s)", flush=True)
        return ok

    def frozen(program):
        """Round-tripped outputs (`output.<path>`) left without their state: their input was baked into a constant."""
        return [n for o in program.outputs for n in o.get_names() if n.startswith("output.")]

    kept = None  # (mode, generation config, component, export seconds)
    if mode_wanted in ("auto", "static"):
        static = GenerationConfig(cache_implementation="static", max_cache_len=max_cache_len, do_sample=False)
        try:
            component, seconds = export(static)
        except Exception as e:  # noqa: BLE001
            print(f"OV note static-stateful export failed: {brief_error(e)}", flush=True)
            traceback.print_exc()
            if mode_wanted == "static":
                print("OV error no export (BENCH_OV_CACHE=static)", flush=True)
                return 1
        else:
            slots = static_slots(component.program)
            if slots != max_cache_len:
                variables = [f"{v.get_info().variable_id}{v.get_info().data_shape}" for v in component.program.get_variables()]
                print(f"OV note static+stateful not supported: the static-cache export has variables {variables or 'none'} "
                      f"and inputs {describe(component.program.inputs)}", flush=True)
                if mode_wanted == "static":
                    kept = ("static-not-stateful", static, component, seconds)
            else:
                ok = check(component, slots, "static-stateful")
                if not ok:
                    print("OV note static+stateful export generates wrong tokens; round-tripped tensors baked into "
                          f"constants: {' '.join(frozen(component.program)) or 'none'}", flush=True)
                if ok or mode_wanted == "static":
                    kept = ("static-stateful", static, component, seconds)
        if kept is None:
            print("OV note falling back to the default cache (DynamicCache: a growing stateful cache)", flush=True)
    if kept is None:
        gen = GenerationConfig(do_sample=False)
        try:
            component, seconds = export(gen)
        except Exception as e:  # noqa: BLE001
            print(f"OV error growing-stateful export failed: {brief_error(e)}", flush=True)
            traceback.print_exc()
            return 1
        if not component.program.get_variables():
            print(f"OV error the growing-cache export is not stateful: inputs {describe(component.program.inputs)}", flush=True)
            return 1
        check(component, None, "growing-stateful")
        kept = ("growing-stateful", gen, component, seconds)

    mode, gen, component, seconds = kept
    print(f"OV export {seconds:.2f}", flush=True)
    print(f"OV mode {mode}", flush=True)
    program = component.program
    print(f"OV inputs {describe(program.inputs)}", flush=True)
    print(f"OV outputs {describe(program.outputs)}", flush=True)
    infos = [v.get_info() for v in program.get_variables()]
    print(f"OV states {len(infos)} " + "; ".join(f"{i.variable_id}{i.data_shape}" for i in infos[:2]), flush=True)
    t = time.perf_counter()
    ExportedModel({"decode": component}, exporter.export_format, config=model.config, generation_config=gen).save_pretrained(output)
    print(f"OV save {time.perf_counter() - t:.2f}", flush=True)
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
