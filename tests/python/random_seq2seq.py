#!/usr/bin/env python3
"""Random encoder-decoder checkpoints (Whisper, T5, BART, mBART, Marian, Pegasus and M2M100, dealt
in turn) with transformers'
outputs, for tests/seq2seq_generation.rs.

Usage: random_seq2seq.py OUTDIR --seed S --count N

Writes N folders (save_pretrained of a randomly configured model of one of those classes) with
golden.safetensors: the encoder inputs (Whisper's `input_features` [1, num_mel_bins, 2 *
max_source_positions]; the text models' `input_ids` and an all-ones `attention_mask` [1, L]), the encoder's `encoder_hidden_states`, and `tokens`: 8 tokens of plain
greedy decoding (the whole sequence recomputed every step, no cache, from
decoder_start_token_id). OUTDIR/index.json lists {name, dir, description}. The sampled space:
Whisper: d_model from heads x head_dim with encoder and decoder heads dividing it independently,
1-3 layers on each side, any FFN widths, mel bins (including Whisper's 80 and 128), source and
target lengths, the activations the config accepts, tied or untied proj_out, the start token.
T5: d_kv apart from d_model / heads, 1-3 encoder and (num_decoder_layers, or as many) decoder
layers, relu or gated MLPs of several activations, 4-32 buckets and their max distance, a
head tied and scaled, or stored (no scale), inputs of 3-20 tokens.
The BART line: d_model (odd ones included, for the sinusoids) with encoder and decoder heads
dividing it independently, 1-3 layers on each side, FFN widths, position table lengths, the
activations, `scale_embedding`, tied or stored heads, a nonzero `final_logits_bias`, Marian's
own encoder and decoder tables, Pegasus with its sinusoidal table stored or left out of the file,
M2M100 with any padding id (its positions count from it; inputs may contain it).
"""

import json

import torch
import transformers
from safetensors.torch import load_file, save_file

import random_cases

ACTS = ["gelu", "gelu_new", "relu", "silu", "gelu_pytorch_tanh", "quick_gelu"]
STD = 0.15
TOKENS = 8


def stacks(rng, widths, head_counts):
    """The sizes Whisper and the BART line share: a width of `widths`, encoder and decoder heads
    of `head_counts` dividing it independently, 1-3 layers and an FFN width on each side."""
    d_model = rng.choice(widths)
    heads = [h for h in head_counts if d_model % h == 0]
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
    )


def whisper(rng):
    kw = stacks(rng, [8, 12, 16, 24, 32, 48], (1, 2, 3, 4, 6, 8))
    vocab = kw["vocab_size"]
    return dict(
        **kw,
        num_mel_bins=rng.choice([4, 7, 16, 80, 128]),
        max_source_positions=rng.randint(2, 16),
        max_target_positions=rng.randint(TOKENS + 4, 48),
        activation_function=rng.choice(ACTS),
        tie_word_embeddings=rng.random() < 0.6,
        decoder_start_token_id=rng.randint(0, vocab - 1),
        pad_token_id=0, bos_token_id=0, eos_token_id=0,
        suppress_tokens=None, begin_suppress_tokens=None,
    )


