//! `Mistral4ForCausalLM` (Mistral Small 4, Mistral Large 3's text model): DeepSeek-V3's decoder
//! (multi-head latent attention with its cache of the normed latent and the shared rotary key,
//! dense layers below `first_k_dense_replace`, shared experts) with three changes: the router
//! takes a softmax and chooses within the `topk_group` of `n_group` groups whose two best
//! probabilities sum highest, with no score correction; the rope dict's `partial_rotary_factor`
//! is a fraction of the whole query/key head (the config class sets `rope / (nope + rope)`);
//! and the queries are scaled by position as Llama 4's (`llama_4_scaling_beta` over
//! `original_max_position_embeddings` of the rope dict, which the class default, yarn over 8192
//! positions, sets). The `default` rope type is refused: transformers' default rotary ignores
//! the partial factor and its forward fails.

use super::deepseek::{DEEPSEEK_V2, DEEPSEEK_V3, V3_LATENT, V3_MOE};
use super::Architecture;
use crate::schema::*;

const V3: ConfigSchema = DEEPSEEK_V3.config;

pub const FAMILY: Architecture = Architecture {
    classes: &["Mistral4ForCausalLM"],
    model_types: &["mistral4"],
    config: ConfigSchema {
        defaults: Defaults {
            vocab_size: Some(131072),
            hidden_size: Some(4096),
            intermediate_size: Some(12288),
            num_hidden_layers: Some(36),
            num_attention_heads: Some(32),
            num_key_value_heads: Some(32),
            head_dim: Some(64),
            max_position_embeddings: Some(1048576),
            norm_eps: 1e-6,
            pad_token_id: Some(11),
            bos_token_id: Some(1),
            eos_token_id: Some(2),
            ..V3.defaults
        },
        default_rope: Some(
            r#"{"type": "yarn", "rope_theta": 10000.0, "factor": 128.0, "original_max_position_embeddings": 8192,
                "beta_fast": 32.0, "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0,
                "llama_4_scaling_beta": 0.1}"#,
        ),
        // transformers' default rope ignores the partial factor (its rotary then spans the
        // whole head, which the rotary channels do not match): its forward fails
        rope_types: Some(&["linear", "dynamic", "llama3", "yarn", "longrope"]),
        latent: Some(LatentRule {
            q_lora_rank: Some(1024),
            kv_lora_rank: 256,
            nope_head_dim: 64,
            v_head_dim: 128,
            partial_of_head: true,
            llama4_query_scale: true,
            ..V3_LATENT
        }),
        moe: Some(MoeSchema {
            default_experts: 128,
            default_top_k: 4,
            intermediate: Some(("moe_intermediate_size", 2048)),
            layers: MoeLayers::FirstDense("first_k_dense_replace", 0),
            routing: RoutingRule::Grouped { score: RouterScore::SoftmaxTwoBest, groups: 1, top_groups: 1, scale: 1.0 },
            ..V3_MOE
        }),
        ..V3
    },
    // DeepSeek's names, without V3's routing correction
    layout: DEEPSEEK_V2.layout,
};
