//! ONNX exports of every fixture, run by ONNX Runtime and by OpenVINO's ONNX reader from
//! Python (`tests/python/run_onnx.py`, after `onnx.checker` with `full_check`): logits equal
//! transformers' at every non-padded position, and the same file runs at a batch and length no
//! sample used (compared with the reference evaluator there).

mod common;

use common::worst_unpadded;
use hfexport::core::metadata::ExportMetadata;
use hfexport::{AutoExportConfig, AutoHfExporter, Checkpoint, DType, Evaluator, ExportRequest, Task, Tensor};
use hfexport_models::safetensors::{read_all, write_safetensors};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const FIXTURES: [&str; 5] = ["llama", "mistral", "qwen2", "qwen3", "llama_linear_tied"];

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn python() -> String {
    std::env::var("HFEXPORT_PYTHON").unwrap_or_else(|_| {
        panic!("HFEXPORT_PYTHON is not set: run `cargo xtask test` (it installs onnx, onnxruntime and openvino into .venv/)")
    })
}

fn export(name: &str, out: &Path, config: serde_json::Value) -> ExportMetadata {
    let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(&config).unwrap()).unwrap();
    let req = ExportRequest {
        model: fixture(name),
        output: out.to_path_buf(),
        task: Task::CausalLm,
        dtype: DType::F32,
        force: false,
    };
    exporter.export(&req, &mut |_| {}).unwrap()
}

fn write_case(path: &Path, ids: &Tensor, mask: &Tensor) {
    write_safetensors(path, &[("input_ids", ids), ("attention_mask", mask)], &BTreeMap::new()).unwrap();
}

/// Runs the python runner on `cases`; returns `<i>.ort` / `<i>.openvino` logits.
fn run_python(model: &Path, cases: &[PathBuf], tmp: &Path) -> BTreeMap<String, Tensor> {
    let out = tmp.join("python-out.safetensors");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/run_onnx.py");
    let o = Command::new(python()).arg(script).arg(model).arg(&out).args(cases).output().expect("start python");
    assert!(o.status.success(), "run_onnx.py failed:\n{}", String::from_utf8_lossy(&o.stderr));
    read_all(&out).unwrap()
}

#[test]
fn dynamic_exports_match_transformers_in_onnxruntime_and_openvino() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    for name in FIXTURES {
        let dir = tmp.path().join(name);
        let meta = export(name, &dir.join("export"), serde_json::json!({"export_format": "onnx", "dynamic": true}));
        let m = meta.component("model").unwrap();
        assert_eq!(m.files, ["model.onnx", "model.onnx.data"]);
        assert_eq!(m.inputs[0].shape, ["batch", "sequence"], "{name}: symbolic dims are named");
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let mut cases = vec![];
        for case in ["single", "batch"] {
            let p = dir.join(format!("{case}.safetensors"));
            write_case(&p, &gold[&format!("{case}.input_ids")], &gold[&format!("{case}.attention_mask")]);
            cases.push(p);
        }
        // batch 3, 11 tokens, the first row left-padded: no golden has this shape
        let vocab = gold["single.logits"].shape()[2] as i64;
        let ids = Tensor::i64(vec![3, 11], (0..33).map(|i| (i * 31 + 7) % vocab).collect()).unwrap();
        let mask = Tensor::i64(vec![3, 11], (0..33).map(|i| i64::from(i >= 4)).collect()).unwrap();
        let p = dir.join("unseen.safetensors");
        write_case(&p, &ids, &mask);
        cases.push(p);
        let got = run_python(&dir.join("export/model.onnx"), &cases, &dir);

        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        let g = hfexport::build(&ckpt.config, &ckpt, Task::CausalLm, &Default::default()).unwrap();
        let reference = Evaluator::new(&g, &ckpt)
            .unwrap()
            .run(&BTreeMap::from([("input_ids".to_string(), ids), ("attention_mask".to_string(), mask.clone())]))
            .unwrap();
        let expected = [
            (gold["single.logits"].clone(), gold["single.attention_mask"].clone()),
            (gold["batch.logits"].clone(), gold["batch.attention_mask"].clone()),
            (reference["logits"].clone(), mask),
        ];
        for (i, (want, mask)) in expected.iter().enumerate() {
            for runtime in ["ort", "openvino"] {
                let (d, at) = worst_unpadded(&got[&format!("{i}.{runtime}")], want, mask).unwrap();
                if d > 1e-4 {
                    failures.push(format!("{name} case {i} {runtime}: worst |diff| {d:e} at {at:?}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
