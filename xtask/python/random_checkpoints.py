#!/usr/bin/env python3
"""Random tiny checkpoints nobody has seen, with transformers' logits for each.

Usage: random_checkpoints.py OUTDIR [--seed S] [--count N] [--archs LIST]

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

and OUTDIR/index.json: {"seed", "count", "archs", "transformers", "torch", "cases": [{"name",
"dir", "architecture", "seq_len", "pad", "f32_noise" (transformers' float32 logits against float64),
"description"}]}.

--archs (comma list of class or short names, or `all`; default $HFEXPORT_UNSEEN_ARCHS, else
llama,mistral,qwen2,qwen3) are dealt round-robin; with the default four, every case is what it
was before the other families were added.

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
The families of issue 13, selected with --archs (sample_new_family), in the space transformers
5.23 accepts for each (loaded through AutoModelForCausalLM too):
  - Phi3ForCausalLM: fused qkv_proj / gate_up_proj, partial_rotary_factor 1 / 0.75 / 0.5 / 0.25,
    rope default or longrope with short/long factor lists, original_max_position_embeddings
    below the test length (long factors) or not (short) but never crossed by the greedy run of
    tests/python/unseen_generation.py (GEN_PROMPT), explicit factor / attention_factor or
    derived from max_position_embeddings; the Phi-3.5/Phi-4-mini file form (top-level
    rope_theta, partial_rotary_factor, original_max_position_embeddings; rope_scaling keyed
    "type", sometimes "su"), a rope dict's original_max_position_embeddings the top-level one
    overrides; sliding_window on every layer; hidden not a multiple of heads;
  - GemmaForCausalLM: explicit head_dim or the class default 256 left out of config.json,
    hidden_act "gelu" (read as tanh GELU, with or without the gemma-1.1 hidden_activation key);
  - Gemma2ForCausalLM / Gemma3ForCausalLM (gemma3_text): hidden_activation tanh or exact GELU,
    query_pre_attn_scalar = head_dim / other / class default 256, attention and final logit
    soft-caps on (small enough to bite) / class default / null, sliding_window 2-6 or 4096,
    layer_types derived (alternating; Gemma 3 from a sliding_window_pattern) or explicit;
    Gemma 3 rope per layer type (sliding: default or linear with its own theta; full: default /
    linear / llama3 / yarn), also in the Hub form (rope_theta, rope_local_base_freq,
    rope_scaling, sliding_window_pattern);
  - GraniteForCausalLM: embedding / attention / residual multipliers and logits_scaling, 1 or not;
  - Olmo2ForCausalLM: q/k norm over the whole projection, attention_bias;
  - SmolLM3ForCausalLM: NoPE layers from no_rope_layer_interval (the derived list left out of
    config.json) or an explicit no_rope_layers, use_sliding_window (the NoPE layers slide), or
    explicit layer_types;
  - GPT2LMHeadModel: n_inner null or set, activation_function gelu_new / gelu /
    gelu_pytorch_tanh / relu, scale_attn_weights, scale_attn_by_inverse_layer_idx,
    reorder_and_upcast_attn, tied or not, weights named as openai-community/gpt2 names them (no
    `transformer.` prefix) and its old attn.bias / attn.masked_bias buffers;
  - Starcoder2ForCausalLM (issue 33): use_bias on or off, norm_epsilon, hidden_act
    gelu_pytorch_tanh / gelu / gelu_new / silu, sliding_window 2-6 on every layer or null, an
    explicit head_dim unlike hidden / heads (which Starcoder2Attention reads when present);
  - PhiForCausalLM (issue 33): the parallel block, partial_rotary_factor 0.25-1 in the rope dict,
    at the top level (the Phi-2 file form) or absent (the class default 0.5), qk_layernorm on or
    off, the biased head tied or not, hidden_act, layer_norm_eps;
  - GPTNeoXForCausalLM (issue 33): use_parallel_residual on or off, partial_rotary_factor
    0.25-1 in the rope dict or as the Pythia files have it (rotary_pct and rotary_emb_base at the
    top level), attention_bias, hidden_act gelu / gelu_new / relu / silu, hidden a multiple of
    the heads;
  - GPTBigCodeForCausalLM (issue 33): multi_query on (one KV head) or off (c_attn grouped per
    head), n_inner null or set, activation_function, scale_attn_weights, and
    scale_attn_by_inverse_layer_idx, which GPTBigCode ignores;
  - GPTJForCausalLM (issue 33): rotate-every-two rotary over rotary_dim (even, up to the head
    size; GPTJConfig refuses null), n_inner null or set, activation_function, tied or not;
  - CohereForCausalLM (issue 33): use_qk_norm on or off, logit_scale, attention_bias, hidden_act,
    layer_norm_eps, tied or not; Cohere2ForCausalLM: the same but the q/k norm, sliding_window
    2-6 or the class's 4096, layer_types derived from sliding_window_pattern (written as the Hub
    files do) or explicit, rotary on the sliding layers only;
  - StableLmForCausalLM (issue 33): use_parallel_residual, qk_layernorm (one norm per head),
    use_qkv_bias, partial_rotary_factor in the rope dict, at the top level or absent (0.25);
  - GlmForCausalLM / Glm4ForCausalLM (issue 33): rotate-every-two rotary over
    partial_rotary_factor of the head (dict, top level, or absent: 0.5), an explicit head_dim or
    the class default 128 left out, attention_bias, hidden not a multiple of the heads;
  - the Llama-like families (Gemma 1/2, Granite, OLMo 2, SmolLM3, Starcoder2, Phi, GPT-NeoX,
    Cohere, StableLM, GLM) on default rope every other
    case, else linear / dynamic / llama3 / yarn as above; old/new rope form, sparse config.json
    (class defaults left out), keys a class ignores, as above.
The mixture-of-experts families, selected with --archs too (sample_moe_family; MOE_ARCHS):
Qwen3MoeForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, OlmoeForCausalLM (every layer
sparse, q/k norm over the projection, clip_qkv null), in the space transformers 5.23
accepts for each, loaded the same way:
  - 2-10 experts (Qwen `num_experts`; Mixtral `num_local_experts`, also Qwen3-MoE's key as
    transformers 5 saves it, else the Hub files' `num_experts`), num_experts_per_tok 1 to all of
    them, norm_topk_prob on/off (Mixtral always renormalises); expert intermediate size 4-48
    (Qwen moe_intermediate_size, Mixtral intermediate_size); hidden and expert sizes multiples of
    4, as transformers' default grouped_mm experts need (else "strides should be multiple of 16
    bytes"); explicit head_dim or hidden // heads (Qwen3-MoE too: no 128 default);
  - Qwen dense layers: decoder_sparse_step 1-3 and mlp_only_layers some layers / [] / null /
    absent, at least one sparse layer (every 3rd case of a Qwen family has a dense one), the
    dense MLP's intermediate_size 8-160; Qwen2-MoE shared expert (4-64, sigmoid gate) and
    qkv_bias; Qwen3-MoE attention_bias and its built-in q/k norm;
  - Qwen3-MoE use_sliding_window (every layer slides; the window is null without it), Mixtral
    sliding_window null or 2-6, Qwen2-MoE use_sliding_window with max_window_layers (the even
    layers below it slide; the window is 0 without it) or explicit layer_types (every 3rd case);
  - rope types dealt as for the Llama-like families above, old/new rope form, sparse config.json,
    keys a class ignores;
  - no routing near a tie, which another runtime's rounding could break: with the case's single
    and batch inputs (padded positions included), the k-th and (k+1)-th routing probability of
    every token in every sparse layer differ by MIN_ROUTER_GAP at least, else the weights are
    redrawn from a seed derived from the case's (at most MAX_REDRAWS times, then an error).
Architectures and rope types are dealt round-robin, so every arch meets every rope type once
count >= 20, and the rarer layouts are dealt too (see sample_case); everything else is drawn
from a per-case RNG, so case i depends only on (seed, i). Weights have a wide spread (std 0.15,
norms 1 + 0.15 randn) as make_fixtures.py makes them; float32, eager attention, each golden
from a fresh reload of the saved folder (dynamic rope is stateful). After the reload the config
transformers reads is checked to be the one the model was built from, so a post-edit only
changes the form.
"""

import argparse
import copy
import dataclasses
import json
import math
import os
import random
import sys
import time
import warnings
from pathlib import Path

# The default --archs (the ones the builder has always supported); NEW_ARCHS and MOE_ARCHS are
# selected with --archs (e.g. `--archs all`).
ARCHS = ["LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"]
NEW_ARCHS = [
    "Phi3ForCausalLM",
    "GemmaForCausalLM",
    "Gemma2ForCausalLM",
    "Gemma3ForCausalLM",
    "GraniteForCausalLM",
    "Olmo2ForCausalLM",
    "SmolLM3ForCausalLM",
    "GPT2LMHeadModel",
    "Starcoder2ForCausalLM",
    "PhiForCausalLM",
    "GPTNeoXForCausalLM",
    "GPTBigCodeForCausalLM",
    "GPTJForCausalLM",
    "CohereForCausalLM",
    "StableLmForCausalLM",
    "GlmForCausalLM",
    "Glm4ForCausalLM",
    "Cohere2ForCausalLM",
    "FalconForCausalLM",
    "BloomForCausalLM",
    "OPTForCausalLM",
]
# The mixture-of-experts families (sample_moe_family).
MOE_ARCHS = [
    "Qwen3MoeForCausalLM",
    "MixtralForCausalLM",
    "Qwen2MoeForCausalLM",
    "OlmoeForCausalLM",
    "GraniteMoeForCausalLM",
    "GraniteMoeSharedForCausalLM",
    "GptOssForCausalLM",
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "Glm4MoeForCausalLM",
    "Ernie4_5_MoeForCausalLM",
    "Mistral4ForCausalLM",
    "Llama4ForCausalLM",
]
# The 2026 flagships that attend (issue 40; sample_flagship): GLM-4.5's DeepSeek-V3 routing over
# grouped-query attention, ERNIE 4.5's biases and interleaved rotary (dense and MoE), Llama 4's
# chunked and NoPE layers with its input-weighted experts, Gemma 4's per-layer heads, shared keys
# and values and per-layer embeddings, Gemma 3n's AltUp streams, LAuReL and sparse gates.
FLAGSHIP_ARCHS = [
    "Glm4MoeForCausalLM",
    "Ernie4_5ForCausalLM",
    "Ernie4_5_MoeForCausalLM",
    "Llama4ForCausalLM",
    "Gemma4ForCausalLM",
    "Gemma3nForCausalLM",
]
# DeepSeek's: multi-head latent attention, grouped routing, dense first layers (sample_deepseek;
# Mistral 4's softmax groups and query scaling too).
DEEPSEEK_ARCHS = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "Mistral4ForCausalLM")
# Granite's MoE classes: every layer sparse, num_local_experts, Granite's multipliers.
GRANITE_MOE_ARCHS = ("GraniteMoeForCausalLM", "GraniteMoeSharedForCausalLM")
# The families sampled by sample_new_family / sample_moe_family and written by edit_new_family.
EXTRA_ARCHS = NEW_ARCHS + MOE_ARCHS + ["Ernie4_5ForCausalLM", "Gemma4ForCausalLM", "Gemma3nForCausalLM"]
ALL_ARCHS = ARCHS + EXTRA_ARCHS
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


def sample_longrope(rng, rotary_dim, L):
    """A longrope dict (every family with rotary accepts one; transformers takes the long factors
    once a call's positions pass original_max_position_embeddings) and max_position_embeddings.
    As for Phi-3, the switch is past the test length or before it, never inside the greedy run
    of tests/python/unseen_generation.py (see GEN_PROMPT)."""
    n = rotary_dim // 2
    rope = {
        "rope_type": "longrope",
        "rope_theta": rng.choice([10000.0, 500000.0, 100.0]),
        "short_factor": [round(rng.uniform(1.0, 3.0), 3) for _ in range(n)],
        "long_factor": [round(rng.uniform(1.0, 24.0), 3) for _ in range(n)],
    }
    if rng.random() < 0.5:
        original = rng.randint(2, min(L - 1, GEN_PROMPT - 1))
    else:
        original = rng.randint(max(L, GEN_PROMPT + GEN_NEW - 1), 64)
    rope["original_max_position_embeddings"] = original
    return rope, max(L, original * rng.choice([1, 2, 4, 8]))


def sample_rope(rng, rope_type, L):
    """A rope dict of `rope_type` and max_position_embeddings, for a test length L."""
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
    return rope, max_pos


def parse_archs(text):
    """--archs: class or short names, comma separated, or `all`."""
    if text.strip() == "all":
        return list(ALL_ARCHS)
    by_name = {short_name(a): a for a in ALL_ARCHS} | {a.lower(): a for a in ALL_ARCHS}
    archs = []
    for word in text.split(","):
        word = word.strip().lower()
        if not word:
            continue
        if word not in by_name:
            sys.exit(f"--archs: unknown architecture {word!r} (known: {', '.join(short_name(a) for a in ALL_ARCHS)})")
        if by_name[word] not in archs:
            archs.append(by_name[word])
    if not archs:
        sys.exit("--archs: no architecture given")
    return archs


def short_name(arch):
    """LlamaForCausalLM -> llama, GPT2LMHeadModel -> gpt2 (case folder names, --archs)."""
    return arch.replace("ForCausalLM", "").replace("LMHeadModel", "").lower()


def sample_case(seed, index, archs=ARCHS):
    """The kwargs of the config class, the config.json edit, and the input shape of one case.

    `archs` are dealt round-robin; with the default four, case i is what it has always been."""
    rng = random.Random(f"hfexport-unseen:{seed}:{index}")
    offset = random.Random(f"hfexport-unseen:{seed}").randrange(len(archs) * len(ROPE_TYPES))
    arch = archs[(index + offset) % len(archs)]
    # Round-robin on the rope type per architecture: with 5 rope types and 4 archs, each arch
    # meets every rope type within 20 cases.
    turn = (index + offset) // len(archs)  # how many cases of this arch came before
    rope_type = ROPE_TYPES[(turn + offset) % len(ROPE_TYPES)]
    # Rarer layouts are dealt too, so that 24 cases always hold them: Qwen3's default head dim
    # (every 4th Qwen3), Mistral per-layer types (every 3rd Mistral), Qwen2/Qwen3 explicit
    # layer_types (every 3rd). Otherwise they are drawn with a lower probability.
    dealt_layout = turn % 3 == 1 if arch == "MistralForCausalLM" else turn % 3 == 2
    L = rng.randint(MIN_LEN, MAX_LEN)
    pad = rng.randint(1, L - 2)
    if arch in EXTRA_ARCHS:
        sample = sample_moe_family if arch in MOE_ARCHS else sample_new_family
        sample = sample_deepseek if arch in DEEPSEEK_ARCHS else sample
        sample = sample_flagship if arch in FLAGSHIP_ARCHS else sample
        case = sample(rng, arch, turn, offset, L)
        case.update(seq_len=L, pad=pad, weight_seed=random.Random(f"hfexport-unseen-w:{seed}:{index}").randrange(2**31))
        return case

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

    rope, max_pos = sample_rope(rng, rope_type, L)
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
# The families of issue 13 (selected with --archs): Phi-3, Gemma 1/2/3, Granite, OLMo 2,
# SmolLM3, GPT-2.

