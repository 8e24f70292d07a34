//! `Data2VecAudioModel`, `Data2VecAudioForCTC`, `Data2VecAudioForSequenceClassification`:
//! wav2vec2's graph under `data2vec_audio.`, its feature convolutions always layer-normed and
//! its positional embedding a stack of `num_conv_pos_embeddings` plain grouped convolutions of
//! `conv_pos_kernel_size` (`encoder.pos_conv_embed.layers.<i>.conv`), each normed over the
//! channels without weights (`crate::audio`); post-norm layers.

use super::wav2vec2::{audio_layout, audio_schema, AUDIO};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const DATA2VEC_AUDIO: AudioLayout = AudioLayout { pos_conv: "encoder.pos_conv_embed", ..AUDIO };

pub const FAMILY: Architecture = Architecture {
    classes: &["Data2VecAudioModel", "Data2VecAudioForCTC", "Data2VecAudioForSequenceClassification"],
    model_types: &["data2vec-audio"],
    config: audio_schema(AudioKind::Data2Vec),
    layout: audio_layout(&["data2vec_audio.", ""], &DATA2VEC_AUDIO),
};
