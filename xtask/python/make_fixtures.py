#!/usr/bin/env python3
"""Make the tiny random checkpoints and golden outputs under tests/fixtures/.

Usage: make_fixtures.py OUTDIR   (normally through `cargo xtask fixtures`, which first
installs the pinned [python.oracle] packages from versions.toml into .venv/).

Each fixture is a folder holding what `save_pretrained(..., safe_serialization=True)` writes
(config.json, generation_config.json, model.safetensors) plus golden.safetensors:

    single.input_ids      int64  [1, 7]        random ids in [1, vocab)
    single.attention_mask int64  [1, 7]        ones
    single.logits         f32    [1, 7, vocab] model(input_ids=..., attention_mask=...).logits
    batch.input_ids       int64  [2, 7]        row 0: 3 pad ids (0) then 4 real tokens (left padding);
                                               row 1: 7 real tokens
    batch.attention_mask  int64  [2, 7]        0 at the pads
    batch.logits          f32    [2, 7, vocab]
    greedy.prompt_ids     int64  [1, 5]
    greedy.tokens         int64  [1, 16]       the 16 new tokens of greedy model.generate(...)

Every golden is computed by a fresh model loaded from the saved folder (dynamic RoPE keeps
state between calls, and the goldens must describe the checkpoint on disk, not the model in
memory). Everything is float32 with eager attention, and fully deterministic.
"""

import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np
import safetensors
import torch
import transformers
from safetensors.torch import save_file
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

SEQ = 7
PAD_ID = 0
BATCH_REAL = 4  # real tokens of the left-padded row
PROMPT_LEN = 5
NEW_TOKENS = 16
STD = 0.15
# Smallest accepted top-1/top-2 logit gap at each greedy step, so float32 rounding differences
# in another implementation cannot flip a token. Prompts are redrawn (deterministically) until
# the greedy run keeps this margin.
MIN_GREEDY_MARGIN = 0.01
PROMPT_TRIES = 50


def fixture_specs():
    """(name, seed, model class, config, config.json post-edit or None)."""
    specs = []

    llama_rope_scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
    }
    llama = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        # pre-v5 keyword form; transformers folds it into `rope_parameters`
        rope_theta=10000.0,
        rope_scaling=dict(llama_rope_scaling),
        attention_bias=True,
        mlp_bias=True,
        tie_word_embeddings=False,
    )

    def llama_old_form(cfg):
        # transformers 5 writes `rope_parameters`; rewrite it into the pre-v5 form
        # (top-level `rope_theta` + `rope_scaling`) so the fixture tests old-form parsing.
        out = {}
        for key, value in cfg.items():
            if key == "rope_parameters":
                rope = dict(value)
                out["rope_theta"] = rope.pop("rope_theta")
                out["rope_scaling"] = rope
            else:
                out[key] = value
        assert out["rope_scaling"] == llama_rope_scaling, out["rope_scaling"]
        return out

    specs.append(("llama", 1, LlamaForCausalLM, llama, llama_old_form))

    mistral = MistralConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=32,
        sliding_window=4,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=True,
        max_position_embeddings=64,
    )
    specs.append(("mistral", 2, MistralForCausalLM, mistral, None))

    qwen2 = Qwen2Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 16,
        },
        use_sliding_window=True,
        sliding_window=3,
        max_window_layers=1,
        tie_word_embeddings=True,
        max_position_embeddings=64,
    )
    specs.append(("qwen2", 3, Qwen2ForCausalLM, qwen2, None))

    qwen3 = Qwen3Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=24,
        rope_parameters={"rope_type": "dynamic", "rope_theta": 1000000.0, "factor": 4.0},
        max_position_embeddings=6,
        hidden_act="gelu_pytorch_tanh",
        tie_word_embeddings=False,
    )
    specs.append(("qwen3", 4, Qwen3ForCausalLM, qwen3, None))

    llama_linear_tied = LlamaConfig(
        vocab_size=200,
        hidden_size=48,
        intermediate_size=80,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=3,
        rope_parameters={"rope_type": "linear", "rope_theta": 500000.0, "factor": 2.0},
        tie_word_embeddings=True,
        rms_norm_eps=1e-5,
    )
    specs.append(("llama_linear_tied", 5, LlamaForCausalLM, llama_linear_tied, None))
    return specs


