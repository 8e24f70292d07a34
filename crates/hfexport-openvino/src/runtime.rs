//! The OpenVINO runner (cargo feature `runtime`): runs an exported `openvino_<c>.xml` on
//! [`Tensor`]s, for `hfexport run` on an export folder, `hfexport export --verify` and the
//! generation loop.
//!
//! The C library of the `openvino==2026.4.1` wheel is loaded at run time (crate `openvino`
//! with `runtime-linking`), never linked, found by [`locate_library`]:
//! 1. `OPENVINO_C_LIB`, when set (it must then name an existing file);
//! 2. otherwise `<dir>/.venv/lib/python3*/site-packages/openvino/libs/libopenvino_c.so.<N>`
//!    above the current folder, the model's folder or the executable (the suffix changes with
//!    each release, so any `libopenvino_c.so.*` is taken).
//!
//! Every model is compiled on CPU with `INFERENCE_PRECISION_HINT=f32`, `KV_CACHE_PRECISION=f32`
//! and `DYNAMIC_QUANTIZATION_GROUP_SIZE=0`: on CPUs with bf16 support the defaults are bf16
//! compute and a u8 KV cache, and on CPUs with VNNI (AVX512-VNNI, AMX) the plugin quantizes the
//! activations of int4/int8 weight matmuls to int8 in groups of 32, each of which would make
//! parity with the reference impossible (the last moved quantized logits by 0.1).

use crate::{OvError, Result};
use hfexport_core::backend::{verification_atol, Runner, Runtime};
use hfexport_core::cache_ports;
use hfexport_core::generation::Generator;
use hfexport_core::metadata::Component;
use hfexport_core::{DType, ExportConfig, Tensor};
use openvino::{CompiledModel, Core, DeviceType, ElementType, InferRequest, RwPropertyKey, Shape};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The OpenVINO release the exports are built and checked for (the wheel's version).
pub const OPENVINO_VERSION: &str = "2026.4.1";
/// The environment variable naming the C library explicitly.
pub const LIBRARY_ENV: &str = "OPENVINO_C_LIB";

fn runtime_err(msg: impl Into<String>) -> OvError {
    OvError::Runtime(msg.into())
}

/// How to make the runtime available, appended to "not found" errors.
fn install_hint() -> String {
    format!(
        "install it with `cargo xtask setup` (the wheel openvino=={OPENVINO_VERSION} into <repo>/.venv/) or `pip \
         install openvino=={OPENVINO_VERSION}`, and/or set {LIBRARY_ENV}=<site-packages>/openvino/libs/libopenvino_c.so.<N>"
    )
}

/// Finds OpenVINO's C library: `OPENVINO_C_LIB`, else where
/// [`hfexport_core::venv::find_in_venvs`] looks (a `.venv/` above the current folder, each of
/// `near` or the executable, the active virtual environment, the `python3` on `PATH`).
pub fn locate_library(near: &[&Path]) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(LIBRARY_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        return Err(runtime_err(format!(
            "the OpenVINO runner is compiled in, but {LIBRARY_ENV}={} does not name a file; {}",
            p.display(),
            install_hint()
        )));
    }
    hfexport_core::venv::find_in_venvs(near, "openvino/libs", &|f| f.starts_with("libopenvino_c.so.")).map_err(
        |searched| {
            runtime_err(format!(
                "the OpenVINO runner is compiled in, but the OpenVINO library is not available: {LIBRARY_ENV} is not \
                 set and no site-packages/openvino/libs/libopenvino_c.so.* is in {}; {}",
                searched.join("; "),
                install_hint()
            ))
        },
    )
}

/// (library path, version) once loaded; the first successful load fixes the library for the
/// process (`openvino-sys` keeps it in a global and ignores later loads).
static LOADED: Mutex<Option<(PathBuf, String)>> = Mutex::new(None);

