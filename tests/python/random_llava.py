#!/usr/bin/env python3
"""Random LLaVA checkpoints with transformers' outputs, for tests/vision_language.rs and the
CLI's tests/vision_language.rs.

Usage: random_llava.py OUTDIR --seed S --count N

Case 0 is the same small checkpoint every run (the one every runtime generates with); the others
sample the config space. Each folder holds save_pretrained of a LlavaForConditionalGeneration
(which writes `language_model.model.`, `language_model.lm_head`, `vision_tower.`,
`multi_modal_projector.`; some cases rewritten to the module names: `model.language_model.`,
`lm_head`, `model.vision_tower.vision_model.`, `model.multi_modal_projector.`), the
`preprocessor_config.json` transformers' CLIP image processor (PIL backend) writes, two PNGs
(case 0 also a word tokenizer: `w<n>` is id n, `<image>` the placeholder) (`exact.png` at the
crop size, which no resize touches; `wide.png`, resized on its shortest
edge and centre-cropped), a JPEG (`photo.jpg`) and golden.safetensors:
- `pixel_values.exact`, `pixel_values.wide`, `pixel_values.photo` `[1, 3, H, W]`: the image
  processor's output;
- `image_features` `[2, rows, width]`: the vision tower's selected hidden states for both images
  (what `get_image_features` projects), `image_embeds` `[2, rows, hidden]` after the projector;
- `prompt`: token ids with one image placeholder per image (exact first, then wide), and
  `expanded`: the same with each placeholder repeated `rows` times, as LlavaProcessor expands it;
- `tokens`: 16 tokens of plain greedy decoding on `expanded` with both images (the whole
  sequence recomputed each step, no cache).

Sampled: text families llama, mistral, qwen2 (widths, heads, kv heads, tied heads), towers of
1-3 layers, widths, heads, patch sizes, image sizes; `vision_feature_layer` an index from either
end or a list; `default` or `full` strategy; projector activations and biases; resize sizes
larger than the crop. OUTDIR/index.json lists {name, dir, description}.
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
    text = dict(model_type="llama", vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=False)
    vision = dict(model_type="clip_vision_model", hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                  num_attention_heads=4, image_size=16, patch_size=4, num_channels=3)
    return dict(text=text, vision=vision, top=dict(vision_feature_layer=-2, vision_feature_select_strategy="default",
                                                   projector_hidden_act="gelu", multimodal_projector_bias=True),
                resize=16, memory_keys=False)


def sampled(rng):
    heads = rng.choice([1, 2, 4])
    hidden = heads * rng.choice([4, 8, 12])
    family = rng.choice(["llama", "mistral", "qwen2"])
    text = dict(model_type=family, vocab_size=rng.randint(40, 120), hidden_size=hidden,
                intermediate_size=rng.randint(8, 64), num_hidden_layers=rng.randint(1, 3),
                num_attention_heads=heads, num_key_value_heads=rng.choice([h for h in (1, 2, 4) if heads % h == 0]),
                max_position_embeddings=512, tie_word_embeddings=rng.random() < 0.4)
    if family == "mistral":
        text["sliding_window"] = None
    vh = rng.choice([1, 2, 3]) * rng.choice([4, 8])
    vheads = rng.choice([h for h in (1, 2, 4) if vh % h == 0])
    patch = rng.choice([2, 3, 4, 5])
    side = patch * rng.randint(2, 4)
    layers = rng.randint(1, 3)
    vision = dict(model_type="clip_vision_model", hidden_size=vh, intermediate_size=rng.randint(8, 48),
                  num_hidden_layers=layers, num_attention_heads=vheads, image_size=side, patch_size=patch,
                  num_channels=3, hidden_act=rng.choice(["quick_gelu", "gelu"]),
                  layer_norm_eps=rng.choice([1e-5, 1e-6]))
    # 0 (the embeddings) is valid in the config, but 5.23 then captures no hidden states and fails
    feature = rng.choice([-1, -2, 1, layers, [-1, 1], [-2, -1]])
    if isinstance(feature, int) and feature < -layers - 1:
        feature = -1
    top = dict(vision_feature_layer=feature, vision_feature_select_strategy=rng.choice(["default", "full"]),
               projector_hidden_act=rng.choice(["gelu", "relu", "quick_gelu"]),
               multimodal_projector_bias=rng.random() < 0.7)
    return dict(text=text, vision=vision, top=top, resize=side + rng.choice([0, 0, 1, 3]), memory_keys=rng.random() < 0.4)


def build(kw, seed, folder):
    text = kw["text"]
    config = transformers.LlavaConfig(
        text_config={**text, "bos_token_id": 1, "eos_token_id": None, "pad_token_id": None},
        vision_config=kw["vision"], image_token_index=text["vocab_size"] - 1, image_seq_length=1,
        tie_word_embeddings=text["tie_word_embeddings"], **kw["top"])
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = transformers.LlavaForConditionalGeneration(config).eval()
    random_cases.randomize(model, STD, ("norm", "layrnorm"))
    model.save_pretrained(folder, safe_serialization=True)
    if kw["memory_keys"]:
        random_cases.save_module_names(model, folder, text["tie_word_embeddings"])
    return transformers.LlavaForConditionalGeneration.from_pretrained(folder, attn_implementation="eager").eval()


def word_tokenizer(vocab, image_token):
    """A tokenizer.json for `generate --prompt`: words `w2`..`w<vocab-2>` are their ids and
    `<image>` the image placeholder (a special token, matched before the whitespace split)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = {"<unk>": 0, "<s>": 1, **{f"w{i}": i for i in range(2, vocab - 1)}, "<image>": image_token}
    tok = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["<image>"])
    return tok


