//! `ModernBertModel` and its heads: pre-norm encoder, gated GELU MLP, alternating local/global attention with
//! two ropes.

use super::bert::{BERT_ENCODER, BERT_ENCODER_SCHEMA, BERT_LAYOUT, BERT_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const MODERNBERT_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys { norm_eps: "norm_eps", activation: &["hidden_activation"], ..KEYS },
    defaults: Defaults {
        vocab_size: Some(50368),
        hidden_size: Some(768),
        intermediate_size: Some(1152),
        num_hidden_layers: Some(22),
        num_attention_heads: Some(12),
        max_position_embeddings: Some(8192),
        norm_eps: 1e-5,
        activation: "gelu",
        tie_word_embeddings: true,
        rope_theta: 160_000.0,
        bos_token_id: Some(50281),
        eos_token_id: Some(50282),
        pad_token_id: Some(50283),
        ..NO_DEFAULTS
    },
    layers: LayerRule::LocalGlobal { default_every: 3, default_local: 128 },
    biases: Biases {
        qkv: Flag::Key("attention_bias"),
        o: Flag::Key("attention_bias"),
        mlp: Flag::Key("mlp_bias"),
        norm: Flag::Key("norm_bias"),
        head: Flag::Never,
    },
    rope: RopeRule::PerLayerType { global_theta: Some("global_rope_theta"), local_theta: "local_rope_theta" },
    encoder: Some(EncoderSchema { type_vocab_size: None, head_keys: true, ..BERT_ENCODER_SCHEMA }),
    ..BERT_SCHEMA
};

pub const MODERNBERT_LAYOUT: Layout = Layout {
    roots: &["model.", ""],
    embed: "embeddings.tok_embeddings",
    position_embed: None,
    embed_norm: None,
    position_offset: 0,
    positions_from_mask: false,
    embed_projections: None,
    layers: "layers",
    final_norm: "final_norm",
    norms: LayerNorms {
        pre_attention: Some("attn_norm"),
        pre_mlp: Some("mlp_norm"),
        first_without_pre_attention: true,
        ..NO_NORMS
    },
    attention: AttentionLayout {
        prefix: "attn",
        qkv: Projections::Fused("Wqkv"),
        out: "Wo",
        qk_norm: QkNorm::None,
        unbiased_key: false,
        sinks: None,
        output_gate: false,
        v_norm: false,
    },
    mlp: MlpLayout { prefix: "mlp", kind: MlpKind::GatedFused("Wi"), down: "Wo" },
    encoder: Some(EncoderLayout {
        token_type_embed: None,
        embed_norm: Some("embeddings.norm"),
        pooler: None,
        mlm: MlmHead {
            dense: "head.dense",
            act: HeadActivation::Classifier,
            norm: "head.norm",
            decoder: "decoder",
            bias: "decoder.bias",
        },
        classifier: ClassifierHead::Pooling { out: "classifier" },
        token_classifier: "classifier",
        qa: "classifier",
        shared_transform: true,
        ..BERT_ENCODER
    }),
    ..BERT_LAYOUT
};

pub const FAMILY: Architecture = Architecture {
    classes: &[
        "ModernBertModel",
        "ModernBertForMaskedLM",
        "ModernBertForSequenceClassification",
        "ModernBertForTokenClassification",
        "ModernBertForQuestionAnswering",
    ],
    model_types: &["modernbert"],
    config: MODERNBERT_SCHEMA,
    layout: MODERNBERT_LAYOUT,
};
