//! `BertModel` and its task heads: post-LN encoder layers with biases everywhere, learned positions.

use super::llama::LLAMA_SCHEMA;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `BertConfig`: post-LN encoder layers with biases everywhere and learned positions.
pub const BERT_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys { norm_eps: "layer_norm_eps", ..KEYS },
    defaults: Defaults {
        vocab_size: Some(30522),
        hidden_size: Some(768),
        intermediate_size: Some(3072),
        num_hidden_layers: Some(12),
        num_attention_heads: Some(12),
        max_position_embeddings: Some(512),
        norm_eps: 1e-12,
        activation: "gelu",
        tie_word_embeddings: true,
        pad_token_id: Some(0),
        ..NO_DEFAULTS
    },
    biases: Biases { qkv: Flag::Always, o: Flag::Always, mlp: Flag::Always, norm: Flag::Always, head: Flag::Never },
    rope: RopeRule::None,
    heads_divide_hidden: true,
    encoder: Some(BERT_ENCODER_SCHEMA),
    ..LLAMA_SCHEMA
};

/// BERT's encoder keys: two token types, BERT's pooler keys, no image, no extras; other
/// encoders state what differs.
pub const BERT_ENCODER_SCHEMA: EncoderSchema = EncoderSchema {
    type_vocab_size: Some(2),
    image: None,
    head_keys: false,
    layer_groups: false,
    relative_bias: false,
    disentangled: false,
    pooler: BERT_POOLER,
    audio: None,
    beit: false,
};

pub const BERT_LAYOUT: Layout = Layout {
    roots: &["bert.", ""],
    heads: &[],
    interleaved_rotary: false,
    embed: "embeddings.word_embeddings",
    embed_aliases: &[],
    position_embed: Some("embeddings.position_embeddings"),
    sinusoid: None,
    embed_norm: None,
    position_offset: 0,
    positions_from_mask: false,
    positions_from_ids: false,
    embed_projections: None,
    layers: "encoder.layer",
    final_norm: "",
    norm: NormKind::Layer,
    norms: LayerNorms {
        attention_residual: Some("attention.output.LayerNorm"),
        mlp_residual: Some("output.LayerNorm"),
        ..NO_NORMS
    },
    attention: AttentionLayout {
        prefix: "attention",
        qkv: Projections::Separate { q: "self.query", k: "self.key", v: "self.value" },
        out: "output.dense",
        qk_norm: QkNorm::None,
        unbiased_key: false,
        sinks: None,
        output_gate: false,
        v_norm: false,
    },
    mlp: MlpLayout { prefix: "", kind: MlpKind::Plain("intermediate.dense"), down: "output.dense" },
    moe: None,
    cross_attention: None,
    encoder_stack: None,
    relative_bias: None,
    latent: None,
    vision: None,
    per_layer_inputs: None,
    layer_scalar: None,
    altup: None,
    laurel: None,
    media_embedders: &[],
    logits_bias: None,
    layer_scales: None,
    dual: None,
    ssm: None,
    encoder: Some(EncoderLayout {
        input: EncoderInput::Tokens,
        token_type_embed: Some("embeddings.token_type_embeddings"),
        embed_norm: Some("embeddings.LayerNorm"),
        embed_projection: None,
        layer_groups: None,
        relative_bias: None,
        disentangled: None,
        positions: EncoderPositions::FromZero,
        pooler: Some(Pooler::Dense("pooler.dense")),
        projection: None,
        mlm: MlmHead {
            dense: "cls.predictions.transform.dense",
            act: HeadActivation::Hidden,
            norm: "cls.predictions.transform.LayerNorm",
            decoder: "cls.predictions.decoder",
            bias: "cls.predictions.bias",
        },
        classifier: ClassifierHead::Pooled { out: "classifier" },
        token_classifier: "classifier",
        qa: "qa_outputs",
        causal: false,
        shared_transform: false,
        relative_tables: None,
    }),
};

pub const BERT_ENCODER: EncoderLayout = match BERT_LAYOUT.encoder {
    Some(e) => e,
    None => panic!("BERT_LAYOUT has an encoder"),
};

pub const FAMILY: Architecture = Architecture {
    classes: &[
        "BertModel",
        "BertForMaskedLM",
        "BertForSequenceClassification",
        "BertForTokenClassification",
        "BertForQuestionAnswering",
    ],
    model_types: &["bert"],
    config: BERT_SCHEMA,
    layout: BERT_LAYOUT,
};
