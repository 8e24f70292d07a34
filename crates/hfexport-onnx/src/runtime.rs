//! The ONNX Runtime runner (cargo feature `runtime`): runs an exported `<component>.onnx` on
//! [`Tensor`]s, for `hfexport run` on an export folder and for `hfexport export --verify`.
//!
//! ONNX Runtime is loaded at run time (`ort` with `load-dynamic`), never linked: a build with
//! the feature works on a machine without the library, and only [`OnnxRunner::load`] says
//! the runtime is missing. The two conditions stay distinct in every message: "compiled in"
//! is this feature; "available now" is the library found by [`locate_library`]:
//!
//! 1. `ORT_DYLIB_PATH`, when set (it must then name an existing file);
//! 2. otherwise the `onnxruntime==1.32.0` wheel in a `.venv/` (what `cargo xtask setup`
//!    creates): `<dir>/.venv/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.1.32.0`
//!    for every ancestor `<dir>` of the current folder, of the model's folder and of the
//!    running executable. The wheel ships only that versioned file, no `libonnxruntime.so`.
//!
//! One library and one ONNX Runtime environment serve the whole process (ONNX Runtime
//! allows a single environment per process); the first successful load fixes both.

use crate::{OnnxError, Result};
use hfexport_core::backend::{Runner, Runtime};
use hfexport_core::generation::Generator;
use hfexport_core::metadata::Component;
use hfexport_core::venv::find_in_venvs;
use hfexport_core::ActivationRounding;
use hfexport_core::{DType, ExportConfig, Tensor, TensorData};
use ort::environment::Environment;
use ort::session::{Session, SessionInputValue};
use ort::value::{DynValue, PrimitiveTensorElementType, TensorElementType, ValueType};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The ONNX Runtime release the exports are built and checked for (the wheel's version).
pub const ORT_VERSION: &str = "1.32.0";
/// The library file inside the wheel (`onnxruntime/capi/`).
pub const LIBRARY_FILE: &str = "libonnxruntime.so.1.32.0";
/// The environment variable naming the library explicitly.
pub const DYLIB_ENV: &str = "ORT_DYLIB_PATH";

fn runtime_err(msg: impl Into<String>) -> OnnxError {
    OnnxError::Runtime(msg.into())
}

/// How to make the runtime available, appended to "not found" errors.
fn install_hint() -> String {
    format!(
        "install it with `cargo xtask setup` (the wheel onnxruntime=={ORT_VERSION} into <repo>/.venv/) or \
         `pip install onnxruntime=={ORT_VERSION}`, and/or set {DYLIB_ENV}=<site-packages>/onnxruntime/capi/{LIBRARY_FILE}"
    )
}

/// Finds the ONNX Runtime library: `ORT_DYLIB_PATH`, else where [`find_in_venvs`] looks (a
/// `.venv/` above the current folder, each of `near` or the executable, the active virtual
/// environment, the `python3` on `PATH`). The error says where it
/// looked and how to install the runtime.
pub fn locate_library(near: &[&Path]) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(DYLIB_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        return Err(runtime_err(format!(
            "the ONNX Runtime runner is compiled in, but {DYLIB_ENV}={} does not name a file; {}",
            p.display(),
            install_hint()
        )));
    }
    let searched = match find_in_venvs(near, "onnxruntime/capi", &|f| f == LIBRARY_FILE) {
        Ok(lib) => return Ok(lib),
        Err(searched) => searched,
    };
    Err(runtime_err(format!(
        "the ONNX Runtime runner is compiled in, but the ONNX Runtime library is not available: {DYLIB_ENV} is not \
         set and no site-packages/onnxruntime/capi/{LIBRARY_FILE} is in {}; {}",
        searched.join("; "),
        install_hint()
    )))
}

struct Loaded {
    env: Environment,
    library: PathBuf,
    version: Option<String>,
}

static LOADED: Mutex<Option<Loaded>> = Mutex::new(None);

