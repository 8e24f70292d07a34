"""Goldens of a modified fixture model on the fixture's own inputs, shared by the quantization
test scripts (quantized_goldens.py, prequantized_checkpoints.py), and the one way the test
scripts load a causal LM as transformers' reference."""
import os
import sys

import torch
from safetensors.torch import load_file, save_file

# the fixture generators' rule for which attention implementation is the class's model
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "xtask", "python"))
from fixture_spec import attention_implementation, causal_lm_class  # noqa: E402


def load_causal_lm(folder):
    """A checkpoint in float32 with the attention implementation its goldens were made with."""
    return causal_lm_class(folder).from_pretrained(
        folder, dtype=torch.float32, attn_implementation=attention_implementation(folder)
    ).eval()


def save_goldens(model, fixture, path):
    """`model`'s logits on the `single` and `batch` inputs of `fixture`'s golden.safetensors,
    saved to `path` under the keys run_exports.py reads."""
    gold = load_file(f"{fixture}/golden.safetensors")
    out = {}
    for case in ["single", "batch"]:
        ids, mask = gold[f"{case}.input_ids"], gold[f"{case}.attention_mask"]
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits
        out.update({f"{case}.input_ids": ids, f"{case}.attention_mask": mask, f"{case}.logits": logits.float().contiguous()})
    save_file(out, path)
