#!/usr/bin/env python3
"""Random Qwen2-VL checkpoints with transformers' outputs, for tests/vision_language.rs.

Usage: random_qwen2vl.py OUTDIR --seed S --count N

Case 0 is the same small checkpoint every run; the others sample the config space: text widths,
heads, kv heads, layers, tied heads, rope thetas and `mrope_section` splits; towers of 1-3 blocks,
widths, heads, MLP ratios, patch sizes, merge sizes 1-3, temporal patch sizes 1-2; some cases
rewritten to the module names (`model.visual.`, `model.language_model.`) instead of the layout
save_pretrained writes, some configs to the hub files' flat form (text keys at the top level,
`rope_scaling` of type `mrope`, `in_chans`). Each folder holds the checkpoint, the `preprocessor_config.json` of
transformers' Qwen2-VL image processor (PIL backend), two PNGs (`small.png`, which smart_resize
scales up to min_pixels, and `wide.png`, resized to multiples of patch x merge; `thin.png`,
1x250, which the processor refuses) and
golden.safetensors:
- `pixel_values` `[patches, C*T*P*P]` and `image_grid_thw` `[2, 3]`: the processor's output
  for both images;
- `image_embeds` `[patches / merge^2, hidden]`: the vision tower with its merger;
- `prompt`: text ids with `<|vision_start|><|image_pad|><|vision_end|>` per image, and
  `expanded`: each image pad repeated for its image's merged patches, as Qwen2VLProcessor does;
- `rope_positions` `[3, len(expanded)]`: `get_rope_index`'s positions of the expanded prompt;
- `tokens`: 16 tokens of plain greedy decoding on `expanded` with both images (the whole
  sequence recomputed each step, no cache).
OUTDIR/index.json lists {name, dir, description}.
"""

import json

import numpy as np
import torch
import transformers
from PIL import Image
from safetensors.torch import save_file

import random_cases

STD = 0.15
TOKENS = 16


def fixed():
    text = dict(vocab_size=80, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=False,
                rope_parameters={"rope_type": "mrope", "mrope_section": [1, 1, 2], "rope_theta": 10000.0})
    vision = dict(depth=2, embed_dim=16, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=2,
                  spatial_merge_size=2, temporal_patch_size=2, in_channels=3)
    return dict(text=text, vision=vision, min_pixels=8 * 8, max_pixels=16 * 16, memory_keys=False, hub_config=False)


def sampled(rng):
    heads = rng.choice([1, 2, 4])
    head_dim = rng.choice([8, 12, 16])
    hidden = heads * head_dim
    half = head_dim // 2
    a = rng.randint(1, half - 2)
    b = rng.randint(1, half - a - 1)
    text = dict(vocab_size=rng.randint(40, 120), hidden_size=hidden, intermediate_size=rng.randint(8, 64),
                num_hidden_layers=rng.randint(1, 3), num_attention_heads=heads,
                num_key_value_heads=rng.choice([h for h in (1, 2, 4) if heads % h == 0]),
                max_position_embeddings=512, tie_word_embeddings=rng.random() < 0.4,
                rope_parameters={"rope_type": "mrope", "mrope_section": [a, b, half - a - b],
                                 "rope_theta": rng.choice([10000.0, 1000000.0])})
    vheads = rng.choice([1, 2, 4])
    vision = dict(depth=rng.randint(1, 3), embed_dim=vheads * rng.choice([4, 8]), hidden_size=hidden,
                  num_heads=vheads, mlp_ratio=rng.choice([1, 2, 4]), patch_size=rng.choice([2, 3, 4]),
                  spatial_merge_size=rng.choice([1, 2, 3]), temporal_patch_size=rng.choice([1, 2]), in_channels=3,
                  hidden_act=rng.choice(["quick_gelu", "gelu"]))
    factor = vision["patch_size"] * vision["spatial_merge_size"]
    lo = factor * factor * rng.randint(1, 4)
    return dict(text=text, vision=vision, min_pixels=lo, max_pixels=lo * rng.randint(2, 8),
                memory_keys=rng.random() < 0.4, hub_config=rng.random() < 0.5)


