"""The fixtures of the state-space families (issue 34), in manifest order: each config chosen so
that what is new changes the logits (biased projections, a non-default time-step rank, a conv
kernel other than the class's 4)."""

from fixture_spec import Spec
from transformers import (
    FalconH1Config,
    FalconH1ForCausalLM,
    GraniteMoeHybridConfig,
    GraniteMoeHybridForCausalLM,
    Lfm2Config,
    Lfm2ForCausalLM,
    Mamba2Config,
    Mamba2ForCausalLM,
    MambaConfig,
    MambaForCausalLM,
    Qwen3_5ForCausalLM,
    Qwen3_5MoeForCausalLM,
    Qwen3_5MoeTextConfig,
    Qwen3_5TextConfig,
    Qwen3NextConfig,
    Qwen3NextForCausalLM,
)


def granite_hub_form(cfg):
    """Granite 4.0's config.json as the Hub has it: `layers_block_type` with the legacy `mamba` /
    `attention` names (transformers reads them as `layer_types`), `mamba_d_head` "auto"."""
    cfg = dict(cfg)
    kinds = cfg.pop("layer_types")
    cfg["layers_block_type"] = ["mamba" if k == "linear_attention" else "attention" for k in kinds]
    cfg["mamba_d_head"] = "auto"
    return cfg


def lfm2_hub_form(cfg):
    """LFM2's config.json as the Hub has it: `full_attn_idxs` instead of `layer_types`,
    `block_ff_dim` for `intermediate_size`."""
    cfg = dict(cfg)
    kinds = cfg.pop("layer_types")
    cfg["full_attn_idxs"] = [i for i, k in enumerate(kinds) if k == "full_attention"]
    cfg["block_ff_dim"] = cfg.pop("intermediate_size")
    return cfg


