//! The Python package (`python/`) as a Python user gets it: a fresh venv made by the `python3`
//! on PATH, `pip install ./python[onnxruntime]` (pip fetches maturin, maturin builds the wheel
//! from source with cargo), then `python/tests/test_package.py` run by that venv's interpreter
//! from a folder outside the repository. The script exports the committed Qwen3 fixture through
//! `hfexport.export` and the `hfexport` console script and checks the exports in ONNX Runtime
//! against transformers' logits and greedy tokens, the errors, the progress events and
//! `hfexport.inspect`.
//!
//! The wheel is built unoptimised and without debug info (cargo's `dev` profile at opt-level 0,
//! dependencies too): it cannot reuse the suite's build, whose crates all differ from the
//! wheel's (the ExecuTorch bridge's `cxx-build` turns on a feature of `proc-macro2`, which every
//! derive macro and so every crate above it depends on), and the tests run tiny models, so the
//! cheapest build wins (1m 7s against 4m 14s at the suite's optimisation on 2 cores). A user's
//! `pip install ./python` builds the release profile.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `cmd` with no stdin; its output, or a failure naming the command and what it printed.
fn run(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("{what}: could not start: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The version versions.toml pins for `package` in its `[python.test]` table.
fn test_pin(package: &str) -> String {
    let text = std::fs::read_to_string(root().join("versions.toml")).expect("versions.toml");
    let table = text.split("[python.test]").nth(1).expect("a [python.test] table");
    let table = table.split("\n[").next().unwrap_or(table);
    table
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{package} = \"")).and_then(|v| v.strip_suffix('"')))
        .unwrap_or_else(|| panic!("versions.toml [python.test] pins no {package}"))
        .to_string()
}

/// A fresh venv by the `python3` on PATH; without ensurepip (Debian's python3 lacking
/// python3-venv) one without pip, into which that python3's pip installs pip, as `cargo xtask
/// setup` does.
fn make_venv(venv: &Path) {
    let made = Command::new("python3").args(["-m", "venv"]).arg(venv).stdin(Stdio::null()).output();
    if made.is_ok_and(|o| o.status.success()) {
        return;
    }
    let _ = std::fs::remove_dir_all(venv);
    run(Command::new("python3").args(["-m", "venv", "--without-pip"]).arg(venv), "python3 -m venv --without-pip");
    let mut pip = Command::new("python3");
    pip.args(["-m", "pip", "--python"]).arg(venv.join("bin/python")).args(["install", "--no-input", "pip"]);
    run(pip.env("PIP_ROOT_USER_ACTION", "ignore"), "installing pip into the fresh venv (python3 -m pip)");
}

#[test]
fn the_extras_pin_the_runtimes_the_suite_pins() {
    let pyproject = std::fs::read_to_string(root().join("python/pyproject.toml")).expect("python/pyproject.toml");
    for package in ["onnxruntime", "openvino"] {
        let pin = format!("{package} = [\"{package}=={}\"]", test_pin(package));
        assert!(pyproject.contains(&pin), "python/pyproject.toml's extras must say {pin} (versions.toml)");
    }
}

#[test]
fn the_python_package_installs_into_a_fresh_venv_and_exports() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    make_venv(&venv);
    let python = venv.join("bin").join("python");
    let package = root().join("python");
    let mut pip = Command::new(&python);
    pip.args(["-m", "pip", "install", "--no-input", "--disable-pip-version-check"])
        .arg(format!("{}[onnxruntime]", package.display()))
        .env("PIP_ROOT_USER_ACTION", "ignore")
        // the cheapest build (module docs): unoptimised, no debug info, in the suite's target
        // folder so that a second run compiles nothing
        .env("CARGO_TARGET_DIR", root().join("target"))
        // (split as a shell would: the single quotes keep TOML's quoted `"*"`)
        .env("MATURIN_PEP517_ARGS", "--profile dev --config 'profile.dev.package.\"*\".opt-level=0'")
        .env("CARGO_PROFILE_DEV_OPT_LEVEL", "0")
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        .env_remove("VIRTUAL_ENV")
        .env_remove("HFEXPORT_SITE_PACKAGES");
    run(&mut pip, "pip install ./python[onnxruntime] into a fresh venv");
    assert!(venv.join("bin").join("hfexport").is_file(), "the install puts the hfexport command on the venv's PATH");
    let script = package.join("tests").join("test_package.py");
    let mut test = Command::new(&python);
    // outside the repository, so that `import hfexport` is the installed package; no venv of
    // the suite in sight, so that the runtime is found through the package's own environment
    test.arg(&script)
        .arg(root())
        .current_dir(tmp.path())
        .env_remove("VIRTUAL_ENV")
        .env_remove("HFEXPORT_SITE_PACKAGES")
        .env_remove("ORT_DYLIB_PATH")
        .env_remove("LD_LIBRARY_PATH");
    let out = run(&mut test, "python/tests/test_package.py in the fresh venv");
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(report.contains("\nOK"), "{report}");
    assert!(!report.contains("skipped"), "no test of the package may be skipped:\n{report}");
    eprintln!("{report}");
}
