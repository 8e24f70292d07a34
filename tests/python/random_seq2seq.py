#!/usr/bin/env python3
"""Random Whisper checkpoints with transformers' outputs, for tests/speech_generation.rs.

Usage: random_whisper.py OUTDIR --seed S --count N

Writes N folders (save_pretrained of a randomly configured WhisperForConditionalGeneration) with
golden.safetensors: `input_features` [1, num_mel_bins, 2 * max_source_positions], the encoder's
`encoder_hidden_states`, and `tokens`: 8 tokens of plain greedy decoding (the whole sequence
recomputed every step, no cache, from decoder_start_token_id). OUTDIR/index.json lists
{name, dir, description}. The sampled space: d_model from heads x head_dim with encoder and
decoder heads dividing it independently, 1-3 layers on each side, any FFN widths, mel bins
(including Whisper's 80 and 128), source and target lengths, the activations the config accepts,
tied or untied proj_out, and the decoder start token.
"""

import json

import torch
import transformers
from safetensors.torch import save_file

import random_cases

ACTS = ["gelu", "gelu_new", "relu", "silu", "gelu_pytorch_tanh", "quick_gelu"]
STD = 0.15
TOKENS = 8


def sample(rng):
    d_model = rng.choice([8, 12, 16, 24, 32, 48])
    heads = [h for h in (1, 2, 3, 4, 6, 8) if d_model % h == 0]
    vocab = rng.randint(30, 120)
    return dict(
        vocab_size=vocab,
        d_model=d_model,
        encoder_layers=rng.randint(1, 3),
        decoder_layers=rng.randint(1, 3),
        encoder_attention_heads=rng.choice(heads),
        decoder_attention_heads=rng.choice(heads),
        encoder_ffn_dim=rng.randint(4, 64),
        decoder_ffn_dim=rng.randint(4, 64),
        num_mel_bins=rng.choice([4, 7, 16, 80, 128]),
        max_source_positions=rng.randint(2, 16),
        max_target_positions=rng.randint(TOKENS + 4, 48),
        activation_function=rng.choice(ACTS),
        tie_word_embeddings=rng.random() < 0.6,
        decoder_start_token_id=rng.randint(0, vocab - 1),
        pad_token_id=0, bos_token_id=0, eos_token_id=0,
        suppress_tokens=None, begin_suppress_tokens=None,
    )


def main():
    cases = []
    for out, i, seed, rng in random_cases.cases(6):
        kw = sample(rng)
        config = transformers.WhisperConfig(**kw)
        config._attn_implementation = "eager"
        torch.manual_seed(seed)
        model = transformers.WhisperForConditionalGeneration(config).eval()
        with torch.no_grad():
            for name, p in model.named_parameters():
                noise = torch.randn_like(p) * STD
                p.copy_(1.0 + noise if "layer_norm" in name and name.endswith("weight") else noise)
            model.model.decoder.embed_positions.weight.mul_(1.0 / STD)
        name = f"{i:02d}-whisper"
        folder = out / name
        model.save_pretrained(folder, safe_serialization=True)
        model = transformers.WhisperForConditionalGeneration.from_pretrained(folder, attn_implementation="eager").eval()
        gen = torch.Generator().manual_seed(i)
        feats = torch.randn((1, kw["num_mel_bins"], 2 * kw["max_source_positions"]), generator=gen)
        ids = torch.tensor([[kw["decoder_start_token_id"]]])
        with torch.no_grad():
            states = model.model.encoder(input_features=feats).last_hidden_state
            for _ in range(TOKENS):
                logits = model(input_features=feats, decoder_input_ids=ids, use_cache=False).logits
                ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        golden = {"input_features": feats, "encoder_hidden_states": states.contiguous(), "tokens": ids[0, 1:].contiguous()}
        save_file(golden, str(folder / "golden.safetensors"))
        desc = "WhisperForConditionalGeneration " + json.dumps({k: v for k, v in kw.items() if "suppress" not in k})
        cases.append({"name": name, "dir": name, "description": desc})
        print(desc)
    (out / "index.json").write_text(json.dumps({"cases": cases}, indent=1))


if __name__ == "__main__":
    main()
