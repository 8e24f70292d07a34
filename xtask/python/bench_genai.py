"""The ONNX Runtime GenAI side of `cargo xtask bench quant`.

usage: bench_genai.py run LABEL MODEL_DIR [PROMPT_LEN] [DECODE_STEPS]

A greedy loop in ONNX Runtime GenAI (`og.Model`, `og.Generator`, CPU) over a folder its builder
wrote (`python -m onnxruntime_genai.models.builder -p int4 -e cpu`): the prompt (PROMPT_LEN
deterministic token ids, default 128) goes in through one
`append_tokens` call (prefill), then 2 warm-up `generate_next_token` steps, then DECODE_STEPS
(default 64) timed steps. Prints `GENAI <label> <key> <value>` lines (load_s, prefill_ms,
prefill_tok_s, decode_ms_tok, tokens), like bench_generate.py's `GEN` lines.
"""
import sys
import time

import numpy as np
import onnxruntime_genai as og


def main():
    if len(sys.argv) < 4 or sys.argv[1] != "run":
        sys.exit(__doc__)
    label, folder = sys.argv[2], sys.argv[3]
    prompt_len = int(sys.argv[4]) if len(sys.argv) > 4 else 128
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 64
    say = lambda k, v: print(f"GENAI {label} {k} {v}", flush=True)
    t = time.perf_counter()
    model = og.Model(folder)
    say("load_s", f"{time.perf_counter() - t:.2f}")
    ids = (np.arange(prompt_len, dtype=np.int64) * 7919 + 11) % 30000 + 1
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=prompt_len + steps + 8, do_sample=False)
    gen = og.Generator(model, params)
    t = time.perf_counter()
    gen.append_tokens(ids[None, :])
    prefill = time.perf_counter() - t
    say("prefill_ms", f"{1e3 * prefill:.1f}")
    say("prefill_tok_s", f"{prompt_len / prefill:.1f}")
    for _ in range(2):
        gen.generate_next_token()
    t = time.perf_counter()
    for _ in range(steps):
        gen.generate_next_token()
    say("decode_ms_tok", f"{1e3 * (time.perf_counter() - t) / steps:.1f}")
    say("tokens", " ".join(str(int(x)) for x in gen.get_sequence(0)[prompt_len : prompt_len + 8]))


if __name__ == "__main__":
    main()
