//! The config reader against hand-written configs: defaults, derived values and errors naming the key.

use super::*;

mod decoders2;
mod flagships;
mod ssm;

const PATH: &str = "/ckpt/config.json";

/// A small Llama config with `extra` merged in (a `null` in `extra` removes the key).
fn json_with(base: &str, extra: &str) -> String {
    let mut v: Value = serde_json::from_str(base).unwrap();
    let extra: Value = serde_json::from_str(extra).unwrap();
    for (k, x) in extra.as_object().unwrap() {
        if x.is_null() {
            v.as_object_mut().unwrap().remove(k);
        } else {
            v[k] = x.clone();
        }
    }
    v.to_string()
}

const LLAMA: &str = r#"{
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
    "torch_dtype": "bfloat16", "eos_token_id": [2, 7]
}"#;

/// Each layer's attention kind, as `layer_types` names them.
fn kinds(c: &ModelConfig) -> Vec<LayerType> {
    let kind = |l: &LayerSpec| match l.attention().expect("an attention layer").span {
        Span::Full => LayerType::Full,
        Span::Sliding(_) => LayerType::Sliding,
        Span::Chunked(_) => LayerType::Chunked,
    };
    c.layers.iter().map(kind).collect()
}

/// Per layer: whether it applies a rotary embedding.
fn rotary(c: &ModelConfig) -> Vec<bool> {
    c.layers.iter().map(|l| l.attention().is_some_and(|a| a.rope.is_some())).collect()
}

/// Per layer: the attention score factor.
fn scales(c: &ModelConfig) -> Vec<f64> {
    c.layers.iter().map(|l| l.attention().expect("an attention layer").scale).collect()
}

/// Per layer: whether its MLP is the sparse one.
fn sparse(c: &ModelConfig) -> Vec<bool> {
    c.layers.iter().map(|l| l.mlp == LayerMlp::Sparse).collect()
}

fn parse(text: &str) -> Result<ModelConfig> {
    ModelConfig::from_json_str(text, Path::new(PATH))
}

fn llama(extra: &str) -> Result<ModelConfig> {
    parse(&json_with(LLAMA, extra))
}

/// The error must be a `Config` error naming the file and `key`; returns its message.
fn config_err(result: Result<ModelConfig>, key: &str) -> String {
    let err = result.unwrap_err();
    let msg = err.to_string();
    match &err {
        ModelError::Config { key: k, .. } => assert_eq!(k, key, "{msg}"),
        other => panic!("expected a Config error for `{key}`, got {other:?}"),
    }
    assert!(msg.contains(PATH) && msg.contains(&format!("`{key}`")), "{msg}");
    msg
}

#[test]
fn llama_config_normalises() {
    let c = llama("{}").unwrap();
    assert_eq!(c.architecture, "LlamaForCausalLM");
    assert_eq!((c.num_attention_heads, c.num_key_value_heads, c.head_dim), (4, 2, 16));
    assert_eq!(c.hidden_act, "silu");
    assert_eq!(c.norm_eps, 1e-5);
    assert_eq!(c.rope, RopeConfig { theta: 500000.0, dim: 16, scaling: RopeScaling::Default });
    assert_eq!(kinds(&c), vec![LayerType::Full; 4]);
    assert_eq!(c.sliding_window(), None);
    assert_eq!(c.dtype, Some(DType::BF16));
    assert_eq!((c.bos_token_id, c.eos_token_ids.as_slice(), c.pad_token_id), (Some(1), &[2, 7][..], None));
    assert!(!c.tie_word_embeddings && !c.attention_bias && !c.mlp_bias);
}

