//! The config reader on the decoder families of issue 33 (Phi, GPT-NeoX, GPTBigCode, GPT-J,
//! Cohere, StableLM, Starcoder2), on committed Hub configs where there is one.

use super::*;
use crate::schema::Alibi;

#[test]
fn every_layer_windows_do_not_read_layer_types() {
    // Mixtral and Starcoder2 apply `sliding_window` to every layer; only a `mistral` config is
    // read as Ministral when it has `layer_types` (AutoConfig's rewrite)
    let types = r#"{"sliding_window": 8,
        "layer_types": ["full_attention", "sliding_attention", "full_attention", "sliding_attention"]}"#;
    for (class, model_type) in [("MixtralForCausalLM", "mixtral"), ("Starcoder2ForCausalLM", "starcoder2")] {
        let c = family(class, model_type, types).unwrap();
        assert_eq!((kinds(&c).as_slice(), c.sliding_window()), (&[LayerType::Sliding; 4][..], Some(8)));
        let c = family(class, model_type, "{}").unwrap();
        assert_eq!(c.sliding_window(), None, "{class}: no window by default");
    }
}

/// Phi-2's config.json as the Hub has it (committed): top-level `partial_rotary_factor` and
/// `rope_theta`, `qk_layernorm` false.
#[test]
fn phi2_hub_config_reads_as_phi() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hub/phi2/config.json");
    let c = ModelConfig::from_json_str(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
    let a = c.layers[0].attention().unwrap();
    assert_eq!((a.heads, a.kv_heads, a.head_dim), (32, 32, 80));
    assert_eq!(a.rope.as_ref().map(|r| r.dim), Some(32), "int(80 * 0.4) rotated channels");
    assert_eq!(c.parallel, Some(ParallelMlpInput::AttentionInput));
    assert!(!c.qk_norm && c.attention_bias && c.o_bias && c.mlp_bias && c.norm_bias);
    assert_eq!((c.norm_eps, c.hidden_act.as_str(), c.tie_word_embeddings), (1e-5, "gelu_new", false));
    // without the key, PhiConfig's default factor 0.5 applies; qk_layernorm turns the norms on
    let c = family("PhiForCausalLM", "phi", r#"{"qk_layernorm": true}"#).unwrap();
    assert_eq!((c.layers[0].attention().unwrap().rope.as_ref().map(|r| r.dim), c.qk_norm), (Some(8), true));
    config_err(family("PhiForCausalLM", "phi", r#"{"partial_rotary_factor": 0.1}"#), "partial_rotary_factor");
}

/// A Pythia config.json as the Hub has it (committed): `rotary_pct`, `rotary_emb_base`,
/// `use_parallel_residual`; then the other forms GPT-NeoX and GPTBigCode configs take.
#[test]
fn gpt_neox_and_bigcode_configs_follow_their_class() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hub/pythia/config.json");
    let c = ModelConfig::from_json_str(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
    let a = c.layers[0].attention().unwrap();
    assert_eq!((a.heads, a.kv_heads, a.head_dim), (8, 8, 64));
    assert_eq!(a.rope.as_ref().map(|r| (r.dim, r.theta)), Some((16, 10000.0)), "int(64 * 0.25) channels");
    assert_eq!(c.parallel, Some(ParallelMlpInput::OwnNorm));
    assert!(c.attention_bias && c.o_bias && c.mlp_bias && c.norm_bias);
    // a rope dict's own keys win over rotary_pct / rotary_emb_base; sequential when told so
    let neox = |extra: &str| family("GPTNeoXForCausalLM", "gpt_neox", extra);
    let c = neox(
        r#"{"head_dim": null, "num_key_value_heads": null, "use_parallel_residual": false, "rotary_pct": 0.5,
            "rotary_emb_base": 500.0, "rope_parameters": {"rope_type": "default", "rope_theta": 20.0}}"#,
    )
    .unwrap();
    let rope = c.layers[0].attention().unwrap().rope.clone().unwrap();
    assert_eq!((rope.dim, rope.theta, c.parallel), (8, 20.0, None));
    // GPTBigCode: one KV head unless multi_query is false
    let bigcode = |extra: &str| {
        let base = r#"{"architectures": ["GPTBigCodeForCausalLM"], "model_type": "gpt_bigcode", "vocab_size": 64,
            "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 16}"#;
        parse(&json_with(base, extra))
    };
    let kv = |c: ModelConfig| c.layers[0].attention().unwrap().kv_heads;
    assert_eq!((kv(bigcode("{}").unwrap()), kv(bigcode(r#"{"multi_query": false}"#).unwrap())), (1, 4));
    config_err(bigcode(r#"{"n_embd": 30}"#), "n_embd");
}

/// GPT-J's rope is fixed: `rotary_dim` (class default 64) channels at base 10000, rope keys
/// unread; a count the head cannot hold is refused naming the key.
#[test]
fn gptj_rotary_dim_is_its_only_rope_key() {
    let gptj = |extra: &str| {
        let base = r#"{"architectures": ["GPTJForCausalLM"], "model_type": "gptj", "vocab_size": 64,
            "n_embd": 512, "n_layer": 2, "n_head": 4, "n_positions": 16}"#;
        parse(&json_with(base, extra))
    };
    let rope = |c: ModelConfig| c.layers[0].attention().unwrap().rope.clone().unwrap();
    let r = rope(gptj(r#"{"rope_scaling": {"rope_type": "linear", "factor": 4.0}, "rope_theta": 5.0}"#).unwrap());
    assert_eq!((r.dim, r.theta, r.scaling), (64, 10000.0, RopeScaling::Default));
    assert_eq!(rope(gptj(r#"{"rotary_dim": 32}"#).unwrap()).dim, 32);
    config_err(gptj(r#"{"rotary_dim": 130}"#), "rotary_dim");
    config_err(gptj(r#"{"rotary_dim": 7}"#), "rotary_dim");
    // json_with drops a null key: spelled out
    let base = r#"{"architectures": ["GPTJForCausalLM"], "model_type": "gptj", "vocab_size": 64,
        "n_embd": 512, "n_layer": 2, "n_head": 4, "n_positions": 16, "rotary_dim": null}"#;
    config_err(parse(base), "rotary_dim");
}

/// Cohere's `logit_scale` (class default 0.0625) becomes the logits' divisor; StableLM's partial
/// rotary defaults to 0.25 and its parallel block and per-head norms follow their keys.
#[test]
fn cohere_and_stablelm_configs_follow_their_class() {
    let cohere = |extra: &str| family("CohereForCausalLM", "cohere", extra);
    assert_eq!(cohere("{}").unwrap().logits_scaling, Some(16.0));
    assert_eq!(cohere(r#"{"logit_scale": 0.5}"#).unwrap().logits_scaling, Some(2.0));
    let c = cohere(r#"{"use_qk_norm": true}"#).unwrap();
    assert!(c.qk_norm && !c.norm_bias && c.parallel == Some(ParallelMlpInput::AttentionInput));
    config_err(cohere(r#"{"logit_scale": -1.0}"#), "logit_scale");
    let stablelm = |extra: &str| family("StableLmForCausalLM", "stablelm", extra);
    let c = stablelm("{}").unwrap();
    assert_eq!(
        (c.layers[0].attention().unwrap().rope.as_ref().map(|r| r.dim), c.parallel, c.qk_norm),
        (Some(4), None, false)
    );
    let c = stablelm(r#"{"use_parallel_residual": true, "qk_layernorm": true, "use_qkv_bias": true}"#).unwrap();
    assert_eq!(
        (c.parallel, c.qk_norm, c.attention_bias, c.o_bias),
        (Some(ParallelMlpInput::AttentionInput), true, true, false)
    );
}

/// OLMoE: every layer sparse, experts' size from `intermediate_size`; a set `clip_qkv` is refused
/// naming the key (null is no clamp).
#[test]
fn olmoe_configs_follow_their_class() {
    let olmoe = |extra: &str| family("OlmoeForCausalLM", "olmoe", extra);
    let c = olmoe(r#"{"num_experts": 6, "num_experts_per_tok": 2}"#).unwrap();
    let moe = c.moe.clone().unwrap();
    assert_eq!((moe.num_experts, moe.top_k, moe.intermediate_size, moe.normalize()), (6, 2, 96, false));
    assert_eq!(sparse(&c), [true; 4]);
    assert!(olmoe(r#"{"clip_qkv": null}"#).is_ok());
    let e = config_err(olmoe(r#"{"clip_qkv": 8.0}"#), "clip_qkv");
    assert!(e.contains("not supported"), "{e}");
}

/// GLM and GLM-4: head size 128 and half of it rotary unless said; q/k/v biased by default.
#[test]
fn glm_configs_follow_their_class() {
    for (class, model_type) in [("GlmForCausalLM", "glm"), ("Glm4ForCausalLM", "glm4")] {
        let c = family(class, model_type, r#"{"head_dim": null}"#).unwrap();
        let a = c.layers[0].attention().unwrap();
        assert_eq!((a.head_dim, a.rope.as_ref().map(|r| r.dim)), (128, Some(64)), "{class}");
        assert!(c.attention_bias && !c.o_bias && !c.mlp_bias, "{class}");
        let c = family(class, model_type, r#"{"partial_rotary_factor": 1.0, "attention_bias": false}"#).unwrap();
        assert_eq!(
            (c.layers[0].attention().unwrap().rope.as_ref().map(|r| r.dim), c.attention_bias),
            (Some(16), false)
        );
    }
}

/// Cohere2: every 4th layer full and without rope (`sliding_window_pattern`, or `layer_types`).
#[test]
fn cohere2_rotates_its_sliding_layers_only() {
    use LayerType::{Full as F, Sliding as S};
    let cohere2 = |extra: &str| family("Cohere2ForCausalLM", "cohere2", extra);
    let c = cohere2(r#"{"sliding_window": 8}"#).unwrap();
    assert_eq!((kinds(&c), rotary(&c), c.sliding_window()), (vec![S, S, S, F], vec![true, true, true, false], Some(8)));
    let c = cohere2(r#"{"sliding_window_pattern": 2}"#).unwrap();
    assert_eq!((kinds(&c), rotary(&c)), (vec![S, F, S, F], vec![true, false, true, false]));
    let c = cohere2(r#"{"layer_types": ["full_attention", "sliding_attention", "full_attention", "full_attention"]}"#)
        .unwrap();
    assert_eq!(rotary(&c), [false, true, false, false]);
    assert_eq!(c.logits_scaling, Some(16.0));
}

/// A yarn `truncate` inside a dict keyed by layer type is not what transformers reads (it reads
/// the container's, absent: true); a flat dict's is.
#[test]
fn nested_yarn_truncate_is_the_containers() {
    let yarn = r#"{"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 32, "truncate": false}"#;
    let nested = format!(
        r#"{{"rope_parameters": {{"full_attention": {yarn}, "sliding_attention": {{"rope_type": "default"}}}}}}"#
    );
    let c = family("Gemma3ForCausalLM", "gemma3_text", &nested).unwrap();
    assert!(matches!(c.rope.scaling, RopeScaling::Yarn { truncate: true, .. }), "{:?}", c.rope.scaling);
    let c = llama(&format!(r#"{{"rope_parameters": {yarn}}}"#)).unwrap();
    assert!(matches!(c.rope.scaling, RopeScaling::Yarn { truncate: false, .. }), "{:?}", c.rope.scaling);
}

/// Falcon's two block designs and their keys: the old decoder (one KV head by default, a
/// parallel block off `input_layernorm`), the new one (grouped `num_kv_heads`, each half with its
/// own norm unless `num_ln_in_parallel_attn` is 1), and `alibi` in place of rotary.
#[test]
fn falcon_configs_follow_the_decoder_they_name() {
    let falcon = |extra: &str| {
        let base = r#"{"architectures": ["FalconForCausalLM"], "model_type": "falcon", "vocab_size": 64,
            "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8, "num_kv_heads": 2}"#;
        parse(&json_with(base, extra))
    };
    let c = falcon("{}").unwrap();
    let a = c.layers[0].attention().unwrap().clone();
    assert_eq!((a.heads, a.kv_heads, a.head_dim, a.alibi), (8, 1, 8, None), "multi_query by default");
    assert_eq!(
        (c.parallel, c.intermediate_size, c.hidden_act.as_str()),
        (Some(ParallelMlpInput::AttentionInput), 256, "gelu")
    );
    assert!(!c.attention_bias && !c.o_bias && !c.mlp_bias && c.norm_bias && c.tie_word_embeddings);
    assert_eq!(a.rope.map(|r| r.dim), Some(8));
    let c = falcon(r#"{"multi_query": false, "parallel_attn": false, "bias": true, "ffn_hidden_size": 40}"#).unwrap();
    assert_eq!((c.layers[0].attention().unwrap().kv_heads, c.parallel, c.intermediate_size), (8, None, 40));
    assert!(c.attention_bias && c.o_bias && c.mlp_bias);
    let c = falcon(r#"{"new_decoder_architecture": true}"#).unwrap();
    assert_eq!((c.layers[0].attention().unwrap().kv_heads, c.parallel), (2, Some(ParallelMlpInput::OwnNorm)));
    let c =
        falcon(r#"{"new_decoder_architecture": true, "num_kv_heads": null, "num_ln_in_parallel_attn": 1}"#).unwrap();
    assert_eq!((c.layers[0].attention().unwrap().kv_heads, c.parallel), (8, Some(ParallelMlpInput::AttentionInput)));
    let c = falcon(r#"{"alibi": true, "n_embed": 32}"#).unwrap();
    let a = c.layers[1].attention().unwrap();
    assert_eq!((a.alibi, a.rope.is_none(), a.head_dim), (Some(Alibi::Falcon), true, 4), "n_embed wins");
    for (extra, key) in [
        (r#"{"new_decoder_architecture": true, "parallel_attn": false}"#, "parallel_attn"),
        (r#"{"new_decoder_architecture": true, "num_ln_in_parallel_attn": 3}"#, "num_ln_in_parallel_attn"),
        (r#"{"new_decoder_architecture": true, "num_kv_heads": 3}"#, "num_kv_heads"),
    ] {
        let msg = config_err(falcon(extra), key);
        assert!(msg.contains("not supported") || msg.contains("multiple"), "{msg}");
    }
}

/// Bloom as its Hub files spell it (`n_embed`, `num_attention_heads`, `n_layer`, no MLP size or
/// activation key) and as transformers 5 saves it (`hidden_size`, `n_head`): ALiBi on every
/// layer, no rotary; `apply_residual_connection_post_layernorm` is refused.
#[test]
fn bloom_configs_read_both_spellings() {
    let hub = r#"{"architectures": ["BloomForCausalLM"], "model_type": "bloom", "vocab_size": 250880,
        "n_embed": 1024, "n_layer": 24, "num_attention_heads": 16, "n_inner": null, "layer_norm_epsilon": 1e-05,
        "apply_residual_connection_post_layernorm": false, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3,
        "offset_alibi": 100, "pretraining_tp": 1, "skip_bias_add": true, "slow_but_exact": false}"#;
    let c = parse(hub).unwrap();
    let a = c.layers[23].attention().unwrap();
    assert_eq!((c.hidden_size, c.num_hidden_layers, a.heads, a.head_dim), (1024, 24, 16, 64));
    assert_eq!((a.alibi, a.rope.is_none(), c.intermediate_size), (Some(Alibi::Bloom), true, 4096));
    assert_eq!(
        (c.hidden_act.as_str(), c.tie_word_embeddings, c.max_position_embeddings),
        ("gelu_pytorch_tanh", true, 2048)
    );
    assert!(c.attention_bias && c.o_bias && c.mlp_bias && c.norm_bias && c.parallel.is_none());
    let saved = r#"{"architectures": ["BloomForCausalLM"], "model_type": "bloom", "hidden_size": 48, "n_head": 6,
        "n_layer": 2, "hidden_act": "relu", "intermediate_size": 7}"#;
    let c = parse(saved).unwrap();
    assert_eq!((c.hidden_size, c.layers[0].attention().unwrap().heads, c.intermediate_size), (48, 6, 192));
    assert_eq!(c.hidden_act, "gelu_pytorch_tanh", "BloomConfig has no activation key");
    let refused = json_with(saved, r#"{"apply_residual_connection_post_layernorm": true}"#);
    let msg = config_err(parse(&refused), "apply_residual_connection_post_layernorm");
    assert!(msg.contains("not supported"), "{msg}");
}

/// OPT's keys: `ffn_dim`, `enable_bias`, `do_layer_norm_before` (post-residual norms and no final
/// norm when false), `layer_norm_elementwise_affine`, `word_embed_proj_dim` (kept only where it
/// differs from the hidden size); `_remove_final_layer_norm` is refused.
#[test]
fn opt_configs_read_their_norm_placement_and_widths() {
    let opt = |extra: &str| {
        let base = r#"{"architectures": ["OPTForCausalLM"], "model_type": "opt", "vocab_size": 64, "hidden_size": 32,
            "num_hidden_layers": 2, "num_attention_heads": 4, "ffn_dim": 48, "max_position_embeddings": 40}"#;
        parse(&json_with(base, extra))
    };
    let c = opt(r#"{"word_embed_proj_dim": 32}"#).unwrap();
    assert_eq!((c.intermediate_size, c.hidden_act.as_str(), c.embed_dim, c.norm_eps), (48, "relu", None, 1e-5));
    assert!(!c.post_residual_norms && c.norm_affine && c.attention_bias && c.o_bias && c.mlp_bias);
    assert!(c.layers[0].attention().unwrap().rope.is_none() && c.tie_word_embeddings);
    assert_eq!((c.bos_token_id, c.eos_token_ids.as_slice(), c.pad_token_id), (Some(2), &[2][..], Some(1)));
    let c = opt(r#"{"word_embed_proj_dim": 16, "do_layer_norm_before": false, "layer_norm_elementwise_affine": false,
            "enable_bias": false, "_remove_final_layer_norm": false}"#)
    .unwrap();
    assert_eq!((c.embed_dim, c.post_residual_norms, c.norm_affine, c.attention_bias), (Some(16), true, false, false));
    let msg = config_err(opt(r#"{"_remove_final_layer_norm": true}"#), "_remove_final_layer_norm");
    assert!(msg.contains("not supported"), "{msg}");
}

/// GraniteMoe: Granite's multipliers, every layer sparse over `num_local_experts` (default 8,
/// top 2, always renormalised); the shared variant's `shared_intermediate_size` of 0 is no
/// shared MLP.
#[test]
fn granite_moe_configs_read_experts_and_the_shared_mlp() {
    let c =
        family("GraniteMoeForCausalLM", "granitemoe", r#"{"embedding_multiplier": 12.0, "residual_multiplier": 0.22}"#)
            .unwrap();
    let m = c.moe.as_ref().unwrap();
    assert_eq!((m.num_experts, m.top_k, m.normalize(), m.intermediate_size), (8, 2, true, 96));
    assert_eq!((m.shared_expert_intermediate_size, sparse(&c)), (None, vec![true; 4]));
    assert_eq!((c.embedding_scale, c.residual_multiplier), (Some(12.0), Some(0.22)));
    let shared = |extra: &str| family("GraniteMoeSharedForCausalLM", "granitemoeshared", extra).unwrap();
    assert_eq!(shared("{}").moe.unwrap().shared_expert_intermediate_size, None, "the class default 0");
    let c = shared(r#"{"shared_intermediate_size": 24, "num_local_experts": 3, "num_experts_per_tok": 1}"#);
    let m = c.moe.unwrap();
    assert_eq!((m.num_experts, m.top_k, m.shared_expert_intermediate_size), (3, 1, Some(24)));
}

/// GPT-OSS: alternating sliding and full layers, biased attention, a biased MoE in every layer
/// with the clamped SwiGLU, the class's yarn when the file has no rope dict (its own
/// `rope_theta` kept), and the dict when it has one; a non-positive clamp names its key.
#[test]
fn gpt_oss_configs_read_the_class_rope_and_the_clamped_experts() {
    use LayerType::{Full as F, Sliding as S};
    let c = family("GptOssForCausalLM", "gpt_oss", r#"{"num_local_experts": 4}"#).unwrap();
    assert_eq!((kinds(&c), c.sliding_window()), (vec![S, F, S, F], Some(128)));
    assert!(c.attention_bias && c.o_bias && !c.mlp_bias);
    let m = c.moe.as_ref().unwrap();
    assert_eq!((m.num_experts, m.top_k, m.normalize(), m.intermediate_size), (4, 4, true, 96));
    assert_eq!((m.clamped_swiglu, m.biased, sparse(&c)), (Some((1.702, 7.0)), true, vec![true; 4]));
    let RopeScaling::Yarn { factor, original_max_position_embeddings, truncate, .. } = c.rope.scaling else {
        panic!("the class default is yarn, got {:?}", c.rope.scaling)
    };
    assert_eq!((factor, original_max_position_embeddings, truncate, c.rope.theta), (32.0, 4096, false, 150_000.0));
    let c = family("GptOssForCausalLM", "gpt_oss", r#"{"rope_theta": 1000.0, "swiglu_limit": 2.5}"#).unwrap();
    assert_eq!((c.rope.theta, c.moe.unwrap().clamped_swiglu), (1000.0, Some((1.702, 2.5))));
    let c = family("GptOssForCausalLM", "gpt_oss", r#"{"rope_parameters": {"rope_type": "default"}}"#).unwrap();
    assert_eq!((c.rope.scaling.clone(), c.rope.theta), (RopeScaling::Default, 150_000.0));
    // (`family` drops a key given as null)
    let c = family("GptOssForCausalLM", "gpt_oss", r#"{"attention_bias": false, "head_dim": null}"#).unwrap();
    assert!(!c.attention_bias && !c.o_bias);
    assert_eq!(c.layers[0].attention().unwrap().head_dim, 64, "absent: GptOssConfig's 64, not hidden / heads");
    config_err(family("GptOssForCausalLM", "gpt_oss", r#"{"swiglu_limit": 0}"#), "swiglu_limit");
}

/// DeepSeek-V2/V3: latent attention from the MLA keys (the head dim is `qk_rope_head_dim`,
/// whatever `head_dim` says; `q_lora_rank` by its class default; V3's `rope_interleave`; yarn's
/// `mscale_all_dim` in the scale), dense layers below
/// `first_k_dense_replace`, shared experts, and the routings with their group checks.
#[test]
fn deepseek_configs_read_latent_attention_and_grouped_routing() {
    // (`family` drops null keys: the deepseek_v2 fixture's config has `q_lora_rank: null`)
    let mla = r#"{"kv_lora_rank": 16, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
        "v_head_dim": 12, "head_dim": 99, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_group": 4,
        "topk_group": 2, "first_k_dense_replace": 1, "moe_intermediate_size": 32, "num_key_value_heads": 4}"#;
    let v2 = |extra: &str| family("DeepseekV2ForCausalLM", "deepseek_v2", &json_with(mla, extra));
    let c = v2("{}").unwrap();
    let Mixer::LatentAttention(l) = &c.layers[0].mixer else { panic!("latent layers") };
    assert_eq!((l.q_lora_rank, l.kv_lora_rank, l.nope_dim, l.rope_dim, l.v_dim), (Some(1536), 16, 16, 8, 12));
    assert!(l.interleaved && (l.scale - 24f64.powf(-0.5)).abs() < 1e-12 && l.rope.dim == 8);
    assert_eq!(sparse(&c), [false, true, true, true]);
    let m = c.moe.as_ref().unwrap();
    assert_eq!((m.num_experts, m.top_k, m.intermediate_size, m.shared_expert_intermediate_size), (8, 2, 32, Some(64)));
    assert_eq!(
        m.routing,
        Routing::Grouped { score: RouterScore::Softmax, groups: 1, top_groups: 1, normalize: false, scale: 1.0 }
    );
    let c = v2(r#"{"topk_method": "group_limited_greedy", "routed_scaling_factor": 1.5}"#).unwrap();
    let want = Routing::Grouped { score: RouterScore::Softmax, groups: 4, top_groups: 2, normalize: false, scale: 1.5 };
    assert_eq!(c.moe.unwrap().routing, want);
    config_err(v2(r#"{"topk_method": "noaux_tc"}"#), "topk_method");
    config_err(v2(r#"{"topk_method": "group_limited_greedy", "n_group": 3}"#), "n_group");
    config_err(
        v2(r#"{"topk_method": "group_limited_greedy", "topk_group": 1, "num_experts_per_tok": 3}"#),
        "num_experts_per_tok",
    );
    config_err(v2(r#"{"num_key_value_heads": 2}"#), "num_key_value_heads");
    let v3 = |extra: &str| family("DeepseekV3ForCausalLM", "deepseek_v3", &json_with(mla, extra));
    let yarn = r#"{"q_lora_rank": 24, "rope_interleave": false, "norm_topk_prob": false, "rope_parameters":
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "mscale": 1.0, "mscale_all_dim": 1.0}}"#;
    let c = v3(yarn).unwrap();
    let Mixer::LatentAttention(l) = &c.layers[1].mixer else { panic!("latent layers") };
    let mscale = 0.1 * 4f64.ln() + 1.0;
    assert!(
        !l.interleaved && l.q_lora_rank == Some(24) && (l.scale - 24f64.powf(-0.5) * mscale * mscale).abs() < 1e-12
    );
    let m = c.moe.unwrap();
    let want = Routing::Grouped {
        score: RouterScore::SigmoidCorrected,
        groups: 4,
        top_groups: 2,
        normalize: false,
        scale: 2.5,
    };
    assert_eq!((m.routing, m.shared_expert_intermediate_size), (want, Some(32)));
    config_err(v3(r#"{"n_group": 8}"#), "n_group"); // groups of one expert: no two best
}
