//! The test scripts of tests/python/ and the python that runs them; the workspace tests and the
//! CLI's tests both include this file.

use std::path::PathBuf;

use super::REPO;

/// A test script of tests/python/.
pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(REPO).join("tests/python").join(name)
}

/// The python of `HFEXPORT_PYTHON` (the repository's .venv/ with the [python.test] packages).
pub fn python() -> String {
    std::env::var("HFEXPORT_PYTHON").unwrap_or_else(|_| {
        panic!(
            "HFEXPORT_PYTHON is not set: run `cargo xtask test` (it installs torch, transformers, onnx, onnxruntime \
             and openvino into .venv/ and sets it)"
        )
    })
}

/// The python of `HFEXPORT_CLIENTS_PYTHON`: the client libraries' own venv (`.venv/clients/`,
/// versions.toml `[clients]`), where optimum, sentence-transformers and fastembed load exports.
pub fn clients_python() -> String {
    std::env::var("HFEXPORT_CLIENTS_PYTHON").unwrap_or_else(|_| {
        panic!(
            "HFEXPORT_CLIENTS_PYTHON is not set: run `cargo xtask test` (it installs the [clients] pins of \
             versions.toml into .venv/clients/ and sets it), or `cargo xtask setup --group clients`"
        )
    })
}
