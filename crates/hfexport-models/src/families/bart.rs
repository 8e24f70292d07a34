//! The BART line of encoder-decoders: `BartForConditionalGeneration` (summarisation),
//! `MBartForConditionalGeneration`, `MarianMTModel`, `M2M100ForConditionalGeneration` (NLLB too;
//! translation) and `PegasusForConditionalGeneration`, as the T5 path builds them (an `encoder`
//! component, a static-cache `decode`).
//!
//! One definition, five settings: BART and Marian norm after each residual add with no final
//! norm; mBART, Pegasus and M2M100 before each sublayer with a final norm per stack. BART and
//! mBART read learned positions offset by 2 and norm the embeddings (`layernorm_embedding`);
//! Marian and Pegasus compute sinusoidal positions (Marian's are never stored); M2M100 computes
//! fairseq's, numbering the encoder's tokens over the non-padding ids. Every one shares its
//! token table between both stacks and the head (`shared`, which a file may store under either
//! stack's `embed_tokens` instead), scales it by `sqrt(d_model)` where `scale_embedding` says,
//! and adds `final_logits_bias` to the logits.

use super::whisper::{WHISPER_BASE, WHISPER_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const BART_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys { max_position_embeddings: "max_position_embeddings", ..WHISPER_SCHEMA.keys },
    defaults: Defaults {
        vocab_size: Some(50265),
        hidden_size: Some(1024),
        intermediate_size: Some(4096),
        num_hidden_layers: Some(12),
        num_attention_heads: Some(16),
        max_position_embeddings: Some(1024),
        bos_token_id: Some(0),
        eos_token_id: Some(2),
        pad_token_id: Some(1),
        ..WHISPER_SCHEMA.defaults
    },
    embedding_scale: EmbeddingScale::SqrtHiddenIf("scale_embedding", false),
    pre_norms: Flag::Never,
    seq2seq: Some(Seq2SeqSchema {
        layers: ("encoder_layers", 12),
        heads: ("encoder_attention_heads", 16),
        ffn: ("encoder_ffn_dim", 4096),
        source_positions: None,
        mel_bins: None,
        decoder_start_token_id: StartToken::Id(2),
        decoder_vocab_size: None,
        t5: false,
    }),
    ..WHISPER_SCHEMA
};

/// The decoder's names, from the model's root.
pub const BART_BASE: Layout = Layout {
    roots: &["model."],
    heads: &["lm_head"],
    embed: "decoder.embed_tokens",
    embed_aliases: &["shared", "encoder.embed_tokens"],
    position_embed: Some("decoder.embed_positions"),
    position_offset: 2,
    embed_norm: Some("decoder.layernorm_embedding"),
    layers: "decoder.layers",
    final_norm: "decoder.layer_norm",
    attention: AttentionLayout { unbiased_key: false, ..WHISPER_BASE.attention },
    logits_bias: Some("final_logits_bias"),
    ..WHISPER_BASE
};

pub const BART_ENCODER: Layout = Layout {
    embed: "encoder.embed_tokens",
    embed_aliases: &["shared", "decoder.embed_tokens"],
    position_embed: Some("encoder.embed_positions"),
    embed_norm: Some("encoder.layernorm_embedding"),
    layers: "encoder.layers",
    final_norm: "encoder.layer_norm",
    ..BART_BASE
};

pub const BART_LAYOUT: Layout = Layout {
    cross_attention: Some(CrossAttentionLayout { prefix: "encoder_attn", norm: "encoder_attn_layer_norm" }),
    encoder_stack: Some(EncoderStack { layout: &BART_ENCODER, input: StackInput::Tokens }),
    ..BART_BASE
};

pub const BART: Architecture = Architecture {
    classes: &["BartForConditionalGeneration"],
    model_types: &["bart"],
    config: BART_SCHEMA,
    layout: BART_LAYOUT,
};

