//! `GPT2LMHeadModel`: LayerNorm, Conv1D projections, learned positions.

use super::llama::LLAMA_SCHEMA;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["GPT2LMHeadModel"],
    model_types: &["gpt2"],
    config: ConfigSchema {
        keys: Keys {
            hidden_size: "n_embd",
            intermediate_size: "n_inner",
            num_hidden_layers: "n_layer",
            num_attention_heads: "n_head",
            max_position_embeddings: "n_positions",
            norm_eps: "layer_norm_epsilon",
            activation: &["activation_function"],
            activation_rewrites: &[],
            layers_fallback: None,
            head_dim: "head_dim",
            rope_theta: "rope_theta",
            partial_rotary_factor: "partial_rotary_factor",
        },
        defaults: Defaults {
            vocab_size: Some(50257),
            hidden_size: Some(768),
            intermediate_size: None,
            intermediate_times_hidden: Some(4),
            num_hidden_layers: Some(12),
            num_attention_heads: Some(12),
            max_position_embeddings: Some(1024),
            norm_eps: 1e-5,
            activation: "gelu_new",
            tie_word_embeddings: true,
            bos_token_id: Some(50256),
            eos_token_id: Some(50256),
            ..NO_DEFAULTS
        },
        biases: Biases { qkv: Flag::Always, o: Flag::Always, mlp: Flag::Always, norm: Flag::Always, head: Flag::Never },
        scale: ScaleRule::Gpt2 { by_layer_key: true },
        rope: RopeRule::None,
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        roots: &["transformer.", ""],
        heads: &["lm_head"],
        interleaved_rotary: false,
        embed: "wte",
        position_embed: Some("wpe"),
        embed_norm: None,
        position_offset: 0,
        positions_from_mask: false,
        embed_projections: None,
        layers: "h",
        final_norm: "ln_f",
        norm: NormKind::Layer,
        norms: LayerNorms { pre_attention: Some("ln_1"), post_attention: None, pre_mlp: Some("ln_2"), ..NO_NORMS },
        attention: AttentionLayout {
            prefix: "attn",
            qkv: Projections::FusedConv1d("c_attn"),
            out: "c_proj",
            qk_norm: QkNorm::None,
            unbiased_key: false,
            sinks: None,
            output_gate: false,
            v_norm: false,
        },
        mlp: MlpLayout { prefix: "mlp", kind: MlpKind::PlainConv1d("c_fc"), down: "c_proj" },
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
        ssm: None,
    },
};
