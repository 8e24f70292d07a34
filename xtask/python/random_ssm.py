#!/usr/bin/env python3
"""Random tiny state-space checkpoints nobody has seen (Mamba, Mamba2, Granite 4.0's hybrid,
LFM2, Falcon-H1, Qwen3.5, Qwen3-Next), with transformers' outputs for each.

Usage: random_ssm.py OUTDIR [--seed S] [--per-arch N]

Run by `tests/state_space.rs` (with the venv python of `cargo xtask test`). Writes
OUTDIR/caseNN_<arch>/ (what `save_pretrained` writes, plus golden.safetensors) and
OUTDIR/index.json {"seed", "archs", "cases": [{"name", "dir", "architecture", "description"}]}. The
goldens, as random_checkpoints.py writes them, plus greedy decoding:

    single.input_ids / attention_mask / logits   [1, L] ids, L random in 5..12
    batch.input_ids / attention_mask / logits    [2, L], row 0 left-padded
    greedy.prompt_ids [1, 5], greedy.tokens [1, 8]  `generate` with its cache (the recurrent
                                                    path), prompt redrawn until every step's
                                                    top-1/top-2 gap is at least 1e-3

The configs sample what transformers 5.23 accepts:
  - Mamba: hidden 8-96, expand 1-3, state_size 1-16, conv_kernel 2-5, time_step_rank "auto" or
    1-16, use_bias / use_conv_bias, 1-3 layers, tied or untied head, layer_norm_epsilon;
  - Mamba2: 1-8 heads of head_dim 2-16, hidden = heads * head_dim / expand (expand 1, 2 or 4),
    n_groups dividing the heads, state_size 1-16, conv_kernel 2-5, chunk_size 1-8 (dividing the
    sequence or not: transformers pads its chunked prefill), use_bias / use_conv_bias,
    time_step_limit the class default or with a positive floor or a finite ceiling (the
    forward clamps to it; the goldens' greedy run keeps the default, where transformers'
    recurrent step, which does not clamp, agrees with its forward), tied or untied head;
  - GraniteMoeHybrid: a random pattern of Mamba2 and attention layers (legacy or new
    layer_types names), its mamba_* keys (head size "auto" or explicit), attention heads and KV
    heads, rope or none, 0 experts (the shared MLP alone) or 2-4 experts top-1/2, Granite's
    multipliers;
  - Lfm2: a random pattern of short convolutions and attention layers (`layer_types`, or the
    Hub's `full_attn_idxs`), conv_L_cache 2-5, conv_bias, heads and KV heads, head size,
    block_ff_dim with or without block_auto_adjust_ff_dim (multiplier, multiple_of), tied or
    untied head;
  - FalconH1: attention beside a Mamba2 mixer in every layer, the mixer's width from
    mamba_expand or mamba_d_ssm, head size "auto" or explicit, mamba_rms_norm with the norm before
    or after the gate (or no norm), separate in/out projection biases, attention head_dim
    explicit or hidden / heads, KV heads, every muP multiplier (keys, attention and mixer in and
    out, the five ssm_multipliers, mlp_multipliers, embedding, lm head) random;
  - Qwen3_5 / Qwen3Next / Qwen3_5Moe: a random pattern of gated DeltaNet and gated attention layers, key and
    value heads (value heads a multiple), key and value head sizes, conv kernel 2-5, attention
    heads, KV heads, head_dim with partial rotary 0.25, 0.5 or 1 (Qwen3.5: M-RoPE sections
    summing to the rotary half), attention bias; Qwen3-Next: 2-4 experts top-1/2, renormalised
    or not, the shared expert's width, decoder_sparse_step, mlp_only_layers; Qwen3.5-MoE: experts
    in every layer with the shared expert;
  - all: hidden_act silu or gelu_pytorch_tanh (the convolution's activation).
"""

import argparse
import json
import random
import sys
from pathlib import Path

ARCHS = [
    "MambaForCausalLM",
    "Mamba2ForCausalLM",
    "GraniteMoeHybridForCausalLM",
    "Lfm2ForCausalLM",
    "FalconH1ForCausalLM",
    "Qwen3_5ForCausalLM",
    "Qwen3NextForCausalLM",
    "Qwen3_5MoeForCausalLM",
]
PAD_ID = 0
STD = 0.15
MIN_LEN, MAX_LEN = 5, 12
PROMPT, NEW = 5, 8
MIN_MARGIN = 1e-3
PROMPT_TRIES = 40
MIN_ROUTER_GAP = 1e-4
MAX_REDRAWS = 20


