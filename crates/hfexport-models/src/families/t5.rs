//! `T5ForConditionalGeneration`: relative position buckets, RMS norms without mean, encoder-decoder.

use super::llama::LLAMA_SCHEMA;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const T5_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys {
        hidden_size: "d_model",
        intermediate_size: "d_ff",
        num_hidden_layers: "num_decoder_layers",
        num_attention_heads: "num_heads",
        // relative positions: `n_positions` only bounds the exported lengths
        max_position_embeddings: "n_positions",
        norm_eps: "layer_norm_epsilon",
        activation: &["feed_forward_proj"],
        activation_rewrites: &[],
        layers_fallback: Some("num_layers"),
        head_dim: "d_kv",
        rope_theta: "rope_theta",
        partial_rotary_factor: "partial_rotary_factor",
        mlp_ratio: "",
    },
    defaults: Defaults {
        vocab_size: Some(32128),
        hidden_size: Some(512),
        intermediate_size: Some(2048),
        num_hidden_layers: Some(6),
        num_attention_heads: Some(8),
        max_position_embeddings: Some(512),
        head_dim: Some(64),
        norm_eps: 1e-6,
        activation: "relu",
        tie_word_embeddings: true,
        pad_token_id: Some(0),
        eos_token_id: Some(1),
        ..NO_DEFAULTS
    },
    biases: NO_BIASES,
    scale: ScaleRule::One,
    rope: RopeRule::None,
    seq2seq: Some(Seq2SeqSchema {
        layers: ("num_layers", 6),
        heads: ("num_heads", 8),
        ffn: ("d_ff", 2048),
        source_positions: None,
        mel_bins: None,
        decoder_start_token_id: StartToken::Pad,
        decoder_vocab_size: None,
        t5: true,
    }),
    ..LLAMA_SCHEMA
};

pub const T5_BASE: Layout = Layout {
    roots: &[""],
    heads: &["lm_head"],
    interleaved_rotary: false,
    embed: "shared",
    embed_aliases: &[],
    position_embed: None,
    sinusoid: None,
    embed_norm: None,
    position_offset: 0,
    positions_from_mask: false,
    positions_from_ids: false,
    embed_projections: None,
    layers: "decoder.block",
    final_norm: "decoder.final_layer_norm",
    norm: NormKind::Rms,
    norms: LayerNorms { pre_attention: Some("layer.0.layer_norm"), pre_mlp: Some("layer.2.layer_norm"), ..NO_NORMS },
    attention: AttentionLayout {
        prefix: "layer.0.SelfAttention",
        qkv: Projections::Separate { q: "q", k: "k", v: "v" },
        out: "o",
        qk_norm: QkNorm::None,
        unbiased_key: false,
        sinks: None,
        output_gate: false,
        v_norm: false,
    },
    mlp: MlpLayout {
        prefix: "layer.2.DenseReluDense",
        kind: MlpKind::GatedIf { gate: "wi_0", up: "wi_1", plain: "wi" },
        down: "wo",
    },
    moe: None,
    encoder: None,
    cross_attention: None,
    encoder_stack: None,
    relative_bias: Some("layer.0.SelfAttention.relative_attention_bias"),
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
};

pub const T5_ENCODER: Layout = Layout {
    layers: "encoder.block",
    final_norm: "encoder.final_layer_norm",
    norms: LayerNorms { pre_mlp: Some("layer.1.layer_norm"), ..T5_BASE.norms },
    mlp: MlpLayout { prefix: "layer.1.DenseReluDense", ..T5_BASE.mlp },
    ..T5_BASE
};

pub const T5_LAYOUT: Layout = Layout {
    cross_attention: Some(CrossAttentionLayout { prefix: "layer.1.EncDecAttention", norm: "layer.1.layer_norm" }),
    encoder_stack: Some(EncoderStack { layout: &T5_ENCODER, input: StackInput::Tokens }),
    ..T5_BASE
};

pub const FAMILY: Architecture = Architecture {
    classes: &["T5ForConditionalGeneration"],
    model_types: &["t5"],
    config: T5_SCHEMA,
    layout: T5_LAYOUT,
};
