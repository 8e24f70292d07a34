//! `PhiForCausalLM` (Phi-1, Phi-1.5, Phi-2): a parallel block (attention and MLP both read one
//! LayerNorm with bias and are added to the residual together), partial rotary
//! (`partial_rotary_factor`, 0.5 when absent), biased `q/k/v_proj` and `dense`, a plain
//! `fc1`/`fc2` MLP, an optional per-head LayerNorm of queries and keys (`qk_layernorm`), and a
//! head with a bias.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["PhiForCausalLM"],
    model_types: &["phi"],
    config: ConfigSchema {
        keys: Keys { norm_eps: "layer_norm_eps", ..KEYS },
        defaults: Defaults {
            vocab_size: Some(51200),
            hidden_size: Some(2048),
            intermediate_size: Some(8192),
            num_hidden_layers: Some(24),
            num_attention_heads: Some(32),
            max_position_embeddings: Some(2048),
            norm_eps: 1e-5,
            activation: "gelu_new",
            bos_token_id: Some(1),
            eos_token_id: Some(2),
            ..NO_DEFAULTS
        },
        biases: Biases {
            qkv: Flag::Always,
            o: Flag::Always,
            mlp: Flag::Always,
            norm: Flag::Always,
            head: Flag::Always,
        },
        partial_rotary: Some(0.5),
        parallel: Some(Parallel { when: Flag::Always, own_mlp_norm: false }),
        qk_norm: Flag::Key("qk_layernorm"),
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        final_norm: "final_layernorm",
        norm: NormKind::Layer,
        norms: LayerNorms { pre_attention: Some("input_layernorm"), ..NO_NORMS },
        attention: AttentionLayout {
            out: "dense",
            qk_norm: QkNorm::PerHead(["q_layernorm", "k_layernorm"]),
            ..LLAMA_LAYOUT.attention
        },
        mlp: MlpLayout { prefix: "mlp", kind: MlpKind::Plain("fc1"), down: "fc2" },
        ..LLAMA_LAYOUT
    },
};
