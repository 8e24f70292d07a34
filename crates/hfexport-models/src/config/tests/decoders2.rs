//! The config reader on the decoder families of issue 33 (Phi, GPT-NeoX, GPTBigCode, GPT-J,
//! Cohere, StableLM, Starcoder2), on committed Hub configs where there is one.

use super::*;

#[test]
fn every_layer_windows_do_not_read_layer_types() {
    // Mixtral and Starcoder2 apply `sliding_window` to every layer; only a `mistral` config is
    // read as Ministral when it has `layer_types` (AutoConfig's rewrite)
    let types = r#"{"sliding_window": 8,
        "layer_types": ["full_attention", "sliding_attention", "full_attention", "sliding_attention"]}"#;
    for (class, model_type) in [("MixtralForCausalLM", "mixtral"), ("Starcoder2ForCausalLM", "starcoder2")] {
        let c = family(class, model_type, types).unwrap();
        assert_eq!((kinds(&c).as_slice(), c.sliding_window()), (&[LayerType::SlidingAttention; 4][..], Some(8)));
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
    assert_eq!((moe.num_experts, moe.top_k, moe.intermediate_size, moe.normalize), (6, 2, 96, false));
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
    use LayerType::{FullAttention as F, SlidingAttention as S};
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