#[test]
fn class_defaults_fill_missing_keys() {
    let c = llama(r#"{"num_key_value_heads": null, "rope_theta": null, "torch_dtype": null, "eos_token_id": null}"#)
        .unwrap();
    assert_eq!(c.num_key_value_heads, 4);
    assert_eq!(c.rope.theta, 10_000.0);
    assert_eq!(c.dtype, None);
    assert_eq!(c.eos_token_ids, vec![2]);
    // Qwen3's head_dim defaults to 128, not hidden_size / heads.
    let c = llama(r#"{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}"#).unwrap();
    assert_eq!(c.head_dim, 128);
    assert_eq!(c.rope.dim, 128);
    assert_eq!(c.bos_token_id, None);
}

#[test]
fn dtype_wins_over_torch_dtype() {
    assert_eq!(llama(r#"{"dtype": "float16"}"#).unwrap().dtype, Some(DType::F16));
    let msg = config_err(llama(r#"{"dtype": "float64"}"#), "dtype");
    assert!(msg.contains("bfloat16"), "{msg}");
}

#[test]
fn missing_config_json_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let err = ModelConfig::from_dir(dir.path()).unwrap_err();
    assert!(matches!(err, ModelError::Io { .. }));
    assert!(err.to_string().contains(&dir.path().join("config.json").display().to_string()), "{err}");
}

#[test]
fn invalid_json_names_the_path_and_position() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), "{\n  \"hidden_size\": 64,\n}").unwrap();
    let err = ModelConfig::from_dir(dir.path()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ModelError::Json { .. }));
    assert!(msg.contains("config.json") && msg.contains("line 3"), "{msg}");
    config_err(parse("[1, 2]"), "<root>");
}

#[test]
fn wrong_types_name_the_key() {
    let msg = config_err(llama(r#"{"hidden_size": "64"}"#), "hidden_size");
    assert!(msg.contains("\"64\""), "{msg}");
    let msg = config_err(llama(r#"{"num_hidden_layers": -2}"#), "num_hidden_layers");
    assert!(msg.contains("-2"), "{msg}");
    let msg = config_err(llama(r#"{"num_hidden_layers": 2.5}"#), "num_hidden_layers");
    assert!(msg.contains("2.5"), "{msg}");
    config_err(llama(r#"{"vocab_size": true}"#), "vocab_size");
    config_err(llama(r#"{"tie_word_embeddings": "yes"}"#), "tie_word_embeddings");
    config_err(llama(r#"{"rms_norm_eps": "small"}"#), "rms_norm_eps");
    config_err(llama(r#"{"hidden_act": 3}"#), "hidden_act");
    config_err(llama(r#"{"eos_token_id": [2, "x"]}"#), "eos_token_id");
    config_err(llama(r#"{"rope_parameters": 5}"#), "rope_parameters");
    config_err(llama(r#"{"rope_parameters": {"rope_type": "linear", "factor": "2"}}"#), "rope_parameters.factor");
}

#[test]
fn absurd_sizes_are_refused() {
    let msg = config_err(llama(r#"{"num_hidden_layers": 1000000000}"#), "num_hidden_layers");
    assert!(msg.contains("1000000000") && msg.contains("limit"), "{msg}");
    config_err(llama(r#"{"vocab_size": 18446744073709551615}"#), "vocab_size");
    for key in ["vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "max_position_embeddings"] {
        config_err(llama(&format!(r#"{{"{key}": 0}}"#)), key);
    }
    config_err(llama(r#"{"head_dim": 0}"#), "head_dim");
    config_err(llama(r#"{"head_dim": 9}"#), "head_dim");
    config_err(llama(r#"{"num_attention_heads": 128}"#), "head_dim");
}

#[test]
fn unknown_families_are_refused_before_any_key_is_read() {
    // an unknown class, an unknown model_type under a known class, a known model_type under an
    // unknown head: each is "not supported", never a missing key of another family's schema
    for (class, model_type) in
        [("FooForCausalLM", "foo"), ("LlamaForCausalLM", "foo"), ("LlamaForTokenClassification", "llama")]
    {
        let extra = format!(r#"{{"architectures": ["{class}"], "model_type": "{model_type}", "vocab_size": null}}"#);
        match parse(&json_with(LLAMA, &extra)) {
            Err(ModelError::UnsupportedArchitecture { class: c, model_type: t, nearest }) => {
                assert_eq!((c.as_str(), t.as_deref()), (class, Some(model_type)));
                assert_eq!(nearest.len(), 3, "{nearest:?}");
            }
            other => panic!("{class}: expected UnsupportedArchitecture, got {other:?}"),
        }
    }
    config_err(llama(r#"{"architectures": null}"#), "architectures");
    config_err(llama(r#"{"architectures": []}"#), "architectures");
}

#[test]
fn heads_must_divide() {
    let msg = config_err(llama(r#"{"num_key_value_heads": 3}"#), "num_key_value_heads");
    assert!(msg.contains("(4)") && msg.contains("(3)"), "{msg}");
    // LlamaConfig.validate_architecture
    config_err(llama(r#"{"hidden_size": 66, "head_dim": 16}"#), "hidden_size");
}

#[test]
fn unsupported_rope_types_name_key_and_supported_values() {
    let msg = config_err(llama(r#"{"rope_parameters": {"rope_type": "axial"}}"#), "rope_parameters.rope_type");
    assert!(msg.contains("axial") && msg.contains("proportional") && msg.contains("yarn"), "{msg}");
    let msg = config_err(
        llama(r#"{"rope_parameters": {"rope_type": "longrope", "short_factor": [1], "long_factor": [1]}}"#),
        "rope_parameters.original_max_position_embeddings",
    );
    assert!(msg.contains("missing"), "{msg}");
    let msg = config_err(
        llama(
            r#"{"rope_parameters": {"rope_type": "longrope", "original_max_position_embeddings": 16,
                "short_factor": [1], "long_factor": [1]}}"#,
        ),
        "rope_parameters.short_factor",
    );
    assert!(msg.contains("need 8"), "{msg}");
    let msg = config_err(llama(r#"{"rope_scaling": {"type": "su", "factor": 2.0}}"#), "rope_scaling.type");
    assert!(msg.contains("`su`"), "{msg}");
    config_err(llama(r#"{"partial_rotary_factor": 0.5}"#), "partial_rotary_factor");
    config_err(
        llama(r#"{"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.25}}"#),
        "rope_parameters.partial_rotary_factor",
    );
    config_err(llama(r#"{"rope_parameters": {"rope_type": "linear"}}"#), "rope_parameters.factor");
    config_err(
        llama(r#"{"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0}}"#),
        "rope_parameters.low_freq_factor",
    );
}

/// The old form (top-level `rope_theta` + `rope_scaling`, possibly keyed `type`) and the new
/// one (`rope_parameters`) give the same rope.
#[test]
fn old_and_new_rope_forms_agree() {
    let cases = [
        (r#"{"type": "default"}"#, RopeScaling::Default),
        (r#"{"type": "linear", "factor": 2.0}"#, RopeScaling::Linear { factor: 2.0 }),
        (
            r#"{"rope_type": "dynamic", "factor": 4}"#,
            RopeScaling::Dynamic { factor: 4.0, max_position_embeddings: 256 },
        ),
        (
            r#"{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64}"#,
            RopeScaling::Llama3 {
                factor: 8.0,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original_max_position_embeddings: 64,
            },
        ),
        (
            r#"{"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}"#,
            RopeScaling::Yarn {
                factor: 4.0,
                original_max_position_embeddings: 64,
                beta_fast: 32.0,
                beta_slow: 1.0,
                mscale: None,
                mscale_all_dim: None,
                attention_factor: None,
                truncate: true,
            },
        ),
    ];
    for (dict, scaling) in cases {
        let old = llama(&format!(r#"{{"rope_theta": 1000.0, "rope_scaling": {dict}}}"#)).unwrap().rope;
        let mut new_dict: Value = serde_json::from_str(dict).unwrap();
        new_dict["rope_theta"] = Value::from(1000.0);
        let new = llama(&format!(r#"{{"rope_theta": null, "rope_parameters": {new_dict}}}"#)).unwrap().rope;
        assert_eq!(old, new, "{dict}");
        assert_eq!(new, RopeConfig { theta: 1000.0, dim: 16, scaling }, "{dict}");
    }
}

#[test]
fn rope_defaults_follow_transformers() {
    // original_max_position_embeddings defaults to max_position_embeddings (llama3, yarn).
    let c = llama(
        r#"{"rope_parameters": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4}}"#,
    )
    .unwrap();
    assert!(matches!(c.rope.scaling, RopeScaling::Llama3 { original_max_position_embeddings: 256, .. }));
    // A top-level original_max_position_embeddings wins over the dict's (standardize_rope_params).
    let c = llama(
        r#"{"original_max_position_embeddings": 128,
            "rope_scaling": {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64}}"#,
    )
    .unwrap();
    assert!(matches!(c.rope.scaling, RopeScaling::Yarn { original_max_position_embeddings: 128, .. }));
    // yarn: null factor = max_pos / original, `or` defaults for beta, null truncate = false.
    let c = llama(
        r#"{"rope_parameters": {"rope_type": "yarn", "factor": null, "original_max_position_embeddings": 64,
            "beta_fast": 0, "beta_slow": null, "truncate": null, "mscale": 0.7, "mscale_all_dim": 0.7}}"#,
    )
    .unwrap();
    let RopeScaling::Yarn { factor, beta_fast, beta_slow, truncate, mscale, .. } = c.rope.scaling else {
        panic!("{:?}", c.rope)
    };
    assert_eq!((factor, beta_fast, beta_slow, truncate, mscale), (4.0, 32.0, 1.0, false, Some(0.7)));
    assert_eq!(c.rope.theta, 500000.0);
    // A non-empty rope_scaling wins over rope_parameters; an empty one does not.
    let c = llama(r#"{"rope_scaling": {"type": "linear", "factor": 3}, "rope_parameters": {"rope_type": "default"}}"#)
        .unwrap();
    assert_eq!(c.rope.scaling, RopeScaling::Linear { factor: 3.0 });
    let c = llama(r#"{"rope_scaling": {}, "rope_parameters": {"rope_type": "linear", "factor": 5}}"#).unwrap();
    assert_eq!(c.rope.scaling, RopeScaling::Linear { factor: 5.0 });
    // The dict's rope_theta wins over the top-level one.
    let c = llama(r#"{"rope_parameters": {"rope_type": "default", "rope_theta": 7.0}}"#).unwrap();
    assert_eq!(c.rope.theta, 7.0);
}

const QWEN2: &str = r#"{
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 256, "rope_theta": 1000000.0,
    "use_sliding_window": true, "sliding_window": 32, "max_window_layers": 2
}"#;

#[test]
fn qwen2_layer_types_follow_max_window_layers() {
    use LayerType::{Full as F, Sliding as S};
    let c = parse(QWEN2).unwrap();
    assert_eq!(kinds(&c), [F, F, S, S]);
    assert_eq!(c.sliding_window(), Some(32));
    // Qwen2's q/k/v biases are hard-wired on, whatever `attention_bias` says
    assert!(c.attention_bias && !c.o_bias && !c.mlp_bias);

    // use_sliding_window false: no sliding layers, whatever sliding_window says.
    let c = parse(&json_with(QWEN2, r#"{"use_sliding_window": false}"#)).unwrap();
    assert_eq!((kinds(&c).as_slice(), c.sliding_window()), (&[F; 4][..], None));
    // Default max_window_layers (28) is beyond the 4 layers.
    let c = parse(&json_with(QWEN2, r#"{"max_window_layers": null}"#)).unwrap();
    assert_eq!((kinds(&c).as_slice(), c.sliding_window()), (&[F; 4][..], None));
    // Absent sliding_window takes the default 4096.
    let c = parse(&json_with(QWEN2, r#"{"sliding_window": null, "max_window_layers": 0}"#)).unwrap();
    assert_eq!((kinds(&c).as_slice(), c.sliding_window()), (&[S; 4][..], Some(4096)));

    // An explicit layer_types list wins, legacy names remapped.
    let c = parse(&json_with(
        QWEN2,
        r#"{"layer_types": ["sliding_attention", "attention", "sliding_attention", "full_attention"]}"#,
    ))
    .unwrap();
    assert_eq!(kinds(&c), [S, F, S, F]);
    let msg = config_err(parse(&json_with(QWEN2, r#"{"layer_types": ["full_attention"]}"#)), "layer_types");
    assert!(msg.contains("num_hidden_layers is 4"), "{msg}");
    config_err(parse(&json_with(QWEN2, r#"{"layer_types": ["full_attention", "x", "y", "z"]}"#)), "layer_types");
    let msg = config_err(
        parse(&json_with(
            QWEN2,
            r#"{"layer_types": ["chunked_attention", "full_attention", "full_attention", "full_attention"]}"#,
        )),
        "layer_types",
    );
    assert!(msg.contains("not supported"), "{msg}");
    // Sliding layers without a window (transformers fails building the mask).
    config_err(
        parse(&json_with(
            QWEN2,
            r#"{"use_sliding_window": false, "layer_types": ["sliding_attention", "full_attention", "full_attention", "full_attention"]}"#,
        )),
        "sliding_window",
    );
}

#[test]
fn mistral_sliding_window_applies_to_every_layer() {
    let mistral = json_with(LLAMA, r#"{"architectures": ["MistralForCausalLM"], "model_type": "mistral"}"#);
    let c = parse(&json_with(&mistral, r#"{"sliding_window": 16}"#)).unwrap();
    assert_eq!((kinds(&c).as_slice(), c.sliding_window()), (&[LayerType::Sliding; 4][..], Some(16)));
    // The class default window is 4096; an explicit null disables it.
    assert_eq!(parse(&mistral).unwrap().sliding_window(), Some(4096));
    let c = parse(&mistral.replacen('{', r#"{"sliding_window": null,"#, 1)).unwrap();
    assert_eq!((kinds(&c).as_slice(), c.sliding_window()), (&[LayerType::Full; 4][..], None));
    config_err(parse(&json_with(&mistral, r#"{"sliding_window": -1}"#)), "sliding_window");
}

#[test]
fn mistral_with_layer_types_is_read_as_ministral() {
    let mistral = json_with(LLAMA, r#"{"architectures": ["MistralForCausalLM"], "model_type": "mistral"}"#);
    let types = r#"{"sliding_window": 8, "head_dim": 16,
        "layer_types": ["full_attention", "sliding_attention", "full_attention", "sliding_attention"]}"#;
    let c = parse(&json_with(&mistral, types)).unwrap();
    use LayerType::{Full as F, Sliding as S};
    assert_eq!((kinds(&c).as_slice(), c.sliding_window()), (&[F, S, F, S][..], Some(8)));
    // Ministral has no head_dim fallback: transformers fails on it, we say so
    let no_head_dim = r#"{"layer_types": ["full_attention", "full_attention", "full_attention", "full_attention"]}"#;
    config_err(parse(&json_with(&mistral, no_head_dim)), "head_dim");
}

#[test]
fn llama_ignores_sliding_window() {
    let c = llama(r#"{"sliding_window": 16}"#).unwrap();
    assert_eq!((c.sliding_window(), c.layers.len()), (None, 4));
}

/// A small config of `class` / `model_type` with `extra` merged in.
fn family(class: &str, model_type: &str, extra: &str) -> Result<ModelConfig> {
    let base = format!(
        r#"{{"architectures": ["{class}"], "model_type": "{model_type}", "vocab_size": 128, "hidden_size": 64,
            "intermediate_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 16, "max_position_embeddings": 256}}"#
    );
    parse(&json_with(&base, extra))
}

#[test]
fn family_defaults_and_derived_values() {
    use LayerType::{Full as F, Sliding as S};
    // Gemma 2: alternating windows, soft-caps and query_pre_attn_scalar from the class
    let c = family("Gemma2ForCausalLM", "gemma2", "{}").unwrap();
    assert_eq!(kinds(&c), [S, F, S, F]);
    assert_eq!((c.sliding_window(), c.attn_softcap, c.final_softcap), (Some(4096), Some(50.0), Some(30.0)));
    assert_eq!(scales(&c)[0], 256f64.powf(-0.5));
    assert!(c.tie_word_embeddings && c.embedding_scale == Some(8.0));
    // Gemma 3: a period of 6 (legacy key honoured), local rope at 1e4, global at 1e6
    let c = family("Gemma3ForCausalLM", "gemma3_text", r#"{"sliding_window_pattern": 2}"#).unwrap();
    assert_eq!(kinds(&c), [S, F, S, F]);
    assert_eq!((c.rope.theta, c.sliding_rope.as_ref().unwrap().theta), (1e6, 1e4));
    assert_eq!(c.final_softcap, None);
    // the text model of a multimodal Gemma 3, with the top level's tie flag
    let text = r#"{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
        "tie_word_embeddings": false, "text_config": {"model_type": "gemma3_text", "hidden_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 16, "vocab_size": 128}}"#;
    let c = parse(text).unwrap();
    assert_eq!((c.hidden_size, c.num_hidden_layers, c.vocab_size, c.tie_word_embeddings), (64, 2, 128, false));
    // SmolLM3: every 4th layer without rope
    let c = family("SmolLM3ForCausalLM", "smollm3", "{}").unwrap();
    assert_eq!(rotary(&c), [true, true, true, false]);
    // ... and with use_sliding_window but no layer_types, those layers slide
    let c = family("SmolLM3ForCausalLM", "smollm3", r#"{"use_sliding_window": true, "sliding_window": 4}"#).unwrap();
    assert_eq!((kinds(&c), c.sliding_window()), (vec![F, F, F, S], Some(4)));
    // GPT-2 key names, n_inner null = 4 x n_embd, no rope, biased LayerNorms
    let gpt2 = r#"{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 48, "n_layer": 2,
        "n_head": 4, "n_positions": 32, "n_inner": null, "vocab_size": 100, "scale_attn_by_inverse_layer_idx": true}"#;
    let c = parse(gpt2).unwrap();
    assert_eq!((c.hidden_size, c.intermediate_size, c.max_position_embeddings), (48, 192, 32));
    assert_eq!(rotary(&c), [false, false]);
    assert_eq!(scales(&c), [12f64.powf(-0.5), 12f64.powf(-0.5) / 2.0]);
    // Phi-3: partial rotary, legacy `su` read as longrope with its attention factor
    let c = family(
        "Phi3ForCausalLM",
        "phi3",
        r#"{"partial_rotary_factor": 0.5, "original_max_position_embeddings": 64,
            "rope_scaling": {"type": "su", "short_factor": [1, 1, 1, 1], "long_factor": [2, 2, 2, 2]}}"#,
    )
    .unwrap();
    assert_eq!(c.rope.dim, 8);
    let RopeScaling::LongRope { attention_factor, original_max_position_embeddings, .. } = c.rope.scaling else {
        panic!("{:?}", c.rope.scaling)
    };
    assert_eq!(original_max_position_embeddings, 64);
    assert!((attention_factor - (1.0 + 4f64.ln() / 64f64.ln()).sqrt()).abs() < 1e-12);
    // Granite multipliers
    let c = family(
        "GraniteForCausalLM",
        "granite",
        r#"{"embedding_multiplier": 12.0, "attention_multiplier": 0.5, "residual_multiplier": 0.2, "logits_scaling": 4.0}"#,
    )
    .unwrap();
    assert_eq!(
        (c.embedding_scale, scales(&c)[0], c.residual_multiplier, c.logits_scaling),
        (Some(12.0), 0.5, Some(0.2), Some(4.0))
    );
}

#[test]
fn t5_configs_follow_their_class() {
    // T5Config's defaults: 6 + 6 layers of 8 heads of 64, relu, a tied head scaled by
    // d_model ** -0.5, 32 buckets up to 128, unscaled scores, start at the padding id
    let c = parse(r#"{"architectures": ["T5ForConditionalGeneration"], "model_type": "t5"}"#).unwrap();
    assert_eq!((c.hidden_size, c.head_dim, c.num_attention_heads, c.num_hidden_layers), (512, 64, 8, 6));
    assert_eq!((c.hidden_act.as_str(), c.gated_mlp, c.tie_word_embeddings), ("relu", false, true));
    assert_eq!((c.logits_scaling, scales(&c)[0], c.norm_eps), (Some(512f64.sqrt()), 1.0, 1e-6));
    let s = c.seq2seq.clone().unwrap();
    assert_eq!((s.encoder_layers, s.encoder_head_dim, s.decoder_start_token_id, s.source_positions), (6, 64, 0, None));
    let r = c.relative_attention.unwrap();
    assert_eq!((r.num_buckets, r.max_distance), (32, 128));
    // T5's buckets (transformers' _relative_position_bucket): both ways in the encoder
    let both: Vec<i64> = [0, -1, 1, -7, -8, -12, -128, 200].iter().map(|&d| r.bucket(d, true)).collect();
    assert_eq!(both, [0, 1, 17, 7, 8, 9, 15, 31]);
    let past: Vec<i64> = [5, 0, -15, -16, -23, -127, -128].iter().map(|&d| r.bucket(d, false)).collect();
    assert_eq!(past, [0, 0, 15, 16, 18, 31, 31]);
    // v1.1 / Flan: gated-gelu is the tanh GELU, the head unscaled; num_decoder_layers apart
    let c = parse(
        r#"{"architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "feed_forward_proj": "gated-gelu",
            "tie_word_embeddings": false, "num_layers": 4, "num_decoder_layers": 2, "d_kv": 6}"#,
    )
    .unwrap();
    assert_eq!(
        (c.hidden_act.as_str(), c.gated_mlp, c.logits_scaling, c.tie_word_embeddings),
        ("gelu_new", true, None, true)
    );
    assert_eq!((c.num_hidden_layers, c.seq2seq.unwrap().encoder_layers, c.head_dim), (2, 4, 6));
    let e =
        parse(r#"{"architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "feed_forward_proj": "a-b-c"}"#)
            .unwrap_err();
    assert!(e.to_string().contains("feed_forward_proj"), "{e}");
}

#[test]
fn modernbert_configs_follow_their_class() {
    // ModernBertConfig's defaults: 22 layers, every third global from layer 0, windows of 64
    // each side, rope 160000 global / 10000 local, no biases, heads on the first token
    let c = parse(r#"{"architectures": ["ModernBertForMaskedLM"], "model_type": "modernbert"}"#).unwrap();
    assert_eq!((c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers), (50368, 768, 1152, 22));
    assert_eq!(
        (c.norm_eps, c.hidden_act.as_str(), c.pad_token_id, c.sliding_window()),
        (1e-5, "gelu", Some(50283), Some(64))
    );
    let full: Vec<usize> = (0..22).filter(|&i| kinds(&c)[i] == LayerType::Full).collect();
    assert_eq!(full, [0, 3, 6, 9, 12, 15, 18, 21]);
    assert_eq!((c.rope.theta, c.sliding_rope.as_ref().map(|r| r.theta)), (160_000.0, Some(10_000.0)));
    assert!(!(c.attention_bias || c.o_bias || c.mlp_bias || c.norm_bias));
    let h = c.encoder.unwrap().heads;
    assert_eq!(
        h,
        HeadsConfig { activation: Some("gelu".into()), dense_bias: false, mean_pooling: false, decoder_bias: true }
    );
    // the legacy keys: the layer period, the thetas; a `sliding_window` key sets the half window
    let c = parse(
        r#"{"architectures": ["ModernBertModel"], "model_type": "modernbert", "num_hidden_layers": 4,
            "global_attn_every_n_layers": 2, "global_rope_theta": 500.0, "local_rope_theta": 50.0,
            "local_attention": 10, "sliding_window": 3, "norm_bias": true, "classifier_pooling": "mean"}"#,
    )
    .unwrap();
    assert_eq!(kinds(&c).iter().filter(|t| **t == LayerType::Sliding).count(), 2);
    assert_eq!(
        (c.rope.theta, c.sliding_rope.as_ref().map(|r| r.theta), c.sliding_window()),
        (500.0, Some(50.0), Some(3))
    );
    assert!(c.norm_bias && c.encoder.unwrap().heads.mean_pooling);
    let e = parse(r#"{"architectures": ["ModernBertModel"], "model_type": "modernbert", "classifier_pooling": "max"}"#)
        .unwrap_err();
    assert!(e.to_string().contains("classifier_pooling") && e.to_string().contains("cls, mean"), "{e}");
}

#[test]
fn factorised_embedding_configs_follow_their_classes() {
    // ElectraConfig's defaults: ELECTRA-small with 128-wide embeddings; no layer sharing
    let c = parse(r#"{"architectures": ["ElectraForPreTraining"], "model_type": "electra"}"#).unwrap();
    assert_eq!((c.hidden_size, c.intermediate_size, c.num_attention_heads, c.embed_dim), (256, 1024, 4, Some(128)));
    assert_eq!(c.encoder.unwrap().layer_groups, None);
    // embeddings as wide as the layers: no width of their own (ELECTRA then has no projection)
    let c = parse(r#"{"architectures": ["ElectraModel"], "model_type": "electra", "embedding_size": 256}"#).unwrap();
    assert_eq!((c.embed_dim, c.embed_width()), (None, 256));
    // AlbertConfig's defaults: ALBERT-xxlarge, gelu_new, one group of one layer
    let c = parse(r#"{"architectures": ["AlbertForMaskedLM"], "model_type": "albert"}"#).unwrap();
    assert_eq!((c.vocab_size, c.hidden_size, c.num_attention_heads, c.embed_dim), (30000, 4096, 64, Some(128)));
    assert_eq!((c.hidden_act.as_str(), c.bos_token_id, c.eos_token_ids.as_slice()), ("gelu_new", Some(2), &[3][..]));
    assert_eq!(c.encoder.unwrap().layer_groups, Some(LayerGroups { groups: 1, inner: 1 }));
    // AlbertTransformer's group of each layer: i / (layers / groups) in floating point, truncated
    let groups = |groups: usize, layers: usize| -> Vec<usize> {
        (0..layers).map(|i| LayerGroups { groups, inner: 1 }.group_of(i, layers)).collect()
    };
    assert_eq!(groups(2, 3), [0, 0, 1]);
    assert_eq!(groups(3, 2), [0, 1]);
    assert_eq!(groups(4, 12), [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
    assert_eq!(groups(5, 7), [0, 0, 1, 2, 2, 3, 4]);
    let e = parse(r#"{"architectures": ["AlbertModel"], "model_type": "albert", "num_hidden_groups": 0}"#).unwrap_err();
    assert!(e.to_string().contains("num_hidden_groups"), "{e}");
}

#[test]
fn deberta_v2_configs_follow_disentangled_self_attention() {
    // DeBERTa-v3-base as the hub keeps it: 256 log buckets over 512 positions, both terms
    // through the shared projections, normed relative embeddings, no absolute positions
    let text = r#"{"architectures": ["DebertaV2ForSequenceClassification"], "model_type": "deberta-v2",
        "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072, "num_hidden_layers": 12,
        "relative_attention": true, "position_buckets": 256, "max_relative_positions": -1,
        "pos_att_type": "p2c|c2p", "share_att_key": true, "norm_rel_ebd": "layer_norm",
        "position_biased_input": false, "type_vocab_size": 0, "pooler_hidden_act": "gelu"}"#;
    let c = parse(text).unwrap();
    let e = c.encoder.clone().unwrap();
    let d = e.disentangled.unwrap();
    assert_eq!(
        (d.span, d.buckets, d.c2p, d.p2c, d.share_att_key, d.norm_rel_embeddings),
        (256, Some((256, 512)), true, true, true, true)
    );
    assert_eq!((e.absolute_positions, e.type_vocab_size, e.pooler_act.as_str()), (false, 0, "gelu"));
    // three terms share one scale: (64 * 3) ** -0.5
    assert!((c.layers[0].attention().unwrap().scale - (192f64).powf(-0.5)).abs() < 1e-12);
    // transformers' make_log_bucket_position(r, 256, 512) and (r, 8, 40)
    let rel = [-600, -300, -129, -128, -127, -100, -3, 0, 3, 100, 127, 128, 129, 300, 511, 600];
    let want = [-270, -207, -129, -128, -127, -100, -3, 0, 3, 100, 127, 128, 129, 207, 255, 270];
    assert_eq!(rel.map(|r| d.bucket(r)), want);
    let small = Disentangled { buckets: Some((8, 40)), span: 8, ..d };
    let rel = [-39, -10, -5, -4, -3, 0, 3, 4, 5, 6, 10, 39];
    assert_eq!(rel.map(|r| small.bucket(r)), [-7, -6, -5, -4, -3, 0, 3, 4, 5, 5, 6, 7]);
    // what it does not build is refused by key
    for (key, value, says) in [
        ("conv_kernel_size", "3", "convolution"),
        ("legacy", "false", "lm_predictions"),
        ("pos_att_type", r#"["p2p"]"#, "p2p"),
        ("pos_att_type", r#"["c2p", 3]"#, "entry 1 must be a string"),
    ] {
        let text = format!(r#"{{"architectures": ["DebertaV2Model"], "model_type": "deberta-v2", "{key}": {value}}}"#);
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(says), "{e}");
    }
    // relative attention off: plain scores over absolute positions, scaled by the terms all the same
    let c =
        parse(r#"{"architectures": ["DebertaV2Model"], "model_type": "deberta-v2", "pos_att_type": ["c2p"]}"#).unwrap();
    assert_eq!(c.encoder.unwrap().disentangled, None);
    assert!((c.layers[0].attention().unwrap().scale - (128f64).powf(-0.5)).abs() < 1e-12);
}

#[test]
fn mpnet_buckets_32_ways_whatever_its_table_rows() {
    // MPNetEncoder.compute_position_bias buckets 32 ways up to 128 (its own defaults); the key
    // sizes the table only, and a smaller table than the buckets is refused
    let c = parse(r#"{"architectures": ["MPNetModel"], "model_type": "mpnet", "relative_attention_num_buckets": 48}"#);
    let rel = c.unwrap().relative_attention.unwrap();
    assert_eq!(rel, RelativeAttention { num_buckets: 32, max_distance: 128, table_rows: 48 });
    // transformers' relative_position_bucket(n, 32, 128) for n = key - query
    let got: Vec<i64> =
        [-200, -100, -9, -8, -7, -1, 0, 1, 7, 8, 20, 127, 128, 500].map(|r| rel.bucket(r, true)).to_vec();
    assert_eq!(got, [15, 15, 8, 8, 7, 1, 0, 17, 23, 24, 26, 31, 31, 31]);
    let c = parse(r#"{"architectures": ["MPNetModel"], "model_type": "mpnet"}"#).unwrap();
    assert_eq!((c.vocab_size, c.pad_token_id, c.encoder.unwrap().type_vocab_size), (30527, Some(1), 0));
    let e = parse(r#"{"architectures": ["MPNetModel"], "model_type": "mpnet", "relative_attention_num_buckets": 16}"#);
    let e = e.unwrap_err().to_string();
    assert!(e.contains("relative_attention_num_buckets") && e.contains("32"), "{e}");
}

#[test]
fn encoder_configs_follow_their_classes() {
    // BertConfig's defaults, no rope, biases everywhere, two labels and two token types
    let c = parse(r#"{"architectures": ["BertForMaskedLM"], "model_type": "bert"}"#).unwrap();
    assert_eq!((c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers), (30522, 768, 3072, 12));
    assert_eq!((c.num_attention_heads, c.num_key_value_heads, c.head_dim), (12, 12, 64));
    assert_eq!((c.max_position_embeddings, c.norm_eps, c.hidden_act.as_str()), (512, 1e-12, "gelu"));
    assert_eq!(rotary(&c), [false; 12]);
    assert!(c.attention_bias && c.o_bias && c.mlp_bias && c.tie_word_embeddings);
    let e = c.encoder.clone().unwrap();
    assert_eq!((c.pad_token_id, e.type_vocab_size, e.num_labels, e.pooler_size), (Some(0), 2, 2, 768));
    // labels counted from id2label (as PreTrainedConfig does), RoBERTa's padding id
    let c = parse(
        r#"{"architectures": ["RobertaForSequenceClassification"], "model_type": "roberta", "type_vocab_size": 1,
            "id2label": {"0": "neg", "1": "neutral", "2": "pos"}, "num_labels": 7}"#,
    )
    .unwrap();
    assert_eq!((c.pad_token_id, c.vocab_size), (Some(1), 50265));
    assert_eq!(c.encoder.map(|e| (e.type_vocab_size, e.num_labels)), Some((1, 3)));
    let c = parse(r#"{"architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta", "num_labels": 4}"#).unwrap();
    assert_eq!((c.pad_token_id, c.encoder.unwrap().num_labels), (Some(1), 4));
    // BertConfig refuses a hidden size the heads do not divide; a decoder has no encoder part
    let e = parse(r#"{"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 100}"#).unwrap_err();
    assert!(e.to_string().contains("not a multiple of num_attention_heads"), "{e}");
    // a BERT made a decoder (causal, or with cross-attention) is refused, not run bidirectionally
    for key in ["is_decoder", "add_cross_attention"] {
        let text = format!(r#"{{"architectures": ["RobertaModel"], "model_type": "roberta", "{key}": true}}"#);
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains("only the encoder"), "{e}");
    }
    assert!(parse(r#"{"architectures": ["BertModel"], "model_type": "bert", "is_decoder": false}"#).is_ok());
    assert_eq!(family("LlamaForCausalLM", "llama", "{}").unwrap().encoder, None);
    // DistilBERT's key names, no token types, its modeling code's fixed epsilon
    let c = parse(
        r#"{"architectures": ["DistilBertForMaskedLM"], "model_type": "distilbert", "dim": 64, "n_heads": 4,
            "n_layers": 3, "hidden_dim": 100, "activation": "relu", "layer_norm_eps": 0.1}"#,
    )
    .unwrap();
    assert_eq!((c.hidden_size, c.num_attention_heads, c.num_hidden_layers, c.intermediate_size), (64, 4, 3, 100));
    assert_eq!((c.hidden_act.as_str(), c.norm_eps, c.vocab_size), ("relu", 1e-12, 30522));
    assert_eq!(c.encoder.map(|e| (e.type_vocab_size, e.num_labels)), Some((0, 2)));
    // ViT: image and patch sizes as integers or pairs, a pooler of its own width
    let vit = r#"{"architectures": ["ViTModel"], "model_type": "vit", "image_size": [12, 8], "patch_size": 4,
        "pooler_output_size": 20, "pooler_act": "relu"}"#;
    let e = parse(vit).unwrap().encoder.unwrap();
    let image = e.image.clone().unwrap();
    assert_eq!((image.size, image.patch, image.channels, image.patches()), ([12, 8], [4, 4], 3, 6));
    assert_eq!((e.pooler_size, e.pooler_act.as_str()), (20, "relu"));
    let c = parse(r#"{"architectures": ["ViTModel"], "model_type": "vit"}"#).unwrap();
    assert!(c.attention_bias && c.encoder.unwrap().image.unwrap().size == [224, 224]);
    let e = parse(r#"{"architectures": ["ViTModel"], "model_type": "vit", "image_size": 30}"#).unwrap_err();
    assert!(e.to_string().contains("not a multiple of patch_size"), "{e}");
}

#[test]
fn family_config_errors_name_the_key() {
    config_err(
        family("Phi3ForCausalLM", "phi3", r#"{"rope_parameters": {"rope_type": "linear", "factor": 2.0}}"#),
        "rope_parameters.rope_type",
    );
    config_err(
        family(
            "Phi3ForCausalLM",
            "phi3",
            r#"{"rope_parameters": {"rope_type": "longrope", "original_max_position_embeddings": 16}}"#,
        ),
        "rope_parameters.short_factor",
    );
    config_err(family("Phi3ForCausalLM", "phi3", r#"{"partial_rotary_factor": 0.1}"#), "partial_rotary_factor");
    config_err(
        family("Gemma2ForCausalLM", "gemma2", r#"{"use_bidirectional_attention": true}"#),
        "use_bidirectional_attention",
    );
    config_err(family("Gemma2ForCausalLM", "gemma2", r#"{"query_pre_attn_scalar": 0}"#), "query_pre_attn_scalar");
    config_err(family("Gemma2ForCausalLM", "gemma2", r#"{"attn_logit_softcapping": -1}"#), "attn_logit_softcapping");
    config_err(
        family("Gemma3ForCausalLM", "gemma3_text", r#"{"rope_parameters": {"sliding_attention": 3}}"#),
        "rope_parameters.sliding_attention",
    );
    config_err(family("SmolLM3ForCausalLM", "smollm3", r#"{"no_rope_layers": [1, 0]}"#), "no_rope_layers");
    config_err(family("SmolLM3ForCausalLM", "smollm3", r#"{"no_rope_layers": [1, 2, 1, 1]}"#), "no_rope_layers");
    config_err(family("GraniteForCausalLM", "granite", r#"{"logits_scaling": 0}"#), "logits_scaling");
    config_err(
        family("LlamaForCausalLM", "llama", r#"{"rope_parameters": {"full_attention": {}}}"#),
        "rope_parameters.full_attention",
    );
    config_err(parse(r#"{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": "wide"}"#), "n_embd");
    config_err(
        parse(r#"{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": 1}"#),
        "text_config",
    );
    config_err(
        parse(
            r#"{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": {"hidden_size": -1}}"#,
        ),
        "text_config.hidden_size",
    );
}

/// The MoE keys as each class reads them: defaults, sparse layers, renormalisation, the
/// shared expert, and errors naming the key.
#[test]
fn moe_configs() {
    let c =
        family("Qwen3MoeForCausalLM", "qwen3_moe", r#"{"decoder_sparse_step": 2, "mlp_only_layers": [3]}"#).unwrap();
    let m = c.moe.as_ref().unwrap();
    assert_eq!((m.num_experts, m.top_k, m.intermediate_size, m.normalize()), (128, 8, 768, false));
    assert_eq!(sparse(&c), [false, true, false, false]);
    assert_eq!(m.shared_expert_intermediate_size, None);
    // Qwen3-MoE slides every layer only with use_sliding_window
    let c = family("Qwen3MoeForCausalLM", "qwen3_moe", r#"{"use_sliding_window": true}"#).unwrap();
    assert_eq!((c.sliding_window(), kinds(&c)[3]), (Some(4096), LayerType::Sliding));
    // Mixtral: every layer sparse, always renormalised, experts of intermediate_size
    let c = family("MixtralForCausalLM", "mixtral", r#"{"num_local_experts": 4, "norm_topk_prob": false}"#).unwrap();
    let m = c.moe.as_ref().unwrap();
    assert_eq!((m.num_experts, m.top_k, m.intermediate_size, m.normalize()), (4, 2, c.intermediate_size, true));
    assert_eq!((c.norm_eps, c.rope.theta), (1e-5, 1e6));
    assert!(sparse(&c).iter().all(|&s| s));
    // Qwen2-MoE: shared expert, qkv bias on by default, sliding_window 0 when unused
    let c = family("Qwen2MoeForCausalLM", "qwen2_moe", r#"{"sliding_window": 0, "num_experts": 6}"#).unwrap();
    let m = c.moe.as_ref().unwrap();
    assert_eq!((m.num_experts, m.shared_expert_intermediate_size), (6, Some(5632)));
    assert!(c.attention_bias && !c.o_bias && c.sliding_window().is_none());
    // no expert at all: a dense model
    let c = family("Qwen2MoeForCausalLM", "qwen2_moe", r#"{"num_experts": 0}"#).unwrap();
    assert!(c.moe.is_none());
    let e = config_err(family("MixtralForCausalLM", "mixtral", r#"{"num_experts_per_tok": 9}"#), "num_experts_per_tok");
    assert!(e.contains("more than the 8 experts"), "{e}");
    config_err(family("Qwen3MoeForCausalLM", "qwen3_moe", r#"{"mlp_only_layers": ["1"]}"#), "mlp_only_layers");
    config_err(family("Qwen3MoeForCausalLM", "qwen3_moe", r#"{"decoder_sparse_step": 0}"#), "decoder_sparse_step");
}

const LLAVA: &str = r#"{"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
    "text_config": {"model_type": "llama", "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32,
        "num_hidden_layers": 2, "num_attention_heads": 2},
    "vision_config": {"model_type": "clip_vision_model", "hidden_size": 8, "intermediate_size": 16,
        "num_hidden_layers": 3, "num_attention_heads": 2, "image_size": 8, "patch_size": 4}"#;

fn llava(extra: &str) -> Result<ModelConfig> {
    parse(&format!("{LLAVA}{extra}}}"))
}

/// LlavaConfig as transformers reads it: the text family by `text_config.model_type`, the
/// class defaults (feature layer -2 of the tower's hidden states, `default` strategy, image
/// token 32000, gelu projector with biases), and errors naming the key.
#[test]
fn llava_configs_read_both_sub_configs() {
    let c = llava("").unwrap();
    let v = c.vision.as_deref().unwrap();
    assert_eq!((c.hidden_size, c.vocab_size, v.text_family.model_types[0]), (16, 64, "llama"));
    assert_eq!((v.tower.hidden_size, v.tower.num_hidden_layers, v.tower.hidden_act.as_str()), (8, 3, "quick_gelu"));
    assert_eq!((v.feature_layers.clone(), v.keep_cls, v.image_token_id), (vec![2], false, 32000));
    assert_eq!((v.projector_act.as_str(), v.projector_bias, v.merge.clone()), ("gelu", true, None));
    let v =
        llava(r#", "vision_feature_layer": [0, -1], "vision_feature_select_strategy": "full", "image_token_index": 5"#)
            .unwrap()
            .vision
            .unwrap();
    assert_eq!((v.feature_layers, v.keep_cls, v.image_token_id), (vec![0, 3], true, 5));
    config_err(llava(r#", "vision_feature_layer": -5"#), "vision_feature_layer");
    config_err(llava(r#", "vision_feature_layer": "last""#), "vision_feature_layer");
    config_err(llava(r#", "vision_feature_select_strategy": "pooled""#), "vision_feature_select_strategy");
    config_err(
        parse(r#"{"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", "text_config": {}}"#),
        "vision_config",
    );
    let bert = LLAVA.replace(r#""model_type": "llama""#, r#""model_type": "bert""#);
    config_err(parse(&format!("{bert}}}")), "text_config.model_type");
    let siglip = LLAVA.replace("clip_vision_model", "siglip_vision_model");
    config_err(parse(&format!("{siglip}}}")), "vision_config.model_type");
}

/// CLIPConfig: the text tower from `text_config` and the image tower from `vision_config`, each
/// with its class's defaults when empty (openai/clip-vit-base-patch32's sizes), `projection_dim`
/// 512; the legacy `*_config_dict` form refused by name.
#[test]
fn clip_configs_read_both_towers_with_class_defaults() {
    let c = parse(r#"{"architectures": ["CLIPModel"], "model_type": "clip"}"#).unwrap();
    let d = c.dual.as_deref().unwrap();
    assert_eq!((c.vocab_size, c.hidden_size, c.num_hidden_layers, c.max_position_embeddings), (49408, 512, 12, 77));
    assert_eq!((c.hidden_act.as_str(), c.eos_token_ids.clone(), c.norm_eps), ("quick_gelu", vec![49407], 1e-5));
    assert_eq!((d.vision.hidden_size, d.vision.num_hidden_layers, d.projection_dim), (768, 12, Some(512)));
    let img = d.vision.encoder.as_ref().and_then(|e| e.image.clone()).unwrap();
    assert_eq!((img.size, img.patch, img.channels), ([224, 224], [32, 32], 3));
    let c = parse(
        r#"{"architectures": ["CLIPModel"], "model_type": "clip", "projection_dim": 8,
            "text_config": {"hidden_size": 16, "num_attention_heads": 2, "eos_token_id": 2},
            "vision_config": {"hidden_size": 12, "num_attention_heads": 3, "image_size": 8, "patch_size": 4}}"#,
    )
    .unwrap();
    let d = c.dual.as_deref().unwrap();
    assert_eq!(
        (c.hidden_size, c.eos_token_ids.clone(), d.vision.hidden_size, d.projection_dim),
        (16, vec![2], 12, Some(8))
    );
    let legacy = r#"{"architectures": ["CLIPModel"], "model_type": "clip", "text_config_dict": {"hidden_size": 8}}"#;
    config_err(parse(legacy), "text_config_dict");
    config_err(
        parse(
            r#"{"architectures": ["CLIPModel"], "model_type": "clip", "vision_config": {"hidden_size": 10, "num_attention_heads": 3}}"#,
        ),
        "vision_config.hidden_size",
    );
}

/// SiglipConfig: SigLIP's class defaults; the text head's width (`projection_size`, null: the
/// text width) must be the image tower's; an image tower without its pooling head is refused.
#[test]
fn siglip_configs_tie_the_text_head_to_the_image_width() {
    let c = parse(r#"{"architectures": ["SiglipModel"], "model_type": "siglip"}"#).unwrap();
    let d = c.dual.as_deref().unwrap();
    assert_eq!(
        (c.vocab_size, c.max_position_embeddings, c.hidden_act.as_str(), c.norm_eps),
        (32000, 64, "gelu_pytorch_tanh", 1e-6)
    );
    assert_eq!((d.vision.hidden_size, d.projection_dim, c.encoder.as_ref().unwrap().pooler_size), (768, None, 768));
    let img = d.vision.encoder.as_ref().and_then(|e| e.image.clone()).unwrap();
    assert_eq!((img.size, img.patch), ([224, 224], [16, 16]));
    let with = |text: &str, vision: &str| {
        parse(&format!(
            r#"{{"architectures": ["SiglipModel"], "model_type": "siglip", "text_config": {{{text}}},
                "vision_config": {{"hidden_size": 12, "num_attention_heads": 2{vision}}}}}"#
        ))
    };
    let c = with(r#""hidden_size": 16, "num_attention_heads": 2, "projection_size": 12"#, "").unwrap();
    assert_eq!(c.encoder.unwrap().pooler_size, 12);
    config_err(with(r#""hidden_size": 16, "num_attention_heads": 2"#, ""), "text_config.projection_size");
    let e = config_err(
        with(r#""hidden_size": 12, "num_attention_heads": 2"#, r#", "vision_use_head": false"#),
        "vision_config.vision_use_head",
    );
    assert!(e.contains("not supported"), "{e}");
}

/// Qwen2VLConfig: nested or hub-flat text keys, `mrope` read as the default rope with its
/// sections, the tower's keys (`in_chans`, `mlp_ratio`), and the checks tying them.
#[test]
fn qwen2vl_configs_read_nested_and_flat_text() {
    let vision = r#""vision_config": {"depth": 2, "embed_dim": 8, "hidden_size": 16, "num_heads": 2, "mlp_ratio": 3,
        "patch_size": 2, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_chans": 1}"#;
    let text = r#""vocab_size": 64, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 1"#;
    let head = r#"{"architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl""#;
    let nested = format!(
        r#"{head}, "text_config": {{{text}, "rope_parameters": {{"rope_type": "mrope", "mrope_section": [1, 1, 2], "rope_theta": 10000.0}}}}, {vision}}}"#
    );
    let flat =
        format!(r#"{head}, {text}, "rope_scaling": {{"type": "mrope", "mrope_section": [1, 1, 2]}}, {vision}}}"#);
    for cfg in [parse(&nested).unwrap(), parse(&flat).unwrap()] {
        let v = cfg.vision.as_deref().unwrap();
        assert_eq!((cfg.hidden_size, cfg.num_key_value_heads, cfg.rope.scaling.clone()), (16, 1, RopeScaling::Default));
        assert_eq!((v.mrope_section.clone(), v.image_token_id), (vec![1, 1, 2], 151655));
        assert_eq!((v.tower.hidden_size, v.tower.intermediate_size, v.tower.head_dim), (8, 24, 4));
        let m = v.merge.as_ref().unwrap();
        assert_eq!((m.channels, m.patch_values(), m.spatial_merge_size), (1, 8, 2));
    }
    assert_eq!(parse(&flat).unwrap().rope.theta, 1_000_000.0, "Qwen2VLTextConfig's default theta");
    config_err(parse(&flat.replace("[1, 1, 2]", "[1, 1, 1]")), "rope_parameters");
    config_err(
        parse(&flat.replace(r#", "rope_scaling": {"type": "mrope", "mrope_section": [1, 1, 2]}"#, "")),
        "rope_parameters",
    );
    config_err(
        parse(&nested.replace(r#""hidden_size": 16, "num_heads""#, r#""hidden_size": 12, "num_heads""#)),
        "vision_config.hidden_size",
    );
}

#[test]
fn unsupported_settings_name_key_value_and_accepted_values() {
    let msg = config_err(llama(r#"{"hidden_act": "gelu_fast"}"#), "hidden_act");
    assert!(msg.contains("`gelu_fast` is not supported; valid: silu, swish, gelu, "), "{msg}");
    let t5 = family("T5ForConditionalGeneration", "t5", r#"{"feed_forward_proj": "gated-mish"}"#);
    let msg = config_err(t5, "feed_forward_proj");
    assert!(msg.contains("`mish` is not supported"), "{msg}");
}

/// Where transformers' `generate` stops: generation_config.json's EOS when the file exists
/// (none when it lacks the key), else what config.json itself spells out, never a class default.
#[test]
fn stop_token_ids_follow_transformers_generate() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    let stops = || GenerationConfig::stop_token_ids(dir.path()).unwrap();
    write("config.json", r#"{"architectures": ["LlamaForCausalLM"]}"#);
    assert_eq!(stops(), Vec::<i64>::new(), "LlamaConfig's default 2 is not a stop token");
    write("config.json", r#"{"eos_token_id": [7, 9]}"#);
    assert_eq!(stops(), [7, 9]);
    write("config.json", r#"{"text_config": {"eos_token_id": 5}}"#);
    assert_eq!(stops(), [5]);
    write("generation_config.json", r#"{"bos_token_id": 1}"#);
    assert_eq!(stops(), Vec::<i64>::new(), "the file's missing key is not filled from config.json");
    write("generation_config.json", r#"{"eos_token_id": 3}"#);
    assert_eq!(stops(), [3]);
}

/// Wav2Vec2Config / HubertConfig: the feature encoder's class defaults (the base checkpoints'
/// 7 convolutions, receptive field 400 samples), the norm placement, and what the graph does
/// not compute refused by key.
#[test]
fn audio_configs_read_the_feature_encoder_with_class_defaults() {
    let c = parse(r#"{"architectures": ["Wav2Vec2ForCTC"], "model_type": "wav2vec2"}"#).unwrap();
    let a = c.encoder.as_ref().and_then(|e| e.audio.clone()).unwrap();
    assert_eq!((c.vocab_size, c.hidden_size, c.num_hidden_layers, c.norm_eps), (32, 768, 12, 1e-5));
    assert_eq!((a.convs.len(), a.convs[0].kernel, a.convs[0].stride, a.receptive_field()), (7, 10, 5, 400));
    assert_eq!(
        (a.norm, a.pos_kernel, a.pos_groups, !c.post_residual_norms, a.conv_bias),
        (FeatureNorm::Group, 128, 16, false, false)
    );
    // post-norm layers: the pre-sublayer norms move after each residual add
    assert!(c.post_residual_norms && a.projection_norm);
    let c = parse(
        r#"{"architectures": ["HubertForCTC"], "model_type": "hubert", "hidden_size": 16, "num_attention_heads": 2,
            "do_stable_layer_norm": true, "feat_extract_norm": "layer", "feat_proj_layer_norm": false,
            "conv_dim": [4, 6], "conv_kernel": [3, 2], "conv_stride": [2, 2], "num_conv_pos_embedding_groups": 4}"#,
    )
    .unwrap();
    let a = c.encoder.as_ref().and_then(|e| e.audio.clone()).unwrap();
    assert!(!c.post_residual_norms && !a.projection_norm);
    assert_eq!((a.norm, a.receptive_field()), (FeatureNorm::Layer, 5));
    let refused = |extra: &str, key: &str| {
        let text = format!(r#"{{"architectures": ["Wav2Vec2ForCTC"], "model_type": "wav2vec2", {extra}}}"#);
        config_err(parse(&text), key);
    };
    refused(r#""add_adapter": true"#, "add_adapter");
    refused(r#""adapter_attn_dim": 16"#, "adapter_attn_dim");
    refused(r#""conv_pos_batch_norm": true"#, "conv_pos_batch_norm");
    refused(r#""feat_extract_norm": "batch""#, "feat_extract_norm");
    refused(r#""conv_dim": [4, 4], "conv_kernel": [3], "conv_stride": [2, 2]"#, "conv_dim");
    refused(r#""num_conv_pos_embedding_groups": 5"#, "num_conv_pos_embedding_groups");
    refused(r#""feat_extract_activation": "swish_beta""#, "feat_extract_activation");
}

/// BeitConfig / Data2VecVisionConfig: ViT's keys with BEiT's switches and their class defaults
/// (no relative bias, no absolute positions, layer scales, mean pooling).
#[test]
fn beit_configs_read_their_switches_with_class_defaults() {
    for (class, model_type) in
        [("BeitForImageClassification", "beit"), ("Data2VecVisionForImageClassification", "data2vec-vision")]
    {
        let c = parse(&format!(r#"{{"architectures": ["{class}"], "model_type": "{model_type}"}}"#)).unwrap();
        let e = c.encoder.as_ref().unwrap();
        let b = e.beit.unwrap();
        assert_eq!((b.layer_bias, b.shared_bias, b.layer_scale, b.mean_pooling), (false, false, true, true));
        assert!(!e.absolute_positions);
        let img = e.image.clone().unwrap();
        assert_eq!((img.size, img.patch, c.norm_eps), ([224, 224], [16, 16], 1e-12));
    }
    let c = parse(
        r#"{"architectures": ["BeitModel"], "model_type": "beit", "use_relative_position_bias": true,
            "use_shared_relative_position_bias": true, "use_absolute_position_embeddings": true,
            "layer_scale_init_value": 0.0, "use_mean_pooling": false}"#,
    )
    .unwrap();
    let e = c.encoder.as_ref().unwrap();
    let b = e.beit.unwrap();
    assert_eq!((b.layer_bias, b.shared_bias, b.layer_scale, b.mean_pooling), (true, true, false, false));
    assert!(e.absolute_positions);
}

/// SwinConfig and Swinv2Config: their class defaults (Swin-T's stages at 224 pixels), their
/// per-stage lists, and the settings refused by key.
#[test]
fn swin_and_swinv2_configs_read_their_stages_with_class_defaults() {
    let c = parse(r#"{"architectures": ["SwinForImageClassification"], "model_type": "swin"}"#).unwrap();
    let net = c.convnet.clone().unwrap();
    let crate::config::Backbone::Swin(s) = &net.backbone else { panic!("{:?}", net.backbone) };
    assert_eq!((net.image, net.channels, s.patch, s.embed_dim, s.window), ([224, 224], 3, [4, 4], 96, 7));
    assert_eq!((s.depths.clone(), s.heads.clone()), (vec![2, 2, 6, 2], vec![3, 6, 12, 24]));
    assert_eq!(
        (s.width(3), s.mlp_width(3), s.qkv_bias, s.absolute_positions, c.norm_eps),
        (768, 3072, true, false, 1e-5)
    );
    let c = parse(
        r#"{"architectures": ["SwinModel"], "model_type": "swin", "embed_dim": 6, "depths": [1, 2],
            "num_heads": [2, 3], "mlp_ratio": 2.5, "qkv_bias": false, "use_absolute_embeddings": true,
            "image_size": [30, 26], "patch_size": [2, 3]}"#,
    )
    .unwrap();
    let crate::config::Backbone::Swin(s) = c.convnet.unwrap().backbone else { panic!("not Swin") };
    assert_eq!(
        (s.mlp_width(0), s.mlp_width(1), s.patch, s.qkv_bias, s.absolute_positions),
        (15, 30, [2, 3], false, true)
    );
    let refused = |keys: &str, key: &str| {
        let text = format!(r#"{{"architectures": ["SwinModel"], "model_type": "swin", {keys}}}"#);
        config_err(parse(&text), key)
    };
    refused(r#""depths": [2, 2], "num_heads": [2]"#, "num_heads");
    assert!(refused(r#""embed_dim": 6, "depths": [1], "num_heads": [4]"#, "num_heads").contains("do not divide"));
    refused(r#""mlp_ratio": 0"#, "mlp_ratio");
    refused(r#""window_size": 0"#, "window_size");
    // Swinv2: its pretrained windows (four zeros by default), and the absolute positions its
    // transformers class cannot run
    let v2 = |keys: &str| parse(&format!(r#"{{"architectures": ["Swinv2Model"], "model_type": "swinv2"{keys}}}"#));
    let crate::config::Backbone::Swin(s) = v2("").unwrap().convnet.unwrap().backbone else { panic!("not Swin") };
    assert_eq!(s.version, crate::config::SwinVersion::V2 { pretrained_windows: vec![0; 4] });
    let windows = r#", "depths": [1, 1], "num_heads": [1, 1], "pretrained_window_sizes": [8, 0]"#;
    let crate::config::Backbone::Swin(s) = v2(windows).unwrap().convnet.unwrap().backbone else { panic!("not Swin") };
    assert_eq!(s.version, crate::config::SwinVersion::V2 { pretrained_windows: vec![8, 0] });
    config_err(v2(r#", "use_absolute_embeddings": true"#), "use_absolute_embeddings");
    config_err(v2(r#", "pretrained_window_sizes": [1, 0, 0, 0]"#), "pretrained_window_sizes");
    config_err(v2(r#", "pretrained_window_sizes": [0, 0]"#), "pretrained_window_sizes");
}