def widen_weights(model):
    """std ~0.15 everywhere (norm weights around 1), so greedy tokens are not decided by noise."""
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied parameters are listed once
            noise = torch.randn_like(p) * STD
            if "norm" in name and name.endswith(".weight"):
                p.copy_(1.0 + noise)
            else:
                p.copy_(noise)


def canonical_metadata_order(path):
    """safetensors writes `__metadata__` in hash-map order, which changes from run to run:
    rewrite the header with sorted metadata keys so regenerated fixtures are byte-identical."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= n, "canonical header is longer than the original"
    path.write_bytes(raw[:8] + text.ljust(n, b" ") + raw[8 + n :])


def load(folder):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    return model.eval()


def random_ids(gen, shape, vocab):
    return torch.randint(1, vocab, shape, generator=gen, dtype=torch.int64)


def forward_logits(folder, input_ids, attention_mask):
    with torch.no_grad():
        out = load(folder)(input_ids=input_ids, attention_mask=attention_mask).logits
    return out.to(torch.float32).contiguous()


def greedy(folder, prompt):
    model = load(folder)
    with torch.no_grad():
        out = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=PAD_ID,
        )
    assert out.shape == (1, PROMPT_LEN + NEW_TOKENS), f"generate stopped early: {tuple(out.shape)}"
    return out[:, PROMPT_LEN:].contiguous()


def greedy_by_hand(folder, prompt):
    """Plain argmax loop with transformers' own cache: must equal generate() (no logits processor).

    Returns the new tokens and the smallest top-1/top-2 logit gap over the steps."""
    model = load(folder)
    ids = prompt
    past = None
    new = []
    margin = float("inf")
    with torch.no_grad():
        step_ids = prompt
        for _ in range(NEW_TOKENS):
            out = model(
                input_ids=step_ids,
                attention_mask=torch.ones_like(ids),
                position_ids=torch.arange(ids.shape[1] - step_ids.shape[1], ids.shape[1]).unsqueeze(0),
                past_key_values=past,
                use_cache=True,
            )
            past = out.past_key_values
            last = out.logits[:, -1]
            top2 = last.topk(2, dim=-1).values
            margin = min(margin, (top2[:, 0] - top2[:, 1]).min().item())
            nxt = last.argmax(-1, keepdim=True)
            new.append(nxt)
            ids = torch.cat([ids, nxt], dim=1)
            step_ids = nxt
    return torch.cat(new, dim=1), margin


def greedy_no_cache(folder, prompt):
    """Argmax loop that recomputes the whole sequence every step (no KV cache)."""
    model = load(folder)
    ids = prompt
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
            ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids[:, PROMPT_LEN:]


def make_fixture(outdir, name, seed, model_cls, config, post_edit):
    folder = outdir / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)

    torch.manual_seed(seed)
    config._attn_implementation = "eager"
    model = model_cls(config).to(torch.float32).eval()
    widen_weights(model)
    model.save_pretrained(folder, safe_serialization=True)

    cfg_path = folder / "config.json"
    cfg = json.loads(cfg_path.read_text())
    if post_edit is not None:
        cfg = post_edit(cfg)
        cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
    del model

    gen = torch.Generator().manual_seed(1000 + seed)
    vocab = config.vocab_size

    single_ids = random_ids(gen, (1, SEQ), vocab)
    single_mask = torch.ones_like(single_ids)

    batch_ids = random_ids(gen, (2, SEQ), vocab)
    batch_ids[0, : SEQ - BATCH_REAL] = PAD_ID
    batch_mask = torch.ones_like(batch_ids)
    batch_mask[0, : SEQ - BATCH_REAL] = 0

    for attempt in range(PROMPT_TRIES):
        prompt = random_ids(gen, (1, PROMPT_LEN), vocab)
        by_hand, margin = greedy_by_hand(folder, prompt)
        if margin >= MIN_GREEDY_MARGIN:
            break
    else:
        raise SystemExit(f"{name}: no prompt with greedy margin >= {MIN_GREEDY_MARGIN} in {PROMPT_TRIES} tries")

    single_logits = forward_logits(folder, single_ids, single_mask)
    batch_logits = forward_logits(folder, batch_ids, batch_mask)
    tokens = greedy(folder, prompt)
    assert torch.equal(by_hand, tokens), f"{name}: generate {tokens.tolist()} != argmax loop {by_hand.tolist()}"
    no_cache = greedy_no_cache(folder, prompt)

    # The batch row without padding must match an unpadded forward of the same tokens.
    row1 = forward_logits(folder, batch_ids[1:], batch_mask[1:])
    row1_diff = (row1 - batch_logits[1:]).abs().max().item()

    for key, t in (("single.logits", single_logits), ("batch.logits[real]", batch_logits[batch_mask.bool()])):
        assert torch.isfinite(t).all(), f"{name}: non-finite values in {key}"

    goldens = {
        "single.input_ids": single_ids,
        "single.attention_mask": single_mask,
        "single.logits": single_logits,
        "batch.input_ids": batch_ids,
        "batch.attention_mask": batch_mask,
        "batch.logits": batch_logits,
        "greedy.prompt_ids": prompt,
        "greedy.tokens": tokens,
    }
    goldens = {k: v.contiguous() for k, v in goldens.items()}
    for k, v in goldens.items():
        expect = torch.float32 if k.endswith("logits") else torch.int64
        assert v.dtype == expect, f"{name}: {k} is {v.dtype}"
    golden_path = folder / "golden.safetensors"
    metadata = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "generator": "xtask/python/make_fixtures.py",
    }
    save_file(goldens, str(golden_path), metadata=metadata)
    canonical_metadata_order(golden_path)
    with safetensors.safe_open(golden_path, "pt") as f:
        assert f.metadata() == metadata
        assert all(torch.equal(f.get_tensor(k), v) for k, v in goldens.items())

    # Summary, from the config as transformers reads the saved folder.
    loaded = load(folder).config
    size = sum(f.stat().st_size for f in folder.iterdir())
    print(f"== {name}  ({model_cls.__name__}, seed {seed}, {size / 1024:.0f} KiB)")
    print(f"   files:           {sorted(f.name for f in folder.iterdir())}")
    print(f"   saved rope keys: { {k: cfg[k] for k in ('rope_parameters', 'rope_scaling', 'rope_theta') if k in cfg} }")
    print(f"   rope_parameters: {loaded.rope_parameters}")
    print(f"   layer_types:     {getattr(loaded, 'layer_types', None)}")
    print(f"   sliding_window:  {getattr(loaded, 'sliding_window', None)}")
    print(f"   head_dim:        {getattr(loaded, 'head_dim', None)}  tie_word_embeddings: {loaded.tie_word_embeddings}")
    print(f"   bos/eos/pad:     {loaded.bos_token_id}/{loaded.eos_token_id}/{loaded.pad_token_id}")
    print(f"   logits std:      single {single_logits.std().item():.3f}")
    top2 = single_logits[0].topk(2, dim=-1).values
    print(f"   top1-top2 gap:   min {(top2[:, 0] - top2[:, 1]).min().item():.4f} over single positions")
    print(f"   unpadded row vs alone: max |diff| {row1_diff:.2e}")
    print(f"   prompt:          {prompt.tolist()[0]}  (draw {attempt + 1}, min greedy margin {margin:.4f})")
    print(f"   greedy tokens:   {tokens.tolist()[0]}")
    if not torch.equal(no_cache, tokens):
        print(f"   NOTE: without KV cache greedy differs: {no_cache.tolist()[0]}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_fixtures.py OUTDIR")
    outdir = Path(sys.argv[1])
    outdir.mkdir(parents=True, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    transformers.utils.logging.set_verbosity_error()  # e.g. qwen3 generating past max_position_embeddings
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    print(
        f"transformers {transformers.__version__}, torch {torch.__version__}, "
        f"safetensors {safetensors.__version__}, numpy {np.__version__}"
    )
    specs = fixture_specs()
    for spec in specs:
        make_fixture(outdir, *spec)
    write_manifest(outdir, specs)


def write_manifest(outdir, specs):
    """tests/fixtures/manifest.json: the one fixture list every test reads (the `covers` notes are
    kept from the previous manifest)."""
    path = outdir / "manifest.json"
    old = json.load(open(path)) if path.exists() else {"fixtures": []}
    covers = {f["name"]: f.get("covers", "") for f in old["fixtures"]}
    fixtures = [
        {"name": name, "architecture": model_cls.__name__, "covers": covers.get(name, "")}
        for name, _seed, model_cls, _config, _edit in specs
    ]
    about = old.get("about", "The committed tiny checkpoints; every test reads its fixture list from here.")
    with open(path, "w") as f:
        json.dump({"about": about, "fixtures": fixtures}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
