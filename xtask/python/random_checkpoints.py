#!/usr/bin/env python3
"""Random tiny checkpoints nobody has seen, with transformers' logits for each.

Usage: random_checkpoints.py OUTDIR [--seed S] [--count N]

Run by `tests/unseen_checkpoints.rs` (with the venv python of `cargo xtask test`). Writes N
folders OUTDIR/caseNN_<arch>/, each holding what `save_pretrained(..., safe_serialization=True)`
writes (config.json possibly post-edited into an older or sparser form that transformers still
reads the same way) plus golden.safetensors:

    single.input_ids      int64  [1, L]        random ids in [1, vocab), L random in 5..12
    single.attention_mask int64  [1, L]        ones
    single.logits         f32    [1, L, vocab]
    batch.input_ids       int64  [2, L]        row 0: P pad ids (0), P in 1..L-2, then real tokens
    batch.attention_mask  int64  [2, L]        0 at the pads; row 1 all ones
    batch.logits          f32    [2, L, vocab]

and OUTDIR/index.json: {"seed", "count", "transformers", "torch", "cases": [{"name", "dir",
"architecture", "seq_len", "pad", "description"}]}.

The configs sample the space transformers 5.23 accepts for LlamaForCausalLM,
MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM (loaded the way users load them,
through AutoModelForCausalLM):
  - sizes: hidden 8-128 (not a multiple of heads where the class allows it), 1-8 heads, kv
    heads 1, = heads or a divisor in between, head_dim derived, explicit and unlike
    hidden/heads (2-32), or Qwen3's class default 128; 1-3 layers; intermediate 8-160;
    vocab 50-300; tied or untied lm_head;
  - rope default / linear / dynamic / llama3 / yarn, theta 100-1e6, in the new
    (`rope_parameters`) or old (top-level `rope_theta` + `rope_scaling`, keyed `rope_type` or
    `type`) form; dynamic with max_position_embeddings mostly below the sequence (never so far
    below that seq > max_position_embeddings * factor, our builder's bound); llama3/yarn with
    original_max_position_embeddings mostly below the sequence, else long (16-8192) so the
    frequency bands fall inside the head dim; yarn with or without factor (null), mscale
    (alone or with mscale_all_dim), attention_factor, truncate true/false/absent,
    beta_fast/beta_slow; Phi3-style top-level original_max_position_embeddings overriding or
    replacing the dict's; a stray top-level rope_theta the dict's value overrides;
  - attention: Llama attention_bias / mlp_bias, Qwen3 attention_bias, keys a class ignores
    (sliding_window on Llama, attention_bias / mlp_bias on Mistral and Qwen2, mlp_bias on
    Qwen3); Mistral sliding_window 2-6 or null, and per-layer layer_types (AutoConfig loads such
    a "mistral" config.json as Ministral, which honours them); Qwen2/Qwen3 use_sliding_window
    with window 2-6 or null and max_window_layers giving mixed layer_types, or an explicit
    layer_types list;
  - hidden_act silu / swish / gelu_pytorch_tanh / gelu_new, rms_norm_eps 1e-8 to 0.1;
  - config.json as save_pretrained writes it or sparse (keys holding the class default or a
    derivable value left out).
Architectures and rope types are dealt round-robin, so every arch meets every rope type once
count >= 20, and the rarer layouts are dealt too (see sample_case); everything else is drawn
from a per-case RNG, so case i depends only on (seed, i). Weights have a wide spread (std 0.15,
norms 1 + 0.15 randn) as make_fixtures.py makes them; float32, eager attention, each golden
from a fresh reload of the saved folder (dynamic rope is stateful). After the reload the config
transformers reads is checked to be the one the model was built from, so a post-edit only
changes the form.
"""

import argparse
import dataclasses
import json
import math
import os
import random
import sys
import time
import warnings
from pathlib import Path

ARCHS = ["LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"]
ROPE_TYPES = ["default", "linear", "dynamic", "llama3", "yarn"]
PAD_ID = 0
STD = 0.15
MIN_LEN, MAX_LEN = 5, 12


# ---------------------------------------------------------------------------------------------
# Config sampling (plain Python: no torch needed)


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def pretrain_length(rng, L):
    """original_max_position_embeddings of llama3 / yarn. Mostly below the test length L, so
    the sequence runs past it; otherwise a pretraining length long enough that the frequency
    bands (llama3's low/high_freq_factor, yarn's beta_fast/beta_slow ramp and truncate) fall
    inside the head dim instead of all on one side of it."""
    if rng.random() < 0.6:
        return rng.randint(2, L - 1)
    return rng.choice([16, 32, 64, 256, 1024, 4096, 8192])


