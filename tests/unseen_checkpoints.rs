//! The builder and the reference evaluator on checkpoints nobody has seen: random tiny configs of
//! every supported family (Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 1/2/3, Granite, OLMo 2,
//! SmolLM3, GPT-2, Starcoder2, Phi, GPT-NeoX, GPTBigCode, GPT-J, Cohere 1/2, StableLM, GLM, GLM-4,
//! Falcon, Bloom, OPT, the MoE families up to GPT-OSS (MXFP4 experts among them) and DeepSeek-V2/V3
//! (latent attention, grouped routing)) across the space transformers accepts (sizes, head dims unlike
//! hidden/heads, kv-head counts, rope types and forms, partial rotary, longrope, scaling lengths,
//! sliding windows and mixed layer types, per-layer-type rope, NoPE layers, soft-caps,
//! multipliers, parallel blocks,
//! tied/untied heads, biases, activations, eps), generated with
//! their goldens by transformers itself (`xtask/python/random_checkpoints.py`), must give the
//! same logits at every non-padded position, for one sequence and a left-padded batch of two.
//!
//! A second test exports other random checkpoints to every format (ONNX at the default opset and
//! at opset 23 with native attention, OpenVINO IR, `.pt2`) and runs each in its own runtime from
//! Python (`tests/python/run_exports.py`): the same logits within 1e-4 (both tests: or within
//! twice transformers' own float32 error against float64, where a random config's logits are
//! that ill-conditioned: a Gemma 3 of head dim 256 with a scale of 8^-0.5). It also exports them for
//! generation (static cache, multi-token decode; OpenVINO stateful) and runs each format's plain
//! Python loop (`tests/python/unseen_generation.py`): the same greedy tokens as transformers'
//! `generate(use_cache=False)` (see that script for why not the cached one).
//!
//! A third test exports one checkpoint of every family quantized (int4 in the widest group that
//! fits, else int8; symmetric or not) to every format against transformers on fake-quantized
//! weights, and their OpenVINO and `.pt2` generation exports against `generate` on the
//! fake-quantized model.
//!
//! Needs the Python oracle: `HFEXPORT_PYTHON` (set by `cargo xtask test`) must be a python with
//! torch and transformers. Environment knobs:
//!   HFEXPORT_UNSEEN_SEED   another seed (default below); the failure report names the seed
//!   HFEXPORT_UNSEEN_COUNT  how many checkpoints (default: 4 per family)
//!   HFEXPORT_UNSEEN_KEEP   set to 1 to keep the generated checkpoints (their folder is printed)
//!   HFEXPORT_UNSEEN_ARCHS  only these families (short names: `glm4moe,ernie4_5`; default all)

mod common;

use common::worst_unpadded;
use hfexport_core::{Evaluator, Tensor};
use hfexport_models::safetensors::read_all;
use hfexport_models::{build, BuildOptions, Checkpoint, Task};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const ATOL: f32 = 1e-4;
const DEFAULT_SEED: u64 = 5_230;
/// Families are dealt round-robin, this many checkpoints each (unless HFEXPORT_UNSEEN_COUNT).
const PER_FAMILY: usize = 4;
const CASES: [&str; 2] = ["single", "batch"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn env_number<T: std::str::FromStr>(key: &str, default: T) -> T {
    match std::env::var(key) {
        Ok(v) if !v.trim().is_empty() => {
            v.trim().parse().unwrap_or_else(|_| panic!("{key}={v:?} is not a non-negative integer"))
        }
        _ => default,
    }
}

/// The python of `HFEXPORT_PYTHON`, checked to import torch and transformers.
fn oracle_python() -> PathBuf {
    const HOW: &str = "run the suite through `cargo xtask test` (it installs the [python.test] \
         packages of versions.toml into .venv/ and sets HFEXPORT_PYTHON), or run \
         `cargo xtask setup --group oracle` and set HFEXPORT_PYTHON=<repo>/.venv/bin/python";
    let python = match std::env::var_os("HFEXPORT_PYTHON") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => panic!(
            "HFEXPORT_PYTHON is not set: this test cross-checks random checkpoints against \
             transformers and needs a python with torch and transformers; {HOW}"
        ),
    };
    let probe = Command::new(&python).args(["-c", "import torch, transformers"]).output();
    match probe {
        Err(e) => panic!("HFEXPORT_PYTHON={} cannot be started ({e}); {HOW}", python.display()),
        Ok(out) if !out.status.success() => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().last().unwrap_or("").trim();
            panic!("HFEXPORT_PYTHON={} lacks torch/transformers ({last}); {HOW}", python.display())
        }
        Ok(_) => python,
    }
}

