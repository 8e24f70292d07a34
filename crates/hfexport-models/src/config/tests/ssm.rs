//! The config reader on the state-space families (issue 34): Mamba's and Mamba2's keys with
//! their class defaults, transformers' encoding of infinities, and the settings refused.

use super::*;
use crate::schema::DeltaNetProjections;

fn mamba(class: &str, model_type: &str, extra: &str) -> Result<ModelConfig> {
    let base = format!(
        r#"{{"architectures": ["{class}"], "model_type": "{model_type}", "vocab_size": 128, "hidden_size": 64,
            "num_hidden_layers": 2}}"#
    );
    parse(&json_with(&base, extra))
}

/// state-spaces/mamba-130m-hf's config.json as the Hub has it (committed): `intermediate_size`,
/// `n_layer` and `time_step_rank` spelled out, tied head.
#[test]
fn mamba_130m_hub_config() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hub/mamba-130m/config.json");
    let c = ModelConfig::from_json_str(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
    let Mixer::Mamba(m) = &c.layers[0].mixer else { panic!("Mamba layers") };
    assert_eq!((m.inner, m.state, m.conv_kernel, m.dt_rank, m.conv_bias, m.bias), (1536, 16, 4, 48, true, false));
    assert_eq!((c.layers.len(), c.layers[0].mlp, c.tie_word_embeddings), (24, LayerMlp::None, true));
    assert!(c.recurrent());
    let cache = c.layers[0].cache(&hfexport_core::Dim::konst(8));
    let shapes: Vec<Vec<i64>> = cache.iter().map(|(_, s)| s.iter().map(|d| d.as_const().unwrap()).collect()).collect();
    assert_eq!(shapes, [vec![1, 1536, 3], vec![1, 1536, 16]]);
}

