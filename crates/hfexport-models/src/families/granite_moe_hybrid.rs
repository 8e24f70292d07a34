//! `GraniteMoeHybridForCausalLM` (Granite 4.0, `GraniteMoeHybridConfig`): Granite's
//! multipliers around layers that are either a Mamba2 mixer (Bamba's, under `mamba`: the
//! `mamba_*` keys, `rms_norm_eps` for its gated norm) or GraniteMoeShared's attention, as
//! `layer_types` says (legacy `layers_block_type`, `mamba` / `attention`); every layer then has
//! the shared MLP (`shared_mlp`, fused `input_linear`, of `shared_intermediate_size`) plus,
//! when `num_local_experts` is not 0, GraniteMoe's experts (of `intermediate_size`). Rotary
//! only with `position_embedding_type` `"rope"`; otherwise the attention has no position
//! encoding.

use super::granite_moe::GRANITE_MOE_SHARED;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// Bamba's mixer as `GraniteMoeHybridConfig` names its keys.
pub(super) const GRANITE_HYBRID_MAMBA: Mamba2Keys = Mamba2Keys {
    heads: ("mamba_n_heads", 128),
    head_dim: ("mamba_d_head", None),
    groups: ("mamba_n_groups", 1),
    state: ("mamba_d_state", 256),
    conv_kernel: ("mamba_d_conv", 4),
    expand: ("mamba_expand", 2),
    conv_bias: ("mamba_conv_bias", true),
    bias: ("mamba_proj_bias", false),
    out_bias: None,
    inner: None,
    norm: None,
};

const SHARED_MLP: MlpLayout =
    MlpLayout { prefix: "shared_mlp", kind: MlpKind::GatedFused("input_linear"), down: "output_linear" };

pub const FAMILY: Architecture = Architecture {
    classes: &["GraniteMoeHybridForCausalLM"],
    model_types: &["granitemoehybrid"],
    config: ConfigSchema {
        keys: Keys { intermediate_size: "shared_intermediate_size", ..GRANITE_MOE_SHARED.config.keys },
        defaults: Defaults {
            intermediate_size: Some(1024),
            max_position_embeddings: Some(2048),
            ..GRANITE_MOE_SHARED.config.defaults
        },
        rope: RopeRule::WhenKey { key: "position_embedding_type", value: "rope" },
        aliases: &[("layer_types", "layers_block_type")],
        moe: Some(MoeSchema {
            intermediate: Some(("intermediate_size", 11008)),
            zero_experts_dense: true,
            beside_dense: false,
            ..match GRANITE_MOE_SHARED.config.moe {
                Some(m) => m,
                None => panic!("GraniteMoeShared has experts"),
            }
        }),
        ssm: Some(SsmRule {
            mixer: SsmMixer::Mamba2(&GRANITE_HYBRID_MAMBA),
            layers: SsmLayers::LayerTypes { kind: "linear_attention", attention: None },
        }),
        ..GRANITE_MOE_SHARED.config
    },
    layout: Layout { mlp: SHARED_MLP, ssm: Some("mamba"), ..GRANITE_MOE_SHARED.layout },
};
