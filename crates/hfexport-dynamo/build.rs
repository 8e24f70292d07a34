//! With the feature `tch`: records the torch version of `LIBTORCH` (the torch wheel's folder,
//! see torch-sys) for [`runner::linked_version`], and gives this crate's tests an rpath to
//! libtorch so they run without `LD_LIBRARY_PATH` (tch's own rpath reaches only tch's targets).

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    if std::env::var_os("CARGO_FEATURE_TCH").is_none() {
        return;
    }
    let Ok(torch) = std::env::var("LIBTORCH") else { return };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{torch}/lib");
    let version_py = format!("{torch}/version.py");
    println!("cargo:rerun-if-changed={version_py}");
    let version = std::fs::read_to_string(&version_py)
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("__version__ = ").map(|v| v.trim_matches(['\'', '"']).to_string()))
        })
        .unwrap_or_else(|| "(unknown version)".into());
    println!("cargo:rustc-env=HFEXPORT_LIBTORCH_VERSION={version}");
}
