//! The config reader on the 2026 flagships that attend (issue 40): GLM-4.5's routing defaults,
//! ERNIE 4.5's biases and MoE layer window, Mistral 4's softmax groups, partial factor over the
//! whole head and query scaling, Llama 4's chunked and NoPE layers and input-weighted experts,
//! and the settings refused.

use super::*;

#[test]
fn glm4_moe_reads_deepseek_v3_routing_with_its_own_defaults() {
    let base = r#"{"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 24,
        "n_routed_experts": 8, "moe_intermediate_size": 32, "num_hidden_layers": 3}"#;
    let glm = |extra: &str| family("Glm4MoeForCausalLM", "glm4_moe", &json_with(base, extra));
    let c = glm("{}").unwrap();
    let m = c.moe.as_ref().unwrap();
    let want = Routing::Grouped {
        score: RouterScore::SigmoidCorrected,
        groups: 1,
        top_groups: 1,
        normalize: true,
        scale: 1.0,
    };
    assert_eq!((m.routing, m.top_k, m.shared_expert_intermediate_size), (want, 8, Some(32)));
    assert_eq!(sparse(&c), [false, true, true], "first_k_dense_replace defaults to 1");
    assert_eq!(c.rope.dim, 12, "partial_rotary_factor defaults to 0.5 of head_dim 24");
    assert!(!c.attention_bias && !c.o_bias && !c.head_bias);
    let c = glm(r#"{"attention_bias": true, "use_qk_norm": true, "partial_rotary_factor": 1.0}"#).unwrap();
    assert!(c.attention_bias && !c.o_bias && c.rope.dim == 24);
}

