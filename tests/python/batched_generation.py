"""transformers' generate over a left-padded batch and with beam search, for the client tests
(tests/clients.rs): what optimum-intel's OVModelForCausalLM must reproduce over our exports.

usage: batched_generation.py OUT.json FIXTURE_DIR...
Writes {fixture_dir: {"batch": {"input_ids", "attention_mask", "tokens"}, "beams": {...}}}.
"""

import json
import sys

import torch
import transformers

NEW_TOKENS = 8


def main():
    out, folders = sys.argv[1], sys.argv[2:]
    torch.manual_seed(0)
    result = {}
    for folder in folders:
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                                  attn_implementation="eager").eval()
        vocab = model.config.get_text_config().vocab_size
        ids = torch.randint(3, vocab, (2, 6))
        mask = torch.ones_like(ids)
        mask[1, :2] = 0  # row 1 is two tokens shorter, padded on the left
        ids[1, :2] = 0
        cases = {"batch": (ids, mask, {}), "beams": (ids[:1], mask[:1], {"num_beams": 2})}
        result[folder] = {}
        for name, (i, m, extra) in cases.items():
            with torch.no_grad():
                tokens = model.generate(i, attention_mask=m, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                        do_sample=False, eos_token_id=None, pad_token_id=0, **extra)
            result[folder][name] = {"input_ids": i.tolist(), "attention_mask": m.tolist(),
                                    "tokens": tokens[:, i.shape[1]:].tolist()}
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