#[test]
fn mamba_class_defaults() {
    let c = mamba("MambaForCausalLM", "mamba", "{}").unwrap();
    let Mixer::Mamba(m) = &c.layers[0].mixer else { panic!("Mamba layers") };
    // expand 2, state 16, kernel 4, "auto" rank ceil(64 / 16), conv bias, no projection bias
    assert_eq!((m.inner, m.state, m.conv_kernel, m.dt_rank, m.conv_bias, m.bias), (128, 16, 4, 4, true, false));
    assert_eq!((c.norm_eps, c.tie_word_embeddings, c.eos_token_ids.clone()), (1e-5, true, vec![0]));
    // `intermediate_size` is not read: MambaConfig recomputes it from `expand`
    let c = mamba("MambaForCausalLM", "mamba", r#"{"expand": 3, "intermediate_size": 7, "time_step_rank": 5}"#);
    let Mixer::Mamba(m) = &c.unwrap().layers[0].mixer else { panic!("Mamba layers") };
    assert_eq!((m.inner, m.dt_rank), (192, 5));
    let e = mamba("MambaForCausalLM", "mamba", r#"{"conv_kernel": 1}"#).unwrap_err().to_string();
    assert!(e.contains("conv_kernel") && e.contains("not supported"), "{e}");
}

#[test]
fn mamba2_keys_and_checks() {
    let c = mamba("Mamba2ForCausalLM", "mamba2", r#"{"num_heads": 8, "head_dim": 16, "n_groups": 2}"#).unwrap();
    let Mixer::Mamba2(m) = &c.layers[0].mixer else { panic!("Mamba2 layers") };
    assert_eq!((m.heads, m.head_dim, m.groups, m.state, m.conv_kernel), (8, 16, 2, 128, 4));
    assert_eq!((m.inner(), m.conv_channels(), m.dt_limit), (128, 128 + 2 * 2 * 128, (0.0, f64::INFINITY)));
    assert_eq!((c.tie_word_embeddings, c.eos_token_ids.clone(), c.pad_token_id), (false, vec![2], Some(1)));
    // transformers writes an infinity as {"__float__": "Infinity"}
    let limit = r#"{"num_heads": 8, "head_dim": 16, "n_groups": 2,
        "time_step_limit": [0.1, {"__float__": "Infinity"}]}"#;
    let Mixer::Mamba2(m) = &mamba("Mamba2ForCausalLM", "mamba2", limit).unwrap().layers[0].mixer else { panic!() };
    assert_eq!(m.dt_limit, (0.1, f64::INFINITY));
    for (extra, key) in [
        (r#"{"num_heads": 8, "head_dim": 8, "n_groups": 2}"#, "num_heads"),
        (r#"{"num_heads": 8, "head_dim": 16, "n_groups": 3}"#, "n_groups"),
        (r#"{"num_heads": 8, "head_dim": 16, "n_groups": 2, "time_step_limit": [1.0]}"#, "time_step_limit"),
        (r#"{"num_heads": 8, "head_dim": 16, "n_groups": 2, "time_step_limit": "wide"}"#, "time_step_limit"),
    ] {
        let e = mamba("Mamba2ForCausalLM", "mamba2", extra).unwrap_err().to_string();
        assert!(e.contains(key), "{extra}: {e}");
    }
}

fn falcon_h1(extra: &str) -> Result<ModelConfig> {
    let base = r#"{"architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1", "vocab_size": 128,
        "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 96, "mamba_n_heads": 8, "mamba_d_state": 16}"#;
    parse(&json_with(base, extra))
}

#[test]
fn falcon_h1_layers_norms_and_multipliers() {
    let c = falcon_h1("{}").unwrap();
    let Mixer::AttentionAndMamba2(a, m) = &c.layers[0].mixer else { panic!("parallel layers") };
    // the width is mamba_expand (2) * hidden without mamba_d_ssm; "auto" head size 128 / 8
    assert_eq!((a.heads, a.kv_heads, a.head_dim, a.rope.is_some()), (4, 2, 16, true));
    assert_eq!((m.heads, m.head_dim, m.groups, m.state, m.conv_kernel), (8, 16, 1, 16, 4));
    // class defaults: no gated norm (mamba_rms_norm false), no projection biases, conv bias
    assert_eq!((m.norm, m.bias, m.out_bias, m.conv_bias), (GatedNorm::None, false, false, true));
    assert_eq!(
        c.mup,
        Some(Mup {
            key: 1.0,
            attention_in: 1.0,
            attention_out: 1.0,
            ssm_in: 1.0,
            ssm_out: 1.0,
            ssm: [1.0; 5],
            mlp: [1.0; 2]
        })
    );
    assert_eq!((c.embedding_scale, c.logits_scaling, c.layers[0].mlp), (Some(1.0), Some(1.0), LayerMlp::Dense));
    let names: Vec<&str> = c.layers[1].cache(&hfexport_core::Dim::konst(8)).iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["key", "value", "conv", "ssm"]);
    assert!(c.recurrent() && c.scans());

    let c = falcon_h1(
        r#"{"mamba_d_ssm": 96, "mamba_n_heads": 6, "mamba_rms_norm": true, "mamba_proj_bias": true,
            "key_multiplier": 0.5, "ssm_multipliers": [1, 2, 3, 4, 5], "mlp_multipliers": [0.25, 4],
            "embedding_multiplier": 3.0, "lm_head_multiplier": 0.25}"#,
    )
    .unwrap();
    let Mixer::AttentionAndMamba2(_, m) = &c.layers[0].mixer else { panic!("parallel layers") };
    assert_eq!((m.inner(), m.head_dim, m.norm, m.bias, m.out_bias), (96, 16, GatedNorm::BeforeGate, true, false));
    let mup = c.mup.unwrap();
    assert_eq!((mup.key, mup.ssm, mup.mlp), (0.5, [1.0, 2.0, 3.0, 4.0, 5.0], [0.25, 4.0]));
    assert_eq!((c.embedding_scale, c.logits_scaling), (Some(3.0), Some(4.0)));
    let c = falcon_h1(r#"{"mamba_rms_norm": true, "mamba_norm_before_gate": false, "projectors_bias": true}"#);
    let Mixer::AttentionAndMamba2(_, m) = &c.unwrap().layers[0].mixer else { panic!("parallel layers") };
    assert_eq!((m.norm, m.bias, m.out_bias), (GatedNorm::AfterGate, false, true));

    for (extra, key) in [
        (r#"{"mamba_d_ssm": 100}"#, "mamba_d_ssm (100) must equal mamba_n_heads * mamba_d_head"),
        (r#"{"mamba_d_head": 8}"#, "hidden_size * mamba_expand (64 * 2) must equal"),
        (r#"{"ssm_multipliers": [1, 2]}"#, "ssm_multipliers"),
        (r#"{"mlp_multipliers": "large"}"#, "mlp_multipliers"),
        (r#"{"lm_head_multiplier": 0}"#, "lm_head_multiplier"),
    ] {
        let e = falcon_h1(extra).unwrap_err().to_string();
        assert!(e.contains(key), "{extra}: {e}");
    }
}

fn delta_net(class: &str, model_type: &str, extra: &str) -> Result<ModelConfig> {
    let base = format!(
        r#"{{"architectures": ["{class}"], "model_type": "{model_type}", "vocab_size": 128, "hidden_size": 64,
            "num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "intermediate_size": 96}}"#
    );
    parse(&json_with(&base, extra))
}

#[test]
fn qwen3_5_and_qwen3_next_layers() {
    let c = delta_net("Qwen3_5ForCausalLM", "qwen3_5_text", "{}").unwrap();
    // without layer_types every 4th layer attends (full_attention_interval, 4)
    let attends: Vec<bool> = c.layers.iter().map(|l| l.attention().is_some()).collect();
    assert_eq!(attends, [false, false, false, true, false, false, false, true]);
    let Mixer::GatedDeltaNet(d) = &c.layers[0].mixer else { panic!("DeltaNet layers") };
    assert_eq!((d.key_heads, d.value_heads, d.key_dim, d.value_dim, d.conv_kernel), (16, 32, 128, 128, 4));
    assert_eq!((d.projections, d.conv_channels()), (DeltaNetProjections::Separate, 2 * 16 * 128 + 32 * 128));
    let shapes: Vec<Vec<i64>> = c.layers[0]
        .cache(&hfexport_core::Dim::konst(8))
        .iter()
        .map(|(_, s)| s.iter().map(|d| d.as_const().unwrap()).collect())
        .collect();
    assert_eq!(shapes, [vec![1, 8192, 3], vec![1, 32, 128, 128]]);
    // the class default partial rotary 0.25 of head_dim 16
    let a = c.layers[3].attention().unwrap();
    assert_eq!((a.rope.as_ref().unwrap().dim, c.norm_eps), (4, 1e-6));
    assert!(c.recurrent() && c.scans() && c.moe.is_none());

    let c = delta_net(
        "Qwen3NextForCausalLM",
        "qwen3_next",
        r#"{"full_attention_interval": 2, "linear_num_key_heads": 2, "linear_num_value_heads": 6,
            "num_experts": 4, "num_experts_per_tok": 2, "mlp_only_layers": [0]}"#,
    )
    .unwrap();
    let attends: Vec<bool> = c.layers.iter().map(|l| l.attention().is_some()).collect();
    assert_eq!(attends, [false, true, false, true, false, true, false, true]);
    let Mixer::GatedDeltaNet(d) = &c.layers[0].mixer else { panic!("DeltaNet layers") };
    assert_eq!((d.key_heads, d.value_heads, d.projections), (2, 6, DeltaNetProjections::Fused));
    let mlps: Vec<LayerMlp> = c.layers.iter().map(|l| l.mlp).collect();
    assert_eq!(mlps[..2], [LayerMlp::Dense, LayerMlp::Sparse]);

    for (extra, key) in [
        (r#"{"linear_num_key_heads": 4, "linear_num_value_heads": 6}"#, "linear_num_value_heads"),
        (r#"{"linear_conv_kernel_dim": 1}"#, "linear_conv_kernel_dim"),
        (r#"{"num_hidden_layers": 2, "layer_types": ["linear_attention", "sliding_attention"]}"#, "layer_types"),
    ] {
        let e = delta_net("Qwen3_5ForCausalLM", "qwen3_5_text", extra).unwrap_err().to_string();
        assert!(e.contains(key), "{extra}: {e}");
    }
}
