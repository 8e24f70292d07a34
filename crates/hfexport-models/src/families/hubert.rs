//! `HubertModel`, `HubertForCTC`, `HubertForSequenceClassification`: wav2vec2's graph under
//! `hubert.`, the norm before the feature projection optional (`feat_proj_layer_norm`, read
//! by the audio keys for both families).

use super::wav2vec2::{WAV2VEC2_LAYOUT, WAV2VEC2_SCHEMA};
use super::Architecture;
use crate::layout::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["HubertModel", "HubertForCTC", "HubertForSequenceClassification"],
    model_types: &["hubert"],
    config: WAV2VEC2_SCHEMA,
    layout: Layout { roots: &["hubert.", ""], ..WAV2VEC2_LAYOUT },
};
