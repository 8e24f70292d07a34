//! `.pte` exports of every fixture in the upstream ExecuTorch 1.5.1 Python runtime
//! (`tests/python/run_pte.py`), with both backends (XNNPACK: a delegate per linear and per permute, 1e-3;
//! portable: 1e-4): `load_method("forward").execute([input_ids, attention_mask])` gives
//! transformers' logits at every non-padded position (single and left-padded batch) and the
//! reference evaluator's at a batch and length no sample used. Generation exports (static
//! cache, prefill + decode and multi-token decode) give transformers' 16 greedy tokens when the
//! last N outputs are fed back as the caches (`tests/python/generate_pte.py`), each component a
//! method of the one `model.pte`. That program stores each weight once: prefill + decode weigh
//! at most 1.15x the forward export, and the Python runtime lists and loads both methods
//! (`tests/python/methods_pte.py`). A small program's decoded dump is a snapshot; a corrupt
//! file is a clear error.

mod common;

use common::{fixture, fixtures, python, script, worst_unpadded};
use hfexport::core::metadata::ExportMetadata;
use hfexport::executorch::dump::PteFile;
use hfexport::{
    AutoExportConfig, AutoHfExporter, Checkpoint, DType, Evaluator, ExportRequest, Generation, Task, Tensor,
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
        task: Task::CausalLm,
        dtype: DType::F32,
        force: false,
        generation,
    };
    AutoHfExporter::from_config(config).unwrap().export(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_fixture_matches_transformers_in_the_executorch_runtime_with_both_backends() {
    for (backend, atol) in [("xnnpack", 1e-3), ("portable", 1e-4)] {
        fixtures_match_transformers(backend, atol);
    }
}

fn fixtures_match_transformers(backend: &str, atol: f32) {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    for name in fixtures() {
        let dir = tmp.path().join(name);
        let meta = export(name, &dir, forward_config(backend), None);
        assert_eq!(meta.components[0].files, ["model.pte"], "{name}");
        assert_eq!(meta.runtime_pins.get("executorch").map(String::as_str), Some("1.5.1"), "{name}");
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        let (b, s) = (3, 11);
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
            let p = tmp.path().join(format!("{name}-case{k}.safetensors"));
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
        let out = tmp.path().join(format!("{name}-out.safetensors"));
        let o = Command::new(python())
            .arg(script("run_pte.py"))
            .arg(dir.join("model.pte"))
            .arg(&out)
            .args(&cases)
            .output()
            .expect("start python");
        assert!(o.status.success(), "{name}: {}", String::from_utf8_lossy(&o.stderr));
        let got = read_all(&out).unwrap();
        for (k, case) in ["single", "batch"].iter().enumerate() {
            let mask = &gold[&format!("{case}.attention_mask")];
            let (d, at) = worst_unpadded(&got[&k.to_string()], &gold[&format!("{case}.logits")], mask).unwrap();
            if d > atol {
                failures.push(format!("{backend} {name} {case}: worst |diff| {d:e} at {at:?} against transformers"));
            }
        }
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
            let config = serde_json::json!({"export_format": "executorch", "backend": backend, "dynamic": true});
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
        let config = serde_json::json!({"export_format": "executorch", "backend": backend, "dynamic": true});
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