struct Case {
    name: String,
    dir: PathBuf,
    description: String,
    /// [`ATOL`], or twice transformers' own float32 error on the case (its float32 logits
    /// against float64), where the config's logits are that ill-conditioned.
    tolerance: f32,
}

/// The families dealt: `HFEXPORT_UNSEEN_ARCHS` (short names, comma separated), else all.
fn archs() -> String {
    std::env::var("HFEXPORT_UNSEEN_ARCHS").ok().filter(|a| !a.trim().is_empty()).unwrap_or_else(|| "all".into())
}

/// How many random checkpoints: in total, or as many per family (every family the script deals,
/// so a new family needs no change here).
#[derive(Clone, Copy)]
enum Count {
    Total(usize),
    PerFamily(usize),
}

fn generate(python: &Path, out: &Path, seed: u64, count: Count) -> Vec<Case> {
    let script = root().join("xtask/python/random_checkpoints.py");
    let (flag, n) = match count {
        Count::Total(n) => ("--count", n),
        Count::PerFamily(n) => ("--per-arch", n),
    };
    let res = Command::new(python)
        .arg(&script)
        .arg(out)
        .args(["--seed", &seed.to_string(), flag, &n.to_string(), "--archs", &archs()])
        .output()
        .unwrap_or_else(|e| panic!("could not run {}: {e}", script.display()));
    if !res.status.success() {
        panic!(
            "{} --seed {seed} {flag} {n} failed ({}):\n{}{}",
            script.display(),
            res.status,
            String::from_utf8_lossy(&res.stdout),
            String::from_utf8_lossy(&res.stderr)
        );
    }
    print!("{}", String::from_utf8_lossy(&res.stdout));
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("index.json")).unwrap()).unwrap();
    let cases: Vec<Case> = index["cases"]
        .as_array()
        .expect("index.json: cases")
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap().to_string(),
            dir: out.join(c["dir"].as_str().unwrap()),
            description: c["description"].as_str().unwrap().to_string(),
            tolerance: ATOL.max(2.0 * c["f32_noise"].as_f64().expect("index.json: f32_noise") as f32),
        })
        .collect();
    let want = index["count"].as_u64().expect("index.json: count") as usize;
    assert!(matches!(count, Count::PerFamily(_)) || want == n, "asked for {n} cases, the script made {want}");
    assert_eq!(cases.len(), want, "index.json lists {} cases", cases.len());
    cases
}

