//! `Gemma3nForCausalLM`: Gemma 4's attention (plain RMS norms, q/k and weightless v norms,
//! unit scale), sliding and full layers with a rope each, the last `num_kv_shared_layers`
//! reusing earlier layers' keys and values, and per-layer embeddings (ids past their smaller
//! table read its row 0); around every layer AltUp's residual streams, beside every attention
//! LAuReL's low-rank residual, and MLPs whose width (an `intermediate_size` list) and gate
//! sparsity (`activation_sparsity_pattern`) differ by layer.

use super::gemma::GEMMA_DEFAULTS;
use super::gemma4::{GEMMA4_LAYOUT, GEMMA4_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `Gemma3nTextConfig`'s rope when the file has none: the default rope in both kinds, with
/// their own bases.
const GEMMA3N_ROPE: &str = r#"{
    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}
}"#;

pub const GEMMA3N_SCHEMA: ConfigSchema = ConfigSchema {
    defaults: Defaults {
        vocab_size: Some(262_400),
        hidden_size: Some(2048),
        intermediate_size: Some(16_384),
        num_hidden_layers: Some(35),
        num_attention_heads: Some(8),
        num_key_value_heads: Some(2),
        max_position_embeddings: Some(32_768),
        query_pre_attn_scalar: None,
        final_softcap: Some(30.0),
        ..GEMMA_DEFAULTS
    },
    // every fifth layer full, none forced
    layers: LayerRule::Pattern { period: 5, pattern_keys: &[], default_window: 512, last_full: false },
    default_rope: Some(GEMMA3N_ROPE),
    // `Gemma3nTextConfig.validate_architecture`
    heads_divide_hidden: true,
    aliases: &[],
    moe: None,
    per_layer_heads: None,
    values_from_keys: None,
    kv_sharing: Some(KvSharing { layers: ("num_kv_shared_layers", 15), wide_mlp: None }),
    per_layer_inputs: Some(PerLayerInputKeys {
        size: ("hidden_size_per_layer_input", 256),
        vocab: ("vocab_size_per_layer_input", 262_144),
    }),
    per_layer_mlp: Some(PerLayerMlp {
        sparsity: "activation_sparsity_pattern",
        default_layers: 10,
        default_sparsity: 0.95,
    }),
    altup: Some(AltUpKeys {
        streams: ("altup_num_inputs", 4),
        active: ("altup_active_idx", 0),
        correct_scale: ("altup_correct_scale", true),
    }),
    laurel: Some(("laurel_rank", 64)),
    ..GEMMA4_SCHEMA
};

pub const GEMMA3N_LAYOUT: Layout = Layout {
    layer_scalar: None,
    moe: None,
    altup: Some(AltUpLayout {
        projections: "altup_projections",
        unembed: "altup_unembed_projections",
        prefix: "altup",
        router: "modality_router",
        router_norm: "router_norm",
        prediction: "prediction_coefs",
        correction: "correction_coefs",
        output_scale: "correct_output_scale",
    }),
    laurel: Some(LaurelLayout {
        prefix: "laurel",
        left: "linear_left",
        right: "linear_right",
        norm: "post_laurel_norm",
    }),
    ..GEMMA4_LAYOUT
};

pub const CAUSAL_LM: Architecture = Architecture {
    classes: &["Gemma3nForCausalLM"],
    model_types: &["gemma3n_text"],
    config: GEMMA3N_SCHEMA,
    layout: GEMMA3N_LAYOUT,
};

/// The text model of a `Gemma3nForConditionalGeneration` checkpoint (the hub's Gemma 3n):
/// read from `text_config`, stored under `model.language_model.`, the head tied (or `lm_head`);
/// the vision and audio hard tokens (ids from `vision_config.vocab_offset` and
/// `audio_config.vocab_offset`) embedded by `model.embed_vision` and `model.embed_audio`, as its
/// text-only forward does. The vision and audio towers are not built (the export says so).
pub const CONDITIONAL_GENERATION: Architecture = Architecture {
    classes: &["Gemma3nForConditionalGeneration"],
    model_types: &["gemma3n"],
    config: ConfigSchema {
        text_config: true,
        media_tokens: &[
            MediaTokenKeys { config: "vision_config", offset: 262_144, vocab: 128, hidden: 2048, eps: 1e-6 },
            MediaTokenKeys { config: "audio_config", offset: 262_272, vocab: 128, hidden: 1536, eps: 1e-6 },
        ],
        ..GEMMA3N_SCHEMA
    },
    layout: Layout {
        roots: &["model.language_model."],
        heads: &["lm_head"],
        media_embedders: &[MEDIA_EMBEDDER_VISION, MEDIA_EMBEDDER_AUDIO],
        ..GEMMA3N_LAYOUT
    },
};

const MEDIA_EMBEDDER_VISION: MediaEmbedderLayout = MediaEmbedderLayout {
    prefix: "model.embed_vision",
    embedding: "embedding",
    norm: "hard_embedding_norm",
    projection: "embedding_projection",
};

const MEDIA_EMBEDDER_AUDIO: MediaEmbedderLayout =
    MediaEmbedderLayout { prefix: "model.embed_audio", ..MEDIA_EMBEDDER_VISION };
