//! `DebertaV2Model` and its heads (DeBERTa-v2 and v3, the rerankers and NLI classifiers built on
//! them): BERT's post-LN layers with disentangled attention. Each layer adds to its content
//! scores the content-to-position and position-to-content terms (`pos_att_type`) against shared
//! relative embeddings (`encoder.rel_embeddings`, log-bucketed by `position_buckets`, normed by
//! `encoder.LayerNorm`), projected by the layer's own position projections or, with
//! `share_att_key`, its key and query projections; all three terms share one scale. Embeddings
//! of their own width are projected before the embedding norm; absolute positions only with
//! `position_biased_input`; token types only when `type_vocab_size` is set; the classifier
//! reads the `ContextPooler` (`pooler_hidden_act`). The legacy masked-LM head (`cls.*`) is
//! BERT's.

use super::bert::{BERT_ENCODER, BERT_ENCODER_SCHEMA, BERT_LAYOUT, BERT_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `DebertaV2Config`: BERT's keys, DeBERTa-v2-xlarge's sizes, eps 1e-7, no token types, the
/// disentangled keys and the context pooler's.
pub const DEBERTA_V2_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys { head_dim: "attention_head_size", ..BERT_SCHEMA.keys },
    defaults: Defaults {
        vocab_size: Some(128100),
        hidden_size: Some(1536),
        intermediate_size: Some(6144),
        num_hidden_layers: Some(24),
        num_attention_heads: Some(24),
        norm_eps: 1e-7,
        ..BERT_SCHEMA.defaults
    },
    embed_dim: Some("embedding_size"),
    scale: ScaleRule::Disentangled,
    encoder: Some(EncoderSchema {
        type_vocab_size: Some(0),
        disentangled: true,
        pooler: PoolerKeys {
            size: "pooler_hidden_size",
            default_size: None,
            act: "pooler_hidden_act",
            default_act: "gelu",
        },
        ..BERT_ENCODER_SCHEMA
    }),
    ..BERT_SCHEMA
};

pub const DEBERTA_V2_LAYOUT: Layout = Layout {
    roots: &["deberta.", ""],
    attention: AttentionLayout {
        qkv: Projections::Separate { q: "self.query_proj", k: "self.key_proj", v: "self.value_proj" },
        ..BERT_LAYOUT.attention
    },
    encoder: Some(EncoderLayout {
        embed_projection: Some(EmbedProjection { name: "embeddings.embed_proj", bias: false, before_norm: true }),
        disentangled: Some(DisentangledLayout {
            rel_embeddings: "encoder.rel_embeddings",
            rel_norm: "encoder.LayerNorm",
            pos_key: "self.pos_key_proj",
            pos_query: "self.pos_query_proj",
        }),
        classifier: ClassifierHead::OwnPooler { pooler: "pooler.dense", out: "classifier" },
        ..BERT_ENCODER
    }),
    ..BERT_LAYOUT
};

pub const FAMILY: Architecture = Architecture {
    classes: &[
        "DebertaV2Model",
        "DebertaV2ForMaskedLM",
        "DebertaV2ForSequenceClassification",
        "DebertaV2ForTokenClassification",
        "DebertaV2ForQuestionAnswering",
    ],
    model_types: &["deberta-v2"],
    config: DEBERTA_V2_SCHEMA,
    layout: DEBERTA_V2_LAYOUT,
};
