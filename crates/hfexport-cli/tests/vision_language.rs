//! Vision-language models (LLaVA, Qwen2-VL) through the binary: each format's generation
//! export (LLaVA: `image_encoder`, `multi_modal_projector`, static-cache `decode`; Qwen2-VL:
//! `image_encoder`, M-RoPE `decode`), then `hfexport generate DIR --image a.png --image b.png
//! --prompt-ids …` in its runtime (ONNX Runtime, OpenVINO stateful, libtorch, ExecuTorch) prints
//! transformers' 16 greedy tokens for a prompt with two images, on random checkpoints made by
//! transformers at test time (`tests/python/random_llava.py`, `random_qwen2vl.py`), and so do
//! Python loops over the components in the upstream runtimes
//! (`tests/python/generate_vision.py`); prompts
//! whose placeholders do not match the images, and images that cannot be read, are clear
//! errors.

mod common;

use common::*;
use hfexport_core::Tensor;
use hfexport_models::safetensors::read_all;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The cases of a random-checkpoint script (`OUTDIR --seed S --count N`) in a fresh folder.
fn made_by(script: &str, count: usize) -> (tempfile::TempDir, Vec<PathBuf>) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cases");
    let o = Command::new(python())
        .arg(repo().join("tests/python").join(script))
        .arg(&out)
        .args(["--seed", "20261203", "--count", &count.to_string()])
        .output()
        .expect("start python");
    assert!(o.status.success(), "{script} failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
    let dirs = index["cases"].as_array().unwrap().iter().map(|c| out.join(c["dir"].as_str().unwrap())).collect();
    (tmp, dirs)
}

/// `random_llava.py`'s cases (made once): the fixed case 0, and two sampled ones.
fn cases() -> &'static [PathBuf] {
    static DIR: OnceLock<(tempfile::TempDir, Vec<PathBuf>)> = OnceLock::new();
    &DIR.get_or_init(|| made_by("random_llava.py", 3)).1
}

