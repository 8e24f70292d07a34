//! `BeitModel` / `BeitForImageClassification`, and `Data2VecVisionForImageClassification` (the
//! same graph under `data2vec_vision.`; the bare `Data2VecVisionModel` has no pooler by default,
//! which its checkpoint does not say, so it is not claimed): ViT's
//! patches and pre-LN layers without a key bias, each layer's outputs scaled by `lambda_1` /
//! `lambda_2` (where `layer_scale_init_value` is positive), a relative position bias per layer
//! and/or shared by every layer (`crate::patch_bias`), learned absolute positions only where
//! `use_absolute_position_embeddings`, and `pooler_output` the normed mean of the patch tokens
//! (`use_mean_pooling`) or the class token after the final norm.

use super::vit::{VIT_ENCODER, VIT_LAYOUT, VIT_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `BeitConfig`: ViT's keys, 224-pixel images of 16-pixel patches, and its switches.
pub const BEIT_SCHEMA: ConfigSchema = ConfigSchema {
    encoder: match VIT_SCHEMA.encoder {
        Some(e) => Some(EncoderSchema {
            image: Some(ImageDefaults { image_size: 224, patch_size: 16, num_channels: 3 }),
            beit: true,
            ..e
        }),
        None => panic!("ViT's schema has an encoder"),
    },
    biases: Biases { qkv: Flag::Always, ..VIT_SCHEMA.biases },
    ..VIT_SCHEMA
};

pub const BEIT_LAYOUT: Layout = Layout {
    roots: &["beit.", ""],
    final_norm: "layernorm",
    attention: AttentionLayout { unbiased_key: true, ..VIT_LAYOUT.attention },
    layer_scales: Some(["lambda_1", "lambda_2"]),
    encoder: Some(EncoderLayout {
        pooler: Some(Pooler::PatchMeanIf { norm: "pooler.layernorm" }),
        classifier: ClassifierHead::Pooled { out: "classifier" },
        relative_tables: Some(RelativeTables {
            per_layer: "attention.relative_position_bias.relative_position_bias_table",
            shared: "encoder.relative_position_bias.relative_position_bias_table",
        }),
        ..VIT_ENCODER
    }),
    ..VIT_LAYOUT
};

pub const FAMILY: Architecture = Architecture {
    classes: &["BeitModel", "BeitForImageClassification"],
    model_types: &["beit"],
    config: BEIT_SCHEMA,
    layout: BEIT_LAYOUT,
};

pub const DATA2VEC_VISION: Architecture = Architecture {
    classes: &["Data2VecVisionForImageClassification"],
    model_types: &["data2vec-vision"],
    config: BEIT_SCHEMA,
    layout: Layout { roots: &["data2vec_vision.", ""], ..BEIT_LAYOUT },
};
