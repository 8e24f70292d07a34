//! `MPNetModel` and its heads (all-mpnet-base-v2 and the other MPNet sentence encoders): BERT's
//! post-LN layers under MPNet's names, no token types, positions after the padding index its
//! embeddings fix at 1, and one relative position bias (`encoder.relative_attention_bias`, 32
//! buckets) added to every layer's scores; RoBERTa's masked-LM and classification heads.

use super::bert::{BERT_ENCODER_SCHEMA, BERT_LAYOUT, BERT_SCHEMA};
use super::roberta::ROBERTA_ENCODER;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `MPNetConfig`: BERT's keys and sizes, no token types, padding / BOS / EOS 1 / 0 / 2.
pub const MPNET_SCHEMA: ConfigSchema = ConfigSchema {
    defaults: Defaults {
        vocab_size: Some(30527),
        pad_token_id: Some(1),
        bos_token_id: Some(0),
        eos_token_id: Some(2),
        ..BERT_SCHEMA.defaults
    },
    encoder: Some(EncoderSchema { type_vocab_size: None, relative_bias: true, ..BERT_ENCODER_SCHEMA }),
    ..BERT_SCHEMA
};

pub const MPNET_LAYOUT: Layout = Layout {
    roots: &["mpnet.", ""],
    norms: LayerNorms {
        attention_residual: Some("attention.LayerNorm"),
        mlp_residual: Some("output.LayerNorm"),
        ..NO_NORMS
    },
    attention: AttentionLayout {
        prefix: "attention.attn",
        qkv: Projections::Separate { q: "q", k: "k", v: "v" },
        out: "o",
        ..BERT_LAYOUT.attention
    },
    encoder: Some(EncoderLayout {
        token_type_embed: None,
        positions: EncoderPositions::AfterFixedPadding(1),
        relative_bias: Some("encoder.relative_attention_bias"),
        ..ROBERTA_ENCODER
    }),
    ..BERT_LAYOUT
};

pub const FAMILY: Architecture = Architecture {
    classes: &[
        "MPNetModel",
        "MPNetForMaskedLM",
        "MPNetForSequenceClassification",
        "MPNetForTokenClassification",
        "MPNetForQuestionAnswering",
    ],
    model_types: &["mpnet"],
    config: MPNET_SCHEMA,
    layout: MPNET_LAYOUT,
};