def sample(rng, arch):
    """Config kwargs, and whether transformers' greedy run is a golden (its recurrent step does not
    clamp to a time_step_limit other than the default, which its forward does)."""
    common = dict(
        vocab_size=rng.randint(50, 300),
        num_hidden_layers=rng.randint(1, 3),
        state_size=rng.randint(1, 16),
        conv_kernel=rng.randint(2, 5),
        use_bias=rng.random() < 0.5,
        use_conv_bias=rng.random() < 0.7,
        layer_norm_epsilon=rng.choice([1e-5, 1e-6, 1e-3]),
        hidden_act=rng.choice(["silu", "silu", "gelu_pytorch_tanh"]),
        tie_word_embeddings=rng.random() < 0.5,
        pad_token_id=PAD_ID,
        bos_token_id=1,
        eos_token_id=2,
    )
    if arch == "MambaForCausalLM":
        kw = dict(
            common,
            hidden_size=rng.randint(8, 96),
            expand=rng.randint(1, 3),
            time_step_rank=rng.choice(["auto", rng.randint(1, 16)]),
        )
        return kw, True
    if arch == "GraniteMoeHybridForCausalLM":
        return sample_granite(rng, common), True
    if arch == "Lfm2ForCausalLM":
        return sample_lfm2(rng, common), True
    if arch == "FalconH1ForCausalLM":
        return sample_falcon_h1(rng, common), True
    if arch in ("Qwen3_5ForCausalLM", "Qwen3NextForCausalLM", "Qwen3_5MoeForCausalLM"):
        return sample_delta_net(rng, common, arch), True
    heads = rng.choice([1, 2, 3, 4, 6, 8])
    groups = rng.choice([g for g in range(1, heads + 1) if heads % g == 0])
    expand = rng.choice([1, 2, 4])
    head_dim = rng.choice([d for d in range(2, 17) if (heads * d) % expand == 0])
    kw = dict(
        common,
        num_heads=heads,
        head_dim=head_dim,
        n_groups=groups,
        expand=expand,
        hidden_size=heads * head_dim // expand,
        chunk_size=rng.randint(1, 8),
    )
    limit = rng.choice(["default", "default", "floor", "ceiling"])
    if limit == "floor":
        kw["time_step_limit"] = (rng.choice([0.05, 0.3]), float("inf"))
    elif limit == "ceiling":
        kw["time_step_limit"] = (0.0, rng.choice([0.2, 0.5]))
    return kw, limit == "default"


def mamba_draws(rng):
    """The `mamba_*` keys Granite 4.0 and Falcon-H1 draw alike (in this order, so a seed gives
    the same configs): state size, conv taps, chunk size, conv and projection biases."""
    return dict(
        mamba_d_state=rng.randint(1, 16),
        mamba_d_conv=rng.randint(2, 5),
        mamba_chunk_size=rng.randint(1, 8),
        mamba_conv_bias=rng.random() < 0.7,
        mamba_proj_bias=rng.random() < 0.5,
    )


