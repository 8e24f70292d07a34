"""Goldens of a modified fixture model on the fixture's own inputs, shared by the quantization
test scripts (quantized_goldens.py, prequantized_checkpoints.py)."""
import torch
from safetensors.torch import load_file, save_file


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