/// The process's ONNX Runtime environment, loading the library on first use (found from
/// `near`, see [`locate_library`]).
pub(crate) fn environment(near: &[&Path]) -> Result<Environment> {
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = loaded.as_ref() {
        return Ok(l.env.clone());
    }
    let library = locate_library(near)?;
    let builder = ort::init_from(&library).map_err(|e| {
        runtime_err(format!(
            "the ONNX Runtime runner is compiled in, but {} could not be loaded: {e}; {}",
            library.display(),
            install_hint()
        ))
    })?;
    let env =
        builder.with_name("hfexport").with_telemetry(false).build().map_err(|e| {
            runtime_err(format!("cannot create the ONNX Runtime environment ({}): {e}", library.display()))
        })?;
    // Every ONNX Runtime error reaches the caller as an `Err` naming the file; its own log would
    // print it a second time. `ORT_LOG=warning` (or info, verbose) brings the log back.
    if std::env::var_os("ORT_LOG").is_none() {
        env.set_log_level(ort::logging::LogLevel::Fatal);
    }
    let version = library_version(&library);
    *loaded = Some(Loaded { env: env.clone(), library, version });
    Ok(env)
}

/// `OrtGetApiBase()->GetVersionString()` of the library at `path` (already loaded by `ort`, so
/// this opens the same handle again; the build info string carries no version).
fn library_version(path: &Path) -> Option<String> {
    type GetApiBase = unsafe extern "C" fn() -> *const ort::sys::OrtApiBase;
    // SAFETY: `path` is the ONNX Runtime library ort loaded successfully (it checked that
    // `OrtGetApiBase` exists); the entry point takes no arguments and returns a pointer to a
    // static struct, whose `GetVersionString` returns a static NUL-terminated string.
    unsafe {
        let lib = libloading::Library::new(path).ok()?;
        let get: libloading::Symbol<GetApiBase> = lib.get(b"OrtGetApiBase").ok()?;
        let base = get();
        if base.is_null() {
            return None;
        }
        let s = ((*base).GetVersionString)();
        if s.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr(s).to_str().ok().map(str::to_string)
    }
}

/// The library this process loaded, once a runner was loaded.
pub fn loaded_library() -> Option<PathBuf> {
    LOADED.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|l| l.library.clone())
}

/// The version of the loaded ONNX Runtime (e.g. `1.32.0`), once a runner was loaded.
pub fn loaded_version() -> Option<String> {
    LOADED.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|l| l.version.clone())
}

/// One ONNX Runtime session over an exported `.onnx` file (CPU execution provider, default
/// session options: what `onnxruntime.InferenceSession(path)` does in Python).
#[derive(Debug)]
pub struct OnnxRunner {
    /// `Session::run` takes `&mut self` (ONNX Runtime's run is not re-entrant for every
    /// provider); the lock lets a shared runner be used from several threads in turn.
    session: Mutex<Session>,
    path: PathBuf,
    inputs: Vec<(String, Option<TensorElementType>)>,
    outputs: Vec<String>,
}

impl OnnxRunner {
    /// Loads `model_path` (its external data beside it). Errors name the file, and say whether
    /// the runtime library or the model is what failed.
    pub fn load(model_path: impl AsRef<Path>) -> Result<OnnxRunner> {
        let path = model_path.as_ref().to_path_buf();
        if !path.is_file() {
            return Err(runtime_err(format!("{}: no such ONNX model file", path.display())));
        }
        let parent = path.parent().unwrap_or(Path::new("."));
        let env = environment(&[parent])?;
        let session = Session::builder(&env)
            .and_then(|mut b| b.commit_from_file(&path))
            .map_err(|e| runtime_err(format!("{}: ONNX Runtime cannot load this model: {e}", path.display())))?;
        let inputs = session
            .inputs()
            .iter()
            .map(|o| {
                let ty = match o.dtype() {
                    ValueType::Tensor { ty, .. } => Some(*ty),
                    _ => None,
                };
                (o.name().to_string(), ty)
            })
            .collect();
        let outputs = session.outputs().iter().map(|o| o.name().to_string()).collect();
        Ok(OnnxRunner { session: Mutex::new(session), path, inputs, outputs })
    }

