//! `Qwen2MoeForCausalLM`: Qwen2's attention, sparse experts plus a gated shared expert.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::qwen2::QWEN_DEFAULTS;
use super::qwen3_moe::QWEN_MOE_LAYOUT;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["Qwen2MoeForCausalLM"],
    model_types: &["qwen2_moe"],
    config: ConfigSchema {
        defaults: Defaults {
            hidden_size: Some(2048),
            intermediate_size: Some(5632),
            num_hidden_layers: Some(24),
            num_attention_heads: Some(16),
            num_key_value_heads: Some(16),
            ..QWEN_DEFAULTS
        },
        layers: LayerRule::EvenBelowMaxWindow,
        biases: Biases { qkv: Flag::KeyDefault("qkv_bias", true), ..NO_BIASES },
        moe: Some(MoeSchema {
            experts_keys: &["num_experts"],
            default_experts: 60,
            default_top_k: 4,
            intermediate: Some(("moe_intermediate_size", 1408)),
            normalize: NormTopK::Key(false),
            layers: MoeLayers::SparseStep,
            shared_expert: Some(SharedSize::Key("shared_expert_intermediate_size", 5632)),
            routing: RoutingRule::Softmax,
            glu: MoeGlu::Activation,
            biased: false,
            zero_experts_dense: false,
            beside_dense: false,
        }),
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        moe: Some(MoeLayout {
            shared: Some(SharedExpert {
                mlp: MlpLayout {
                    prefix: "mlp.shared_expert",
                    kind: MlpKind::Gated { gate: "gate_proj", up: "up_proj" },
                    down: "down_proj",
                },
                gate: Some("mlp.shared_expert_gate"),
            }),
            ..QWEN_MOE_LAYOUT
        }),
        ..LLAMA_LAYOUT
    },
};
