//! `Qwen3ForCausalLM`: Qwen2 with per-head q/k norms and attention biases by key.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::qwen2::QWEN_DEFAULTS;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["Qwen3ForCausalLM"],
    model_types: &["qwen3"],
    config: ConfigSchema {
        defaults: Defaults { head_dim: Some(128), ..QWEN_DEFAULTS },
        layers: LayerRule::Qwen,
        biases: ATTENTION_BIASES,
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        attention: AttentionLayout { qk_norm: QkNorm::PerHead(QK_NORMS), ..LLAMA_LAYOUT.attention },
        ..LLAMA_LAYOUT
    },
};