def build(kw, seed, folder):
    vocab = kw["text"]["vocab_size"]
    config = transformers.Qwen2VLConfig(
        text_config={**kw["text"], "bos_token_id": 1, "eos_token_id": None, "pad_token_id": None},
        vision_config=kw["vision"], image_token_id=vocab - 1, vision_start_token_id=vocab - 2,
        vision_end_token_id=vocab - 3, video_token_id=vocab - 4,
        tie_word_embeddings=kw["text"]["tie_word_embeddings"])
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = transformers.Qwen2VLForConditionalGeneration(config).eval()
    random_cases.randomize(model, STD, ("norm", "ln_q"))
    model.save_pretrained(folder, safe_serialization=True)
    if kw["memory_keys"]:
        random_cases.save_module_names(model, folder, kw["text"]["tie_word_embeddings"])
    if kw["hub_config"]:
        hub_config(folder)
    return transformers.Qwen2VLForConditionalGeneration.from_pretrained(folder, attn_implementation="eager").eval()


def hub_config(folder):
    """Rewrites config.json the way the hub's Qwen2-VL files are: the text keys at the top level,
    `rope_scaling` {type: mrope, mrope_section} and `rope_theta`, the vision tower's `in_chans`
    and model_type `qwen2_vl`."""
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    text = cfg.pop("text_config")
    rope = text.pop("rope_parameters")
    text.pop("model_type", None)
    cfg.update(text)
    cfg["rope_theta"] = rope["rope_theta"]
    cfg["rope_scaling"] = {"type": "mrope", "mrope_section": rope["mrope_section"]}
    vision = cfg["vision_config"]
    vision["in_chans"] = vision.pop("in_channels")
    vision["model_type"] = "qwen2_vl"
    vision.pop("rope_parameters", None)
    path.write_text(json.dumps(cfg, indent=2))


def main():
    cases = []
    for out, i, seed, rng in random_cases.cases(4):
        kw = fixed() if i == 0 else sampled(rng)
        name = f"{i:02d}-qwen2vl"
        folder = out / name
        model = build(kw, seed, folder)
        v = kw["vision"]
        processor = transformers.Qwen2VLImageProcessorPil(
            size={"shortest_edge": kw["min_pixels"], "longest_edge": kw["max_pixels"]}, patch_size=v["patch_size"],
            merge_size=v["spatial_merge_size"], temporal_patch_size=v["temporal_patch_size"])
        processor.save_pretrained(folder)
        gen = np.random.default_rng(rng.randint(0, 1 << 30))
        pics = []
        for pic, (w, h) in (("small", (3, 2)), ("wide", (37, 17))):
            Image.fromarray(gen.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(folder / f"{pic}.png")
            pics.append(Image.open(folder / f"{pic}.png").convert("RGB"))
        # one the processor refuses (aspect ratio above 200), for the error tests
        Image.fromarray(np.zeros((1, 250, 3), dtype=np.uint8)).save(folder / "thin.png")
        feat = processor(images=pics, return_tensors="pt")
        pixels, grid = feat["pixel_values"], feat["image_grid_thw"]
        cfg = model.config
        merge = v["spatial_merge_size"]
        with torch.no_grad():
            embeds = model.model.visual(pixels, grid_thw=grid).pooler_output
        counts = [int(t * h * w) // (merge * merge) for t, h, w in grid.tolist()]
        vocab = kw["text"]["vocab_size"]
        g = torch.Generator().manual_seed(seed)
        words = lambda n: torch.randint(2, vocab - 4, (n,), generator=g).tolist()
        start, end, pad = cfg.vision_start_token_id, cfg.vision_end_token_id, cfg.image_token_id
        prompt = [1] + words(3) + [start, pad, end] + words(2) + [start, pad, end] + words(4)
        expanded, k = [], 0
        for tok in prompt:
            if tok == pad:
                expanded += [pad] * counts[k]
                k += 1
            else:
                expanded.append(tok)
        ids = torch.tensor([expanded])
        types = (ids == pad).int()
        positions, _ = model.model.get_rope_index(ids, types, image_grid_thw=grid)
        with torch.no_grad():
            for _ in range(TOKENS):
                types = (ids == pad).int()
                logits = model(input_ids=ids, pixel_values=pixels, image_grid_thw=grid, mm_token_type_ids=types,
                               use_cache=False).logits
                ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        golden = {
            "pixel_values": pixels.contiguous(),
            "image_grid_thw": grid.contiguous(),
            "image_embeds": embeds.contiguous(),
            "prompt": torch.tensor(prompt),
            "expanded": torch.tensor(expanded),
            "rope_positions": positions[:, 0].contiguous(),
            "tokens": ids[0, len(expanded):].contiguous(),
        }
        save_file(golden, str(folder / "golden.safetensors"))
        desc = "Qwen2VLForConditionalGeneration " + json.dumps(kw) + f" grids {grid.tolist()}"
        cases.append({"name": name, "dir": name, "description": desc})
        print(desc)
    (out / "index.json").write_text(json.dumps({"cases": cases}, indent=1))


if __name__ == "__main__":
    main()
