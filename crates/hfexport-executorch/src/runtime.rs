//! The ExecuTorch runner (cargo feature `runtime`): a method of a `.pte` program (`forward`, or
//! a component's: `prefill`, `decode`) loaded by the executorch 1.5.1 wheel's C++ runtime
//! through a `cxx` bridge (the `ffi` module below, `shim/et_bridge.{h,cpp}`), its kernels and
//! XNNPACK backend linked in; [`EtRunner::sibling`] loads another method of the same loaded
//! program.
//!
//! A file is checked by [`PteFile`] first (identifier, header, segment bounds, flatbuffer
//! verification), so a corrupt `.pte` is a clear error before the runtime sees it.
//! [`EtRunner::bind_input`] / [`EtRunner::bind_output`] hand the runtime the caller's memory:
//! an input the program does not plan, and an output bound with `set_output_data_ptr`, are
//! read and written in place — the zero-copy path of [`crate::generate`].

use crate::dump::PteFile;
use crate::program::{dtype_of, scalar_type};
use cxx::UniquePtr;
use hfexport_core::backend::{verification_atol, Runner, Runtime};
use hfexport_core::cache_ports;
use hfexport_core::config::ExecutorchBackend;
use hfexport_core::generation::Generator;
use hfexport_core::metadata::Component;
use hfexport_core::ActivationRounding;
use hfexport_core::{DType, ExportConfig, Tensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The bridge to `shim/et_bridge.{h,cpp}` (compiled by `cxx_build` in build.rs). Every
/// fallible call returns `Result`: the C++ side throws the ExecuTorch `Error` as a message.
#[cxx::bridge(namespace = "hfx")]
mod ffi {
    /// A tensor's dtype (`ScalarType`), sizes, and whether the program plans its memory.
    struct TensorMeta {
        dtype: i8,
        sizes: Vec<i64>,
        planned: bool,
    }

    unsafe extern "C++" {
        include!("hfexport-executorch/shim/et_bridge.h");

        /// A loaded method of a program.
        type HfxMethod;

        /// Loads method `method` of the program at `path` (its bytes, without a NUL).
        fn open_method(path: &[u8], method: &str) -> Result<UniquePtr<HfxMethod>>;
        fn sibling(self: &HfxMethod, method: &str) -> Result<UniquePtr<HfxMethod>>;
        fn num_inputs(self: &HfxMethod) -> usize;
        fn num_outputs(self: &HfxMethod) -> usize;
        fn meta(self: &HfxMethod, output: bool, i: usize) -> Result<TensorMeta>;
        /// # Safety
        /// `data` holds `sizes`' elements of `dtype` and outlives the executes that use it.
        unsafe fn set_input(self: Pin<&mut HfxMethod>, i: usize, data: *mut u8, dtype: i8, sizes: &[i64])
            -> Result<()>;
        /// `Method::set_output_data_ptr`.
        ///
        /// # Safety
        /// `data` is writable for `nbytes` and outlives the executes that use it.
        unsafe fn set_output(self: Pin<&mut HfxMethod>, i: usize, data: *mut u8, nbytes: usize) -> Result<()>;
        fn execute(self: Pin<&mut HfxMethod>) -> Result<()>;
        fn output_meta(self: &HfxMethod, i: usize) -> Result<TensorMeta>;
        fn output_data(self: &HfxMethod, i: usize) -> Result<*const u8>;
    }
}

/// The executorch wheel this runner was built against (`1.5.1+cpu`).
pub fn linked_version() -> &'static str {
    env!("HFEXPORT_EXECUTORCH_VERSION")
}

/// `executorch <version>`: what a runner and a generator report.
pub(crate) fn runtime_label() -> String {
    format!("executorch {}", linked_version())
}

/// ExecuTorch behind the core [`Runtime`] interface.
pub struct ExecutorchRuntime;

impl Runtime for ExecutorchRuntime {
    fn open_runner(
        &self,
        dir: &Path,
        component: &Component,
        cfg: &ExportConfig,
    ) -> hfexport_core::Result<Box<dyn Runner>> {
        let runner = EtRunner::for_component(dir, component)?;
        let inputs = component.inputs.iter().map(|p| p.name.clone()).collect();
        let outputs: Vec<String> = component.outputs.iter().map(|p| p.name.clone()).collect();
        let aliased: Vec<String> = component.aliases.iter().map(|a| a.output.clone()).collect();
        let names = output_names(&outputs, &aliased);
        let xnnpack = crate::export::executorch_config(cfg)?.backend == ExecutorchBackend::Xnnpack;
        let stateful = !component.states.is_empty();
        Ok(Box::new(EtComponent { runner, inputs, names, xnnpack, stateful }))
    }

