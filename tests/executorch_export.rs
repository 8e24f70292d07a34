//! `.pte` exports of every fixture in the upstream ExecuTorch 1.5.1 Python runtime (one process for
//! all, `tests/python/run_pte.py`), with both backends (XNNPACK: a delegate per linear and per permute, 1e-3;
//! portable: 1e-4): `load_method("forward").execute([input_ids, attention_mask])` gives
//! transformers' logits at every non-padded position (single and left-padded batch) and the
//! reference evaluator's at a batch and length no sample used. Generation exports (static
//! cache, prefill + decode and multi-token decode) give transformers' 16 greedy tokens when the
//! last N outputs are fed back as the caches (`tests/python/generate_pte.py`), each component a
//! method of the one `model.pte`. That program stores each weight once: prefill + decode weigh
//! at most 1.15x the forward export, and the Python runtime lists and loads both methods
//! (`tests/python/methods_pte.py`). A small program's decoded dump is a snapshot; a corrupt
//! file is a clear error. `--dynamic` without bounds gets ExecuTorch's default bounds (batch <= 1,
//! the sequence shrunk until the memory plan fits 1 GiB): a Qwen3-0.6B-shaped model (planned
//! from its config and weight shapes, no bytes) fits with a sequence bound of at least 512,
//! given bounds win, and a fixture with 40960 positions runs in the runtime within its bounds.

mod common;

use common::{fixture, fixtures, python, script, worst_unpadded};
use hfexport::core::backend::DEFAULT_SLOTS;
use hfexport::core::metadata::{ExportMetadata, Range};
use hfexport::core::plan::Positions;
use hfexport::core::weights::TensorInfo;
use hfexport::executorch::bounds::{DEFAULT_MAX_BATCH, PLAN_BUDGET, ROUND};
use hfexport::executorch::dump::PteFile;
use hfexport::{
    AutoExportConfig, AutoHfExporter, Checkpoint, DType, Evaluator, ExportConfig, ExportRequest, Generation,
    ModelConfig, Task, Tensor,
};
use hfexport_models::safetensors::{read_all, write_safetensors};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Batch and sequence bounds of the forward exports: ExecuTorch plans every tensor at its
/// bound, so the tests keep them small.
fn forward_config(backend: &str) -> serde_json::Value {
    serde_json::json!({
        "export_format": "executorch",
        "backend": backend,
        "dynamic_shapes": {
            "input_ids": {"0": {"name": "batch", "max": 4}, "1": {"name": "sequence", "max": 16}},
            "attention_mask": {"0": {"name": "batch"}, "1": {"name": "sequence"}},
        },
    })
}

