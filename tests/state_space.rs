//! State-space models (the recurrent fixtures: Mamba) in every format's real runtime.
//!
//! Generation: a static-cache export's caches are each layer's convolution inputs and scan
//! state, updated in place (io-binding in ONNX Runtime, state variables in OpenVINO (and bound
//! tensors stateless), mutated inputs in libtorch and ExecuTorch). ONNX and OpenVINO run the
//! prompt in one call through their loops (`Scan`, `TensorIterator`: a multi-token decode, or a
//! prefill and a one-token decode); `.pt2` and `.pte` have one `decode` of one token per call,
//! which takes the prompt token by token. The
//! runtime's generator gives transformers' 16 greedy tokens, twice in a row (a new prompt
//! starts from a zero state), after `--verify` passed. Forward exports at a fixed sequence
//! verify against the reference evaluator (which equals transformers within 1e-4: `golden.rs`)
//! in every format; ONNX's and OpenVINO's `--dynamic` forward give transformers' logits in their
//! runtimes, the others refuse a run-time sequence. A growing cache is refused; a refused export
//! leaves no folder.
//!
//! Random checkpoints nobody has seen (`xtask/python/random_ssm.py`: state sizes, conv kernels,
//! expansions, time-step ranks, head counts and sizes, group counts, chunk sizes that do and do
//! not divide the sequence, time-step limits, tied or untied heads): the evaluator gives
//! transformers' logits at every unpadded position, and every runtime gives transformers'
//! greedy tokens after `--verify` passed. `HFEXPORT_UNSEEN_SEED` picks another seed.

mod common;

use common::{causal_lm_request, fixture, python, recurrent_fixtures, worst_unpadded};
use hfexport::core::metadata::ExportMetadata;
use hfexport::{
    backend, AutoExportConfig, AutoHfExporter, Checkpoint, Evaluator, ExportFormat, Generation, Task, Tensor,
};
use hfexport_models::safetensors::read_all;
use std::collections::BTreeMap;
use std::path::Path;

/// The random checkpoints' seed unless `HFEXPORT_UNSEEN_SEED` says otherwise.
const UNSEEN_SEED: u64 = 34;
/// Random checkpoints per family.
const PER_ARCH: usize = 2;

/// Every format, OpenVINO also stateless.
fn configs() -> Vec<(&'static str, serde_json::Value)> {
    let cfg = |format: &str| serde_json::json!({"export_format": format, "dynamic": true});
    let mut stateless = cfg("openvino");
    stateless["stateful"] = false.into();
    vec![
        ("onnx", cfg("onnx")),
        ("openvino", cfg("openvino")),
        ("openvino stateless", stateless),
        ("dynamo", cfg("dynamo")),
        ("executorch", cfg("executorch")),
    ]
}

fn export(
    name: &str,
    out: &Path,
    config: &serde_json::Value,
    generation: Option<Generation>,
) -> hfexport::Result<ExportMetadata> {
    export_model(&fixture(name), out, config, generation)
}

fn export_model(
    model: &Path,
    out: &Path,
    config: &serde_json::Value,
    generation: Option<Generation>,
) -> hfexport::Result<ExportMetadata> {
    let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(config)?)?.with_verify(true);
    exporter.export(&causal_lm_request(model, out, generation), &mut |_| {})
}

fn verified(meta: &ExportMetadata) -> Result<(), String> {
    match &meta.verification {
        Some(v) if v.max_abs_diff <= v.atol => Ok(()),
        other => Err(format!("verification {other:?}")),
    }
}

/// Whether `format` lowers a scan to the runtime's own loop over a run-time sequence.
fn loops(format: ExportFormat) -> bool {
    matches!(format, ExportFormat::Onnx | ExportFormat::Openvino)
}

