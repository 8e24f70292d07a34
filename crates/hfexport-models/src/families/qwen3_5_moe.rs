//! `Qwen3_5MoeForCausalLM` (Qwen3.5-MoE's text model, `Qwen3_5MoeTextConfig`) and the text
//! model of `Qwen3_5MoeForConditionalGeneration` checkpoints: Qwen3.5's layers with a sparse
//! MLP in every layer (no dense MLP, so no `intermediate_size`, `decoder_sparse_step` or
//! `mlp_only_layers`): a softmax router always renormalised over its top-k, the experts, and
//! Qwen3-Next's shared expert behind its sigmoid gate.

use super::qwen2_moe::FAMILY as QWEN2_MOE;
use super::qwen3_5::FAMILY as QWEN3_5;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["Qwen3_5MoeForCausalLM"],
    model_types: &["qwen3_5_moe_text"],
    config: ConfigSchema {
        defaults: Defaults {
            hidden_size: Some(2048),
            num_hidden_layers: Some(40),
            num_key_value_heads: Some(2),
            ..QWEN3_5.config.defaults
        },
        moe: Some(MoeSchema {
            experts_keys: &["num_experts"],
            default_experts: 256,
            default_top_k: 8,
            intermediate: Some(("moe_intermediate_size", 512)),
            normalize: NormTopK::Always,
            layers: MoeLayers::Every,
            shared_expert: Some(SharedSize::Key("shared_expert_intermediate_size", 512)),
            routing: RoutingRule::Softmax,
            glu: MoeGlu::Activation,
            biased: false,
            zero_experts_dense: false,
            beside_dense: false,
        }),
        ..QWEN3_5.config
    },
    layout: Layout { moe: QWEN2_MOE.layout.moe, ..QWEN3_5.layout },
};

/// The text model of a Qwen3.5-MoE image-text checkpoint, as [`super::qwen3_5::CONDITIONAL_GENERATION`].
pub const CONDITIONAL_GENERATION: Architecture = Architecture {
    classes: &["Qwen3_5MoeForConditionalGeneration"],
    model_types: &["qwen3_5_moe"],
    config: ConfigSchema { text_config: true, ..FAMILY.config },
    layout: Layout { roots: &["model.language_model."], ..FAMILY.layout },
};
