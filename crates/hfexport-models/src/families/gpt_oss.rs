//! `GptOssForCausalLM` (gpt-oss-20b, gpt-oss-120b): Llama's pre-norm layers with biased
//! attention projections, a learned sink logit per head in every softmax (`self_attn.sinks`),
//! sliding and full layers alternating (`layer_types`, else the even layers slide), yarn rope
//! by class default, and a mixture of experts in every layer: a biased router whose top
//! `num_experts_per_tok` logits are softmaxed, and biased experts stored stacked and
//! transposed, gate and up in alternate columns, through the clamped SwiGLU
//! (`swiglu_alpha`, `swiglu_limit`). Hub checkpoints keep the experts as MXFP4 blocks
//! (`quantization_config.quant_method: mxfp4`), decoded as transformers dequantizes them.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::mixtral::MIXTRAL_MOE;
use super::qwen3_moe::QWEN_MOE_LAYOUT;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["GptOssForCausalLM"],
    model_types: &["gpt_oss"],
    config: ConfigSchema {
        defaults: Defaults {
            vocab_size: Some(201088),
            hidden_size: Some(2880),
            intermediate_size: Some(2880),
            num_hidden_layers: Some(36),
            num_attention_heads: Some(64),
            num_key_value_heads: Some(8),
            head_dim: Some(64),
            max_position_embeddings: Some(131072),
            norm_eps: 1e-5,
            rope_theta: 150_000.0,
            ..LLAMA_SCHEMA.defaults
        },
        // `layer_types`, else sliding where `(i + 1) % 2` (the even layers)
        layers: LayerRule::Pattern { period: 2, pattern_keys: &[], default_window: 128, last_full: false },
        biases: Biases {
            qkv: Flag::KeyDefault("attention_bias", true),
            o: Flag::KeyDefault("attention_bias", true),
            ..NO_BIASES
        },
        default_rope: Some(
            r#"{"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false,
                "original_max_position_embeddings": 4096}"#,
        ),
        // Mixtral's routing (a softmax over the chosen logits is the renormalised top-k of the
        // full softmax), with biases and the clamped SwiGLU
        moe: Some(MoeSchema {
            default_experts: 128,
            default_top_k: 4,
            glu: MoeGlu::Clamped { alpha: ("swiglu_alpha", 1.702), limit: ("swiglu_limit", 7.0) },
            biased: true,
            zero_experts_dense: false,
            beside_dense: false,
            ..MIXTRAL_MOE
        }),
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        attention: AttentionLayout { sinks: Some("sinks"), ..LLAMA_LAYOUT.attention },
        moe: Some(MoeLayout { router: &["router"], form: StackedForm::TransposedInterleaved, ..QWEN_MOE_LAYOUT }),
        ..LLAMA_LAYOUT
    },
};
