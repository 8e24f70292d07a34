//! With the feature `runtime`: generates the C++ half of the `#[cxx::bridge]` in
//! `src/runtime.rs` (`cxx_build`) and compiles it with `shim/et_bridge.cpp` (the bridge to the
//! ExecuTorch C++ runtime) against the executorch 1.5.1 wheel's headers, and links
//! `libexecutorch.so` (the bridge loads the kernel and XNNPACK libraries beside it, which
//! register themselves when loaded).
//! The wheel is `HFEXPORT_EXECUTORCH=<site-packages>/executorch`, else the one in the nearest
//! `.venv/` above this crate (what `cargo xtask setup` installs).

#![cfg_attr(not(feature = "runtime"), allow(dead_code))]

use std::path::{Path, PathBuf};

fn find_wheel() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("HFEXPORT_EXECUTORCH") {
        return Some(PathBuf::from(dir));
    }
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").ok()?);
    for dir in here.ancestors() {
        let lib = dir.join(".venv/lib");
        let found = std::fs::read_dir(&lib).ok().into_iter().flatten().flatten().find_map(|e| {
            let et = e.path().join("site-packages/executorch");
            et.join("lib/libexecutorch.so").is_file().then_some(et)
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

fn version(et: &Path) -> String {
    std::fs::read_to_string(et.join("version.py"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("__version__ = ").map(|v| v.trim_matches(['\'', '"']).to_string()))
        })
        .unwrap_or_else(|| "(unknown version)".into())
}

fn main() {
    println!("cargo:rerun-if-env-changed=HFEXPORT_EXECUTORCH");
    println!("cargo:rerun-if-changed=shim/et_bridge.cpp");
    println!("cargo:rerun-if-changed=shim/et_bridge.h");
    println!("cargo:rerun-if-changed=src/runtime.rs");
    #[cfg(feature = "runtime")]
    runtime();
}

#[cfg(feature = "runtime")]
fn runtime() {
    let et = find_wheel().unwrap_or_else(|| {
        panic!(
            "the ExecuTorch runner (feature `runtime`) builds against the executorch==1.5.1 wheel, and none was \
             found: run `cargo xtask setup` (it installs it into .venv/), or set HFEXPORT_EXECUTORCH to its \
             site-packages/executorch folder"
        )
    });
    let include = et.join("include");
    cxx_build::bridge("src/runtime.rs")
        .std("c++17")
        .file("shim/et_bridge.cpp")
        .include(&include)
        .include(include.join("executorch/runtime/core/portable_type/c10"))
        .define("C10_USING_CUSTOM_GENERATED_MACROS", None)
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-deprecated-declarations")
        .compile("hfx_et_bridge");
    let lib = et.join("lib");
    println!("cargo:rustc-link-search=native={}", lib.display());
    // the kernel and XNNPACK libraries are dlopen'ed by the bridge (they register themselves when
    // loaded, and `--as-needed` would drop them from a link that references none of their symbols)
    println!("cargo:rustc-link-lib=dylib=executorch");
    println!("cargo:rustc-link-lib=dylib=dl");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    println!("cargo:lib_dir={}", lib.display());
    println!("cargo:rustc-env=HFEXPORT_EXECUTORCH_VERSION={}", version(&et));
}
