//! `Glm4MoeForCausalLM` (GLM-4.5, GLM-4.6, GLM-4.5-Air): DeepSeek-V3's decoder (its router:
//! sigmoid scores chosen with `e_score_correction_bias` within groups, dense layers below
//! `first_k_dense_replace`, `n_shared_experts` shared experts) over plain grouped-query
//! attention instead of latent attention: q/k/v biases by `attention_bias` (never on `o_proj`),
//! per-head RMS q/k norms with `use_qk_norm`, rotate-half rotary over the first
//! `partial_rotary_factor` (0.5 when absent) of each head. The class's routing defaults are
//! one group and a scale of 1. Multi-token prediction layers (`num_nextn_predict_layers`,
//! stored as layers past `num_hidden_layers`) are not part of the causal LM, as in transformers.

use super::deepseek::{DEEPSEEK_V3, V3_MOE};
use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["Glm4MoeForCausalLM"],
    model_types: &["glm4_moe"],
    config: ConfigSchema {
        defaults: Defaults {
            vocab_size: Some(151552),
            hidden_size: Some(4096),
            intermediate_size: Some(10944),
            num_hidden_layers: Some(46),
            num_attention_heads: Some(96),
            num_key_value_heads: Some(8),
            max_position_embeddings: Some(131072),
            norm_eps: 1e-5,
            ..NO_DEFAULTS
        },
        biases: Biases {
            qkv: Flag::Key("attention_bias"),
            o: Flag::Never,
            mlp: Flag::Never,
            norm: Flag::Never,
            head: Flag::Never,
        },
        partial_rotary: Some(0.5),
        qk_norm: Flag::Key("use_qk_norm"),
        moe: Some(MoeSchema {
            default_experts: 128,
            intermediate: Some(("moe_intermediate_size", 1408)),
            layers: MoeLayers::FirstDense("first_k_dense_replace", 1),
            routing: RoutingRule::Grouped {
                score: RouterScore::SigmoidCorrected,
                groups: 1,
                top_groups: 1,
                scale: 1.0,
            },
            ..V3_MOE
        }),
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        attention: AttentionLayout { qk_norm: QkNorm::PerHead(QK_NORMS), ..LLAMA_LAYOUT.attention },
        latent: None,
        ..DEEPSEEK_V3.layout
    },
};
