//! `MixtralForCausalLM`: Mistral's attention with a sparse mixture-of-experts MLP (`block_sparse_moe`).

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::qwen3_moe::QWEN_MOE_LAYOUT;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// Every layer sparse over `num_local_experts` (an `attribute_map` makes `num_experts` the same
/// key), top-k always renormalised, experts as wide as `intermediate_size`.
pub const MIXTRAL_MOE: MoeSchema = MoeSchema {
    experts_keys: &["num_local_experts", "num_experts"],
    default_experts: 8,
    default_top_k: 2,
    intermediate: None,
    normalize: NormTopK::Always,
    layers: MoeLayers::Every,
    shared_expert: None,
    routing: RoutingRule::Softmax,
    glu: MoeGlu::Activation,
    biased: false,
    zero_experts_dense: false,
    beside_dense: false,
};

pub const FAMILY: Architecture = Architecture {
    classes: &["MixtralForCausalLM"],
    model_types: &["mixtral"],
    config: ConfigSchema {
        defaults: Defaults {
            intermediate_size: Some(14336),
            max_position_embeddings: Some(4096 * 32),
            num_key_value_heads: Some(8),
            rope_theta: 1_000_000.0,
            norm_eps: 1e-5,
            ..LLAMA_SCHEMA.defaults
        },
        layers: LayerRule::EveryLayer { default_window: None },
        biases: NO_BIASES,
        moe: Some(MIXTRAL_MOE),
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        moe: Some(MoeLayout { prefix: "block_sparse_moe", gate: "w1", up: "w3", down: "w2", ..QWEN_MOE_LAYOUT }),
        ..LLAMA_LAYOUT
    },
};
