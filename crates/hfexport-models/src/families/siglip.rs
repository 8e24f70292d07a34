//! SigLIP: `SiglipModel`, an image-text dual encoder (`crate::dual`) like CLIP but for what
//! `modular_siglip.py` changes: a bidirectional text tower pooled at its last position through
//! its own `head`, an image tower without class token or pre-norm whose final states are normed
//! and pooled by attention (a learned probe), and a `logit_bias` beside the scale.

use super::clip::{CLIP_TEXT_LAYOUT, CLIP_TEXT_SCHEMA, CLIP_VISION, CLIP_VISION_LAYOUT};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `SiglipTextConfig`: CLIP's text keys with SigLIP's defaults (tanh GELU, eps 1e-6, 64 positions).
pub const SIGLIP_TEXT_SCHEMA: ConfigSchema = ConfigSchema {
    defaults: Defaults {
        vocab_size: Some(32000),
        hidden_size: Some(768),
        intermediate_size: Some(3072),
        num_hidden_layers: Some(12),
        num_attention_heads: Some(12),
        max_position_embeddings: Some(64),
        norm_eps: 1e-6,
        activation: "gelu_pytorch_tanh",
        ..CLIP_TEXT_SCHEMA.defaults
    },
    ..CLIP_TEXT_SCHEMA
};

/// SigLIP's text tower: CLIP's, attending both ways over the unpadded tokens, pooled at the
/// last position (padding or not, as transformers does) through `head`.
pub const SIGLIP_TEXT_LAYOUT: Layout = Layout {
    encoder: Some(EncoderLayout {
        pooler: Some(Pooler::LastToken { head: "head" }),
        causal: false,
        ..match CLIP_TEXT_LAYOUT.encoder {
            Some(e) => e,
            None => panic!("CLIP_TEXT_LAYOUT has an encoder"),
        }
    }),
    dual: Some(&SIGLIP_DUAL),
    ..CLIP_TEXT_LAYOUT
};

/// `SiglipVisionConfig`: CLIP's vision keys with SigLIP's defaults (16x16 patches, tanh GELU).
pub const SIGLIP_VISION: Architecture = Architecture {
    model_types: &["siglip_vision_model"],
    config: ConfigSchema {
        defaults: Defaults {
            intermediate_size: Some(3072),
            norm_eps: 1e-6,
            activation: "gelu_pytorch_tanh",
            ..CLIP_VISION.config.defaults
        },
        encoder: Some(EncoderSchema {
            image: Some(ImageDefaults { image_size: 224, patch_size: 16, num_channels: 3 }),
            ..match CLIP_VISION.config.encoder {
                Some(e) => e,
                None => panic!("CLIP_VISION has an encoder schema"),
            }
        }),
        ..CLIP_VISION.config
    },
    layout: Layout {
        roots: &["vision_model."],
        final_norm: "post_layernorm",
        encoder: Some(EncoderLayout {
            input: EncoderInput::Patches {
                cls: None,
                distillation: None,
                positions: "embeddings.position_embedding.weight",
                patch_bias: true,
                flat: true,
            },
            embed_norm: None,
            ..match CLIP_VISION_LAYOUT.encoder {
                Some(e) => e,
                None => panic!("CLIP_VISION_LAYOUT has an encoder"),
            }
        }),
        ..CLIP_VISION_LAYOUT
    },
    ..CLIP_VISION
};

/// What joins SigLIP's towers: the image pooled by attention under `head`, no projections,
/// `exp(logit_scale)` and `logit_bias`.
pub const SIGLIP_DUAL: DualLayout = DualLayout {
    vision: &SIGLIP_VISION,
    image_pool: ImagePool::Probe { head: "head" },
    projections: None,
    logit_scale: "logit_scale",
    logit_bias: Some("logit_bias"),
};

/// `SiglipModel`: the text tower from `text_config`, the image tower from `vision_config`.
pub const FAMILY: Architecture = Architecture {
    classes: &["SiglipModel"],
    model_types: &["siglip"],
    config: SIGLIP_TEXT_SCHEMA,
    layout: SIGLIP_TEXT_LAYOUT,
};
