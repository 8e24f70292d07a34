//! Finding a runtime's shared library inside a Python wheel installed in a `.venv/`.
//!
//! The runners load their runtime at run time from the pinned wheels that `cargo xtask setup`
//! installs into `<repo>/.venv/`; they look for it in a `.venv/` above the current folder,
//! above each given path (the model's folder) and above the running executable, so a test
//! binary, the CLI and a library user inside the repository all find it without configuration.

use std::path::{Path, PathBuf};

/// The first file under `<dir>/.venv/lib/python3*/site-packages/<package_dir>` whose name
/// satisfies `matches`, for every ancestor `<dir>` of the current folder, of each of `near`
/// and of the running executable. On failure, the starting folders searched (for the message).
pub fn find_in_venvs(
    near: &[&Path],
    package_dir: &str,
    matches: &dyn Fn(&str) -> bool,
) -> std::result::Result<PathBuf, Vec<String>> {
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
            if let Some(found) = in_venv(dir, package_dir, matches) {
                return Ok(found);
            }
        }
    }
    Err(starts.iter().map(|s| s.display().to_string()).collect())
}

/// The match under `<dir>/.venv`, if any (the newest `python3*` first, files sorted by name).
fn in_venv(dir: &Path, package_dir: &str, matches: &dyn Fn(&str) -> bool) -> Option<PathBuf> {
    let lib = dir.join(".venv").join("lib");
    let mut pythons: Vec<PathBuf> = std::fs::read_dir(&lib)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path())
        .collect();
    pythons.sort();
    pythons.into_iter().rev().find_map(|p| {
        let pkg = p.join("site-packages").join(package_dir);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&pkg)
            .ok()?
            .filter_map(|e| e.ok())
            .filter(|e| matches(&e.file_name().to_string_lossy()) && e.path().is_file())
            .map(|e| e.path())
            .collect();
        files.sort();
        files.pop()
    })
}
