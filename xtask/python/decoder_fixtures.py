"""The fixtures of the second round of decoder families (issue 33), in manifest order: each config
chosen so that what is new in the family changes the logits (windows shorter than the 7-token
sequence, biases, partial rotary factors well apart)."""

from fixture_spec import Spec
from mxfp4 import store_experts_as_mxfp4
from transformers import (
    BloomConfig,
    BloomForCausalLM,
    FalconConfig,
    FalconForCausalLM,
    Cohere2Config,
    DeepseekV2Config,
    DeepseekV2ForCausalLM,
    DeepseekV3Config,
    DeepseekV3ForCausalLM,
    Cohere2ForCausalLM,
    CohereConfig,
    CohereForCausalLM,
    Glm4Config,
    Glm4ForCausalLM,
    GlmConfig,
    GlmForCausalLM,
    GPTBigCodeConfig,
    GPTBigCodeForCausalLM,
    GPTJConfig,
    GPTJForCausalLM,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    GptOssConfig,
    GptOssForCausalLM,
    GraniteMoeConfig,
    GraniteMoeForCausalLM,
    GraniteMoeSharedConfig,
    GraniteMoeSharedForCausalLM,
    OPTConfig,
    OPTForCausalLM,
    OlmoeConfig,
    OlmoeForCausalLM,
    PhiConfig,
    PhiForCausalLM,
    StableLmConfig,
    StableLmForCausalLM,
    Starcoder2Config,
    Starcoder2ForCausalLM,
)


def redraw_buffers(folder, suffix, seed, draw):
    """Rewrites the saved tensors named `...suffix` (buffers, which widening the parameters
    leaves at their init) as `draw(shape, generator)`, the generator seeded with `seed`."""
    import torch
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    tensors = load_file(path)
    gen = torch.Generator().manual_seed(seed)
    for name in [n for n in tensors if n.endswith(suffix)]:
        tensors[name] = draw(tensors[name].shape, gen)
    save_file(tensors, str(path), metadata={"format": "pt"})


def random_score_corrections(folder):
    """DeepSeek-V3's `e_score_correction_bias` is a buffer (zeros at init): drawn here so that it
    changes which experts are chosen."""
    import torch

    redraw_buffers(folder, "e_score_correction_bias", 7, lambda s, g: torch.randn(s, generator=g) * 0.1)


