//! Whisper through the binary: each format's generation export (`encoder` + static-cache
//! `decode`), then `hfexport generate DIR --inputs features.safetensors` in its runtime (ONNX
//! Runtime, OpenVINO stateful, libtorch, ExecuTorch) prints transformers' 16 plain greedy tokens
//! from `decoder_start_token_id`. Inputs the encoder cannot take are clear errors.

mod common;

use common::*;
use hfexport_core::Tensor;
use hfexport_models::safetensors::{read_all, write_safetensors};
use std::collections::BTreeMap;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn write(path: &Path, tensors: &[(&str, &Tensor)]) {
    write_safetensors(path, tensors, &BTreeMap::new()).unwrap();
}

fn export(name: &str, format: &str, dir: &Path) {
    let o = hfexport(&[
        "export",
        "--model",
        s(&fixture(name)),
        "--format",
        format,
        "--dynamic",
        "--for-generation",
        "--static-cache",
        "24",
        "--multi-token-decode",
        "--output",
        s(dir),
    ]);
    assert!(o.status.success(), "{name} {format}: {}", stderr(&o));
}

#[test]
fn generate_with_encoder_inputs_gives_transformers_tokens_in_every_runtime() {
    require_onnxruntime();
    require_openvino();
    require_libtorch();
    require_executorch();
    let tmp = tempfile::tempdir().unwrap();
    for name in speech_fixtures() {
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let feats = tmp.path().join(format!("{name}-features.safetensors"));
        write(&feats, &[("input_features", &gold["single.input_features"])]);
        let want: Vec<String> = gold["single.tokens"].as_i64().unwrap().iter().map(i64::to_string).collect();
        for format in ["onnx", "openvino", "dynamo", "executorch"] {
            let dir = tmp.path().join(format!("{name}-{format}"));
            export(name, format, &dir);
            let n = want.len().to_string();
            let o = hfexport(&["generate", s(&dir), "--inputs", s(&feats), "--max-new-tokens", &n]);
            assert!(o.status.success(), "{name} {format}: {}", stderr(&o));
            let out = stdout(&o);
            assert!(out.contains(&format!("ids: {}", want.join(","))), "{name} {format}: {out}");
        }
    }
}

#[test]
fn encoder_inputs_that_do_not_fit_are_clear_errors() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("whisper-onnx");
    export("whisper", "onnx", &dir);
    // no --inputs: the encoder's inputs are named
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", "3"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--inputs") && stderr(&o).contains("input_features"), "{}", stderr(&o));
    // features with the wrong number of mel bins
    let bad = tmp.path().join("bad.safetensors");
    write(&bad, &[("input_features", &Tensor::f32(vec![1, 5, 24], vec![0.0; 120]).unwrap())]);
    let o = hfexport(&["generate", s(&dir), "--inputs", s(&bad)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("[1, 5, 24]") && stderr(&o).contains("[1, 8, 24]"), "{}", stderr(&o));
    // a masked frame: the encoder attends to every frame
    let masked = tmp.path().join("masked.safetensors");
    let feats = Tensor::f32(vec![1, 8, 24], vec![0.0; 192]).unwrap();
    let mut mask = vec![1i64; 24];
    mask[20] = 0;
    write(&masked, &[("input_features", &feats), ("attention_mask", &Tensor::i64(vec![1, 24], mask).unwrap())]);
    let o = hfexport(&["generate", s(&dir), "--inputs", s(&masked)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("attention_mask"), "{}", stderr(&o));
    // --inputs on a decoder-only export
    let llm = tmp.path().join("llm");
    let o = hfexport(&[
        "export",
        "--model",
        s(&fixture("qwen3")),
        "--format",
        "onnx",
        "--dynamic",
        "--for-generation",
        "--static-cache",
        "16",
        "--multi-token-decode",
        "--output",
        s(&llm),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = hfexport(&["generate", s(&llm), "--inputs", s(&bad), "--prompt-ids", "1"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("has none"), "{}", stderr(&o));
}
