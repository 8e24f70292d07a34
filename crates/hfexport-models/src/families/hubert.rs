//! `HubertModel`, `HubertForCTC`, `HubertForSequenceClassification`: wav2vec2's graph under
//! `hubert.`, the norm before the feature projection optional (`feat_proj_layer_norm`, read
//! by the audio keys for both families).

use super::wav2vec2::{audio_layout, AUDIO, WAV2VEC2_SCHEMA};
use super::Architecture;

pub const FAMILY: Architecture = Architecture {
    classes: &["HubertModel", "HubertForCTC", "HubertForSequenceClassification"],
    model_types: &["hubert"],
    config: WAV2VEC2_SCHEMA,
    layout: audio_layout(&["hubert.", ""], &AUDIO),
};
