//! Finding a runtime's shared library inside a Python wheel, where users and `cargo xtask
//! setup` install them.
//!
//! The runners load their runtime at run time from a pip-installed wheel. They look, in order:
//! in the folders of `HFEXPORT_SITE_PACKAGES` (the Python package sets it to its interpreter's
//! import path, so that `hfexport.export(..., verify=True)` finds the runtime installed beside
//! it, whichever way that interpreter was started); in a `.venv/` above the current folder, above each given path (the model's folder) and above
//! the running executable (so a test binary, the CLI and a library user inside the repository
//! find the pinned wheels of `<repo>/.venv/` without configuration); then in the active virtual
//! environment (`VIRTUAL_ENV`); then in the site-packages and user site of the `python3` on
//! `PATH` (a plain `pip install onnxruntime`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Site-packages folders searched first (`os.pathsep`-separated), before any `.venv/`.
pub const SITE_PACKAGES_ENV: &str = "HFEXPORT_SITE_PACKAGES";

/// The first file under `site-packages/<package_dir>` whose name satisfies `matches`, in the
/// places the module doc lists, in that order. On failure, every place searched (for the
/// message).
pub fn find_in_venvs(
    near: &[&Path],
    package_dir: &str,
    matches: &dyn Fn(&str) -> bool,
) -> std::result::Result<PathBuf, Vec<String>> {
    let mut searched: Vec<String> = vec![];
    if let Some(sites) = std::env::var_os(SITE_PACKAGES_ENV).filter(|v| !v.is_empty()) {
        for site in std::env::split_paths(&sites) {
            if let Some(found) = in_package(&site.join(package_dir), matches) {
                return Ok(found);
            }
        }
        searched.push(format!("{SITE_PACKAGES_ENV}={}", sites.to_string_lossy()));
    }
    let mut starts: Vec<PathBuf> = vec![];
    if let Ok(cwd) = std::env::current_dir() {
        starts.push(cwd);
    }
    for n in near {
        let n = if n.as_os_str().is_empty() { Path::new(".") } else { n };
        starts.push(n.canonicalize().unwrap_or_else(|_| n.to_path_buf()));
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)) {
        starts.push(dir);
    }
    for s in &starts {
        for dir in s.ancestors() {
            if let Some(found) = in_prefix(&dir.join(".venv"), package_dir, matches) {
                return Ok(found);
            }
        }
    }
    searched.extend(starts.iter().map(|s| format!("a .venv/ above {}", s.display())));
    match std::env::var_os("VIRTUAL_ENV").filter(|v| !v.is_empty()) {
        Some(venv) => {
            let venv = PathBuf::from(venv);
            if let Some(found) = in_prefix(&venv, package_dir, matches) {
                return Ok(found);
            }
            searched.push(format!("the active virtual environment VIRTUAL_ENV={}", venv.display()));
        }
        None => searched.push("the active virtual environment (VIRTUAL_ENV is not set)".to_string()),
    }
    let sites = python_site_packages();
    for site in &sites {
        if let Some(found) = in_package(&site.join(package_dir), matches) {
            return Ok(found);
        }
    }
    searched.push(match sites.is_empty() {
        true => "the site-packages of python3 on PATH (no python3 answered)".to_string(),
        false => format!(
            "the site-packages of python3 on PATH ({})",
            sites.iter().map(|s| s.display().to_string()).collect::<Vec<_>>().join(", ")
        ),
    });
    Err(searched)
}

/// The match under `<prefix>/lib/python3*/site-packages/<package_dir>`, if any (the newest
/// `python3*` first).
fn in_prefix(prefix: &Path, package_dir: &str, matches: &dyn Fn(&str) -> bool) -> Option<PathBuf> {
    let lib = prefix.join("lib");
    let mut pythons: Vec<PathBuf> = std::fs::read_dir(&lib)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path())
        .collect();
    pythons.sort();
    pythons.into_iter().rev().find_map(|p| in_package(&p.join("site-packages").join(package_dir), matches))
}

/// The last matching file (sorted by name) directly in `pkg`.
fn in_package(pkg: &Path, matches: &dyn Fn(&str) -> bool) -> Option<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(pkg)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| matches(&e.file_name().to_string_lossy()) && e.path().is_file())
        .map(|e| e.path())
        .collect();
    files.sort();
    files.pop()
}

/// The site-packages folders and the user site of the `python3` on `PATH` (none when there is
/// no such program or it fails).
fn python_site_packages() -> Vec<PathBuf> {
    let script = "import site\nfor p in site.getsitepackages() + [site.getusersitepackages()]: print(p)";
    let Ok(out) = Command::new("python3").args(["-c", script]).output() else { return vec![] };
    if !out.status.success() {
        return vec![];
    }
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()).map(PathBuf::from).collect()
}
