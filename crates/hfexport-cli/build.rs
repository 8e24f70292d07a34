//! With the feature `tch`: an rpath to libtorch (`LIBTORCH/lib`, the torch wheel that
//! torch-sys linked) so the `hfexport` binary runs without `LD_LIBRARY_PATH`.

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    if std::env::var_os("CARGO_FEATURE_TCH").is_none() {
        return;
    }
    if let Ok(torch) = std::env::var("LIBTORCH") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{torch}/lib");
    }
}
