//! `SmolLM3ForCausalLM`: Llama with NoPE layers (`no_rope_layers`).

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["SmolLM3ForCausalLM"],
    model_types: &["smollm3"],
    config: ConfigSchema {
        defaults: Defaults {
            vocab_size: Some(128256),
            hidden_size: Some(2048),
            num_hidden_layers: Some(36),
            num_attention_heads: Some(16),
            num_key_value_heads: Some(4),
            max_position_embeddings: Some(32768),
            tie_word_embeddings: true,
            rope_theta: 2_000_000.0,
            bos_token_id: Some(128000),
            eos_token_id: Some(128001),
            pad_token_id: Some(128004),
            ..SEVEN_B
        },
        layers: LayerRule::UseSlidingWindow,
        rope: RopeRule::NoRopeLayers,
        ..LLAMA_SCHEMA
    },
    layout: LLAMA_LAYOUT,
};