/// `random_qwen2vl.py`'s cases (made once): the fixed case 0, and two sampled ones.
fn qwen2vl_cases() -> &'static [PathBuf] {
    static DIR: OnceLock<(tempfile::TempDir, Vec<PathBuf>)> = OnceLock::new();
    &DIR.get_or_init(|| made_by("random_qwen2vl.py", 3)).1
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn ids(t: &Tensor) -> String {
    t.as_i64().unwrap().iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

fn export(model: &Path, format: &str, dir: &Path) {
    let args = ["export", "--model", s(model), "--format", format, "--dynamic", "--for-generation"];
    let cache = ["--static-cache", "96", "--multi-token-decode", "--quiet", "--output", s(dir)];
    let exported = hfexport_here(&[&args[..], &cache[..]].concat());
    exported.unwrap_or_else(|e| panic!("{} {format}: {e}", model.display()));
}

#[test]
fn generate_with_images_gives_transformers_tokens_in_every_runtime() {
    require_onnxruntime();
    require_openvino();
    require_libtorch();
    require_executorch();
    let tmp = tempfile::tempdir().unwrap();
    let (mut jobs, mut want_of) = (vec![], std::collections::BTreeMap::new());
    let llava = cases().iter().map(|m| (m, ["exact.png", "wide.png"]));
    let qwen = qwen2vl_cases().iter().map(|m| (m, ["small.png", "wide.png"]));
    for (k, (model, [first, second])) in llava.chain(qwen).enumerate() {
        let gold = read_all(model.join("golden.safetensors")).unwrap();
        let (prompt, want) = (ids(&gold["prompt"]), ids(&gold["tokens"]));
        for format in ["onnx", "openvino", "dynamo", "executorch"] {
            let dir = tmp.path().join(format!("{k}-{format}"));
            export(model, format, &dir);
            let (a, b) = (model.join(first), model.join(second));
            let args = ["generate", s(&dir), "--prompt-ids", &prompt, "--image", s(&a), "--image", s(&b)];
            let o = hfexport(&[&args[..], &["--max-new-tokens", "16"]].concat());
            assert!(o.status.success(), "{} {format}: {}", model.display(), stderr(&o));
            let out = stdout(&o);
            assert!(out.contains(&format!("ids: {want}\n")), "{} {format}: {out}", model.display());
            jobs.push(serde_json::json!([s(&dir), s(&model.join("golden.safetensors")), 16]));
            want_of.insert(s(&dir).to_string(), want.clone());
        }
    }
    // the upstream runtimes, from Python loops over the components (one process for all)
    assert_upstream_tokens("generate_vision.py", &jobs, &want_of, tmp.path());
}

#[test]
fn images_that_do_not_fit_the_prompt_are_clear_errors() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let model = &cases()[0];
    let dir = tmp.path().join("onnx");
    export(model, "onnx", &dir);
    let gold = read_all(model.join("golden.safetensors")).unwrap();
    let prompt = ids(&gold["prompt"]);
    let png = model.join("exact.png");
    // two placeholders, one image
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", &prompt, "--image", s(&png)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("2 image placeholders") && stderr(&o).contains("1 --image"), "{}", stderr(&o));
    // an image without a placeholder
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", "1,5", "--image", s(&png)]);
    assert!(!o.status.success() && stderr(&o).contains("0 image placeholders"), "{}", stderr(&o));
    // a file that is no image, and one in a format other than PNG or JPEG
    let text = tmp.path().join("notes.png");
    std::fs::write(&text, b"not a picture").unwrap();
    let gif = tmp.path().join("anim.gif");
    std::fs::write(&gif, b"GIF89a\x01\x00\x01\x00\x00\x00\x00;").unwrap();
    for (bad, says) in [(&text, "notes.png"), (&gif, "not supported")] {
        let o = hfexport(&["generate", s(&dir), "--prompt-ids", &prompt, "--image", s(bad), "--image", s(&png)]);
        assert!(!o.status.success());
        assert!(stderr(&o).contains(says) && stderr(&o).contains(s(bad)), "{}", stderr(&o));
    }
    // text only: the placeholder-free prompt runs without images
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", "1,5,7", "--max-new-tokens", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Qwen2-VL: an image whose aspect ratio the processor refuses; a text-only prompt runs
    let qwen = &qwen2vl_cases()[0];
    let qdir = tmp.path().join("qwen-onnx");
    export(qwen, "onnx", &qdir);
    let qprompt = ids(&read_all(qwen.join("golden.safetensors")).unwrap()["prompt"]);
    let (thin, small) = (qwen.join("thin.png"), qwen.join("small.png"));
    let o = hfexport(&["generate", s(&qdir), "--prompt-ids", &qprompt, "--image", s(&thin), "--image", s(&small)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("aspect ratio above 200") && stderr(&o).contains("thin.png"), "{}", stderr(&o));
    let o = hfexport(&["generate", s(&qdir), "--prompt-ids", "1,5,7", "--max-new-tokens", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // --image on a text-only export
    let llm = tmp.path().join("llm");
    export(&fixture("qwen3"), "onnx", &llm);
    let o = hfexport(&["generate", s(&llm), "--prompt-ids", "1", "--image", s(&png)]);
    assert!(!o.status.success() && stderr(&o).contains("has none"), "{}", stderr(&o));
}

#[test]
fn a_text_prompt_with_image_placeholders_is_tokenized() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let model = &cases()[0];
    let dir = tmp.path().join("onnx");
    export(model, "onnx", &dir);
    let png = model.join("exact.png");
    // the case's word tokenizer: `w<n>` is id n, `<image>` the placeholder (95)
    let line = |o: &std::process::Output| {
        assert!(o.status.success(), "{}", stderr(o));
        stdout(o).lines().find(|l| l.starts_with("ids: ")).map(str::to_string).unwrap()
    };
    let by_ids =
        hfexport(&["generate", s(&dir), "--prompt-ids", "5,38,95,22", "--image", s(&png), "--max-new-tokens", "8"]);
    let by_text =
        hfexport(&["generate", s(&dir), "--prompt", "w5 w38 <image> w22", "--image", s(&png), "--max-new-tokens", "8"]);
    assert_eq!(line(&by_text), line(&by_ids), "--prompt's placeholder is the image token");
    assert!(stdout(&by_text).contains("text: "), "the folder's tokenizer decodes the ids: {}", stdout(&by_text));
}
