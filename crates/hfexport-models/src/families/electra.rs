//! `ElectraModel` and its heads: BERT's layers behind embeddings of their own width
//! (`embedding_size`) projected to the hidden size, no pooler, the generator's masked-LM head
//! back to the embeddings' width and a GELU classification head. `ElectraForPreTraining` (the
//! discriminator checkpoints) exports its encoder (`feature-extraction`).

use super::bert::{BERT_ENCODER, BERT_LAYOUT, BERT_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `ElectraConfig`: BERT's keys with ELECTRA-small's sizes and `embedding_size` (128).
pub const ELECTRA_SCHEMA: ConfigSchema = ConfigSchema {
    defaults: Defaults {
        hidden_size: Some(256),
        intermediate_size: Some(1024),
        num_attention_heads: Some(4),
        embed_dim: Some(128),
        ..BERT_SCHEMA.defaults
    },
    embed_dim: Some("embedding_size"),
    ..BERT_SCHEMA
};

pub const ELECTRA_LAYOUT: Layout = Layout {
    roots: &["electra.", ""],
    encoder: Some(EncoderLayout {
        embed_projection: Some(EmbedProjection { name: "embeddings_project", bias: true, before_norm: false }),
        pooler: None,
        mlm: MlmHead {
            dense: "generator_predictions.dense",
            act: HeadActivation::Gelu,
            norm: "generator_predictions.LayerNorm",
            decoder: "generator_lm_head",
            bias: "generator_lm_head.bias",
        },
        classifier: ClassifierHead::Dense { dense: "classifier.dense", act: HeadAct::Gelu, out: "classifier.out_proj" },
        ..BERT_ENCODER
    }),
    ..BERT_LAYOUT
};

pub const FAMILY: Architecture = Architecture {
    classes: &[
        "ElectraModel",
        "ElectraForPreTraining",
        "ElectraForMaskedLM",
        "ElectraForSequenceClassification",
        "ElectraForTokenClassification",
        "ElectraForQuestionAnswering",
    ],
    model_types: &["electra"],
    config: ELECTRA_SCHEMA,
    layout: ELECTRA_LAYOUT,
};
