//! The ExecuTorch runner (cargo feature `runtime`): a method of a `.pte` program (`forward`, or
//! a component's: `prefill`, `decode`) loaded by the executorch 1.5.1 wheel's C++ runtime
//! through `shim/et_shim.cpp`, its kernels and XNNPACK backend linked in; [`EtRunner::sibling`]
//! loads another method of the same loaded program.
//!
//! A file is checked by [`PteFile`] first (identifier, header, segment bounds, flatbuffer
//! verification), so a corrupt `.pte` is a clear error before the runtime sees it.
//! [`EtRunner::bind_input`] / [`EtRunner::bind_output`] hand the runtime the caller's memory:
//! an input the program does not plan, and an output bound with `set_output_data_ptr`, are
//! read and written in place — the zero-copy path of [`crate::generate`].

use crate::dump::PteFile;
use crate::program::{dtype_of, scalar_type};
use hfexport_core::metadata::Component;
use hfexport_core::{DType, Tensor};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

#[repr(C)]
struct HfxEt {
    _private: [u8; 0],
}

extern "C" {
    fn hfx_et_open(path: *const c_char, method: *const c_char, err: *mut c_char, n: usize) -> *mut HfxEt;
    fn hfx_et_open_sibling(h: *const HfxEt, method: *const c_char, err: *mut c_char, n: usize) -> *mut HfxEt;
    fn hfx_et_close(h: *mut HfxEt);
    fn hfx_et_num_inputs(h: *const HfxEt) -> usize;
    fn hfx_et_num_outputs(h: *const HfxEt) -> usize;
    fn hfx_et_meta(
        h: *const HfxEt,
        output: c_int,
        i: usize,
        dtype: *mut i8,
        sizes: *mut i64,
        cap: usize,
        rank: *mut usize,
        planned: *mut c_int,
        err: *mut c_char,
        n: usize,
    ) -> c_int;
    fn hfx_et_set_input(
        h: *mut HfxEt,
        i: usize,
        data: *mut c_void,
        dtype: i8,
        sizes: *const i64,
        rank: usize,
        err: *mut c_char,
        n: usize,
    ) -> c_int;
    fn hfx_et_set_output(
        h: *mut HfxEt,
        i: usize,
        data: *mut c_void,
        nbytes: usize,
        err: *mut c_char,
        n: usize,
    ) -> c_int;
    fn hfx_et_execute(h: *mut HfxEt, err: *mut c_char, n: usize) -> c_int;
    fn hfx_et_output(
        h: *const HfxEt,
        i: usize,
        data: *mut *const c_void,
        dtype: *mut i8,
        sizes: *mut i64,
        cap: usize,
        rank: *mut usize,
        err: *mut c_char,
        n: usize,
    ) -> c_int;
}

/// The executorch wheel this runner was built against (`1.5.1+cpu`).
pub fn linked_version() -> &'static str {
    env!("HFEXPORT_EXECUTORCH_VERSION")
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    File(#[from] crate::dump::PteError),
    #[error("{}: {msg}", path.display())]
    Runtime { path: PathBuf, msg: String },
}

pub type Result<T> = std::result::Result<T, RunError>;

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
    h: NonNull<HfxEt>,
    path: PathBuf,
    method: String,
    inputs: Vec<TensorInfo>,
    outputs: Vec<TensorInfo>,
}

const MAX_RANK: usize = 16;

/// A C error buffer and its message.
struct ErrBuf([u8; 512]);

impl ErrBuf {
    fn new() -> ErrBuf {
        ErrBuf([0; 512])
    }

    fn ptr(&mut self) -> *mut c_char {
        self.0.as_mut_ptr().cast()
    }

