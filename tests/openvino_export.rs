//! OpenVINO IR exports of every fixture, run by Python `openvino` (`tests/python/run_openvino.py`):
//! logits equal transformers' at every non-padded position (single and left-padded batch), the
//! same file runs at a batch and length no sample used (compared with the reference evaluator),
//! and the IR reader accepts the file silently with the opset versions and dynamic dims we
//! wrote, and the CPU plugin fuses our RMS norm and rotary sequences. Generation exports (three cache variants, stateful and stateless) give transformers'
//! 16 greedy tokens through a plain Python openvino loop (`tests/python/generate_openvino.py`).

mod common;

use common::{fixture, fixtures, python, script, worst_unpadded};
use hfexport::core::cache_ports;
use hfexport::core::metadata::ExportMetadata;
use hfexport::{
    AutoExportConfig, AutoHfExporter, Checkpoint, DType, Evaluator, ExportRequest, Generation, Task, Tensor,
};
use hfexport_models::safetensors::{read_all, write_safetensors};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn export(
    name: &str,
    out: &Path,
    config: serde_json::Value,
    generation: Option<Generation>,
) -> hfexport::Result<ExportMetadata> {
    let mut config = config;
    config["export_format"] = "openvino".into();
    let req = ExportRequest {
        model: fixture(name),
        output: out.to_path_buf(),
        task: Some(Task::CausalLm),
        dtype: DType::F32,
        force: false,
        generation,
    };
    AutoHfExporter::from_config(AutoExportConfig::from_dict(&config).unwrap())?.export(&req, &mut |_| {})
}

/// Token ids `[batch, seq]` no sample used, all attended.
fn unseen_case(vocab: usize) -> (Tensor, Tensor) {
    let (b, s) = (3, 11);
    let ids: Vec<i64> = (0..b * s).map(|i| (i as i64 * 17 + 3) % vocab as i64).collect();
    (Tensor::i64(vec![b, s], ids).unwrap(), Tensor::i64(vec![b, s], vec![1; b * s]).unwrap())
}

