"""GPTQ and AWQ checkpoints in their real packing, with goldens, for tests/quantized_exports.rs.

usage: prequantized_checkpoints.py FIXTURE_DIR OUT_DIR

Quantizes every linear of the fixture's decoder layers to 4 bits in groups of 32 (scales
float16) and writes three checkpoints under OUT_DIR, each a copy of the fixture whose quantized
modules store `qweight`, `qzeros`, `scales` (and GPTQ's `g_idx`) instead of `weight`:

- `gptq`: AutoGPTQ's format (`checkpoint_format` "gptq"), symmetric: zero points 8, stored as
  7 (the format keeps each zero point minus one); `qweight [in/8, out]` packs 8 inputs per
  int32, `qzeros [groups, out/8]` 8 outputs, nibble k at bits 4k;
- `gptq_v2`: asymmetric, zero points stored as they are (`checkpoint_format` "gptq_v2");
- `awq`: the AWQ GEMM layout, asymmetric: `qweight [in, out/8]` and `qzeros [groups, out/8]`
  with nibble k holding output column 8c + [0, 2, 4, 6, 1, 3, 5, 7][k].

Each folder's golden.safetensors holds transformers' logits of the fixture with every quantized
weight replaced by its dequantized value `(q - z) * s`, on the fixture's `single` and `batch`
inputs (the keys run_exports.py reads). The packing is written here from the formats'
definitions, independently of hfexport's reader.
"""
import json
import os
import shutil
import sys
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from fixture_goldens import load_causal_lm, save_goldens  # noqa: E402

GROUP = 32
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def quantize(w, symmetric):
    """q [out, in] in 0..15, z [out, groups], s [out, groups] float16."""
    out, inp = w.shape
    x = w.float().reshape(out, inp // GROUP, GROUP)
    if symmetric:
        s = x.abs().amax(-1) / 7.5
        z = torch.full_like(s, 8)
    else:
        lo, hi = x.amin(-1).clamp(max=0), x.amax(-1).clamp(min=0)
        s = (hi - lo) / 15
        z = torch.clamp(torch.round(-lo / s), 1, 15)
    s = s.half().float()
    q = torch.clamp(torch.round(x / s[..., None]) + z[..., None], 0, 15)
    return q.reshape(out, inp).to(torch.int64), z.to(torch.int64), s.half()


def pack(nibbles, order=range(8)):
    """[..., 8n] values -> [..., n] int32, nibble k holding element order[k] of each 8."""
    v = nibbles.reshape(*nibbles.shape[:-1], -1, 8)
    word = torch.zeros(v.shape[:-1], dtype=torch.int64)
    for k, j in enumerate(order):
        word |= v[..., j] << (4 * k)
    return torch.from_numpy(word.numpy().astype(np.uint32).view(np.int32))


def write(fixture, out, kind):
    model = load_causal_lm(fixture)
    tensors = {k: v.contiguous() for k, v in load_file(f"{fixture}/model.safetensors").items()}
    symmetric = kind == "gptq"
    for name, mod in model.named_modules():
        if not (isinstance(mod, torch.nn.Linear) and ".layers." in name):
            continue
        q, z, s = quantize(mod.weight.detach(), symmetric)
        groups = z.shape[1]
        del tensors[f"{name}.weight"]
        if kind == "awq":
            tensors[f"{name}.qweight"] = pack(q.t().contiguous(), AWQ_ORDER)
            tensors[f"{name}.qzeros"] = pack(z.t().contiguous(), AWQ_ORDER)
        else:
            stored = z - 1 if kind == "gptq" else z
            # [in/8, out]: word (r, o) packs inputs 8r..8r+8 of output o
            by_input = q.t().contiguous().reshape(-1, 8, q.shape[0]).transpose(1, 2)
            tensors[f"{name}.qweight"] = pack(by_input).squeeze(-1).contiguous()
            tensors[f"{name}.qzeros"] = pack(stored.t().contiguous())
            tensors[f"{name}.g_idx"] = torch.arange(q.shape[1], dtype=torch.int32) // GROUP
        tensors[f"{name}.scales"] = s.t().contiguous()
        deq = (q - z.repeat_interleave(GROUP, 1)).float() * s.float().repeat_interleave(GROUP, 1)
        mod.weight = torch.nn.Parameter(deq)
        assert groups * GROUP == q.shape[1]
    os.makedirs(out, exist_ok=True)
    for f in ["generation_config.json"]:
        if os.path.exists(f"{fixture}/{f}"):
            shutil.copy(f"{fixture}/{f}", out)
    config = json.load(open(f"{fixture}/config.json"))
    config["quantization_config"] = (
        {"quant_method": "awq", "bits": 4, "group_size": GROUP, "version": "gemm", "zero_point": True}
        if kind == "awq"
        else {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": False, "sym": symmetric,
              "checkpoint_format": kind}
    )
    json.dump(config, open(f"{out}/config.json", "w"), indent=1)
    save_file(tensors, f"{out}/model.safetensors", metadata={"format": "pt"})
    save_goldens(model, fixture, f"{out}/golden.safetensors")


def main():
    fixture, out = sys.argv[1:3]
    for kind in ["gptq", "gptq_v2", "awq"]:
        write(fixture, os.path.join(out, kind), kind)


if __name__ == "__main__":
    main()
