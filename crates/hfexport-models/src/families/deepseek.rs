//! `DeepseekV2ForCausalLM` (DeepSeek-V2, V2-Lite, Coder-V2) and `DeepseekV3ForCausalLM`
//! (DeepSeek-V3, R1, Kimi-K2's layout): Llama's pre-norm layers with multi-head latent
//! attention (`latent.rs`: `q_lora_rank` possibly null, `kv_lora_rank`, `qk_nope_head_dim` +
//! `qk_rope_head_dim` per query and key head, `v_head_dim`; the rotary over neighbouring pairs,
//! V3 unless `rope_interleave` is false; yarn's `mscale_all_dim` in the score scale), and from
//! layer `first_k_dense_replace` on a mixture of experts with shared experts
//! (`n_shared_experts` times `moe_intermediate_size`, ungated): V2 routes by softmax, greedily
//! or within the best `topk_group` of `n_group` groups by their best expert; V3 by sigmoid
//! plus the router's `e_score_correction_bias` within the groups whose two best corrected
//! scores sum highest, renormalised by `norm_topk_prob`; both weights times
//! `routed_scaling_factor`. The head dim transformers derives is `qk_rope_head_dim` (what the
//! files' `head_dim` says, never read). Multi-token prediction layers (V3's
//! `num_nextn_predict_layers`) are not part of the causal LM, as in transformers.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::qwen3_moe::QWEN_MOE_LAYOUT;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// DeepSeek's ungated `mlp.shared_experts` (ERNIE 4.5's too).
pub const SHARED_EXPERTS: SharedExpert = SharedExpert {
    mlp: MlpLayout {
        prefix: "mlp.shared_experts",
        kind: MlpKind::Gated { gate: "gate_proj", up: "up_proj" },
        down: "down_proj",
    },
    gate: None,
};

const DEEPSEEK_LAYOUT: Layout = Layout {
    latent: Some(LatentLayout {
        q: "q_proj",
        q_a: "q_a_proj",
        q_norm: "q_a_layernorm",
        q_b: "q_b_proj",
        kv_a: "kv_a_proj_with_mqa",
        kv_norm: "kv_a_layernorm",
        kv_b: "kv_b_proj",
    }),
    moe: Some(MoeLayout { shared: Some(SHARED_EXPERTS), ..QWEN_MOE_LAYOUT }),
    ..LLAMA_LAYOUT
};

const V2_MOE: MoeSchema = MoeSchema {
    experts_keys: &["n_routed_experts", "num_experts"],
    default_experts: 64,
    // `num_experts_per_tok` defaults to null, which DeepseekV2's router cannot use
    default_top_k: 0,
    intermediate: Some(("moe_intermediate_size", 1407)),
    normalize: NormTopK::Key(false),
    shared_expert: Some(SharedSize::Experts("n_shared_experts", 2)),
    layers: MoeLayers::FirstDense("first_k_dense_replace", 0),
    routing: RoutingRule::DeepSeekV2,
    glu: MoeGlu::Activation,
    biased: false,
    zero_experts_dense: false,
    beside_dense: false,
};

const LATENT: LatentRule = LatentRule {
    q_lora_rank: Some(1536),
    kv_lora_rank: 512,
    nope_head_dim: 128,
    v_head_dim: 128,
    interleave: Flag::Always,
    partial_of_head: false,
    llama4_query_scale: false,
};

pub const DEEPSEEK_V2: Architecture = Architecture {
    classes: &["DeepseekV2ForCausalLM"],
    model_types: &["deepseek_v2"],
    config: ConfigSchema {
        keys: Keys { head_dim: "qk_rope_head_dim", ..KEYS },
        defaults: Defaults {
            vocab_size: Some(102400),
            intermediate_size: Some(11008),
            head_dim: Some(64),
            bos_token_id: Some(1),
            eos_token_id: Some(2),
            ..LLAMA_SCHEMA.defaults
        },
        latent: Some(LATENT),
        moe: Some(V2_MOE),
        ..LLAMA_SCHEMA
    },
    layout: DEEPSEEK_LAYOUT,
};

/// DeepSeek-V3's latent attention (`rope_interleave`), which Mistral 4 starts from.
pub const V3_LATENT: LatentRule = LatentRule { interleave: Flag::KeyDefault("rope_interleave", true), ..LATENT };

/// DeepSeek-V3's experts and routing, which GLM-4.5 and Mistral 4 start from.
pub const V3_MOE: MoeSchema = MoeSchema {
    experts_keys: &["n_routed_experts", "num_local_experts"],
    default_experts: 256,
    default_top_k: 8,
    intermediate: Some(("moe_intermediate_size", 2048)),
    normalize: NormTopK::Key(true),
    shared_expert: Some(SharedSize::Experts("n_shared_experts", 1)),
    layers: MoeLayers::FirstDense("first_k_dense_replace", 3),
    routing: RoutingRule::Grouped { score: RouterScore::SigmoidCorrected, groups: 8, top_groups: 4, scale: 2.5 },
    ..V2_MOE
};

pub const DEEPSEEK_V3: Architecture = Architecture {
    classes: &["DeepseekV3ForCausalLM"],
    model_types: &["deepseek_v3"],
    config: ConfigSchema {
        defaults: Defaults {
            vocab_size: Some(129280),
            hidden_size: Some(7168),
            intermediate_size: Some(18432),
            num_hidden_layers: Some(61),
            num_attention_heads: Some(128),
            num_key_value_heads: Some(128),
            max_position_embeddings: Some(4096),
            bos_token_id: Some(0),
            eos_token_id: Some(1),
            ..DEEPSEEK_V2.config.defaults
        },
        // DeepseekV3Config has no validate_architecture, nor `mlp_bias` (its MLPs are Qwen2-MoE's)
        heads_divide_hidden: false,
        biases: Biases { mlp: Flag::Never, ..LLAMA_SCHEMA.biases },
        latent: Some(V3_LATENT),
        moe: Some(V3_MOE),
        ..DEEPSEEK_V2.config
    },
    layout: Layout {
        moe: Some(MoeLayout {
            correction: Some("gate.e_score_correction_bias"),
            ..DEEPSEEK_LAYOUT.moe.expect("DeepSeek's layout has experts")
        }),
        ..DEEPSEEK_LAYOUT
    },
};