#[test]
fn ernie_reads_biases_and_the_moe_layer_window() {
    // (`family` drops a key given as null: no head_dim)
    let base = r#"{"hidden_size": 64, "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 4,
        "moe_num_experts": 6, "moe_k": 2, "moe_intermediate_size": 32, "head_dim": null}"#;
    let dense = family("Ernie4_5ForCausalLM", "ernie4_5", &json_with(base, r#"{"use_bias": true}"#)).unwrap();
    assert!(dense.attention_bias && dense.o_bias && dense.mlp_bias && !dense.head_bias);
    assert_eq!(dense.layers[0].attention().unwrap().head_dim, 128, "Ernie4_5Config's head_dim");
    let moe = |extra: &str| family("Ernie4_5_MoeForCausalLM", "ernie4_5_moe", &json_with(base, extra));
    let c = moe(r#"{"use_bias": true}"#).unwrap();
    assert!(c.head_bias, "the MoE model's head has a bias with use_bias");
    assert_eq!(c.layers[0].attention().unwrap().head_dim, 8, "no head_dim in the MoE class: hidden / heads");
    assert_eq!(sparse(&c), [false, true, true, true], "from moe_layer_start_index 1 to the last");
    let m = c.moe.as_ref().unwrap();
    let want = Routing::Grouped {
        score: RouterScore::SoftmaxCorrected,
        groups: 1,
        top_groups: 1,
        normalize: true,
        scale: 1.0,
    };
    assert_eq!((m.routing, m.top_k, m.shared_expert_intermediate_size), (want, 2, Some(64)));
    let c = moe(r#"{"moe_layer_interval": 2, "moe_layer_start_index": 0, "moe_layer_end_index": 2,
        "moe_num_shared_experts": 0}"#)
    .unwrap();
    assert_eq!(sparse(&c), [false, true, false, false]);
    assert_eq!(c.moe.unwrap().shared_expert_intermediate_size, None, "0 shared experts: none");
    config_err(moe(r#"{"moe_layer_interval": 0}"#), "moe_layer_interval");
}

#[test]
fn mistral4_reads_softmax_groups_partial_factor_and_query_scaling() {
    let base = r#"{"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2,
        "kv_lora_rank": 16, "q_lora_rank": 24, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 12,
        "n_routed_experts": 8, "num_experts_per_tok": 2, "n_group": 4, "topk_group": 2, "moe_intermediate_size": 32}"#;
    let m4 = |extra: &str| family("Mistral4ForCausalLM", "mistral4", &json_with(base, extra));
    // no rope dict: the class's yarn with beta 0.1 over 8192 positions, partial factor 8 / 24
    let c = m4("{}").unwrap();
    let Mixer::LatentAttention(l) = &c.layers[0].mixer else { panic!("latent layers") };
    assert_eq!(l.query_scale, Some(QueryScale { beta: 0.1, divisor: 8192, offset: 0 }));
    assert_eq!(l.rope.dim, 8);
    let want =
        Routing::Grouped { score: RouterScore::SoftmaxTwoBest, groups: 4, top_groups: 2, normalize: true, scale: 1.0 };
    assert_eq!(c.moe.unwrap().routing, want);
    assert_eq!(sparse(&m4("{}").unwrap()), [true, true], "first_k_dense_replace defaults to 0");
    let yarn = |extra: &str| {
        m4(&format!(
            r#"{{"rope_parameters": {{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4 {extra}}}}}"#
        ))
    };
    let e = config_err(yarn(""), "rope_parameters");
    assert!(e.contains("llama_4_scaling_beta"), "{e}");
    let e = config_err(
        yarn(r#", "llama_4_scaling_beta": 0.5, "partial_rotary_factor": 0.5"#),
        "rope_parameters.partial_rotary_factor",
    );
    assert!(e.contains("rotates 12 of the 24"), "{e}");
    // 2 / 17 as Python writes it: read exactly (serde_json's float_roundtrip), 17 times it is 2
    let c = m4(r#"{"qk_nope_head_dim": 15, "qk_rope_head_dim": 2, "rope_parameters": {"rope_type": "yarn",
        "factor": 4.0, "original_max_position_embeddings": 4, "llama_4_scaling_beta": 0.5,
        "partial_rotary_factor": 0.11764705882352941}}"#)
    .unwrap();
    let Mixer::LatentAttention(l) = &c.layers[0].mixer else { panic!("latent layers") };
    assert_eq!(l.rope.dim, 2);
    let c = yarn(r#", "llama_4_scaling_beta": 0.5, "partial_rotary_factor": 0.3333333333333333"#).unwrap();
    let Mixer::LatentAttention(l) = &c.layers[1].mixer else { panic!("latent layers") };
    assert_eq!((l.rope.dim, l.query_scale.unwrap().divisor), (8, 4));
    let e = config_err(
        m4(r#"{"rope_parameters": {"rope_type": "default", "llama_4_scaling_beta": 0.5,
        "original_max_position_embeddings": 4}}"#),
        "rope_parameters.rope_type",
    );
    assert!(e.contains("not accepted by this architecture"), "{e}");
}

#[test]
fn llama4_reads_chunked_and_nope_layers_and_input_weighted_experts() {
    let base = r#"{"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": 32, "intermediate_size_mlp": 96, "num_local_experts": 4, "num_hidden_layers": 4}"#;
    let l4 = |extra: &str| family("Llama4ForCausalLM", "llama4_text", &json_with(base, extra));
    // the class defaults: every 4th layer without rope (full, its queries tuned), the others
    // chunked by 8192; every layer sparse (step 1), top-1, the shared expert as wide as an expert
    let c = l4("{}").unwrap();
    let spans: Vec<Span> = c.layers.iter().map(|l| l.attention().unwrap().span).collect();
    assert_eq!(spans, [Span::Chunked(8192), Span::Chunked(8192), Span::Chunked(8192), Span::Full]);
    assert_eq!(rotary(&c), [true, true, true, false]);
    let scales: Vec<_> = c.layers.iter().map(|l| l.attention().unwrap().query_scale).collect();
    assert_eq!(scales, [None, None, None, Some(QueryScale { beta: 0.1, divisor: 8192, offset: 1 })]);
    assert_eq!(sparse(&c), [true; 4]);
    assert_eq!(c.intermediate_size, 96, "the dense layers are intermediate_size_mlp wide");
    let m = c.moe.as_ref().unwrap();
    let want = Routing::Grouped { score: RouterScore::Sigmoid, groups: 1, top_groups: 1, normalize: false, scale: 1.0 };
    assert_eq!((m.routing, m.top_k, m.intermediate_size, m.weigh_input), (want, 1, 32, true));
    assert_eq!(m.shared_expert_intermediate_size, Some(32));
    assert!(c.qk_norm, "use_qk_norm defaults to true");
    let c = l4(r#"{"interleave_moe_layer_step": 2, "no_rope_layer_interval": 2, "attention_chunk_size": 3,
        "attn_temperature_tuning": false, "use_qk_norm": false}"#)
    .unwrap();
    assert_eq!(sparse(&c), [false, true, false, true]);
    assert_eq!(kinds(&c), [LayerType::Chunked, LayerType::Full].repeat(2));
    assert!(c.layers.iter().all(|l| l.attention().unwrap().query_scale.is_none()) && !c.qk_norm);
    // listed layers win over the step and the interval; an empty no_rope_layers is the default
    let c = l4(r#"{"moe_layers": [0], "interleave_moe_layer_step": 2, "no_rope_layers": [],
        "layer_types": ["full_attention", "chunked_attention", "full_attention", "full_attention"]}"#)
    .unwrap();
    assert_eq!(sparse(&c), [true, false, false, false]);
    assert_eq!(rotary(&c), [true, true, true, false]);
    assert_eq!(kinds(&c)[..2], [LayerType::Full, LayerType::Chunked]);
    // (`json_with` drops a key given as null: set it after)
    let mut v: Value = serde_json::from_str(&json_with(
        base,
        r#"{"architectures": ["Llama4ForCausalLM"], "model_type": "llama4_text", "vocab_size": 128}"#,
    ))
    .unwrap();
    v["attention_chunk_size"] = Value::Null;
    let e = config_err(parse(&v.to_string()), "attention_chunk_size");
    assert!(e.contains("chunked_attention"), "{e}");
    let sliding = r#"{"layer_types": ["sliding_attention", "full_attention", "full_attention", "full_attention"]}"#;
    let e = config_err(l4(sliding), "layer_types");
    assert!(e.contains("full_attention, chunked_attention"), "{e}");
    // the image-text class: the text model from text_config
    let text = json_with(base, r#"{"model_type": "llama4_text", "attention_chunk_size": 5}"#);
    let c = parse(&format!(
        r#"{{"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "text_config": {text}}}"#
    ))
    .unwrap();
    assert_eq!((c.hidden_size, c.layers[0].attention().unwrap().span), (64, Span::Chunked(5)));
}

#[test]
fn gemma4_reads_per_layer_heads_shared_keys_and_per_layer_embeddings() {
    let base = r#"{"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": 32, "num_hidden_layers": 6, "vocab_size": 128, "vocab_size_per_layer_input": 128,
        "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention",
                        "sliding_attention", "sliding_attention"]}"#;
    let g4 = |extra: &str| family("Gemma4ForCausalLM", "gemma4_text", &json_with(base, extra));
    let heads = |c: &ModelConfig| -> Vec<(usize, usize)> {
        c.layers.iter().map(|l| l.attention().map(|a| (a.head_dim, a.kv_heads)).unwrap()).collect()
    };
    // the hub's form: the full layers (3, and 5 forced full) of global_head_dim (class default
    // 512); their KV heads stay the config's without attention_k_eq_v
    let c = g4(r#"{"num_global_key_value_heads": 1}"#).unwrap();
    assert_eq!(
        kinds(&c),
        [LayerType::Sliding; 3]
            .iter()
            .chain(&[LayerType::Full, LayerType::Sliding, LayerType::Full])
            .copied()
            .collect::<Vec<_>>()
    );
    assert_eq!(heads(&c), [(16, 2), (16, 2), (16, 2), (512, 2), (16, 2), (512, 2)]);
    assert_eq!(c.per_layer_input, Some(PerLayerInput { size: 256, vocab: 128 }));
    // the full layers' proportional rope over their whole head, a quarter of it turning
    assert_eq!(c.rope.dim, 512);
    assert_eq!(c.rope.scaling, RopeScaling::Proportional { factor: 1.0, partial_rotary_factor: 0.25 });
    assert_eq!((c.sliding_rope.as_ref().unwrap().dim, c.sliding_rope.as_ref().unwrap().theta), (16, 10000.0));
    let c = g4(r#"{"global_head_dim": 32, "num_global_key_value_heads": 1, "attention_k_eq_v": true,
        "num_kv_shared_layers": 2, "use_double_wide_mlp": true, "hidden_size_per_layer_input": 0}"#)
    .unwrap();
    assert_eq!(heads(&c)[3], (32, 1));
    let from_keys: Vec<bool> = c.layers.iter().map(|l| l.attention().unwrap().values_from_keys).collect();
    assert_eq!(from_keys, [false, false, false, true, false, true]);
    let sources: Vec<Option<usize>> = c.layers.iter().map(|l| l.attention().unwrap().kv_source).collect();
    assert_eq!(sources, [None, None, None, None, Some(2), Some(3)]);
    assert_eq!((c.layers[5].mlp, c.layers[5].dense.width, c.layers[3].dense.width), (LayerMlp::Dense, 2 * 32, 32));
    assert!(c.layers[5].cache(&hfexport_core::Dim::konst(4)).is_empty(), "a layer reusing keys keeps no cache");
    assert_eq!(c.per_layer_input, None);
    // transformers' saved form wins; a per-layer attribute other than the heads is refused
    let c = g4(r#"{"per_layer_config": {"3": {"head_dim": 8, "num_key_value_heads": 4}, "5": {"head_dim": 8,
        "num_key_value_heads": 4}}, "global_head_dim": 64}"#)
    .unwrap();
    assert_eq!(heads(&c)[3], (8, 4));
    let e = config_err(
        g4(r#"{"per_layer_config": {"3": {"intermediate_size": 8}}}"#),
        "per_layer_config.3.intermediate_size",
    );
    assert!(e.contains("not supported"), "{e}");
    let e = config_err(g4(r#"{"per_layer_config": {"3": {"head_dim": 8}}}"#), "per_layer_config");
    assert!(e.contains("layers 3 and 5"), "{e}");
    // every shared layer's kind needs an earlier layer of that kind
    let e = config_err(g4(r#"{"num_kv_shared_layers": 3}"#), "num_kv_shared_layers");
    assert!(e.contains("layer"), "{e}");
    // experts beside every dense MLP: their count, k and width have no class default
    let e = config_err(g4(r#"{"enable_moe_block": true}"#), "num_experts");
    assert!(e.contains("missing"), "{e}");
    let c = g4(r#"{"enable_moe_block": true, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 8,
        "num_kv_shared_layers": 2, "use_double_wide_mlp": true}"#)
    .unwrap();
    let mlps: Vec<(LayerMlp, usize)> = c.layers.iter().map(|l| (l.mlp, l.dense.width / c.intermediate_size)).collect();
    assert_eq!(mlps, [vec![(LayerMlp::DenseAndSparse, 1); 4], vec![(LayerMlp::DenseAndSparse, 2); 2]].concat());
    let m = c.moe.as_ref().unwrap();
    assert_eq!((m.num_experts, m.top_k, m.intermediate_size, m.normalize()), (4, 2, 8, true));
    let e = config_err(g4(r#"{"use_bidirectional_attention": "all"}"#), "use_bidirectional_attention");
    assert!(e.contains("not supported"), "{e}");
    assert!(g4(r#"{"use_bidirectional_attention": "vision"}"#).is_ok(), "text attends causally");
}

#[test]
fn gemma3n_reads_per_layer_mlps_altup_and_laurel() {
    let base = r#"{"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": [32, 48, 32, 64], "num_hidden_layers": 4, "vocab_size": 128,
        "vocab_size_per_layer_input": 100, "hidden_size_per_layer_input": 8, "num_kv_shared_layers": 1,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        "activation_sparsity_pattern": [0.95, 0.8, 0.0, 0.99]}"#;
    let g3n = |extra: &str| family("Gemma3nForCausalLM", "gemma3n_text", &json_with(base, extra));
    let c = g3n("{}").unwrap();
    let widths: Vec<usize> = c.layers.iter().map(|l| l.dense.width).collect();
    assert_eq!(widths, [32, 48, 32, 64]);
    // torch's float32 Normal(0, 1).icdf, bit for bit
    let cutoffs: Vec<Option<f64>> = c.layers.iter().map(|l| l.dense.gate_cutoff).collect();
    assert_eq!(cutoffs, [Some(1.6448535919189453), Some(0.8416212797164917), None, Some(2.326348304748535)]);
    assert_eq!(c.altup, Some(crate::config::AltUp { streams: 4, active: 0, correct_scale: true }));
    assert_eq!((c.laurel_rank, c.per_layer_input.map(|p| (p.size, p.vocab))), (Some(64), Some((8, 100))));
    let sources: Vec<Option<usize>> = c.layers.iter().map(|l| l.attention().unwrap().kv_source).collect();
    assert_eq!(sources, [None, None, None, Some(1)]);
    // the class default shares 15 layers, which 4 cannot
    let e = config_err(g3n(r#"{"num_kv_shared_layers": null}"#), "num_kv_shared_layers");
    assert!(e.contains("15 shared layers"), "{e}");
    let e = config_err(g3n(r#"{"intermediate_size": [32, 48]}"#), "intermediate_size");
    assert!(e.contains("2 widths for 4 layers"), "{e}");
    let e = config_err(g3n(r#"{"activation_sparsity_pattern": [0.95, 1.0, 0.0, 0.0]}"#), "activation_sparsity_pattern");
    assert!(e.contains("[0, 1)"), "{e}");
    let e = config_err(g3n(r#"{"altup_active_idx": 4}"#), "altup_active_idx");
    assert!(e.contains("not one of the 4 streams"), "{e}");
    let e = config_err(g3n(r#"{"hidden_size": 66}"#), "hidden_size");
    assert!(e.contains("multiple of num_attention_heads"), "{e}");
}

#[test]
fn gemma3n_multimodal_reads_its_media_token_tables() {
    let text = r#"{"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": 32, "num_hidden_layers": 2, "vocab_size": 262400, "num_kv_shared_layers": 0,
        "layer_types": ["sliding_attention", "full_attention"]}"#;
    let cg = |extra: &str| {
        let top = format!(
            r#"{{"model_type": "gemma3n", "architectures": ["Gemma3nForConditionalGeneration"],
            "text_config": {text}{extra}}}"#
        );
        ModelConfig::from_json_str(&top, std::path::Path::new(PATH))
    };
    // the class defaults: vision tokens from 262144 up to the audio ones at 262272
    let c = cg("").unwrap();
    let ranges: Vec<(i64, Option<i64>, usize, usize)> =
        c.media_tokens.iter().map(|m| (m.start, m.end, m.vocab, m.hidden)).collect();
    assert_eq!(ranges, [(262_144, Some(262_272), 128, 2048), (262_272, None, 128, 1536)]);
    let c = cg(r#", "vision_config": {"vocab_offset": 300, "vocab_size": 8, "hidden_size": 16, "rms_norm_eps": 1e-5},
        "audio_config": {"vocab_offset": 308, "hidden_size": 24}"#)
    .unwrap();
    assert_eq!((c.media_tokens[0].start, c.media_tokens[0].end, c.media_tokens[0].eps), (300, Some(308), 1e-5));
    let e = config_err(cg(r#", "vision_config": 3"#), "vision_config");
    assert!(e.contains("must be an object"), "{e}");
}
