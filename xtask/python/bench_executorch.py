"""ExecuTorch side of `cargo xtask bench executorch`.

usage: bench_executorch.py export-transformers CHECKPOINT_DIR OUT_DIR MAX_CACHE_LEN
       bench_executorch.py run LABEL PTE_PATH PROMPT_LEN STEPS

`export-transformers`: transformers' own exporter (`ExecutorchExporter`, `ExecutorchConfig(backend="xnnpack")`,
float32) on the `decode` component of `decompose_for_generation(..., GenerationConfig(cache_implementation=
"static", max_cache_len=N))`, as xtask/python/bench_generate.py and bench_openvino.py do for ONNX and OpenVINO;
writes OUT_DIR/decode.pte. Needs torchao, expecttest and parameterized (`[python.bench]` of versions.toml).
Its decode method takes input_ids [1,1], a bool mask [1,1,1,N], position_ids [1,1], then per layer keys,
values [1,H,N,D] and a cumulative_length scalar (the write slot), and returns [caches, logits, caches].
Dynamic NTK rope (`rope_type: dynamic`) is not traceable by torch.export (it branches on max(position_ids)
in Python): unless BENCH_ET_DYNAMIC_ROPE=off the rotary forward is swapped, during the export only, for a
traceable one with the same result for a growing generation.

`run`: the same greedy loop over any static-cache one-token decode program (hfexport's `model.pte` method `decode`, or
transformers' `decode.pte` method `forward`) in the ExecuTorch Python runtime,
hfexport's (`[input_ids, attention_mask, position_ids, *caches]` -> `[caches, logits, caches]`) or
transformers': zero caches, the prompt (PROMPT_LEN random ids) token by token, then STEPS timed steps, the
first outputs fed back as the caches each step. Prints `ET <LABEL> <key> <value>` lines.
"""

import inspect
import json
import os
import sys
import time
from contextlib import contextmanager

import torch
from executorch.runtime import Runtime



@contextmanager
def traceable_dynamic_rope(model):
    """Swap each dynamic-rope rotary class's forward for a graph-only version of `dynamic_rope_update`."""
    import torch
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    classes = {}
    for module in model.modules():
        rope_type = getattr(module, "rope_type", None)
        if isinstance(rope_type, str) and "dynamic" in rope_type and hasattr(module, "original_inv_freq"):
            classes.setdefault(type(module), type(module).forward)

    def make(raw):
        def forward(self, x, position_ids):
            seq_len = torch.max(position_ids) + 1
            scaled, _ = ROPE_INIT_FUNCTIONS[self.rope_type](self.config, x.device, seq_len=seq_len)
            original = self.original_inv_freq.to(x.device)
            inv_freq = torch.where(seq_len > self.original_max_seq_len, scaled, original)
            object.__setattr__(self, "inv_freq", inv_freq)  # shadows the buffer for this call only
            try:
                with torch.no_grad():
                    return raw(self, x, position_ids)
            finally:
                del self.__dict__["inv_freq"]

        return forward

    for cls, original in classes.items():
        cls.forward = make(inspect.unwrap(original))  # strips no_grad and dynamic_rope_update
    try:
        yield bool(classes)
    finally:
        for cls, original in classes.items():
            cls.forward = original


def export_transformers(checkpoint, out_dir, max_cache_len):
    mode = os.environ.get("BENCH_ET_DECODE", "single")
    if mode not in ("single", "multi"):
        raise SystemExit(f"BENCH_ET_DECODE must be single or multi, not {mode!r}")
    rope_patch = os.environ.get("BENCH_ET_DYNAMIC_ROPE", "patch") != "off"
    timings = {}
    t0 = time.perf_counter()

    import torch
    from torch.export import Dim
    from transformers import AutoModelForCausalLM, GenerationConfig
    from transformers.exporters import ExecutorchConfig, ExecutorchExporter, ExportedModel
    from transformers.exporters.utils import decompose_for_generation

    t1 = time.perf_counter()
    timings["import_s"] = t1 - t0
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32, local_files_only=True)
    model.eval()
    t2 = time.perf_counter()
    timings["load_s"] = t2 - t1

    gen = GenerationConfig(cache_implementation="static", max_cache_len=max_cache_len, do_sample=False)
    ids = torch.randint(0, model.config.vocab_size, (1, 8), generator=torch.Generator().manual_seed(0))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    components = decompose_for_generation(model, inputs, generation_config=gen, multi_token_decode=mode == "multi")
    submodel, subinputs = components["decode"]
    t3 = time.perf_counter()
    timings["decompose_s"] = t3 - t2

    if mode == "multi":
        # Only the query axis varies; the cache (a pytree of keys/values/cumulative_length) stays static.
        q = Dim("q", min=1, max=max_cache_len)  # one shared symbol; bounds the planned arena by N
        # (the exporter pops scalar kwargs such as use_cache/return_dict before tracing: leave them out; the
        # cache needs a spec mirroring its registered pytree flatten, all static here)
        from transformers.exporters.exporter_dynamo import get_auto_dynamic_shapes, register_cache_pytrees_for_model

        register_cache_pytrees_for_model(submodel)

        def static(spec):
            if isinstance(spec, dict) and all(isinstance(k, int) for k in spec):
                return None
            if isinstance(spec, (list, tuple)):
                return type(spec)(static(s) for s in spec)
            return {k: static(v) for k, v in spec.items()} if isinstance(spec, dict) else spec

        tensors = {n: v for n, v in subinputs.items() if not isinstance(v, (bool, int, float, str, type(None)))}
        dynamic_shapes = static(get_auto_dynamic_shapes(tensors))
        dynamic_shapes.update(input_ids={1: q}, position_ids={1: q})
        if "attention_mask" in subinputs:  # a tensor, or a dict of them keyed by layer type (qwen3: full_attention)
            dynamic_shapes["attention_mask"] = torch.utils._pytree.tree_map(
                lambda m: {2: q} if m.dim() == 4 else {1: q}, subinputs["attention_mask"]
            )
        config = ExecutorchConfig(backend="xnnpack", dynamic_shapes=dynamic_shapes)
    else:
        config = ExecutorchConfig(backend="xnnpack")
    exporter = ExecutorchExporter()
    with traceable_dynamic_rope(model) if rope_patch else _nothing() as patched:
        component = exporter._export_component(submodel, subinputs, config)
    t4 = time.perf_counter()
    timings["export_s"] = t4 - t3

    ExportedModel({"decode": component}, exporter.export_format, config=model.config, generation_config=gen).save_pretrained(out_dir)
    t5 = time.perf_counter()
    timings["save_s"] = t5 - t4
    timings["total_s"] = t5 - t0
    report = {k: round(v, 3) for k, v in timings.items()}
    mask = subinputs.get("attention_mask")
    report.update(
        mode=mode,
        mask_kind="dict " + ",".join(mask) if isinstance(mask, dict) else type(mask).__name__,
        max_cache_len=max_cache_len,
        patched_dynamic_rope=bool(patched),
        decode_inputs=[k for k, v in subinputs.items() if not isinstance(v, (bool, int, float, str, type(None)))],
        pte=os.path.join(out_dir, "decode.pte"),
        pte_bytes=os.path.getsize(os.path.join(out_dir, "decode.pte")),
        files=sorted(os.listdir(out_dir)),
    )
    for k, v in report.items():
        print(f"ET transformers-export {k} {v}", flush=True)
    return 0


