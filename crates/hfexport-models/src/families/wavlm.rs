//! `WavLMModel`, `WavLMForCTC`, `WavLMForSequenceClassification`: wav2vec2's graph under
//! `wavlm.`, the layers' attention biased by relative position: a bidirectional bucketed table
//! (layer 0's `rel_attn_embed`, which every layer reuses) scaled per layer, head and query by a
//! gate computed from the attention's input (`gru_rel_pos_linear`, `gru_rel_pos_const`).

use super::wav2vec2::{audio_layout, audio_schema, AUDIO};
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
    config: audio_schema(AudioKind::WavLm),
    layout: audio_layout(&["wavlm.", ""], &WAVLM_AUDIO),
};
