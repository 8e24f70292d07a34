//! `WhisperForConditionalGeneration`: a speech encoder (two convolutions over log-mel frames) and a decoder
//! with cross-attention.

use super::llama::LLAMA_SCHEMA;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const WHISPER_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys {
        hidden_size: "d_model",
        intermediate_size: "decoder_ffn_dim",
        num_hidden_layers: "decoder_layers",
        num_attention_heads: "decoder_attention_heads",
        max_position_embeddings: "max_target_positions",
        // nn.LayerNorm's default epsilon, not configurable
        norm_eps: "",
        activation: &["activation_function"],
        activation_rewrites: &[],
        layers_fallback: None,
        head_dim: "head_dim",
        rope_theta: "rope_theta",
        partial_rotary_factor: "partial_rotary_factor",
        mlp_ratio: "",
    },
    defaults: Defaults {
        vocab_size: Some(51865),
        hidden_size: Some(384),
        intermediate_size: Some(1536),
        num_hidden_layers: Some(4),
        num_attention_heads: Some(6),
        max_position_embeddings: Some(448),
        norm_eps: 1e-5,
        activation: "gelu",
        tie_word_embeddings: true,
        bos_token_id: Some(50256),
        eos_token_id: Some(50256),
        pad_token_id: Some(50256),
        ..NO_DEFAULTS
    },
    biases: Biases { qkv: Flag::Always, o: Flag::Always, mlp: Flag::Always, norm: Flag::Always, head: Flag::Never },
    rope: RopeRule::None,
    heads_divide_hidden: true,
    seq2seq: Some(Seq2SeqSchema {
        layers: ("encoder_layers", 4),
        heads: ("encoder_attention_heads", 6),
        ffn: ("encoder_ffn_dim", 1536),
        source_positions: Some(("max_source_positions", 1500)),
        mel_bins: Some(("num_mel_bins", 80)),
        decoder_start_token_id: StartToken::Id(50257),
        decoder_vocab_size: None,
        t5: false,
    }),
    ..LLAMA_SCHEMA
};

pub const WHISPER_BASE: Layout = Layout {
    roots: &["model.decoder."],
    heads: &["proj_out"],
    interleaved_rotary: false,
    embed: "embed_tokens",
    embed_aliases: &[],
    position_embed: Some("embed_positions"),
    sinusoid: None,
    embed_norm: None,
    position_offset: 0,
    positions_from_mask: false,
    positions_from_ids: false,
    embed_projections: None,
    layers: "layers",
    final_norm: "layer_norm",
    norm: NormKind::Layer,
    norms: LayerNorms { pre_attention: Some("self_attn_layer_norm"), pre_mlp: Some("final_layer_norm"), ..NO_NORMS },
    attention: AttentionLayout {
        prefix: "self_attn",
        qkv: Projections::Separate { q: "q_proj", k: "k_proj", v: "v_proj" },
        out: "out_proj",
        qk_norm: QkNorm::None,
        unbiased_key: true,
        sinks: None,
        output_gate: false,
        v_norm: false,
    },
    mlp: MlpLayout { prefix: "", kind: MlpKind::Plain("fc1"), down: "fc2" },
    moe: None,
    encoder: None,
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
};

pub const WHISPER_ENCODER: Layout = Layout { roots: &["model.encoder."], ..WHISPER_BASE };

pub const WHISPER_LAYOUT: Layout = Layout {
    cross_attention: Some(CrossAttentionLayout { prefix: "encoder_attn", norm: "encoder_attn_layer_norm" }),
    encoder_stack: Some(EncoderStack {
        layout: &WHISPER_ENCODER,
        input: StackInput::Speech { convs: ["conv1", "conv2"], positions: "embed_positions" },
    }),
    ..WHISPER_BASE
};

pub const FAMILY: Architecture = Architecture {
    classes: &["WhisperForConditionalGeneration"],
    model_types: &["whisper"],
    config: WHISPER_SCHEMA,
    layout: WHISPER_LAYOUT,
};