fn export(name: &str, out: &Path, config: serde_json::Value, generation: Option<Generation>) -> ExportMetadata {
    let config = AutoExportConfig::from_dict(&config).unwrap();
    let req = ExportRequest {
        model: fixture(name),
        output: out.to_path_buf(),
        task: Some(Task::CausalLm),
        dtype: DType::F32,
        force: false,
        generation,
    };
    AutoHfExporter::from_config(config).unwrap().export(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `tests/python/run_pte.py` on `jobs` (written to `<dir>/<tag>-jobs.json`), in one process.
fn run_pte(dir: &Path, tag: &str, jobs: &[serde_json::Value]) -> std::process::Output {
    let path = dir.join(format!("{tag}-jobs.json"));
    std::fs::write(&path, serde_json::to_string(jobs).unwrap()).unwrap();
    Command::new(python()).arg(script("run_pte.py")).arg(&path).output().expect("start python")
}

#[test]
fn every_fixture_matches_transformers_in_the_executorch_runtime_with_both_backends() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    // every fixture exported with both backends, then run by one Python process (the runtime
    // imported once for all)
    let (b, s) = (3, 11);
    let (mut jobs, mut runs) = (vec![], vec![]);
    for (backend, atol) in [("xnnpack", 1e-3f32), ("portable", 1e-4)] {
        for name in fixtures() {
            let dir = tmp.path().join(format!("{name}-{backend}"));
            let meta = export(name, &dir, forward_config(backend), None);
            assert_eq!(meta.components[0].files, ["model.pte"], "{name}");
            assert_eq!(meta.runtime_pins.get("executorch").map(String::as_str), Some("1.5.1"), "{name}");
            let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
            let ckpt = Checkpoint::open(&fixture(name)).unwrap();
            let ids: Vec<i64> = (0..b * s).map(|i| (i as i64 * 17 + 3) % ckpt.config.vocab_size as i64).collect();
            let mask: Vec<i64> = (0..b * s).map(|i| i64::from(i >= s || i % s >= 2)).collect();
            let (ids, mask) = (Tensor::i64(vec![b, s], ids).unwrap(), Tensor::i64(vec![b, s], mask).unwrap());
            let mut cases = vec![];
            for (k, (i, m)) in [
                (&gold["single.input_ids"], &gold["single.attention_mask"]),
                (&gold["batch.input_ids"], &gold["batch.attention_mask"]),
                (&ids, &mask),
            ]
            .into_iter()
            .enumerate()
            {
                let p = tmp.path().join(format!("{name}-{backend}-case{k}.safetensors"));
                write_safetensors(&p, &[("input_ids", i), ("attention_mask", m)], &BTreeMap::new()).unwrap();
                cases.push(p);
            }
            if backend == "xnnpack" {
                let dump = PteFile::open(dir.join("model.pte")).unwrap().dump().unwrap();
                let layers = ckpt.config.num_hidden_layers;
                // a FullyConnected per linear, a StaticTranspose per permute
                assert!(dump.matches("delegate#").count() > 7 * layers, "{name}: a delegate per linear\n{dump}");
                assert!(!dump.contains("aten::linear") && !dump.contains("aten::permute_copy"), "{name}");
            }
            let out = tmp.path().join(format!("{name}-{backend}-out.safetensors"));
            jobs.push(serde_json::json!({"program": dir.join("model.pte"), "out": out, "cases": cases}));
            runs.push((backend, atol, name, out, ids, mask));
        }
    }
    let o = run_pte(tmp.path(), "forward", &jobs);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (backend, atol, name, out, ids, mask) in runs {
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let got = read_all(&out).unwrap();
        for (k, case) in ["single", "batch"].iter().enumerate() {
            let mask = &gold[&format!("{case}.attention_mask")];
            let (d, at) = worst_unpadded(&got[&k.to_string()], &gold[&format!("{case}.logits")], mask).unwrap();
            if d > atol {
                failures.push(format!("{backend} {name} {case}: worst |diff| {d:e} at {at:?} against transformers"));
            }
        }
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        let graph = hfexport_models::build(&ckpt.config, &ckpt, Task::CausalLm, &Default::default()).unwrap();
        let want = Evaluator::new(&graph, &ckpt)
            .unwrap()
            .run(&BTreeMap::from([("input_ids".to_string(), ids), ("attention_mask".to_string(), mask.clone())]))
            .unwrap();
        let (d, at) = worst_unpadded(&got["2"], &want["logits"], &mask).unwrap();
        if d > atol {
            failures.push(format!("{backend} {name} [3, 11]: worst |diff| {d:e} at {at:?} against the evaluator"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn generation_exports_give_transformers_tokens_in_the_executorch_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let variants = [
        ("static-multi", "xnnpack", Generation { static_cache: Some(32), multi_token_decode: true }),
        ("static-prefill", "xnnpack", Generation { static_cache: Some(32), multi_token_decode: false }),
        ("static-multi", "portable", Generation { static_cache: Some(32), multi_token_decode: true }),
    ];
    let (mut jobs, mut want) = (vec![], BTreeMap::new());
    for name in fixtures() {
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        for (variant, backend, generation) in variants {
            let dir = tmp.path().join(format!("{name}-{variant}-{backend}"));
            // the explicit-cache layout (the default LLM-runner one: tests/clients.rs)
            let config = serde_json::json!({"export_format": "executorch", "backend": backend, "dynamic": true, "stateful": false});
            let meta = export(name, &dir, config, Some(generation));
            // one program, a method per component
            assert!(meta.components.iter().all(|c| c.files == ["model.pte"]), "{:?}", meta.components);
            let d = dir.to_str().unwrap().to_string();
            want.insert(d.clone(), gold["greedy.tokens"].as_i64().unwrap().to_vec());
            jobs.push(serde_json::json!([d, fixture(name).join("golden.safetensors")]));
        }
    }
    let (jobs_path, out) = (tmp.path().join("jobs.json"), tmp.path().join("tokens.json"));
    std::fs::write(&jobs_path, serde_json::to_string(&jobs).unwrap()).unwrap();
    let o = Command::new(python()).arg(script("generate_pte.py")).args([&jobs_path, &out]).output().expect("python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: BTreeMap<String, Vec<i64>> = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let failures: Vec<String> = want
        .iter()
        .filter(|(d, w)| got.get(*d) != Some(w))
        .map(|(d, w)| format!("{d}: {:?} != transformers' {w:?}", got.get(d)))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A generation export (prefill + decode, static cache) is one `model.pte` whose methods share
/// every weight: at most 1.15x the bytes of the forward export (one method), with both backends
/// (XNNPACK weights as named data, portable constants in the shared constant segment), and the
/// upstream runtime lists and loads both methods.
#[test]
fn a_generation_program_stores_each_weight_once() {
    let tmp = tempfile::tempdir().unwrap();
    let mut programs = vec![];
    for backend in ["xnnpack", "portable"] {
        let forward = tmp.path().join(format!("forward-{backend}"));
        export("qwen2", &forward, forward_config(backend), None);
        let generation = tmp.path().join(format!("generation-{backend}"));
        let config =
            serde_json::json!({"export_format": "executorch", "backend": backend, "dynamic": true, "stateful": false});
        let meta = export(
            "qwen2",
            &generation,
            config,
            Some(Generation { static_cache: Some(32), multi_token_decode: false }),
        );
        let names: Vec<&str> = meta.components.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["prefill", "decode"]);
        assert!(meta.components.iter().all(|c| c.files == ["model.pte"]), "{:?}", meta.components);
        let size = |dir: &Path| std::fs::metadata(dir.join("model.pte")).unwrap().len();
        let (f, g) = (size(&forward), size(&generation));
        assert!(g as f64 <= 1.15 * f as f64, "{backend}: generation {g} bytes > 1.15 x forward {f} bytes");
        let file = PteFile::open(generation.join("model.pte")).unwrap();
        assert_eq!(file.method_names().unwrap(), ["prefill", "decode"]);
        programs.push(generation.join("model.pte"));
    }
    let o = Command::new(python()).arg(script("methods_pte.py")).args(&programs).output().expect("python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listed = String::from_utf8_lossy(&o.stdout);
    assert_eq!(listed.lines().collect::<Vec<_>>(), ["decode,prefill", "decode,prefill"], "{listed}");
}

#[test]
fn a_small_program_dumps_readably_and_corrupt_files_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("llama");
    // the default backend: kernels and XNNPACK delegates
    export("llama", &dir, serde_json::json!({"export_format": "executorch"}), None);
    let pte = dir.join("model.pte");
    let dump = PteFile::open(&pte).unwrap().dump().unwrap();
    insta::assert_snapshot!("llama_static_pte", dump);

    let good = std::fs::read(&pte).unwrap();
    let expect = |bytes: &[u8], want: &str| {
        std::fs::write(&pte, bytes).unwrap();
        let e = PteFile::open(&pte).and_then(|f| f.dump()).err().unwrap_or_else(|| panic!("{want}: accepted"));
        let e = e.to_string();
        assert!(e.contains("model.pte") && e.contains("not a valid .pte program") && e.contains(want), "{want}: {e}");
    };
    expect(&good[..good.len() / 2], "truncated");
    expect(b"not a program at all", "ET12");
    let mut bad = good.clone();
    bad[40..48].copy_from_slice(&[0xff; 8]);
    expect(&bad, "does not verify");
}

/// Qwen/Qwen3-0.6B's config.json.
const QWEN3_0_6B: &str = r#"{
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936
}"#;

/// Qwen3-0.6B's tensors without their bytes: the names its model.safetensors holds (tied
/// embeddings: no `lm_head.weight`), each bf16 of the shape the builder asks (a plan never
/// reads weights).
struct Shapes(std::collections::BTreeSet<String>);

impl Shapes {
    fn qwen3_0_6b() -> Shapes {
        let mut names: std::collections::BTreeSet<String> =
            ["model.embed_tokens.weight", "model.norm.weight"].map(String::from).into();
        for l in 0..28 {
            for t in [
                "input_layernorm",
                "post_attention_layernorm",
                "self_attn.q_proj",
                "self_attn.k_proj",
                "self_attn.v_proj",
                "self_attn.o_proj",
                "self_attn.q_norm",
                "self_attn.k_norm",
                "mlp.gate_proj",
                "mlp.up_proj",
                "mlp.down_proj",
            ] {
                names.insert(format!("model.layers.{l}.{t}.weight"));
            }
        }
        Shapes(names)
    }
}

impl hfexport_models::Weights for Shapes {
    fn expect(&self, name: &str, shape: &[usize]) -> hfexport_models::Result<TensorInfo> {
        match self.0.contains(name) {
            true => Ok(TensorInfo { dtype: DType::BF16, shape: shape.to_vec() }),
            false => panic!("Qwen3-0.6B has no tensor `{name}`"),
        }
    }
    fn has(&self, name: &str) -> bool {
        self.0.contains(name)
    }
}

/// The components of a Qwen3-0.6B-shaped export planned under `config`, prepared, and the
/// arena of each method.
fn qwen3_plan(
    config: serde_json::Value,
    generation: Option<Generation>,
) -> hfexport::Result<(hfexport::ExportPlan, Vec<hfexport::core::metadata::Component>, Vec<u64>)> {
    let model = ModelConfig::from_json_str(QWEN3_0_6B, Path::new("Qwen3-0.6B/config.json")).unwrap();
    let config = AutoExportConfig::from_dict(&config).unwrap();
    let req = ExportRequest {
        model: "Qwen3-0.6B".into(),
        output: "unused".into(),
        task: Some(Task::CausalLm),
        dtype: DType::F32,
        force: false,
        generation,
    };
    let plan = AutoHfExporter::from_config(config.clone())?.plan_model(&req, &model, &Shapes::qwen3_0_6b())?;
    let backend = hfexport::backend(config.format())?;
    let described = plan.components.iter().map(|c| backend.describe(c, vec!["model.pte".into()], &config)).collect();
    let (prepared, _) = hfexport::core::backend::prepare(backend, &config, &plan.components)?;
    let ExportConfig::Executorch(ecfg) = &config else { unreachable!() };
    let mut arenas = vec![];
    for p in &prepared {
        arenas.push(hfexport::executorch::export::method(&p.graph, ecfg).map_err(hfexport::core::Error::from)?.arena);
    }
    Ok((plan, described, arenas))
}

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

/// `--dynamic` on a Qwen3-0.6B-shaped model (151936 tokens, 40960 positions, 28 layers):
/// batch <= 1 and the longest sequence (a multiple of 64) whose plan fits 1 GiB, recorded as
/// the component's symbols and named in the note; one step more would not fit. The default
/// generation export (the LLM runner's `forward`, a static cache in the program) and a
/// growing-cache one fit too. Bounds given in dynamic_shapes win,
/// past the budget too; an impossible one is still the plan's clear error.
#[test]
fn a_qwen3_0_6b_shaped_model_gets_default_bounds_that_fit_the_budget() {
    let dynamic = serde_json::json!({"export_format": "executorch", "dynamic": true});
    let (plan, described, arenas) = qwen3_plan(dynamic.clone(), None).unwrap();
    let symbols = &described[0].symbols;
    let seq = symbols["sequence"].max;
    assert_eq!(symbols["batch"], Range { min: 1, max: DEFAULT_MAX_BATCH });
    assert!((512..40960).contains(&seq) && seq % ROUND == 0, "{symbols:?}");
    assert!(arenas[0] <= PLAN_BUDGET, "{:.2} GiB", gib(arenas[0]));
    let note = plan.notes.join("\n");
    assert!(note.contains(&format!("sequence <= {seq} (model: 40960)")) && note.contains("batch <= 1"), "{note}");
    eprintln!("Qwen3-0.6B forward: {symbols:?}, memory plan {:.3} GiB\n{note}", gib(arenas[0]));
    // the largest such bound: one more step does not fit
    let step = format!(r#"{{"input_ids": {{"1": {{"name": "sequence", "max": {}}}}}}}"#, seq + ROUND);
    let mut wider = dynamic.clone();
    wider["dynamic_shapes"] = serde_json::from_str(&step).unwrap();
    let (plan, described, arenas) = qwen3_plan(wider, None).unwrap();
    assert_eq!(described[0].symbols["sequence"].max, seq + ROUND, "a given bound wins");
    assert_eq!(described[0].symbols["batch"].max, 1, "the open batch still gets its default");
    assert!(arenas[0] > PLAN_BUDGET, "{:.3} GiB at sequence <= {}", gib(arenas[0]), seq + ROUND);
    assert!(plan.notes.join("").contains("batch <= 1") && !plan.notes.join("").contains("sequence <="));

    // the default generation export, ExecuTorch's LLM-runner layout: one `forward` over a
    // static cache of DEFAULT_SLOTS kept in the program, its query length bounded by the budget
    let runner = Generation { static_cache: None, multi_token_decode: false };
    let (plan, described, arenas) = qwen3_plan(dynamic.clone(), Some(runner)).unwrap();
    let forward = &described[0];
    assert_eq!((described.len(), forward.spec.positions), (1, Positions::Slots), "{described:?}");
    assert_eq!(forward.symbols["cache_len"], Range { min: DEFAULT_SLOTS as i64, max: DEFAULT_SLOTS as i64 });
    let seq = forward.symbols["sequence"].max;
    assert!((64..DEFAULT_SLOTS as i64).contains(&seq) && seq % ROUND == 0, "{:?}", forward.symbols);
    assert!(arenas[0] <= PLAN_BUDGET, "{:.3} GiB", gib(arenas[0]));
    assert_eq!(forward.states.len(), 56, "every layer's keys and values are the program's: {forward:?}");
    let ports: Vec<&str> = forward.inputs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(ports, ["input_ids", "cache_position"]);
    assert!(plan.notes.join("").contains(&format!("sequence <= {seq}")), "{:?}", plan.notes);
    eprintln!("Qwen3-0.6B LLM-runner forward: {:?}, memory plan {:.3} GiB", forward.symbols, gib(arenas[0]));

    // growing cache (the explicit-cache layout): one decode, its sequence and past_len bounded together
    let explicit = serde_json::json!({"export_format": "executorch", "dynamic": true, "stateful": false});
    let (_, described, arenas) =
        qwen3_plan(explicit.clone(), Some(Generation { static_cache: None, multi_token_decode: false })).unwrap();
    let total: u64 = arenas.iter().sum();
    assert!(total <= PLAN_BUDGET, "{:.3} GiB", gib(total));
    let decode = &described[0].symbols;
    assert!(decode["past_len"].max < 40959 && decode["sequence"].max < 40960, "{decode:?}");
    eprintln!(
        "Qwen3-0.6B growing cache: {:?}, memory plans {:.3} GiB",
        described.iter().map(|c| &c.symbols).collect::<Vec<_>>(),
        gib(total)
    );

    // a static cache is bounded by --static-cache: no defaults
    let (plan, described, _) =
        qwen3_plan(explicit, Some(Generation { static_cache: Some(1024), multi_token_decode: false })).unwrap();
    assert!(plan.notes.is_empty() && described.iter().all(|c| c.symbols["cache_len"].max == 1024), "{:?}", plan.notes);

    // given bounds past the budget are kept (under the hard limit); past it, the clear error
    let given = |max: i64| {
        serde_json::json!({"export_format": "executorch", "dynamic": true, "dynamic_shapes": {
            "input_ids": {"0": {"name": "batch", "max": 1}, "1": {"name": "sequence", "max": max}},
            "attention_mask": {"0": {"name": "batch"}, "1": {"name": "sequence"}}}})
    };
    let (plan, described, arenas) = qwen3_plan(given(4096), None).unwrap();
    assert!(plan.notes.is_empty() && described[0].symbols["sequence"].max == 4096);
    assert!(arenas[0] > PLAN_BUDGET, "{}", gib(arenas[0]));
    let e = qwen3_plan(given(40960), None).unwrap_err().to_string();
    assert!(e.contains("memory plan needs") && e.contains("sequence <= 40960") && e.contains("dynamic_shapes"), "{e}");
}

/// A fixture given 40960 positions (a tiny model with the context of a real one): `--dynamic`
/// alone exports (before the default bounds, its plan at batch 4096 was refused), export.json
/// records the default bounds, the progress names them and the plan size, and the ExecuTorch
/// runtime runs the program past the fixture's 64 positions as the evaluator does and at the
/// bound itself, and refuses one token more.
#[test]
fn a_dynamic_export_without_bounds_runs_within_the_default_bounds() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("llama-40960");
    std::fs::create_dir_all(&model).unwrap();
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("llama").join("config.json")).unwrap()).unwrap();
    cfg["max_position_embeddings"] = 40960.into();
    std::fs::write(model.join("config.json"), cfg.to_string()).unwrap();
    std::fs::copy(fixture("llama").join("model.safetensors"), model.join("model.safetensors")).unwrap();
    let dir = tmp.path().join("out");
    let req = ExportRequest {
        model: model.clone(),
        output: dir.clone(),
        task: Some(Task::CausalLm),
        dtype: DType::F32,
        force: false,
        generation: None,
    };
    let config =
        AutoExportConfig::from_dict(&serde_json::json!({"export_format": "executorch", "dynamic": true})).unwrap();
    let mut notes = vec![];
    let meta = AutoHfExporter::from_config(config)
        .unwrap()
        .with_verify(cfg!(feature = "executorch-runtime"))
        .export(&req, &mut |n| notes.push(n.to_string()))
        .unwrap();
    let seq = meta.symbols["sequence"].max;
    assert_eq!(meta.symbols["batch"], Range { min: 1, max: 1 });
    assert!((1024..40960).contains(&seq) && seq % ROUND == 0, "{:?}", meta.symbols);
    assert_eq!(meta.components[0].symbols, meta.symbols);
    let notes = notes.join("\n");
    assert!(notes.contains(&format!("sequence <= {seq} (model: 40960)")), "{notes}");
    let planned = notes.lines().find(|l| l.contains("memory plan of")).unwrap_or_else(|| panic!("{notes}"));
    assert!(planned.contains(&format!("at batch <= 1, sequence <= {seq}")), "{planned}");
    eprintln!("{notes}");

    // a length past the fixture's own 64 positions, and the bound itself (the same first 200
    // tokens: causal attention gives them the same logits)
    let (len, n) = (200usize, seq as usize);
    let ckpt = Checkpoint::open(&model).unwrap();
    let tokens: Vec<i64> = (0..n as i64).map(|i| (i * 17 + 3) % 256).collect();
    let keep: Vec<i64> = (0..n).map(|i| i64::from(i >= 5)).collect();
    let ids = Tensor::i64(vec![1, len], tokens[..len].to_vec()).unwrap();
    let mask = Tensor::i64(vec![1, len], keep[..len].to_vec()).unwrap();
    let (long_ids, long_mask) = (Tensor::i64(vec![1, n], tokens).unwrap(), Tensor::i64(vec![1, n], keep).unwrap());
    let cases = [tmp.path().join("short.safetensors"), tmp.path().join("long.safetensors")];
    write_safetensors(&cases[0], &[("input_ids", &ids), ("attention_mask", &mask)], &BTreeMap::new()).unwrap();
    write_safetensors(&cases[1], &[("input_ids", &long_ids), ("attention_mask", &long_mask)], &BTreeMap::new())
        .unwrap();
    let out = tmp.path().join("logits.safetensors");
    let o = run_pte(
        tmp.path(),
        "run",
        &[serde_json::json!({"program": dir.join("model.pte"), "out": out, "cases": cases})],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = read_all(&out).unwrap();
    // one token past the bound: the runtime refuses it
    let past = tmp.path().join("past.safetensors");
    let (ids_past, mask_past) =
        (Tensor::i64(vec![1, n + 1], vec![3; n + 1]).unwrap(), Tensor::i64(vec![1, n + 1], vec![1; n + 1]).unwrap());
    write_safetensors(&past, &[("input_ids", &ids_past), ("attention_mask", &mask_past)], &BTreeMap::new()).unwrap();
    let job = serde_json::json!({"program": dir.join("model.pte"), "out": tmp.path().join("past-out.safetensors"),
        "cases": [past]});
    let o = run_pte(tmp.path(), "past", &[job]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains(&format!("maximum capacity of {n} elements")), "{e}");
    let long = &got["1"];
    assert_eq!(long.shape(), [1, n, 256]);
    let head = Tensor::f32(vec![1, len, 256], long.as_f32().unwrap()[..len * 256].to_vec()).unwrap();
    let (d, at) = worst_unpadded(&head, &got["0"], &mask).unwrap();
    assert!(d <= 1e-4, "[1, {n}] vs [1, {len}]: worst |diff| {d:e} at {at:?} over the first {len} positions");
    let graph = hfexport_models::build(&ckpt.config, &ckpt, Task::CausalLm, &Default::default()).unwrap();
    let feeds = BTreeMap::from([("input_ids".to_string(), ids), ("attention_mask".to_string(), mask.clone())]);
    let want = Evaluator::new(&graph, &ckpt).unwrap().run(&feeds).unwrap();
    let (d, at) = worst_unpadded(&got["0"], &want["logits"], &mask).unwrap();
    assert!(d <= 1e-3, "[1, {len}]: worst |diff| {d:e} at {at:?} against the evaluator");
}
