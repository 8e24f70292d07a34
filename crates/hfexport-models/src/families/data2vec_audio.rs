//! `Data2VecAudioModel`, `Data2VecAudioForCTC`, `Data2VecAudioForSequenceClassification`:
//! wav2vec2's graph under `data2vec_audio.`, its feature convolutions always layer-normed and
//! its positional embedding a stack of `num_conv_pos_embeddings` plain grouped convolutions of
//! `conv_pos_kernel_size` (`encoder.pos_conv_embed.layers.<i>.conv`), each normed over the
//! channels without weights (`crate::audio`); post-norm layers.

use super::wav2vec2::{AUDIO, WAV2VEC2_LAYOUT, WAV2VEC2_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const DATA2VEC_AUDIO: AudioLayout = AudioLayout { pos_conv: "encoder.pos_conv_embed", ..AUDIO };

pub const FAMILY: Architecture = Architecture {
    classes: &["Data2VecAudioModel", "Data2VecAudioForCTC", "Data2VecAudioForSequenceClassification"],
    model_types: &["data2vec-audio"],
    config: ConfigSchema {
        encoder: match WAV2VEC2_SCHEMA.encoder {
            Some(e) => Some(EncoderSchema { audio: Some(AudioKind::Data2Vec), ..e }),
            None => panic!("wav2vec2's schema has an encoder"),
        },
        ..WAV2VEC2_SCHEMA
    },
    layout: Layout {
        roots: &["data2vec_audio.", ""],
        encoder: match WAV2VEC2_LAYOUT.encoder {
            Some(e) => Some(EncoderLayout { input: EncoderInput::Audio(&DATA2VEC_AUDIO), ..e }),
            None => panic!("wav2vec2's layout has an encoder"),
        },
        ..WAV2VEC2_LAYOUT
    },
};
