//! `Qwen3NextForCausalLM` (Qwen3-Next, `Qwen3NextConfig`): a hybrid of gated DeltaNet layers
//! (`linear_attn`, [`crate::config::Mixer::GatedDeltaNet`], its fused `in_proj_qkvz` /
//! `in_proj_ba` laid out per key head) and gated attention (`self_attn`: `q_proj` gives each
//! head's query and output gate, zero-centred per-head q/k norms, partial rotary, 0.25 by
//! default) by `layer_types` (`linear_attention` / `full_attention`; without it every
//! `full_attention_interval`-th layer attends); every RMSNorm zero-centred (`1 + w`); Qwen2-MoE's
//! sparse MLP with its gated shared expert on the layers `decoder_sparse_step` and
//! `mlp_only_layers` choose.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::qwen2::QWEN_DEFAULTS;
use super::qwen2_moe::FAMILY as QWEN2_MOE;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// What Qwen3-Next and Qwen3.5 share: the layer pattern, the rotary, the norms, the attention.
pub const QWEN3_NEXT_SCHEMA: ConfigSchema = ConfigSchema {
    defaults: Defaults {
        hidden_size: Some(2048),
        intermediate_size: Some(5632),
        num_hidden_layers: Some(48),
        num_attention_heads: Some(16),
        num_key_value_heads: Some(2),
        head_dim: Some(256),
        norm_eps: 1e-6,
        ..QWEN_DEFAULTS
    },
    biases: ATTENTION_BIASES,
    partial_rotary: Some(0.25),
    ssm: Some(SsmRule {
        mixer: SsmMixer::GatedDeltaNet(DeltaNetProjections::Fused),
        layers: SsmLayers::Interval { kind: "linear_attention", interval: ("full_attention_interval", 4) },
    }),
    ..LLAMA_SCHEMA
};

pub const QWEN3_NEXT_LAYOUT: Layout = Layout {
    norm: NormKind::RmsOnePlus,
    attention: AttentionLayout { qk_norm: QkNorm::PerHead(QK_NORMS), output_gate: true, ..LLAMA_LAYOUT.attention },
    ssm: Some("linear_attn"),
    ..LLAMA_LAYOUT
};

pub const FAMILY: Architecture = Architecture {
    classes: &["Qwen3NextForCausalLM"],
    model_types: &["qwen3_next"],
    config: ConfigSchema {
        moe: match QWEN2_MOE.config.moe {
            Some(m) => Some(MoeSchema {
                default_experts: 512,
                default_top_k: 10,
                intermediate: Some(("moe_intermediate_size", 512)),
                normalize: NormTopK::Key(true),
                shared_expert: Some(SharedSize::Key("shared_expert_intermediate_size", 512)),
                ..m
            }),
            None => panic!("Qwen2-MoE has experts"),
        },
        ..QWEN3_NEXT_SCHEMA
    },
    layout: Layout { moe: QWEN2_MOE.layout.moe, ..QWEN3_NEXT_LAYOUT },
};
