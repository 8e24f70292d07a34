//! `Olmo2ForCausalLM`: post-norm layers and q/k norms over the whole projection.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["Olmo2ForCausalLM"],
    model_types: &["olmo2"],
    config: ConfigSchema {
        defaults: Defaults {
            vocab_size: Some(50304),
            norm_eps: 1e-5,
            bos_token_id: None,
            eos_token_id: Some(50279),
            pad_token_id: Some(1),
            ..SEVEN_B
        },
        biases: ATTENTION_BIASES,
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        norms: LayerNorms {
            pre_attention: None,
            post_attention: Some("post_attention_layernorm"),
            pre_mlp: None,
            post_mlp: Some("post_feedforward_layernorm"),
            ..NO_NORMS
        },
        attention: AttentionLayout { qk_norm: QkNorm::Whole(QK_NORMS), ..LLAMA_LAYOUT.attention },
        ..LLAMA_LAYOUT
    },
};
