//! `CLIPVisionConfig`: the CLIP vision tower LLaVA reads from `vision_config` (no class of its own).

use super::bert::{BERT_ENCODER_SCHEMA, BERT_SCHEMA};
use super::vit::{VIT_ENCODER, VIT_LAYOUT};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `CLIPVisionConfig`: the vision tower of LLaVA (`vision_config`), pre-LN layers with biases,
/// `quick_gelu`, patches in; read through the vision-language entry, never as a class
/// of its own.
pub const CLIP_VISION: Architecture = Architecture {
    classes: &[],
    model_types: &["clip_vision_model"],
    config: ConfigSchema {
        keys: Keys { norm_eps: "layer_norm_eps", ..KEYS },
        defaults: Defaults {
            vocab_size: Some(0),
            hidden_size: Some(768),
            intermediate_size: Some(3072),
            num_hidden_layers: Some(12),
            num_attention_heads: Some(12),
            max_position_embeddings: Some(0),
            norm_eps: 1e-5,
            activation: "quick_gelu",
            ..NO_DEFAULTS
        },
        encoder: Some(EncoderSchema {
            type_vocab_size: None,
            image: Some(ImageDefaults { image_size: 224, patch_size: 32, num_channels: 3 }),
            ..BERT_ENCODER_SCHEMA
        }),
        ..BERT_SCHEMA
    },
    layout: CLIP_VISION_LAYOUT,
};

pub const CLIP_VISION_LAYOUT: Layout = Layout {
    roots: &["vision_tower.", "vision_tower.vision_model.", "model.vision_tower.vision_model.", "model.vision_tower."],
    embed: "embeddings.patch_embedding",
    position_embed: None,
    embed_norm: None,
    position_offset: 0,
    positions_from_mask: false,
    embed_projections: None,
    layers: "encoder.layers",
    final_norm: "",
    norms: LayerNorms { pre_attention: Some("layer_norm1"), pre_mlp: Some("layer_norm2"), ..NO_NORMS },
    attention: AttentionLayout {
        prefix: "self_attn",
        qkv: Projections::Separate { q: "q_proj", k: "k_proj", v: "v_proj" },
        out: "out_proj",
        qk_norm: QkNorm::None,
        unbiased_key: false,
        sinks: None,
        output_gate: false,
        v_norm: false,
    },
    mlp: MlpLayout { prefix: "mlp", kind: MlpKind::Plain("fc1"), down: "fc2" },
    encoder: Some(EncoderLayout {
        input: EncoderInput::Patches {
            distillation: None,
            cls: "embeddings.class_embedding",
            positions: "embeddings.position_embedding.weight",
            patch_bias: false,
            flat: true,
        },
        embed_norm: Some("pre_layrnorm"),
        pooler: None,
        ..VIT_ENCODER
    }),
    ..VIT_LAYOUT
};
