//! `ResNetModel` / `ResNetForImageClassification`: a convolutional backbone
//! ([`ConvNetKind::ResNet`], built by `crate::convnet`), no transformer layer. The config has
//! none of the text keys: the schema's sizes and heads are placeholders nothing reads.

use super::vit::{VIT_ENCODER, VIT_LAYOUT, VIT_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["ResNetModel", "ResNetForImageClassification"],
    model_types: &["resnet"],
    config: ConfigSchema {
        keys: Keys {
            // keys `ResNetConfig` does not have: their defaults always apply
            hidden_size: "",
            intermediate_size: "",
            num_hidden_layers: "",
            num_attention_heads: "",
            max_position_embeddings: "",
            head_dim: "",
            ..VIT_SCHEMA.keys
        },
        defaults: Defaults {
            hidden_size: Some(1),
            intermediate_size: Some(1),
            num_hidden_layers: Some(1),
            num_attention_heads: Some(1),
            activation: "relu",
            ..VIT_SCHEMA.defaults
        },
        encoder: Some(EncoderSchema { image: None, ..VIT_ENCODER_SCHEMA }),
        convnet: Some(ConvNetKind::ResNet),
        ..VIT_SCHEMA
    },
    layout: Layout {
        roots: &["resnet.", ""],
        embed: "embedder.embedder.convolution",
        final_norm: "",
        encoder: Some(EncoderLayout { input: EncoderInput::ConvNet { classifier: "classifier.1" }, ..VIT_ENCODER }),
        ..VIT_LAYOUT
    },
};

/// The encoder layout the convolutional families share (their classifier's name aside).
pub const ENCODER: EncoderLayout = match FAMILY.layout.encoder {
    Some(e) => e,
    None => panic!("ResNet's layout has an encoder"),
};

const VIT_ENCODER_SCHEMA: EncoderSchema = match VIT_SCHEMA.encoder {
    Some(e) => e,
    None => panic!("VIT_SCHEMA has an encoder"),
};
