//! The fixture list of `tests/fixtures/manifest.json`, read once; the workspace tests and the
//! CLI's tests both include this file, so there is one list for every test.

use std::path::Path;
use std::sync::OnceLock;

use super::MANIFEST;

/// Names of the committed tiny checkpoints, in manifest order; `HFEXPORT_FIXTURES=a,b` narrows
/// the list for a local run (an unknown name panics, so a typo cannot pass vacuously).
pub fn fixtures() -> Vec<&'static str> {
    let all = manifest_fixtures();
    match std::env::var("HFEXPORT_FIXTURES") {
        Ok(only) if !only.is_empty() => only
            .split(',')
            .map(|n| *all.iter().find(|a| **a == n).unwrap_or_else(|| panic!("HFEXPORT_FIXTURES: no fixture `{n}`")))
            .collect(),
        _ => all,
    }
}

fn manifest_fixtures() -> Vec<&'static str> {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    NAMES
        .get_or_init(|| {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(MANIFEST);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let v: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let list = v["fixtures"].as_array().unwrap_or_else(|| panic!("{}: no `fixtures` list", path.display()));
            list.iter()
                .map(|f| {
                    let name =
                        f["name"].as_str().unwrap_or_else(|| panic!("{}: a fixture without name", path.display()));
                    &*Box::leak(name.to_string().into_boxed_str())
                })
                .collect()
        })
        .clone()
}
