//! `Mamba2ForCausalLM` (`Mamba2Config`): Mamba's layout (pre-norm RMS mixers with no MLP under
//! `backbone.`) with Mamba2's mixer ([`crate::config::Mixer::Mamba2`]: one `in_proj` for the
//! gate, the convolved input, B, C and the step sizes; `dt_bias`, per-head `A_log` and `D`; the
//! gated group norm `norm`), and an untied head by default.

use super::mamba::FAMILY as MAMBA;
use super::Architecture;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["Mamba2ForCausalLM"],
    model_types: &["mamba2"],
    config: ConfigSchema {
        defaults: Defaults {
            vocab_size: Some(32768),
            hidden_size: Some(4096),
            num_hidden_layers: Some(64),
            tie_word_embeddings: false,
            bos_token_id: Some(0),
            eos_token_id: Some(2),
            pad_token_id: Some(1),
            ..MAMBA.config.defaults
        },
        ssm: Some(SsmRule { mixer: SsmMixer::Mamba2(&MAMBA2_KEYS), layers: SsmLayers::Every }),
        ..MAMBA.config
    },
    layout: MAMBA.layout,
};
