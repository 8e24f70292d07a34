"""What the random-checkpoint scripts share: their command line and the seeded loop over cases."""

import argparse
import random
from pathlib import Path

import torch
import transformers


def cases(default_count):
    """Parses `OUTDIR --seed S --count N`, quiets transformers, and yields (OUTDIR, i, rng) for
    each case with an rng seeded by (S, i)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=default_count)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    for i in range(a.count):
        yield out, i, a.seed * 1000 + i, random.Random(a.seed * 1000 + i)


def save_module_names(model, folder, tied):
    """Rewrites folder's model.safetensors under the module names (`model.language_model.`,
    `model.visual.`, …) instead of the layout save_pretrained writes; a tied head is not stored."""
    from safetensors.torch import save_file

    weights = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    if tied:
        del weights["lm_head.weight"]
    (folder / "model.safetensors").unlink()
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})


def randomize(model, std, norm_keys):
    """Gives every parameter fresh normal noise of `std`; the weights of norms (names holding one
    of `norm_keys`) 1 + noise, so activations keep their scale through the layers."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn_like(p) * std
            is_norm = any(k in name for k in norm_keys) and name.endswith("weight")
            p.copy_(1.0 + noise if is_norm else noise)