/// Runs `tests/python/<script> JOBS OUT` on `jobs` (written under `dir` as `<name>.json`) and
/// reads what it wrote to OUT.
fn run_script(python: &Path, script: &str, dir: &Path, name: &str, jobs: &[serde_json::Value]) -> serde_json::Value {
    let (jobs_path, out) = (dir.join(format!("{name}.json")), dir.join(format!("{name}.out.json")));
    std::fs::write(&jobs_path, serde_json::to_string(jobs).unwrap()).unwrap();
    let o = Command::new(python)
        .arg(root().join("tests/python").join(script))
        .args([&jobs_path, &out])
        .output()
        .expect("start python");
    assert!(o.status.success(), "{script} failed:\n{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

/// What went wrong with one case (`stage` says where), or the worst diff of each golden.
type Outcome = Result<Vec<(&'static str, f32, [usize; 3])>, (String, String)>;

fn check(dir: &Path) -> Outcome {
    let stage = |s: &str| {
        let s = s.to_string();
        move |e: String| (s, e)
    };
    let ckpt = Checkpoint::open(dir).map_err(|e| e.to_string()).map_err(stage("Checkpoint::open"))?;
    let g = build(&ckpt.config, &ckpt, Task::CausalLm, &BuildOptions::default())
        .map_err(|e| e.to_string())
        .map_err(stage("build"))?;
    let ev = Evaluator::new(&g, &ckpt).map_err(|e| e.to_string()).map_err(stage("Evaluator::new"))?;
    let gold =
        read_all(dir.join("golden.safetensors")).map_err(|e| e.to_string()).map_err(stage("golden.safetensors"))?;
    let mut worst = Vec::new();
    for case in CASES {
        let inputs: BTreeMap<String, Tensor> = ["input_ids", "attention_mask"]
            .iter()
            .map(|k| (k.to_string(), gold[&format!("{case}.{k}")].clone()))
            .collect();
        let out = ev.run(&inputs).map_err(|e| e.to_string()).map_err(stage(&format!("run {case}")))?;
        let logits = out.get("logits").ok_or_else(|| ("outputs".to_string(), "no `logits` output".to_string()))?;
        let (d, at) = worst_unpadded(logits, &gold[&format!("{case}.logits")], &inputs["attention_mask"])
            .map_err(stage(&format!("compare {case}")))?;
        worst.push((case, d, at));
    }
    Ok(worst)
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic with a non-string payload".to_string())
}

#[test]
fn random_checkpoints_match_transformers() {
    let python = oracle_python();
    let seed: u64 = env_number("HFEXPORT_UNSEEN_SEED", DEFAULT_SEED);
    let count = match env_number("HFEXPORT_UNSEEN_COUNT", 0) {
        0 => Count::PerFamily(PER_FAMILY),
        n => Count::Total(n),
    };
    let tmp = tempfile::tempdir().unwrap();

    let t0 = Instant::now();
    let cases = generate(&python, tmp.path(), seed, count);
    let count = cases.len();
    let generated = t0.elapsed();

    let t1 = Instant::now();
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let outcome = catch_unwind(AssertUnwindSafe(|| check(&case.dir)))
            .unwrap_or_else(|p| Err(("panic".to_string(), panic_message(p))));
        match outcome {
            Ok(worst) => {
                let line =
                    worst.iter().map(|(c, d, at)| format!("{c} {d:.1e} at {at:?}")).collect::<Vec<_>>().join(", ");
                let bad: Vec<_> = worst.iter().filter(|(_, d, _)| *d > case.tolerance).collect();
                let verdict = if bad.is_empty() { "ok  " } else { "FAIL" };
                println!("{verdict} {} {line}", case.name);
                if !bad.is_empty() {
                    let what = bad
                        .iter()
                        .map(|(c, d, at)| format!("{c}: worst |diff| {d:.3e} at [batch, pos, vocab] {at:?}"))
                        .collect::<Vec<_>>()
                        .join("; ");
                    failures.push(format!(
                        "{} (index {i}): {what} > {:e}\n    config: {}",
                        case.name, case.tolerance, case.description
                    ));
                }
            }
            Err((stage, msg)) => {
                println!("FAIL {} {stage}: {msg}", case.name);
                failures.push(format!(
                    "{} (index {i}): {stage} failed: {msg}\n    config: {}",
                    case.name, case.description
                ));
            }
        }
    }
    println!(
        "seed {seed}: {count} checkpoints generated in {:.1}s, checked in {:.1}s, {} failed",
        generated.as_secs_f64(),
        t1.elapsed().as_secs_f64(),
        failures.len()
    );
    if std::env::var("HFEXPORT_UNSEEN_KEEP").is_ok_and(|v| v == "1") {
        println!("checkpoints kept in {}", tmp.keep().display());
    }
    assert!(
        failures.is_empty(),
        "{} of {count} random checkpoints (HFEXPORT_UNSEEN_SEED={seed}) disagree with transformers \
         (reproduce: {} xtask/python/random_checkpoints.py OUT --seed {seed} --count {count} --archs {}):\n  {}",
        failures.len(),
        python.display(),
        archs(),
        failures.join("\n  ")
    );
}

/// Seed of the export cross-check (another draw than the evaluator test's).
const EXPORT_SEED: u64 = 77_023;

#[test]
fn random_checkpoints_export_to_every_format_and_match_transformers() {
    use hfexport::{AutoExportConfig, AutoHfExporter, DType, ExportRequest};
    let python = oracle_python();
    let seed: u64 = env_number("HFEXPORT_UNSEEN_SEED", EXPORT_SEED);
    let tmp = tempfile::tempdir().unwrap();
    // one checkpoint per family
    let cases = generate(&python, &tmp.path().join("ckpt"), seed, Count::PerFamily(1));
    let formats: [(&str, serde_json::Value); 5] = [
        ("onnx", serde_json::json!({"export_format": "onnx", "dynamic": true})),
        ("onnx-opset23", serde_json::json!({"export_format": "onnx", "dynamic": true, "opset_version": 23})),
        ("openvino", serde_json::json!({"export_format": "openvino", "dynamic": true})),
        ("dynamo", serde_json::json!({"export_format": "dynamo", "dynamic": true})),
        // ExecuTorch plans every tensor at its bound: small ones
        (
            "executorch",
            serde_json::json!({"export_format": "executorch", "dynamic_shapes": {
                "input_ids": {"0": {"name": "batch", "max": 4}, "1": {"name": "sequence", "max": 16}},
                "attention_mask": {"0": {"name": "batch"}, "1": {"name": "sequence"}},
            }}),
        ),
    ];
    let mut jobs = vec![];
    let mut failures = vec![];
    for case in &cases {
        let mut exports = serde_json::Map::new();
        // ExecuTorch's small bound stays within what the model accepts
        let max_context = hfexport_models::max_context(&Checkpoint::open(&case.dir).unwrap().config);
        for (label, config) in &formats {
            let mut config = config.clone();
            if *label == "executorch" {
                config["dynamic_shapes"]["input_ids"]["1"]["max"] = max_context.min(16).into();
            }
            let out = tmp.path().join("exports").join(&case.name).join(label);
            let req = ExportRequest {
                model: case.dir.clone(),
                output: out.clone(),
                task: Some(Task::CausalLm),
                dtype: DType::F32,
                force: false,
                generation: None,
            };
            // the .pt2 and .pte also run in the Rust runners (`--verify`, against the evaluator)
            let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(&config).unwrap())
                .unwrap()
                .with_verify(matches!(*label, "dynamo" | "executorch"));
            match exporter.export(&req, &mut |_| {}) {
                Ok(_) => {
                    exports
                        .insert(label.to_string(), common::component_file(&out).to_string_lossy().into_owned().into());
                }
                Err(e) => failures
                    .push(format!("{} {label}: export failed: {e}\n    config: {}", case.name, case.description)),
            }
        }
        jobs.push(serde_json::json!({"golden": case.dir.join("golden.safetensors"), "exports": exports}));
    }
    let worst: BTreeMap<String, f64> =
        serde_json::from_value(run_script(&python, "run_exports.py", tmp.path(), "jobs", &jobs)).unwrap();
    assert_eq!(worst.len(), cases.len() * formats.len() - failures.len(), "{worst:?}");
    for (key, d) in &worst {
        let name =
            cases.iter().find(|c| key.starts_with(&c.dir.join("golden.safetensors").to_string_lossy().into_owned()));
        let label = key.rsplit(' ').next().unwrap_or("");
        println!("{} {label}: worst |diff| {d:.1e}", name.map_or("?", |c| c.name.as_str()));
        let tol = name.map_or(ATOL, |c| c.tolerance);
        if d.is_nan() || *d > tol as f64 {
            let config = name.map_or(String::new(), |c| c.description.clone());
            failures.push(format!("{key}: worst |diff| {d:e} > {tol:e}\n    config: {config}"));
        }
    }

    // Generation exports of the same checkpoints against transformers' `generate`.
    let mut gen_jobs = vec![];
    for case in &cases {
        let mut exports = serde_json::Map::new();
        for format in ["onnx", "openvino", "dynamo", "executorch"] {
            let out = tmp.path().join("generation").join(&case.name).join(format);
            let config = serde_json::json!({"export_format": format, "dynamic": true});
            let req = ExportRequest {
                model: case.dir.clone(),
                output: out.clone(),
                task: Some(Task::CausalLm),
                dtype: DType::F32,
                force: false,
                generation: Some(hfexport::Generation { static_cache: Some(32), multi_token_decode: true }),
            };
            let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(&config).unwrap())
                .unwrap()
                .with_verify(matches!(format, "dynamo" | "executorch"));
            match exporter.export(&req, &mut |_| {}) {
                Ok(_) => {
                    exports.insert(format.to_string(), out.to_string_lossy().into_owned().into());
                }
                Err(e) => failures.push(format!("{} {format} generation: export failed: {e}", case.name)),
            }
        }
        gen_jobs.push(serde_json::json!({"checkpoint": case.dir, "exports": exports}));
    }
    let tokens: BTreeMap<String, serde_json::Value> =
        serde_json::from_value(run_script(&python, "unseen_generation.py", tmp.path(), "gen_jobs", &gen_jobs)).unwrap();
    assert_eq!(tokens.len(), cases.len() * 4 - failures.iter().filter(|f| f.contains("generation")).count());
    for (key, v) in &tokens {
        let case = cases.iter().find(|c| key.starts_with(&*c.dir.to_string_lossy()));
        let label = key.rsplit(' ').next().unwrap_or("");
        if let Some(why) = v["unchecked"].as_str() {
            println!("left out {} {label} generation: {why}", case.map_or("?", |c| c.name.as_str()));
            continue;
        }
        let ok = v["got"] == v["want"];
        if v["cached"] != v["want"] {
            println!(
                "note {}: transformers' cached generate gives {} (transformers' cached and uncached generate disagree on this config)",
                case.map_or("?", |c| c.name.as_str()),
                v["cached"]
            );
        }
        println!(
            "{} {} {label} generation: {} vs transformers {}",
            if ok { "ok  " } else { "FAIL" },
            case.map_or("?", |c| c.name.as_str()),
            v["got"],
            v["want"]
        );
        if !ok {
            let config = case.map_or(String::new(), |c| c.description.clone());
            failures.push(format!("{key}: tokens {} != transformers' {}\n    config: {config}", v["got"], v["want"]));
        }
    }
    assert!(
        failures.is_empty(),
        "exports of random checkpoints (HFEXPORT_UNSEEN_SEED={seed}) disagree with transformers:\n  {}",
        failures.join("\n  ")
    );
}