/// A `Core` with the parity properties set, loading the library on first use.
pub(crate) fn core(near: &[&Path]) -> Result<Core> {
    {
        let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
        if loaded.is_none() {
            let library = locate_library(near)?;
            openvino_sys::library::load_from(&library).map_err(|e| {
                runtime_err(format!(
                    "the OpenVINO runner is compiled in, but {} could not be loaded: {e}; {}",
                    library.display(),
                    install_hint()
                ))
            })?;
            let v = openvino::version();
            let version = v.build_number.split('-').next().unwrap_or(&v.build_number).to_string();
            *loaded = Some((library, version));
        }
    }
    let mut core = Core::new().map_err(|e| runtime_err(format!("cannot create an OpenVINO core: {e}")))?;
    let set = |core: &mut Core, key: RwPropertyKey, value: &str| {
        core.set_property(&DeviceType::CPU, &key, value)
            .map_err(|e| runtime_err(format!("cannot set the CPU property {key:?}={value}: {}", ov_message(&e))))
    };
    set(&mut core, RwPropertyKey::HintInferencePrecision, "f32")?;
    set(&mut core, RwPropertyKey::Other("KV_CACHE_PRECISION".into()), "f32")?;
    set(&mut core, RwPropertyKey::Other("DYNAMIC_QUANTIZATION_GROUP_SIZE".into()), "0")?;
    Ok(core)
}

/// The version of the loaded OpenVINO (e.g. `2026.4.1`), once a runner was loaded.
pub fn loaded_version() -> Option<String> {
    LOADED.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|l| l.1.clone())
}

/// `openvino <version>`: what a runner and a generator report.
pub(crate) fn runtime_label() -> String {
    format!("openvino {}", loaded_version().unwrap_or_else(|| "(unknown version)".into()))
}

/// OpenVINO behind the core [`Runtime`] interface.
pub struct OpenvinoRuntime;

impl Runtime for OpenvinoRuntime {
    fn open_runner(
        &self,
        dir: &Path,
        component: &Component,
        cfg: &ExportConfig,
    ) -> hfexport_core::Result<Box<dyn Runner>> {
        let runner = OvRunner::load_component(dir, component)?;
        // f16-compressed weights are held to the tolerance of a float16 export
        let compressed = crate::export::openvino_config(cfg)?.compress_to_fp16;
        Ok(Box::new(OvComponent { runner, stateful: !component.states.is_empty(), compressed }))
    }

    fn open_generator(&self, dir: &Path) -> hfexport_core::Result<Box<dyn Generator>> {
        Ok(Box::new(crate::generate::OvGenerator::load(dir)?))
    }
}

/// OpenVINO (CPU, f32 inference precision) behind the [`Runner`] interface. A stateful model's
/// caches are variables that start at zeros: it is fed without the cache inputs and with
/// `beam_idx` [0], and only its own outputs (`logits`) are compared.
struct OvComponent {
    runner: OvRunner,
    stateful: bool,
    compressed: bool,
}

impl Runner for OvComponent {
    fn runtime(&self) -> String {
        runtime_label()
    }