def ssm_specs():
    mamba = MambaConfig(
        vocab_size=256,
        hidden_size=64,
        state_size=8,
        num_hidden_layers=2,
        expand=2,
        conv_kernel=3,
        time_step_rank=6,
        use_bias=True,
        use_conv_bias=True,
        layer_norm_epsilon=1e-5,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    mamba2 = Mamba2Config(
        vocab_size=256,
        hidden_size=64,
        num_heads=8,
        head_dim=16,
        n_groups=2,
        state_size=8,
        num_hidden_layers=2,
        expand=2,
        conv_kernel=4,
        chunk_size=4,
        use_bias=True,
        use_conv_bias=True,
        layer_norm_epsilon=1e-5,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    granite = dict(
        vocab_size=256,
        hidden_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=32,
        shared_intermediate_size=64,
        mamba_n_heads=8,
        mamba_n_groups=2,
        mamba_d_state=8,
        mamba_d_conv=3,
        mamba_expand=2,
        mamba_chunk_size=4,
        max_position_embeddings=64,
        embedding_multiplier=4.0,
        residual_multiplier=0.5,
        logits_scaling=2.0,
        attention_multiplier=0.2,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    granite_moe = GraniteMoeHybridConfig(
        **granite,
        layer_types=["mamba", "attention", "mamba", "mamba"],
        num_local_experts=4,
        num_experts_per_tok=2,
        position_embedding_type="rope",
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    granite_dense = GraniteMoeHybridConfig(
        **granite,
        layer_types=["linear_attention", "full_attention", "full_attention", "linear_attention"],
        num_local_experts=0,
        position_embedding_type=None,
        tie_word_embeddings=True,
    )
    lfm2 = Lfm2Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        full_attn_idxs=[1],
        conv_L_cache=3,
        block_multiple_of=32,
        block_ffn_dim_multiplier=1.5,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    falcon_h1 = FalconH1Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=64,
        mamba_d_ssm=96,
        mamba_n_heads=6,
        mamba_n_groups=2,
        mamba_d_state=8,
        mamba_d_conv=3,
        mamba_chunk_size=4,
        mamba_rms_norm=True,
        mamba_proj_bias=True,
        projectors_bias=True,
        embedding_multiplier=2.0,
        lm_head_multiplier=0.5,
        mlp_multipliers=[0.7, 1.3],
        key_multiplier=0.8,
        attention_in_multiplier=1.2,
        attention_out_multiplier=0.6,
        ssm_in_multiplier=0.9,
        ssm_out_multiplier=1.1,
        ssm_multipliers=[1.5, 0.5, 0.8, 1.25, 0.75],
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    delta = dict(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=8,
        linear_value_head_dim=8,
        linear_conv_kernel_dim=3,
        # A random DeltaNet's first-token head output is (q . k) * beta * v, and the gated RMS norm
        # makes it sign(q . k) * v / rms(v): where q . k is near 0, f32 rounding (and int8 noise)
        # is amplified up to 1 / sqrt(eps). eps 1e-2 bounds that at 10x; checkpoints use 1e-6,
        # where trained weights keep the norm's input away from 0.
        rms_norm_eps=1e-2,
        layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention"],
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    qwen3_5 = Qwen3_5TextConfig(
        **delta,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.25,
            "mrope_section": [1, 1, 0],
            "mrope_interleaved": True,
        },
    )
    qwen3_next = Qwen3NextConfig(
        **delta,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=64,
        mlp_only_layers=[2],
    )
    moe_delta = {k: v for k, v in delta.items() if k != "intermediate_size"}
    qwen3_5_moe = Qwen3_5MoeTextConfig(
        **moe_delta,
        rope_parameters=qwen3_5.rope_parameters,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=64,
    )
    return [
        Spec(
            "mamba",
            61,
            MambaForCausalLM,
            mamba,
            None,
            "selective scan (state 8 per channel, 128 channels), causal depthwise conv of 3 taps with bias, "
            "time_step_rank 6, biased in/out projections, untied head; the cache is the conv inputs and the state",
            strict_greedy=True,
            recurrent=True,
        ),
        Spec(
            "mamba2",
            62,
            Mamba2ForCausalLM,
            mamba2,
            None,
            "SSD: 8 heads of 16 channels in 2 groups sharing B and C, state 8, conv of 4 taps over x/B/C, "
            "gated group RMS norm, chunk_size 4 (transformers' chunked prefill pads the 7-token golden), "
            "biased projections, untied head; the cache is the conv inputs and [1, heads, head_dim, state]",
            strict_greedy=True,
            recurrent=True,
        ),
        Spec(
            "granitemoehybrid",
            68,
            GraniteMoeHybridForCausalLM,
            granite_moe,
            granite_hub_form,
            "Granite 4.0: Mamba2 layers (Bamba's mixer: 8 heads of 16 in 2 groups, state 8, conv 3) and one "
            "attention layer (rope, 4 heads over 2 KV heads) by the Hub's layers_block_type (mamba / attention), mamba_d_head auto, 4 experts top-2 plus the shared "
            "MLP in every layer, Granite's multipliers; the cache mixes KV slots and recurrent states",
            strict_greedy=True,
            recurrent=True,
        ),
        Spec(
            "granitemoehybrid_dense",
            64,
            GraniteMoeHybridForCausalLM,
            granite_dense,
            None,
            "Granite 4.0 without experts (num_local_experts 0: the shared MLP is the MLP) and without position "
            "encoding (position_embedding_type null), two attention layers between Mamba2 layers, tied head",
            strict_greedy=True,
            recurrent=True,
        ),
        Spec(
            "lfm2",
            65,
            Lfm2ForCausalLM,
            lfm2,
            lfm2_hub_form,
            "LFM2: gated short convolutions (3 taps) and one attention layer (per-head q/k RMS norms) by the "
            "Hub's full_attn_idxs, SwiGLU of the adjusted width (2/3 of block_ff_dim 96, times 1.5, rounded up to "
            "32: 96), final embedding_norm, tied head; the cache mixes KV slots and conv inputs",
            strict_greedy=True,
            recurrent=True,
        ),
        Spec(
            "falcon_h1",
            69,
            FalconH1ForCausalLM,
            falcon_h1,
            None,
            "Falcon-H1: attention (rope, 4 heads over 2 KV heads) beside a Mamba2 mixer (6 heads of 16 from "
            "mamba_d_ssm 96, not expand * hidden, in 2 groups, state 8, conv 3) in every layer, gated RMS norm before "
            "the gate, biased in/out projections, every muP multiplier away from 1 (keys, both mixers' inputs and "
            "outputs, the five in_proj parts, MLP gate and down, embeddings, lm head), untied head; the cache keeps "
            "each layer's KV slots and its recurrent states",
            strict_greedy=True,
            recurrent=True,
        ),
        Spec(
            "qwen3_5",
            70,
            Qwen3_5ForCausalLM,
            qwen3_5,
            None,
            "Qwen3.5 text: gated DeltaNet layers (2 key heads of 8 repeated to 4 value heads of 8, conv 3 over q/k/v, "
            "separate in_proj_qkv / z / b / a, L2-normed q/k, the delta rule, gated RMS norm) and one gated attention "
            "layer (query and output gate per head in q_proj, zero-centred q/k norms, partial rotary 0.25 as M-RoPE "
            "sections [1, 1, 0]) by layer_types, zero-centred norms, dense SwiGLU; the cache mixes KV slots, conv "
            "inputs and [1, 4, 8, 8] states; rms_norm_eps 1e-2 (see the config)",
            strict_greedy=True,
            recurrent=True,
        ),
        Spec(
            "qwen3_next",
            71,
            Qwen3NextForCausalLM,
            qwen3_next,
            None,
            "Qwen3-Next: Qwen3.5's layers with the DeltaNet's fused in_proj_qkvz / in_proj_ba (per key head), partial "
            "rotary 0.5, and Qwen2-MoE's experts (4, top-2, renormalised) with the gated shared expert, a dense MLP "
            "on mlp_only_layers [2]",
            strict_greedy=True,
            recurrent=True,
        ),
        Spec(
            "qwen3_5_moe",
            73,
            Qwen3_5MoeForCausalLM,
            qwen3_5_moe,
            None,
            "Qwen3.5-MoE text: Qwen3.5's DeltaNet and gated attention layers with experts in every layer (4, top-2, "
            "always renormalised, no intermediate_size) and the gated shared expert",
            strict_greedy=True,
            recurrent=True,
        ),
    ]
