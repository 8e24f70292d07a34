//! `.pt2` exports of every fixture, loaded by torch 2.13 in one Python process (`tests/python/run_pt2.py`):
//! `torch.export.load(path).module()(input_ids=…, attention_mask=…)` gives transformers' logits
//! at every non-padded position (single and left-padded batch) and the reference evaluator's at
//! a batch and length no sample used; `run_decompositions()` + save + load give the same
//! logits, checked on each export that brings an operator or symbolic input signature no earlier
//! one had (`tests/python/pt2_kinds.py`: retracing fails on an operator or a shape guard, and it
//! is most of torch's time; the forward and generation tests' processes share one coverage,
//! [`torch_script`]). Generation exports (three cache variants) give transformers' 16 greedy tokens through
//! `ep.module()` with static caches mutated in place (`tests/python/generate_pt2.py`), each
//! component a program of the export's one `model.pt2` (`load_pt2(path).exported_programs[name]`)
//! whose weights `prefill` and `decode` share: the same weight bytes as the forward export, and
//! at most 1.15x its size. The zip64 layout is read back by Python's zipfile with every CRC
//! checked.

mod common;

use common::{causal_lm_request, fixture, fixtures, python, script, widened, worst_unpadded};
use hfexport::core::metadata::ExportMetadata;
use hfexport::dynamo::archive::Pt2Archive;
use hfexport::{AutoExportConfig, AutoHfExporter, Checkpoint, Evaluator, Generation, Task, Tensor};
use hfexport_models::safetensors::{read_all, write_safetensors};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// `python SCRIPT`, its retrace coverage (`HFEXPORT_PT2_COVERAGE`, pt2_kinds.py) shared with
/// every other torch script of this test binary's run.
fn torch_script(name: &str) -> Command {
    let shared = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("pt2-coverage-{}.json", std::process::id()));
    let mut cmd = Command::new(python());
    cmd.arg(script(name)).env("HFEXPORT_PT2_COVERAGE", shared);
    cmd
}

fn export(name: &str, out: &Path, generation: Option<Generation>) -> ExportMetadata {
    export_model(&fixture(name), out, generation)
}

fn export_model(model: &Path, out: &Path, generation: Option<Generation>) -> ExportMetadata {
    let config = AutoExportConfig::from_dict(&serde_json::json!({"export_format": "dynamo", "dynamic": true})).unwrap();
    AutoHfExporter::from_config(config)
        .unwrap()
        .export(&causal_lm_request(model, out, generation), &mut |_| {})
        .unwrap()
}