    fn msg(&self) -> String {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(self.0.len());
        String::from_utf8_lossy(&self.0[..end]).into_owned()
    }
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
        let c = CString::new(path.to_string_lossy().as_bytes()).map_err(|_| fail("a NUL in the path".into()))?;
        let m = CString::new(method).map_err(|_| fail("a NUL in the method name".into()))?;
        let mut err = ErrBuf::new();
        // SAFETY: `c`, `m` and `err` outlive the call; the shim returns null on failure.
        let h = NonNull::new(unsafe { hfx_et_open(c.as_ptr(), m.as_ptr(), err.ptr(), 512) })
            .ok_or_else(|| fail(err.msg()))?;
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
        let m = CString::new(method).map_err(|_| self.fail("a NUL in the method name".into()))?;
        let mut err = ErrBuf::new();
        // SAFETY: `self.h` is a live handle; `m` and `err` outlive the call.
        let h = NonNull::new(unsafe { hfx_et_open_sibling(self.h.as_ptr(), m.as_ptr(), err.ptr(), 512) })
            .ok_or_else(|| RunError::Runtime { path: self.path.clone(), msg: err.msg() })?;
        EtRunner::with_handle(h, self.path.clone(), method)
    }

    fn with_handle(h: NonNull<HfxEt>, path: PathBuf, method: &str) -> Result<EtRunner> {
        let mut r = EtRunner { h, path, method: method.to_string(), inputs: vec![], outputs: vec![] };
        // SAFETY: `h` is a live handle.
        let (ni, no) = unsafe { (hfx_et_num_inputs(h.as_ptr()), hfx_et_num_outputs(h.as_ptr())) };
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
        let (mut dtype, mut sizes, mut rank, mut planned, mut err) = (0i8, [0i64; MAX_RANK], 0usize, 0, ErrBuf::new());
        // SAFETY: the out-pointers are valid for the call; `sizes` holds MAX_RANK entries.
        let rc = unsafe {
            hfx_et_meta(
                self.h.as_ptr(),
                output as c_int,
                i,
                &mut dtype,
                sizes.as_mut_ptr(),
                MAX_RANK,
                &mut rank,
                &mut planned,
                err.ptr(),
                512,
            )
        };
        let what = if output { "output" } else { "input" };
        if rc != 0 {
            return Err(self.fail(format!("{what} {i}: {}", err.msg())));
        }
        let dtype =
            dtype_of(dtype).ok_or_else(|| self.fail(format!("{what} {i}: ScalarType {dtype} is not supported")))?;
        Ok(TensorInfo { dtype, bound: sizes[..rank.min(MAX_RANK)].to_vec(), planned: planned != 0 })
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
        let mut err = ErrBuf::new();
        // SAFETY: see the contract above; `sizes` is valid for the call.
        let rc = unsafe {
            hfx_et_set_input(
                self.h.as_ptr(),
                i,
                data.cast(),
                scalar_type(dtype),
                sizes.as_ptr(),
                sizes.len(),
                err.ptr(),
                512,
            )
        };
        if rc != 0 {
            return Err(self.fail(format!("input {i}: {}", err.msg())));
        }
        Ok(())
    }

    /// Binds output `i` to `len` bytes at `data` (`Method::set_output_data_ptr`; the output
    /// must be unplanned).
    ///
    /// # Safety
    /// `data` must stay valid and writable for `len` bytes until the last execute using it.
    pub unsafe fn bind_output(&mut self, i: usize, data: *mut u8, len: usize) -> Result<()> {
        let mut err = ErrBuf::new();
        // SAFETY: see the contract above.
        let rc = unsafe { hfx_et_set_output(self.h.as_ptr(), i, data.cast(), len, err.ptr(), 512) };
        if rc != 0 {
            return Err(self.fail(format!("output {i}: {}", err.msg())));
        }
        Ok(())
    }

    pub fn execute(&mut self) -> Result<()> {
        let mut err = ErrBuf::new();
        // SAFETY: a live handle; bound buffers are the binders' responsibility.
        if unsafe { hfx_et_execute(self.h.as_ptr(), err.ptr(), 512) } != 0 {
            return Err(self.fail(err.msg()));
        }
        Ok(())
    }

    /// Output `i` after an execute: where its data is, its dtype and sizes.
    pub fn output_view(&self, i: usize) -> Result<(*const u8, DType, Vec<usize>)> {
        let (mut data, mut dtype, mut sizes, mut rank, mut err) =
            (std::ptr::null(), 0i8, [0i64; MAX_RANK], 0usize, ErrBuf::new());
        // SAFETY: the out-pointers are valid for the call.
        let rc = unsafe {
            hfx_et_output(
                self.h.as_ptr(),
                i,
                &mut data,
                &mut dtype,
                sizes.as_mut_ptr(),
                MAX_RANK,
                &mut rank,
                err.ptr(),
                512,
            )
        };
        if rc != 0 {
            return Err(self.fail(format!("output {i}: {}", err.msg())));
        }
        let dtype = dtype_of(dtype).ok_or_else(|| self.fail(format!("output {i}: ScalarType {dtype}")))?;
        Ok((data.cast(), dtype, sizes[..rank.min(MAX_RANK)].iter().map(|&d| d as usize).collect()))
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

impl Drop for EtRunner {
    fn drop(&mut self) {
        // SAFETY: the handle came from hfx_et_open and is closed once.
        unsafe { hfx_et_close(self.h.as_ptr()) }
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
