//! `Ernie4_5ForCausalLM` (ERNIE-4.5-0.3B) and `Ernie4_5_MoeForCausalLM` (ERNIE-4.5-21B-A3B,
//! 300B-A47B): Llama's blocks with a bias on every linear when `use_bias` is set (q/k/v/o, the
//! MLPs, the MoE model's head too), rotary over interleaved channel pairs (transformers takes
//! the first half of cos/sin repeated pairwise with GLM's rotate-every-two), `head_dim` (128)
//! its own key. The MoE model's layers `i` with `(i + 1) % moe_layer_interval == 0` between
//! `moe_layer_start_index` and `moe_layer_end_index` are sparse: `moe_num_experts` unbiased
//! experts, the `moe_k` best by `softmax + moe_statics.e_score_correction_bias`, weighted by
//! their renormalised probabilities, plus `moe_num_shared_experts` experts' worth of shared
//! MLP (biased with `use_bias`). Multi-token prediction weights (`mtp*`) are not part of the
//! causal LM, as in transformers.

use super::deepseek::SHARED_EXPERTS;
use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::qwen3_moe::QWEN_MOE_LAYOUT;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

const USE_BIAS: Flag = Flag::Key("use_bias");

const ERNIE_SCHEMA: ConfigSchema = ConfigSchema {
    defaults: Defaults {
        vocab_size: Some(103424),
        hidden_size: Some(1024),
        intermediate_size: Some(3072),
        num_hidden_layers: Some(18),
        num_attention_heads: Some(16),
        num_key_value_heads: Some(2),
        head_dim: Some(128),
        max_position_embeddings: Some(131072),
        norm_eps: 1e-5,
        tie_word_embeddings: true,
        rope_theta: 500_000.0,
        pad_token_id: Some(0),
        bos_token_id: Some(1),
        eos_token_id: Some(2),
        ..NO_DEFAULTS
    },
    biases: Biases { qkv: USE_BIAS, o: USE_BIAS, mlp: USE_BIAS, norm: Flag::Never, head: Flag::Never },
    ..LLAMA_SCHEMA
};

const ERNIE_LAYOUT: Layout = Layout { interleaved_rotary: true, ..LLAMA_LAYOUT };

pub const FAMILY: Architecture = Architecture {
    classes: &["Ernie4_5ForCausalLM"],
    model_types: &["ernie4_5"],
    config: ERNIE_SCHEMA,
    layout: ERNIE_LAYOUT,
};

pub const MOE: Architecture = Architecture {
    classes: &["Ernie4_5_MoeForCausalLM"],
    model_types: &["ernie4_5_moe"],
    config: ConfigSchema {
        defaults: Defaults {
            hidden_size: Some(2560),
            intermediate_size: Some(12288),
            num_hidden_layers: Some(28),
            num_attention_heads: Some(20),
            num_key_value_heads: Some(4),
            // the MoE config class has no `head_dim`: hidden / heads unless a file sets one
            head_dim: None,
            ..ERNIE_SCHEMA.defaults
        },
        biases: Biases { head: USE_BIAS, ..ERNIE_SCHEMA.biases },
        aliases: &[("num_experts_per_tok", "moe_k")],
        moe: Some(MoeSchema {
            experts_keys: &["moe_num_experts"],
            default_experts: 64,
            default_top_k: 6,
            intermediate: Some(("moe_intermediate_size", 1536)),
            normalize: NormTopK::Always,
            layers: MoeLayers::Interval { interval: 1, start: 1, end: -1 },
            shared_expert: Some(SharedSize::ExpertsIfAny("moe_num_shared_experts", 2)),
            routing: RoutingRule::SoftmaxCorrected,
            glu: MoeGlu::Activation,
            biased: false,
            zero_experts_dense: false,
            beside_dense: false,
        }),
        ..ERNIE_SCHEMA
    },
    layout: Layout {
        moe: Some(MoeLayout {
            correction: Some("moe_statics.e_score_correction_bias"),
            shared: Some(SHARED_EXPERTS),
            ..QWEN_MOE_LAYOUT
        }),
        ..ERNIE_LAYOUT
    },
};