GEMMA_ARCHS = ("GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM")
GLM_ARCHS = ("GlmForCausalLM", "Glm4ForCausalLM")
# DEGENERATE_QK_NORM: a LayerNorm of queries and keys over a head of 2 channels gives +-1 by the
# sign of their difference, so the quantized cross-check's weight noise flips whole heads; the
# LayerNorm q/k norms (Phi, StableLM, Cohere) are drawn only on heads of more than 2 channels.
COHERE_ARCHS = ("CohereForCausalLM", "Cohere2ForCausalLM")
# Families with key names of their own and no rope dict forms (sampled by own_keys).
OWN_KEY_ARCHS = ("FalconForCausalLM", "BloomForCausalLM", "OPTForCausalLM")
SCALED_ROPE_TYPES = ["linear", "dynamic", "llama3", "yarn"]
PHI3_VARIANTS = ["longrope-long", "longrope-short", "default"]
# tests/python/unseen_generation.py generates 8 tokens greedily from the first 5 ids, so the
# model sees 5 to 12 tokens. Longrope switching to the long factors inside that range is what
# transformers' generate handles by dropping and recomputing its KV cache, which a cached export
# does not do: Phi-3's original_max_position_embeddings stays out of it (below 5: long factors
# throughout; 12 or more: short throughout).
GEN_PROMPT, GEN_NEW = 5, 8