def decoder_round2_specs():
    specs = []

    starcoder2 = Starcoder2Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        max_position_embeddings=64,
        sliding_window=3,
        rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
        norm_epsilon=1e-5,
        bos_token_id=1,
        eos_token_id=2,  # the class default 50256 is outside the vocab
        tie_word_embeddings=True,
    )
    specs.append(
        Spec(
            "starcoder2",
            30,
            Starcoder2ForCausalLM,
            starcoder2,
            None,
            "use_bias on every projection, LayerNorms with bias (norm_epsilon), plain c_fc/c_proj MLP with "
            "gelu_pytorch_tanh, one KV head, sliding window 3 on every layer, tied head",
            strict_greedy=True,
        )
    )

    phi = PhiConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        # Phi-2's factor: int(16 * 0.4) = 6 rotated channels of 16
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.4},
        qk_layernorm=True,
        hidden_act="gelu_new",
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    specs.append(
        Spec(
            "phi",
            31,
            PhiForCausalLM,
            phi,
            None,
            "parallel block off one LayerNorm, partial rotary 0.4 (6 of 16 channels), qk_layernorm per head, "
            "biased q/k/v/dense/fc1/fc2 and head, 2 KV heads, untied head",
            strict_greedy=True,
        )
    )

    neox = GPTNeoXConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        use_parallel_residual=True,
        hidden_act="gelu",
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    specs.append(
        Spec(
            "gpt_neox",
            32,
            GPTNeoXForCausalLM,
            neox,
            None,
            "fused query_key_value grouped per head, partial rotary 0.25 (4 of 16 channels), parallel residual "
            "with its own post_attention_layernorm, biases, embed_in/embed_out, untied head",
            strict_greedy=True,
        )
    )

    bigcode = GPTBigCodeConfig(
        vocab_size=256,
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_positions=64,
        n_inner=None,
        multi_query=True,
        activation_function="gelu_pytorch_tanh",
        bos_token_id=255,
        eos_token_id=255,
        tie_word_embeddings=True,
    )
    specs.append(
        Spec(
            "gpt_bigcode",
            33,
            GPTBigCodeForCausalLM,
            bigcode,
            None,
            "multi-query attention (c_attn = [q; k; v] with one KV head), learned positions, nn.Linear "
            "projections, n_inner null (4 x n_embd), tied head",
            strict_greedy=True,
        )
    )

    gptj = GPTJConfig(
        vocab_size=256,
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_positions=64,
        rotary_dim=8,  # of head_dim 16
        n_inner=None,
        activation_function="gelu_new",
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    specs.append(
        Spec(
            "gptj",
            34,
            GPTJForCausalLM,
            gptj,
            None,
            "rotate-every-two rotary over rotary_dim 8 of 16 channels (fixed base 10000), parallel block off ln_1, "
            "unbiased q/k/v/out_proj, biased fc_in/fc_out and head, untied head",
            strict_greedy=True,
        )
    )

    cohere = CohereConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        logit_scale=0.25,
        use_qk_norm=True,
        attention_bias=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=True,
    )
    specs.append(
        Spec(
            "cohere",
            35,
            CohereForCausalLM,
            cohere,
            None,
            "parallel block off one LayerNorm without bias, rotate-every-two rotary, use_qk_norm (a weight row per "
            "head), logit_scale 0.25, attention_bias, 2 KV heads, tied head",
            strict_greedy=True,
        )
    )

    stablelm = StableLmConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        use_qkv_bias=True,
        qk_layernorm=True,
        use_parallel_residual=True,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    specs.append(
        Spec(
            "stablelm",
            36,
            StableLmForCausalLM,
            stablelm,
            None,
            "parallel residual off the input LayerNorm, qk_layernorm (one LayerNorm per head, stored apart), "
            "partial rotary 0.25, use_qkv_bias, LayerNorms with bias, 2 KV heads, untied head",
            strict_greedy=True,
        )
    )

    olmoe = OlmoeConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=32,  # each expert's
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        num_experts=6,
        num_experts_per_tok=3,
        norm_topk_prob=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    specs.append(
        Spec(
            "olmoe",
            37,
            OlmoeForCausalLM,
            olmoe,
            None,
            "6 experts top-3 not renormalised in every layer, q/k RMSNorm over the whole projection (k over 2 KV "
            "heads), untied head",
            strict_greedy=True,
        )
    )

    def glm_config(cls):
        return cls(
            vocab_size=256,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,  # the class default is 128
            max_position_embeddings=64,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
            rms_norm_eps=1e-5,
            bos_token_id=1,
            eos_token_id=3,  # not among the greedy tokens (the generate tests stop at an EOS id)
            pad_token_id=0,
            tie_word_embeddings=False,
        )

    specs.append(
        Spec(
            "glm",
            38,
            GlmForCausalLM,
            glm_config(GlmConfig),
            None,
            "rotate-every-two rotary over half of each head (8 of 16 channels), fused gate_up_proj, q/k/v biases "
            "and an unbiased o_proj, 2 KV heads, untied head",
            strict_greedy=True,
        )
    )
    specs.append(
        Spec(
            "glm4",
            39,
            Glm4ForCausalLM,
            glm_config(Glm4Config),
            None,
            "GLM's blocks plus post_self_attn_layernorm and post_mlp_layernorm (sandwich norms)",
            strict_greedy=True,
        )
    )

    cohere2 = Cohere2Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        sliding_window=3,
        sliding_window_pattern=2,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        logit_scale=0.5,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=True,
    )

    def hub_pattern(cfg):
        # the Hub files' form: the pattern, not the derived layer_types
        assert cfg["layer_types"] == ["sliding_attention", "full_attention"] * 2, cfg["layer_types"]
        out = {k: v for k, v in cfg.items() if k != "layer_types"}
        out["sliding_window_pattern"] = 2
        return out

    specs.append(
        Spec(
            "cohere2",
            40,
            Cohere2ForCausalLM,
            cohere2,
            hub_pattern,
            "sliding window 3 on layers 0 and 2 with rotary, full layers 1 and 3 without position encoding, from "
            "sliding_window_pattern 2 (Hub form), Cohere's parallel block and logit_scale 0.5, tied head",
            strict_greedy=True,
        )
    )

    falcon = FalconConfig(
        vocab_size=256,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_kv_heads=2,
        new_decoder_architecture=True,
        ffn_hidden_size=96,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bias=False,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    specs.append(
        Spec(
            "falcon",
            41,
            FalconForCausalLM,
            falcon,
            None,
            "new_decoder_architecture: query_key_value grouped per KV head (2 of 4), parallel block with ln_attn "
            "and ln_mlp, rotary, no biases, ffn_hidden_size 96, untied head",
            strict_greedy=True,
        )
    )

    falcon_alibi = FalconConfig(
        vocab_size=256,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=6,
        new_decoder_architecture=False,
        multi_query=False,
        parallel_attn=False,
        alibi=True,
        max_position_embeddings=64,
        bias=True,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=True,
    )
    specs.append(
        Spec(
            "falcon_alibi",
            42,
            FalconForCausalLM,
            falcon_alibi,
            None,
            "the old decoder (Falcon-RW): ALiBi over 6 heads in Falcon's bfloat16 arithmetic, query_key_value "
            "grouped per head (multi_query false), sequential block with post_attention_layernorm, biases, tied head",
            strict_greedy=True,
        )
    )

    bloom = BloomConfig(
        vocab_size=256,
        hidden_size=48,
        n_layer=2,
        n_head=6,
        bos_token_id=1,
        eos_token_id=3,  # not among the greedy tokens
        # tied, the normed embeddings make every greedy step repeat its input token
        tie_word_embeddings=False,
    )
    specs.append(
        Spec(
            "bloom",
            43,
            BloomForCausalLM,
            bloom,
            None,
            "ALiBi over 6 heads (slopes past the power of two), word_embeddings_layernorm, query_key_value grouped "
            "per head, tanh-GELU MLP of 4 x hidden, biases, untied head",
            strict_greedy=True,
        )
    )

    opt = OPTConfig(
        vocab_size=256,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        ffn_dim=96,
        max_position_embeddings=64,
        word_embed_proj_dim=32,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=True,
    )
    specs.append(
        Spec(
            "opt",
            44,
            OPTForCausalLM,
            opt,
            None,
            "learned positions counted over the attention mask, offset 2; project_in/project_out (embeddings 32 "
            "wide, hidden 64), LayerNorms before each sublayer, ReLU fc1/fc2, biases, tied head",
            strict_greedy=True,
        )
    )

    opt_post = OPTConfig(
        vocab_size=256,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=3,
        ffn_dim=80,
        max_position_embeddings=64,
        do_layer_norm_before=False,
        layer_norm_elementwise_affine=False,
        enable_bias=False,
        activation_function="gelu",
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    specs.append(
        Spec(
            "opt_post",
            45,
            OPTForCausalLM,
            opt_post,
            None,
            "OPT-350m's form: LayerNorms after each residual add and no final norm, LayerNorms without weights "
            "(layer_norm_elementwise_affine false), no biases, gelu, untied head",
            strict_greedy=True,
        )
    )

    granite_moe = dict(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        num_local_experts=4,
        num_experts_per_tok=2,
        embedding_multiplier=2.0,
        attention_multiplier=0.2,
        residual_multiplier=0.5,
        logits_scaling=2.0,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    specs.append(
        Spec(
            "granitemoe",
            46,
            GraniteMoeForCausalLM,
            GraniteMoeConfig(**granite_moe),
            None,
            "4 experts top-2 (softmax over the chosen logits) in every layer, stored as input_linear / "
            "output_linear / router.layer; Granite's embedding, attention, residual and logits multipliers",
            strict_greedy=True,
        )
    )
    specs.append(
        Spec(
            "granitemoe_shared",
            47,
            GraniteMoeSharedForCausalLM,
            GraniteMoeSharedConfig(**{**granite_moe, "num_experts_per_tok": 1, "shared_intermediate_size": 48}),
            None,
            "GraniteMoe's blocks, top-1 of 4 experts, plus an ungated shared_mlp of 48 (fused input_linear)",
            strict_greedy=True,
        )
    )

    def without_rope(cfg):
        # the file leaves the rope to GptOssConfig's default (yarn, factor 32, theta 150000)
        del cfg["rope_parameters"]
        return cfg

    gpt_oss = GptOssConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=3,
        max_position_embeddings=64,
        swiglu_limit=1.0,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    specs.append(
        Spec(
            "gpt_oss",
            48,
            GptOssForCausalLM,
            gpt_oss,
            without_rope,
            "the hub's MXFP4 experts (quantization_config mxfp4: gate_up/down blocks and scales), biased "
            "router and experts, 4 experts top-2, clamped SwiGLU (limit 1 bites), a learned sink per head, "
            "sliding window 3 on layer 0 and full attention on layer 1, biased q/k/v/o, the class's yarn rope",
            strict_greedy=True,
            post_save=store_experts_as_mxfp4,
        )
    )

    deepseek = dict(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        moe_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        kv_lora_rank=16,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8,
        v_head_dim=12,
        n_routed_experts=8,
        num_experts_per_tok=2,
        n_group=4,
        topk_group=2,
        first_k_dense_replace=1,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    specs.append(
        Spec(
            "deepseek_v2",
            49,
            DeepseekV2ForCausalLM,
            DeepseekV2Config(
                **deepseek,
                q_lora_rank=None,
                n_shared_experts=2,
                topk_method="group_limited_greedy",
                routed_scaling_factor=1.5,
            ),
            None,
            "multi-head latent attention with one q_proj (q_lora_rank null), kv_lora_rank 16, 16 + 8 "
            "(interleaved rotary) query/key channels and 12 value channels per head, the latent cached; "
            "layer 0 dense, layer 1 8 experts top-2 within the best 2 of 4 groups (group_limited_greedy, "
            "softmax, routed_scaling_factor 1.5) plus 2 shared experts",
            strict_greedy=True,
        )
    )
    specs.append(
        Spec(
            "deepseek_v3",
            51,
            DeepseekV3ForCausalLM,
            DeepseekV3Config(
                **deepseek,
                q_lora_rank=24,
                n_shared_experts=1,
                routed_scaling_factor=2.5,
                rope_parameters={
                    "rope_type": "yarn",
                    "rope_theta": 10000.0,
                    "factor": 4.0,
                    "original_max_position_embeddings": 16,
                    "beta_fast": 32.0,
                    "beta_slow": 1.0,
                    "mscale": 1.0,
                    "mscale_all_dim": 1.0,
                },
            ),
            None,
            "latent attention with low-rank queries (q_lora_rank 24, q_a_layernorm), interleaved rotary, "
            "yarn with mscale/mscale_all_dim (the score scale's correction); layer 0 dense, layer 1 8 experts "
            "top-2 by sigmoid + e_score_correction_bias within the best 2 of 4 groups, renormalised, times 2.5, "
            "plus a shared expert",
            strict_greedy=True,
            post_save=random_score_corrections,
        )
    )
    return specs
