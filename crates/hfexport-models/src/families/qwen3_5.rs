//! `Qwen3_5ForCausalLM` (Qwen3.5's text model, `Qwen3_5TextConfig`): Qwen3-Next's hybrid of
//! gated DeltaNet and gated attention layers with a dense SwiGLU MLP, the DeltaNet's
//! projections stored apart (`in_proj_qkv` `[q | k | v]`, `in_proj_z`, `in_proj_b`,
//! `in_proj_a`). Its rotary is Qwen3-VL's interleaved M-RoPE, which over text (every position
//! row equal) is the plain partial rotary; `mrope_section` / `mrope_interleaved` change nothing
//! there.

use super::qwen3_next::{QWEN3_NEXT_LAYOUT, QWEN3_NEXT_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["Qwen3_5ForCausalLM"],
    model_types: &["qwen3_5_text"],
    config: ConfigSchema {
        defaults: Defaults {
            vocab_size: Some(248_320),
            hidden_size: Some(4096),
            intermediate_size: Some(12288),
            num_hidden_layers: Some(32),
            num_key_value_heads: Some(4),
            ..QWEN3_NEXT_SCHEMA.defaults
        },
        ssm: Some(SsmRule {
            mixer: SsmMixer::GatedDeltaNet(DeltaNetProjections::Separate),
            layers: SsmLayers::Interval { kind: "linear_attention", interval: ("full_attention_interval", 4) },
        }),
        ..QWEN3_NEXT_SCHEMA
    },
    layout: QWEN3_NEXT_LAYOUT,
};

/// The text model of a Qwen3.5 image-text checkpoint (`Qwen3_5ForConditionalGeneration`, what
/// the Hub's Qwen3.5 models are): read from `text_config`, stored under `model.language_model.`
/// beside the vision tower (`model.visual.`) and the multi-token-prediction head (`mtp.`), which
/// are not built.
pub const CONDITIONAL_GENERATION: Architecture = Architecture {
    classes: &["Qwen3_5ForConditionalGeneration"],
    model_types: &["qwen3_5"],
    config: ConfigSchema { text_config: true, ..FAMILY.config },
    layout: Layout { roots: &["model.language_model."], ..QWEN3_NEXT_LAYOUT },
};