#[test]
fn every_fixture_matches_transformers_in_openvino() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    for name in fixtures() {
        let dir = tmp.path().join(name);
        let meta = export(name, &dir, serde_json::json!({"dynamic": true}), None).unwrap();
        assert_eq!(meta.components[0].files, ["openvino_model.xml", "openvino_model.bin"], "{name}");
        assert_eq!(meta.runtime_pins.get("openvino").map(String::as_str), Some("2026.4.1"), "{name}");
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        let (ids, mask) = unseen_case(ckpt.config.vocab_size);
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
        let (out, report) =
            (tmp.path().join(format!("{name}-out.safetensors")), tmp.path().join(format!("{name}.json")));
        let o = Command::new(python())
            .arg(script("run_openvino.py"))
            .arg(dir.join("openvino_model.xml"))
            .args([&out, &report])
            .args(&cases)
            .output()
            .expect("start python");
        assert!(o.status.success(), "{name}: {}", String::from_utf8_lossy(&o.stderr));
        let got = read_all(&out).unwrap();
        for (k, case) in ["single", "batch"].iter().enumerate() {
            let (d, at) = worst_unpadded(
                &got[&k.to_string()],
                &gold[&format!("{case}.logits")],
                &gold[&format!("{case}.attention_mask")],
            )
            .unwrap_or_else(|e| panic!("{name} {case}: {e}"));
            if d > 1e-4 {
                failures.push(format!("{name} {case}: worst |diff| {d:e} at {at:?} against transformers"));
            }
        }
        // The unseen shape against the reference evaluator.
        let graph = hfexport_models::build(&ckpt.config, &ckpt, Task::CausalLm, &Default::default()).unwrap();
        let want = Evaluator::new(&graph, &ckpt)
            .unwrap()
            .run(&BTreeMap::from([("input_ids".to_string(), ids), ("attention_mask".to_string(), mask.clone())]))
            .unwrap();
        let (d, at) = worst_unpadded(&got["2"], &want["logits"], &mask).unwrap();
        if d > 1e-4 {
            failures.push(format!("{name} [3, 11]: worst |diff| {d:e} at {at:?} against the evaluator"));
        }
        // What the IR reader made of the file: silent, our opsets, dynamic dims as written.
        let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        assert_eq!(r["printed"], "", "{name}: the IR reader printed something");
        let ops: Vec<&str> = r["ops"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        let uses = |f: &dyn Fn(&hfexport::core::Op) -> bool| graph.nodes().iter().any(|n| f(&n.op));
        let native_attention =
            uses(&|op| matches!(op, hfexport::core::Op::Attention { softcap: None, sinks: false, .. }));
        for want in ["MatMul:opset1", "Gather:opset8", "ShapeOf:opset3"] {
            assert!(ops.contains(&want), "{name}: no {want} in {ops:?}");
        }
        assert_eq!(ops.contains(&"ScaledDotProductAttention:opset13"), native_attention, "{name}: SDPA in {ops:?}");
        // The CPU plugin recognises our RMS norm and rotary sequences as its fused kernels.
        let compiled: Vec<&str> = r["compiled"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        let rms = uses(&|op| matches!(op, hfexport::core::Op::RmsNorm { .. }));
        let rope = uses(&|op| matches!(op, hfexport::core::Op::ApplyRotary));
        for (fused, expected) in [("RMS", rms), ("RoPE", rope), ("FullyConnected", true)] {
            if expected && !compiled.contains(&fused) {
                failures.push(format!("{name}: no fused {fused} layer in {compiled:?}"));
            }
        }
        // the symbols' ranges of export.json, as the reader sees them
        let (b, s) = (meta.symbols["batch"].max, meta.symbols["sequence"].max);
        assert_eq!(r["inputs"]["input_ids"], format!("[1..{b},1..{s}]"), "{name}: {}", r["inputs"]);
        assert_eq!(r["inputs"]["attention_mask"], format!("[1..{b},1..{s}]"), "{name}: {}", r["inputs"]);
        assert_eq!(r["outputs"]["logits"], format!("[1..{b},1..{s},{}]", ckpt.config.vocab_size), "{name}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn generation_exports_give_transformers_tokens_stateful_and_stateless() {
    let tmp = tempfile::tempdir().unwrap();
    let variants = [
        ("static-multi", Generation { static_cache: Some(32), multi_token_decode: true }),
        ("static-prefill", Generation { static_cache: Some(32), multi_token_decode: false }),
        ("growing", Generation { static_cache: None, multi_token_decode: false }),
    ];
    let mut jobs = vec![];
    let mut want = BTreeMap::new();
    for name in fixtures() {
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        for (variant, generation) in variants {
            for stateful in [true, false] {
                let dir =
                    tmp.path().join(format!("{name}-{variant}-{}", if stateful { "stateful" } else { "stateless" }));
                let meta =
                    export(name, &dir, serde_json::json!({"dynamic": true, "stateful": stateful}), Some(generation))
                        .unwrap();
                let decode = meta.component("decode").unwrap();
                if stateful {
                    assert_eq!(meta.components.len(), 1, "{name} {variant}: a stateful export is one decode model");
                    assert_eq!(decode.states.len(), cache_tensors(name), "{name} {variant}: {:?}", decode.states);
                    assert!(decode.inputs.iter().any(|p| p.name == "beam_idx" && p.dtype == "i32"), "{name}");
                    assert!(decode.aliases.is_empty() && !decode.inputs.iter().any(|p| cache_ports::is_past(&p.name)));
                } else {
                    let pairs = decode.inputs.iter().filter(|p| cache_ports::is_past(&p.name)).count();
                    assert!(decode.states.is_empty() && pairs == cache_tensors(name), "{name} {variant}");
                }
                let d = dir.to_str().unwrap().to_string();
                want.insert(d.clone(), gold["greedy.tokens"].as_i64().unwrap().to_vec());
                jobs.push(serde_json::json!([d, fixture(name).join("golden.safetensors")]));
            }
        }
    }
    let (jobs_path, out) = (tmp.path().join("jobs.json"), tmp.path().join("tokens.json"));
    std::fs::write(&jobs_path, serde_json::to_string(&jobs).unwrap()).unwrap();
    let o = Command::new(python())
        .arg(script("generate_openvino.py"))
        .args([&jobs_path, &out])
        .output()
        .expect("start python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: BTreeMap<String, Vec<i64>> = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(got.len(), want.len());
    let failures: Vec<String> = want
        .iter()
        .filter(|(d, w)| got.get(*d) != Some(w))
        .map(|(d, w)| format!("{d}: {:?} != transformers' {w:?}", got.get(d)))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The tensors the layers of fixture `name` keep between calls (none for a layer that reuses
/// another's keys and values).
fn cache_tensors(name: &str) -> usize {
    Checkpoint::open(&fixture(name)).unwrap().config.layers.iter().map(|l| l.cache_names().len()).sum()
}
