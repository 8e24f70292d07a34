//! CLIP: `CLIPModel` (an image-text dual encoder, `crate::dual`), its towers as classes of
//! their own (`CLIPTextModel`, `CLIPVisionModel` and their `…WithProjection`: pooled, or
//! projected into the shared space), and the vision tower LLaVA reads from `vision_config`.

use super::bert::{BERT_ENCODER, BERT_ENCODER_SCHEMA, BERT_SCHEMA};
use super::vit::{VIT_ENCODER, VIT_LAYOUT};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `CLIPVisionConfig`: pre-LN layers with biases, `quick_gelu`, patches in; `CLIPVisionModel`
/// (`pooler_output`: the class token through `post_layernorm`) and
/// `CLIPVisionModelWithProjection` (`image_embeds`: that projected, `projection_dim` wide), and
/// the vision tower of LLaVA (`vision_config`).
pub const CLIP_VISION: Architecture = Architecture {
    classes: &["CLIPVisionModel", "CLIPVisionModelWithProjection"],
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
            pooler: PROJECTION_DIM,
            ..BERT_ENCODER_SCHEMA
        }),
        ..BERT_SCHEMA
    },
    layout: CLIP_VISION_LAYOUT,
};

/// The `…WithProjection` classes' projection width: `projection_dim`, 512 by default.
const PROJECTION_DIM: PoolerKeys = PoolerKeys { size: "projection_dim", default_size: Some(512), ..BERT_POOLER };

pub const CLIP_VISION_LAYOUT: Layout = Layout {
    // LLaVA's, then the tower classes' (transformers 5 saves `CLIPVisionModel` at the top)
    roots: &[
        "vision_tower.",
        "vision_tower.vision_model.",
        "model.vision_tower.vision_model.",
        "model.vision_tower.",
        "vision_model.",
        "",
    ],
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
            cls: Some("embeddings.class_embedding"),
            positions: "embeddings.position_embedding.weight",
            patch_bias: false,
            flat: true,
        },
        embed_norm: Some("pre_layrnorm"),
        pooler: Some(Pooler::NormedFirstToken { norm: "post_layernorm" }),
        projection: Some(PooledProjection { linear: "visual_projection", output: "image_embeds" }),
        ..VIT_ENCODER
    }),
    ..VIT_LAYOUT
};

/// `CLIPTextConfig`: pre-LN layers with biases, `quick_gelu`, learned positions (77), no token
/// types; read from `text_config` of a `CLIPConfig`.
pub const CLIP_TEXT_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys { norm_eps: "layer_norm_eps", ..KEYS },
    defaults: Defaults {
        vocab_size: Some(49408),
        hidden_size: Some(512),
        intermediate_size: Some(2048),
        num_hidden_layers: Some(12),
        num_attention_heads: Some(8),
        max_position_embeddings: Some(77),
        norm_eps: 1e-5,
        activation: "quick_gelu",
        pad_token_id: Some(1),
        bos_token_id: Some(49406),
        eos_token_id: Some(49407),
        ..NO_DEFAULTS
    },
    text_config: true,
    encoder: Some(EncoderSchema { type_vocab_size: None, pooler: PROJECTION_DIM, ..BERT_ENCODER_SCHEMA }),
    ..BERT_SCHEMA
};

/// CLIP's text tower: token and learned position embeddings, causal pre-LN layers, the final
/// norm, pooled at the end-of-text token (and projected where `text_projection` is stored).
pub const CLIP_TEXT_LAYOUT: Layout = Layout {
    roots: &["text_model."],
    embed: "embeddings.token_embedding",
    position_embed: Some("embeddings.position_embedding"),
    final_norm: "final_layer_norm",
    encoder: Some(EncoderLayout {
        input: EncoderInput::Tokens,
        token_type_embed: None,
        embed_norm: None,
        pooler: Some(Pooler::EndOfText),
        projection: Some(PooledProjection { linear: "text_projection", output: "text_embeds" }),
        causal: true,
        ..BERT_ENCODER
    }),
    dual: Some(&CLIP_DUAL),
    ..CLIP_VISION_LAYOUT
};

/// `CLIPModel`'s image tower, under `vision_model.`.
pub const CLIP_VISION_TOWER: Architecture =
    Architecture { layout: Layout { roots: &["vision_model."], ..CLIP_VISION_LAYOUT }, ..CLIP_VISION };

/// What joins CLIP's towers: both pooled states projected (`projection_dim` wide), cosine
/// similarities scaled by `exp(logit_scale)`.
pub const CLIP_DUAL: DualLayout =
    DualLayout { vision: &CLIP_VISION_TOWER, logit_scale: "logit_scale", logit_bias: None };

/// `CLIPModel`: the text tower from `text_config`, the image tower from `vision_config`.
pub const CLIP: Architecture = Architecture {
    classes: &["CLIPModel"],
    model_types: &["clip"],
    config: CLIP_TEXT_SCHEMA,
    layout: CLIP_TEXT_LAYOUT,
};

/// `CLIPTextModel` (`last_hidden_state`, `pooler_output`) and `CLIPTextModelWithProjection`
/// (`text_embeds` in place of `pooler_output`, where `text_projection` is stored).
pub const CLIP_TEXT: Architecture = Architecture {
    classes: &["CLIPTextModel", "CLIPTextModelWithProjection"],
    model_types: &["clip_text_model"],
    config: ConfigSchema { text_config: false, ..CLIP_TEXT_SCHEMA },
    // transformers 5 saves the tower's tensors at the top; older files under `text_model.`
    layout: Layout { roots: &["text_model.", ""], dual: None, ..CLIP_TEXT_LAYOUT },
};