    /// The model file this runner was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Input names, in the model's order.
    pub fn input_names(&self) -> Vec<&str> {
        self.inputs.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Output names, in the model's order.
    pub fn output_names(&self) -> Vec<&str> {
        self.outputs.iter().map(String::as_str).collect()
    }

    /// Runs the model: every input by name (no more, no fewer), every output returned by name.
    /// Element types map one to one (f32, f16, bf16, i64, i32, i8, u8, bool); an input of the
    /// wrong dtype is an error naming it, not a silent cast.
    pub fn run(&self, inputs: &BTreeMap<String, Tensor>) -> Result<BTreeMap<String, Tensor>> {
        let names = self.input_names().join(", ");
        if let Some(extra) = inputs.keys().find(|k| !self.inputs.iter().any(|(n, _)| n == *k)) {
            return Err(runtime_err(format!(
                "{}: input `{extra}` is not an input of the model (inputs: {names})",
                self.path.display()
            )));
        }
        let mut feed: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = Vec::with_capacity(self.inputs.len());
        for (name, ty) in &self.inputs {
            let t = inputs.get(name).ok_or_else(|| {
                runtime_err(format!("{}: input `{name}` is missing (inputs: {names})", self.path.display()))
            })?;
            let want = ty.and_then(dtype_of);
            if want != Some(t.dtype()) {
                return Err(runtime_err(format!(
                    "{}: input `{name}` is {}, the model expects {}",
                    self.path.display(),
                    t.dtype(),
                    match ty.map(|ty| (ty, dtype_of(ty))) {
                        Some((_, Some(d))) => d.to_string(),
                        Some((ty, None)) => format!("{ty:?}"),
                        None => "a non-tensor value".to_string(),
                    }
                )));
            }
            let v = to_ort(t).map_err(|e| runtime_err(format!("input `{name}`: {e}")))?;
            feed.push((Cow::Owned(name.clone()), SessionInputValue::Owned(v)));
        }
        let mut session = self.session.lock().unwrap_or_else(|e| e.into_inner());
        let outputs =
            session.run(feed).map_err(|e| runtime_err(format!("{}: ONNX Runtime failed: {e}", self.path.display())))?;
        let mut out = BTreeMap::new();
        for (name, v) in outputs.iter() {
            let t = from_ort(&v).map_err(|e| runtime_err(format!("{}: output `{name}`: {e}", self.path.display())))?;
            out.insert(name.to_string(), t);
        }
        Ok(out)
    }
}

/// `onnxruntime <version>`: what a runner and a generator report.
pub(crate) fn runtime_label() -> String {
    format!("onnxruntime {}", loaded_version().unwrap_or_else(|| "(unknown version)".into()))
}

/// ONNX Runtime behind the core [`Runtime`] interface.
pub struct OnnxRuntime;

impl Runtime for OnnxRuntime {
    fn open_runner(
        &self,
        dir: &Path,
        component: &Component,
        _cfg: &ExportConfig,
    ) -> hfexport_core::Result<Box<dyn Runner>> {
        Ok(Box::new(OrtRunner(OnnxRunner::load(dir.join(component.file(".onnx")?))?)))
    }

    fn open_generator(&self, dir: &Path) -> hfexport_core::Result<Box<dyn Generator>> {
        Ok(Box::new(crate::generate::Generator::load(dir)?))
    }
}

/// An [`OnnxRunner`] behind the [`Runner`] interface: in-place cache outputs (`present.*`) are
/// the caller's bound buffers, not compared.
struct OrtRunner(OnnxRunner);

impl Runner for OrtRunner {
    fn runtime(&self) -> String {
        runtime_label()
    }

    fn run(&mut self, inputs: &BTreeMap<String, Tensor>) -> hfexport_core::Result<BTreeMap<String, Tensor>> {
        Ok(self.0.run(inputs)?)
    }

    /// Accuracy level 4 rounds `A` to int8 per block of `K` (`lower.rs: matmul_nbits`).
    fn activation_rounding(&self) -> Option<ActivationRounding> {
        Some(ActivationRounding::Int8Blocks(crate::lower::rounded_block))
    }

    fn compares(&self, output: &str) -> bool {
        !hfexport_core::cache_ports::is_present(output)
    }
}

/// Our dtype of an ONNX Runtime element type, where one exists.
fn dtype_of(ty: TensorElementType) -> Option<DType> {
    Some(match ty {
        TensorElementType::Float32 => DType::F32,
        TensorElementType::Float16 => DType::F16,
        TensorElementType::Bfloat16 => DType::BF16,
        TensorElementType::Int64 => DType::I64,
        TensorElementType::Int32 => DType::I32,
        TensorElementType::Int8 => DType::I8,
        TensorElementType::Uint8 => DType::U8,
        TensorElementType::Bool => DType::Bool,
        _ => return None,
    })
}

fn owned<T: PrimitiveTensorElementType + std::fmt::Debug + Clone + 'static>(
    shape: &[usize],
    data: Vec<T>,
) -> ort::Result<DynValue> {
    Ok(ort::value::Tensor::from_array((shape.to_vec(), data.into_boxed_slice()))?.into_dyn())
}

