//! `GPTJForCausalLM` (GPT-J): a parallel block off one LayerNorm (`ln_1`), rotate-every-two
//! rotary over the first `rotary_dim` channels of each head at a fixed base of 10000 (no rope
//! keys), unbiased `q/k/v_proj` and `out_proj`, a plain `fc_in`/`fc_out` MLP and a biased head.

use super::gpt2::FAMILY as GPT2;
use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["GPTJForCausalLM"],
    model_types: &["gptj"],
    config: ConfigSchema {
        keys: GPT2.config.keys,
        defaults: Defaults {
            vocab_size: Some(50400),
            hidden_size: Some(4096),
            intermediate_times_hidden: Some(4),
            num_hidden_layers: Some(28),
            num_attention_heads: Some(16),
            max_position_embeddings: Some(2048),
            norm_eps: 1e-5,
            activation: "gelu_new",
            bos_token_id: Some(50256),
            eos_token_id: Some(50256),
            ..NO_DEFAULTS
        },
        biases: Biases { qkv: Flag::Never, o: Flag::Never, mlp: Flag::Always, norm: Flag::Always, head: Flag::Always },
        rope: RopeRule::Fixed { dim_key: "rotary_dim", default_dim: Some(64) },
        parallel: Some(Parallel { when: Flag::Always, own_mlp_norm: false }),
        heads_divide_hidden: true,
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        roots: &["transformer."],
        interleaved_rotary: true,
        embed: "wte",
        layers: "h",
        final_norm: "ln_f",
        norm: NormKind::Layer,
        norms: LayerNorms { pre_attention: Some("ln_1"), ..NO_NORMS },
        attention: AttentionLayout {
            prefix: "attn",
            qkv: Projections::Separate { q: "q_proj", k: "k_proj", v: "v_proj" },
            out: "out_proj",
            qk_norm: QkNorm::None,
            unbiased_key: false,
            sinks: None,
            output_gate: false,
            v_norm: false,
        },
        mlp: MlpLayout { prefix: "mlp", kind: MlpKind::Plain("fc_in"), down: "fc_out" },
        ..LLAMA_LAYOUT
    },
};
