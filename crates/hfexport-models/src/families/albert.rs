//! `AlbertModel` and its heads: factorised embeddings (`embedding_size`, always projected by
//! `encoder.embedding_hidden_mapping_in`) and post-LN layers shared along the depth: layer `i`
//! runs every layer of group `i / (num_hidden_layers / num_hidden_groups)` (`inner_group_num`
//! each). `AlbertForPreTraining` exports its encoder (`feature-extraction`).

use super::bert::{BERT_ENCODER, BERT_ENCODER_SCHEMA, BERT_LAYOUT, BERT_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `AlbertConfig`: BERT's keys, ALBERT-xxlarge's sizes, `gelu_new`, BOS/EOS 2/3.
pub const ALBERT_SCHEMA: ConfigSchema = ConfigSchema {
    defaults: Defaults {
        vocab_size: Some(30000),
        hidden_size: Some(4096),
        intermediate_size: Some(16384),
        num_attention_heads: Some(64),
        activation: "gelu_new",
        bos_token_id: Some(2),
        eos_token_id: Some(3),
        embed_dim: Some(128),
        ..BERT_SCHEMA.defaults
    },
    embed_dim: Some("embedding_size"),
    encoder: Some(EncoderSchema { layer_groups: true, ..BERT_ENCODER_SCHEMA }),
    ..BERT_SCHEMA
};

pub const ALBERT_LAYOUT: Layout = Layout {
    roots: &["albert.", ""],
    norms: LayerNorms {
        attention_residual: Some("attention.LayerNorm"),
        mlp_residual: Some("full_layer_layer_norm"),
        ..NO_NORMS
    },
    attention: AttentionLayout {
        qkv: Projections::Separate { q: "query", k: "key", v: "value" },
        out: "dense",
        ..BERT_LAYOUT.attention
    },
    mlp: MlpLayout { prefix: "", kind: MlpKind::Plain("ffn"), down: "ffn_output" },
    encoder: Some(EncoderLayout {
        embed_projection: Some(EmbedProjection {
            name: "encoder.embedding_hidden_mapping_in",
            bias: true,
            before_norm: false,
        }),
        layer_groups: Some(LayerGroupNames { groups: "encoder.albert_layer_groups", inner: "albert_layers" }),
        pooler: Some(Pooler::Dense("pooler")),
        mlm: MlmHead {
            dense: "predictions.dense",
            act: HeadActivation::Hidden,
            norm: "predictions.LayerNorm",
            decoder: "predictions.decoder",
            bias: "predictions.bias",
        },
        ..BERT_ENCODER
    }),
    ..BERT_LAYOUT
};

pub const FAMILY: Architecture = Architecture {
    classes: &[
        "AlbertModel",
        "AlbertForPreTraining",
        "AlbertForMaskedLM",
        "AlbertForSequenceClassification",
        "AlbertForTokenClassification",
        "AlbertForQuestionAnswering",
    ],
    model_types: &["albert"],
    config: ALBERT_SCHEMA,
    layout: ALBERT_LAYOUT,
};
