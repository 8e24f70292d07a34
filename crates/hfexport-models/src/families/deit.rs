//! `DeiTModel`, `DeiTForImageClassification` and `DeiTForImageClassificationWithTeacher`: ViT
//! with a learned distillation token after the class token (`EncoderInput::Patches`'s
//! `distillation`); the teacher class's checkpoint stores two classifiers, whose logits it
//! averages (`ClassifierHead::Distillable`).

use super::vit::{VIT_ENCODER, VIT_LAYOUT, VIT_SCHEMA};
use super::Architecture;
use crate::layout::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["DeiTModel", "DeiTForImageClassification", "DeiTForImageClassificationWithTeacher"],
    model_types: &["deit"],
    config: VIT_SCHEMA,
    layout: Layout {
        roots: &["deit.", ""],
        encoder: Some(EncoderLayout {
            input: EncoderInput::Patches {
                cls: Some("embeddings.cls_token"),
                distillation: Some("embeddings.distillation_token"),
                positions: "embeddings.position_embeddings",
                patch_bias: true,
                flat: false,
            },
            classifier: ClassifierHead::Distillable {
                out: "classifier",
                cls: "cls_classifier",
                distillation: "distillation_classifier",
            },
            ..VIT_ENCODER
        }),
        ..VIT_LAYOUT
    },
};