@contextmanager
def _nothing():
    yield False



class Decoder:
    def __init__(self, pte_path):
        t = time.perf_counter()
        program = Runtime.get().load_program(pte_path)
        # hfexport's model.pte has a method per component; transformers' decode.pte has `forward`
        self.method = program.load_method("decode" if "decode" in program.method_names else "forward")
        self.load_s = time.perf_counter() - t
        meta = self.method.metadata
        shapes = [tuple(meta.input_tensor_meta(i).sizes()) for i in range(meta.num_inputs())]
        self.cache_shapes = shapes[3:]  # (keys, values, cumulative_length) per layer
        self.n_cache = len(self.cache_shapes)
        self.slots = shapes[1][-1]  # attention_mask [1, 1, q, N]
        self.multi = shapes[0][1] > 1  # input_ids [1, q]: q's upper bound when dynamic
        assert meta.num_outputs() == 2 * self.n_cache + 1, (meta.num_outputs(), self.n_cache)

    def fresh_cache(self):
        return [torch.zeros(s, dtype=torch.float32) if s else torch.zeros((), dtype=torch.int64) for s in self.cache_shapes]

    def step(self, cache, tokens, pos):
        """One call on `tokens` at positions pos..; returns (greedy next token, new cache)."""
        q = len(tokens)
        assert pos + q <= self.slots, f"{pos + q} tokens do not fit in {self.slots} cache slots"
        mask = (torch.arange(self.slots)[None, :] <= (pos + torch.arange(q))[:, None])[None, None]
        positions = torch.arange(pos, pos + q, dtype=torch.int64)[None]
        cache = [torch.tensor(pos, dtype=torch.int64) if c.dim() == 0 else c for c in cache]
        outs = self.method.execute([torch.tensor([tokens], dtype=torch.int64), mask, positions, *cache])
        logits = outs[self.n_cache]
        return int(logits[0, -1].argmax()), list(outs[: self.n_cache])

    def generate(self, prompt, new_tokens):
        cache, timings = self.fresh_cache(), {}
        t = time.perf_counter()
        if self.multi:
            tok, cache = self.step(cache, prompt, 0)
        else:
            for i, p in enumerate(prompt):
                tok, cache = self.step(cache, [p], i)
        timings["prefill_ms"] = (time.perf_counter() - t) * 1e3
        tokens, pos = [tok], len(prompt)
        t = time.perf_counter()
        while len(tokens) < new_tokens:
            tok, cache = self.step(cache, [tokens[-1]], pos)
            tokens.append(tok)
            pos += 1
        timings["decode_ms_tok"] = (time.perf_counter() - t) * 1e3 / max(new_tokens - 1, 1)
        return tokens, timings




def run(label, pte, prompt_len, steps):
    decoder = Decoder(pte)
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, 200, (prompt_len,), generator=gen).tolist()
    tokens, timings = decoder.generate(prompt, steps + 1)
    print(f"ET {label} load_s {decoder.load_s:.2f}")
    print(f"ET {label} prefill_ms {timings['prefill_ms']:.1f}")
    print(f"ET {label} prefill_tok_s {prompt_len / max(timings['prefill_ms'], 1e-9) * 1e3:.1f}")
    print(f"ET {label} decode_ms_tok {timings['decode_ms_tok']:.1f}")
    print(f"ET {label} tokens {','.join(map(str, tokens[:8]))}")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "export-transformers":
        return export_transformers(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    if len(sys.argv) == 6 and sys.argv[1] == "run":
        return run(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
