//! `GlmForCausalLM` (GLM-4-9B-chat's `glm` files) and `Glm4ForCausalLM` (GLM-4-0414): Llama's
//! blocks with a fused `gate_up_proj`, q/k/v biases (`attention_bias`, on by default), an
//! unbiased `o_proj`, and rotate-every-two rotary over half of each head
//! (`partial_rotary_factor`, 0.5 when absent). GLM-4 adds a norm after the attention and after
//! the MLP (`post_self_attn_layernorm`, `post_mlp_layernorm`).

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

const GLM_SCHEMA: ConfigSchema = ConfigSchema {
    defaults: Defaults {
        vocab_size: Some(151552),
        hidden_size: Some(4096),
        intermediate_size: Some(13696),
        num_hidden_layers: Some(40),
        num_attention_heads: Some(32),
        num_key_value_heads: Some(2),
        head_dim: Some(128),
        max_position_embeddings: Some(131072),
        norm_eps: 1.5625e-7,
        pad_token_id: Some(151329),
        ..NO_DEFAULTS
    },
    biases: Biases {
        qkv: Flag::KeyDefault("attention_bias", true),
        o: Flag::Never,
        mlp: Flag::Never,
        norm: Flag::Never,
        head: Flag::Never,
    },
    partial_rotary: Some(0.5),
    ..LLAMA_SCHEMA
};

const GLM_LAYOUT: Layout = Layout {
    interleaved_rotary: true,
    mlp: MlpLayout { kind: MlpKind::GatedFused("gate_up_proj"), ..LLAMA_LAYOUT.mlp },
    ..LLAMA_LAYOUT
};

pub const GLM: Architecture =
    Architecture { classes: &["GlmForCausalLM"], model_types: &["glm"], config: GLM_SCHEMA, layout: GLM_LAYOUT };

pub const GLM4: Architecture = Architecture {
    classes: &["Glm4ForCausalLM"],
    model_types: &["glm4"],
    config: GLM_SCHEMA,
    layout: Layout {
        norms: LayerNorms {
            post_attention: Some("post_self_attn_layernorm"),
            post_mlp: Some("post_mlp_layernorm"),
            ..PRE_NORMS
        },
        ..GLM_LAYOUT
    },
};