#[test]
fn every_fixture_matches_transformers_in_torch() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    // every fixture exported, then run by one Python process (one torch import for all)
    let (b, s) = (3, 11);
    let (mut jobs, mut unseen) = (vec![], vec![]);
    for name in fixtures() {
        let dir = tmp.path().join(name);
        let meta = export(name, &dir, None);
        assert_eq!(meta.components[0].files, ["model.pt2"], "{name}");
        assert_eq!(meta.runtime_pins.get("torch").map(String::as_str), Some("2.13.0"), "{name}");
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let vocab = Checkpoint::open(&fixture(name)).unwrap().config.vocab_size as i64;
        let ids: Vec<i64> = (0..b * s).map(|i| (i as i64 * 17 + 3) % vocab).collect();
        let (ids, mask) = (Tensor::i64(vec![b, s], ids).unwrap(), Tensor::i64(vec![b, s], vec![1; b * s]).unwrap());
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
        let out = tmp.path().join(format!("{name}-out.safetensors"));
        jobs.push(serde_json::json!({"model": dir.join("model.pt2"), "out": out, "cases": cases}));
        unseen.push((name, ids, mask));
    }
    let (jobs_path, kinds_path) = (tmp.path().join("jobs.json"), tmp.path().join("kinds.json"));
    std::fs::write(&jobs_path, serde_json::to_string(&jobs).unwrap()).unwrap();
    let o = torch_script("run_pt2.py").args([&jobs_path, &kinds_path]).output().expect("python");
    assert!(o.status.success(), "python {}: {}", o.status, String::from_utf8_lossy(&o.stderr));
    // every operator and input signature was retraced, by the first export that had it
    let kinds: BTreeMap<String, String> = serde_json::from_str(&std::fs::read_to_string(&kinds_path).unwrap()).unwrap();
    assert_eq!(kinds.len(), jobs.len(), "every export has its kind");
    let retraced: BTreeSet<&String> = kinds.values().collect();
    for (name, ids, mask) in unseen {
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let got = read_all(tmp.path().join(format!("{name}-out.safetensors"))).unwrap();
        let model = tmp.path().join(name).join("model.pt2").to_str().unwrap().to_string();
        let keys = |k: usize| match retraced.contains(&model) {
            true => vec![k.to_string(), format!("{k}.resaved")],
            false => vec![k.to_string()],
        };
        for (k, case) in ["single", "batch"].iter().enumerate() {
            let mask = &gold[&format!("{case}.attention_mask")];
            for key in keys(k) {
                let (d, at) = worst_unpadded(&got[&key], &gold[&format!("{case}.logits")], mask).unwrap();
                if d > 1e-4 {
                    failures.push(format!("{name} {case} ({key}): worst |diff| {d:e} at {at:?} against transformers"));
                }
            }
        }
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        let graph = hfexport_models::build(&ckpt.config, &ckpt, Task::CausalLm, &Default::default()).unwrap();
        let want = Evaluator::new(&graph, &ckpt)
            .unwrap()
            .run(&BTreeMap::from([("input_ids".to_string(), ids), ("attention_mask".to_string(), mask.clone())]))
            .unwrap();
        for key in keys(2) {
            let (d, at) = worst_unpadded(&got[&key], &want["logits"], &mask).unwrap();
            if d > 1e-4 {
                failures.push(format!("{name} [3, 11] ({key}): worst |diff| {d:e} at {at:?} against the evaluator"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn generation_exports_give_transformers_tokens_with_caches_mutated_in_place() {
    generation_exports_give_transformers_tokens(&[
        ("static-multi", Generation { static_cache: Some(32), multi_token_decode: true }),
        ("static-prefill", Generation { static_cache: Some(32), multi_token_decode: false }),
    ]);
}

/// The growing cache in a test of its own, so that libtest runs the two halves of the Python work
/// in parallel (the static variants stay together: a multi-token `decode` is the other's `prefill`,
/// which generate_pt2.py then checks once).
#[test]
fn generation_exports_give_transformers_tokens_with_a_growing_cache() {
    generation_exports_give_transformers_tokens(&[(
        "growing",
        Generation { static_cache: None, multi_token_decode: false },
    )]);
}

/// Every fixture exported for generation in each variant, all run by one Python process.
fn generation_exports_give_transformers_tokens(variants: &[(&str, Generation)]) {
    let tmp = tempfile::tempdir().unwrap();
    let (mut jobs, mut want) = (vec![], BTreeMap::new());
    for name in fixtures() {
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        for &(variant, generation) in variants {
            let dir = tmp.path().join(format!("{name}-{variant}"));
            let meta = export(name, &dir, Some(generation));
            let decode = meta.component("decode").unwrap();
            if generation.static_cache.is_some() {
                // in place: every cache input is updated by the program (user_input_mutation);
                // a layer that reuses another's keys keeps none
                let layers = Checkpoint::open(&fixture(name)).unwrap().config.layers;
                assert_eq!(decode.aliases.len(), layers.iter().map(|l| l.cache_names().len()).sum::<usize>());
            }
            let d = dir.to_str().unwrap().to_string();
            want.insert(d.clone(), gold["greedy.tokens"].as_i64().unwrap().to_vec());
            jobs.push(serde_json::json!([d, fixture(name).join("golden.safetensors")]));
        }
    }
    let (jobs_path, out) = (tmp.path().join("jobs.json"), tmp.path().join("tokens.json"));
    std::fs::write(&jobs_path, serde_json::to_string(&jobs).unwrap()).unwrap();
    let o = torch_script("generate_pt2.py").args([&jobs_path, &out]).output().expect("python");
    assert!(o.status.success(), "python {}: {}", o.status, String::from_utf8_lossy(&o.stderr));
    let got: BTreeMap<String, Vec<i64>> = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let failures: Vec<String> = want
        .iter()
        .filter(|(d, w)| got.get(*d) != Some(w))
        .map(|(d, w)| format!("{d}: {:?} != transformers' {w:?}", got.get(d)))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Bytes of the files an export's components list (each file once).
fn component_bytes(dir: &Path, meta: &ExportMetadata) -> u64 {
    let files: std::collections::BTreeSet<&String> = meta.components.iter().flat_map(|c| &c.files).collect();
    files.iter().map(|f| std::fs::metadata(dir.join(f)).unwrap().len()).sum()
}

/// The weight files a program's config names.
fn weight_files(a: &Pt2Archive, program: &str) -> BTreeSet<String> {
    let config: serde_json::Value =
        serde_json::from_slice(&a.entry(&format!("data/weights/{program}_weights_config.json")).unwrap()).unwrap();
    config["config"].as_object().unwrap().values().map(|e| e["path_name"].as_str().unwrap().to_string()).collect()
}

/// Bytes of the weight files stored in an archive.
fn weight_bytes(a: &Pt2Archive) -> u64 {
    a.entries.iter().filter(|(k, _)| k.starts_with("data/weights/weight_")).map(|(_, e)| e.size).sum()
}

/// The models whose archives the test below loads in torch itself: every fixture's programs are
/// loaded and run by the forward and generation tests above (their exports are these bytes), so
/// here the one whose weights dominate, and a small one.
const LOADED_HERE: [&str; 2] = ["llama-wide", "llama"];

/// A generation export is one `model.pt2` whose programs (a static cache's `prefill` and
/// `decode`, a growing cache's `decode`) share every weight file: it stores exactly the forward
/// export's weight bytes and is at most 1.15x the forward export (every fixture, and one whose
/// weights dominate as in real models), and torch 2.13 loads every program from it
/// (`load_pt2(path).exported_programs[name]`, [`LOADED_HERE`]) with `prefill`'s weights equal to
/// `decode`'s.
#[test]
fn generation_exports_hold_every_component_in_one_archive_with_weights_stored_once() {
    let tmp = tempfile::tempdir().unwrap();
    let variants = [
        ("static-prefill", Generation { static_cache: Some(32), multi_token_decode: false }),
        ("growing", Generation { static_cache: None, multi_token_decode: false }),
    ];
    let wide = ("llama-wide".to_string(), widened("llama", 8192, &tmp.path().join("llama-wide")));
    let models = fixtures().into_iter().map(|n| (n.to_string(), fixture(n))).chain([wide]);
    let (mut failures, mut archives) = (vec![], vec![]);
    for (name, model) in models {
        let forward_dir = tmp.path().join(format!("{name}-forward"));
        let forward = component_bytes(&forward_dir, &export_model(&model, &forward_dir, None));
        let forward_archive = Pt2Archive::open(forward_dir.join("model.pt2")).unwrap();
        let weights = weight_files(&forward_archive, "model");
        for (variant, generation) in variants {
            let dir = tmp.path().join(format!("{name}-{variant}"));
            let meta = export_model(&model, &dir, Some(generation));
            for c in &meta.components {
                assert_eq!(c.files, ["model.pt2"], "{name} {variant}: component `{}`", c.name());
            }
            let a = Pt2Archive::open(dir.join("model.pt2")).unwrap();
            let decode = weight_files(&a, "decode");
            if generation.static_cache.is_some() {
                assert_eq!(a.programs.keys().collect::<Vec<_>>(), ["decode", "prefill"], "{name} {variant}");
                // both programs read the same files, as many as the forward export stores
                assert_eq!(weight_files(&a, "prefill"), decode, "{name} {variant}");
            } else {
                // a growing cache's decode takes the prompt too
                assert_eq!(a.programs.keys().collect::<Vec<_>>(), ["decode"], "{name} {variant}");
            }
            assert_eq!(decode.len(), weights.len(), "{name} {variant}");
            let stored = a.entries.keys().filter(|k| k.starts_with("data/weights/weight_")).count();
            assert_eq!(stored, weights.len(), "{name} {variant}: weight files stored");
            assert_eq!(weight_bytes(&a), weight_bytes(&forward_archive), "{name} {variant}: weight bytes");
            let bytes = component_bytes(&dir, &meta);
            let ratio = bytes as f64 / forward as f64;
            eprintln!("{name} {variant}: {bytes} bytes, forward {forward} bytes ({ratio:.3}x)");
            if ratio > 1.15 {
                failures.push(format!("{name} {variant}: {bytes} bytes, {ratio:.3}x the forward export's {forward}"));
            }
            if LOADED_HERE.contains(&name.as_str()) {
                archives.push(dir.join("model.pt2"));
            }
        }
        if LOADED_HERE.contains(&name.as_str()) {
            archives.push(forward_dir.join("model.pt2"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // torch 2.13 loads every program of each archive; `torch.export.load` the forward one
    let check = r#"
import sys, warnings
warnings.filterwarnings("ignore")
import torch
from torch.export.pt2_archive._package import load_pt2
for path in sys.argv[1:]:
    programs = load_pt2(path).exported_programs
    names = sorted(programs)
    if names == ["model"]:
        ep = torch.export.load(path)
        assert isinstance(ep, torch.export.ExportedProgram), path
    elif names == ["decode"]:
        programs["decode"].module()
    else:
        assert names == ["decode", "prefill"], (path, names)
        for n in names:
            programs[n].module()
        p, d = programs["prefill"].state_dict, programs["decode"].state_dict
        assert sorted(p) == sorted(d) and all(torch.equal(p[k], d[k]) for k in p), path
print("loaded", len(sys.argv) - 1)
"#;
    let o = Command::new(python()).arg("-c").arg(check).args(&archives).output().expect("python");
    assert!(o.status.success(), "python {}: {}", o.status, String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("loaded {}", archives.len())));
}

#[test]
fn zip64_archives_read_back_with_every_crc_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("z.zip");
    let mut z = hfexport::dynamo::zip::ZipWriter::create(&path, "root").unwrap();
    z.force_zip64 = true;
    z.add("a/first", b"hello").unwrap();
    let big: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    z.add_streamed("b/second", big.len() as u64, &mut |sink| {
        for c in big.chunks(7_000) {
            sink(c)?;
        }
        Ok(())
    })
    .unwrap();
    z.finish().unwrap();
    // Python's zipfile reads the zip64 records and checks every CRC; each entry's data starts at
    // a 64-byte boundary, as torch writes them.
    let check = r#"
import struct, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
assert z.testzip() is None
assert z.read("root/a/first") == b"hello" and len(z.read("root/b/second")) == 100000
raw = open(sys.argv[1], "rb").read()
for i in z.infolist():
    n, m = struct.unpack("<HH", raw[i.header_offset + 26 : i.header_offset + 30])
    assert (i.header_offset + 30 + n + m) % 64 == 0, i.filename
print(sorted(x.filename for x in z.infolist()))
"#;
    let o = Command::new(python()).arg("-c").arg(check).arg(&path).output().expect("python");
    assert!(o.status.success(), "python {}: {}", o.status, String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("root/b/second"));
}
