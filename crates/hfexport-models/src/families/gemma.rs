//! `GemmaForCausalLM`: `(1 + w)` RMS norms, `sqrt(hidden)`-scaled embeddings, tanh GELU, tied head.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const GEMMA_DEFAULTS: Defaults = Defaults {
    vocab_size: Some(256000),
    hidden_size: Some(3072),
    intermediate_size: Some(24576),
    num_hidden_layers: Some(28),
    num_attention_heads: Some(16),
    max_position_embeddings: Some(8192),
    num_key_value_heads: Some(16),
    head_dim: Some(256),
    activation: "gelu_pytorch_tanh",
    tie_word_embeddings: true,
    query_pre_attn_scalar: Some(256.0),
    bos_token_id: Some(2),
    eos_token_id: Some(1),
    pad_token_id: Some(0),
    ..NO_DEFAULTS
};

pub const GEMMA_LAYOUT: Layout = Layout { norm: NormKind::RmsOnePlus, ..LLAMA_LAYOUT };

pub const FAMILY: Architecture = Architecture {
    classes: &["GemmaForCausalLM"],
    model_types: &["gemma"],
    config: ConfigSchema {
        keys: Keys { activation_rewrites: &[("gelu", "gelu_pytorch_tanh")], ..KEYS },
        defaults: GEMMA_DEFAULTS,
        biases: ATTENTION_BIASES,
        embedding_scale: EmbeddingScale::SqrtHidden,
        ..LLAMA_SCHEMA
    },
    layout: GEMMA_LAYOUT,
};
