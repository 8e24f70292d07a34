//! `FalconForCausalLM` (Falcon 7B/40B/180B, Falcon 2, the RefinedWeb models): one fused
//! `query_key_value` whose rows are grouped per KV head (`[q x heads/kv, k, v]`), LayerNorms
//! with bias, a plain `dense_h_to_4h`/`dense_4h_to_h` MLP, `bias` on every linear or none, and
//! two block designs. The old one (`new_decoder_architecture` false): one KV head when
//! `multi_query` (the default), else one per head, and a parallel block off
//! `input_layernorm` unless `parallel_attn` is false (then `post_attention_layernorm` before
//! the MLP). The new one: `num_kv_heads` grouped heads, always parallel, `ln_attn` and
//! `ln_mlp` (one `input_layernorm` when `num_ln_in_parallel_attn` is 1). Rotary over whole
//! heads, or ALiBi with `alibi` (in Falcon's bfloat16 arithmetic).

use super::gpt_neox::MEGATRON_MLP;
use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["FalconForCausalLM"],
    model_types: &["falcon"],
    config: ConfigSchema {
        keys: Keys {
            intermediate_size: "ffn_hidden_size",
            norm_eps: "layer_norm_epsilon",
            activation: &["activation"],
            ..KEYS
        },
        defaults: Defaults {
            vocab_size: Some(65024),
            hidden_size: Some(4544),
            intermediate_times_hidden: Some(4),
            num_hidden_layers: Some(32),
            num_attention_heads: Some(71),
            max_position_embeddings: Some(2048),
            norm_eps: 1e-5,
            activation: "gelu",
            tie_word_embeddings: true,
            bos_token_id: Some(11),
            eos_token_id: Some(11),
            ..NO_DEFAULTS
        },
        aliases: &[("hidden_size", "n_embed")],
        biases: Biases {
            qkv: Flag::Key("bias"),
            o: Flag::Key("bias"),
            mlp: Flag::Key("bias"),
            norm: Flag::Always,
            head: Flag::Never,
        },
        parallel: Some(Parallel { when: Flag::KeyDefault("parallel_attn", true), own_mlp_norm: false }),
        kv_heads: KvHeads::MultiQuery("multi_query", true),
        falcon_new_decoder: true,
        alibi: Some(AlibiRule { when: Flag::Key("alibi"), kind: Alibi::Falcon }),
        heads_divide_hidden: true,
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        roots: &["transformer.", ""],
        heads: &["lm_head"],
        embed: "word_embeddings",
        layers: "h",
        final_norm: "ln_f",
        norm: NormKind::Layer,
        norms: LayerNorms { own_parallel: Some(["ln_attn", "ln_mlp"]), ..PRE_NORMS },
        attention: AttentionLayout {
            prefix: "self_attention",
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
