"""The fixtures of the 2026 flagship families that attend (issue 40; the gated DeltaNet ones are in
ssm_fixtures.py), in manifest order: each config chosen so that what is new in the family changes
the logits (partial rotary, q/k norms, biases on every linear, routing corrections that move the
choice, dense and sparse layers side by side)."""

from decoder_fixtures import random_score_corrections, redraw_buffers
from fixture_spec import Spec, without_gemma3n_towers
from transformers import (
    Ernie4_5Config,
    Ernie4_5ForCausalLM,
    Ernie4_5_MoeConfig,
    Ernie4_5_MoeForCausalLM,
    Gemma3nAudioConfig,
    Gemma3nConfig,
    Gemma3nForCausalLM,
    Gemma3nForConditionalGeneration,
    Gemma3nTextConfig,
    Gemma3nVisionConfig,
    Gemma4ForCausalLM,
    Gemma4TextConfig,
    Glm4MoeConfig,
    Glm4MoeForCausalLM,
    Llama4ForCausalLM,
    Llama4TextConfig,
    Mistral4Config,
    Mistral4ForCausalLM,
)


def random_layer_scalars(folder):
    """Gemma 4's `layer_scalar` is a buffer (ones at init): drawn here so that each layer's factor
    changes the logits."""
    import torch

    redraw_buffers(folder, "layer_scalar", 11, lambda s, g: 0.6 + 0.8 * torch.rand(s, generator=g))


