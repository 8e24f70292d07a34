//! `StableLmForCausalLM` (StableLM 2, StableLM-3B-4E1T): Llama's gated MLP with LayerNorms with
//! bias, partial rotary (`partial_rotary_factor`, 0.25 when absent), `use_qkv_bias`, an unbiased
//! `o_proj`, a parallel block off the input LayerNorm when `use_parallel_residual`, and with
//! `qk_layernorm` one LayerNorm (no bias) per head of queries and keys.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["StableLmForCausalLM"],
    model_types: &["stablelm"],
    config: ConfigSchema {
        keys: Keys { norm_eps: "layer_norm_eps", ..KEYS },
        defaults: Defaults {
            vocab_size: Some(50304),
            hidden_size: Some(2560),
            intermediate_size: Some(6912),
            num_hidden_layers: Some(32),
            num_attention_heads: Some(32),
            num_key_value_heads: Some(32),
            max_position_embeddings: Some(4096),
            norm_eps: 1e-5,
            bos_token_id: Some(0),
            eos_token_id: Some(0),
            ..NO_DEFAULTS
        },
        biases: Biases {
            qkv: Flag::Key("use_qkv_bias"),
            o: Flag::Never,
            mlp: Flag::Never,
            norm: Flag::Always,
            head: Flag::Never,
        },
        partial_rotary: Some(0.25),
        parallel: Some(Parallel { when: Flag::Key("use_parallel_residual"), own_mlp_norm: false }),
        qk_norm: Flag::Key("qk_layernorm"),
        heads_divide_hidden: true,
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        norm: NormKind::Layer,
        attention: AttentionLayout {
            qk_norm: QkNorm::PerHeadNorms(["q_layernorm", "k_layernorm"]),
            ..LLAMA_LAYOUT.attention
        },
        ..LLAMA_LAYOUT
    },
};
