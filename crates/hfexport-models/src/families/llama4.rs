//! `Llama4ForCausalLM` and the text model of `Llama4ForConditionalGeneration` (Llama 4 Scout,
//! Maverick): Llama's blocks with every `no_rope_layer_interval`-th layer without rope (full
//! attention, its queries scaled by position with `attn_temperature_tuning`), the rotary
//! layers attending within chunks of `attention_chunk_size` positions with a weightless L2 norm
//! on q and k (`use_qk_norm`), rotary over complex (interleaved) channel pairs; MoE layers
//! (`moe_layers`, else every `interleave_moe_layer_step`-th) route each token to its top
//! `num_experts_per_tok` experts by logit, whose sigmoids scale the experts' *input*, beside an
//! always-on shared expert; dense layers are `intermediate_size_mlp` wide. The experts are
//! stored fused and transposed (`experts.gate_up_proj [E, hidden, 2 * inter]`).

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

const MLP: MlpLayout =
    MlpLayout { prefix: "feed_forward", kind: MlpKind::Gated { gate: "gate_proj", up: "up_proj" }, down: "down_proj" };

const LLAMA4_SCHEMA: ConfigSchema = ConfigSchema {
    // the dense layers' width; the experts' and the shared expert's is `intermediate_size`
    keys: Keys { intermediate_size: "intermediate_size_mlp", ..KEYS },
    defaults: Defaults {
        vocab_size: Some(202048),
        hidden_size: Some(5120),
        intermediate_size: Some(16384),
        num_hidden_layers: Some(48),
        num_attention_heads: Some(40),
        num_key_value_heads: Some(8),
        head_dim: Some(128),
        max_position_embeddings: Some(131072),
        norm_eps: 1e-5,
        rope_theta: 500_000.0,
        bos_token_id: Some(1),
        eos_token_id: Some(2),
        ..NO_DEFAULTS
    },
    layers: LayerRule::Chunked { default_chunk: 8192 },
    biases: ATTENTION_BIASES,
    rope: RopeRule::NoRopeLayersTuned,
    qk_norm: Flag::KeyDefault("use_qk_norm", true),
    moe: Some(MoeSchema {
        experts_keys: &["num_local_experts"],
        default_experts: 16,
        default_top_k: 1,
        intermediate: Some(("intermediate_size", 8192)),
        // the sigmoid weights are never renormalised (`SigmoidInput`)
        normalize: NormTopK::Key(false),
        layers: MoeLayers::ListedOrStep,
        shared_expert: Some(SharedSize::Key("intermediate_size", 8192)),
        routing: RoutingRule::SigmoidInput,
        glu: MoeGlu::Activation,
        biased: false,
        zero_experts_dense: false,
        beside_dense: false,
    }),
    ..LLAMA_SCHEMA
};

const LLAMA4_LAYOUT: Layout = Layout {
    interleaved_rotary: true,
    attention: AttentionLayout { qk_norm: QkNorm::UnitOnRotary, ..LLAMA_LAYOUT.attention },
    mlp: MLP,
    moe: Some(MoeLayout {
        prefix: "feed_forward",
        router: &["router"],
        correction: None,
        experts: "experts",
        gate: "gate_proj",
        up: "up_proj",
        down: "down_proj",
        fused_prefix: "feed_forward",
        fused: &[STACKED_EXPERTS],
        form: StackedForm::TransposedGateFirst,
        shared: Some(SharedExpert { mlp: MlpLayout { prefix: "feed_forward.shared_expert", ..MLP }, gate: None }),
        beside: None,
    }),
    ..LLAMA_LAYOUT
};

pub const CAUSAL_LM: Architecture = Architecture {
    classes: &["Llama4ForCausalLM"],
    model_types: &["llama4_text"],
    config: LLAMA4_SCHEMA,
    layout: LLAMA4_LAYOUT,
};

/// The text model of a Llama 4 image-text checkpoint (what the Hub's Llama 4 models are): read
/// from `text_config`, stored under `language_model.` beside the vision tower
/// (`vision_model.`) and the projector, which are not built.
pub const CONDITIONAL_GENERATION: Architecture = Architecture {
    classes: &["Llama4ForConditionalGeneration"],
    model_types: &["llama4"],
    config: ConfigSchema { text_config: true, ..LLAMA4_SCHEMA },
    layout: Layout { roots: &["language_model.model."], heads: &["language_model.lm_head"], ..LLAMA4_LAYOUT },
};