def flagship_specs():
    glm4_moe = Glm4MoeConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        moe_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=24,
        partial_rotary_factor=0.5,
        attention_bias=True,
        use_qk_norm=True,
        n_routed_experts=8,
        num_experts_per_tok=2,
        n_group=2,
        topk_group=1,
        n_shared_experts=1,
        first_k_dense_replace=1,
        routed_scaling_factor=1.5,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    ernie = dict(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=24,
        use_bias=True,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    ernie_moe = Ernie4_5_MoeConfig(
        **ernie,
        num_hidden_layers=3,
        moe_intermediate_size=32,
        moe_num_experts=6,
        moe_k=2,
        moe_num_shared_experts=1,
        moe_layer_start_index=1,
        moe_layer_end_index=1,
        tie_word_embeddings=False,
    )
    mistral4 = Mistral4Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        moe_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        kv_lora_rank=16,
        q_lora_rank=24,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8,
        v_head_dim=12,
        n_routed_experts=8,
        num_experts_per_tok=2,
        n_group=4,
        topk_group=2,
        n_shared_experts=1,
        first_k_dense_replace=1,
        routed_scaling_factor=1.5,
        max_position_embeddings=64,
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 4,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "llama_4_scaling_beta": 0.5,
        },
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    llama4 = Llama4TextConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=32,
        intermediate_size_mlp=96,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_local_experts=4,
        num_experts_per_tok=2,
        interleave_moe_layer_step=2,
        no_rope_layer_interval=2,
        attention_chunk_size=4,
        attn_temperature_tuning=True,
        floor_scale=4,
        attn_scale=0.5,
        max_position_embeddings=64,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16,
        },
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    gemma4 = Gemma4TextConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=64,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        global_head_dim=32,
        num_global_key_value_heads=1,
        attention_k_eq_v=True,
        sliding_window=3,
        layer_types=["sliding_attention"] * 3 + ["full_attention", "sliding_attention", "full_attention"],
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {
                "rope_type": "proportional",
                "partial_rotary_factor": 0.25,
                "factor": 2.0,
                "rope_theta": 1000000.0,
            },
        },
        hidden_size_per_layer_input=8,
        vocab_size_per_layer_input=256,
        num_kv_shared_layers=2,
        use_double_wide_mlp=True,
        final_logit_softcapping=10.0,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    gemma4_moe = Gemma4TextConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=48,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        global_head_dim=24,
        attention_k_eq_v=True,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"] * 2,
        hidden_size_per_layer_input=0,
        enable_moe_block=True,
        num_experts=6,
        top_k_experts=2,
        moe_intermediate_size=16,
        final_logit_softcapping=30.0,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    gemma3n = Gemma3nTextConfig(
        vocab_size=256,
        vocab_size_per_layer_input=200,
        hidden_size=64,
        intermediate_size=[64, 96, 64, 80, 64, 48],
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        sliding_window=3,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
        },
        hidden_size_per_layer_input=8,
        num_kv_shared_layers=2,
        activation_sparsity_pattern=[0.95, 0.8, 0.0, 0.0, 0.5, 0.0],
        altup_num_inputs=4,
        laurel_rank=8,
        final_logit_softcapping=10.0,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    # the hub's form: the text model inside the image-audio-text class, whose vision and audio
    # hard tokens (ids 200..223, 224..255, the per-layer table ending at the first) have tables
    # of their own; the towers, which a text-only forward never calls, are empty modules
    without_gemma3n_towers()
    gemma3n_multimodal = Gemma3nConfig(
        text_config=Gemma3nTextConfig(**{**gemma3n.to_dict(), "num_hidden_layers": 4, "num_kv_shared_layers": 1,
            "intermediate_size": 64, "activation_sparsity_pattern": [0.95, 0.0, 0.5, 0.0],
            "layer_types": ["sliding_attention", "full_attention"] * 2}),
        vision_config=Gemma3nVisionConfig(vocab_offset=200, vocab_size=24, hidden_size=40, rms_norm_eps=1e-5),
        audio_config=Gemma3nAudioConfig(vocab_offset=224, vocab_size=32, hidden_size=48, rms_norm_eps=1e-6),
        image_token_id=201,
        audio_token_id=225,
        tie_word_embeddings=True,
    )
    return [
        Spec(
            "glm4_moe",
            81,
            Glm4MoeForCausalLM,
            glm4_moe,
            None,
            "DeepSeek-V3 routing (sigmoid + e_score_correction_bias within the best 1 of 2 groups, "
            "renormalised, times 1.5) over grouped-query attention: q/k/v biases, per-head RMS q/k norms, "
            "head_dim 24 apart from hidden/heads, rotate-half rotary over half of each head; layer 0 dense, "
            "layer 1 8 experts top-2 plus a shared expert",
            strict_greedy=True,
            post_save=random_score_corrections,
        ),
        Spec(
            "ernie4_5",
            82,
            Ernie4_5ForCausalLM,
            Ernie4_5Config(**ernie, num_hidden_layers=2),
            None,
            "biases on q/k/v/o and the MLP (use_bias), rotary over interleaved channel pairs, head_dim 24 "
            "apart from hidden/heads, 2 KV heads, tied head",
            strict_greedy=True,
        ),
        Spec(
            "ernie4_5_moe",
            83,
            Ernie4_5_MoeForCausalLM,
            ernie_moe,
            None,
            "6 experts top-2 chosen by softmax + moe_statics.e_score_correction_bias ([1, experts]) and "
            "weighted by the renormalised probabilities, a shared expert with biases, experts on layer 1 "
            "only (moe_layer_start/end_index), dense layers 0 and 2, an untied head with a bias (use_bias)",
            strict_greedy=True,
            post_save=random_score_corrections,
        ),
        Spec(
            "mistral4",
            84,
            Mistral4ForCausalLM,
            mistral4,
            None,
            "DeepSeek-V3's latent attention (q_lora_rank 24, kv_lora_rank 16, 16 + 8 interleaved rotary query/key "
            "channels, 12 value channels, the latent cached) with the rope's partial_rotary_factor over the "
            "whole head (8/24), Llama 4's query scaling by position (beta 0.5 over 4 positions: every position "
            "from 4 on scaled), yarn with mscale_all_dim; layer 0 dense, layer 1 8 experts top-2 by softmax "
            "within the best 2 of 4 groups (their two best summed), renormalised, times 1.5, plus a shared expert",
            strict_greedy=True,
        ),
        Spec(
            "llama4",
            85,
            Llama4ForCausalLM,
            llama4,
            None,
            "layers 0 and 2 rotary (llama3 scaling, complex-pair channels) with the weightless L2 q/k norm, "
            "attending within chunks of 4 positions (every prompt and generation crosses chunks); layers 1 and 3 "
            "without rope, full attention, queries scaled by 1 + 0.5 ln(1 + floor((p + 1) / 4)); layers 1 and 3 "
            "MoE (4 experts top-2 by logit, their sigmoids scaling the experts' input, fused transposed experts, "
            "a shared expert of 32), layers 0 and 2 dense of 96 (intermediate_size_mlp)",
            strict_greedy=True,
        ),
        Spec(
            "gemma4",
            86,
            Gemma4ForCausalLM,
            gemma4,
            None,
            "sliding layers (window 3) of head_dim 16 and 2 KV heads with the default rope; full layers 3 and 5 "
            "of global_head_dim 32 and 1 KV head whose values are the key projection (attention_k_eq_v), with a "
            "proportional rope (a quarter of each head turning, frequencies halved); layers 4 and 5 reuse the "
            "keys and values of layers 2 and 3 (num_kv_shared_layers 2) with MLPs twice as wide; per-layer "
            "embeddings of 8; plain RMS norms incl. q/k and weightless v norms, unit attention scale, random "
            "layer_scalar factors, final soft-cap 10, tied head",
            strict_greedy=True,
            embed_std=0.08,
            post_save=random_layer_scalars,
        ),
        Spec(
            "gemma4_moe",
            89,
            Gemma4ForCausalLM,
            gemma4_moe,
            None,
            "the 26B-A4B layout: every layer's dense MLP (48) beside 6 experts top-2 (16 wide, fused gate_up_proj), "
            "routed on their own weightless norm of the residual times router.scale and hidden**-0.5, softmax "
            "top-k renormalised and weighed by per_expert_scale, the experts reading pre_feedforward_layernorm_2; "
            "the two outputs normed and summed; sliding (window 4, head_dim 16, 2 KV heads) and full layers "
            "(global_head_dim 24, values from the keys, the default proportional rope), no per-layer embeddings, "
            "random layer_scalar factors, final soft-cap 30, untied head",
            strict_greedy=True,
            embed_std=0.08,
            post_save=random_layer_scalars,
        ),
        Spec(
            "gemma3n",
            90,
            Gemma3nForCausalLM,
            gemma3n,
            None,
            "AltUp's 4 residual streams (router, prediction and correction coefficients, scaled correction), "
            "LAuReL of rank 8 beside each attention, per-layer MLP widths (64, 96, 64, 80, 64, 48) with gates "
            "sparsified at 0.95, 0.8 and 0.5 on layers 0, 1 and 4; sliding layers (window 3) with the default "
            "rope and full layers 2 and 5 with a linear one (factor 2); layers 4 and 5 reuse the keys and values "
            "of layers 3 and 2 (num_kv_shared_layers 2); per-layer embeddings of 8 from a 200-token table (ids "
            "past it read row 0); plain RMS norms incl. q/k and weightless v norms, unit attention scale, final "
            "soft-cap 10, tied head",
            strict_greedy=True,
            embed_std=0.08,
        ),
        Spec(
            "gemma3n_multimodal",
            91,
            Gemma3nForConditionalGeneration,
            gemma3n_multimodal,
            None,
            "the hub's Gemma3nForConditionalGeneration form (text_config, model.language_model.*, towers left out): "
            "vision tokens 200..223 and audio tokens 224..255 embedded by embed_vision / embed_audio (a table of 40 "
            "and 48 wide, normed with the tower's epsilon, projected, normed without weight), the per-layer table "
            "ending at 200; 4 layers of the gemma3n fixture's text model (AltUp, LAuReL, sparse gates on layers 0 "
            "and 2, layer 3 reusing layer 1's keys and values), tied head",
            strict_greedy=True,
            embed_std=0.08,
        ),
    ]
