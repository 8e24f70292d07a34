//! `Qwen2ForCausalLM`: Llama's blocks with q/k/v biases and Qwen's sliding-window rule.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::schema::*;

pub const QWEN_DEFAULTS: Defaults = Defaults {
    vocab_size: Some(151936),
    intermediate_size: Some(22016),
    max_position_embeddings: Some(32768),
    num_key_value_heads: Some(32),
    bos_token_id: None,
    eos_token_id: None,
    ..SEVEN_B
};

pub const FAMILY: Architecture = Architecture {
    classes: &["Qwen2ForCausalLM"],
    model_types: &["qwen2"],
    config: ConfigSchema {
        defaults: QWEN_DEFAULTS,
        layers: LayerRule::Qwen,
        biases: Biases { qkv: Flag::Always, ..NO_BIASES },
        ..LLAMA_SCHEMA
    },
    layout: LLAMA_LAYOUT,
};
