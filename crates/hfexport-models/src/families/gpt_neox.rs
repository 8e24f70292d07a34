//! `GPTNeoXForCausalLM` (Pythia, GPT-NeoX-20B): a fused `query_key_value` whose rows are
//! grouped per head (`[heads, 3, head_dim]`), partial rotary from `rotary_pct` (0.25 when
//! absent) and `rotary_emb_base`, LayerNorms with bias, a plain `dense_h_to_4h`/`dense_4h_to_h`
//! MLP, and a parallel block (the MLP with its own `post_attention_layernorm`) unless
//! `use_parallel_residual` is false.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["GPTNeoXForCausalLM"],
    model_types: &["gpt_neox"],
    config: ConfigSchema {
        keys: Keys {
            norm_eps: "layer_norm_eps",
            rope_theta: "rotary_emb_base",
            partial_rotary_factor: "rotary_pct",
            mlp_ratio: "",
            ..KEYS
        },
        defaults: Defaults {
            vocab_size: Some(50432),
            hidden_size: Some(6144),
            intermediate_size: Some(24576),
            num_hidden_layers: Some(44),
            num_attention_heads: Some(64),
            max_position_embeddings: Some(2048),
            norm_eps: 1e-5,
            activation: "gelu",
            bos_token_id: Some(0),
            eos_token_id: Some(2),
            ..NO_DEFAULTS
        },
        biases: Biases {
            qkv: Flag::KeyDefault("attention_bias", true),
            o: Flag::KeyDefault("attention_bias", true),
            mlp: Flag::Always,
            norm: Flag::Always,
            head: Flag::Never,
        },
        partial_rotary: Some(0.25),
        parallel: Some(Parallel { when: Flag::KeyDefault("use_parallel_residual", true), own_mlp_norm: true }),
        heads_divide_hidden: true,
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        roots: &["gpt_neox."],
        heads: &["embed_out"],
        embed: "embed_in",
        final_norm: "final_layer_norm",
        norm: NormKind::Layer,
        attention: AttentionLayout {
            prefix: "attention",
            qkv: Projections::FusedPerKvGroup("query_key_value"),
            out: "dense",
            qk_norm: QkNorm::None,
            unbiased_key: false,
            sinks: None,
            output_gate: false,
            v_norm: false,
        },
        mlp: MEGATRON_MLP,
        ..LLAMA_LAYOUT
    },
};

/// The plain MLP of the Megatron-descended families (GPT-NeoX, Falcon, Bloom).
pub const MEGATRON_MLP: MlpLayout =
    MlpLayout { prefix: "mlp", kind: MlpKind::Plain("dense_h_to_4h"), down: "dense_4h_to_h" };
