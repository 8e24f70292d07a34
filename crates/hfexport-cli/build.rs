//! Rpaths so the `hfexport` binary runs without `LD_LIBRARY_PATH`: with the feature `tch`, to
//! libtorch (`LIBTORCH/lib`, the torch wheel torch-sys linked); with `executorch-runtime`, to the
//! executorch wheel's libraries (from hfexport-executorch's build script).

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    if std::env::var_os("CARGO_FEATURE_TCH").is_some() {
        if let Ok(torch) = std::env::var("LIBTORCH") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{torch}/lib");
        }
    }
    if let Ok(dir) = std::env::var("DEP_HFEXPORT_EXECUTORCH_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
