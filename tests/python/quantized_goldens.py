"""Goldens of quantized exports: transformers run on a checkpoint's weights fake-quantized by a
recipe in torch, for the Rust test suite (tests/quantized_exports.rs).

usage: quantized_goldens.py JOBS.json

JOBS: a list of {"fixture": DIR, "recipe": {...}, "out": GOLDEN.safetensors, "xnnpack": bool,
"save": DIR (optional: the fake-quantized model saved there with its golden)}. The recipe is
hfexport's normalised quantizer dict (weights int4|int8, group_size N|"channel", symmetric,
lm_head/embeddings int8|int4|null, exclude). Each golden holds the fixture's `single` and
`batch` inputs with the logits of the quantized model, under the keys run_exports.py reads.

The arithmetic is the documented recipe (crates/hfexport-quant/src/rtn.rs), written here
independently: per row, per group of `group` input elements, in float32, torch.round (half to
even); symmetric 4-bit s = v / -8 (v the group's value of largest magnitude, first on ties),
symmetric 8-bit s = max|w| / 127, asymmetric s = (max(w, 0) - min(w, 0)) / (2^b - 1) with
zero point round(-min / s); a zero group stays zero. With "xnnpack" (ExecuTorch's form, torchao's
8da4w/8da8w convention, positive scales), symmetric scales are max(max|w| / 7.5, eps) for 4 bits
and max(max|w| / 127, eps) for 8, group-wise ones rounded to bfloat16 before quantizing.
"""
import json
import sys
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402
from fixture_goldens import load_causal_lm, save_goldens  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers.pytorch_utils import Conv1D  # noqa: E402


def fake_quant(w, bits, group, symmetric, xnnpack=False):
    rows, cols = w.shape
    g = group or cols
    x = w.detach().float().reshape(rows, cols // g, g)
    if symmetric and xnnpack:
        eps = torch.finfo(torch.float32).eps
        s = torch.clamp(x.abs().amax(-1, keepdim=True) / (7.5 if bits == 4 else 127), min=eps)
        if group is not None:
            s = s.to(torch.bfloat16).float()
        lo, hi = (-8, 7) if bits == 4 else (-127, 127)
        deq = torch.clamp(torch.round(x / s), lo, hi) * s
    elif symmetric:
        if bits == 4:
            v = x.gather(-1, x.abs().argmax(-1, keepdim=True))
            s, lo, hi = v / -8, -8, 7
        else:
            s, lo, hi = x.abs().amax(-1, keepdim=True) / 127, -127, 127
        safe = torch.where(s == 0, torch.ones_like(s), s)
        q = torch.where(s == 0, torch.zeros_like(x), torch.clamp(torch.round(x / safe), lo, hi))
        deq = q * s
    else:
        levels = 2**bits - 1
        mn = x.amin(-1, keepdim=True).clamp(max=0)
        mx = x.amax(-1, keepdim=True).clamp(min=0)
        s = (mx - mn) / levels
        safe = torch.where(s == 0, torch.ones_like(s), s)
        z = torch.where(s == 0, torch.zeros_like(s), torch.clamp(torch.round(-mn / safe), 0, levels))
        q = torch.where(s == 0, z.expand_as(x), torch.clamp(torch.round(x / safe) + z, 0, levels))
        deq = (q - z) * s
    return deq.reshape(rows, cols).to(w.dtype)


def scheme(spec, recipe):
    """(bits, group, symmetric) of a side scheme ("int8" per channel, "int4" in the recipe's groups)."""
    if spec is None:
        return None
    if spec == "int8":
        return (8, None, True, recipe["xnnpack"])
    return (4, recipe_group(recipe) or 32, recipe["symmetric"], recipe["xnnpack"])


def recipe_group(recipe):
    g = recipe["group_size"]
    return None if g == "channel" else g


def excluded(name, recipe):
    return any(name == e or name.startswith(e + ".") for e in recipe.get("exclude", []))


def router(name, mod):
    """Llama 4's router is an nn.Linear, Gemma 4's has one (`router.proj`); the exports keep every
    router float (a `Moe` input, as the other families' router modules, which are not linears)."""
    return type(mod).__name__ == "Llama4Router" or name.endswith("router.proj")


def quantize_model(model, recipe, xnnpack):
    bits = 4 if recipe["weights"] == "int4" else 8
    layer = (bits, recipe_group(recipe), recipe["symmetric"], xnnpack)
    head = scheme(recipe.get("lm_head"), recipe)
    embed = scheme(recipe.get("embeddings"), recipe)
    emb = model.get_input_embeddings()
    out = model.get_output_embeddings()
    # untie first: the head and the embeddings are quantized (or not) each by its own scheme
    if out is not None and out.weight is emb.weight:
        out.weight = torch.nn.Parameter(emb.weight.detach().clone())
    for name, mod in model.named_modules():
        if excluded(name, recipe):
            continue
        if mod is out:
            if head:
                mod.weight = torch.nn.Parameter(fake_quant(mod.weight, *head))
        elif mod is emb or name.endswith("embed_tokens_per_layer"):
            # (Gemma 4's per-layer embeddings are looked up by the token ids too)
            if embed:
                mod.weight = torch.nn.Parameter(fake_quant(mod.weight, *embed))
        elif isinstance(mod, torch.nn.Linear) and mod.weight.numel() > 0 and not router(name, mod):
            # (DeepSeek builds its shared MLP of `n_shared_experts` 0 with empty linears)
            mod.weight = torch.nn.Parameter(fake_quant(mod.weight, *layer))
        elif isinstance(mod, Conv1D):
            # GPT-2's linears store [in, out]: quantized per output channel like the others
            mod.weight = torch.nn.Parameter(fake_quant(mod.weight.t(), *layer).t().contiguous())


def float_blocks_as_weights(folder):
    """transformers 5.23 saves a GPT-OSS model it dequantized from MXFP4 with its float experts
    under the `*_blocks` names and no quantization_config, which it then cannot load (the
    experts are re-initialised): the float tensors take their own names back."""
    path = f"{folder}/model.safetensors"
    tensors = load_file(path)
    bad = [n for n, t in tensors.items() if n.endswith("_blocks") and t.is_floating_point()]
    if bad:
        for name in bad:
            tensors[name.removesuffix("_blocks")] = tensors.pop(name)
        save_file(tensors, path, metadata={"format": "pt"})


def main():
    for job in json.load(open(sys.argv[1])):
        model = load_causal_lm(job["fixture"])
        xnnpack = job.get("xnnpack", False)
        quantize_model(model, dict(job["recipe"], xnnpack=xnnpack), xnnpack)
        save_goldens(model, job["fixture"], job["out"])
        if job.get("save"):
            # the fake-quantized model as a checkpoint (its golden beside it), for generate()
            model.save_pretrained(job["save"])
            float_blocks_as_weights(job["save"])
            save_goldens(model, job["fixture"], f"{job['save']}/golden.safetensors")


if __name__ == "__main__":
    main()
