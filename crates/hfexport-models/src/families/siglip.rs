//! SigLIP: `SiglipModel`, an image-text dual encoder (`crate::dual`) like CLIP but for what
//! `modular_siglip.py` changes: a bidirectional text tower pooled at its last position through
//! its own `head`, an image tower without class token or pre-norm whose final states are normed
//! and pooled by attention (a learned probe), and a `logit_bias` beside the scale.

use super::clip::{CLIP_TEXT_LAYOUT, CLIP_TEXT_SCHEMA, CLIP_VISION, CLIP_VISION_LAYOUT};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `SiglipTextConfig`: CLIP's text keys with SigLIP's defaults (tanh GELU, eps 1e-6, 64
/// positions) and its `head`'s width, `projection_size` (the hidden size when null).
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
    encoder: Some(EncoderSchema {
        pooler: PoolerKeys { size: "projection_size", default_size: None, ..BERT_POOLER },
        ..match CLIP_TEXT_SCHEMA.encoder {
            Some(e) => e,
            None => panic!("CLIP_TEXT_SCHEMA has an encoder schema"),
        }
    }),
    ..CLIP_TEXT_SCHEMA
};

/// SigLIP's text tower: CLIP's, attending both ways over the unpadded tokens, pooled at the
/// last position (padding or not, as transformers does) through `head`.
pub const SIGLIP_TEXT_LAYOUT: Layout = Layout {
    encoder: Some(EncoderLayout {
        pooler: Some(Pooler::LastToken { head: "head" }),
        projection: None,
        causal: false,
        ..match CLIP_TEXT_LAYOUT.encoder {
            Some(e) => e,
            None => panic!("CLIP_TEXT_LAYOUT has an encoder"),
        }
    }),
    dual: Some(&SIGLIP_DUAL),
    ..CLIP_TEXT_LAYOUT
};

/// `SiglipVisionConfig`: CLIP's vision keys with SigLIP's defaults (16x16 patches, tanh GELU);
/// `SiglipVisionModel` (`last_hidden_state` after `post_layernorm`, `pooler_output` pooled by the
/// attention probe) and `SiglipModel`'s image tower.
pub const SIGLIP_VISION: Architecture = Architecture {
    classes: &["SiglipVisionModel"],
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
        // transformers 5 saves `SiglipVisionModel` at the top
        roots: &["vision_model.", ""],
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
            pooler: Some(Pooler::Probe { head: "head" }),
            projection: None,
            ..match CLIP_VISION_LAYOUT.encoder {
                Some(e) => e,
                None => panic!("CLIP_VISION_LAYOUT has an encoder"),
            }
        }),
        ..CLIP_VISION_LAYOUT
    },
};

/// What joins SigLIP's towers: each tower's own head ends in the shared space;
/// `exp(logit_scale)` and `logit_bias`.
pub const SIGLIP_DUAL: DualLayout =
    DualLayout { vision: &SIGLIP_VISION, logit_scale: "logit_scale", logit_bias: Some("logit_bias") };

/// `SiglipModel`: the text tower from `text_config`, the image tower from `vision_config`.
pub const FAMILY: Architecture = Architecture {
    classes: &["SiglipModel"],
    model_types: &["siglip"],
    config: SIGLIP_TEXT_SCHEMA,
    layout: SIGLIP_TEXT_LAYOUT,
};

/// `SiglipTextModel`: the text tower alone (`last_hidden_state`, `pooler_output` through `head`).
pub const SIGLIP_TEXT: Architecture = Architecture {
    classes: &["SiglipTextModel"],
    model_types: &["siglip_text_model"],
    config: ConfigSchema { text_config: false, ..SIGLIP_TEXT_SCHEMA },
    layout: Layout { roots: &["text_model.", ""], dual: None, ..SIGLIP_TEXT_LAYOUT },
};