/// Exports `model` for generation in every runtime (after `--verify`), with a multi-token
/// decode and with a prefill, and checks that each gives `want` from `prompt`, twice in a row;
/// the failures. ONNX and OpenVINO run the prompt in one call (their loops); the other formats
/// have one `decode` of one token per call whatever was asked.
fn generate_everywhere(model: &Path, out: &Path, prompt: &[i64], want: &[i64]) -> Vec<String> {
    let scans = Checkpoint::open(model).unwrap().config.scans();
    let mut failures = vec![];
    for multi_token_decode in [true, false] {
        let generation = Some(Generation { static_cache: Some(32), multi_token_decode });
        for (label, config) in configs() {
            let format = ExportFormat::parse(config["export_format"].as_str().unwrap()).unwrap();
            // a scan without a loop lowering: one one-token decode; OpenVINO's stateful decode
            // takes the prompt itself
            let one_component = multi_token_decode
                || (scans && !loops(format))
                || (label == "openvino" && config.get("stateful").is_none());
            let expected: &[&str] = if one_component { &["decode"] } else { &["prefill", "decode"] };
            let dir = out.join(format!("{}-{multi_token_decode}", label.replace(' ', "_")));
            let run = || -> Result<(), String> {
                let meta = export_model(model, &dir, &config, generation).map_err(|e| e.to_string())?;
                verified(&meta)?;
                let names: Vec<&str> = meta.components.iter().map(|c| c.name()).collect();
                if names != expected {
                    return Err(format!("components {names:?}, expected {expected:?}"));
                }
                let runtime = backend(format).unwrap().runtime().map_err(|e| e.to_string())?;
                let mut generator = runtime.open_generator(&dir).map_err(|e| e.to_string())?;
                for round in ["first", "second"] {
                    let got = generator.generate(prompt, want.len(), &[]).map_err(|e| e.to_string())?;
                    if got.tokens != want {
                        return Err(format!("{round} prompt: tokens {:?}, transformers' {want:?}", got.tokens));
                    }
                }
                Ok(())
            };
            if let Err(e) = run() {
                failures.push(format!("{} {label} (multi-token decode {multi_token_decode}): {e}", model.display()));
            }
        }
    }
    failures
}

