//! `Gemma2ForCausalLM`: Gemma with sandwich norms, alternating sliding layers and logit soft-capping.

use super::gemma::{GEMMA_DEFAULTS, GEMMA_LAYOUT};
use super::llama::LLAMA_SCHEMA;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const SANDWICH_NORMS: LayerNorms = LayerNorms {
    pre_attention: Some("input_layernorm"),
    post_attention: Some("post_attention_layernorm"),
    pre_mlp: Some("pre_feedforward_layernorm"),
    post_mlp: Some("post_feedforward_layernorm"),
    attention_residual: None,
    mlp_residual: None,
    first_without_pre_attention: false,
    own_parallel: None,
};

pub const FAMILY: Architecture = Architecture {
    classes: &["Gemma2ForCausalLM"],
    model_types: &["gemma2"],
    config: ConfigSchema {
        keys: Keys { activation: &["hidden_activation"], ..KEYS },
        defaults: Defaults {
            hidden_size: Some(2304),
            intermediate_size: Some(9216),
            num_hidden_layers: Some(26),
            num_attention_heads: Some(8),
            num_key_value_heads: Some(4),
            attn_softcap: Some(50.0),
            final_softcap: Some(30.0),
            ..GEMMA_DEFAULTS
        },
        layers: LayerRule::Pattern { period: 2, pattern_keys: &[], default_window: 4096, last_full: false },
        biases: ATTENTION_BIASES,
        scale: ScaleRule::QueryPreAttnScalar,
        embedding_scale: EmbeddingScale::SqrtHidden,
        softcapping: Softcapping { attention: true, logits: true },
        ..LLAMA_SCHEMA
    },
    layout: Layout { norms: SANDWICH_NORMS, ..GEMMA_LAYOUT },
};