def sample_case(seed, index):
    """The kwargs of the config class, the config.json edit, and the input shape of one case."""
    rng = random.Random(f"hfexport-unseen:{seed}:{index}")
    offset = random.Random(f"hfexport-unseen:{seed}").randrange(len(ARCHS) * len(ROPE_TYPES))
    arch = ARCHS[(index + offset) % len(ARCHS)]
    # Round-robin on the rope type per architecture: with 5 rope types and 4 archs, each arch
    # meets every rope type within 20 cases.
    turn = (index + offset) // len(ARCHS)  # how many cases of this arch came before
    rope_type = ROPE_TYPES[(turn + offset) % len(ROPE_TYPES)]
    # Rarer layouts are dealt too, so that 24 cases always hold them: Qwen3's default head dim
    # (every 4th Qwen3), Mistral per-layer types (every 3rd Mistral), Qwen2/Qwen3 explicit
    # layer_types (every 3rd). Otherwise they are drawn with a lower probability.
    dealt_layout = turn % 3 == 1 if arch == "MistralForCausalLM" else turn % 3 == 2
    L = rng.randint(MIN_LEN, MAX_LEN)
    pad = rng.randint(1, L - 2)

    # Heads: kv heads 1, heads, or a divisor in between.
    heads = rng.choice([1, 2, 3, 4, 4, 6, 8])
    kv_choices = divisors(heads)
    kv = rng.choice([1, heads, rng.choice(kv_choices)])
    even_dims = [4, 6, 8, 10, 12, 16, 20, 24, 32]
    if rope_type != "dynamic":
        even_dims.append(2)  # dynamic NTK divides by head_dim - 2

    kw = {}
    if arch == "Qwen3ForCausalLM" and (turn % 4 == 3 or rng.random() < 0.1):
        head_dim = 128  # left to Qwen3's class default (not hidden/heads)
        hidden = rng.choice([16, 24, 32, 48])
        explicit_hd = "default"
    elif rng.random() < 0.5:
        # Explicit head_dim unlike hidden / heads.
        head_dim = rng.choice(even_dims)
        if arch == "LlamaForCausalLM":  # LlamaConfig.validate_architecture
            hidden = heads * rng.randint(max(1, 8 // heads), max(2, 96 // heads))
        else:
            hidden = rng.randint(8, 96)
        while hidden // heads == head_dim:
            head_dim = rng.choice([d for d in even_dims if d != head_dim])
        kw["head_dim"] = head_dim
        explicit_hd = "explicit"
    else:
        head_dim = rng.choice([d for d in even_dims if d * heads <= 128] or [2])
        hidden = head_dim * heads
        if arch == "Qwen3ForCausalLM":
            kw["head_dim"] = head_dim  # otherwise Qwen3 takes 128
        explicit_hd = "derived"

    layers = rng.randint(2 if dealt_layout else 1, 3)
    kw.update(
        vocab_size=rng.randint(50, 300),
        hidden_size=hidden,
        intermediate_size=rng.randint(8, 160),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        hidden_act=rng.choice(["silu", "silu", "gelu_pytorch_tanh", "gelu_pytorch_tanh", "swish", "gelu_new"]),
        rms_norm_eps=rng.choice([1e-6, 1e-5, 1e-8, 0.1]),
        tie_word_embeddings=rng.random() < 0.5,
    )

    # Rope: max_position_embeddings >= L except for dynamic, which scales past it.
    theta = rng.choice([10000.0, 500000.0, 1000000.0, 100.0, 1000.0])
    rope = {"rope_type": rope_type, "rope_theta": theta}
    max_pos = rng.randint(L, 64)
    if rope_type == "linear":
        rope["factor"] = rng.choice([1.5, 2.0, 4.0, 8.0])
    elif rope_type == "dynamic":
        factor = rng.choice([2.0, 3.0, 4.0, 8.0])
        rope["factor"] = factor
        lo = max(2, math.ceil(L / factor))  # our builder's seq bound: max_pos * factor
        r = rng.random()
        if r < 0.85:
            max_pos = rng.randint(lo, L - 1)  # scaling kicks in (seq_len > max_pos)
        elif r < 0.95:
            max_pos = L  # boundary: seq_len == max_pos, no scaling
        # else: max_pos > L, no scaling
    elif rope_type == "llama3":
        low = rng.choice([0.5, 1.0, 2.0])
        factor = rng.choice([2.0, 4.0, 8.0, 16.0])
        original = pretrain_length(rng, L)
        rope.update(
            factor=factor,
            low_freq_factor=low,
            high_freq_factor=low * rng.choice([2.0, 4.0, 8.0]),
            original_max_position_embeddings=original,
        )
        # transformers wants original < max_position_embeddings
        if original < L:
            max_pos = rng.randint(max(L, original + 1), 64)
        else:
            max_pos = int(original * factor)
    elif rope_type == "yarn":
        original = pretrain_length(rng, L)
        rope["original_max_position_embeddings"] = original
        r = rng.random()
        if r < 0.15:
            rope["factor"] = None  # transformers: max_position_embeddings / original
            max_pos = max(L, original + 1, original * rng.choice([2, 4]))
        else:
            factor = rng.choice([2.0, 3.0, 4.0, 8.0, 1.5])
            rope["factor"] = factor
            if r < 0.55 or original >= L:
                max_pos = max(L, int(original * factor))  # factor consistent (or close)
        m = rng.random()
        if m < 0.3:
            rope["mscale"] = rng.choice([0.707, 1.0, 0.5])
            rope["mscale_all_dim"] = rng.choice([0.707, 1.0, 0.3])
        elif m < 0.4:
            rope["mscale"] = rng.choice([0.707, 1.0])  # alone: ignored
        if rng.random() < 0.3:
            rope["attention_factor"] = rng.choice([0.8, 1.0, 1.25])
        t = rng.random()
        if t < 0.35:
            rope["truncate"] = False
        elif t < 0.45:
            rope["truncate"] = True
        if rng.random() < 0.3:
            rope["beta_fast"] = rng.choice([8.0, 16.0, 64.0])
            rope["beta_slow"] = rng.choice([0.5, 2.0])
    kw["rope_parameters"] = rope
    kw["max_position_embeddings"] = max_pos
    old_form = rng.random() < 0.45
    old_type_key = rng.random() < 0.5  # old form keyed "type" instead of "rope_type"
    sparse = rng.random() < 0.35  # drop keys equal to the class default / derivable
    # Phi3-style top-level original_max_position_embeddings, which wins over the rope dict's
    # (absent there, or a different value): "drop" or "shadow".
    hoist = None
    if rope_type in ("llama3", "yarn") and rng.random() < 0.3:
        hoist = rng.choice(["drop", "shadow"])
    # New form plus a stray top-level rope_theta, which the rope dict's value overrides.
    stray_theta = not old_form and rng.random() < 0.2

    # Per-architecture features, plus keys a class ignores (`ignored`): transformers stores
    # them on the config but the modeling code does not read them.
    ignored = {}
    if arch == "LlamaForCausalLM":
        kw["attention_bias"] = rng.random() < 0.4
        kw["mlp_bias"] = rng.random() < 0.4
        if rng.random() < 0.15:
            ignored["sliding_window"] = rng.randint(2, 6)  # LlamaModel has no sliding attention
    elif arch == "MistralForCausalLM":
        kw["sliding_window"] = rng.choice([2, 3, 4, 5, 6] if dealt_layout else [None, 2, 3, 4, 5, 6])
        if dealt_layout or (kw["sliding_window"] is not None and rng.random() < 0.1):
            # MistralModel itself slides every layer or none, but AutoConfig reads a "mistral"
            # config.json that has layer_types as a MinistralConfig, and AutoModelForCausalLM then
            # builds MinistralForCausalLM, which honours the per-layer types. (Only with a window:
            # sliding layers without one crash transformers' cache.)
            kw["layer_types"] = [rng.choice(["full_attention", "sliding_attention"]) for _ in range(layers)]
    else:
        if arch == "Qwen3ForCausalLM":
            kw["attention_bias"] = rng.random() < 0.4
        use_sw = dealt_layout or rng.random() < 0.7
        kw["use_sliding_window"] = use_sw
        # null with use_sliding_window: no layer slides
        kw["sliding_window"] = rng.randint(2, 6) if dealt_layout or rng.random() < 0.9 else None
        kw["max_window_layers"] = rng.randint(0, layers)
        if dealt_layout or (use_sw and kw["sliding_window"] and layers > 1 and rng.random() < 0.1):
            kw["layer_types"] = [rng.choice(["full_attention", "sliding_attention"]) for _ in range(layers)]
    if arch != "LlamaForCausalLM" and rng.random() < 0.15:
        # Mistral's and Qwen2's projections have fixed biases; Qwen3's MLP has none.
        if arch != "Qwen3ForCausalLM":
            ignored["attention_bias"] = True
        ignored["mlp_bias"] = True
    kw.update(ignored)

    return {
        "arch": arch,
        "kwargs": kw,
        "old_form": old_form,
        "old_type_key": old_type_key,
        "sparse": sparse,
        "hoist": hoist,
        "ignored": sorted(ignored),
        "stray_theta": stray_theta,
        "head_dim_source": explicit_hd,
        "seq_len": L,
        "pad": pad,
        "weight_seed": random.Random(f"hfexport-unseen-w:{seed}:{index}").randrange(2**31),
    }


# ---------------------------------------------------------------------------------------------
# config.json post-edits


def to_old_form(cfg, type_key):
    """`rope_parameters` -> top-level `rope_theta` + `rope_scaling` (pre-v5 files)."""
    out = {}
    for key, value in cfg.items():
        if key == "rope_parameters":
            rope = dict(value)
            out["rope_theta"] = rope.pop("rope_theta")
            rope_type = rope.pop("rope_type")
            if rope_type == "default" and not rope:
                out["rope_scaling"] = None
            else:
                out["rope_scaling"] = {type_key: rope_type, **rope}
        else:
            out[key] = value
    return out


def hoist_original(cfg, how):
    """Move original_max_position_embeddings to the top level (Phi3 style); the rope dict keeps
    none ("drop") or a different value that the top-level one overrides ("shadow")."""
    out = dict(cfg)
    key = "rope_parameters" if out.get("rope_parameters") else "rope_scaling"
    rope = dict(out[key])
    original = rope.pop("original_max_position_embeddings")
    if how == "shadow":
        rope["original_max_position_embeddings"] = original * 2 + 1
    out[key] = rope
    out["original_max_position_embeddings"] = original
    return out


def add_stray_theta(cfg):
    out = dict(cfg)
    out["rope_theta"] = out["rope_parameters"]["rope_theta"] * 7 + 3
    return out


# Keys a sparse (hand-written or older) config.json may leave out when they hold the default.
DROPPABLE = [
    "num_key_value_heads",
    "hidden_act",
    "rms_norm_eps",
    "tie_word_embeddings",
    "attention_bias",
    "mlp_bias",
    "max_window_layers",
    "use_sliding_window",
    "sliding_window",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "attention_dropout",
    "initializer_range",
    "use_cache",
    "pretraining_tp",
]


def to_sparse(cfg, config_cls):
    # The dataclass field defaults (what an absent key takes before __post_init__), not
    # config_cls().to_dict(), whose values __post_init__ already derived.
    defaults = {f.name: f.default for f in dataclasses.fields(config_cls) if f.default is not dataclasses.MISSING}
    out = dict(cfg)
    for key in DROPPABLE:
        if key in out and key in defaults and out[key] == defaults[key]:
            del out[key]
    if "num_key_value_heads" in defaults and defaults["num_key_value_heads"] is None:
        if out.get("num_key_value_heads") == out["num_attention_heads"]:
            del out["num_key_value_heads"]  # Llama: None means as many as attention heads
    # head_dim when it is what the class derives anyway
    derived = 128 if cfg["model_type"] == "qwen3" else cfg["hidden_size"] // cfg["num_attention_heads"]
    # (Not for a "mistral" file with layer_types: the Ministral class it loads as derives none.)
    if out.get("head_dim") == derived and not (cfg["model_type"] == "mistral" and "layer_types" in cfg):
        del out["head_dim"]
    # layer_types as Qwen2/Qwen3 derive them from use_sliding_window / max_window_layers
    if "layer_types" in out and cfg["model_type"] in ("qwen2", "qwen3"):
        window = cfg.get("sliding_window") if cfg.get("use_sliding_window") else None
        mwl = cfg.get("max_window_layers", 28)
        derived_types = [
            "sliding_attention" if window is not None and i >= mwl else "full_attention"
            for i in range(cfg["num_hidden_layers"])
        ]
        if out["layer_types"] == derived_types:
            del out["layer_types"]
    return out


# ---------------------------------------------------------------------------------------------
# Description


def describe(case, loaded):
    """One line: the config as built (`case`) and as transformers reads it back (`loaded`)."""
    kw = case["kwargs"]
    arch = case["arch"].replace("ForCausalLM", "")
    hd = loaded["head_dim"]
    rope = dict(kw["rope_parameters"])
    rtype = rope.pop("rope_type")
    theta = rope.pop("rope_theta")
    rope_args = ",".join(f"{k}={v}" for k, v in rope.items())
    form = "old" + ("/type" if case["old_type_key"] else "") if case["old_form"] else "new"
    parts = [
        f"{arch}",
        f"h={kw['hidden_size']} heads={kw['num_attention_heads']}/kv={kw['num_key_value_heads']}"
        f" head_dim={hd}({case['head_dim_source']})",
        f"layers={kw['num_hidden_layers']} inter={kw['intermediate_size']} vocab={kw['vocab_size']}",
        f"rope={rtype}({rope_args}) theta={theta:g} max_pos={kw['max_position_embeddings']} [{form}]",
        "tied" if kw["tie_word_embeddings"] else "untied",
        f"act={kw['hidden_act']} eps={kw['rms_norm_eps']:g}",
    ]
    if kw.get("attention_bias") and "attention_bias" not in case["ignored"]:
        parts.append("attention_bias")
    if kw.get("mlp_bias") and "mlp_bias" not in case["ignored"]:
        parts.append("mlp_bias")
    if case["arch"] == "MistralForCausalLM":
        parts.append(f"sliding_window={kw['sliding_window']}")
        if "layer_types" in kw:
            short = "".join("S" if t == "sliding_attention" else "F" for t in kw["layer_types"])
            parts.append(f"layer_types={short} (loads as Ministral)")
    elif case["arch"] in ("Qwen2ForCausalLM", "Qwen3ForCausalLM"):
        if kw["use_sliding_window"]:
            types = loaded["layer_types"]
            short = "".join("S" if t == "sliding_attention" else "F" for t in types)
            how = "explicit" if "layer_types" in kw else f"max_window_layers={kw['max_window_layers']}"
            parts.append(f"sliding_window={kw['sliding_window']} layers={short} ({how})")
        else:
            parts.append("use_sliding_window=false")
    if case["ignored"]:
        parts.append(f"ignored-keys({','.join(case['ignored'])})")
    if case["hoist"]:
        parts.append(f"top-level-original_max_pos({case['hoist']})")
    if case["stray_theta"]:
        parts.append("stray-top-level-rope_theta")
    if case["sparse"]:
        parts.append("sparse-config")
    parts.append(f"L={case['seq_len']} pad={case['pad']}")
    return " ".join(parts)


# ---------------------------------------------------------------------------------------------
# Checkpoints and goldens


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=24)
    args = ap.parse_args()
    if args.count < 1:
        sys.exit("--count must be >= 1")
    started = time.monotonic()

    warnings.filterwarnings("ignore")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    import torch
    import transformers
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    imported = time.monotonic()

    classes = {
        "LlamaForCausalLM": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "MistralForCausalLM": (transformers.MistralConfig, transformers.MistralForCausalLM),
        "Qwen2ForCausalLM": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
        "Qwen3ForCausalLM": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
    }

    def load(folder):
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
        return model.eval()

    def forward_logits(folder, ids, mask):
        with torch.no_grad():
            out = load(folder)(input_ids=ids, attention_mask=mask).logits
        return out.to(torch.float32).contiguous()

    def semantics(c):
        rope = dict(c.rope_parameters)
        rope.pop("type", None)
        return {
            "vocab_size": c.vocab_size,
            "hidden_size": c.hidden_size,
            "intermediate_size": c.intermediate_size,
            "num_hidden_layers": c.num_hidden_layers,
            "num_attention_heads": c.num_attention_heads,
            "num_key_value_heads": c.num_key_value_heads,
            "head_dim": getattr(c, "head_dim", c.hidden_size // c.num_attention_heads),
            "hidden_act": c.hidden_act,
            "rms_norm_eps": c.rms_norm_eps,
            "tie_word_embeddings": c.tie_word_embeddings,
            "attention_bias": getattr(c, "attention_bias", None),
            "mlp_bias": getattr(c, "mlp_bias", None),
            "sliding_window": getattr(c, "sliding_window", None),
            "layer_types": getattr(c, "layer_types", None),
            "max_position_embeddings": c.max_position_embeddings,
            "rope_parameters": rope,
        }

    outdir = Path(args.outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    index = []
    for i in range(args.count):
        case = sample_case(args.seed, i)
        arch = case["arch"]
        config_cls, model_cls = classes[arch]
        name = f"case{i:02d}_{arch.replace('ForCausalLM', '').lower()}"
        folder = outdir / name
        folder.mkdir(parents=True, exist_ok=True)

        kwargs = case["kwargs"]
        # The config class standardises (and may mutate) the rope dict: give it a copy.
        config = config_cls(**{**kwargs, "rope_parameters": dict(kwargs["rope_parameters"])})
        config._attn_implementation = "eager"
        torch.manual_seed(case["weight_seed"])
        model = model_cls(config).to(torch.float32).eval()
        with torch.no_grad():
            for pname, p in model.named_parameters():  # tied parameters are listed once
                noise = torch.randn_like(p) * STD
                p.copy_(1.0 + noise if "norm" in pname and pname.endswith(".weight") else noise)
        model.save_pretrained(folder, safe_serialization=True)
        built = semantics(model.config)
        del model

        cfg_path = folder / "config.json"
        cfg = json.loads(cfg_path.read_text())
        edited = cfg
        if case["old_form"]:
            edited = to_old_form(edited, "type" if case["old_type_key"] else "rope_type")
        if case["hoist"]:
            edited = hoist_original(edited, case["hoist"])
        if case["stray_theta"]:
            edited = add_stray_theta(edited)
        if case["sparse"]:
            edited = to_sparse(edited, config_cls)
        if edited is not cfg:
            cfg_path.write_text(json.dumps(edited, indent=2) + "\n")

        gen = torch.Generator().manual_seed(case["weight_seed"] + 1)
        L, pad, vocab = case["seq_len"], case["pad"], kwargs["vocab_size"]
        single_ids = torch.randint(1, vocab, (1, L), generator=gen, dtype=torch.int64)
        single_mask = torch.ones_like(single_ids)
        batch_ids = torch.randint(1, vocab, (2, L), generator=gen, dtype=torch.int64)
        batch_ids[0, :pad] = PAD_ID
        batch_mask = torch.ones_like(batch_ids)
        batch_mask[0, :pad] = 0

        # What transformers reads back must be what the model was built from.
        loaded = semantics(load(folder).config)
        if loaded != built:
            diff = {k: (built[k], loaded[k]) for k in built if built[k] != loaded[k]}
            sys.exit(f"{name}: config.json post-edit changed the config transformers reads: {diff}")

        single_logits = forward_logits(folder, single_ids, single_mask)
        batch_logits = forward_logits(folder, batch_ids, batch_mask)
        for key, t in (("single", single_logits), ("batch", batch_logits[batch_mask.bool()])):
            if not torch.isfinite(t).all():
                sys.exit(f"{name}: transformers gave non-finite {key} logits")
        goldens = {
            "single.input_ids": single_ids,
            "single.attention_mask": single_mask,
            "single.logits": single_logits,
            "batch.input_ids": batch_ids,
            "batch.attention_mask": batch_mask,
            "batch.logits": batch_logits,
        }
        save_file(
            {k: v.contiguous() for k, v in goldens.items()},
            str(folder / "golden.safetensors"),
            metadata={
                "transformers": transformers.__version__,
                "torch": torch.__version__,
                "generator": "xtask/python/random_checkpoints.py",
                "seed": str(args.seed),
                "case": str(i),
            },
        )
        index.append(
            {
                "name": name,
                "dir": name,
                "architecture": arch,
                "seq_len": L,
                "pad": pad,
                "description": describe(case, loaded),
            }
        )

    (outdir / "index.json").write_text(
        json.dumps(
            {
                "seed": args.seed,
                "count": args.count,
                "transformers": transformers.__version__,
                "torch": torch.__version__,
                "cases": index,
            },
            indent=2,
        )
        + "\n"
    )
    done = time.monotonic()
    per_arch = {a.replace("ForCausalLM", ""): sum(c["architecture"] == a for c in index) for a in ARCHS}
    print(
        f"{args.count} checkpoints (seed {args.seed}) in {outdir} in {done - started:.1f}s "
        f"(import {imported - started:.1f}s): "
        + ", ".join(f"{k} {v}" for k, v in per_arch.items())
    )


if __name__ == "__main__":
    main()
