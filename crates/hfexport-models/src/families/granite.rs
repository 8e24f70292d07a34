//! `GraniteForCausalLM`: Llama with embedding, residual, attention and logit multipliers.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["GraniteForCausalLM"],
    model_types: &["granite"],
    config: ConfigSchema {
        defaults: Defaults { bos_token_id: Some(1), eos_token_id: Some(2), ..SEVEN_B },
        scale: ScaleRule::AttentionMultiplier,
        embedding_scale: EmbeddingScale::Multiplier,
        granite_multipliers: true,
        ..LLAMA_SCHEMA
    },
    layout: LLAMA_LAYOUT,
};