pub(crate) fn to_ort(t: &Tensor) -> std::result::Result<DynValue, String> {
    let shape = t.shape();
    let r = match (t.data(), t.dtype()) {
        (TensorData::Float(v), DType::F32) => owned(shape, v.clone()),
        (TensorData::Float(v), DType::F16) => owned(shape, v.iter().map(|&x| half::f16::from_f32(x)).collect()),
        (TensorData::Float(v), DType::BF16) => owned(shape, v.iter().map(|&x| half::bf16::from_f32(x)).collect()),
        (TensorData::Int(v), DType::I64) => owned(shape, v.clone()),
        (TensorData::Int(v), DType::I32) => owned(shape, v.iter().map(|&x| x as i32).collect()),
        (TensorData::Int(v), DType::I8) => owned(shape, v.iter().map(|&x| x as i8).collect()),
        (TensorData::Int(v), DType::U8) => owned(shape, v.iter().map(|&x| x as u8).collect()),
        (TensorData::Bool(v), DType::Bool) => owned(shape, v.clone()),
        (_, d) => return Err(format!("{d} tensors cannot be passed to ONNX Runtime")),
    };
    r.map_err(|e| e.to_string())
}

fn from_ort(v: &DynValue) -> std::result::Result<Tensor, String> {
    let ValueType::Tensor { ty, .. } = v.dtype() else {
        return Err(format!("is not a tensor ({:?})", v.dtype()));
    };
    fn get<T: PrimitiveTensorElementType>(v: &DynValue) -> std::result::Result<(Vec<usize>, &[T]), String> {
        let (shape, data) = v.try_extract_tensor::<T>().map_err(|e| e.to_string())?;
        Ok((shape.iter().map(|&d| d as usize).collect(), data))
    }
    let t = match ty {
        TensorElementType::Float32 => get::<f32>(v).and_then(|(s, d)| Tensor::f32(s, d.to_vec()).map_err(str_err))?,
        TensorElementType::Float16 => get::<half::f16>(v)
            .and_then(|(s, d)| Tensor::float(DType::F16, s, d.iter().map(|x| x.to_f32()).collect()).map_err(str_err))?,
        TensorElementType::Bfloat16 => get::<half::bf16>(v).and_then(|(s, d)| {
            Tensor::float(DType::BF16, s, d.iter().map(|x| x.to_f32()).collect()).map_err(str_err)
        })?,
        TensorElementType::Int64 => get::<i64>(v).and_then(|(s, d)| Tensor::i64(s, d.to_vec()).map_err(str_err))?,
        TensorElementType::Int32 => get::<i32>(v)
            .and_then(|(s, d)| Tensor::int(DType::I32, s, d.iter().map(|&x| x as i64).collect()).map_err(str_err))?,
        TensorElementType::Int8 => get::<i8>(v)
            .and_then(|(s, d)| Tensor::int(DType::I8, s, d.iter().map(|&x| x as i64).collect()).map_err(str_err))?,
        TensorElementType::Uint8 => get::<u8>(v)
            .and_then(|(s, d)| Tensor::int(DType::U8, s, d.iter().map(|&x| x as i64).collect()).map_err(str_err))?,
        TensorElementType::Bool => get::<bool>(v).and_then(|(s, d)| Tensor::bool(s, d.to_vec()).map_err(str_err))?,
        other => return Err(format!("element type {other:?} has no hfexport dtype")),
    };
    Ok(t)
}

fn str_err(e: hfexport_core::Error) -> String {
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ort_dylib_path_naming_no_file_is_an_error_that_says_compiled_in() {
        // Only this test touches the variable in this crate's unit tests.
        std::env::set_var(DYLIB_ENV, "/nonexistent/libonnxruntime.so.1.32.0");
        let e = locate_library(&[]).unwrap_err().to_string();
        std::env::remove_var(DYLIB_ENV);
        assert!(e.contains("compiled in") && e.contains("/nonexistent/libonnxruntime.so.1.32.0"), "{e}");
        assert!(e.contains("cargo xtask setup") && e.contains("pip install onnxruntime==1.32.0"), "{e}");
    }

    #[test]
    fn a_missing_model_file_is_named() {
        let e = OnnxRunner::load("/nonexistent/model.onnx").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/model.onnx"), "{e}");
    }
}
