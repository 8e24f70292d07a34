//! `Lfm2ForCausalLM` (LFM2, `Lfm2Config`): Llama-like layers that are either grouped-query
//! attention (per-head RMS q/k norms `q_layernorm` / `k_layernorm`, output `out_proj`) or a
//! gated short convolution (`conv`: `in_proj` to B, C, x; `B * x` through a causal depthwise
//! convolution of `conv_L_cache` taps; times C; `out_proj`), by `layer_types` (`conv` /
//! `full_attention`) or `full_attn_idxs`; the norms `operator_norm` and `ffn_norm`, a SwiGLU
//! `feed_forward` (`w1`, `w3`, `w2`) of the width `block_auto_adjust_ff_dim` derives, and the
//! final norm under its transformers name `embedding_norm`.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["Lfm2ForCausalLM"],
    model_types: &["lfm2"],
    config: ConfigSchema {
        keys: Keys { norm_eps: "norm_eps", ..KEYS },
        defaults: Defaults {
            vocab_size: Some(65536),
            hidden_size: Some(2560),
            intermediate_size: Some(12288),
            num_hidden_layers: Some(32),
            num_attention_heads: Some(32),
            num_key_value_heads: Some(8),
            max_position_embeddings: Some(128_000),
            norm_eps: 1e-5,
            tie_word_embeddings: true,
            rope_theta: 1_000_000.0,
            bos_token_id: Some(1),
            eos_token_id: Some(2),
            pad_token_id: Some(0),
            ..NO_DEFAULTS
        },
        biases: NO_BIASES,
        aliases: &[("intermediate_size", "block_ff_dim"), ("tie_word_embeddings", "tie_embedding")],
        ssm: Some(SsmRule {
            mixer: SsmMixer::ShortConv,
            layers: SsmLayers::LayerTypes { kind: "conv", attention: Some("full_attn_idxs") },
        }),
        ffn_auto_adjust: true,
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        final_norm: "embedding_norm",
        norms: LayerNorms { pre_attention: Some("operator_norm"), pre_mlp: Some("ffn_norm"), ..PRE_NORMS },
        attention: AttentionLayout {
            out: "out_proj",
            qk_norm: QkNorm::PerHead(["q_layernorm", "k_layernorm"]),
            ..LLAMA_LAYOUT.attention
        },
        mlp: MlpLayout { prefix: "feed_forward", kind: MlpKind::Gated { gate: "w1", up: "w3" }, down: "w2" },
        ssm: Some("conv"),
        ..LLAMA_LAYOUT
    },
};
