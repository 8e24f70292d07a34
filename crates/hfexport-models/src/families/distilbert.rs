//! `DistilBertModel` and its heads.

use super::bert::{BERT_ENCODER, BERT_ENCODER_SCHEMA, BERT_LAYOUT, BERT_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `DistilBertConfig`: BERT's layers under other names, no token types, no pooler, every norm's
/// epsilon fixed at 1e-12 by the modeling code (no key read).
pub const DISTILBERT_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys {
        hidden_size: "dim",
        intermediate_size: "hidden_dim",
        num_hidden_layers: "n_layers",
        num_attention_heads: "n_heads",
        max_position_embeddings: "max_position_embeddings",
        norm_eps: "",
        activation: &["activation"],
        activation_rewrites: &[],
        layers_fallback: None,
        head_dim: "head_dim",
        rope_theta: "rope_theta",
        partial_rotary_factor: "partial_rotary_factor",
        mlp_ratio: "",
    },
    defaults: Defaults { num_hidden_layers: Some(6), ..BERT_SCHEMA.defaults },
    encoder: Some(EncoderSchema { type_vocab_size: None, ..BERT_ENCODER_SCHEMA }),
    ..BERT_SCHEMA
};

pub const DISTILBERT_LAYOUT: Layout = Layout {
    roots: &["distilbert.", ""],
    layers: "transformer.layer",
    norms: LayerNorms {
        attention_residual: Some("sa_layer_norm"),
        mlp_residual: Some("output_layer_norm"),
        ..NO_NORMS
    },
    attention: AttentionLayout {
        prefix: "attention",
        qkv: Projections::Separate { q: "q_lin", k: "k_lin", v: "v_lin" },
        out: "out_lin",
        qk_norm: QkNorm::None,
        unbiased_key: false,
        sinks: None,
        output_gate: false,
        v_norm: false,
    },
    mlp: MlpLayout { prefix: "ffn", kind: MlpKind::Plain("lin1"), down: "lin2" },
    encoder: Some(EncoderLayout {
        token_type_embed: None,
        pooler: None,
        mlm: MlmHead {
            dense: "vocab_transform",
            act: HeadActivation::Hidden,
            norm: "vocab_layer_norm",
            decoder: "vocab_projector",
            bias: "vocab_projector.bias",
        },
        classifier: ClassifierHead::Dense { dense: "pre_classifier", act: HeadAct::Relu, out: "classifier" },
        ..BERT_ENCODER
    }),
    ..BERT_LAYOUT
};

pub const FAMILY: Architecture = Architecture {
    classes: &[
        "DistilBertModel",
        "DistilBertForMaskedLM",
        "DistilBertForSequenceClassification",
        "DistilBertForTokenClassification",
        "DistilBertForQuestionAnswering",
    ],
    model_types: &["distilbert"],
    config: DISTILBERT_SCHEMA,
    layout: DISTILBERT_LAYOUT,
};