def dealt_rope_type(turn, offset, scaled=SCALED_ROPE_TYPES):
    """Every other case of a family on default rope, the others cycling through `scaled`."""
    if turn % 2 == 0:
        return "default"
    return scaled[(turn // 2 + offset) % len(scaled)]


def floor_hidden(rng, heads, head_dim):
    """hidden = heads * head_dim, or (1 in 5, classes that derive head_dim = hidden // heads
    without checking) a few more, so hidden is not a multiple of heads."""
    if heads > 1 and rng.random() < 0.2:
        return heads * head_dim + rng.randint(1, heads - 1), "derived(floor)"
    return heads * head_dim, "derived"


GPT2_ACTS = ["gelu_new", "gelu_new", "gelu", "gelu_pytorch_tanh", "relu"]


def gpt_style_keys(rng, sizes, L, tied, acts):
    """The GPT-2 key names GPT-2, GPTBigCode and GPT-J share, drawn in one order: positions
    covering the generation test's length, n_inner null or set, an activation of `acts`, eps;
    bos/eos the last id (GPT-2's <|endoftext|>)."""
    vocab, hidden, layers, heads = sizes
    return dict(
        vocab_size=vocab,
        n_embd=hidden,
        n_layer=layers,
        n_head=heads,
        n_positions=rng.randint(max(L, GEN_PROMPT + GEN_NEW), 64),
        n_inner=rng.choice([None, None, rng.randint(8, 160)]),
        activation_function=rng.choice(acts),
        layer_norm_epsilon=rng.choice([1e-5, 1e-6, 0.1]),
        tie_word_embeddings=tied,
        bos_token_id=vocab - 1,
        eos_token_id=vocab - 1,
    )


def gpt_style_case(arch, kw, sparse, hd_source, variant, ignored, edits):
    """The case of a family sampled with its own key names and no rope dict (GPT-2, GPTBigCode,
    GPT-J): nothing of the rope forms applies."""
    return {
        "arch": arch,
        "kwargs": kw,
        "old_form": False,
        "old_type_key": False,
        "sparse": sparse,
        "hoist": None,
        "ignored": ignored,
        "stray_theta": False,
        "head_dim_source": hd_source,
        "edits": edits,
        "variant": variant,
    }


FALCON_ACTS = ["gelu", "gelu", "gelu_new", "relu", "silu", "gelu_pytorch_tanh"]


def own_keys(rng, arch, turn, sizes, L, tied, rope_type):
    """The keys of Falcon, Bloom and OPT (no num_key_value_heads, intermediate_size or
    hidden_act), the case's variant label and its config.json edits. OPT draws pre- or
    post-residual norms, a word embedding width apart from the hidden size (2 in 5), biases,
    LayerNorms without weights (1 in 5) and its activation. Falcon deals the new and the old decoder in turn, each with
    rotary or (2 in 5) ALiBi; the old one with one KV head (multi_query) or one per head, in a
    parallel block or not; the new one with grouped KV heads and one or two norms. Bloom is always
    ALiBi; its files spell the sizes either way (n_embed / hidden_size, n_head /
    num_attention_heads: the `bloom-hub-names` edit)."""
    vocab, hidden, layers, heads = sizes
    if arch == "OPTForCausalLM":
        kw = dict(
            vocab_size=vocab,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            ffn_dim=rng.randint(8, 160),
            max_position_embeddings=rng.randint(max(L, GEN_PROMPT + GEN_NEW), 64),
            do_layer_norm_before=turn % 2 == 0,
            word_embed_proj_dim=rng.choice([hidden, hidden, hidden, rng.randint(4, 64), rng.randint(4, 64)]),
            enable_bias=rng.random() < 0.7,
            layer_norm_elementwise_affine=rng.random() < 0.8,
            activation_function=rng.choice(["relu", "relu", "gelu", "gelu_new", "silu"]),
            tie_word_embeddings=tied,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
        )
        norms = "pre-LN" if kw["do_layer_norm_before"] else "post-LN"
        proj = f" proj={kw['word_embed_proj_dim']}" if kw["word_embed_proj_dim"] != hidden else ""
        affine = "" if kw["layer_norm_elementwise_affine"] else " no-affine"
        return kw, f"{norms}{proj}{affine} act={kw['activation_function']} bias={kw['enable_bias']}", []
    kw = dict(
        vocab_size=vocab,
        hidden_size=hidden,
        layer_norm_epsilon=rng.choice([1e-5, 1e-6, 0.1]),
        tie_word_embeddings=tied,
        bos_token_id=1,
        eos_token_id=2,
    )
    if arch == "BloomForCausalLM":
        kw.update(n_layer=layers, n_head=heads)
        return kw, f"alibi eps={kw['layer_norm_epsilon']:g}", ["bloom-hub-names"] if rng.random() < 0.5 else []
    new = turn % 2 == 0
    alibi = rng.random() < 0.4
    kw.update(
        num_hidden_layers=layers,
        num_attention_heads=heads,
        new_decoder_architecture=new,
        alibi=alibi,
        bias=rng.random() < 0.5,
        activation=rng.choice(FALCON_ACTS),
        ffn_hidden_size=rng.choice([None, None, rng.randint(8, 160)]),
    )
    if new:
        kw.update(
            num_kv_heads=rng.choice([1, heads, rng.choice(divisors(heads))]),
            num_ln_in_parallel_attn=rng.choice([None, 2, 1]),
            parallel_attn=True,
        )
        block = f"new kv={kw['num_kv_heads']} ln={kw['num_ln_in_parallel_attn']}"
    else:
        kw.update(multi_query=rng.random() < 0.6, parallel_attn=rng.random() < 0.6)
        block = ("multi_query" if kw["multi_query"] else "per-head") + (" parallel" if kw["parallel_attn"] else "")
    if alibi:
        rope, max_pos = {"rope_type": "default", "rope_theta": 10000.0}, rng.randint(max(L, GEN_PROMPT + GEN_NEW), 64)
    else:
        rope, max_pos = sample_rope(rng, rope_type, L)
    kw.update(rope_parameters=rope, max_position_embeddings=max_pos)
    label = f"{block} {'alibi' if alibi else rope_type} act={kw['activation']} bias={kw['bias']}"
    return kw, f"{label} ffn={kw['ffn_hidden_size']} eps={kw['layer_norm_epsilon']:g}", []


def sample_new_family(rng, arch, turn, offset, L):
    """sample_case for NEW_ARCHS: the same keys, plus `edits` (family-specific config.json and
    weight-file edits) and `variant` (a label for the rope set-up)."""
    kw = {}
    ignored = {}
    edits = []
    heads = rng.choice([1, 2, 3, 4, 4, 6, 8])
    kv = heads if arch in ("GPT2LMHeadModel", "GPTNeoXForCausalLM", "GPTBigCodeForCausalLM", "GPTJForCausalLM") + OWN_KEY_ARCHS else rng.choice([1, heads, rng.choice(divisors(heads))])
    layers = (
        rng.randint(2, 4) if arch in ("Gemma3ForCausalLM", "SmolLM3ForCausalLM", "Cohere2ForCausalLM") else rng.randint(1, 3)
    )
    vocab = rng.randint(50, 300)
    tied = rng.random() < (0.7 if arch in GEMMA_ARCHS or arch in ("GPT2LMHeadModel", "SmolLM3ForCausalLM", "GPTBigCodeForCausalLM") else 0.5)

    if arch == "Phi3ForCausalLM":
        variant = PHI3_VARIANTS[(turn + offset) % len(PHI3_VARIANTS)]
        rope_type = "default" if variant == "default" else "longrope"
    elif arch in ("GPT2LMHeadModel", "GPTBigCodeForCausalLM"):
        variant, rope_type = "learned positions", None
    elif arch == "GPTJForCausalLM":
        variant, rope_type = "fixed rotary", None
    elif arch == "Gemma3ForCausalLM":
        rope_type = dealt_rope_type(turn, offset, ["linear", "llama3", "yarn"])  # the full-attention layers
        variant = f"full:{rope_type}"
    else:
        rope_type = dealt_rope_type(turn, offset)
        variant = rope_type
    dims = [4, 6, 8, 10, 12, 16, 20, 24, 32]
    if rope_type != "dynamic":
        dims.append(2)  # dynamic NTK divides by head_dim - 2

    # Sizes. Phi-3, Granite, OLMo 2, SmolLM3 and GPT-2 derive head_dim = hidden // heads;
    # the Gemmas take an explicit head_dim (class default 256).
    partial = None
    if arch in GLM_ARCHS:
        partial = rng.choice([0.5, 0.5, 0.25, 1.0, 0.75])
        least = 4 if rope_type == "dynamic" else 2
        if turn % 3 == 2:
            head_dim, hd_source = 128, "default(128)"  # absent from config.json (sparse, below)
        else:
            fits = [d for d in dims if int(d * partial) >= least and int(d * partial) % 2 == 0]
            head_dim, hd_source = rng.choice(fits or [8]), "explicit"
            kw["head_dim"] = head_dim
        hidden = rng.randint(8, 96)
    elif arch in ("Phi3ForCausalLM", "PhiForCausalLM", "GPTNeoXForCausalLM", "StableLmForCausalLM"):
        if arch == "StableLmForCausalLM":
            partial = rng.choice([0.25, 0.25, 0.5, 1.0, 0.4])
        elif arch == "PhiForCausalLM":
            partial = rng.choice([0.5, 0.5, 0.4, 0.75, 1.0, 0.25])
        elif arch == "GPTNeoXForCausalLM":
            partial = rng.choice([0.25, 0.25, 0.5, 1.0, 0.4, 0.75])
        else:
            partial = rng.choice([1.0, 1.0, 0.5, 0.75, 0.25])
        least = 4 if rope_type == "dynamic" else 2  # dynamic NTK divides by the rotary dims - 2
        fits = [
            d for d in dims if d * heads <= 128 and int(d * partial) >= least and int(d * partial) % 2 == 0
        ]  # an even number of rotary dims
        head_dim = rng.choice(fits or [8])
        if arch in ("GPTNeoXForCausalLM", "StableLmForCausalLM"):  # hidden a multiple of the heads
            hidden, hd_source = heads * head_dim, "derived"
        else:
            hidden, hd_source = floor_hidden(rng, heads, head_dim)
    elif arch in ("GPT2LMHeadModel", "GPTBigCodeForCausalLM", "GPTJForCausalLM") + OWN_KEY_ARCHS:
        head_dim = rng.choice([d for d in dims if d * heads <= 128] or [2])
        hidden, hd_source = heads * head_dim, "derived"
    elif arch in GEMMA_ARCHS:
        if arch == "GemmaForCausalLM":
            hidden = rng.randint(8, 96)
        else:  # Gemma2Config / Gemma3TextConfig check hidden % heads == 0
            hidden = heads * rng.randint(max(1, 8 // heads), max(2, 96 // heads))
        if turn % 3 == 2 or rng.random() < 0.1:
            head_dim, hd_source = 256, "default(256)"  # absent from config.json (sparse, below)
        else:
            head_dim, hd_source = rng.choice(dims), "explicit"
            kw["head_dim"] = head_dim
    elif arch == "Starcoder2ForCausalLM" and rng.random() < 0.3:
        head_dim, hd_source = rng.choice(dims), "explicit"
        hidden = rng.randint(8, 96)
        kw["head_dim"] = head_dim
    else:
        head_dim = rng.choice([d for d in dims if d * heads <= 128] or [2])
        hidden, hd_source = floor_hidden(rng, heads, head_dim)

    if arch in OWN_KEY_ARCHS:
        keys, variant, edits = own_keys(rng, arch, turn, (vocab, hidden, layers, heads), L, tied, rope_type)
        kw.update(keys)
        return gpt_style_case(arch, kw, rng.random() < 0.35, hd_source, variant, ignored=[], edits=edits)
    if arch == "GPTJForCausalLM":
        rotary = rng.choice([head_dim, head_dim] + [r for r in range(2, head_dim, 2)])
        kw.update(gpt_style_keys(rng, (vocab, hidden, layers, heads), L, tied, GPT2_ACTS), rotary_dim=rotary)
        return gpt_style_case(arch, kw, rng.random() < 0.35, hd_source, f"rotary_dim={rotary}", ignored=[], edits=[])
    if arch == "GPTBigCodeForCausalLM":
        acts = ["gelu_pytorch_tanh", "gelu_pytorch_tanh", "gelu_new", "gelu", "relu"]
        kw.update(gpt_style_keys(rng, (vocab, hidden, layers, heads), L, tied, acts))
        kw.update(scale_attn_weights=rng.random() < 0.8, multi_query=rng.random() < 0.6)
        ignored_keys = []
        if rng.random() < 0.2:
            kw["scale_attn_by_inverse_layer_idx"] = True  # a GPT-2 key GPTBigCode does not read
            ignored_keys.append("scale_attn_by_inverse_layer_idx")
        variant += " multi_query" if kw["multi_query"] else " per-head c_attn"
        return gpt_style_case(arch, kw, rng.random() < 0.35, hd_source, variant, ignored=ignored_keys, edits=[])
    if arch == "GPT2LMHeadModel":
        kw.update(gpt_style_keys(rng, (vocab, hidden, layers, heads), L, tied, GPT2_ACTS))
        kw.update(
            scale_attn_weights=rng.random() < 0.8,
            scale_attn_by_inverse_layer_idx=rng.random() < 0.2,
            reorder_and_upcast_attn=rng.random() < 0.15,  # the same result in float32
        )
        if tied and rng.random() < 0.35:
            edits.append("hub-names")  # weights named as openai-community/gpt2 names them
        if rng.random() < 0.35:
            edits.append("attn-bias-buffers")  # the old causal-mask buffers, which loaders skip
        return gpt_style_case(arch, kw, rng.random() < 0.35, hd_source, variant, ignored=[], edits=edits)

    kw.update(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=rng.randint(8, 160),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        rms_norm_eps=rng.choice([1e-6, 1e-5, 1e-8, 0.1]),
        tie_word_embeddings=tied,
    )
    if arch == "Starcoder2ForCausalLM":
        kw["norm_epsilon"] = kw.pop("rms_norm_eps")
    elif arch in COHERE_ARCHS + ("PhiForCausalLM", "GPTNeoXForCausalLM", "StableLmForCausalLM"):
        kw["layer_norm_eps"] = kw.pop("rms_norm_eps")
    if arch == "GPTNeoXForCausalLM":
        del kw["num_key_value_heads"]  # one KV head per head, no such key
    if arch in ("Phi3ForCausalLM", "SmolLM3ForCausalLM") + COHERE_ARCHS:
        kw.update(bos_token_id=1, eos_token_id=2, pad_token_id=0)  # class defaults are past the vocab
    elif arch == "Starcoder2ForCausalLM":
        kw.update(bos_token_id=1, eos_token_id=2)
    elif arch == "Olmo2ForCausalLM":
        kw.update(eos_token_id=2)

    # Rope.
    if arch == "Phi3ForCausalLM":
        theta = rng.choice([10000.0, 250000.0, 1000000.0, 100.0])
        rope = {"rope_type": rope_type, "rope_theta": theta, "partial_rotary_factor": partial}
        if rope_type == "longrope":
            n = int(head_dim * partial) // 2
            short = [round(rng.uniform(1.0, 3.0), 3) for _ in range(n)]
            long = [round(rng.uniform(1.0, 24.0), 3) for _ in range(n)]
            # Past it (forward goldens on the long factors) or not (short factors throughout), and
            # never crossed in the greedy run of tests/python/unseen_generation.py (see GEN_PROMPT).
            if variant == "longrope-long":
                original = rng.randint(2, min(L - 1, GEN_PROMPT - 1))
            else:
                original = rng.randint(max(L, GEN_PROMPT + GEN_NEW - 1), 64)
            max_pos = max(L, original * rng.choice([1, 2, 4, 8, 32]))
            rope.update(short_factor=short, long_factor=long, original_max_position_embeddings=original)
            kw["original_max_position_embeddings"] = original  # Phi3Config's own key wins over the dict's
            f = rng.random()
            if f < 0.15:
                rope["factor"] = rng.choice([1.0, 2.0, 4.0, 16.0])  # instead of max_pos / original
            elif f < 0.3:
                rope["attention_factor"] = rng.choice([1.0, 1.19, 0.8])
        else:
            max_pos = rng.randint(L, 64)
        if rng.random() < 0.3:
            kw["sliding_window"] = rng.randint(2, 6)  # every layer
    elif arch == "Gemma3ForCausalLM":
        local_theta = rng.choice([10000.0, 10000.0, 1000.0, 100000.0])
        sliding = {"rope_type": "default", "rope_theta": local_theta}
        if rng.random() < 0.15:
            sliding = {"rope_type": "linear", "rope_theta": local_theta, "factor": rng.choice([2.0, 4.0])}
        if rope_type == "default":
            full = {"rope_type": "default", "rope_theta": rng.choice([1000000.0, 10000.0, 500000.0])}
            max_pos = rng.randint(L, 64)
        else:
            full, max_pos = sample_rope(rng, rope_type, L)
        rope = {"sliding_attention": sliding, "full_attention": full}
        variant = f"sliding:{sliding['rope_type']} full:{full['rope_type']}"
    else:
        rope, max_pos = sample_rope(rng, rope_type, L)
        if rope_type == "default" and rng.random() < 0.3:
            rope, max_pos = sample_longrope(rng, int(head_dim * (partial or 1.0)), L)
            variant = "longrope"
        if arch in ("PhiForCausalLM", "GPTNeoXForCausalLM", "StableLmForCausalLM") + GLM_ARCHS:
            rope["partial_rotary_factor"] = partial
            default = 0.5 if arch in ("PhiForCausalLM",) + GLM_ARCHS else 0.25
            if partial == default and rng.random() < 0.5:
                edits.append(f"partial-absent:{default}")  # the config class's default
        if arch == "SmolLM3ForCausalLM" and rope_type == "default" and rng.random() < 0.3:
            rope["rope_theta"] = 2000000.0  # SmolLM3's default_theta
    kw["rope_parameters"] = rope
    kw["max_position_embeddings"] = max_pos

    nested = arch == "Gemma3ForCausalLM"
    old_form = not nested and rng.random() < 0.4
    old_type_key = rng.random() < 0.5
    sparse = rng.random() < 0.35 or hd_source.startswith("default(")
    hoist = None
    if not nested and rope_type in ("llama3", "yarn", "longrope") and rng.random() < 0.3:
        hoist = rng.choice(["drop", "shadow"])
    stray_theta = not old_form and not nested and rng.random() < 0.2

    # Per-family features.
    if arch == "Phi3ForCausalLM":
        kw["hidden_act"] = rng.choice(["silu", "silu", "gelu_pytorch_tanh"])
        if old_form and rope_type == "longrope" and hoist is None and rng.random() < 0.3:
            edits.append("type-su")  # Phi-3's first long-context files: "su" for longrope
        if rng.random() < 0.1:
            ignored["attention_bias"] = True  # Phi3Attention has no biases
    elif arch in GEMMA_ARCHS:
        if arch == "GemmaForCausalLM":
            kw["hidden_act"] = "gelu_pytorch_tanh"
            if rng.random() < 0.5:
                # config.json says "gelu", which GemmaConfig reads as the tanh approximation (with
                # or without the hidden_activation key of the gemma-1.1 files, which it ignores)
                edits.append(rng.choice(["legacy-gelu", "legacy-gelu+hidden_activation"]))
            if rng.random() < 0.1:
                ignored["sliding_window"] = rng.randint(2, 6)  # GemmaModel has no sliding attention
        else:
            act = rng.choice(["gelu_pytorch_tanh", "gelu_pytorch_tanh", "gelu_pytorch_tanh", "gelu"])
            kw["hidden_activation"] = act  # exact "gelu" here: only Gemma 1 maps it to tanh
            if rng.random() < 0.4:
                ignored["hidden_act"] = act  # real Gemma 2/3 files carry both keys
            r = rng.random()
            if r < 0.35:
                kw["query_pre_attn_scalar"] = head_dim
            elif r < 0.75:
                kw["query_pre_attn_scalar"] = rng.choice([8, 24, 48, 64, 144])
            # else the class default 256
            kw["sliding_window"] = rng.choice([2, 3, 4, 5, 6, 2, 3, 4096])  # 4096: the class default
            if arch == "Gemma2ForCausalLM":
                kw["attn_logit_softcapping"] = rng.choice([50.0, None, 2.0, 5.0, 10.0])
                kw["final_logit_softcapping"] = rng.choice([30.0, None, 1.5, 3.0, 5.0])
                if rng.random() < 0.3:
                    kw["layer_types"] = [rng.choice(["full_attention", "sliding_attention"]) for _ in range(layers)]
            else:
                kw["attn_logit_softcapping"] = rng.choice([None, None, None, 5.0, 50.0])
                kw["final_logit_softcapping"] = rng.choice([None, None, None, 3.0, 30.0])
                if rng.random() < 0.6:
                    pattern = rng.choice([2, 3, 6])
                    kw["layer_types"] = [
                        "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)
                    ]
                    # Hub form: rope_theta / rope_local_base_freq / rope_scaling and the pattern
                    # instead of rope_parameters / layer_types (needs a default local rope).
                    if sliding["rope_type"] == "default" and rng.random() < 0.5:
                        edits.append(f"gemma3-hub-form:{pattern}")
                else:
                    kw["layer_types"] = [rng.choice(["full_attention", "sliding_attention"]) for _ in range(layers)]
        kw["attention_bias"] = rng.random() < 0.2
    elif arch == "GraniteForCausalLM":
        kw.update(
            hidden_act=rng.choice(["silu", "silu", "gelu_pytorch_tanh"]),
            embedding_multiplier=rng.choice([1.0, 12.0, 6.0, 0.5, 2.0]),
            attention_multiplier=rng.choice(
                [round(head_dim**-0.5, 6), round(1.0 / head_dim, 6), 0.0078125, round(rng.uniform(0.05, 0.5), 3)]
            ),
            residual_multiplier=rng.choice([1.0, 0.22, 0.5, 0.7]),
            logits_scaling=rng.choice([1.0, 8.0, 16.0, 2.5, 0.5]),
            attention_bias=rng.random() < 0.3,
            mlp_bias=rng.random() < 0.3,
        )
        if rng.random() < 0.1:
            ignored["sliding_window"] = rng.randint(2, 6)  # GraniteModel has no sliding attention
    elif arch == "Olmo2ForCausalLM":
        kw["hidden_act"] = rng.choice(["silu", "silu", "gelu_pytorch_tanh"])
        kw["attention_bias"] = rng.random() < 0.3
        if rng.random() < 0.1:
            ignored["mlp_bias"] = True  # Olmo2MLP has no biases
    elif arch == "SmolLM3ForCausalLM":
        kw["hidden_act"] = rng.choice(["silu", "silu", "gelu_pytorch_tanh"])
        if turn % 2 == 0:
            interval = rng.choice([2, 3, 4])
            kw["no_rope_layer_interval"] = interval
            if rng.random() < 0.6:
                edits.append("no-rope-interval-only")  # config.json without the derived list
        else:
            kw["no_rope_layers"] = [rng.choice([0, 1, 1]) for _ in range(layers)]
            kw["no_rope_layer_interval"] = rng.choice([4, 2, 3])  # not what the list says
        r = rng.random()
        if r < 0.4:
            kw["use_sliding_window"] = True  # the NoPE layers slide
            kw["sliding_window"] = rng.randint(2, 6)
            if rng.random() < 0.2:
                kw["layer_types"] = [rng.choice(["full_attention", "sliding_attention"]) for _ in range(layers)]
        elif r < 0.55:
            kw["use_sliding_window"] = False
            kw["sliding_window"] = rng.randint(2, 6)  # ignored
        kw["attention_bias"] = rng.random() < 0.3
        kw["mlp_bias"] = rng.random() < 0.3
    elif arch == "PhiForCausalLM":
        kw["hidden_act"] = rng.choice(["gelu_new", "gelu_new", "gelu", "gelu_pytorch_tanh", "silu"])
        kw["qk_layernorm"] = rng.random() < 0.5 and head_dim > 2  # see DEGENERATE_QK_NORM
        if rng.random() < 0.1:
            ignored["attention_bias"] = False  # PhiAttention's biases are always there
    elif arch in GLM_ARCHS:
        kw["hidden_act"] = rng.choice(["silu", "silu", "gelu_pytorch_tanh", "gelu"])
        kw["attention_bias"] = rng.random() < 0.7
        kw.update(bos_token_id=1, eos_token_id=2, pad_token_id=0)  # the class's pad id is past the vocab
    elif arch == "StableLmForCausalLM":
        kw["hidden_act"] = rng.choice(["silu", "silu", "gelu_pytorch_tanh", "gelu"])
        kw["use_qkv_bias"] = rng.random() < 0.4
        kw["qk_layernorm"] = rng.random() < 0.5 and head_dim > 2  # see DEGENERATE_QK_NORM
        kw["use_parallel_residual"] = rng.random() < 0.5
        kw.update(bos_token_id=1, eos_token_id=2)
    elif arch in COHERE_ARCHS:
        kw["hidden_act"] = rng.choice(["silu", "silu", "gelu_pytorch_tanh", "gelu"])
        kw["logit_scale"] = rng.choice([0.0625, 0.25, 1.0, 0.8333, 2.0])
        kw["attention_bias"] = rng.random() < 0.3
        if arch == "CohereForCausalLM":
            kw["use_qk_norm"] = rng.random() < 0.5 and head_dim > 2  # see DEGENERATE_QK_NORM
        else:
            kw["sliding_window"] = rng.choice([2, 3, 4, 5, 6, 4096])
            if rng.random() < 0.6:
                pattern = rng.choice([2, 3, 4])
                kw["layer_types"] = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]
                if rng.random() < 0.6:
                    edits.append(f"cohere2-pattern:{pattern}")
            else:
                kw["layer_types"] = [rng.choice(["full_attention", "sliding_attention"]) for _ in range(layers)]
    elif arch == "GPTNeoXForCausalLM":
        kw["hidden_act"] = rng.choice(["gelu", "gelu", "gelu_new", "relu", "silu", "gelu_pytorch_tanh"])
        kw["use_parallel_residual"] = rng.random() < 0.6
        kw["attention_bias"] = rng.random() < 0.8
    elif arch == "Starcoder2ForCausalLM":
        kw["hidden_act"] = rng.choice(["gelu_pytorch_tanh", "gelu_pytorch_tanh", "gelu", "gelu_new", "silu"])
        kw["use_bias"] = rng.random() < 0.7
        if rng.random() < 0.5:
            kw["sliding_window"] = rng.randint(2, 6)  # every layer
        if rng.random() < 0.1:
            ignored["attention_bias"] = not kw["use_bias"]  # Starcoder2 reads use_bias only
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
        "head_dim_source": hd_source,
        "edits": edits,
        "variant": variant,
    }


# ---------------------------------------------------------------------------------------------
# The mixture-of-experts families (selected with --archs): Qwen3-MoE, Mixtral, Qwen2-MoE.

# Routing must not sit near a tie: a runtime's other float rounding could pick other experts.
# The smallest accepted gap between the k-th and (k+1)-th routing probability of any token
# (padded positions included) in any sparse layer, and how often the weights are redrawn to get it.
MIN_ROUTER_GAP = 1e-4
MAX_REDRAWS = 20


def multiple_of_4(rng, lo, hi):
    """transformers 5.23 runs the experts with torch's grouped_mm by default (what a plain
    from_pretrained gives), which needs 16-byte strides: hidden and expert intermediate sizes
    that are multiples of 4 floats (other sizes raise "strides should be multiple of 16 bytes")."""
    return 4 * rng.randint(math.ceil(lo / 4), hi // 4)


def sparse_layer_flags(arch, layers, step, mlp_only, first_dense=0, ernie=(1, 1, -1), moe_layers=()):
    """Which layers get the sparse MoE block (the others keep a dense MLP), as the modeling code
    decides: Mixtral every layer; Qwen unless listed in mlp_only_layers, every `step`-th;
    DeepSeek and GLM-4.5 from first_k_dense_replace on; ERNIE every `interval`-th layer (1-based)
    from `start` to `end` (0-based, both included; -1 the last), `ernie` = (interval, start, end);
    Llama 4 the `moe_layers` its config derived (from interleave_moe_layer_step or listed)."""
    if arch == "Llama4ForCausalLM":
        return [i in moe_layers for i in range(layers)]
    if arch == "Gemma4ForCausalLM":  # enable_moe_block: experts beside every dense MLP
        return [True] * layers
    if arch in DEEPSEEK_ARCHS + ("Glm4MoeForCausalLM",):
        return [i >= first_dense for i in range(layers)]
    if arch == "Ernie4_5_MoeForCausalLM":
        interval, start, end = ernie
        end = layers - 1 if end == -1 else end
        return [(i + 1) % interval == 0 and start <= i <= end for i in range(layers)]
    if arch in ("MixtralForCausalLM", "OlmoeForCausalLM", "GptOssForCausalLM") + GRANITE_MOE_ARCHS:
        return [True] * layers
    return [i not in (mlp_only or []) and (i + 1) % step == 0 for i in range(layers)]


def sample_deepseek(rng, arch, turn, offset, L):
    """sample_case for DEEPSEEK_ARCHS: latent attention (q_lora_rank null or a rank, the latent,
    nope / rope / value channels per head, V3's rope_interleave), yarn's mscale_all_dim, the
    experts in groups (V2's greedy or group-limited softmax, V3's corrected sigmoid), dense first
    layers, shared experts, routed_scaling_factor; V3's score corrections drawn after saving."""
    v3 = arch == "DeepseekV3ForCausalLM"
    m4 = arch == "Mistral4ForCausalLM"
    edits = []
    rope_type = dealt_rope_type(turn, offset)
    layers = rng.randint(1, 3)
    heads = rng.choice([1, 2, 3, 4, 4, 6])
    rope_dim = rng.choice([2, 4, 6, 8, 12, 16] if rope_type != "dynamic" else [4, 6, 8, 12, 16])
    hidden = heads * multiple_of_4(rng, 4, 24)  # V2's config checks hidden % heads
    experts = rng.choice([2, 4, 6, 8, 9, 12])
    groups = rng.choice([g for g in divisors(experts) if not (v3 or m4) or experts // g >= 2])
    top_groups = rng.randint(1, groups)
    top_k = rng.randint(1, min(top_groups * (experts // groups), experts))
    kw = dict(
        vocab_size=rng.randint(50, 300),
        hidden_size=hidden,
        intermediate_size=multiple_of_4(rng, 4, 96),
        moe_intermediate_size=multiple_of_4(rng, 4, 48),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        kv_lora_rank=rng.randint(2, 32),
        q_lora_rank=rng.choice([None, rng.randint(2, 32)]),
        qk_nope_head_dim=rng.randint(2, 16),
        qk_rope_head_dim=rope_dim,
        v_head_dim=rng.randint(2, 16),
        n_routed_experts=experts,
        num_experts_per_tok=top_k,
        n_group=groups,
        topk_group=top_groups,
        n_shared_experts=rng.choice([0, 1, 2]),
        first_k_dense_replace=rng.randint(0, layers - 1),
        routed_scaling_factor=rng.choice([1.0, 2.5, 0.5, 16.0]),
        hidden_act=rng.choice(["silu", "silu", "gelu_pytorch_tanh", "gelu_new"]),
        rms_norm_eps=rng.choice([1e-6, 1e-5, 0.1]),
        tie_word_embeddings=rng.random() < 0.3,
        attention_bias=rng.random() < 0.3,
        mlp_bias=rng.random() < 0.2,
        bos_token_id=1,
        eos_token_id=2,
    )
    if v3 or m4:
        kw.update(norm_topk_prob=rng.random() < 0.7, rope_interleave=rng.random() < 0.7)
    if v3:
        edits.append("score-corrections")
    elif not m4:
        kw["topk_method"] = rng.choice(["greedy", "group_limited_greedy"])
        # V2's complex rotary views its channels in pairs: the rows it reads them from must have
        # even strides (nope + rope and kv_lora + rope even), as every released V2 has
        kw["qk_nope_head_dim"] += kw["qk_nope_head_dim"] % 2
        kw["kv_lora_rank"] += kw["kv_lora_rank"] % 2
    if m4 and rope_type == "default":
        # transformers' default rope ignores Mistral 4's partial factor (its rotary then spans
        # the whole head and the forward fails): the class's yarn instead
        rope_type = "yarn"
    rope, max_pos = sample_rope(rng, rope_type, L)
    # (transformers' scale correction reads `factor`, which a yarn dict may leave null)
    if rope_type == "yarn" and rope.get("factor") is not None and rng.random() < 0.7:
        # DeepSeek's yarn: mscale and mscale_all_dim (the score scale's correction)
        m = rng.choice([0.707, 1.0])
        rope.update(mscale=m, mscale_all_dim=rng.choice([m, 1.0, 0.0]))
    old_form = rng.random() < 0.3
    if m4:
        # Llama 4's query scaling reads both keys from the rope dict whatever its type; the
        # partial factor (of the whole head) as the class sets it, or written out
        rope["llama_4_scaling_beta"] = rng.choice([0.1, 0.5, 0.0])
        rope.setdefault("original_max_position_embeddings", rng.randint(1, L))
        if rope.get("factor", 1.0) is None:
            rope["factor"] = rng.choice([2.0, 4.0])  # Mistral4's yarn mscale reads it unguarded
        if rng.random() < 0.5:
            head = rope_dim + kw["qk_nope_head_dim"]
            factor = rope_dim / head
            while int(head * factor) < rope_dim:  # transformers' int(): 2 / 17 * 17 is 1.999...
                factor = math.nextafter(factor, 1.0)
            rope["partial_rotary_factor"] = factor
        old_form = False  # rope_scaling would not carry the scaling keys through
    kw["rope_parameters"] = rope
    kw["max_position_embeddings"] = max_pos
    return latent_or_flagship_case(rng, arch, kw, old_form, "qk_rope_head_dim", edits, rope_type)


def latent_or_flagship_case(rng, arch, kw, old_form, head_dim_source, edits, variant):
    """The case dict of sample_deepseek and sample_flagship: no hoisted or ignored keys, a
    sparse config.json three times in ten, a stray top-level rope_theta once in five new forms."""
    return {
        "arch": arch,
        "kwargs": kw,
        "old_form": old_form,
        "old_type_key": rng.random() < 0.5,
        "sparse": rng.random() < 0.3,
        "hoist": None,
        "ignored": [],
        "stray_theta": not old_form and rng.random() < 0.2,
        "head_dim_source": head_dim_source,
        "edits": edits,
        "variant": variant,
    }


def sample_flagship(rng, arch, turn, offset, L):
    """sample_case for FLAGSHIP_ARCHS. GLM-4.5: head dims unlike hidden/heads, kv-head counts,
    partial rotary (absent: the class's 0.5), q/k norms and q/k/v biases by key, DeepSeek-V3's
    groups with score corrections drawn after saving, dense first layers, shared experts. ERNIE
    4.5: `use_bias` (the MoE model's head too), `head_dim` (the dense class's default 128, or
    explicit); the MoE model's layer window (interval, start, end) always holding a sparse layer,
    shared experts (0 included), corrections drawn after saving."""
    if arch == "Gemma4ForCausalLM":
        return sample_gemma4(rng, L)
    if arch == "Gemma3nForCausalLM":
        return sample_gemma3n(rng, L)
    edits = []
    rope_type = dealt_rope_type(turn, offset)
    layers = rng.randint(1, 3)
    heads = rng.choice([1, 2, 3, 4, 4, 6])
    kv = rng.choice([1, heads, rng.choice(divisors(heads))])
    dims = [4, 6, 8, 12, 16, 20, 24] + ([] if rope_type == "dynamic" else [2])
    hidden = multiple_of_4(rng, 8, 96)
    head_dim = rng.choice(dims)
    kw = dict(
        vocab_size=rng.randint(50, 300),
        hidden_size=hidden,
        intermediate_size=multiple_of_4(rng, 4, 96),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=head_dim,
        hidden_act=rng.choice(["silu", "silu", "gelu_pytorch_tanh", "gelu_new"]),
        rms_norm_eps=rng.choice([1e-6, 1e-5, 0.1]),
        tie_word_embeddings=rng.random() < 0.4,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    rope, max_pos = sample_rope(rng, rope_type, L)
    if arch == "Glm4MoeForCausalLM":
        head_dim = 2 * rng.randint(1, 12)  # the rotary half of an odd head would be fractional
        kw["head_dim"] = head_dim
        experts = rng.choice([2, 4, 6, 8, 9, 12])
        groups = rng.choice([g for g in divisors(experts) if experts // g >= 2])
        top_groups = rng.randint(1, groups)
        kw.update(
            moe_intermediate_size=multiple_of_4(rng, 4, 48),
            n_routed_experts=experts,
            num_experts_per_tok=rng.randint(1, top_groups * (experts // groups)),
            n_group=groups,
            topk_group=top_groups,
            n_shared_experts=rng.choice([0, 1, 2]),
            first_k_dense_replace=rng.randint(0, layers - 1),
            routed_scaling_factor=rng.choice([1.0, 2.5, 0.5]),
            norm_topk_prob=rng.random() < 0.7,
            attention_bias=rng.random() < 0.5,
            use_qk_norm=rng.random() < 0.5,
        )
        # partial rotary: the class's 0.5 when absent, else a factor giving whole pairs
        factors = [f for f in (0.25, 0.5, 0.75, 1.0) if (head_dim * f) % 2 == 0 and head_dim * f >= 2]
        factor = rng.choice(factors)
        if factor != 0.5 or rng.random() < 0.5:
            rope["partial_rotary_factor"] = factor
        edits.append("score-corrections")
    elif arch != "Llama4ForCausalLM":
        kw["use_bias"] = rng.random() < 0.6
        kw["head_dim"] += kw["head_dim"] % 2  # interleaved pairs
        if arch == "Ernie4_5ForCausalLM" and rng.random() < 0.2:
            del kw["head_dim"]  # the dense class's 128
    if arch == "Ernie4_5_MoeForCausalLM":
        experts = rng.randint(2, 8)
        while True:
            window = (rng.choice([1, 1, 2]), rng.randint(0, layers - 1), rng.choice([-1, rng.randint(0, layers - 1)]))
            if any(sparse_layer_flags(arch, layers, 1, None, ernie=window)):
                break
        kw.update(
            moe_intermediate_size=multiple_of_4(rng, 4, 48),
            moe_num_experts=experts,
            moe_k=rng.randint(1, experts),
            moe_num_shared_experts=rng.choice([0, 1, 2]),
            moe_layer_interval=window[0],
            moe_layer_start_index=window[1],
            moe_layer_end_index=window[2],
        )
        edits.append("score-corrections")
    if arch == "Llama4ForCausalLM":
        sample_llama4(rng, kw, layers)
    kw["rope_parameters"] = rope
    kw["max_position_embeddings"] = max_pos
    source = "explicit" if "head_dim" in kw else "class-default"
    return latent_or_flagship_case(rng, arch, kw, rng.random() < 0.3, source, edits, rope_type)


def sample_gemma4(rng, L):
    """A Gemma4ForCausalLM case: head sizes and KV heads of the full layers apart from the sliding
    ones (stored as per_layer_config, or as the hub's global_head_dim keys), values from the keys
    or not, layer_types given or the 5:1 default (the last layer always full), windows within
    and past the prompt, the sliding and full ropes of the default, linear and proportional
    types (a fraction of the head turning, frequencies scaled or not), shared keys and values
    over 0 to all-but-one-of-each-kind last layers, double-wide MLPs, per-layer embeddings of
    several widths or none, soft-capped logits, biases, tied or untied heads; the per-layer
    factors (`layer_scalar`, a buffer) drawn after saving."""
    layers = rng.randint(2, 7)
    heads = rng.choice([1, 2, 4, 4, 6])
    dims = [4, 6, 8, 12, 16]
    head_dim, global_head_dim = rng.choice(dims), rng.choice(dims + [24, 32])
    k_eq_v = rng.random() < 0.5
    kw = dict(
        vocab_size=rng.randint(50, 300),
        hidden_size=multiple_of_4(rng, 8, 96),
        intermediate_size=multiple_of_4(rng, 4, 96),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=rng.choice(divisors(heads)),
        head_dim=head_dim,
        global_head_dim=global_head_dim,
        attention_k_eq_v=k_eq_v,
        hidden_activation=rng.choice(["gelu_pytorch_tanh", "gelu_pytorch_tanh", "silu", "gelu"]),
        rms_norm_eps=rng.choice([1e-6, 1e-5, 0.1]),
        sliding_window=rng.randint(1, L + 2),
        attention_bias=rng.random() < 0.2,
        final_logit_softcapping=rng.choice([None, None, 5.0, 30.0]),
        tie_word_embeddings=rng.random() < 0.6,
        max_position_embeddings=rng.choice([64, 131072]),
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    if k_eq_v and rng.random() < 0.7:
        kw["num_global_key_value_heads"] = rng.choice(divisors(heads))
    share = rng.random() < 0.6
    if share or rng.random() < 0.6:
        kw["layer_types"] = [rng.choice(["sliding_attention", "full_attention"]) for _ in range(layers)]
        if share:  # a full and a sliding layer before the last, so that some last layers can share
            kw["layer_types"][rng.randrange(layers - 1)] = "full_attention"
            kw["layer_types"][0] = "sliding_attention" if kw["layer_types"][0] == "full_attention" else "full_attention"
    types = kw.get("layer_types") or ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(layers)]
    types = types[:-1] + ["full_attention"]  # Gemma4TextConfig forces the last layer full
    kw["hidden_size_per_layer_input"] = rng.choice([0, 4, 8, 12])
    kw["vocab_size_per_layer_input"] = kw["vocab_size"]
    # shared layers: each kind among them needs an earlier layer of its kind, every kind one
    shareable = [n for n in range(layers) if set(types[: layers - n]) == set(types)]
    kw["num_kv_shared_layers"] = rng.choice(shareable[1:] if share and len(shareable) > 1 else shareable)
    if rng.random() < 0.35:  # the 26B-A4B's experts beside every dense MLP
        experts = rng.randint(2, 8)
        kw.update(
            enable_moe_block=True,
            num_experts=experts,
            top_k_experts=rng.randint(1, min(experts, 3)),
            moe_intermediate_size=multiple_of_4(rng, 4, 48),
        )
    if kw["num_kv_shared_layers"] and not kw["hidden_size_per_layer_input"]:
        # transformers 5.23 slices the per-layer inputs before the shared layers unconditionally
        # (`_maybe_slice_kv_shared_inputs`), so a prompt fails without them: the E2B/E4B checkpoints
        # that share keys always have them
        kw["hidden_size_per_layer_input"] = rng.choice([4, 8, 12])
    kw["use_double_wide_mlp"] = rng.random() < 0.5

    def rope(kind):
        rope_type = rng.choice(["default", "linear", "proportional", "proportional"])
        theta = rng.choice([10000.0, 1000000.0, 100.0])
        if rope_type == "default":
            return {"rope_type": "default", "rope_theta": theta}
        if rope_type == "linear":
            return {"rope_type": "linear", "factor": rng.choice([2.0, 0.5]), "rope_theta": theta}
        out = {"rope_type": "proportional", "rope_theta": theta}
        if rng.random() < 0.8:
            out["partial_rotary_factor"] = rng.choice([0.25, 0.5, 0.3, 1.0])
        if rng.random() < 0.5:
            out["factor"] = rng.choice([2.0, 8.0])
        return out

    kw["rope_parameters"] = {"sliding_attention": rope("sliding"), "full_attention": rope("full")}
    edits = ["layer-scalars"] + (["gemma4-hub-form"] if rng.random() < 0.5 else [])
    case = latent_or_flagship_case(rng, "Gemma4ForCausalLM", kw, False, "explicit", edits, "gemma4")
    case["stray_theta"] = False  # the ropes are per layer kind: no top-level theta to shadow
    return case


def sample_gemma3n(rng, L):
    """A Gemma3nForCausalLM case: AltUp's stream count (1 to 5), active stream and correction
    scale, LAuReL's rank, one MLP width for all layers or a list, gates sparsified at drawn
    fractions on drawn layers (the class default leaves configs of 10 layers or fewer dense),
    layer_types given or the 4:1 default, windows within and past the prompt, the default or
    linear rope per kind with their own bases, shared keys and values over 1 to all-but-one-of-
    each-kind last layers (the class default 15 fails on fewer layers), per-layer embeddings of
    several widths from a table as large as the vocabulary or smaller (ids past it read row 0),
    soft-capped logits, biases, tied or untied heads."""
    layers = rng.randint(2, 7)
    heads = rng.choice([1, 2, 4, 4, 6])
    hidden = heads * multiple_of_4(rng, 4, 48 // heads + 4)  # Gemma3nTextConfig: a multiple of the heads
    vocab = rng.randint(50, 300)
    per_layer_width = rng.random() < 0.5
    kw = dict(
        vocab_size=vocab,
        vocab_size_per_layer_input=rng.choice([vocab, rng.randint(vocab // 2, vocab)]),
        hidden_size=hidden,
        # wide enough that a sparsified gate keeps a few channels: over 8 the top 5% is at most
        # one channel at its cutoff, whose every float32 rounding moves the logits ~1e-4
        intermediate_size=[multiple_of_4(rng, 32, 128) for _ in range(layers)]
        if per_layer_width
        else multiple_of_4(rng, 32, 128),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=rng.choice(divisors(heads)),
        head_dim=rng.choice([4, 6, 8, 12, 16]),
        hidden_activation=rng.choice(["gelu_pytorch_tanh", "gelu_pytorch_tanh", "silu", "gelu"]),
        rms_norm_eps=rng.choice([1e-6, 1e-5, 0.1]),
        sliding_window=rng.randint(1, L + 2),
        attention_bias=rng.random() < 0.2,
        final_logit_softcapping=rng.choice([5.0, 30.0, 30.0]),
        tie_word_embeddings=rng.random() < 0.6,
        max_position_embeddings=rng.choice([64, 32768]),
        # not 1: an RMS norm over one channel is its sign, which a 1e-8 error flips near 0
        hidden_size_per_layer_input=rng.choice([2, 4, 8, 12]),
        activation_sparsity_pattern=[rng.choice([0.0, 0.0, 0.5, 0.8, 0.95]) for _ in range(layers)],
        altup_num_inputs=rng.choice([1, 2, 3, 4, 4, 5]),
        altup_correct_scale=rng.random() < 0.7,
        laurel_rank=rng.choice([1, 4, 8, 16]),
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    kw["altup_active_idx"] = rng.choice([0, 0, rng.randrange(kw["altup_num_inputs"])])
    share = rng.random() < 0.6
    if share or rng.random() < 0.6:
        kw["layer_types"] = [rng.choice(["sliding_attention", "full_attention"]) for _ in range(layers)]
        # both kinds before the last layer, so that some last layers can share
        kw["layer_types"][0] = "sliding_attention"
        kw["layer_types"][rng.randrange(1, layers)] = "full_attention"
    types = kw.get("layer_types") or ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(layers)]
    shareable = [n for n in range(layers) if set(types[: layers - n]) == set(types)]
    kw["num_kv_shared_layers"] = rng.choice(shareable[1:] if share and len(shareable) > 1 else shareable)

    def rope():
        theta = rng.choice([10000.0, 1000000.0, 100.0])
        if rng.random() < 0.6:
            return {"rope_type": "default", "rope_theta": theta}
        return {"rope_type": "linear", "factor": rng.choice([2.0, 0.5]), "rope_theta": theta}

    kw["rope_parameters"] = {"sliding_attention": rope(), "full_attention": rope()}
    case = latent_or_flagship_case(rng, "Gemma3nForCausalLM", kw, False, "explicit", [], "gemma3n")
    case["stray_theta"] = False  # the ropes are per layer kind: no top-level theta to shadow
    return case


def gemma4_hub_form(cfg, kw):
    """The hub's Gemma 4 config.json: `global_head_dim` (and `num_global_key_value_heads`) in place
    of the `per_layer_config` that 5.23 derives from them and saves."""
    out = {k: v for k, v in cfg.items() if k != "per_layer_config"}
    out["global_head_dim"] = kw["global_head_dim"]
    if "num_global_key_value_heads" in kw:
        out["num_global_key_value_heads"] = kw["num_global_key_value_heads"]
    return out


def sample_llama4(rng, kw, layers):
    """Llama 4's keys of a sample_flagship case: the experts' and the dense layers' widths, which
    layers are sparse (listed or by step, none included) and rotary (listed or by interval),
    layer_types given or derived, chunk sizes that do and do not split the prompt, the NoPE
    layers' temperature on or off with divisors that change it within a prompt, the L2 q/k norm
    and biases by key."""
    kw["head_dim"] += kw["head_dim"] % 2  # complex channel pairs
    experts = rng.randint(1, 8)
    kw.update(
        intermediate_size=multiple_of_4(rng, 4, 48),
        intermediate_size_mlp=multiple_of_4(rng, 4, 96),
        num_local_experts=experts,
        num_experts_per_tok=rng.randint(1, min(experts, 3)),
        attention_chunk_size=rng.choice([1, 2, 3, 4, 8, 8192]),
        attn_temperature_tuning=rng.random() < 0.8,
        floor_scale=rng.choice([1, 2, 3, 8192]),
        attn_scale=rng.choice([0.1, 0.5, 1.0]),
        use_qk_norm=rng.random() < 0.7,
        attention_bias=rng.random() < 0.3,
    )
    if rng.random() < 0.3:
        kw["moe_layers"] = sorted(rng.sample(range(layers), rng.randint(0, layers)))
    else:
        kw["interleave_moe_layer_step"] = rng.randint(1, 2)
    if rng.random() < 0.3:
        kw["no_rope_layers"] = [rng.randint(0, 1) for _ in range(layers)]
    else:
        kw["no_rope_layer_interval"] = rng.randint(1, 3)
    if rng.random() < 0.25:
        kw["layer_types"] = [rng.choice(["full_attention", "chunked_attention"]) for _ in range(layers)]


def sample_moe_family(rng, arch, turn, offset, L):
    """sample_case for MOE_ARCHS: the keys of sample_new_family. Rarer layouts are dealt:
    every 3rd case of a Qwen family has dense layers, every 3rd Qwen2-MoE explicit layer_types."""
    kw = {}
    ignored = {}
    edits = []
    qwen = arch not in ("MixtralForCausalLM", "OlmoeForCausalLM", "GptOssForCausalLM") + GRANITE_MOE_ARCHS
    gpt_oss = arch == "GptOssForCausalLM"
    # GPT-OSS: every other case keeps its experts as the hub does, MXFP4 blocks of 32 values
    # (hidden and expert sizes multiples of 32)
    mxfp4 = gpt_oss and turn % 2 == 1
    rope_type = dealt_rope_type(turn, offset)
    dims = [4, 6, 8, 10, 12, 16, 20, 24, 32]
    if rope_type != "dynamic":
        dims.append(2)  # dynamic NTK divides by head_dim - 2
    dense_dealt = qwen and turn % 3 == 2
    types_dealt = arch == "Qwen2MoeForCausalLM" and turn % 3 == 1
    layers = rng.randint(2 if dense_dealt or types_dealt else 1, 3)
    heads = rng.choice([1, 2, 3, 4, 4, 6, 8])
    kv = rng.choice([1, heads, rng.choice(divisors(heads))])

    # Sizes: hidden a multiple of 4 (see multiple_of_4), not always of the heads. None of the
    # three classes checks hidden % heads; all derive head_dim = hidden // heads when it is
    # absent (Qwen3-MoE too: Qwen3MoeConfig has no head_dim field, so not Qwen3's 128).
    if rng.random() < 0.5 and arch != "OlmoeForCausalLM":  # OLMoE's q_norm is hidden_size wide
        head_dim = rng.choice(dims)
        hidden = multiple_of_4(rng, 8, 96)
        while hidden // heads == head_dim:
            head_dim = rng.choice([d for d in dims if d != head_dim])
        kw["head_dim"] = head_dim
        hd_source = "explicit"
    else:
        head_dim = rng.choice([d for d in dims if d * heads <= 128 and d * heads % 4 == 0] or [4])
        hidden, hd_source = heads * head_dim, "derived"
        extra = [e for e in range(1, heads) if (hidden + e) % 4 == 0]
        if extra and rng.random() < 0.25 and arch != "OlmoeForCausalLM":
            hidden, hd_source = hidden + rng.choice(extra), "derived(floor)"
        if gpt_oss:
            kw["head_dim"] = hidden // heads  # GptOssConfig's absent head_dim is 64, not derived
            hd_source += ",written"
        if arch == "MixtralForCausalLM" and rope_type in ("dynamic", "yarn"):
            # MixtralConfig's head_dim defaults to None, which transformers' dynamic and yarn rope
            # read as such (getattr without `or`) and crash on: such files must say it.
            kw["head_dim"] = hidden // heads
            hd_source += ",written"

    experts = rng.randint(2, 10)
    top_k = rng.randint(1, experts - 1) if rng.random() < 0.85 else experts  # all experts: no choice
    kw.update(
        vocab_size=rng.randint(50, 300),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        hidden_act=rng.choice(["silu", "silu", "gelu_pytorch_tanh", "gelu_pytorch_tanh", "swish", "gelu_new"]),
        rms_norm_eps=rng.choice([1e-6, 1e-5, 1e-8, 0.1]),
        tie_word_embeddings=rng.random() < 0.5,
        num_experts_per_tok=top_k,
    )
    if qwen:
        kw.update(
            num_experts=experts,
            intermediate_size=rng.randint(8, 160),  # the dense layers' MLP
            moe_intermediate_size=multiple_of_4(rng, 4, 48),
            norm_topk_prob=rng.random() < 0.5,
        )
        # Dense layers: decoder_sparse_step (every step-th layer sparse) and mlp_only_layers,
        # absent / null / [] / some layers, always leaving at least one sparse layer.
        while True:
            step = rng.choice([1, 1, 2, 3]) if layers > 1 else 1
            step = min(step, layers)
            form = rng.choice(["absent", "null", "empty", "list", "list"] if layers > 1 else ["absent", "null", "empty"])
            mlp_only = None
            if form == "list":
                mlp_only = sorted(rng.sample(range(layers), rng.randint(1, layers - 1)))
            elif form == "empty":
                mlp_only = []
            flags = sparse_layer_flags(arch, layers, step, mlp_only)
            if any(flags) and (not dense_dealt or not all(flags)):
                break
        if step != 1 or rng.random() < 0.5:
            kw["decoder_sparse_step"] = step
        if mlp_only is not None:
            kw["mlp_only_layers"] = mlp_only
        elif form == "null":
            edits.append("mlp_only_layers-null")  # config.json says null (the class reads [])
        else:
            edits.append("mlp_only_layers-absent")
    elif arch == "OlmoeForCausalLM":
        kw.update(num_experts=experts, intermediate_size=multiple_of_4(rng, 4, 48), norm_topk_prob=rng.random() < 0.5)
    else:
        kw.update(num_local_experts=experts, intermediate_size=multiple_of_4(rng, 4, 48))  # the experts' MLP
    if mxfp4:
        kw.update(hidden_size=rng.choice([32, 64, 96]), intermediate_size=rng.choice([32, 64]))
        if kw["hidden_size"] // heads == kw["head_dim"] and hd_source == "explicit":
            hd_source = "explicit(=derived)"

    rope, max_pos = sample_rope(rng, rope_type, L)
    if rope_type == "default" and rng.random() < 0.3:
        rope, max_pos = sample_longrope(rng, head_dim, L)
        rope_type = "longrope"
        if arch == "MixtralForCausalLM" and "head_dim" not in kw:
            # transformers' longrope validation multiplies Mixtral's null head_dim: files must say it
            kw["head_dim"] = hidden // heads
            hd_source += ",written"
    kw["rope_parameters"] = rope
    kw["max_position_embeddings"] = max_pos
    old_form = rng.random() < 0.4
    old_type_key = rng.random() < 0.5
    sparse = rng.random() < 0.35
    hoist = None
    if rope_type in ("llama3", "yarn") and rng.random() < 0.3:
        hoist = rng.choice(["drop", "shadow"])
    stray_theta = not old_form and rng.random() < 0.2

    # Per-family features; the sliding window (all layers slide, except Qwen2-MoE's layer_types).
    if arch == "Qwen3MoeForCausalLM":
        kw["attention_bias"] = rng.random() < 0.4
        kw["use_sliding_window"] = rng.random() < 0.5
        kw["sliding_window"] = rng.randint(2, 6)  # Qwen3MoeConfig: None without use_sliding_window
        if rng.random() < 0.5:
            edits.append("num_experts-key")  # the Hub files' key (transformers 5 saves num_local_experts)
        if rng.random() < 0.1:
            ignored["mlp_bias"] = True  # Qwen3MoeMLP has no biases
    elif arch == "OlmoeForCausalLM":
        kw["attention_bias"] = rng.random() < 0.3
        kw.update(bos_token_id=1, eos_token_id=2, pad_token_id=0)  # the class defaults are past the vocab
        if rng.random() < 0.3:
            kw["clip_qkv"] = None  # written out: no clamp
        if rng.random() < 0.1:
            ignored["sliding_window"] = rng.randint(2, 6)  # OlmoeModel has no sliding attention
    elif arch in GRANITE_MOE_ARCHS:
        kw.update(
            embedding_multiplier=rng.choice([1.0, 12.0, 0.5, 2.0]),
            attention_multiplier=rng.choice([round(head_dim**-0.5, 6), 0.0078125, round(rng.uniform(0.05, 0.5), 3)]),
            residual_multiplier=rng.choice([1.0, 0.22, 0.5]),
            logits_scaling=rng.choice([1.0, 8.0, 2.5, 0.5]),
            attention_bias=rng.random() < 0.3,
        )
        if arch == "GraniteMoeSharedForCausalLM":
            kw["shared_intermediate_size"] = rng.choice([0, rng.randint(4, 64), rng.randint(4, 64)])
    elif gpt_oss:
        kw.update(
            attention_bias=rng.random() < 0.8,
            sliding_window=rng.randint(2, 6),
            swiglu_alpha=rng.choice([1.702, 1.0, 2.5]),
            swiglu_limit=rng.choice([7.0, 0.5, 1.0, 2.0]),
        )
        if rng.random() < 0.3:
            kw["layer_types"] = [rng.choice(["full_attention", "sliding_attention"]) for _ in range(layers)]
        if mxfp4:
            edits.append("mxfp4")
        if rope_type == "default":
            # the old form writes no rope dict for the default rope, which GptOssConfig reads as
            # its yarn: not the same model
            old_form = False
        if rng.random() < 0.25:
            # no rope dict in the file: GptOssConfig's yarn (factor 32 over 4096 positions)
            kw["rope_parameters"] = None
            kw["max_position_embeddings"] = max(kw["max_position_embeddings"], L)  # no dynamic scaling past it
            edits.append("rope-class-default")
            old_form, hoist, stray_theta = False, None, False
    elif arch == "MixtralForCausalLM":
        kw["sliding_window"] = rng.choice([None, None, 2, 3, 4, 5, 6])
        if rng.random() < 0.1:
            ignored["attention_bias"] = True  # MixtralAttention has no biases
    else:
        kw["qkv_bias"] = rng.random() < 0.6
        kw["shared_expert_intermediate_size"] = rng.randint(4, 64)
        use_sw = types_dealt or rng.random() < 0.6
        kw["use_sliding_window"] = use_sw
        kw["sliding_window"] = rng.randint(2, 6)  # Qwen2MoeConfig: 0 without use_sliding_window
        # the even layers below it slide (0: none)
        kw["max_window_layers"] = rng.randint(1, layers) if rng.random() < 0.8 else 0
        if types_dealt:
            # (Only with use_sliding_window: sliding layers with the window of 0 mask everything.)
            kw["layer_types"] = [rng.choice(["full_attention", "sliding_attention"]) for _ in range(layers)]
        if rng.random() < 0.1:
            ignored["attention_bias"] = True  # qkv_bias is Qwen2-MoE's key
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
        "head_dim_source": hd_source,
        "edits": edits,
        "variant": rope_type,
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


def hoist_partial(cfg, type_key):
    """The Phi-2 file form: partial_rotary_factor at the top level, next to rope_theta."""
    out = dict(cfg)
    rope = dict(out["rope_scaling"] or {})
    partial = rope.pop("partial_rotary_factor", None)
    if partial is not None:
        out["partial_rotary_factor"] = partial
    out["rope_scaling"] = None if list(rope) in ([], [type_key]) and rope.get(type_key, "default") == "default" else rope
    return out


def neox_old_form(cfg):
    """The Pythia file form: the rope base and partial factor under GPT-NeoX's own names."""
    names = {"rope_theta": "rotary_emb_base", "partial_rotary_factor": "rotary_pct"}
    return {names.get(k, k): v for k, v in cfg.items()}


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


# config.json and weight-file edits of the NEW_ARCHS cases


def phi3_old_form(cfg, type_key, hoisted, su):
    """The Phi-3.5 / Phi-4-mini files: rope_theta and partial_rotary_factor at the top level, the
    factors in `rope_scaling` (keyed `type_key`), original_max_position_embeddings only at the
    top level (unless a later hoist edit handles it, or the type is "su", which transformers
    renames to longrope only after it would have copied the top-level value in)."""
    out = to_old_form(cfg, type_key)
    rope = out.get("rope_scaling")
    if rope is None:
        return out
    rope = dict(rope)
    partial = rope.pop("partial_rotary_factor", None)
    if partial is not None:
        out["partial_rotary_factor"] = partial
    if not hoisted and not su:
        rope.pop("original_max_position_embeddings", None)
    if su:
        rope[type_key] = "su"
    out["rope_scaling"] = None if list(rope) == [type_key] and rope[type_key] == "default" else rope
    return out


def gemma3_hub_form(cfg, pattern):
    """Gemma 3 files as on the Hub: rope_theta (global), rope_local_base_freq, rope_scaling (the
    global layers' scaling or null) and sliding_window_pattern (absent: 6) for layer_types."""
    out = {}
    for key, value in cfg.items():
        if key == "rope_parameters":
            full = dict(value["full_attention"])
            sliding = value["sliding_attention"]
            assert sliding["rope_type"] == "default", sliding
            out["rope_theta"] = full.pop("rope_theta")
            out["rope_local_base_freq"] = sliding["rope_theta"]
            rope_type = full.pop("rope_type")
            out["rope_scaling"] = None if rope_type == "default" and not full else {"rope_type": rope_type, **full}
        elif key == "layer_types":
            if pattern != 6:
                out["sliding_window_pattern"] = pattern
        else:
            out[key] = value
    return out


def gemma_legacy_gelu(cfg, with_hidden_activation):
    out = {}
    for key, value in cfg.items():
        if key == "hidden_act":
            assert value == "gelu_pytorch_tanh", value
            out["hidden_act"] = "gelu"
            if with_hidden_activation:
                out["hidden_activation"] = "gelu_pytorch_tanh"
        else:
            out[key] = value
    return out


# Keys a sparse NEW_ARCHS config.json leaves out when they hold the class default.
NEW_DROPPABLE = DROPPABLE + [
    "head_dim",
    "hidden_activation",
    "query_pre_attn_scalar",
    "attn_logit_softcapping",
    "final_logit_softcapping",
    "embedding_multiplier",
    "attention_multiplier",
    "residual_multiplier",
    "logits_scaling",
    "no_rope_layer_interval",
    "n_inner",
    "activation_function",
    "scale_attn_weights",
    "scale_attn_by_inverse_layer_idx",
    "reorder_and_upcast_attn",
    "layer_norm_epsilon",
    "resid_pdrop",
    "embd_pdrop",
    "attn_pdrop",
    "summary_type",
    "summary_use_proj",
    "summary_activation",
    "summary_proj_to_labels",
    "summary_first_dropout",
    "add_cross_attention",
    "use_bidirectional_attention",
]


# ... and those of a sparse MOE_ARCHS config.json.
MOE_DROPPABLE = [
    "num_experts_per_tok",
    "norm_topk_prob",
    "decoder_sparse_step",
    "qkv_bias",
    "output_router_logits",
    "router_aux_loss_coef",
    "router_jitter_noise",
]
MOE_MODEL_TYPES = (
    "qwen3_moe",
    "mixtral",
    "qwen2_moe",
    "olmoe",
    "granitemoe",
    "granitemoeshared",
    "gpt_oss",
    "deepseek_v2",
    "deepseek_v3",
    "mistral4",
    "glm4_moe",
    "ernie4_5_moe",
    "llama4_text",
)


def to_sparse_new(cfg, config_cls):
    defaults = {f.name: f.default for f in dataclasses.fields(config_cls) if f.default is not dataclasses.MISSING}
    out = dict(cfg)
    model_type = cfg["model_type"]
    moe = model_type in MOE_MODEL_TYPES
    for key in NEW_DROPPABLE + (MOE_DROPPABLE if moe else []):
        if key in out and key in defaults and out[key] == defaults[key]:
            del out[key]
    kv_default = defaults.get("num_key_value_heads", 0)
    if kv_default is None and out.get("num_key_value_heads") == out.get("num_attention_heads"):
        del out["num_key_value_heads"]  # None: as many as attention heads
    n = cfg.get("num_hidden_layers")
    if moe:
        if out.get("mlp_only_layers") == []:
            del out["mlp_only_layers"]  # absent: []
        # head_dim when it is what the modeling code derives (Qwen3MoeConfig and Qwen2MoeConfig
        # have no such field; Mixtral's null default is dropped above, a value is kept; Llama
        # 4's class default is 128, whatever the hidden size)
        derived = cfg["hidden_size"] // cfg["num_attention_heads"]
        if model_type not in ("mixtral", "gpt_oss", "llama4_text") and out.get("head_dim") == derived:
            del out["head_dim"]
    derived_types = None
    if model_type == "gemma2":
        derived_types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    elif model_type == "gemma3_text" and "sliding_window_pattern" not in cfg:
        derived_types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
    elif model_type == "smollm3":
        interval = cfg.get("no_rope_layer_interval", 4)
        derived_rope = [int((i + 1) % interval != 0) for i in range(n)]
        no_rope = cfg.get("no_rope_layers", derived_rope)
        window = cfg.get("sliding_window") if cfg.get("use_sliding_window") else None
        derived_types = ["sliding_attention" if window is not None and not r else "full_attention" for r in no_rope]
        if out.get("no_rope_layers") == derived_rope:
            del out["no_rope_layers"]
    elif model_type == "gpt_oss":
        derived_types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    elif model_type == "qwen2_moe":
        use_sw, mwl = cfg.get("use_sliding_window", False), cfg.get("max_window_layers", 28)
        derived_types = [
            "sliding_attention" if (i + 1) % 2 and i < mwl and use_sw else "full_attention" for i in range(n)
        ]
    if derived_types is not None and out.get("layer_types") == derived_types:
        del out["layer_types"]
    return out


def edit_gpt2_weights(path, edits, n_layer, n_positions):
    """hub-names: the names of openai-community/gpt2 (no `transformer.` prefix, as saved from
    GPT2Model); attn-bias-buffers: its old causal-mask buffers `h.N.attn.bias` (and
    `attn.masked_bias`), which transformers skips when loading."""
    import torch
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(path))
    prefix = "transformer."
    if "hub-names" in edits:
        tensors = {k[len(prefix) :] if k.startswith(prefix) else k: v for k, v in tensors.items()}
        prefix = ""
    if "attn-bias-buffers" in edits:
        mask = torch.tril(torch.ones(n_positions, n_positions)).view(1, 1, n_positions, n_positions)
        for i in range(n_layer):
            tensors[f"{prefix}h.{i}.attn.bias"] = mask.clone()
            tensors[f"{prefix}h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    save_file(tensors, str(path), metadata={"format": "pt"})


def edit_new_family(cfg, case, config_cls):
    """The config.json of a NEW_ARCHS / MOE_ARCHS case, in the form the case says (same
    semantics)."""
    kw = case["kwargs"]
    out = cfg
    for edit in case["edits"]:
        if edit.startswith("legacy-gelu"):
            out = gemma_legacy_gelu(out, edit.endswith("+hidden_activation"))
        elif edit.startswith("gemma3-hub-form:"):
            out = gemma3_hub_form(out, int(edit.split(":")[1]))
        elif edit.startswith("partial-absent:"):
            rope = dict(out["rope_parameters"])
            assert rope.pop("partial_rotary_factor") == float(edit.split(":")[1])
            out = {**out, "rope_parameters": rope}
        elif edit.startswith("cohere2-pattern:"):
            out = {k: v for k, v in out.items() if k != "layer_types"}
            out["sliding_window_pattern"] = int(edit.split(":")[1])
        elif edit == "bloom-hub-names":
            # bigscience/bloom-560m's spelling, which BloomConfig reads as hidden_size / n_head
            names = {"hidden_size": "n_embed", "n_head": "num_attention_heads"}
            out = {names.get(k, k): v for k, v in out.items()}
        elif edit == "no-rope-interval-only":
            out = {k: v for k, v in out.items() if k != "no_rope_layers"}
        elif edit == "mlp_only_layers-absent":
            assert out["mlp_only_layers"] == [], out["mlp_only_layers"]
            out = {k: v for k, v in out.items() if k != "mlp_only_layers"}
        elif edit == "mlp_only_layers-null":
            assert out["mlp_only_layers"] == [], out["mlp_only_layers"]
            out = {k: (None if k == "mlp_only_layers" else v) for k, v in out.items()}
        elif edit == "rope-class-default":
            out = {k: v for k, v in out.items() if k not in ("rope_parameters", "rope_scaling")}
        elif edit == "num_experts-key":
            out = {("num_experts" if k == "num_local_experts" else k): v for k, v in out.items()}
        elif edit == "gemma4-hub-form":
            out = gemma4_hub_form(out, kw)
    type_key = "type" if case["old_type_key"] else "rope_type"
    if case["old_form"]:
        if case["arch"] == "Phi3ForCausalLM":
            out = phi3_old_form(out, type_key, case["hoist"] is not None, "type-su" in case["edits"])
        elif case["arch"] in ("PhiForCausalLM", "StableLmForCausalLM") + GLM_ARCHS:
            out = hoist_partial(to_old_form(out, type_key), type_key)
        elif case["arch"] == "GPTNeoXForCausalLM":
            out = neox_old_form(hoist_partial(to_old_form(out, type_key), type_key))
        else:
            out = to_old_form(out, type_key)
    if case["hoist"]:
        out = hoist_original(out, case["hoist"])
        if case["arch"] == "Phi3ForCausalLM":
            assert out["original_max_position_embeddings"] == kw["original_max_position_embeddings"]
    if case["stray_theta"]:
        out = add_stray_theta(out)
    if case["sparse"]:
        out = to_sparse_new(out, config_cls)
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


# What transformers must read back from a NEW_ARCHS config.json (None where a class has no such
# attribute).
NEW_SEMANTIC_KEYS = [
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "hidden_act",
    "hidden_activation",
    "rms_norm_eps",
    "tie_word_embeddings",
    "attention_bias",
    "mlp_bias",
    "sliding_window",
    "use_sliding_window",
    "layer_types",
    "max_position_embeddings",
    "query_pre_attn_scalar",
    "attn_logit_softcapping",
    "final_logit_softcapping",
    "embedding_multiplier",
    "attention_multiplier",
    "residual_multiplier",
    "logits_scaling",
    "no_rope_layers",
    "n_inner",
    "activation_function",
    "scale_attn_weights",
    "scale_attn_by_inverse_layer_idx",
    "reorder_and_upcast_attn",
    "layer_norm_epsilon",
    "norm_epsilon",
    "use_bias",
    "layer_norm_eps",
    "qk_layernorm",
    "use_parallel_residual",
    "multi_query",
    "rotary_dim",
    "use_qk_norm",
    "logit_scale",
    "use_qkv_bias",
    "n_layer",
    "n_head",
    "num_kv_heads",
    "new_decoder_architecture",
    "parallel_attn",
    "num_ln_in_parallel_attn",
    "alibi",
    "bias",
    "ffn_hidden_size",
    "activation",
    "ffn_dim",
    "do_layer_norm_before",
    "word_embed_proj_dim",
    "enable_bias",
    "layer_norm_elementwise_affine",
]


# ... and from a MOE_ARCHS one (num_experts: Qwen3-MoE's and Mixtral's attribute_map reads it as
# num_local_experts).
MOE_SEMANTIC_KEYS = [
    "num_experts",
    "num_experts_per_tok",
    "norm_topk_prob",
    "moe_intermediate_size",
    "decoder_sparse_step",
    "mlp_only_layers",
    "shared_expert_intermediate_size",
    "qkv_bias",
    "num_local_experts",
    "shared_intermediate_size",
    "swiglu_alpha",
    "swiglu_limit",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "n_routed_experts",
    "n_group",
    "topk_group",
    "topk_method",
    "routed_scaling_factor",
    "first_k_dense_replace",
    "n_shared_experts",
    "rope_interleave",
    "use_qk_norm",
    "moe_num_shared_experts",
    "moe_layer_interval",
    "moe_layer_start_index",
    "moe_layer_end_index",
    "intermediate_size_mlp",
    "moe_layers",
    "no_rope_layers",
    "attention_chunk_size",
    "attn_temperature_tuning",
    "floor_scale",
    "attn_scale",
]


def semantics_new(c, arch):
    if arch in ("Gemma4ForCausalLM", "Gemma3nForCausalLM"):
        # a heterogeneous config refuses the global head_dim (Gemma 4), and many keys are the
        # family's own: compare what it saves
        out = c.to_dict()
        for key in ("transformers_version", "_name_or_path", "architectures", "dtype", "output_attentions"):
            out.pop(key, None)
        out["head_dim"] = json.dumps(out.get("per_layer_config"), sort_keys=True) + f"/{out.get('head_dim')}"
        return out
    keys = NEW_SEMANTIC_KEYS + (MOE_SEMANTIC_KEYS if arch in MOE_ARCHS else [])
    out = {k: getattr(c, k, None) for k in keys}
    if arch == "GemmaForCausalLM":
        out.pop("hidden_activation")  # a key of some files that GemmaConfig does not read
    out["head_dim"] = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads

    def strip(rope):  # an old-form file keyed "type" keeps that key next to "rope_type"
        return {k: v for k, v in rope.items() if k != "type"} if isinstance(rope, dict) else rope

    rope = getattr(c, "rope_parameters", None)
    if isinstance(rope, dict) and arch == "Gemma3ForCausalLM":
        rope = {k: strip(v) for k, v in rope.items()}
    out["rope_parameters"] = strip(rope)
    return out


def describe_new(case, loaded):
    """describe() for NEW_ARCHS and MOE_ARCHS."""
    kw = case["kwargs"]
    arch = case["arch"]
    parts = [short_name(arch)]
    if arch == "Gemma4ForCausalLM":
        parts += describe_gemma4(kw, case, loaded)
    elif arch == "Gemma3nForCausalLM":
        parts += describe_gemma3n(kw, loaded)
    elif arch in OWN_KEY_ARCHS:
        parts += [
            f"h={kw['hidden_size']} heads={loaded['num_attention_heads']} head_dim={loaded['head_dim']}",
            f"layers={loaded['num_hidden_layers']} vocab={kw['vocab_size']}",
            "tied" if kw["tie_word_embeddings"] else "untied",
            case["variant"],
        ] + case["edits"]
    elif arch in ("GPT2LMHeadModel", "GPTBigCodeForCausalLM", "GPTJForCausalLM"):
        parts += [
            f"n_embd={kw['n_embd']} n_head={kw['n_head']} head_dim={loaded['head_dim']}",
            f"n_layer={kw['n_layer']} n_inner={kw['n_inner']} vocab={kw['vocab_size']} n_positions={kw['n_positions']}",
            f"act={kw['activation_function']} eps={kw['layer_norm_epsilon']:g}",
            "tied" if kw["tie_word_embeddings"] else "untied",
        ]
        if not kw.get("scale_attn_weights", True):
            parts.append("scale_attn_weights=false")
        if kw.get("scale_attn_by_inverse_layer_idx"):
            parts.append("scale_attn_by_inverse_layer_idx")
        if kw.get("reorder_and_upcast_attn"):
            parts.append("reorder_and_upcast_attn")
        if arch == "GPTBigCodeForCausalLM":
            parts.append("multi_query" if kw["multi_query"] else "per-head c_attn")
        if arch == "GPTJForCausalLM":
            parts.append(f"rotary_dim={kw['rotary_dim']}")
    else:
        parts += [
            f"h={kw['hidden_size']} heads={kw['num_attention_heads']}/kv={kw.get('num_key_value_heads', kw['num_attention_heads'])}"
            f" head_dim={loaded['head_dim']}({case['head_dim_source']})",
            f"layers={kw['num_hidden_layers']} inter={kw['intermediate_size']} vocab={kw['vocab_size']}",
        ]
        rope = loaded["rope_parameters"]

        def rope_text(r):
            args = ",".join(
                f"{k}={v}" for k, v in r.items() if k not in ("rope_type", "rope_theta", "short_factor", "long_factor")
            )
            factors = f",short={r['short_factor']},long={r['long_factor']}" if "short_factor" in r else ""
            return f"{r['rope_type']}({args}{factors}) theta={r['rope_theta']:g}"

        if arch == "Gemma3ForCausalLM":
            parts.append(
                f"rope sliding={rope_text(rope['sliding_attention'])} full={rope_text(rope['full_attention'])}"
            )
        elif arch == "Phi3ForCausalLM" and rope["rope_type"] == "longrope":
            which = "long" if case["seq_len"] > rope["original_max_position_embeddings"] else "short"
            parts.append(f"rope={rope_text(rope)} ({which} factors at L)")
        else:
            parts.append(f"rope={rope_text(rope)}")
        form = "old" + ("/type" if case["old_type_key"] else "") if case["old_form"] else "new"
        parts[-1] += f" max_pos={kw['max_position_embeddings']} [{form}]"
        parts.append("tied" if kw["tie_word_embeddings"] else "untied")
        gemma23 = arch in ("Gemma2ForCausalLM", "Gemma3ForCausalLM")
        act = loaded["hidden_activation"] if gemma23 else loaded["hidden_act"]
        eps = next(kw[k] for k in ("rms_norm_eps", "norm_epsilon", "layer_norm_eps") if k in kw)
        parts.append(f"act={act} eps={eps:g}")
        for key in (
            "attention_bias",
            "mlp_bias",
            "use_bias",
            "qk_layernorm",
            "use_parallel_residual",
            "use_qk_norm",
            "use_qkv_bias",
        ):
            if kw.get(key) and key not in case["ignored"]:
                parts.append(key)
        if arch in ("Gemma2ForCausalLM", "Gemma3ForCausalLM"):
            parts.append(
                f"query_pre_attn_scalar={loaded['query_pre_attn_scalar']} "
                f"softcap(attn={loaded['attn_logit_softcapping']},final={loaded['final_logit_softcapping']})"
            )
        if loaded["layer_types"] is not None and arch != "SmolLM3ForCausalLM":
            short = layer_letters(loaded["layer_types"])
            parts.append(f"sliding_window={loaded['sliding_window']} layers={short}")
        elif arch in ("Phi3ForCausalLM", "Qwen3MoeForCausalLM", "MixtralForCausalLM", "Starcoder2ForCausalLM"):
            if loaded["sliding_window"] is not None:
                parts.append(f"sliding_window={loaded['sliding_window']} (every layer)")
        if arch in MOE_ARCHS:
            parts.append(describe_moe(case, loaded))
        if arch in COHERE_ARCHS:
            parts.append(f"logit_scale={kw['logit_scale']}")
        if arch == "GraniteForCausalLM":
            parts.append(
                f"multipliers(embedding={kw['embedding_multiplier']},attention={kw['attention_multiplier']},"
                f"residual={kw['residual_multiplier']},logits_scaling={kw['logits_scaling']})"
            )
        if arch == "SmolLM3ForCausalLM":
            rope_layers = "".join("R" if r else "N" for r in loaded["no_rope_layers"])
            parts.append(f"rope-layers={rope_layers}")
            if loaded["use_sliding_window"]:
                short = layer_letters(loaded["layer_types"])
                parts.append(f"sliding_window={loaded['sliding_window']} layers={short}")
    if case["edits"]:
        parts.append(f"edits({','.join(case['edits'])})")
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


def describe_gemma4(kw, case, loaded):
    """The describe_new parts of a Gemma 4 case."""
    rope = loaded["rope_parameters"]

    def rope_text(r):
        args = ",".join(f"{k}={v}" for k, v in r.items() if k not in ("rope_type", "rope_theta"))
        return f"{r['rope_type']}({args}) theta={r['rope_theta']:g}"

    kv_global = kw.get("num_global_key_value_heads") if kw["attention_k_eq_v"] else None
    return [
        f"h={kw['hidden_size']} heads={kw['num_attention_heads']}/kv={kw['num_key_value_heads']} "
        f"head_dim={kw['head_dim']} full: head_dim={kw['global_head_dim']} kv={kv_global or kw['num_key_value_heads']}",
        f"layers={kw['num_hidden_layers']} inter={kw['intermediate_size']} vocab={kw['vocab_size']}",
        f"rope sliding={rope_text(rope['sliding_attention'])} full={rope_text(rope['full_attention'])}",
        f"sliding_window={loaded['sliding_window']} layers={layer_letters(loaded['layer_types'])}",
        (f"experts={kw['num_experts']} top{kw['top_k_experts']} moe_inter={kw['moe_intermediate_size']} "
         if kw.get("enable_moe_block") else "")
        + f"k_eq_v={kw['attention_k_eq_v']} kv_shared={kw['num_kv_shared_layers']} "
        f"double_wide={kw['use_double_wide_mlp']} ple={kw['hidden_size_per_layer_input']}",
        f"act={kw['hidden_activation']} eps={kw['rms_norm_eps']:g} softcap={kw['final_logit_softcapping']}",
        "tied" if kw["tie_word_embeddings"] else "untied",
    ] + (["attention_bias"] if kw["attention_bias"] else [])


def describe_gemma3n(kw, loaded):
    """The describe_new parts of a Gemma 3n case."""
    rope = loaded["rope_parameters"]

    def rope_text(r):
        args = ",".join(f"{k}={v}" for k, v in r.items() if k not in ("rope_type", "rope_theta"))
        return f"{r['rope_type']}({args}) theta={r['rope_theta']:g}"

    return [
        f"h={kw['hidden_size']} heads={kw['num_attention_heads']}/kv={kw['num_key_value_heads']} "
        f"head_dim={kw['head_dim']} layers={kw['num_hidden_layers']} inter={kw['intermediate_size']}",
        f"vocab={kw['vocab_size']} ple={kw['hidden_size_per_layer_input']}x{kw['vocab_size_per_layer_input']}",
        f"rope sliding={rope_text(rope['sliding_attention'])} full={rope_text(rope['full_attention'])}",
        f"sliding_window={loaded['sliding_window']} layers={layer_letters(loaded['layer_types'])} "
        f"kv_shared={kw['num_kv_shared_layers']}",
        f"altup={kw['altup_num_inputs']} active={kw['altup_active_idx']} scale={kw['altup_correct_scale']} "
        f"laurel={kw['laurel_rank']} sparsity={kw['activation_sparsity_pattern']}",
        f"act={kw['hidden_activation']} eps={kw['rms_norm_eps']:g} softcap={kw['final_logit_softcapping']}",
        "tied" if kw["tie_word_embeddings"] else "untied",
    ] + (["attention_bias"] if kw["attention_bias"] else [])


def layer_letters(types):
    """`layer_types` as one letter a layer: S sliding, C chunked (Llama 4), F full."""
    return "".join({"sliding_attention": "S", "chunked_attention": "C"}.get(t, "F") for t in types)


def describe_moe(case, loaded):
    """The MoE part of describe_new: experts, top-k, renormalisation, expert size, which layers
    are sparse (M) or dense (D), the shared expert, and the routing margin the weights gave."""
    arch = case["arch"]
    flags = sparse_layer_flags(
        arch,
        case["kwargs"]["num_hidden_layers"],
        loaded["decoder_sparse_step"],
        loaded["mlp_only_layers"],
        loaded["first_k_dense_replace"],
        (loaded["moe_layer_interval"], loaded["moe_layer_start_index"], loaded["moe_layer_end_index"]),
        loaded["moe_layers"] or (),
    )
    always = arch in ("MixtralForCausalLM", "GptOssForCausalLM", "Ernie4_5_MoeForCausalLM") + GRANITE_MOE_ARCHS
    norm = "always" if always else loaded["norm_topk_prob"]
    experts = loaded["num_experts"] or loaded["num_local_experts"]
    text = f"experts={experts} top_k={loaded['num_experts_per_tok']} norm_topk={norm}"
    every_layer = arch in ("MixtralForCausalLM", "OlmoeForCausalLM", "GptOssForCausalLM") + GRANITE_MOE_ARCHS
    if every_layer:
        text += f" expert_inter={loaded['intermediate_size']}"
    else:
        text += f" moe_inter={loaded['moe_intermediate_size']}"
    layout = "".join("M" if f else "D" for f in flags)
    text += f" layers={layout}"
    if not every_layer:
        text += f" (step={loaded['decoder_sparse_step']},mlp_only={loaded['mlp_only_layers']})"
    if arch in GRANITE_MOE_ARCHS:
        kw = case["kwargs"]
        text += f" multipliers(emb={kw['embedding_multiplier']},attn={kw['attention_multiplier']}"
        text += f",res={kw['residual_multiplier']},logits={kw['logits_scaling']})"
        if arch == "GraniteMoeSharedForCausalLM":
            text += f" shared_mlp={loaded['shared_intermediate_size']}"
    if arch == "Glm4MoeForCausalLM":
        kw = case["kwargs"]
        text += f" groups={kw['topk_group']}/{kw['n_group']}(sigmoid+correction) scale={kw['routed_scaling_factor']}"
        text += f" shared={kw['n_shared_experts']} first_dense={kw['first_k_dense_replace']}"
    if arch == "Llama4ForCausalLM":
        kw = case["kwargs"]
        rope = "".join("R" if r else "N" for r in loaded["no_rope_layers"])
        text += f" mlp_inter={loaded['intermediate_size_mlp']} rope_layers={rope} chunk={loaded['attention_chunk_size']}"
        text += f" temperature={loaded['attn_temperature_tuning']}(scale={loaded['attn_scale']},floor={loaded['floor_scale']})"
        text += f" qk_l2={loaded['use_qk_norm']} types={'explicit' if 'layer_types' in kw else 'derived'}"
    if arch == "Ernie4_5_MoeForCausalLM":
        kw = case["kwargs"]
        text += f" (interval={kw['moe_layer_interval']},start={kw['moe_layer_start_index']}"
        text += f",end={kw['moe_layer_end_index']}) shared={kw['moe_num_shared_experts']} softmax+correction"
    if arch in DEEPSEEK_ARCHS:
        kw = case["kwargs"]
        text += f" mla(q_lora={kw['q_lora_rank']},kv_lora={kw['kv_lora_rank']},nope={kw['qk_nope_head_dim']}"
        text += f",rope={kw['qk_rope_head_dim']},v={kw['v_head_dim']},interleave={kw.get('rope_interleave', True)})"
        method = kw.get("topk_method", "softmax,two-best" if arch == "Mistral4ForCausalLM" else "sigmoid+correction")
        text += f" groups={kw['topk_group']}/{kw['n_group']}({method}) scale={kw['routed_scaling_factor']}"
        text += f" shared={kw['n_shared_experts']}"
    if arch == "GptOssForCausalLM":
        kw = case["kwargs"]
        text += f" swiglu(alpha={loaded['swiglu_alpha']},limit={loaded['swiglu_limit']})"
        text += f" window={kw['sliding_window']} types={'explicit' if 'layer_types' in kw else 'derived'}"
        text += " attention_bias" if kw["attention_bias"] else ""
    if arch == "Qwen2MoeForCausalLM":
        kw = case["kwargs"]
        how = "explicit" if "layer_types" in kw else f"max_window_layers={kw['max_window_layers']}"
        text += f" types({how},use_sliding_window={kw['use_sliding_window']})"
        text += f" shared_expert={loaded['shared_expert_intermediate_size']}"
        if loaded["qkv_bias"]:
            text += " qkv_bias"
    gap = case.get("router_gap")
    text += " router-gap=" + ("n/a(top_k=experts)" if gap is None else f"{gap:.1e}")
    if case.get("redraws"):
        text += f" (weights redrawn {case['redraws']}x)"
    return text


# ---------------------------------------------------------------------------------------------
# Checkpoints and goldens


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=24)
    ap.add_argument(
        "--per-arch", type=int, help="instead of --count: this many cases of every architecture dealt"
    )
    ap.add_argument(
        "--archs",
        default=os.environ.get("HFEXPORT_UNSEEN_ARCHS") or ",".join(short_name(a) for a in ARCHS),
        help="comma list of architectures to deal round-robin, by class or short name "
        f"({', '.join(short_name(a) for a in ALL_ARCHS)}), or `all` "
        "(default: $HFEXPORT_UNSEEN_ARCHS, else the first four)",
    )
    args = ap.parse_args()
    archs = parse_archs(args.archs)
    if args.per_arch is not None:
        args.count = args.per_arch * len(archs)
    if args.count < 1:
        sys.exit("--count must be >= 1")
    started = time.monotonic()

    warnings.filterwarnings("ignore")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    import torch
    import transformers
    import routing
    from safetensors.torch import save_file

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
        "Phi3ForCausalLM": (transformers.Phi3Config, transformers.Phi3ForCausalLM),
        "GemmaForCausalLM": (transformers.GemmaConfig, transformers.GemmaForCausalLM),
        "Gemma2ForCausalLM": (transformers.Gemma2Config, transformers.Gemma2ForCausalLM),
        "Gemma3ForCausalLM": (transformers.Gemma3TextConfig, transformers.Gemma3ForCausalLM),
        "GraniteForCausalLM": (transformers.GraniteConfig, transformers.GraniteForCausalLM),
        "Olmo2ForCausalLM": (transformers.Olmo2Config, transformers.Olmo2ForCausalLM),
        "SmolLM3ForCausalLM": (transformers.SmolLM3Config, transformers.SmolLM3ForCausalLM),
        "GPT2LMHeadModel": (transformers.GPT2Config, transformers.GPT2LMHeadModel),
        "Starcoder2ForCausalLM": (transformers.Starcoder2Config, transformers.Starcoder2ForCausalLM),
        "PhiForCausalLM": (transformers.PhiConfig, transformers.PhiForCausalLM),
        "GPTNeoXForCausalLM": (transformers.GPTNeoXConfig, transformers.GPTNeoXForCausalLM),
        "GPTBigCodeForCausalLM": (transformers.GPTBigCodeConfig, transformers.GPTBigCodeForCausalLM),
        "GPTJForCausalLM": (transformers.GPTJConfig, transformers.GPTJForCausalLM),
        "CohereForCausalLM": (transformers.CohereConfig, transformers.CohereForCausalLM),
        "Cohere2ForCausalLM": (transformers.Cohere2Config, transformers.Cohere2ForCausalLM),
        "StableLmForCausalLM": (transformers.StableLmConfig, transformers.StableLmForCausalLM),
        "GlmForCausalLM": (transformers.GlmConfig, transformers.GlmForCausalLM),
        "Glm4ForCausalLM": (transformers.Glm4Config, transformers.Glm4ForCausalLM),
        "Qwen3MoeForCausalLM": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM),
        "MixtralForCausalLM": (transformers.MixtralConfig, transformers.MixtralForCausalLM),
        "Qwen2MoeForCausalLM": (transformers.Qwen2MoeConfig, transformers.Qwen2MoeForCausalLM),
        "OlmoeForCausalLM": (transformers.OlmoeConfig, transformers.OlmoeForCausalLM),
        "FalconForCausalLM": (transformers.FalconConfig, transformers.FalconForCausalLM),
        "BloomForCausalLM": (transformers.BloomConfig, transformers.BloomForCausalLM),
        "OPTForCausalLM": (transformers.OPTConfig, transformers.OPTForCausalLM),
        "GraniteMoeForCausalLM": (transformers.GraniteMoeConfig, transformers.GraniteMoeForCausalLM),
        "GraniteMoeSharedForCausalLM": (transformers.GraniteMoeSharedConfig, transformers.GraniteMoeSharedForCausalLM),
        "GptOssForCausalLM": (transformers.GptOssConfig, transformers.GptOssForCausalLM),
        "DeepseekV2ForCausalLM": (transformers.DeepseekV2Config, transformers.DeepseekV2ForCausalLM),
        "DeepseekV3ForCausalLM": (transformers.DeepseekV3Config, transformers.DeepseekV3ForCausalLM),
        "Glm4MoeForCausalLM": (transformers.Glm4MoeConfig, transformers.Glm4MoeForCausalLM),
        "Ernie4_5ForCausalLM": (transformers.Ernie4_5Config, transformers.Ernie4_5ForCausalLM),
        "Ernie4_5_MoeForCausalLM": (transformers.Ernie4_5_MoeConfig, transformers.Ernie4_5_MoeForCausalLM),
        "Mistral4ForCausalLM": (transformers.Mistral4Config, transformers.Mistral4ForCausalLM),
        "Llama4ForCausalLM": (transformers.Llama4TextConfig, transformers.Llama4ForCausalLM),
        "Gemma4ForCausalLM": (transformers.Gemma4TextConfig, transformers.Gemma4ForCausalLM),
        "Gemma3nForCausalLM": (transformers.Gemma3nTextConfig, transformers.Gemma3nForCausalLM),
    }

    from fixture_spec import attention_implementation, causal_lm_class

    def load(folder):
        model = causal_lm_class(folder).from_pretrained(
            folder, dtype=torch.float32, attn_implementation=attention_implementation(folder)
        )
        return model.eval()

    def forward_logits(folder, ids, mask):
        with torch.no_grad():
            out = load(folder)(input_ids=ids, attention_mask=mask).logits
        return out.to(torch.float32).contiguous()

    def float32_error(folder, runs):
        """transformers' own float32 error: the largest |float32 - float64| logit over the
        unpadded positions of `runs` ((ids, mask, float32 logits)), float64 computing each row's
        unpadded tokens alone (which the attention mask makes the same function); a config whose logits are
        that ill-conditioned is compared within twice it. 0 for a model transformers cannot run
        in float64 (GPT-2's reorder_and_upcast_attn asserts float32)."""
        wide = causal_lm_class(folder).from_pretrained(
            folder,
            dtype=torch.float64,
            attn_implementation=attention_implementation(folder),
            experts_implementation="eager",  # grouped_mm has no float64
        ).eval()
        # each row alone without its padding: in float64 a padded row's fully masked positions
        # can turn to NaN (Gemma 3n's eager attention), which 0 * NaN carries into its real ones
        rows = [(i[r][m[r].bool()][None], l[r][m[r].bool()]) for i, m, l in runs for r in range(len(i))]
        try:
            with torch.no_grad():
                return max((wide(input_ids=i).logits[0] - l.double()).abs().max().item() for i, l in rows)
        except RuntimeError as e:
            if "upcasting" not in str(e):
                raise
            return 0.0

    def router_gap(model, inputs, expected_routers):
        """`routing.router_gap`, after checking the routers are the sparse layers'."""
        found = len(routing.routers(model))
        if found != expected_routers:
            sys.exit(f"found {found} routers, expected {expected_routers} (transformers renamed them?)")
        return routing.router_gap(model, inputs)

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
        case = sample_case(args.seed, i, archs)
        arch = case["arch"]
        new_family = arch in EXTRA_ARCHS
        config_cls, model_cls = classes[arch]
        name = f"case{i:02d}_{short_name(arch)}"
        folder = outdir / name
        folder.mkdir(parents=True, exist_ok=True)

        kwargs = case["kwargs"]
        # The config class standardises (and may mutate) the rope dict: give it a copy.
        if new_family:
            config = config_cls(**copy.deepcopy(kwargs))
        else:
            config = config_cls(**{**kwargs, "rope_parameters": dict(kwargs["rope_parameters"])})
        config._attn_implementation = "eager"

        gen = torch.Generator().manual_seed(case["weight_seed"] + 1)
        L, pad, vocab = case["seq_len"], case["pad"], kwargs["vocab_size"]
        single_ids = torch.randint(1, vocab, (1, L), generator=gen, dtype=torch.int64)
        single_mask = torch.ones_like(single_ids)
        batch_ids = torch.randint(1, vocab, (2, L), generator=gen, dtype=torch.int64)
        batch_ids[0, :pad] = PAD_ID
        batch_mask = torch.ones_like(batch_ids)
        batch_mask[0, :pad] = 0

        moe = arch in MOE_ARCHS or bool(kwargs.get("enable_moe_block"))
        if moe:
            step, mlp_only = getattr(config, "decoder_sparse_step", 1), getattr(config, "mlp_only_layers", [])
            first_dense = getattr(config, "first_k_dense_replace", 0)
            ernie = tuple(getattr(config, f"moe_layer_{k}", d) for k, d in (("interval", 1), ("start_index", 1), ("end_index", -1)))
            listed = getattr(config, "moe_layers", None) or ()
            flags = sparse_layer_flags(arch, config.num_hidden_layers, step, mlp_only, first_dense, ernie, listed)
            expected_routers = sum(flags)
        for attempt in range(MAX_REDRAWS + 1 if moe else 1):
            # MoE: weights that route a near tie are redrawn, from a seed derived from the case's.
            weight_seed = case["weight_seed"]
            if attempt:
                weight_seed = random.Random(f"hfexport-unseen-redraw:{weight_seed}:{attempt}").randrange(2**31)
            torch.manual_seed(weight_seed)
            model = model_cls(config).to(torch.float32).eval()
            with torch.no_grad():
                for pname, p in model.named_parameters():  # tied parameters are listed once
                    noise = torch.randn_like(p) * STD
                    # norm weights around 1 (GPT-2 names its LayerNorms ln_1, ln_2, ln_f)
                    # (and the factors that multiply like one: Gemma 4's router.scale, per_expert_scale)
                    is_norm = pname.endswith(".weight") and ("norm" in pname or ".ln_" in pname)
                    is_norm = is_norm or pname.endswith(("router.scale", "router.per_expert_scale"))
                    if pname.endswith("router.proj.weight"):
                        # Gemma 4's router reads a unit-RMS input times hidden**-0.5: weights of
                        # the common spread give near-uniform probabilities, whose ties no redraw
                        # escapes
                        noise = noise * 10

                    p.copy_(1.0 + noise if is_norm else noise)
            if not moe:
                break
            gap = router_gap(model, [(single_ids, single_mask), (batch_ids, batch_mask)], expected_routers)
            if gap is None or gap >= MIN_ROUTER_GAP:
                case.update(router_gap=gap, redraws=attempt)
                break
        else:
            sys.exit(f"{name}: routing near a tie (gap {gap:.1e} < {MIN_ROUTER_GAP:g}) with {MAX_REDRAWS + 1} weight draws")
        model.save_pretrained(folder, safe_serialization=True)
        built = semantics_new(model.config, arch) if new_family else semantics(model.config)
        del model

        cfg_path = folder / "config.json"
        cfg = json.loads(cfg_path.read_text())
        edited = cfg
        if new_family:
            edited = edit_new_family(cfg, case, config_cls)
        else:
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

        if "layer-scalars" in case.get("edits", []):
            from flagship_fixtures import random_layer_scalars

            random_layer_scalars(folder)  # a buffer: the weights' widening leaves it at one
        if "score-corrections" in case.get("edits", []):
            from decoder_fixtures import random_score_corrections

            random_score_corrections(folder)  # a buffer: the weights' widening leaves it at zero
        if "mxfp4" in case.get("edits", []):
            from mxfp4 import store_experts_as_mxfp4

            store_experts_as_mxfp4(folder)  # the goldens are the model transformers dequantizes
        weight_edits = [e for e in case.get("edits", []) if e in ("hub-names", "attn-bias-buffers")]
        if weight_edits:
            # The weights renamed (and extra buffers) must load as the same model.
            before = forward_logits(folder, single_ids, single_mask)
            edit_gpt2_weights(folder / "model.safetensors", weight_edits, kwargs["n_layer"], kwargs["n_positions"])
            after = forward_logits(folder, single_ids, single_mask)
            if not torch.equal(before, after):
                sys.exit(f"{name}: the weight edits {weight_edits} changed the model transformers loads")

        # What transformers reads back must be what the model was built from.
        loaded = semantics_new(load(folder).config, arch) if new_family else semantics(load(folder).config)
        if loaded != built:
            diff = {k: (built[k], loaded[k]) for k in built if built[k] != loaded[k]}
            sys.exit(f"{name}: config.json post-edit changed the config transformers reads: {diff}")

        single_logits = forward_logits(folder, single_ids, single_mask)
        batch_logits = forward_logits(folder, batch_ids, batch_mask)
        for key, t in (("single", single_logits), ("batch", batch_logits[batch_mask.bool()])):
            if not torch.isfinite(t).all():
                sys.exit(f"{name}: transformers gave non-finite {key} logits")
        noise = float32_error(folder, [(single_ids, single_mask, single_logits), (batch_ids, batch_mask, batch_logits)])
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
                "f32_noise": noise,
                "description": describe_new(case, loaded) if new_family else describe(case, loaded),
            }
        )

    (outdir / "index.json").write_text(
        json.dumps(
            {
                "seed": args.seed,
                "count": args.count,
                "archs": archs,
                "transformers": transformers.__version__,
                "torch": torch.__version__,
                "cases": index,
            },
            indent=2,
        )
        + "\n"
    )
    done = time.monotonic()
    per_arch = {
        a.replace("ForCausalLM", "").replace("LMHeadModel", ""): sum(c["architecture"] == a for c in index)
        for a in archs
    }
    print(
        f"{args.count} checkpoints (seed {args.seed}) in {outdir} in {done - started:.1f}s "
        f"(import {imported - started:.1f}s): "
        + ", ".join(f"{k} {v}" for k, v in per_arch.items())
    )


if __name__ == "__main__":
    main()
