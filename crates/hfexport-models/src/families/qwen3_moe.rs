//! `Qwen3MoeForCausalLM`: Qwen3's attention with a sparse mixture-of-experts MLP.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::qwen2::QWEN_DEFAULTS;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const QWEN_MOE_LAYOUT: MoeLayout = MoeLayout {
    prefix: "mlp",
    router: &["gate"],
    correction: None,
    experts: "experts",
    gate: "gate_proj",
    up: "up_proj",
    down: "down_proj",
    fused_prefix: "mlp",
    fused: &[STACKED_EXPERTS],
    form: StackedForm::GateRowsFirst,
    shared: None,
    beside: None,
};

pub const FAMILY: Architecture = Architecture {
    classes: &["Qwen3MoeForCausalLM"],
    model_types: &["qwen3_moe"],
    config: ConfigSchema {
        defaults: Defaults {
            hidden_size: Some(2048),
            intermediate_size: Some(6144),
            num_hidden_layers: Some(24),
            num_key_value_heads: Some(4),
            ..QWEN_DEFAULTS
        },
        layers: LayerRule::UniformWhenUsed { default_window: 4096 },
        biases: ATTENTION_BIASES,
        moe: Some(MoeSchema {
            experts_keys: &["num_local_experts", "num_experts"],
            default_experts: 128,
            default_top_k: 8,
            intermediate: Some(("moe_intermediate_size", 768)),
            normalize: NormTopK::Key(false),
            layers: MoeLayers::SparseStep,
            shared_expert: None,
            routing: RoutingRule::Softmax,
            glu: MoeGlu::Activation,
            biased: false,
            zero_experts_dense: false,
            beside_dense: false,
        }),
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        attention: AttentionLayout { qk_norm: QkNorm::PerHead(QK_NORMS), ..LLAMA_LAYOUT.attention },
        moe: Some(QWEN_MOE_LAYOUT),
        ..LLAMA_LAYOUT
    },
};