    fn run(&mut self, inputs: &BTreeMap<String, Tensor>) -> hfexport_core::Result<BTreeMap<String, Tensor>> {
        if !self.stateful {
            return Ok(self.runner.run(inputs)?);
        }
        let mut feed: BTreeMap<String, Tensor> =
            inputs.iter().filter(|(k, _)| !cache_ports::is_past(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        let beam = Tensor::int(DType::I32, vec![1], vec![0])?;
        feed.insert(crate::lower::BEAM_IDX.into(), beam);
        Ok(self.runner.run(&feed)?)
    }

    fn compares(&self, output: &str) -> bool {
        !(self.stateful && cache_ports::is_present(output))
    }

    fn stateful(&self) -> bool {
        self.stateful
    }

    fn atol(&self, dtype: DType) -> f32 {
        let narrowed = self.compressed && dtype == DType::F32;
        verification_atol(if narrowed { DType::F16 } else { dtype })
    }
}

/// OpenVINO's own message, trimmed (its errors are multi-line and carry source positions).
pub(crate) fn ov_message(e: &openvino::InferenceError) -> String {
    let text = e.to_string();
    let lines: Vec<&str> =
        text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("Exception from")).collect();
    if lines.is_empty() {
        text.trim().to_string()
    } else {
        lines.join(" ")
    }
}

fn element_type(d: DType) -> ElementType {
    match d {
        DType::F32 => ElementType::F32,
        DType::F16 => ElementType::F16,
        DType::BF16 => ElementType::Bf16,
        DType::I64 => ElementType::I64,
        DType::I32 => ElementType::I32,
        DType::Bool => ElementType::Boolean,
        DType::U8 => ElementType::U8,
        DType::I8 => ElementType::I8,
    }
}

fn dtype(e: ElementType) -> Option<DType> {
    Some(match e {
        ElementType::F32 => DType::F32,
        ElementType::F16 => DType::F16,
        ElementType::Bf16 => DType::BF16,
        ElementType::I64 => DType::I64,
        ElementType::I32 => DType::I32,
        ElementType::Boolean => DType::Bool,
        ElementType::U8 => DType::U8,
        ElementType::I8 => DType::I8,
        _ => return None,
    })
}

/// A core tensor as an OpenVINO tensor of element type `want` (cast when they differ).
pub(crate) fn to_ov(t: &Tensor, want: DType) -> Result<openvino::Tensor> {
    let t = if t.dtype() == want { t.clone() } else { t.cast(want) };
    let dims: Vec<i64> = t.shape().iter().map(|&d| d as i64).collect();
    let shape = Shape::new(&dims).map_err(|e| runtime_err(ov_message(&e)))?;
    let mut out = openvino::Tensor::new(element_type(want), &shape).map_err(|e| runtime_err(ov_message(&e)))?;
    let bytes = t.to_le_bytes();
    let dst = out.get_raw_data_mut().map_err(|e| runtime_err(ov_message(&e)))?;
    if dst.len() != bytes.len() {
        return Err(runtime_err(format!("tensor of {} bytes for {} bytes of data", dst.len(), bytes.len())));
    }
    dst.copy_from_slice(&bytes);
    Ok(out)
}

/// An OpenVINO tensor as a core tensor (a copy).
pub(crate) fn from_ov(t: &openvino::Tensor) -> Result<Tensor> {
    let e = t.get_element_type().map_err(|e| runtime_err(ov_message(&e)))?;
    let d = dtype(e).ok_or_else(|| runtime_err(format!("output of element type {e:?} is not supported")))?;
    let shape: Vec<usize> =
        t.get_shape().map_err(|e| runtime_err(ov_message(&e)))?.get_dimensions().iter().map(|&x| x as usize).collect();
    let bytes = t.get_raw_data().map_err(|e| runtime_err(ov_message(&e)))?;
    Ok(Tensor::from_le_bytes(d, shape, bytes)?)
}

/// A model's input or output: tensor name and element type.
#[derive(Debug, Clone)]
pub struct PortSpec {
    pub name: String,
    pub dtype: DType,
    /// Dims; -1 where dynamic.
    pub dims: Vec<i64>,
}

/// One compiled OpenVINO model (CPU, f32 precision) over an exported `.xml`.
pub struct OvRunner {
    compiled: Mutex<CompiledModel>,
    path: PathBuf,
    inputs: Vec<PortSpec>,
    outputs: Vec<PortSpec>,
}

impl std::fmt::Debug for OvRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OvRunner").field("path", &self.path).field("inputs", &self.inputs).finish()
    }
}

fn ports(
    n: usize,
    get: impl Fn(usize) -> std::result::Result<openvino::Node, openvino::InferenceError>,
) -> Result<Vec<PortSpec>> {
    (0..n)
        .map(|i| {
            let node = get(i).map_err(|e| runtime_err(ov_message(&e)))?;
            let name = node.get_name().map_err(|e| runtime_err(ov_message(&e)))?;
            let e = node.get_element_type().map_err(|e| runtime_err(ov_message(&e)))?;
            let dtype = dtype(e).ok_or_else(|| runtime_err(format!("`{name}` has element type {e:?}")))?;
            let ps = node.get_partial_shape().map_err(|e| runtime_err(ov_message(&e)))?;
            let dims = ps.get_dimensions().iter().map(|d| if d.is_dynamic() { -1 } else { d.get_min() }).collect();
            Ok(PortSpec { name, dtype, dims })
        })
        .collect()
}

impl OvRunner {
    /// Reads and compiles `xml` with the `.bin` beside it. Errors name the file, and say
    /// whether the runtime is missing or the file is bad.
    pub fn load(xml: impl AsRef<Path>) -> Result<OvRunner> {
        let xml = xml.as_ref();
        OvRunner::load_with_weights(xml, &xml.with_extension("bin"))
    }

    /// Reads and compiles component `c` of the export in `dir` (its XML and the `.bin` it
    /// shares with the other components).
    pub fn load_component(dir: &Path, c: &hfexport_core::metadata::Component) -> Result<OvRunner> {
        let (xml, bin) = (c.file(".xml")?, c.file(".bin")?);
        OvRunner::load_with_weights(&dir.join(xml), &dir.join(bin))
    }

