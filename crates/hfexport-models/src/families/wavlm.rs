//! `WavLMModel`, `WavLMForCTC`, `WavLMForSequenceClassification`: wav2vec2's graph under
//! `wavlm.`, the layers' attention biased by relative position: a bidirectional bucketed table
//! (layer 0's `rel_attn_embed`, which every layer reuses) scaled per layer, head and query by a
//! gate computed from the attention's input (`gru_rel_pos_linear`, `gru_rel_pos_const`).

use super::wav2vec2::{AUDIO, WAV2VEC2_LAYOUT, WAV2VEC2_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const WAVLM_AUDIO: AudioLayout = AudioLayout {
    gated_bias: Some(GatedBiasLayout {
        table: "encoder.layers.0.attention.rel_attn_embed",
        linear: "gru_rel_pos_linear",
        constant: "gru_rel_pos_const",
    }),
    ..AUDIO
};

pub const FAMILY: Architecture = Architecture {
    classes: &["WavLMModel", "WavLMForCTC", "WavLMForSequenceClassification"],
    model_types: &["wavlm"],
    config: ConfigSchema {
        encoder: match WAV2VEC2_SCHEMA.encoder {
            Some(e) => Some(EncoderSchema { audio: Some(AudioKind::WavLm), ..e }),
            None => panic!("wav2vec2's schema has an encoder"),
        },
        ..WAV2VEC2_SCHEMA
    },
    layout: Layout {
        roots: &["wavlm.", ""],
        encoder: match WAV2VEC2_LAYOUT.encoder {
            Some(e) => Some(EncoderLayout { input: EncoderInput::Audio(&WAVLM_AUDIO), ..e }),
            None => panic!("wav2vec2's layout has an encoder"),
        },
        ..WAV2VEC2_LAYOUT
    },
};
