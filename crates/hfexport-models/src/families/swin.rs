//! `SwinModel` / `SwinForImageClassification`: a hierarchical transformer over shifted windows
//! ([`ConvNetKind::Swin`], built by `crate::swin` at one image size like the convolutional
//! backbones), read like ResNet's family. Its widths and head counts are per stage (`embed_dim`,
//! `num_heads` as a list), read with the backbone's keys, so the schema's sizes and heads are
//! placeholders nothing reads; `hidden_act` and `layer_norm_eps` are the schema's. `Swinv2Model` /
//! `Swinv2ForImageClassification` are its V2 ([`crate::config::SwinVersion`]) under `swinv2.`.

use super::resnet;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["SwinModel", "SwinForImageClassification"],
    model_types: &["swin"],
    config: ConfigSchema {
        defaults: Defaults { activation: "gelu", norm_eps: 1e-5, ..resnet::FAMILY.config.defaults },
        convnet: Some(ConvNetKind::Swin { v2: false }),
        ..resnet::FAMILY.config
    },
    layout: Layout {
        roots: &["swin.", ""],
        embed: "embeddings.patch_embeddings.projection",
        encoder: Some(EncoderLayout { input: EncoderInput::ConvNet { classifier: "classifier" }, ..resnet::ENCODER }),
        ..resnet::FAMILY.layout
    },
};

pub const SWINV2: Architecture = Architecture {
    classes: &["Swinv2Model", "Swinv2ForImageClassification"],
    model_types: &["swinv2"],
    config: ConfigSchema { convnet: Some(ConvNetKind::Swin { v2: true }), ..FAMILY.config },
    layout: Layout { roots: &["swinv2.", ""], ..FAMILY.layout },
};
