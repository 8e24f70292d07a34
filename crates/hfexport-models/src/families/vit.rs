//! `ViTModel` / `ViTForImageClassification`: pre-LN encoder over image patches.

use super::bert::{BERT_ENCODER, BERT_ENCODER_SCHEMA, BERT_LAYOUT, BERT_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `ViTConfig`: pre-LN layers with biases (`qkv_bias`), a final LayerNorm, patches in.
pub const VIT_SCHEMA: ConfigSchema = ConfigSchema {
    biases: Biases {
        qkv: Flag::KeyDefault("qkv_bias", true),
        o: Flag::Always,
        mlp: Flag::Always,
        norm: Flag::Always,
        head: Flag::Never,
    },
    defaults: Defaults { vocab_size: Some(0), max_position_embeddings: Some(0), ..BERT_SCHEMA.defaults },
    encoder: Some(EncoderSchema {
        type_vocab_size: None,
        image: Some(ImageDefaults { image_size: 224, patch_size: 16, num_channels: 3 }),
        ..BERT_ENCODER_SCHEMA
    }),
    ..BERT_SCHEMA
};

pub const VIT_LAYOUT: Layout = Layout {
    roots: &["vit.", ""],
    embed: "embeddings.patch_embeddings.projection",
    position_embed: None,
    embed_norm: None,
    position_offset: 0,
    positions_from_mask: false,
    embed_projections: None,
    final_norm: "layernorm",
    norms: LayerNorms { pre_attention: Some("layernorm_before"), pre_mlp: Some("layernorm_after"), ..NO_NORMS },
    attention: AttentionLayout {
        prefix: "attention",
        qkv: Projections::Separate { q: "attention.query", k: "attention.key", v: "attention.value" },
        out: "output.dense",
        qk_norm: QkNorm::None,
        unbiased_key: false,
        sinks: None,
        output_gate: false,
        v_norm: false,
    },
    encoder: Some(EncoderLayout {
        input: EncoderInput::Patches {
            distillation: None,
            cls: Some("embeddings.cls_token"),
            positions: "embeddings.position_embeddings",
            patch_bias: true,
            flat: false,
        },
        token_type_embed: None,
        embed_norm: None,
        classifier: ClassifierHead::FirstToken { out: "classifier" },
        ..BERT_ENCODER
    }),
    ..BERT_LAYOUT
};

pub const VIT_ENCODER: EncoderLayout = match VIT_LAYOUT.encoder {
    Some(e) => e,
    None => panic!("VIT_LAYOUT has an encoder"),
};

pub const FAMILY: Architecture = Architecture {
    classes: &["ViTModel", "ViTForImageClassification"],
    model_types: &["vit"],
    config: VIT_SCHEMA,
    layout: VIT_LAYOUT,
};
