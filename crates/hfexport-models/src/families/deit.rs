//! `DeiTModel`, `DeiTForImageClassification` and `DeiTForImageClassificationWithTeacher`: ViT
//! with a learned distillation token after the class token (`EncoderInput::Patches`'s
//! `distillation`); the teacher class averages its two classifiers
//! (`ClassifierHead::Distilled`).

use super::vit::{VIT_ENCODER, VIT_LAYOUT, VIT_SCHEMA};
use super::Architecture;
use crate::layout::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["DeiTModel", "DeiTForImageClassification"],
    model_types: &["deit"],
    config: VIT_SCHEMA,
    layout: Layout { roots: &["deit.", ""], encoder: Some(DEIT_ENCODER), ..VIT_LAYOUT },
};

pub const WITH_TEACHER: Architecture = Architecture {
    classes: &["DeiTForImageClassificationWithTeacher"],
    layout: Layout {
        encoder: Some(EncoderLayout {
            classifier: ClassifierHead::Distilled { cls: "cls_classifier", distillation: "distillation_classifier" },
            ..DEIT_ENCODER
        }),
        ..FAMILY.layout
    },
    ..FAMILY
};

const DEIT_ENCODER: EncoderLayout = EncoderLayout {
    input: EncoderInput::Patches {
        cls: "embeddings.cls_token",
        distillation: Some("embeddings.distillation_token"),
        positions: "embeddings.position_embeddings",
        patch_bias: true,
        flat: false,
    },
    ..VIT_ENCODER
};
