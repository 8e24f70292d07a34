//! `Wav2Vec2Model`, `Wav2Vec2ForCTC`, `Wav2Vec2ForSequenceClassification`: raw audio through a
//! convolutional feature encoder and a weight-normed positional convolution
//! (`crate::audio`), then BERT-like layers: post-norm, or pre-norm with the encoder's norm
//! after them when `do_stable_layer_norm` (the large "lv60" checkpoints).

use super::bert::{BERT_ENCODER, BERT_ENCODER_SCHEMA, BERT_LAYOUT, BERT_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `Wav2Vec2Config`: the layers' keys are BERT's; `layer_norm_eps` 1e-5, 32 CTC labels; the
/// feature encoder's keys are the schema's `audio`.
pub const WAV2VEC2_SCHEMA: ConfigSchema = ConfigSchema {
    defaults: Defaults {
        vocab_size: Some(32),
        max_position_embeddings: Some(0),
        norm_eps: 1e-5,
        tie_word_embeddings: false,
        ..BERT_SCHEMA.defaults
    },
    pre_norms: Flag::KeyDefault("do_stable_layer_norm", false),
    encoder: Some(EncoderSchema { type_vocab_size: None, audio: Some(AudioKind::Wav2Vec2), ..BERT_ENCODER_SCHEMA }),
    ..BERT_SCHEMA
};

/// The front's names under the root (`wav2vec2.`, HuBERT's `hubert.`).
pub const AUDIO: AudioLayout = AudioLayout {
    conv_layers: "feature_extractor.conv_layers",
    projection: "feature_projection",
    pos_conv: "encoder.pos_conv_embed.conv",
    encoder_norm: "encoder.layer_norm",
    ctc_head: "lm_head",
    gated_bias: None,
};

pub const WAV2VEC2_LAYOUT: Layout = Layout {
    roots: &["wav2vec2.", ""],
    // what finds the root: the projection every checkpoint stores
    embed: "feature_projection.projection",
    position_embed: None,
    layers: "encoder.layers",
    final_norm: "encoder.layer_norm",
    norms: LayerNorms { pre_attention: Some("layer_norm"), pre_mlp: Some("final_layer_norm"), ..NO_NORMS },
    attention: AttentionLayout {
        prefix: "attention",
        qkv: Projections::Separate { q: "q_proj", k: "k_proj", v: "v_proj" },
        out: "out_proj",
        ..BERT_LAYOUT.attention
    },
    mlp: MlpLayout { prefix: "feed_forward", kind: MlpKind::Plain("intermediate_dense"), down: "output_dense" },
    encoder: Some(EncoderLayout {
        input: EncoderInput::Audio(&AUDIO),
        token_type_embed: None,
        embed_norm: None,
        pooler: None,
        classifier: ClassifierHead::MeanProjected { projector: "projector", out: "classifier" },
        ..BERT_ENCODER
    }),
    ..BERT_LAYOUT
};

/// The schema of a raw-audio family whose keys are wav2vec2's but for what `kind` reads.
pub const fn audio_schema(kind: AudioKind) -> ConfigSchema {
    match WAV2VEC2_SCHEMA.encoder {
        Some(e) => ConfigSchema { encoder: Some(EncoderSchema { audio: Some(kind), ..e }), ..WAV2VEC2_SCHEMA },
        None => panic!("wav2vec2's schema has an encoder"),
    }
}

/// The layout of a raw-audio family whose names are wav2vec2's under `roots`, its front's `audio`.
pub const fn audio_layout(roots: &'static [&'static str], audio: &'static AudioLayout) -> Layout {
    match WAV2VEC2_LAYOUT.encoder {
        Some(e) => {
            Layout { roots, encoder: Some(EncoderLayout { input: EncoderInput::Audio(audio), ..e }), ..WAV2VEC2_LAYOUT }
        }
        None => panic!("wav2vec2's layout has an encoder"),
    }
}

pub const FAMILY: Architecture = Architecture {
    classes: &["Wav2Vec2Model", "Wav2Vec2ForCTC", "Wav2Vec2ForSequenceClassification"],
    model_types: &["wav2vec2"],
    config: WAV2VEC2_SCHEMA,
    layout: WAV2VEC2_LAYOUT,
};
