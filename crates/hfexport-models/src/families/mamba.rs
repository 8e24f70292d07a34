//! `MambaForCausalLM` (`MambaConfig`): every layer is a pre-norm (RMS) Mamba mixer with no MLP
//! (`backbone.layers.<i>.mixer`, [`crate::config::Mixer::Mamba`]), the embeddings at
//! `backbone.embeddings`, `norm_f`, and a head tied to the embeddings unless stored. The
//! config has no attention keys: the schema's heads and positions are placeholders no layer
//! reads.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// The longest prompt plus generation a Mamba graph's `sequence` admits: the state does not
/// grow, so this bounds only the symbol's range.
const MAMBA_MAX_POSITIONS: usize = 1 << 20;

pub const FAMILY: Architecture = Architecture {
    classes: &["MambaForCausalLM"],
    model_types: &["mamba"],
    config: ConfigSchema {
        keys: Keys {
            // keys `MambaConfig` does not have: their defaults always apply
            intermediate_size: "",
            num_attention_heads: "",
            max_position_embeddings: "",
            head_dim: "",
            norm_eps: "layer_norm_epsilon",
            ..KEYS
        },
        defaults: Defaults {
            vocab_size: Some(50280),
            hidden_size: Some(768),
            intermediate_size: Some(0),
            num_hidden_layers: Some(32),
            num_attention_heads: Some(1),
            max_position_embeddings: Some(MAMBA_MAX_POSITIONS),
            norm_eps: 1e-5,
            activation: "silu",
            tie_word_embeddings: true,
            bos_token_id: Some(0),
            eos_token_id: Some(0),
            pad_token_id: Some(0),
            ..NO_DEFAULTS
        },
        biases: NO_BIASES,
        rope: RopeRule::None,
        ssm: Some(SsmRule { mixer: SsmMixer::Mamba, layers: SsmLayers::Every }),
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        roots: &["backbone."],
        embed: "embeddings",
        final_norm: "norm_f",
        norms: LayerNorms { pre_attention: Some("norm"), ..NO_NORMS },
        ssm: Some("mixer"),
        ..LLAMA_LAYOUT
    },
};