    fn open_generator(&self, dir: &Path) -> hfexport_core::Result<Box<dyn Generator>> {
        Ok(Box::new(crate::generate::EtGenerator::load(dir)?))
    }
}

/// An [`EtRunner`] behind the [`Runner`] interface: the method's outputs are `[updated
/// caches, user outputs, updated caches]`, named after the graph's. XNNPACK's kernels
/// reassociate sums, so its tolerance is at least 1e-3.
struct EtComponent {
    runner: EtRunner,
    inputs: Vec<String>,
    names: Vec<String>,
    xnnpack: bool,
    /// The caches are the program's buffers (`forward(input_ids, cache_position)`): cache
    /// feeds, which the reference evaluator takes, are not the method's.
    stateful: bool,
}

impl Runner for EtComponent {
    fn runtime(&self) -> String {
        runtime_label()
    }

    fn run(&mut self, feeds: &BTreeMap<String, Tensor>) -> hfexport_core::Result<BTreeMap<String, Tensor>> {
        if !self.stateful {
            return Ok(self.runner.run_named(feeds, &self.inputs, &self.names)?);
        }
        let mut feeds = feeds.clone();
        feeds.retain(|name, _| !cache_ports::is_past(name));
        Ok(self.runner.run_named(&feeds, &self.inputs, &self.names)?)
    }

    fn compares(&self, output: &str) -> bool {
        !(self.stateful && cache_ports::is_present(output))
    }

    /// A program holding its caches starts from empty ones (zeros when the method loads).
    fn stateful(&self) -> bool {
        self.stateful
    }

    fn atol(&self, dtype: DType) -> f32 {
        let atol = verification_atol(dtype);
        if self.xnnpack {
            atol.max(1e-3)
        } else {
            atol
        }
    }

    /// XNNPACK's quantized linears round activations to int8 per token.
    fn activation_rounding(&self) -> Option<ActivationRounding> {
        self.xnnpack.then_some(ActivationRounding::Int8PerRow)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    File(#[from] crate::dump::PteError),
    #[error("{}: {msg}", path.display())]
    Runtime { path: PathBuf, msg: String },
}

pub type Result<T> = std::result::Result<T, RunError>;

impl From<RunError> for hfexport_core::Error {
    fn from(e: RunError) -> hfexport_core::Error {
        hfexport_core::Error::Source(Box::new(e))
    }
}

/// An input or output of the method: dtype, upper-bound sizes, whether the plan owns it.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub dtype: DType,
    pub bound: Vec<i64>,
    pub planned: bool,
}

impl TensorInfo {
    pub fn max_bytes(&self) -> usize {
        self.bound.iter().product::<i64>().max(0) as usize * self.dtype.size()
    }
}

/// A loaded method of a `.pte` program — see the module docs.
pub struct EtRunner {
    h: UniquePtr<ffi::HfxMethod>,
    path: PathBuf,
    method: String,
    inputs: Vec<TensorInfo>,
    outputs: Vec<TensorInfo>,
}

impl EtRunner {
    /// Checks `path` and loads its method `forward`, or its only method; errors name the file.
    pub fn load(path: impl AsRef<Path>) -> Result<EtRunner> {
        let path = path.as_ref();
        let names = PteFile::open(path)?.method_names()?;
        let method = match &names[..] {
            [only] => only.as_str(),
            _ if names.iter().any(|n| n == "forward") => "forward",
            _ => {
                return Err(RunError::Runtime {
                    path: path.to_path_buf(),
                    msg: format!("the program has no method `forward`; name one of: {}", names.join(", ")),
                })
            }
        };
        EtRunner::load_method(path, method)
    }

    /// Checks `path` and loads its method `method`; errors name the file and the method.
    pub fn load_method(path: impl AsRef<Path>, method: &str) -> Result<EtRunner> {
        let path = path.as_ref().to_path_buf();
        let names = PteFile::open(&path)?.method_names()?;
        let fail = |msg: String| RunError::Runtime { path: path.clone(), msg };
        if !names.iter().any(|n| n == method) {
            return Err(fail(format!("the program has no method `{method}` (methods: {})", names.join(", "))));
        }
        let bytes = path.as_os_str().as_encoded_bytes();
        if bytes.contains(&0) {
            return Err(fail("a NUL in the path".into()));
        }
        let h = ffi::open_method(bytes, method).map_err(|e| fail(e.what().to_string()))?;
        EtRunner::with_handle(h, path, method)
    }