def t5(rng):
    buckets = rng.choice([4, 6, 8, 16, 32])
    kw = dict(
        vocab_size=rng.randint(30, 120),
        d_model=rng.choice([8, 12, 16, 24, 32]),
        d_kv=rng.choice([2, 4, 6, 8]),
        d_ff=rng.randint(4, 64),
        num_layers=rng.randint(1, 3),
        num_heads=rng.choice([1, 2, 3, 4]),
        relative_attention_num_buckets=buckets,
        relative_attention_max_distance=rng.randint(buckets // 2 + 1, 40),
        feed_forward_proj=rng.choice(["relu", "gelu", "gated-gelu", "gated-silu", "gated-relu"]),
        layer_norm_epsilon=rng.choice([1e-6, 1e-5]),
        tie_word_embeddings=rng.random() < 0.5,
        dropout_rate=0.0,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )
    if rng.random() < 0.5:
        kw["num_decoder_layers"] = rng.randint(1, 3)
    return kw


CLASSES = {
    "whisper": ("WhisperForConditionalGeneration", "WhisperConfig"),
    "t5": ("T5ForConditionalGeneration", "T5Config"),
    "bart": ("BartForConditionalGeneration", "BartConfig"),
    "mbart": ("MBartForConditionalGeneration", "MBartConfig"),
    "marian": ("MarianMTModel", "MarianConfig"),
    "pegasus": ("PegasusForConditionalGeneration", "PegasusConfig"),
    "m2m_100": ("M2M100ForConditionalGeneration", "M2M100Config"),
}


def bart_line(kind, rng):
    # the sinusoidal tables of an odd width end in a lone sine
    widths = [15, 21, 12, 24] if kind in ("marian", "pegasus", "m2m_100") else [8, 12, 15, 16, 21, 24, 32]
    kw = stacks(rng, widths, range(1, 9))
    vocab = kw["vocab_size"]
    kw = dict(
        **kw,
        max_position_embeddings=rng.randint(24, 64),
        activation_function=rng.choice(ACTS),
        scale_embedding=rng.random() < 0.5,
        tie_word_embeddings=rng.random() < 0.5,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, forced_eos_token_id=None,
        decoder_start_token_id=rng.randint(0, vocab - 1),
    )
    if kind == "mbart" and rng.random() < 0.5:
        kw["decoder_start_token_id"] = None  # generate starts from bos_token_id
    if kind == "marian":
        kw["share_encoder_decoder_embeddings"] = rng.random() < 0.5
    if kind == "m2m_100":
        # positions count from the padding id: any id, the table's rows after it
        # (inside the table, which transformers zeroes it in at init; the start token is not it:
        # its position would be the padding row's)
        rows = min(vocab, kw["max_position_embeddings"] + 2)
        pad = rng.choice([t for t in range(rows) if t != kw["decoder_start_token_id"]])
        kw.update(pad_token_id=pad, encoder_layerdrop=0.0, decoder_layerdrop=0.0)
    return kw


def build(kind, kw, seed, folder, drop_positions=False):
    cls = getattr(transformers, CLASSES[kind][0])
    config = getattr(transformers, CLASSES[kind][1])(**kw)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = cls(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn_like(p) * STD
            norm = ("layer_norm" in name or "layernorm" in name) and name.endswith("weight")
            p.copy_(1.0 + noise if norm else noise)
        if kind == "whisper":
            model.model.decoder.embed_positions.weight.mul_(1.0 / STD)
        if hasattr(model, "final_logits_bias"):  # a buffer, zero unless set
            model.final_logits_bias.normal_(0.0, STD)
            if kind in ("bart", "mbart"):
                model.model.decoder.embed_positions.weight.mul_(1.0 / STD)
    model.save_pretrained(folder, safe_serialization=True)
    if drop_positions:
        # a file without the sinusoidal tables, which transformers computes on load
        weights = load_file(str(folder / "model.safetensors"))
        weights = {k: v for k, v in weights.items() if "embed_positions" not in k}
        save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    if kind == "t5" and not kw["tie_word_embeddings"]:
        # a T5 v1.1 file stores its own head (transformers ties it when saving)
        weights = load_file(str(folder / "model.safetensors"))
        weights["lm_head.weight"] = torch.randn(kw["vocab_size"], kw["d_model"]) * STD
        save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return cls.from_pretrained(folder, attn_implementation="eager").eval()


def greedy(kind, kw, model, i, length):
    """The encoder inputs, the encoder states and the start token with TOKENS plain greedy ones."""
    gen = torch.Generator().manual_seed(i)
    if kind == "whisper":
        inputs = {"input_features": torch.randn((1, kw["num_mel_bins"], 2 * kw["max_source_positions"]), generator=gen)}
    else:
        ids = torch.randint(2, kw["vocab_size"], (1, length), generator=gen)
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    start = model.config.decoder_start_token_id
    ids = torch.tensor([[start if start is not None else model.config.bos_token_id]])
    with torch.no_grad():
        states = model.get_encoder()(**inputs).last_hidden_state
        for _ in range(TOKENS):
            logits = model(**inputs, decoder_input_ids=ids, use_cache=False).logits
            ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return inputs, states, ids


def main():
    cases = []
    for out, i, seed, rng in random_cases.cases(10):
        kind = tuple(CLASSES)[i % len(CLASSES)]
        kw = {"whisper": whisper, "t5": t5}.get(kind, lambda r: bart_line(kind, r))(rng)
        name = f"{i:02d}-{kind}"
        folder = out / name
        drop = kind == "pegasus" and rng.random() < 0.5
        length = rng.randint(3, 20)
        for attempt in range(20):
            model = build(kind, kw, seed + 7919 * attempt, folder, drop_positions=drop)
            inputs, states, ids = greedy(kind, kw, model, i, length)
            # M2M100 numbers decoder tokens over the non-padding ids, so a generated padding id
            # would shift the later positions (no real model generates it): draw other weights
            if kind != "m2m_100" or kw["pad_token_id"] not in ids[0, 1:].tolist():
                break
        golden = {**inputs, "encoder_hidden_states": states.contiguous(), "tokens": ids[0, 1:].contiguous()}
        save_file(golden, str(folder / "golden.safetensors"))
        desc = f"{type(model).__name__} " + json.dumps({k: v for k, v in kw.items() if "suppress" not in k})
        cases.append({"name": name, "dir": name, "description": desc})
        print(desc)
    (out / "index.json").write_text(json.dumps({"cases": cases}, indent=1))


if __name__ == "__main__":
    main()