#[test]
fn generation_gives_transformers_tokens_in_every_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    for name in recurrent_fixtures() {
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let prompt = gold["greedy.prompt_ids"].as_i64().unwrap().to_vec();
        let want = gold["greedy.tokens"].as_i64().unwrap().to_vec();
        failures.extend(generate_everywhere(&fixture(name), &tmp.path().join(name), &prompt, &want));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn random_checkpoints_match_transformers_in_the_evaluator_and_every_runtime() {
    let seed: u64 = std::env::var("HFEXPORT_UNSEEN_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(UNSEEN_SEED);
    let tmp = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("xtask/python/random_ssm.py");
    let out = std::process::Command::new(python())
        .arg(&script)
        .arg(tmp.path().join("ckpt"))
        .args(["--seed", &seed.to_string(), "--per-arch", &PER_ARCH.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}: {}", script.display(), String::from_utf8_lossy(&out.stderr));
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("ckpt/index.json")).unwrap()).unwrap();
    let cases = index["cases"].as_array().unwrap();
    assert_eq!(cases.len(), index["archs"].as_array().unwrap().len() * PER_ARCH);
    let mut failures = vec![];
    for case in cases {
        let name = case["dir"].as_str().unwrap();
        let dir = tmp.path().join("ckpt").join(name);
        let what = format!("{name} (seed {seed}: {})", case["description"]);
        let ckpt = Checkpoint::open(&dir).unwrap_or_else(|e| panic!("{what}: {e}"));
        let g = hfexport::build(&ckpt.config, &ckpt, Task::CausalLm, &Default::default()).unwrap();
        let ev = Evaluator::new(&g, &ckpt).unwrap();
        let gold = read_all(dir.join("golden.safetensors")).unwrap();
        for run in ["single", "batch"] {
            let inputs: BTreeMap<String, Tensor> = ["input_ids", "attention_mask"]
                .iter()
                .map(|k| (k.to_string(), gold[&format!("{run}.{k}")].clone()))
                .collect();
            let logits = &ev.run(&inputs).unwrap()["logits"];
            let (d, at) = worst_unpadded(logits, &gold[&format!("{run}.logits")], &inputs["attention_mask"]).unwrap();
            if d > 1e-4 {
                failures.push(format!("{what}: {run}: |diff| {d:e} at {at:?}"));
            }
        }
        if let (Some(prompt), Some(want)) = (gold.get("greedy.prompt_ids"), gold.get("greedy.tokens")) {
            let (prompt, want) = (prompt.as_i64().unwrap().to_vec(), want.as_i64().unwrap().to_vec());
            let found = generate_everywhere(&dir, &tmp.path().join("exports").join(name), &prompt, &want);
            failures.extend(found.into_iter().map(|f| format!("{what}: {f}")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn forward_exports_at_a_fixed_sequence_verify_in_every_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    for name in recurrent_fixtures() {
        for (label, mut config) in configs().into_iter().filter(|(l, _)| !l.ends_with("stateless")) {
            // batch 1 and sequence 16: the scan unrolls over the sample's length
            config["dynamic"] = false.into();
            let out = tmp.path().join(name).join(label);
            let meta = export(name, &out, &config, None).unwrap_or_else(|e| panic!("{name} {label}: {e}"));
            verified(&meta).unwrap_or_else(|e| panic!("{name} {label}: {e}"));
        }
    }
}

/// ONNX and OpenVINO run the scan over any sequence (one `Scan`, one `TensorIterator`): a
/// `--dynamic` forward export gives transformers' logits in their runtimes for one sequence and
/// a left-padded batch; `.pt2` and `.pte`, with no loop lowering, refuse a run-time sequence
/// naming the scan (a model
/// whose recurrent layers only convolve, LFM2, exports it everywhere and verifies). A growing
/// cache is refused everywhere. A refused export leaves no folder.
#[test]
fn a_run_time_sequence_needs_a_loop_and_a_growing_cache_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for name in recurrent_fixtures() {
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        for (label, config) in configs() {
            let out = tmp.path().join(name).join(label.replace(' ', "_"));
            let format = ExportFormat::parse(config["export_format"].as_str().unwrap()).unwrap();
            let scans = Checkpoint::open(&fixture(name)).unwrap().config.scans();
            match export(name, &out, &config, None) {
                Ok(meta) if !loops(format) && !scans => {
                    verified(&meta).unwrap_or_else(|e| panic!("{name} {label}: {e}"))
                }
                Ok(meta) if loops(format) => {
                    verified(&meta).unwrap_or_else(|e| panic!("{name} {label}: {e}"));
                    let cfg = AutoExportConfig::from_dict(&config).unwrap();
                    let runtime = backend(format).unwrap().runtime().unwrap();
                    let mut runner = runtime.open_runner(&out, &meta.components[0], &cfg).unwrap();
                    for run in ["single", "batch"] {
                        let inputs: BTreeMap<String, Tensor> = ["input_ids", "attention_mask"]
                            .iter()
                            .map(|k| (k.to_string(), gold[&format!("{run}.{k}")].clone()))
                            .collect();
                        let logits = &runner.run(&inputs).unwrap()["logits"];
                        let (d, at) =
                            worst_unpadded(logits, &gold[&format!("{run}.logits")], &inputs["attention_mask"]).unwrap();
                        assert!(d <= 1e-4, "{name} {label} {run}: |diff| {d:e} at {at:?}");
                    }
                }
                Ok(_) => panic!("{name} {label}: a run-time sequence exported without a loop lowering"),
                Err(e) => {
                    let e = e.to_string();
                    assert!(!loops(format), "{name} {label}: {e}");
                    assert!(e.contains("run-time length") && e.contains("loop"), "{name} {label}: {e}");
                    assert!(!out.exists(), "{name} {label}: a refused export left {}", out.display());
                }
            }
            let out = tmp.path().join(name).join(format!("{}-growing", label.replace(' ', "_")));
            let growing = Some(Generation { static_cache: None, multi_token_decode: false });
            let e = export(name, &out, &config, growing).expect_err("no growing cache").to_string();
            assert!(e.contains("fixed-size recurrent state") && e.contains("--static-cache"), "{name} {label}: {e}");
            assert!(!out.exists(), "{name} {label}: a refused export left {}", out.display());
        }
    }
}

/// int8 and int4 exports (the layers' linears, head and embeddings; `dt_proj` kept float) pass
/// `--verify` in every runtime, generation and forward, and report how far quantization moved
/// the logits.
#[test]
fn quantized_exports_verify_in_every_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let generation = Some(Generation { static_cache: Some(32), multi_token_decode: true });
    let mut failures = vec![];
    for name in recurrent_fixtures() {
        // a mixture of experts takes the asymmetric recipes: runtimes that quantize activations
        // (ONNX Runtime's MatMulNBits, XNNPACK) move routing probabilities by more than a random
        // router's near ties (as tests/unseen_checkpoints.rs does)
        let model = Checkpoint::open(&fixture(name)).unwrap().config;
        let moe = model.moe.is_some();
        for quantizer in ["int8", "int4"] {
            for (label, mut config) in configs() {
                config["quantizer"] = match moe {
                    true => serde_json::json!({"weights": quantizer, "symmetric": false}),
                    false => quantizer.into(),
                };
                if moe && label == "executorch" {
                    // XNNPACK's linears take no zero points: the portable kernels dequantize
                    config["backend"] = "portable".into();
                }
                for (kind, generation) in [("generation", generation), ("forward", None)] {
                    if generation.is_none() {
                        config["dynamic"] = false.into();
                    }
                    let out = tmp.path().join(name).join(quantizer).join(label.replace(' ', "_")).join(kind);
                    let what = format!("{name} {quantizer} {label} {kind}");
                    match export(name, &out, &config, generation) {
                        Err(e) => failures.push(format!("{what}: {e}")),
                        Ok(meta) => {
                            if let Err(e) = verified(&meta) {
                                failures.push(format!("{what}: {e}"));
                            }
                            let v = meta.verification.as_ref();
                            if v.and_then(|v| v.against_float.as_ref()).is_none() {
                                failures.push(format!("{what}: no comparison against the float model"));
                            }
                            // ONNX Runtime and XNNPACK round activations: the reference measures by how much
                            let rounds = label == "onnx" || (label == "executorch" && !moe);
                            if v.and_then(|v| v.activation_rounding).is_some() != rounds {
                                failures.push(format!("{what}: activation rounding measured: {}", !rounds));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
