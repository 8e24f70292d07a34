//! `BloomForCausalLM` (BLOOM, BLOOMZ): ALiBi instead of position embeddings (slopes for any
//! head count), a LayerNorm over the word embeddings (`word_embeddings_layernorm`), a fused
//! `query_key_value` grouped per head (`[heads, 3, head_dim]`), biases everywhere, a tanh-GELU
//! MLP of four times the hidden size, GPT-2's key names (`n_layer`, `n_head`, with
//! `num_hidden_layers`, `num_attention_heads` and the legacy `n_embed` read as they are).
//! `apply_residual_connection_post_layernorm` (no released checkpoint sets it) is refused.

use super::falcon::FAMILY as FALCON;
use super::gpt_neox::MEGATRON_MLP;
use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["BloomForCausalLM"],
    model_types: &["bloom"],
    config: ConfigSchema {
        keys: Keys {
            intermediate_size: "",
            num_hidden_layers: "n_layer",
            num_attention_heads: "n_head",
            max_position_embeddings: "",
            norm_eps: "layer_norm_epsilon",
            activation: &[],
            ..KEYS
        },
        defaults: Defaults {
            vocab_size: Some(250880),
            hidden_size: Some(64),
            intermediate_times_hidden: Some(4),
            num_hidden_layers: Some(2),
            num_attention_heads: Some(8),
            // no key: ALiBi has no position table; BLOOM was trained on 2048 tokens
            max_position_embeddings: Some(2048),
            norm_eps: 1e-5,
            activation: "gelu_pytorch_tanh",
            tie_word_embeddings: true,
            bos_token_id: Some(1),
            eos_token_id: Some(2),
            ..NO_DEFAULTS
        },
        aliases: &[("hidden_size", "n_embed"), ("n_layer", "num_hidden_layers"), ("n_head", "num_attention_heads")],
        biases: Biases { qkv: Flag::Always, o: Flag::Always, mlp: Flag::Always, norm: Flag::Always, head: Flag::Never },
        rope: RopeRule::None,
        alibi: Some(AlibiRule { when: Flag::Always, kind: Alibi::Bloom }),
        refused: &["apply_residual_connection_post_layernorm"],
        heads_divide_hidden: true,
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        roots: &["transformer.", ""],
        heads: &["lm_head"],
        embed: "word_embeddings",
        embed_norm: Some("word_embeddings_layernorm"),
        layers: "h",
        final_norm: "ln_f",
        norm: NormKind::Layer,
        norms: PRE_NORMS,
        // Falcon's attention module names (Falcon derives from Bloom's code)
        attention: FALCON.layout.attention,
        mlp: MEGATRON_MLP,
        ..LLAMA_LAYOUT
    },
};
