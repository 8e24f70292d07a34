//! Helpers shared by the binary's integration tests that need ONNX Runtime or OpenVINO.
#![allow(dead_code)]

use hfexport_core::Tensor;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../../../../tests/common/manifest.rs"]
mod manifest;
/// The committed tiny checkpoints with transformers' goldens (tests/fixtures/manifest.json).
#[allow(unused_imports)]
pub use manifest::{dual_fixtures, encoder_fixtures, fixtures, seq2seq_fixtures, speech_fixtures};

/// The manifest, relative to this package.
const MANIFEST: &str = "../../tests/fixtures/manifest.json";
/// The repository, relative to this package.
const REPO: &str = "../..";

#[path = "../../../../tests/common/python.rs"]
mod python;
#[allow(unused_imports)]
pub use python::{python, script};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixture(name: &str) -> PathBuf {
    repo().join("tests/fixtures").join(name)
}

/// The wheel's library in the repository's `.venv/`, or a failure that says how to get it.
pub fn require_onnxruntime() {
    let lib = repo().join(".venv/lib");
    let found = std::fs::read_dir(&lib)
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join("site-packages/onnxruntime/capi/libonnxruntime.so.1.32.0").is_file());
    assert!(
        found,
        "ONNX Runtime 1.32.0 is not installed in {}/python3*/site-packages/onnxruntime: run the suite with \
         `cargo xtask test` (or `cargo xtask setup`, which installs onnxruntime==1.32.0 into .venv/)",
        lib.display()
    );
}

/// OpenVINO's C library from the wheel in the repository's `.venv/`, or a failure that says
/// how to get it.
pub fn require_openvino() {
    let lib = repo().join(".venv/lib");
    let found = std::fs::read_dir(&lib).ok().into_iter().flatten().flatten().any(|e| {
        std::fs::read_dir(e.path().join("site-packages/openvino/libs"))
            .ok()
            .into_iter()
            .flatten()
            .flatten()
            .any(|f| f.file_name().to_string_lossy().starts_with("libopenvino_c.so."))
    });
    assert!(
        found,
        "OpenVINO 2026.4.1 is not installed in {}/python3*/site-packages/openvino: run the suite with `cargo xtask \
         test` (or `cargo xtask setup`, which installs openvino==2026.4.1 into .venv/)",
        lib.display()
    );
}

/// The libtorch runner is compiled into the binary (the feature `tch`), or a failure that says
/// how to build it.
#[allow(dead_code)]
pub fn require_libtorch() {
    let built = cfg!(feature = "tch");
    assert!(
        built,
        "the libtorch runner is not in this build: run the suite with `cargo xtask test` (it installs torch==2.13.0 \
         into .venv/ and builds with --features hfexport-cli/tch and LIBTORCH=.venv/lib/python3*/site-packages/torch)"
    );
}

/// The ExecuTorch runner is compiled into the binary (the feature `executorch-runtime`), or a
/// failure that says how to build it.
#[allow(dead_code)]
pub fn require_executorch() {
    let built = cfg!(feature = "executorch-runtime");
    assert!(
        built,
        "the ExecuTorch runner is not in this build: run the suite with `cargo xtask test` (it installs \
         executorch==1.5.1 into .venv/ and builds with --features hfexport-cli/executorch-runtime)"
    );
}

/// Runs the binary; an ORT_DYLIB_PATH or OPENVINO_C_LIB of the caller's would override the
/// .venv search it does.
pub fn hfexport(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hfexport"))
        .args(args)
        .env_remove("ORT_DYLIB_PATH")
        .env_remove("OPENVINO_C_LIB")
        .output()
        .expect("run hfexport")
}

/// `hfexport ARGS` in this process (`hfexport_cli::run_command`), for a command whose results
/// are files: no process start, which costs about 0.4 s (libtorch's and the kernels'
/// initialisation), so a test running hundreds of commands runs them here. The error's report
/// on failure. Commands whose printed output a test reads go through [`hfexport`].
pub fn hfexport_here(args: &[&str]) -> Result<(), String> {
    let argv = std::iter::once("hfexport").chain(args.iter().copied());
    hfexport_cli::run_command(argv).map_err(|e| hfexport_cli::report(&e))
}

/// `hfexport generate DIR --prompt-ids PROMPT --max-new-tokens N` in this process: the
/// generator the command opens (the export's runtime), stopping where the command stops (the
/// export's EOS ids). The new tokens, and how the runtime holds the cache (`stateful`,
/// `zero-copy`, or empty).
pub fn generate_here(dir: &Path, prompt: &[i64], max_new_tokens: usize) -> (Vec<i64>, &'static str) {
    let meta = hfexport::core::metadata::ExportMetadata::read(dir).unwrap();
    let format = hfexport::ExportFormat::parse(&meta.format).unwrap();
    let eos = hfexport::models::GenerationConfig::stop_token_ids(dir).unwrap();
    let mut generator = hfexport::backend(format).unwrap().runtime().unwrap().open_generator(dir).unwrap();
    let tokens = generator.generate(prompt, max_new_tokens, &eos).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    (tokens.tokens, generator.kind())
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Worst |a - b| at positions the mask keeps, over logits [batch, seq, vocab].
pub fn worst_unpadded(ours: &Tensor, theirs: &Tensor, mask: &Tensor) -> f32 {
    assert_eq!(ours.shape(), theirs.shape(), "logits shapes differ");
    let vocab = *ours.shape().last().unwrap();
    let (o, t, m) = (ours.as_f32().unwrap(), theirs.as_f32().unwrap(), mask.as_i64().unwrap());
    (0..o.len()).filter(|i| m[i / vocab] != 0).map(|i| (o[i] - t[i]).abs()).fold(0f32, |w, d| {
        assert!(d.is_finite(), "non-finite logit difference");
        w.max(d)
    })
}

/// Runs the Python generation loop `script` (`tests/python/<script> JOBS.json OUT.json`, one
/// process for all `jobs`) in the upstream runtimes and asserts each export folder's tokens
/// equal `want_of[folder]` (ids joined by commas).
pub fn assert_upstream_tokens(
    script: &str,
    jobs: &[serde_json::Value],
    want_of: &std::collections::BTreeMap<String, String>,
    tmp: &Path,
) {
    let (jobs_path, out) = (tmp.join("jobs.json"), tmp.join("tokens.json"));
    std::fs::write(&jobs_path, serde_json::to_vec(jobs).unwrap()).unwrap();
    let o = Command::new(python()).arg(repo().join("tests/python").join(script)).args([&jobs_path, &out]).output();
    let o = o.expect("start python");
    assert!(o.status.success(), "{script} failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let tokens: std::collections::BTreeMap<String, Vec<i64>> =
        serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(tokens.len(), want_of.len(), "{script}: one result per export");
    for (dir, got) in tokens {
        let got = got.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        assert_eq!(got, want_of[&dir], "{dir}: the upstream runtime's loop");
    }
}

/// Empties the `files` export.json records of `dir`, as a folder written before hfexport
/// recorded them: `run` then reaches the format's own reader, which these tests feed damaged
/// files (with the records, the size check refuses a cut file first).
pub fn forget_file_records(dir: &Path) {
    let path = dir.join("export.json");
    let mut meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    meta["files"] = serde_json::json!([]);
    std::fs::write(&path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
}
