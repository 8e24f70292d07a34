//! `CohereForCausalLM` (Command R, Aya): a parallel block off one LayerNorm without bias,
//! rotate-every-two rotary, logits multiplied by `logit_scale`, and with `use_qk_norm` a
//! LayerNorm of each head's queries and keys whose weight has one row per head; and
//! `Cohere2ForCausalLM`, the same blocks with interleaved sliding-window layers.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["CohereForCausalLM"],
    model_types: &["cohere"],
    config: ConfigSchema {
        keys: Keys { norm_eps: "layer_norm_eps", ..KEYS },
        defaults: Defaults {
            vocab_size: Some(256000),
            hidden_size: Some(8192),
            intermediate_size: Some(22528),
            num_hidden_layers: Some(40),
            num_attention_heads: Some(64),
            max_position_embeddings: Some(8192),
            norm_eps: 1e-5,
            tie_word_embeddings: true,
            rope_theta: 500000.0,
            bos_token_id: Some(5),
            eos_token_id: Some(255001),
            pad_token_id: Some(0),
            ..NO_DEFAULTS
        },
        biases: Biases {
            qkv: Flag::Key("attention_bias"),
            o: Flag::Key("attention_bias"),
            mlp: Flag::Never,
            norm: Flag::Never,
            head: Flag::Never,
        },
        parallel: Some(Parallel { when: Flag::Always, own_mlp_norm: false }),
        qk_norm: Flag::Key("use_qk_norm"),
        logit_scale: Some(("logit_scale", 0.0625)),
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        interleaved_rotary: true,
        norm: NormKind::Layer,
        norms: LayerNorms { pre_attention: Some("input_layernorm"), ..NO_NORMS },
        attention: AttentionLayout { qk_norm: QkNorm::PerHeadRows(QK_NORMS), ..LLAMA_LAYOUT.attention },
        ..LLAMA_LAYOUT
    },
};

/// `Cohere2ForCausalLM` (Command R7B, Command A): Cohere's blocks without the q/k norm, three
/// sliding-window layers to one full (`sliding_window_pattern` or `layer_types`), and rotary on
/// the sliding layers only.
pub const COHERE2: Architecture = Architecture {
    classes: &["Cohere2ForCausalLM"],
    model_types: &["cohere2"],
    config: ConfigSchema {
        layers: LayerRule::Pattern {
            period: 4,
            pattern_keys: &["sliding_window_pattern"],
            default_window: 4096,
            last_full: false,
        },
        rope: RopeRule::SlidingOnly,
        qk_norm: Flag::Never,
        ..FAMILY.config
    },
    layout: FAMILY.layout,
};
