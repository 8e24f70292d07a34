//! Whisper (`WhisperForConditionalGeneration`) as two components: the `encoder` (log-mel
//! features in; the encoder states and every decoder layer's cross-attention keys and values
//! out) and the static-cache `decode` taking them. In the reference evaluator the encoder states
//! equal transformers' at 1e-4 (single and batched features) and a greedy loop over `decode`
//! (the start token in an empty cache, then one token a step) gives transformers' 16 plain
//! greedy tokens; each format's export passes `--verify` for both components in its runtime.

mod common;
use common::{fixture, speech_fixtures};
use hfexport::{AutoExportConfig, AutoHfExporter, DType, ExportRequest, Generation};
use hfexport_core::plan::Role;
use hfexport_core::{Evaluator, Tensor};
use hfexport_models::safetensors::read_all;
use hfexport_models::{build_generation, cache_name, BuildOptions, Checkpoint, Task};
use std::collections::BTreeMap;

const CACHE: usize = 24;

fn worst(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.shape(), b.shape());
    a.as_f32().unwrap().iter().zip(b.as_f32().unwrap()).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max)
}

/// Greedy tokens from the evaluator: `decode` over a static cache of `CACHE` slots, fed the
/// encoder's cross-attention outputs on every call.
fn greedy(ckpt: &Checkpoint, decode: &hfexport_core::Graph, cross: &BTreeMap<String, Tensor>, n: usize) -> Vec<i64> {
    let c = &ckpt.config;
    let ev = Evaluator::new(decode, ckpt).unwrap();
    let shape = vec![1, c.num_key_value_heads, CACHE, c.head_dim];
    let zeros = Tensor::f32(shape.clone(), vec![0.0; shape.iter().product()]).unwrap();
    let mut caches: BTreeMap<String, Tensor> =
        (0..c.num_hidden_layers).flat_map(|i| ["keys", "values"].map(|k| (cache_name(i, k), zeros.clone()))).collect();
    let mut token = c.seq2seq.as_ref().unwrap().decoder_start_token_id;
    let mut got = vec![];
    for pos in 0..n {
        let mut inputs = BTreeMap::from([
            ("input_ids".to_string(), Tensor::i64(vec![1, 1], vec![token]).unwrap()),
            (
                "attention_mask".to_string(),
                Tensor::bool(vec![1, 1, 1, CACHE], (0..CACHE).map(|j| j <= pos).collect()).unwrap(),
            ),
            ("position_ids".to_string(), Tensor::i64(vec![1, 1], vec![pos as i64]).unwrap()),
        ]);
        inputs.extend(caches.iter().map(|(k, v)| (format!("input.{k}"), v.clone())));
        inputs.extend(cross.iter().map(|(k, v)| (k.clone(), v.clone())));
        let mut out = ev.run(&inputs).unwrap();
        for (k, v) in caches.iter_mut() {
            *v = out.remove(&format!("output.{k}")).unwrap();
        }
        let logits = out["logits"].as_f32().unwrap();
        token = (0..c.vocab_size).max_by(|&a, &b| logits[a].total_cmp(&logits[b]).then(b.cmp(&a))).unwrap() as i64;
        got.push(token);
    }
    got
}

#[test]
fn whisper_components_match_transformers_in_the_evaluator() {
    let names = speech_fixtures();
    assert!(!names.is_empty(), "the manifest lists the speech fixtures");
    for name in names {
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let plan = build_generation(&ckpt.config, &ckpt, &BuildOptions::default(), Some(CACHE), true).unwrap();
        let roles: Vec<Role> = plan.iter().map(|p| p.spec.role).collect();
        assert_eq!(roles, [Role::Encoder, Role::Decode], "{name}");
        let (encoder, decode) = (&plan[0].graph, &plan[1].graph);
        let ev = Evaluator::new(encoder, &ckpt).unwrap();
        let mut cross = BTreeMap::new();
        for case in ["single", "batch"] {
            let feats = gold[&format!("{case}.input_features")].clone();
            let out = ev.run(&BTreeMap::from([("input_features".to_string(), feats)])).unwrap();
            let d = worst(&out["encoder_hidden_states"], &gold[&format!("{case}.encoder_hidden_states")]);
            assert!(d <= 1e-4, "{name} {case}: encoder states differ by {d}");
            if case == "single" {
                cross = out.into_iter().filter(|(k, _)| k.starts_with("cross.")).collect();
            }
        }
        assert_eq!(cross.len(), 2 * ckpt.config.num_hidden_layers, "{name}: a key and value output per layer");
        let want = gold["single.tokens"].as_i64().unwrap().to_vec();
        assert_eq!(greedy(&ckpt, decode, &cross, want.len()), want, "{name}: greedy tokens differ from transformers'");
    }
}

#[test]
fn whisper_exports_verify_in_every_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    for name in speech_fixtures() {
        for format in ["onnx", "openvino", "dynamo", "executorch"] {
            let config = serde_json::json!({"export_format": format, "dynamic": true});
            let exporter =
                AutoHfExporter::from_config(AutoExportConfig::from_dict(&config).unwrap()).unwrap().with_verify(true);
            let req = ExportRequest {
                model: fixture(name),
                output: tmp.path().join(format!("{name}-{format}")),
                task: None,
                dtype: DType::F32,
                force: false,
                generation: Some(Generation { static_cache: Some(CACHE), multi_token_decode: true }),
            };
            let meta = exporter.export(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{name} {format}: {e}"));
            assert_eq!(meta.task, Task::SpeechRecognition.name());
            let names: Vec<&str> = meta.components.iter().map(|c| c.name()).collect();
            assert_eq!(names, ["encoder", "decode"], "{name} {format}");
            let v = meta.verification.unwrap_or_else(|| panic!("{name} {format}: not verified"));
            assert!(v.max_abs_diff <= v.atol, "{name} {format}: {v:?}");
        }
    }
}

#[test]
fn whisper_without_a_static_cache_is_refused() {
    let ckpt = Checkpoint::open(&fixture("whisper")).unwrap();
    let e = build_generation(&ckpt.config, &ckpt, &BuildOptions::default(), None, false).unwrap_err().to_string();
    assert!(e.contains("--static-cache"), "{e}");
    let e = hfexport_models::build(&ckpt.config, &ckpt, Task::SpeechRecognition, &BuildOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("--for-generation"), "{e}");
}
