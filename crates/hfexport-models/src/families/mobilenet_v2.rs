//! `MobileNetV2Model` / `MobileNetV2ForImageClassification`: a convolutional backbone
//! ([`ConvNetKind::MobileNetV2`], built by `crate::convnet`), read like ResNet's family. Its
//! `hidden_act` (class default `relu6`, which the IR's activations do not name) is read with
//! the backbone's keys, so the schema reads none.

use super::resnet;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["MobileNetV2Model", "MobileNetV2ForImageClassification"],
    model_types: &["mobilenet_v2"],
    config: ConfigSchema {
        keys: Keys { activation: &[], ..resnet::FAMILY.config.keys },
        convnet: Some(ConvNetKind::MobileNetV2),
        ..resnet::FAMILY.config
    },
    layout: Layout {
        roots: &["mobilenet_v2.", ""],
        embed: "conv_stem.first_conv.convolution",
        encoder: Some(EncoderLayout { input: EncoderInput::ConvNet { classifier: "classifier" }, ..resnet::ENCODER }),
        ..resnet::FAMILY.layout
    },
};
