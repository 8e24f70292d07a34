//! `MistralForCausalLM` / `MinistralForCausalLM`: Llama's blocks, a sliding window on every layer (Ministral:
//! per `layer_types`), no biases.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::schema::*;

/// Ministral is Mistral with per-layer `layer_types` (same weights, same defaults).
pub const FAMILY: Architecture = Architecture {
    classes: &["MistralForCausalLM", "MinistralForCausalLM"],
    model_types: &["mistral", "ministral"],
    config: ConfigSchema {
        defaults: Defaults {
            intermediate_size: Some(14336),
            max_position_embeddings: Some(4096 * 32),
            num_key_value_heads: Some(8),
            ..LLAMA_SCHEMA.defaults
        },
        layers: LayerRule::Mistral { default_window: Some(4096) },
        biases: NO_BIASES,
        ..LLAMA_SCHEMA
    },
    layout: LLAMA_LAYOUT,
};