    /// The method of export component `c` in the export folder `dir` (its `.pte` file, the
    /// method named after the component: [`crate::export::method_name`]).
    pub fn for_component(dir: &Path, c: &Component) -> Result<EtRunner> {
        let file = c.file(".pte").map_err(|e| RunError::Runtime { path: dir.to_path_buf(), msg: e.to_string() })?;
        EtRunner::load_method(dir.join(file), crate::export::method_name(&c.spec))
    }

    /// Another method of the same program, sharing its loaded file and named data (the
    /// program stays loaded while either runner lives); each method has its own planned memory.
    pub fn sibling(&self, method: &str) -> Result<EtRunner> {
        if method.contains('\0') {
            return Err(self.fail("a NUL in the method name".into()));
        }
        let h =
            self.h.sibling(method).map_err(|e| RunError::Runtime { path: self.path.clone(), msg: e.what().into() })?;
        EtRunner::with_handle(h, self.path.clone(), method)
    }

    fn with_handle(h: UniquePtr<ffi::HfxMethod>, path: PathBuf, method: &str) -> Result<EtRunner> {
        let (ni, no) = (h.num_inputs(), h.num_outputs());
        let mut r = EtRunner { h, path, method: method.to_string(), inputs: vec![], outputs: vec![] };
        r.inputs = (0..ni).map(|i| r.meta(false, i)).collect::<Result<_>>()?;
        r.outputs = (0..no).map(|i| r.meta(true, i)).collect::<Result<_>>()?;
        Ok(r)
    }

    /// The method's name.
    pub fn method(&self) -> &str {
        &self.method
    }

    fn fail(&self, msg: String) -> RunError {
        RunError::Runtime { path: self.path.clone(), msg: format!("method `{}`: {msg}", self.method) }
    }

