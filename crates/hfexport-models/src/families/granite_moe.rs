//! `GraniteMoeForCausalLM` (Granite 3.0/3.1 MoE) and `GraniteMoeSharedForCausalLM`: Granite's
//! multipliers (embedding, attention, residual, logits) around Mixtral-like blocks whose
//! experts every layer routes to: the top `num_experts_per_tok` of `num_local_experts` by
//! logit, weighted by a softmax over the chosen ones (a renormalised top-k). The files store
//! the experts stacked, `block_sparse_moe.input_linear.weight` `[E, 2 x inter, hidden]` (gate
//! rows first) and `output_linear.weight`, the router as `router.layer` (transformers 5 renames
//! them in memory and back on save; both forms are read). The shared variant adds a dense
//! `shared_mlp` (fused `input_linear`, `output_linear`) of `shared_intermediate_size` (0: none),
//! ungated, to every layer's experts.

use super::granite::FAMILY as GRANITE;
use super::llama::LLAMA_LAYOUT;
use super::mixtral::MIXTRAL_MOE;
use super::qwen3_moe::QWEN_MOE_LAYOUT;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// Mixtral's, read from `num_local_experts` only.
const GRANITE_MOE_SCHEMA: MoeSchema = MoeSchema { experts_keys: &["num_local_experts"], ..MIXTRAL_MOE };

const GRANITE_MOE_LAYOUT: MoeLayout = MoeLayout {
    prefix: "block_sparse_moe",
    router: &["router.layer", "router"],
    fused_prefix: "block_sparse_moe",
    fused: &[["input_linear.weight", "output_linear.weight"], STACKED_EXPERTS],
    ..QWEN_MOE_LAYOUT
};

pub const GRANITE_MOE: Architecture = Architecture {
    classes: &["GraniteMoeForCausalLM"],
    model_types: &["granitemoe"],
    config: ConfigSchema { moe: Some(GRANITE_MOE_SCHEMA), ..GRANITE.config },
    layout: Layout { moe: Some(GRANITE_MOE_LAYOUT), ..LLAMA_LAYOUT },
};

pub const GRANITE_MOE_SHARED: Architecture = Architecture {
    classes: &["GraniteMoeSharedForCausalLM"],
    model_types: &["granitemoeshared"],
    config: ConfigSchema {
        moe: Some(MoeSchema {
            shared_expert: Some(SharedSize::Key("shared_intermediate_size", 0)),
            ..GRANITE_MOE_SCHEMA
        }),
        ..GRANITE_MOE.config
    },
    layout: Layout {
        moe: Some(MoeLayout {
            shared: Some(SharedExpert {
                mlp: MlpLayout {
                    prefix: "shared_mlp",
                    kind: MlpKind::GatedFused("input_linear"),
                    down: "output_linear",
                },
                gate: None,
            }),
            ..GRANITE_MOE_LAYOUT
        }),
        ..LLAMA_LAYOUT
    },
};
