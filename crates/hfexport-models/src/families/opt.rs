//! `OPTForCausalLM` (OPT 125m-66b, Galactica): learned positions counted over the attention
//! mask (left padding does not shift them) and offset by 2 in their table, q/k/v/out and
//! `fc1`/`fc2` linears with `enable_bias`, ReLU by default, LayerNorms before each sublayer or
//! (`do_layer_norm_before` false, OPT-350m) after each residual add with no final norm,
//! `project_in`/`project_out` where `word_embed_proj_dim` differs from the hidden size, and
//! LayerNorms without weights when `layer_norm_elementwise_affine` is false. The legacy
//! `_remove_final_layer_norm` is refused.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["OPTForCausalLM"],
    model_types: &["opt"],
    config: ConfigSchema {
        keys: Keys { intermediate_size: "ffn_dim", norm_eps: "", activation: &["activation_function"], ..KEYS },
        defaults: Defaults {
            vocab_size: Some(50272),
            hidden_size: Some(768),
            intermediate_size: Some(3072),
            num_hidden_layers: Some(12),
            num_attention_heads: Some(12),
            max_position_embeddings: Some(2048),
            norm_eps: 1e-5,
            activation: "relu",
            tie_word_embeddings: true,
            bos_token_id: Some(2),
            eos_token_id: Some(2),
            pad_token_id: Some(1),
            ..NO_DEFAULTS
        },
        biases: Biases {
            qkv: Flag::KeyDefault("enable_bias", true),
            o: Flag::KeyDefault("enable_bias", true),
            mlp: Flag::KeyDefault("enable_bias", true),
            norm: Flag::Always,
            head: Flag::Never,
        },
        rope: RopeRule::None,
        pre_norms: Flag::KeyDefault("do_layer_norm_before", true),
        norm_affine: Flag::KeyDefault("layer_norm_elementwise_affine", true),
        embed_dim: Some("word_embed_proj_dim"),
        refused: &["_remove_final_layer_norm"],
        heads_divide_hidden: true,
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        roots: &["model.decoder.", "decoder."],
        heads: &["lm_head"],
        embed: "embed_tokens",
        position_embed: Some("embed_positions"),
        position_offset: 2,
        positions_from_mask: true,
        embed_projections: Some(["project_in", "project_out"]),
        final_norm: "final_layer_norm",
        norm: NormKind::Layer,
        norms: LayerNorms {
            pre_attention: Some("self_attn_layer_norm"),
            pre_mlp: Some("final_layer_norm"),
            ..NO_NORMS
        },
        attention: AttentionLayout { out: "out_proj", ..LLAMA_LAYOUT.attention },
        mlp: MlpLayout { prefix: "", kind: MlpKind::Plain("fc1"), down: "fc2" },
        ..LLAMA_LAYOUT
    },
};