/// Seed of the quantized cross-check (one checkpoint per family).
const QUANT_SEED: u64 = 31_337;
/// How far a runtime that quantizes activations to int8 (ONNX Runtime's `MatMulNBits`, XNNPACK)
/// may be from the golden, as a fraction of the largest logit: wider than `--verify`'s 10%
/// because these models are tiny (hidden sizes from 32) and some softcap their logits to a few
/// units (measured: 18% on a Gemma 3 with a final softcap of 3 and per-token int8 activations
/// in XNNPACK, at this seed).
const QUANT_ACTIVATION_RTOL: f32 = 0.25;

/// The int4 group size (128, 64 or 32) that divides every quantized linear of `dir`'s model
/// (the exporter plans the recipe without writing), or `None` (then int8 per channel).
fn fitting_group(dir: &Path) -> Option<usize> {
    use hfexport::{AutoExportConfig, AutoHfExporter, DType, ExportRequest};
    let ckpt = Checkpoint::open(dir).unwrap();
    [128, 64, 32].into_iter().find(|g| {
        let q = serde_json::json!({"weights": "int4", "group_size": g});
        let cfg = serde_json::json!({"export_format": "onnx", "dynamic": true, "quantizer": q});
        let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(&cfg).unwrap()).unwrap();
        let req = ExportRequest {
            model: dir.to_path_buf(),
            output: dir.join("unused"),
            task: Some(Task::CausalLm),
            dtype: DType::F32,
            force: false,
            generation: None,
        };
        exporter.plan(&req, &ckpt).is_ok()
    })
}

