//! `OlmoeForCausalLM` (OLMoE): OLMo's q/k RMSNorm over the whole projection, and a sparse
//! mixture-of-experts MLP in every layer (64 experts, top-8, weights not renormalised unless
//! `norm_topk_prob`). `clip_qkv` (a clamp of q, k and v) is refused when set.

use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::mixtral::MIXTRAL_MOE;
use super::qwen3_moe::QWEN_MOE_LAYOUT;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["OlmoeForCausalLM"],
    model_types: &["olmoe"],
    config: ConfigSchema {
        keys: KEYS,
        defaults: Defaults {
            vocab_size: Some(50304),
            hidden_size: Some(2048),
            intermediate_size: Some(2048),
            num_hidden_layers: Some(16),
            num_attention_heads: Some(16),
            max_position_embeddings: Some(4096),
            norm_eps: 1e-5,
            eos_token_id: Some(50279),
            pad_token_id: Some(1),
            ..NO_DEFAULTS
        },
        biases: ATTENTION_BIASES,
        moe: Some(MoeSchema { default_experts: 64, default_top_k: 8, normalize: NormTopK::Key(false), ..MIXTRAL_MOE }),
        refused: &["clip_qkv"],
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        attention: AttentionLayout { qk_norm: QkNorm::Whole(QK_NORMS), ..LLAMA_LAYOUT.attention },
        moe: Some(QWEN_MOE_LAYOUT),
        ..LLAMA_LAYOUT
    },
};
