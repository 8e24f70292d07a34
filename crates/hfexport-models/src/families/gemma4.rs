//! `Gemma4ForCausalLM`: Gemma 3's sandwich norms with plain (`w`, not `1 + w`) RMS norms, unit
//! attention scale and weightless value norms; head sizes and KV heads that differ by layer
//! (`per_layer_config`, else `global_head_dim` for the full-attention layers), a proportional
//! rope on those, their values from the key projection (`attention_k_eq_v`); the last
//! `num_kv_shared_layers` reusing earlier layers' keys and values (their MLP twice as wide with
//! `use_double_wide_mlp`); per-layer embeddings (PLE) and a stored factor per layer; with
//! `enable_moe_block`, experts beside every layer's dense MLP, routed on their own norm of the
//! residual and weighed by `per_expert_scale`.

use super::gemma::GEMMA_DEFAULTS;
use super::gemma2::SANDWICH_NORMS;
use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `Gemma4TextConfig`'s rope when the file has none: the sliding layers' default rope, the
/// full layers' proportional one over a quarter of their head.
const GEMMA4_ROPE: &str = r#"{
    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}
}"#;

pub const GEMMA4_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys { activation: &["hidden_activation"], ..KEYS },
    defaults: Defaults {
        vocab_size: Some(262_144),
        hidden_size: Some(2304),
        intermediate_size: Some(9216),
        num_hidden_layers: Some(30),
        num_attention_heads: Some(8),
        num_key_value_heads: Some(4),
        max_position_embeddings: Some(131_072),
        query_pre_attn_scalar: None,
        ..GEMMA_DEFAULTS
    },
    layers: LayerRule::Pattern { period: 6, pattern_keys: &[], default_window: 512, last_full: true },
    biases: ATTENTION_BIASES,
    scale: ScaleRule::One,
    embedding_scale: EmbeddingScale::SqrtHidden,
    rope: RopeRule::PerLayerType { global_theta: None, local_theta: "rope_local_base_freq" },
    default_rope: Some(GEMMA4_ROPE),
    softcapping: Softcapping { attention: false, logits: true },
    aliases: &[("num_experts_per_tok", "top_k_experts")],
    moe: Some(MoeSchema {
        experts_keys: &["num_experts"],
        // the class defaults are null: required once `enable_moe_block` is set
        default_experts: 0,
        default_top_k: 0,
        intermediate: Some(("moe_intermediate_size", 0)),
        normalize: NormTopK::Always,
        layers: MoeLayers::WhenKey("enable_moe_block"),
        shared_expert: None,
        routing: RoutingRule::Softmax,
        glu: MoeGlu::Activation,
        biased: false,
        zero_experts_dense: false,
        beside_dense: true,
    }),
    per_layer_heads: Some(PerLayerHeads {
        global_head_dim: ("global_head_dim", 512),
        global_kv_heads: "num_global_key_value_heads",
    }),
    values_from_keys: Some("attention_k_eq_v"),
    kv_sharing: Some(KvSharing { layers: ("num_kv_shared_layers", 0), wide_mlp: Some("use_double_wide_mlp") }),
    per_layer_inputs: Some(PerLayerInputKeys {
        size: ("hidden_size_per_layer_input", 256),
        vocab: ("vocab_size_per_layer_input", 262_144),
    }),
    ..LLAMA_SCHEMA
};

pub const GEMMA4_LAYOUT: Layout = Layout {
    norm: NormKind::Rms,
    norms: SANDWICH_NORMS,
    attention: AttentionLayout { qk_norm: QkNorm::PerHead(QK_NORMS), v_norm: true, ..LLAMA_LAYOUT.attention },
    per_layer_inputs: Some(PerLayerInputLayout {
        embed: "embed_tokens_per_layer",
        projection: "per_layer_model_projection",
        projection_norm: "per_layer_projection_norm",
        gate: "per_layer_input_gate",
        up: "per_layer_projection",
        norm: "post_per_layer_input_norm",
    }),
    layer_scalar: Some("layer_scalar"),
    moe: Some(MoeLayout {
        prefix: "",
        router: &["router.proj"],
        correction: None,
        experts: "experts",
        gate: "gate_proj",
        up: "up_proj",
        down: "down_proj",
        fused_prefix: "",
        fused: &[STACKED_EXPERTS],
        form: StackedForm::GateRowsFirst,
        shared: None,
        beside: Some(BesideDense {
            router_scale: "router.scale",
            expert_scale: "router.per_expert_scale",
            pre_norm: "pre_feedforward_layernorm_2",
            dense_norm: "post_feedforward_layernorm_1",
            experts_norm: "post_feedforward_layernorm_2",
        }),
    }),
    ..LLAMA_LAYOUT
};

pub const CAUSAL_LM: Architecture = Architecture {
    classes: &["Gemma4ForCausalLM"],
    model_types: &["gemma4_text"],
    config: GEMMA4_SCHEMA,
    layout: GEMMA4_LAYOUT,
};

/// The text model of a `Gemma4ForConditionalGeneration` checkpoint (the hub's Gemma 4 models):
/// read from `text_config`, stored under `model.language_model.`, the head tied or `lm_head`;
/// the media placeholders (`image_token_id`, `video_token_id`, `audio_token_id`) embedded as
/// the padding token, as its text-only forward does. The vision and audio towers are not built
/// (the export says so).
pub const CONDITIONAL_GENERATION: Architecture = Architecture {
    classes: &["Gemma4ForConditionalGeneration"],
    model_types: &["gemma4"],
    config: ConfigSchema {
        text_config: true,
        placeholders: &[("image_token_id", 258_880), ("video_token_id", 258_884), ("audio_token_id", 258_881)],
        ..GEMMA4_SCHEMA
    },
    layout: Layout { roots: &["model.language_model."], heads: &["lm_head"], ..GEMMA4_LAYOUT },
};