/// Whether a case's config has experts (under any family's key: `num_experts`, Mixtral's and
/// Llama 4's `num_local_experts`, DeepSeek's, GLM-4.5's and Mistral 4's `n_routed_experts`,
/// ERNIE 4.5's `moe_num_experts`, above zero).
fn is_moe(dir: &Path) -> bool {
    let cfg: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    ["num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"]
        .iter()
        .any(|k| cfg[k].as_u64().is_some_and(|n| n > 0))
}

/// Quantized exports of random checkpoints: even cases int4 symmetric in the widest group that
/// fits (else int8 per channel), odd ones asymmetric with float embeddings. Each goes to every
/// format and runs in its runtime against transformers on the weights fake-quantized by the
/// recipe in torch (`tests/python/quantized_goldens.py`; XNNPACK's form for a symmetric `.pte`):
/// exact formats within 1e-4, the ones that quantize activations (ONNX Runtime, XNNPACK) within
/// [`QUANT_ACTIVATION_RTOL`] of the largest logit. Their OpenVINO and `.pt2` generation exports give the greedy tokens
/// of transformers' `generate` on the fake-quantized model.
#[test]
fn random_checkpoints_quantized_match_transformers() {
    use hfexport::{AutoExportConfig, AutoHfExporter, DType, ExportRequest};
    let python = oracle_python();
    let seed: u64 = env_number("HFEXPORT_UNSEEN_SEED", QUANT_SEED);
    let tmp = tempfile::tempdir().unwrap();
    let cases = generate(&python, &tmp.path().join("ckpt"), seed, Count::PerFamily(1));
    // A mixture of experts takes the asymmetric recipe, which ExecuTorch runs on the portable
    // kernels: XNNPACK's per-token int8 activations move routing probabilities by more than the
    // near ties random routers have (a Mixtral case's best gap over 21 weight draws: 6e-4), and
    // the fake-quantized golden keeps float activations, so it cannot say which expert wins.
    let recipes: Vec<serde_json::Value> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| match (fitting_group(&c.dir), i % 2 == 0 && !is_moe(&c.dir)) {
            (Some(g), true) => serde_json::json!({"weights": "int4", "group_size": g}),
            (Some(g), false) => {
                serde_json::json!({"weights": "int4", "group_size": g, "symmetric": false, "embeddings": null})
            }
            (None, sym) => serde_json::json!({"weights": "int8", "group_size": "channel", "symmetric": sym}),
        })
        .collect();
    let symmetric = |q: &serde_json::Value| q.get("symmetric") != Some(&serde_json::json!(false));
    let golden = |c: &Case, xnnpack: bool| {
        tmp.path().join(format!("{}{}.golden", c.name, if xnnpack { ".xnnpack" } else { "" }))
    };
    let fake = |c: &Case| tmp.path().join(format!("{}-fake-quantized", c.name));
    let mut jobs = vec![];
    for (c, q) in cases.iter().zip(&recipes) {
        let recipe = hfexport::core::QuantRecipe::from_json(q).unwrap().to_json();
        jobs.push(serde_json::json!({"fixture": c.dir, "recipe": recipe, "out": golden(c, false), "save": fake(c)}));
        if symmetric(q) {
            jobs.push(serde_json::json!({"fixture": c.dir, "recipe": recipe, "out": golden(c, true), "xnnpack": true}));
        }
    }
    let manifest = tmp.path().join("goldens.json");
    std::fs::write(&manifest, serde_json::to_vec(&jobs).unwrap()).unwrap();
    let o =
        Command::new(&python).arg(root().join("tests/python/quantized_goldens.py")).arg(&manifest).output().unwrap();
    assert!(o.status.success(), "quantized_goldens.py failed:\n{}", String::from_utf8_lossy(&o.stderr));

    let export = |c: &Case, label: &str, config: serde_json::Value, generation: bool| -> Result<PathBuf, String> {
        let out = tmp.path().join("exports").join(&c.name).join(label);
        let req = ExportRequest {
            model: c.dir.clone(),
            output: out.clone(),
            task: Some(Task::CausalLm),
            dtype: DType::F32,
            force: false,
            generation: generation.then_some(hfexport::Generation { static_cache: Some(32), multi_token_decode: true }),
        };
        let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(&config).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        exporter.export(&req, &mut |_| {}).map(|_| out).map_err(|e| format!("{} {label}: export failed: {e}", c.name))
    };
    let mut failures = vec![];
    // (case, label, golden, tolerance)
    let mut compared: Vec<(&Case, String, PathBuf, f32)> = vec![];
    let (mut run_jobs, mut gen_jobs) = (vec![], vec![]);
    for (c, q) in cases.iter().zip(&recipes) {
        let largest = read_all(golden(c, false)).unwrap()["single.logits"]
            .as_f32()
            .unwrap()
            .iter()
            .fold(0f32, |m, x| m.max(x.abs()));
        let activation_tol = QUANT_ACTIVATION_RTOL * largest + ATOL;
        let max_seq = hfexport_models::max_context(&Checkpoint::open(&c.dir).unwrap().config).min(16);
        let pte = serde_json::json!({"export_format": "executorch", "quantizer": q,
            "backend": if symmetric(q) { "xnnpack" } else { "portable" },
            "dynamic_shapes": {
                "input_ids": {"0": {"name": "batch", "max": 4}, "1": {"name": "sequence", "max": max_seq}},
                "attention_mask": {"0": {"name": "batch"}, "1": {"name": "sequence"}}}});
        let formats = [
            ("onnx", serde_json::json!({"export_format": "onnx", "dynamic": true, "quantizer": q})),
            ("openvino", serde_json::json!({"export_format": "openvino", "dynamic": true, "quantizer": q})),
            ("dynamo", serde_json::json!({"export_format": "dynamo", "dynamic": true, "quantizer": q})),
            ("executorch", pte),
        ];
        let (mut exports, mut xnnpack_exports) = (serde_json::Map::new(), serde_json::Map::new());
        for (label, config) in formats {
            let path = match export(c, label, config, false) {
                Ok(out) => common::component_file(&out).to_string_lossy().into_owned(),
                Err(e) => {
                    failures.push(format!("{e}\n    recipe: {q}\n    config: {}", c.description));
                    continue;
                }
            };
            let xnnpack = label == "executorch" && symmetric(q);
            let tol = if label == "onnx" || xnnpack { activation_tol } else { ATOL };
            compared.push((c, label.to_string(), golden(c, xnnpack), tol));
            match xnnpack {
                true => xnnpack_exports.insert(label.to_string(), path.into()),
                false => exports.insert(label.to_string(), path.into()),
            };
        }
        run_jobs.push(serde_json::json!({"golden": golden(c, false), "exports": exports}));
        if !xnnpack_exports.is_empty() {
            run_jobs.push(serde_json::json!({"golden": golden(c, true), "exports": xnnpack_exports}));
        }
        let mut gen = serde_json::Map::new();
        for format in ["openvino", "dynamo"] {
            match export(
                c,
                &format!("{format}-generation"),
                serde_json::json!({"export_format": format, "dynamic": true, "quantizer": q}),
                true,
            ) {
                Ok(out) => {
                    gen.insert(format.to_string(), out.to_string_lossy().into_owned().into());
                }
                Err(e) => failures.push(e),
            }
        }
        gen_jobs.push(serde_json::json!({"checkpoint": fake(c), "exports": gen}));
    }
    let worst: BTreeMap<String, f32> =
        serde_json::from_value(run_script(&python, "run_exports.py", tmp.path(), "jobs", &run_jobs)).unwrap();
    for (c, label, gold, tol) in &compared {
        let d = *worst.get(&format!("{} {label}", gold.display())).unwrap_or(&f32::INFINITY);
        println!("{} {label}: worst |diff| {d:.1e} (tolerance {tol:.1e})", c.name);
        if d.is_nan() || d > *tol {
            failures.push(format!("{} {label}: worst |diff| {d:e} > {tol:e}\n    config: {}", c.name, c.description));
        }
    }
    assert_eq!(compared.len(), cases.len() * 4, "every case exported to every format: {failures:#?}");

    let tokens: BTreeMap<String, serde_json::Value> =
        serde_json::from_value(run_script(&python, "unseen_generation.py", tmp.path(), "gen_jobs", &gen_jobs)).unwrap();
    assert_eq!(tokens.len(), cases.len() * 2, "{tokens:?}");
    for (key, v) in &tokens {
        if let Some(why) = v["unchecked"].as_str() {
            println!("left out {key} quantized generation: {why}");
            continue;
        }
        println!("{key} quantized generation: {} vs transformers {}", v["got"], v["want"]);
        if v["got"] != v["want"] {
            failures.push(format!("{key}: quantized tokens {} != transformers' {}", v["got"], v["want"]));
        }
    }
    assert!(
        failures.is_empty(),
        "quantized exports of random checkpoints (HFEXPORT_UNSEEN_SEED={seed}) disagree with transformers:\n  {}",
        failures.join("\n  ")
    );
}
