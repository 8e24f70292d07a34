"""Greedy generation in ONNX Runtime GenAI over hfexport `--genai` folders, for the Rust test suite.

usage: generate_genai.py JOBS.json OUT.json

JOBS is a list of [EXPORT_DIR, PROMPT_IDS, NEW_TOKENS]; OUT maps each EXPORT_DIR to the new
tokens GenAI produced. Each folder is loaded as a GenAI user loads it, `og.Model(dir)` with
nothing but its genai_config.json; the prompt goes in through one `append_tokens` call (the
decoder over an empty past), then `generate_next_token` until GenAI is done: NEW_TOKENS
tokens, or fewer when it met an EOS token of the config.
"""
import json
import sys

import numpy as np
import onnxruntime_genai as og


def generate(folder, prompt, new_tokens):
    model = og.Model(folder)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + new_tokens, do_sample=False)
    gen = og.Generator(model, params)
    gen.append_tokens(np.array([prompt], dtype=np.int32))
    while not gen.is_done():
        gen.generate_next_token()
    return [int(t) for t in gen.get_sequence(0)[len(prompt) :]]


def main():
    jobs, out = sys.argv[1:3]
    result = {folder: generate(folder, prompt, n) for folder, prompt, n in json.load(open(jobs))}
    json.dump(result, open(out, "w"))


if __name__ == "__main__":
    main()
