//! The ONNX Runtime runner end to end, through the binary: `export --verify` checks every
//! fixture in ONNX Runtime before the folder appears (and records it in export.json), `run` on
//! the export folder reproduces transformers' logits, and broken artifacts or a missing
//! runtime are clear errors.
//!
//! ONNX Runtime is the `onnxruntime==1.32.0` wheel in the repository's `.venv/` (what
//! `cargo xtask test` installs); the binary finds it by searching upward from its current
//! folder, so these tests set nothing.

mod common;

use common::*;
use hfexport_core::metadata::ExportMetadata;
use hfexport_models::safetensors::{read_all, write_safetensors};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `hfexport export --format onnx` of a fixture into `out`, with extra flags, in this process.
fn export(name: &str, out: &Path, extra: &[&str]) {
    let model = fixture(name);
    let mut args = vec!["export", "--model", s(&model), "--format", "onnx", "--quiet", "--output", s(out)];
    args.extend_from_slice(extra);
    hfexport_here(&args).unwrap_or_else(|e| panic!("{name} {extra:?}: export failed: {e}"));
}

#[test]
fn verified_exports_run_in_onnxruntime_like_transformers() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    for name in fixtures() {
        let out = tmp.path().join(name);
        export(name, &out, &["--dynamic", "--verify"]);

        let meta = ExportMetadata::read(&out).unwrap();
        let v = meta.verification.as_ref().unwrap_or_else(|| panic!("{name}: export.json has no verification"));
        assert!(v.runtime.starts_with("onnxruntime 1.32"), "{name}: {v:?}");
        assert!(v.reference.contains("reference evaluator"), "{name}: {v:?}");
        assert_eq!(v.atol, 1e-4, "{name}: float32 tolerance");
        assert!(v.max_abs_diff <= v.atol, "{name}: {v:?}");
        assert_eq!(v.inputs.len(), 2, "{name}: {v:?}");
        assert!(v.inputs[0].contains("left-padded"), "{name}: {v:?}");

        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        for case in ["single", "batch"] {
            let inp = tmp.path().join(format!("{name}-{case}-in.safetensors"));
            let mask = &gold[&format!("{case}.attention_mask")];
            write_safetensors(
                &inp,
                &[("input_ids", &gold[&format!("{case}.input_ids")]), ("attention_mask", mask)],
                &BTreeMap::new(),
            )
            .unwrap();
            let res = tmp.path().join(format!("{name}-{case}-out.safetensors"));
            let run = hfexport_here(&["run", s(&out), "--inputs", s(&inp), "--outputs", s(&res)]);
            run.unwrap_or_else(|e| panic!("{name} {case}: run failed: {e}"));
            let got = read_all(&res).unwrap();
            let d = worst_unpadded(&got["logits"], &gold[&format!("{case}.logits")], mask);
            if d > 1e-4 {
                failures.push(format!("{name} {case}: worst |diff| {d:e} against transformers"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn broken_artifacts_and_wrong_runtimes_are_clear_errors() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("llama");
    export("llama", &out, &["--dynamic"]);
    let gold = read_all(fixture("llama").join("golden.safetensors")).unwrap();
    let inp = tmp.path().join("in.safetensors");
    let (ids, mask) = (&gold["single.input_ids"], &gold["single.attention_mask"]);
    write_safetensors(&inp, &[("input_ids", ids), ("attention_mask", mask)], &BTreeMap::new()).unwrap();
    let res = tmp.path().join("out.safetensors");
    let run = |dir: &Path, inputs: &Path, extra: &[&str]| {
        let mut args = vec!["run", s(dir), "--inputs", s(inputs), "--outputs", s(&res)];
        args.extend_from_slice(extra);
        hfexport(&args)
    };

    // the reference evaluator runs checkpoints, not export folders
    let o = run(&out, &inp, &["--runtime", "reference"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("checkpoint") && stderr(&o).contains(s(&fixture("llama"))), "{}", stderr(&o));
    // an unknown component
    let o = run(&out, &inp, &["--component", "decode"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("`decode`") && stderr(&o).contains("model"), "{}", stderr(&o));
    // an input the model does not have
    let bad = tmp.path().join("bad.safetensors");
    write_safetensors(&bad, &[("tokens", ids), ("attention_mask", mask)], &BTreeMap::new()).unwrap();
    let o = run(&out, &bad, &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("`tokens`") && stderr(&o).contains("input_ids"), "{}", stderr(&o));
    // ONNX Runtime compiled in but not available: the message says so and how to install it
    let o = Command::new(env!("CARGO_BIN_EXE_hfexport"))
        .args(["run", s(&out), "--inputs", s(&inp), "--outputs", s(&res)])
        .env("ORT_DYLIB_PATH", "/nonexistent/libonnxruntime.so.1.32.0")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("compiled in") && e.contains("/nonexistent/") && e.contains("cargo xtask setup"), "{e}");
    assert!(!res.exists(), "no output file on failure");

    // a corrupt model.onnx
    let model = out.join("onnx/model.onnx");
    std::fs::write(&model, b"this is not a protobuf \xff\xff\xff\xff").unwrap();
    let o = run(&out, &inp, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains(s(&model)), "the message names the file: {}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert!(!res.exists(), "no output file on failure");
    // a missing one
    std::fs::remove_file(&model).unwrap();
    let o = run(&out, &inp, &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains(s(&model)), "{}", stderr(&o));
}

/// A failed verification leaves nothing behind. ONNX Runtime 1.32's CPU provider has no
/// bfloat16 kernel for `Mul` (nor most ops), so a bfloat16 export cannot pass `--verify`.
#[test]
fn a_failed_verification_leaves_no_output_folder() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bf16");
    let model = fixture("qwen3");
    let args = ["export", "--model", s(&model), "--format", "onnx", "--output", s(&out), "--dtype", "bfloat16"];
    let o = hfexport(&[&args[..], &["--verify"]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("ONNX Runtime"), "{}", stderr(&o));
    assert!(!out.exists(), "the output folder must not appear");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "staging folders left behind: {left:?}");
    // the same export without --verify succeeds and records no verification
    export("qwen3", &out, &["--dtype", "bfloat16"]);
    assert_eq!(ExportMetadata::read(&out).unwrap().verification, None);
}

#[test]
fn generation_exports_verify_every_component() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let variants: [(&str, &[&str], &[&str]); 3] = [
        ("static-multi", &["--static-cache", "32", "--multi-token-decode"], &["3 new tokens after 4 cached"]),
        (
            "static-prefill",
            &["--static-cache", "32"],
            &["prefill: 3 new tokens after 4", "decode: 1 new token after 4"],
        ),
        ("growing", &[], &["3 tokens into an empty cache", "3 new tokens after 4 cached"]),
    ];
    // mistral: sliding-window layers, whose window the graph applies from position_ids.
    for name in ["mistral", "qwen2"] {
        for (variant, flags, cases) in variants {
            let out = tmp.path().join(format!("{name}-{variant}"));
            let mut args = vec!["--dynamic", "--for-generation", "--verify"];
            args.extend_from_slice(flags);
            export(name, &out, &args);
            let v = ExportMetadata::read(&out).unwrap().verification.unwrap();
            assert!(v.runtime.starts_with("onnxruntime 1.32") && v.max_abs_diff <= 1e-4, "{name} {variant}: {v:?}");
            assert_eq!(v.inputs.len(), cases.len(), "{name} {variant}: {v:?}");
            for (got, want) in v.inputs.iter().zip(cases) {
                assert!(got.contains(want), "{name} {variant}: `{got}` is not `{want}`");
            }
        }
    }
}