def images(folder, side, rng):
    """`exact.png` at the crop size and `wide.png` (wider and taller than the resize) of noise."""
    gen = np.random.default_rng(rng.randint(0, 1 << 30))
    made = {}
    for name, (w, h) in (("exact", (side, side)), ("wide", (side * 2 + 3, side + 5))):
        arr = gen.integers(0, 256, (h, w, 3), dtype=np.uint8)
        Image.fromarray(arr).save(folder / f"{name}.png")
        made[name] = Image.open(folder / f"{name}.png").convert("RGB")
    # a smooth photo-like picture as JPEG (decoders agree on it to a level or so)
    y, x = np.mgrid[0:side * 3, 0:side * 4]
    arr = np.stack([(x * 7 + y * 3) % 256, (x * 2 + y * 5) % 256, (x * y) % 256], axis=-1).astype(np.uint8)
    Image.fromarray(arr).save(folder / "photo.jpg", quality=95)
    made["photo"] = Image.open(folder / "photo.jpg").convert("RGB")
    return made


def main():
    cases = []
    for out, i, seed, rng in random_cases.cases(6):
        kw = fixed() if i == 0 else sampled(rng)
        name = f"{i:02d}-llava-{kw['text']['model_type']}"
        folder = out / name
        model = build(kw, seed, folder)
        side = kw["vision"]["image_size"]
        processor = transformers.CLIPImageProcessorPil(size={"shortest_edge": kw["resize"]},
                                                       crop_size={"height": side, "width": side})
        processor.save_pretrained(folder)
        if i == 0:
            word_tokenizer(kw["text"]["vocab_size"], model.config.image_token_index).save(str(folder / "tokenizer.json"))
        pics = images(folder, side, rng)
        pixels = {n: processor(images=img, return_tensors="pt")["pixel_values"] for n, img in pics.items()}
        both = torch.cat([pixels["exact"], pixels["wide"]])
        cfg = model.config
        with torch.no_grad():
            tower = model.model.vision_tower(both, output_hidden_states=True)
            layers = cfg.vision_feature_layer if isinstance(cfg.vision_feature_layer, list) else [cfg.vision_feature_layer]
            hs = [tower.hidden_states[l] for l in layers]
            if cfg.vision_feature_select_strategy == "default":
                hs = [h[:, 1:] for h in hs]
            features = torch.cat(hs, dim=-1)
            embeds = model.model.multi_modal_projector(features)
        rows = features.shape[1]
        img = cfg.image_token_index
        vocab = kw["text"]["vocab_size"]
        g = torch.Generator().manual_seed(seed)
        words = lambda n: torch.randint(2, vocab - 1, (n,), generator=g).tolist()
        prompt = [1] + words(3) + [img] + words(2) + [img] + words(4)
        expanded = [t for tok in prompt for t in ([tok] * rows if tok == img else [tok])]
        ids = torch.tensor([expanded])
        with torch.no_grad():
            for _ in range(TOKENS):
                logits = model(input_ids=ids, pixel_values=both, use_cache=False).logits
                ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        golden = {
            "pixel_values.exact": pixels["exact"].contiguous(),
            "pixel_values.wide": pixels["wide"].contiguous(),
            "pixel_values.photo": pixels["photo"].contiguous(),
            "image_features": features.contiguous(),
            "image_embeds": embeds.contiguous(),
            "prompt": torch.tensor(prompt),
            "expanded": torch.tensor(expanded),
            "tokens": ids[0, len(expanded):].contiguous(),
        }
        save_file(golden, str(folder / "golden.safetensors"))
        desc = "LlavaForConditionalGeneration " + json.dumps(kw)
        cases.append({"name": name, "dir": name, "description": desc})
        print(desc)
    (out / "index.json").write_text(json.dumps({"cases": cases}, indent=1))


if __name__ == "__main__":
    main()