def sample_granite(rng, common):
    """GraniteMoeHybridConfig kwargs: the mamba_* keys, a layer pattern, attention and experts."""
    kw = {k: v for k, v in common.items() if k not in ("state_size", "conv_kernel", "use_bias", "use_conv_bias")}
    layers = rng.randint(2, 4)
    heads = rng.choice([1, 2, 4, 8])
    groups = rng.choice([g for g in range(1, heads + 1) if heads % g == 0])
    expand = rng.choice([1, 2])
    head_dim = rng.choice([d for d in range(2, 17) if (heads * d) % expand == 0])
    hidden = heads * head_dim // expand
    attn_heads = rng.choice([h for h in (1, 2, 4) if hidden % h == 0])
    kinds = [rng.choice(["mamba", "attention"]) for _ in range(layers)]
    # a hybrid: transformers' generate needs an attention layer (its cache's sequence length)
    # and without a Mamba layer the model is an attention model
    first, second = rng.sample(range(layers), 2)
    kinds[first], kinds[second] = "attention", "mamba"
    if rng.random() < 0.5:
        kinds = ["linear_attention" if k == "mamba" else "full_attention" for k in kinds]
    experts = rng.choice([0, 0, 2, 4])
    kw.update(
        num_hidden_layers=layers,
        hidden_size=hidden,
        mamba_n_heads=heads,
        mamba_n_groups=groups,
        mamba_expand=expand,
        **mamba_draws(rng),
        num_attention_heads=attn_heads,
        num_key_value_heads=rng.choice([h for h in (1, attn_heads) if attn_heads % h == 0]),
        layer_types=kinds,
        shared_intermediate_size=rng.randint(4, 64),
        intermediate_size=rng.randint(4, 64),
        num_local_experts=experts,
        num_experts_per_tok=rng.randint(1, 2) if experts else 1,
        # rotary needs an even head size
        position_embedding_type=rng.choice(["rope", None]) if (hidden // attn_heads) % 2 == 0 else None,
        embedding_multiplier=rng.choice([1.0, 4.0, 12.0]),
        residual_multiplier=rng.choice([1.0, 0.5, 0.22]),
        logits_scaling=rng.choice([1.0, 2.0, 6.0]),
        attention_multiplier=rng.choice([0.0625, 0.25, 1.0]),
        max_position_embeddings=64,
        rms_norm_eps=common["layer_norm_epsilon"],
    )
    kw.pop("layer_norm_epsilon")
    if rng.random() < 0.5:
        kw["mamba_d_head"] = head_dim
    return kw


def sample_lfm2(rng, common):
    """Lfm2Config kwargs: a layer pattern with at least one convolution and one attention layer."""
    kw = {k: common[k] for k in ("vocab_size", "tie_word_embeddings", "pad_token_id", "bos_token_id", "eos_token_id")}
    layers = rng.randint(2, 4)
    heads = rng.choice([1, 2, 4])
    head_dim = rng.choice([4, 6, 8, 16])
    conv, attention = rng.sample(range(layers), 2)
    kinds = [rng.choice(["conv", "full_attention"]) for _ in range(layers)]
    kinds[conv], kinds[attention] = "conv", "full_attention"
    if rng.random() < 0.5:
        kw["layer_types"] = kinds
    else:
        kw["full_attn_idxs"] = [i for i, k in enumerate(kinds) if k == "full_attention"]
    kw.update(
        num_hidden_layers=layers,
        hidden_size=heads * head_dim,
        num_attention_heads=heads,
        num_key_value_heads=rng.choice([h for h in (1, heads) if heads % h == 0]),
        intermediate_size=rng.randint(6, 96),
        block_auto_adjust_ff_dim=rng.random() < 0.7,
        block_ffn_dim_multiplier=rng.choice([1.0, 1.5, 0.75]),
        block_multiple_of=rng.choice([8, 16, 32]),
        conv_L_cache=rng.randint(2, 5),
        conv_bias=rng.random() < 0.5,
        norm_eps=common["layer_norm_epsilon"],
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": rng.choice([10000.0, 1000000.0])},
    )
    return kw


def sample_falcon_h1(rng, common):
    """FalconH1Config kwargs: the mixer's mamba_* keys and width, attention, the gated norm's
    placement and every muP multiplier."""
    kw = {k: common[k] for k in ("vocab_size", "tie_word_embeddings", "pad_token_id", "bos_token_id", "eos_token_id")}
    heads = rng.choice([1, 2, 3, 4, 6])
    groups = rng.choice([g for g in range(1, heads + 1) if heads % g == 0])
    mamba_head = rng.choice(range(2, 17))
    attn_heads = rng.choice([1, 2, 4])
    attn_head_dim = rng.choice([4, 6, 8, 16])
    hidden = rng.choice([attn_heads * attn_head_dim, rng.randint(8, 64)])
    inner = heads * mamba_head
    if rng.random() < 0.5:
        kw["mamba_d_ssm"] = inner
    else:
        # the width from mamba_expand * hidden: the heads' size follows
        expand = rng.choice([1, 2])
        hidden = rng.choice([h for h in range(8, 65) if (h * expand) % heads == 0])
        kw.update(mamba_d_ssm=None, mamba_expand=expand)
        inner = hidden * expand
        mamba_head = inner // heads
    if rng.random() < 0.5 or hidden != attn_heads * attn_head_dim:
        kw["head_dim"] = attn_head_dim
    if rng.random() < 0.5:
        kw["mamba_d_head"] = mamba_head
    mult = lambda: rng.choice([1.0, 0.5, 0.8, 1.25, 2.0])
    kw.update(
        num_hidden_layers=rng.randint(1, 3),
        hidden_size=hidden,
        intermediate_size=rng.randint(4, 96),
        num_attention_heads=attn_heads,
        num_key_value_heads=rng.choice([h for h in (1, attn_heads) if attn_heads % h == 0]),
        mamba_n_heads=heads,
        mamba_n_groups=groups,
        **mamba_draws(rng),
        projectors_bias=rng.random() < 0.5,
        mamba_rms_norm=rng.random() < 0.6,
        mamba_norm_before_gate=rng.random() < 0.5,
        attention_bias=rng.random() < 0.3,
        mlp_bias=rng.random() < 0.3,
        hidden_act=common["hidden_act"],
        rms_norm_eps=common["layer_norm_epsilon"],
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": rng.choice([10000.0, 1000000.0])},
        embedding_multiplier=mult(),
        lm_head_multiplier=mult(),
        key_multiplier=mult(),
        attention_in_multiplier=mult(),
        attention_out_multiplier=mult(),
        ssm_in_multiplier=mult(),
        ssm_out_multiplier=mult(),
        ssm_multipliers=[mult() for _ in range(5)],
        mlp_multipliers=[mult(), mult()],
    )
    return kw


def sample_delta_net(rng, common, arch):
    """Qwen3_5TextConfig / Qwen3NextConfig / Qwen3_5MoeTextConfig kwargs: a layer pattern with at
    least one DeltaNet and one attention layer, the DeltaNet's heads and sizes, the gated
    attention, the experts of the MoE classes."""
    next_ = arch == "Qwen3NextForCausalLM"
    kw = {k: common[k] for k in ("vocab_size", "tie_word_embeddings", "pad_token_id", "bos_token_id", "eos_token_id")}
    layers = rng.randint(2, 4)
    linear, full = rng.sample(range(layers), 2)
    kinds = [rng.choice(["linear_attention", "full_attention"]) for _ in range(layers)]
    kinds[linear], kinds[full] = "linear_attention", "full_attention"
    heads = rng.choice([1, 2, 4])
    head_dim = rng.choice([8, 16])
    factor = rng.choice([0.25, 0.5, 1.0])
    rope = {"rope_type": "default", "rope_theta": rng.choice([10000.0, 1000000.0]), "partial_rotary_factor": factor}
    if not next_:
        half = int(head_dim * factor) // 2
        t = rng.randint(0, half)
        h = rng.randint(0, half - t)
        rope.update(mrope_section=[t, h, half - t - h], mrope_interleaved=True)
    key_heads = rng.randint(1, 3)
    kw.update(
        num_hidden_layers=layers,
        layer_types=kinds,
        hidden_size=rng.randint(8, 64),
        intermediate_size=rng.randint(4, 96),
        num_attention_heads=heads,
        num_key_value_heads=rng.choice([h for h in (1, heads) if heads % h == 0]),
        head_dim=head_dim,
        attention_bias=rng.random() < 0.3,
        linear_num_key_heads=key_heads,
        linear_num_value_heads=key_heads * rng.randint(1, 3),
        linear_key_head_dim=rng.randint(2, 16),
        linear_value_head_dim=rng.randint(2, 16),
        linear_conv_kernel_dim=rng.randint(2, 5),
        hidden_act=common["hidden_act"],
        # the gated norm of a random DeltaNet amplifies rounding up to 1 / sqrt(eps) where q . k
        # is near 0 (ssm_fixtures.py); a larger eps bounds it
        rms_norm_eps=rng.choice([1e-3, 1e-2]),
        max_position_embeddings=64,
        rope_parameters=rope,
    )
    if arch == "Qwen3_5MoeForCausalLM":
        # experts in every layer, always renormalised: no dense MLP
        del kw["intermediate_size"]
        kw.update(
            num_experts=rng.randint(2, 4),
            num_experts_per_tok=rng.randint(1, 2),
            moe_intermediate_size=rng.randint(4, 48),
            shared_expert_intermediate_size=rng.randint(4, 48),
        )
    if next_:
        experts = rng.randint(2, 4)
        kw.update(
            num_experts=experts,
            num_experts_per_tok=rng.randint(1, 2),
            norm_topk_prob=rng.random() < 0.7,
            moe_intermediate_size=rng.randint(4, 48),
            shared_expert_intermediate_size=rng.randint(4, 48),
            decoder_sparse_step=rng.choice([1, 1, 2]),
            mlp_only_layers=[i for i in range(layers) if rng.random() < 0.25],
        )
    return kw


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-arch", type=int, default=4)
    args = ap.parse_args()

    import routing
    import torch
    import transformers
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    classes = {
        "MambaForCausalLM": (transformers.MambaConfig, transformers.MambaForCausalLM),
        "Mamba2ForCausalLM": (transformers.Mamba2Config, transformers.Mamba2ForCausalLM),
        "GraniteMoeHybridForCausalLM": (transformers.GraniteMoeHybridConfig, transformers.GraniteMoeHybridForCausalLM),
        "FalconH1ForCausalLM": (transformers.FalconH1Config, transformers.FalconH1ForCausalLM),
        "Qwen3_5ForCausalLM": (transformers.Qwen3_5TextConfig, transformers.Qwen3_5ForCausalLM),
        "Qwen3NextForCausalLM": (transformers.Qwen3NextConfig, transformers.Qwen3NextForCausalLM),
        "Qwen3_5MoeForCausalLM": (transformers.Qwen3_5MoeTextConfig, transformers.Qwen3_5MoeForCausalLM),
        "Lfm2ForCausalLM": (transformers.Lfm2Config, transformers.Lfm2ForCausalLM),
    }

    outdir = Path(args.outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    index = []
    for i in range(args.per_arch * len(ARCHS)):
        arch = ARCHS[i % len(ARCHS)]
        rng = random.Random(f"hfexport-ssm:{args.seed}:{i}")
        kw, greedy = sample(rng, arch)
        config_cls, model_cls = classes[arch]
        name = f"case{i:02d}_{arch.replace('ForCausalLM', '').lower()}"
        folder = outdir / name
        folder.mkdir(parents=True, exist_ok=True)
        gen = torch.Generator().manual_seed(rng.randrange(2**31))
        L, vocab = rng.randint(MIN_LEN, MAX_LEN), kw["vocab_size"]
        pad = rng.randint(1, L - 2)
        single_ids = torch.randint(1, vocab, (1, L), generator=gen)
        batch_ids = torch.randint(1, vocab, (2, L), generator=gen)
        batch_ids[0, :pad] = PAD_ID
        batch_mask = torch.ones_like(batch_ids)
        batch_mask[0, :pad] = 0
        # weights redrawn while a router sits near a tie (random_checkpoints.py's rule)
        for _ in range(MAX_REDRAWS):
            torch.manual_seed(rng.randrange(2**31))
            model = model_cls(config_cls(**kw, experts_implementation="eager")).to(torch.float32).eval()
            with torch.no_grad():
                for pname, p in model.named_parameters():
                    noise = torch.randn_like(p) * STD
                    p.copy_(1.0 + noise if pname.endswith("norm.weight") or pname.endswith("norm_f.weight") else noise)
            gap = routing.router_gap(model, [(single_ids, torch.ones_like(single_ids)), (batch_ids, batch_mask)])
            if gap is None or gap >= MIN_ROUTER_GAP:
                break
        else:
            sys.exit(f"{name}: routing near a tie in {MAX_REDRAWS} weight draws")
        model.save_pretrained(folder, safe_serialization=True)
        # transformers' grouped experts need aligned strides: the eager ones compute the same
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, experts_implementation="eager").eval()
        with torch.no_grad():
            single = model(input_ids=single_ids, attention_mask=torch.ones_like(single_ids)).logits
            batch = model(input_ids=batch_ids, attention_mask=batch_mask).logits
        goldens = {
            "single.input_ids": single_ids,
            "single.attention_mask": torch.ones_like(single_ids),
            "single.logits": single.float(),
            "batch.input_ids": batch_ids,
            "batch.attention_mask": batch_mask,
            "batch.logits": batch.float(),
        }
        if greedy:
            for _ in range(PROMPT_TRIES):
                prompt = torch.randint(1, vocab, (1, PROMPT), generator=gen)
                with torch.no_grad():
                    out = model.generate(
                        prompt,
                        max_new_tokens=NEW,
                        min_new_tokens=NEW,
                        do_sample=False,
                        eos_token_id=None,
                        pad_token_id=PAD_ID,
                        output_scores=True,
                        return_dict_in_generate=True,
                    )
                margin = min((s[0].topk(2).values[0] - s[0].topk(2).values[1]).item() for s in out.scores)
                if margin >= MIN_MARGIN:
                    goldens["greedy.prompt_ids"] = prompt
                    goldens["greedy.tokens"] = out.sequences[:, PROMPT:]
                    break
            else:
                sys.exit(f"{name}: no prompt with greedy margin >= {MIN_MARGIN} in {PROMPT_TRIES} tries")
        save_file({k: v.contiguous() for k, v in goldens.items()}, str(folder / "golden.safetensors"))
        shown = {k: v for k, v in kw.items() if k not in ("pad_token_id", "bos_token_id", "eos_token_id")}
        index.append({"name": name, "dir": name, "architecture": arch, "description": f"{shown}, L {L}, pad {pad}"})
        print(f"{name}: {shown}")
    (outdir / "index.json").write_text(json.dumps({"seed": args.seed, "archs": ARCHS, "cases": index}, indent=2) + "\n")


if __name__ == "__main__":
    main()