/// mBART: BART with norms before each sublayer and a final norm per stack; no start token by
/// default (`generate` starts from BOS).
pub const MBART: Architecture = Architecture {
    classes: &["MBartForConditionalGeneration"],
    model_types: &["mbart"],
    config: ConfigSchema {
        pre_norms: Flag::Always,
        seq2seq: Some(Seq2SeqSchema {
            decoder_start_token_id: StartToken::Bos,
            ..BART_SCHEMA.seq2seq.expect("BART is an encoder-decoder")
        }),
        ..BART_SCHEMA
    },
    layout: BART_LAYOUT,
};

/// Marian and Pegasus: sinusoidal positions from row 0, no embedding norm.
const SINUSOIDAL_ENCODER: Layout =
    Layout { sinusoid: Some(Sinusoid::SplitHalves), position_offset: 0, embed_norm: None, ..BART_ENCODER };

const SINUSOIDAL_LAYOUT: Layout = Layout {
    sinusoid: Some(Sinusoid::SplitHalves),
    position_offset: 0,
    embed_norm: None,
    encoder_stack: Some(EncoderStack { layout: &SINUSOIDAL_ENCODER, input: StackInput::Tokens }),
    ..BART_LAYOUT
};

/// Marian (the opus-mt translation models): BART's post-norm layers over sinusoidal positions.
pub const MARIAN: Architecture = Architecture {
    classes: &["MarianMTModel"],
    model_types: &["marian"],
    config: ConfigSchema {
        defaults: Defaults {
            vocab_size: Some(58101),
            bos_token_id: None,
            eos_token_id: Some(0),
            pad_token_id: Some(58100),
            ..BART_SCHEMA.defaults
        },
        seq2seq: Some(Seq2SeqSchema {
            decoder_start_token_id: StartToken::Id(58100),
            decoder_vocab_size: Some("decoder_vocab_size"),
            ..BART_SCHEMA.seq2seq.expect("BART is an encoder-decoder")
        }),
        ..BART_SCHEMA
    },
    layout: SINUSOIDAL_LAYOUT,
};

/// Pegasus: norms before each sublayer and a final norm per stack, over sinusoidal positions.
pub const PEGASUS: Architecture = Architecture {
    classes: &["PegasusForConditionalGeneration"],
    model_types: &["pegasus"],
    config: ConfigSchema {
        defaults: Defaults { bos_token_id: None, eos_token_id: Some(1), pad_token_id: Some(0), ..BART_SCHEMA.defaults },
        pre_norms: Flag::Always,
        seq2seq: Some(Seq2SeqSchema {
            decoder_start_token_id: StartToken::Id(0),
            ..BART_SCHEMA.seq2seq.expect("BART is an encoder-decoder")
        }),
        ..BART_SCHEMA
    },
    layout: SINUSOIDAL_LAYOUT,
};

/// M2M100 and NLLB: norms before each sublayer and a final norm per stack, over fairseq's
/// sinusoidal positions counted from the padding id (never stored), no logits bias.
const M2M100_ENCODER: Layout = Layout {
    sinusoid: Some(Sinusoid::Fairseq),
    positions_from_ids: true,
    position_offset: 0,
    embed_norm: None,
    logits_bias: None,
    ..BART_ENCODER
};

pub const M2M100: Architecture = Architecture {
    classes: &["M2M100ForConditionalGeneration"],
    model_types: &["m2m_100"],
    config: ConfigSchema {
        defaults: Defaults { vocab_size: Some(128112), activation: "relu", ..BART_SCHEMA.defaults },
        embedding_scale: EmbeddingScale::SqrtHiddenIf("scale_embedding", true),
        pre_norms: Flag::Always,
        ..BART_SCHEMA
    },
    layout: Layout {
        sinusoid: Some(Sinusoid::Fairseq),
        positions_from_ids: true,
        position_offset: 0,
        embed_norm: None,
        logits_bias: None,
        encoder_stack: Some(EncoderStack { layout: &M2M100_ENCODER, input: StackInput::Tokens }),
        ..BART_LAYOUT
    },
};