    fn meta(&self, output: bool, i: usize) -> Result<TensorInfo> {
        let what = if output { "output" } else { "input" };
        let m = self.h.meta(output, i).map_err(|e| self.fail(format!("{what} {i}: {}", e.what())))?;
        let dtype = dtype_of(m.dtype)
            .ok_or_else(|| self.fail(format!("{what} {i}: ScalarType {} is not supported", m.dtype)))?;
        Ok(TensorInfo { dtype, bound: m.sizes, planned: m.planned })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn inputs(&self) -> &[TensorInfo] {
        &self.inputs
    }

    pub fn outputs(&self) -> &[TensorInfo] {
        &self.outputs
    }

    /// Binds input `i` to `data` (`dtype`, `sizes`).
    ///
    /// # Safety
    /// `data` must hold `sizes`' elements of `dtype` and stay valid (and, for an input the
    /// program updates in place, writable) until the last [`execute`](Self::execute) that
    /// uses it; an unplanned input is read and written there, not copied.
    pub unsafe fn bind_input(&mut self, i: usize, data: *mut u8, dtype: DType, sizes: &[i64]) -> Result<()> {
        let info = self.inputs.get(i).ok_or_else(|| self.fail(format!("no input {i}")))?;
        if info.dtype != dtype || info.bound.len() != sizes.len() {
            return Err(self.fail(format!(
                "input {i} is {}{:?} (bounds), given {}{sizes:?}",
                info.dtype.name(),
                info.bound,
                dtype.name()
            )));
        }
        if let Some(d) = sizes.iter().zip(&info.bound).position(|(s, b)| s > b || *s < 0) {
            return Err(self.fail(format!(
                "input {i}: size {} of axis {d} is past the program's bound {} (sizes {sizes:?}, bounds {:?}); \
                 re-export with a larger maximum",
                sizes[d], info.bound[d], info.bound
            )));
        }
        // SAFETY: see the contract above; `sizes` is valid for the call.
        unsafe { self.h.pin_mut().set_input(i, data, scalar_type(dtype), sizes) }
            .map_err(|e| self.fail(format!("input {i}: {}", e.what())))
    }

    /// Binds output `i` to `len` bytes at `data` (`Method::set_output_data_ptr`; the output
    /// must be unplanned).
    ///
    /// # Safety
    /// `data` must stay valid and writable for `len` bytes until the last execute using it.
    pub unsafe fn bind_output(&mut self, i: usize, data: *mut u8, len: usize) -> Result<()> {
        // SAFETY: see the contract above.
        unsafe { self.h.pin_mut().set_output(i, data, len) }.map_err(|e| self.fail(format!("output {i}: {}", e.what())))
    }

    pub fn execute(&mut self) -> Result<()> {
        // bound buffers are the binders' responsibility (`bind_input`/`bind_output` are unsafe)
        self.h.pin_mut().execute().map_err(|e| self.fail(e.what().into()))
    }

    /// Output `i` after an execute: where its data is, its dtype and sizes.
    pub fn output_view(&self, i: usize) -> Result<(*const u8, DType, Vec<usize>)> {
        let fail = |e: cxx::Exception| self.fail(format!("output {i}: {}", e.what()));
        let m = self.h.output_meta(i).map_err(fail)?;
        let data = self.h.output_data(i).map_err(fail)?;
        let dtype = dtype_of(m.dtype).ok_or_else(|| self.fail(format!("output {i}: ScalarType {}", m.dtype)))?;
        Ok((data, dtype, m.sizes.iter().map(|&d| d as usize).collect()))
    }

    /// Output `i` after an execute, copied.
    pub fn output(&self, i: usize) -> Result<Tensor> {
        let (data, dtype, shape) = self.output_view(i)?;
        let n = shape.iter().product::<usize>() * dtype.size();
        // SAFETY: the runtime's output tensor holds `n` bytes at `data` until the next execute.
        let bytes = unsafe { std::slice::from_raw_parts(data, n) };
        Tensor::from_le_bytes(dtype, shape, bytes).map_err(|e| self.fail(format!("output {i}: {e}")))
    }

    /// Runs on `inputs` (in method order, copied: the caller's tensors are never written) and
    /// returns every output, copied.
    pub fn run(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        if inputs.len() != self.inputs.len() {
            return Err(self.fail(format!(
                "the method takes {} inputs, {} were given",
                self.inputs.len(),
                inputs.len()
            )));
        }
        let mut owned: Vec<Vec<u8>> = inputs.iter().map(|t| t.to_le_bytes()).collect();
        for (i, (t, bytes)) in inputs.iter().zip(owned.iter_mut()).enumerate() {
            let sizes: Vec<i64> = t.shape().iter().map(|&d| d as i64).collect();
            // SAFETY: `owned` outlives the execute below and is never moved meanwhile.
            unsafe { self.bind_input(i, bytes.as_mut_ptr(), t.dtype(), &sizes)? };
        }
        let mut scratch: Vec<Vec<u8>> = vec![];
        for i in 0..self.outputs.len() {
            let info = &self.outputs[i];
            if !info.planned && !self.is_bound_input(i) {
                let mut buf = vec![0u8; info.max_bytes()];
                // SAFETY: `scratch` keeps the buffer alive past the execute.
                unsafe { self.bind_output(i, buf.as_mut_ptr(), buf.len())? };
                scratch.push(buf);
            }
        }
        self.execute()?;
        let out = (0..self.outputs.len()).map(|i| self.output(i)).collect();
        drop((owned, scratch));
        out
    }

    /// Whether output `i` already has memory (an unplanned cache output is its input's tensor).
    fn is_bound_input(&self, i: usize) -> bool {
        self.output_view(i).is_ok_and(|(p, _, _)| !p.is_null())
    }

    /// [`run`](Self::run) with named inputs (`input_names` in method order) and outputs.
    pub fn run_named(
        &mut self,
        feeds: &BTreeMap<String, Tensor>,
        input_names: &[String],
        output_names: &[String],
    ) -> Result<BTreeMap<String, Tensor>> {
        let inputs = input_names
            .iter()
            .map(|n| feeds.get(n).ok_or_else(|| self.fail(format!("missing input `{n}`"))))
            .collect::<Result<Vec<_>>>()?;
        if let Some(extra) = feeds.keys().find(|k| !input_names.contains(k)) {
            return Err(self.fail(format!("the program has no input `{extra}` (inputs: {})", input_names.join(", "))));
        }
        let outs = self.run(&inputs)?;
        if outs.len() != output_names.len() {
            return Err(self.fail(format!("{} outputs, {} names", outs.len(), output_names.len())));
        }
        Ok(output_names.iter().cloned().zip(outs).collect())
    }
}

/// The method's output names for a component: `[updated caches, user outputs, updated caches]`
/// (DESIGN.md) from the graph's outputs (in order) and which of them alias inputs.
pub fn output_names(outputs: &[String], aliased: &[String]) -> Vec<String> {
    let caches: Vec<String> = outputs.iter().filter(|o| aliased.contains(o)).cloned().collect();
    let mut names = caches.clone();
    names.extend(outputs.iter().filter(|o| !aliased.contains(o)).cloned());
    if !caches.is_empty() {
        names.extend(caches);
    }
    names
}
