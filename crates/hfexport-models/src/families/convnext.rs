//! `ConvNextModel` / `ConvNextForImageClassification` and their V2 (`ConvNextV2*`, global
//! response normalisation in place of the layer scale): convolutional backbones
//! ([`ConvNetKind::ConvNext`], built by `crate::convnet`), read like ResNet's family.

use super::resnet;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const CONVNEXT: Architecture = Architecture {
    classes: &["ConvNextModel", "ConvNextForImageClassification"],
    model_types: &["convnext"],
    config: ConfigSchema {
        defaults: Defaults { activation: "gelu", norm_eps: 1e-12, ..resnet::FAMILY.config.defaults },
        convnet: Some(ConvNetKind::ConvNext { v2: false }),
        ..resnet::FAMILY.config
    },
    layout: Layout {
        roots: &["convnext.", ""],
        embed: "embeddings.patch_embeddings",
        encoder: Some(EncoderLayout { input: EncoderInput::ConvNet { classifier: "classifier" }, ..resnet::ENCODER }),
        ..resnet::FAMILY.layout
    },
};

pub const CONVNEXT_V2: Architecture = Architecture {
    classes: &["ConvNextV2Model", "ConvNextV2ForImageClassification"],
    model_types: &["convnextv2"],
    config: ConfigSchema { convnet: Some(ConvNetKind::ConvNext { v2: true }), ..CONVNEXT.config },
    layout: Layout { roots: &["convnextv2.", ""], ..CONVNEXT.layout },
};
