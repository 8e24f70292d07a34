//! `Phi3ForCausalLM`: fused `qkv_proj` and `gate_up_proj`, partial rotary, `longrope`.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["Phi3ForCausalLM"],
    model_types: &["phi3"],
    config: ConfigSchema {
        defaults: Defaults {
            vocab_size: Some(32064),
            hidden_size: Some(3072),
            intermediate_size: Some(8192),
            max_position_embeddings: Some(4096),
            norm_eps: 1e-5,
            bos_token_id: Some(1),
            eos_token_id: Some(32000),
            pad_token_id: Some(32000),
            ..SEVEN_B
        },
        layers: LayerRule::EveryLayer { default_window: None },
        biases: NO_BIASES,
        partial_rotary: Some(1.0),
        rope_types: Some(&["default", "longrope"]),
        rope_type_rewrites: &[("su", "longrope"), ("yarn", "longrope")],
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        attention: AttentionLayout { qkv: Projections::Fused("qkv_proj"), ..LLAMA_LAYOUT.attention },
        mlp: MlpLayout { kind: MlpKind::GatedFused("gate_up_proj"), ..LLAMA_LAYOUT.mlp },
        ..LLAMA_LAYOUT
    },
};
