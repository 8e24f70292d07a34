//! `Qwen2VLForConditionalGeneration`: the Qwen2-VL vision tower with its PatchMerger, and an M-RoPE
//! Qwen2 text model (`Qwen2VLTextConfig`).

use super::bert::BERT_SCHEMA;
use super::clip::CLIP_VISION_LAYOUT;
use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::qwen2::QWEN_DEFAULTS;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `Qwen2VLTextConfig`: Qwen2's blocks with its own defaults, the text model of Qwen2-VL (no
/// class of its own: read through the vision-language entry); its `mrope` rope type is the
/// default rope per row of the multimodal positions (`mrope_section`, see vision.rs).
pub const TEXT: Architecture = Architecture {
    classes: &[],
    model_types: &["qwen2_vl_text"],
    config: ConfigSchema {
        defaults: Defaults {
            vocab_size: Some(152064),
            hidden_size: Some(8192),
            intermediate_size: Some(29568),
            num_hidden_layers: Some(80),
            num_attention_heads: Some(64),
            num_key_value_heads: Some(8),
            max_position_embeddings: Some(32768),
            norm_eps: 1e-5,
            rope_theta: 1_000_000.0,
            bos_token_id: Some(151643),
            eos_token_id: Some(151645),
            ..QWEN_DEFAULTS
        },
        layers: LayerRule::Qwen,
        biases: Biases { qkv: Flag::Always, ..NO_BIASES },
        rope_type_rewrites: &[("mrope", "default")],
        ..LLAMA_SCHEMA
    },
    layout: LLAMA_LAYOUT,
};

/// `Qwen2VLVisionConfig`: pre-LN blocks (LayerNorm eps fixed at 1e-6), a fused `qkv` with bias,
/// `quick_gelu`, MLP width `embed_dim x mlp_ratio`; read through the vision-language
/// entry.
pub const QWEN2_VL_VISION: Architecture = Architecture {
    classes: &[],
    model_types: &["qwen2_vl_vision", "qwen2_vl"],
    config: ConfigSchema {
        keys: Keys {
            hidden_size: "embed_dim",
            num_hidden_layers: "depth",
            num_attention_heads: "num_heads",
            norm_eps: "",
            ..KEYS
        },
        defaults: Defaults {
            vocab_size: Some(0),
            hidden_size: Some(1280),
            intermediate_size: Some(0),
            num_hidden_layers: Some(32),
            num_attention_heads: Some(16),
            max_position_embeddings: Some(0),
            norm_eps: 1e-6,
            activation: "quick_gelu",
            ..NO_DEFAULTS
        },
        encoder: None,
        // the 2-D rotary is built in vision.rs from `rope_theta`
        rope_type_rewrites: &[("axial", "default")],
        ..BERT_SCHEMA
    },
    layout: QWEN2_VL_VISION_LAYOUT,
};

pub const QWEN2_VL_VISION_LAYOUT: Layout = Layout {
    roots: &["visual.", "model.visual."],
    embed: "patch_embed.proj",
    layers: "blocks",
    norms: LayerNorms { pre_attention: Some("norm1"), pre_mlp: Some("norm2"), ..NO_NORMS },
    attention: AttentionLayout {
        prefix: "attn",
        qkv: Projections::Fused("qkv"),
        out: "proj",
        qk_norm: QkNorm::None,
        unbiased_key: false,
        sinks: None,
        output_gate: false,
        v_norm: false,
    },
    encoder: None,
    ..CLIP_VISION_LAYOUT
};

/// Qwen2-VL's image side: its tower, closed by the PatchMerger.
pub const QWEN2_VL_IMAGE: VisionLayout = VisionLayout {
    tower: &QWEN2_VL_VISION_LAYOUT,
    kind: TowerKind::Merged { merger_norm: "merger.ln_q" },
    projector_roots: &["visual.merger.", "model.visual.merger."],
    projector: ["mlp.0", "mlp.2"],
};

/// `Qwen2VLForConditionalGeneration`: the hub's layout (`visual.`, `model.`, `lm_head`) and the
/// module names (`model.visual.`, `model.language_model.`).
pub const QWEN2_VL: VisionLanguage = VisionLanguage {
    classes: &["Qwen2VLForConditionalGeneration"],
    model_types: &["qwen2_vl"],
    default_text_type: "qwen2_vl_text",
    flat_text: true,
    vision_types: &["qwen2_vl_vision", "qwen2_vl"],
    text_roots: &["model.language_model.", "model."],
    heads: &["lm_head"],
    vision: &QWEN2_VL_IMAGE,
};
