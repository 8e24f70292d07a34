//! `Starcoder2ForCausalLM` (StarCoder 2): Llama's attention with grouped KV and `use_bias` on
//! every projection, LayerNorms with bias (`norm_epsilon`), a plain `c_fc`/`c_proj` MLP, and a
//! sliding window on every layer when `sliding_window` is set.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["Starcoder2ForCausalLM"],
    model_types: &["starcoder2"],
    config: ConfigSchema {
        keys: Keys { norm_eps: "norm_epsilon", ..KEYS },
        defaults: Defaults {
            vocab_size: Some(49152),
            hidden_size: Some(3072),
            intermediate_size: Some(12288),
            num_hidden_layers: Some(30),
            num_attention_heads: Some(24),
            num_key_value_heads: Some(2),
            max_position_embeddings: Some(4096),
            norm_eps: 1e-5,
            activation: "gelu_pytorch_tanh",
            tie_word_embeddings: true,
            bos_token_id: Some(50256),
            eos_token_id: Some(50256),
            ..NO_DEFAULTS
        },
        layers: LayerRule::EveryLayer { default_window: None },
        biases: Biases {
            qkv: Flag::KeyDefault("use_bias", true),
            o: Flag::KeyDefault("use_bias", true),
            mlp: Flag::KeyDefault("use_bias", true),
            norm: Flag::Always,
            head: Flag::Never,
        },
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        norm: NormKind::Layer,
        mlp: MlpLayout { prefix: "mlp", kind: MlpKind::Plain("c_fc"), down: "c_proj" },
        ..LLAMA_LAYOUT
    },
};
