//! `XLMRobertaXLModel` and its heads (XLM-R XL / XXL): RoBERTa's names, positions and heads, but
//! pre-LN layers (`attention.self_attn_layer_norm` before the attention, `LayerNorm` before the
//! MLP), no norm over the embeddings and a final `encoder.LayerNorm`.

use super::bert::{BERT_ENCODER_SCHEMA, BERT_SCHEMA};
use super::roberta::{ROBERTA_DEFAULTS, ROBERTA_ENCODER, ROBERTA_LAYOUT};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `XLMRobertaXLConfig`: RoBERTa's ids, its own sizes, eps 1e-5 and one token type.
pub const XLM_ROBERTA_XL_SCHEMA: ConfigSchema = ConfigSchema {
    defaults: Defaults {
        vocab_size: Some(250880),
        hidden_size: Some(2560),
        intermediate_size: Some(10240),
        num_hidden_layers: Some(36),
        num_attention_heads: Some(32),
        max_position_embeddings: Some(514),
        norm_eps: 1e-5,
        ..ROBERTA_DEFAULTS
    },
    encoder: Some(EncoderSchema { type_vocab_size: Some(1), ..BERT_ENCODER_SCHEMA }),
    ..BERT_SCHEMA
};

pub const XLM_ROBERTA_XL_LAYOUT: Layout = Layout {
    final_norm: "encoder.LayerNorm",
    norms: LayerNorms { pre_attention: Some("attention.self_attn_layer_norm"), pre_mlp: Some("LayerNorm"), ..NO_NORMS },
    encoder: Some(EncoderLayout { embed_norm: None, ..ROBERTA_ENCODER }),
    ..ROBERTA_LAYOUT
};

pub const FAMILY: Architecture = Architecture {
    classes: &[
        "XLMRobertaXLModel",
        "XLMRobertaXLForMaskedLM",
        "XLMRobertaXLForSequenceClassification",
        "XLMRobertaXLForTokenClassification",
        "XLMRobertaXLForQuestionAnswering",
    ],
    model_types: &["xlm-roberta-xl"],
    config: XLM_ROBERTA_XL_SCHEMA,
    layout: XLM_ROBERTA_XL_LAYOUT,
};