    /// Reads and compiles `xml` whose constants are in `bin`.
    pub fn load_with_weights(xml: &Path, bin: &Path) -> Result<OvRunner> {
        let path = xml.to_path_buf();
        if !path.is_file() {
            return Err(runtime_err(format!("{}: no such OpenVINO IR file", path.display())));
        }
        if !bin.is_file() {
            return Err(runtime_err(format!("{}: the weights file {} is missing", path.display(), bin.display())));
        }
        let here = path.display().to_string();
        let mut core = core(&[path.parent().unwrap_or(Path::new("."))])?;
        let model = core
            .read_model_from_file(&path.to_string_lossy(), &bin.to_string_lossy())
            .map_err(|e| runtime_err(format!("{here}: OpenVINO cannot read this model: {}", ov_message(&e))))?;
        let inputs = ports(model.get_inputs_len().unwrap_or(0), |i| model.get_input_by_index(i))?;
        let outputs = ports(model.get_outputs_len().unwrap_or(0), |i| model.get_output_by_index(i))?;
        let compiled = core
            .compile_model(&model, DeviceType::CPU)
            .map_err(|e| runtime_err(format!("{here}: OpenVINO cannot compile this model: {}", ov_message(&e))))?;
        Ok(OvRunner { compiled: Mutex::new(compiled), path, inputs, outputs })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn inputs(&self) -> &[PortSpec] {
        &self.inputs
    }

    pub fn outputs(&self) -> &[PortSpec] {
        &self.outputs
    }

    /// A new infer request (its variables start from their initial values).
    pub fn request(&self) -> Result<InferRequest> {
        let mut c = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        c.create_infer_request().map_err(|e| runtime_err(format!("{}: {}", self.path.display(), ov_message(&e))))
    }

    /// Runs the model once on `inputs` (by name, cast to each input's element type) in a fresh
    /// request; every output by name. A missing or unknown input is an error naming it.
    pub fn run(&self, inputs: &BTreeMap<String, Tensor>) -> Result<BTreeMap<String, Tensor>> {
        let mut req = self.request()?;
        self.set_inputs(&mut req, &[inputs])?;
        self.infer(&mut req)?;
        self.outputs_of(&req)
    }

    /// Every output of an inferred request, by name.
    pub(crate) fn outputs_of(&self, req: &InferRequest) -> Result<BTreeMap<String, Tensor>> {
        self.outputs.iter().map(|o| Ok((o.name.clone(), self.output(req, &o.name)?))).collect()
    }

    /// Sets every input of the model from `maps` (the first that has it; a generation loop's
    /// per-call inputs and its fixed ones).
    pub(crate) fn set_inputs(&self, req: &mut InferRequest, maps: &[&BTreeMap<String, Tensor>]) -> Result<()> {
        let here = self.path.display();
        if let Some(extra) = maps.iter().flat_map(|m| m.keys()).find(|k| !self.inputs.iter().any(|i| &i.name == *k)) {
            let names: Vec<&str> = self.inputs.iter().map(|i| i.name.as_str()).collect();
            return Err(runtime_err(format!(
                "{here}: the model has no input `{extra}` (inputs: {})",
                names.join(", ")
            )));
        }
        for spec in &self.inputs {
            let t = maps
                .iter()
                .find_map(|m| m.get(&spec.name))
                .ok_or_else(|| runtime_err(format!("{here}: input `{}` is not given", spec.name)))?;
            let ov = to_ov(t, spec.dtype)?;
            req.set_tensor(&spec.name, &ov)
                .map_err(|e| runtime_err(format!("{here}: input `{}`: {}", spec.name, ov_message(&e))))?;
        }
        Ok(())
    }

    pub(crate) fn infer(&self, req: &mut InferRequest) -> Result<()> {
        req.infer().map_err(|e| runtime_err(format!("{}: OpenVINO failed: {}", self.path.display(), ov_message(&e))))
    }

    pub(crate) fn output(&self, req: &InferRequest, name: &str) -> Result<Tensor> {
        let t = req
            .get_tensor(name)
            .map_err(|e| runtime_err(format!("{}: output `{name}`: {}", self.path.display(), ov_message(&e))))?;
        from_ov(&t)
    }
}
