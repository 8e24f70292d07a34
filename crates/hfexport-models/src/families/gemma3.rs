//! `Gemma3ForCausalLM` and the text model of `Gemma3ForConditionalGeneration`: Gemma 2's norms with per-head
//! q/k norms, a 5:1 sliding pattern and a local rope for the sliding layers.

use super::gemma::{GEMMA_DEFAULTS, GEMMA_LAYOUT};
use super::gemma2::SANDWICH_NORMS;
use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const GEMMA3_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys { activation: &["hidden_activation"], ..KEYS },
    defaults: Defaults {
        vocab_size: Some(262208),
        hidden_size: Some(2304),
        intermediate_size: Some(9216),
        num_hidden_layers: Some(26),
        num_attention_heads: Some(8),
        num_key_value_heads: Some(4),
        max_position_embeddings: Some(131072),
        rope_theta: 1_000_000.0,
        ..GEMMA_DEFAULTS
    },
    layers: LayerRule::Pattern {
        period: 6,
        pattern_keys: &["sliding_window_pattern", "_sliding_window_pattern"],
        default_window: 4096,
        last_full: false,
    },
    biases: ATTENTION_BIASES,
    scale: ScaleRule::QueryPreAttnScalar,
    embedding_scale: EmbeddingScale::SqrtHidden,
    rope: RopeRule::PerLayerType { global_theta: None, local_theta: "rope_local_base_freq" },
    softcapping: Softcapping { attention: false, logits: true },
    heads_divide_hidden: true,
    ..LLAMA_SCHEMA
};

pub const GEMMA3_LAYOUT: Layout = Layout {
    norms: SANDWICH_NORMS,
    attention: AttentionLayout { qk_norm: QkNorm::PerHead(QK_NORMS), ..LLAMA_LAYOUT.attention },
    ..GEMMA_LAYOUT
};

pub const CAUSAL_LM: Architecture = Architecture {
    classes: &["Gemma3ForCausalLM"],
    model_types: &["gemma3_text"],
    config: GEMMA3_SCHEMA,
    layout: GEMMA3_LAYOUT,
};

/// The text model of a multimodal Gemma 3 checkpoint: read from `text_config`, stored under
/// `language_model.model.` (what 5.23 still saves) or `model.language_model.` (its in-memory
/// names), with no logit soft-capping (only the causal LM class applies it).
pub const CONDITIONAL_GENERATION: Architecture = Architecture {
    classes: &["Gemma3ForConditionalGeneration"],
    model_types: &["gemma3"],
    config: ConfigSchema { text_config: true, softcapping: NO_SOFTCAPPING, ..GEMMA3_SCHEMA },
    layout: Layout {
        roots: &[
            "language_model.model.",
            "model.language_model.model.",
            "language_model.model.model.",
            "model.language_model.",
        ],
        heads: &["lm_head", "language_model.lm_head"],
        ..GEMMA3_LAYOUT
    },
};
