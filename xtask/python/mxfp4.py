"""GPT-OSS's experts stored as the hub stores them: MXFP4 blocks (OCP microscaling, 32 FP4 E2M1
values sharing one E8M0 exponent), `<proj>_blocks [E, out, in / 32, 16]` (two codes per byte,
the even element in the low nibble) and `<proj>_scales [E, out, in / 32]`, of the `[out, in]`
rows of transformers' in-memory `[E, in, out]` weights; `quantization_config.quant_method`
"mxfp4". transformers dequantizes them on load (`integrations/mxfp4.py`) where it has no MXFP4
kernels, CPUs among them; that is the model the goldens come from."""

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

FP4_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
PROJECTIONS = ("gate_up_proj", "down_proj")


def quantize(rows):
    """`rows [..., n]` (n a multiple of 32) -> (blocks u8 [..., n / 32, 16], scales u8 [..., n / 32]):
    each group's exponent the smallest that fits its largest magnitude within 6, each value the
    nearest FP4 code."""
    groups = rows.float().reshape(*rows.shape[:-1], rows.shape[-1] // 32, 32)
    amax = groups.abs().amax(-1).clamp(min=2.0**-100)
    exponent = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
    scaled = groups / torch.pow(2.0, exponent)[..., None]
    codes = (scaled[..., None] - FP4_VALUES).abs().argmin(-1).to(torch.uint8)
    blocks = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return blocks.contiguous(), (exponent + 127).to(torch.uint8).contiguous()


def store_experts_as_mxfp4(folder):
    """Rewrites `folder` (a GPT-OSS checkpoint saved by transformers) in the hub's MXFP4 form."""
    folder = Path(folder)
    path = folder / "model.safetensors"
    tensors = load_file(path)
    for name in [n for n in tensors if n.endswith(tuple(f"experts.{p}" for p in PROJECTIONS))]:
        rows = tensors.pop(name).transpose(1, 2)  # [E, in, out] -> the [E, out, in] rows
        tensors[f"{name}_blocks"], tensors[f"{name}_scales"] = quantize(rows)
    save_file(tensors, str(path), metadata={"format": "pt"})
    cfg_path = folder / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["quantization_config"] = {
        "quant_method": "mxfp4",
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"],
    }
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
