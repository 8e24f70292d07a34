//! ExecuTorch's side of core's generation loop (feature `runtime`): the runtime calls of
//! [`GenerationLoop`] over a `.pte` generation export, zero-copy when nothing is planned.
//!
//! The export's `model.pte` holds a method per component (`prefill`, `decode`): the session
//! loads the program once and each method from it, found by the component's role.
//!
//! The session owns one buffer per cache (zeros, `cache_len` at its maximum), the logits and
//! the small inputs. When the program plans none of them (`alloc_graph_input`,
//! `alloc_graph_output` and `alloc_mutable_buffers` false), every call binds the caller's
//! buffers: the caches as inputs (the program's in-place `index_put_` writes the new slots into
//! them) and as the updated-cache outputs (`Method::set_output_data_ptr`), the logits as an
//! output — nothing is copied, and `prefill` and `decode` share the same cache buffers. When
//! the program plans them, each call copies the caches in (`set_input`) and the updated caches
//! back out.
//!
//! The stateful (LLM-runner) layout has one method, `forward(input_ids, cache_position)`, and
//! its caches are the program's mutable buffers: the session feeds the tokens and their slots
//! and holds no cache. A new prompt starts at slot 0 over whatever an earlier one left in the
//! buffers; the causal mask hides every slot past the query, so nothing needs clearing.

use crate::export::method_name;
use crate::runtime::{EtRunner, RunError};
use hfexport_core::cache_ports;
use hfexport_core::generation::{self, Call, GenerationExport, GenerationLoop};
use hfexport_core::metadata::Component;
use hfexport_core::plan::{Positions, Role};
use hfexport_core::{DType, ExportFormat, Tensor};
use std::collections::BTreeMap;
use std::path::Path;

fn err(path: &Path, msg: impl Into<String>) -> RunError {
    RunError::Runtime { path: path.to_path_buf(), msg: msg.into() }
}

/// One component: its runner, how many caches it takes, where its logits are.
struct Part {
    runner: EtRunner,
    /// Method output index of `logits` (after the N updated caches).
    logits: usize,
    /// Whether every input and output is the caller's memory.
    zero_copy: bool,
}

/// A buffer of `u64` words, so every dtype's elements are aligned.
struct Buf(Vec<u64>);

impl Buf {
    fn zeros(bytes: usize) -> Buf {
        Buf(vec![0u64; bytes.div_ceil(8)])
    }

    fn ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr().cast()
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: plain old data viewed as bytes.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast(), self.0.len() * 8) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: plain old data viewed as bytes.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast(), self.0.len() * 8) }
    }
}

/// A method input fed the same tensor every call: its bound (the planned maximum), the sizes
/// of the tensor set last and its buffer (of the bound's bytes).
struct Fixed {
    name: String,
    dtype: DType,
    bound: Vec<i64>,
    sizes: Vec<i64>,
    buf: Buf,
}

/// Greedy generation in ExecuTorch.
pub type EtGenerator = GenerationLoop<EtSession>;

/// The methods of a `.pte` generation export and the buffers every call binds — see the
/// module docs.
pub struct EtSession {
    decode: Part,
    prefill: Option<Part>,
    /// `decode` is `forward(input_ids, cache_position)` with its caches in the program (the
    /// LLM-runner layout): the session holds none of them.
    slotted: bool,
    slots: usize,
    /// (dtype, sizes, buffer) of each cache, in method input order.
    caches: Vec<(DType, Vec<i64>, Buf)>,
    /// The inputs after the caches, fed unchanged to every call (an encoder-decoder's
    /// cross-attention keys and values), in method input order.
    fixed: Vec<Fixed>,
    logits: Buf,
    vocab: usize,
}

impl Part {
    /// The method of component `c`: another method of `sibling`'s program when `c` is in the
    /// same file (one loaded program, its weights loaded once), else from its own file.
    fn load(
        dir: &Path,
        c: &Component,
        (caches, fixed): (usize, usize),
        sibling: Option<(&Component, &EtRunner)>,
    ) -> Result<Part, RunError> {
        let runner = match sibling {
            Some((other, r)) if c.file(".pte").ok() == other.file(".pte").ok() => r.sibling(method_name(&c.spec))?,
            _ => EtRunner::for_component(dir, c)?,
        };
        Self::check(runner, caches, fixed, c.spec.positions == Positions::Slots)
    }

    fn check(runner: EtRunner, caches: usize, fixed: usize, slotted: bool) -> Result<Part, RunError> {
        let n_in = runner.inputs().len();
        let (per_call, expected) = match slotted {
            true => (2, "[input_ids, cache_position]"),
            false => (3, "[input_ids, attention_mask, position_ids, caches, more]"),
        };
        if n_in != per_call + caches + fixed || runner.outputs().len() != 2 * caches + 1 {
            return Err(err(
                runner.path(),
                format!(
                    "expected inputs {expected} ({caches} caches, {fixed} more) and outputs [caches, logits, caches]; \
                     the method has {n_in} inputs and {} outputs",
                    runner.outputs().len()
                ),
            ));
        }
        let zero_copy = runner.inputs().iter().chain(runner.outputs()).all(|t| !t.planned);
        Ok(Part { runner, logits: caches, zero_copy })
    }
}

impl EtSession {
    /// Loads the methods of a `.pte` export's generation components (static cache).
    fn load(export: &GenerationExport) -> Result<EtSession, RunError> {
        let (dir, comp) = (export.dir.as_path(), export.decode());
        let Some(slots) = export.slots() else {
            return Err(err(
                dir,
                "a .pte generation export needs a static cache (--static-cache N): ExecuTorch plans every tensor at \
                 a fixed bound",
            ));
        };
        let cache_inputs: Vec<_> = comp.inputs.iter().filter(|p| cache_ports::is_past(&p.name)).collect();
        let per_call = ["input_ids", "attention_mask", "position_ids", cache_ports::CACHE_POSITION];
        let fixed_names: Vec<String> = comp
            .inputs
            .iter()
            .filter(|p| !cache_ports::is_past(&p.name) && !per_call.contains(&p.name.as_str()))
            .map(|p| p.name.clone())
            .collect();
        let counts = (cache_inputs.len(), fixed_names.len());
        let decode = Part::load(dir, comp, counts, None)?;
        let prefill = export.prefill().map(|c| Part::load(dir, c, counts, Some((comp, &decode.runner)))).transpose()?;
        let slotted = comp.spec.positions == Positions::Slots;
        let ports = &decode.runner.inputs()[if slotted { 2 } else { 3 }..];
        let caches = ports[..counts.0].iter().map(|t| (t.dtype, t.bound.clone(), Buf::zeros(t.max_bytes()))).collect();
        let fixed = fixed_names
            .into_iter()
            .zip(&ports[counts.0..])
            .map(|(name, t)| Fixed {
                name,
                dtype: t.dtype,
                bound: t.bound.clone(),
                sizes: t.bound.clone(),
                buf: Buf::zeros(t.max_bytes()),
            })
            .collect();
        let logits_info = decode.runner.outputs()[decode.logits].clone();
        let vocab = *logits_info.bound.last().unwrap_or(&0) as usize;
        let most = prefill.as_ref().map_or(logits_info.max_bytes(), |p| p.runner.outputs()[p.logits].max_bytes());
        Ok(EtSession {
            decode,
            prefill,
            slotted,
            slots,
            caches,
            fixed,
            logits: Buf::zeros(most.max(logits_info.max_bytes())),
            vocab,
        })
    }

    /// Whether every call runs on the session's own buffers (no cache copies).
    pub fn zero_copy(&self) -> bool {
        self.decode.zero_copy && self.prefill.as_ref().is_none_or(|p| p.zero_copy)
    }

    /// The bytes of cache `i` (method input order) as the session holds them.
    pub fn cache(&self, i: usize) -> &[u8] {
        self.caches[i].2.bytes()
    }

    /// Where the decode method's updated-cache output `i` points after the last call.
    pub fn decode_cache_output(&self, i: usize) -> Result<*const u8, RunError> {
        Ok(self.decode.runner.output_view(i)?.0)
    }

    /// Each of `inputs` must be one of the method's inputs after the caches, with its dtype and
    /// a shape within its bound.
    fn bind_fixed(&mut self, inputs: &BTreeMap<String, Tensor>) -> Result<(), RunError> {
        let path = self.decode.runner.path().to_path_buf();
        for (name, t) in inputs {
            let Some(f) = self.fixed.iter_mut().find(|f| &f.name == name) else {
                return Err(err(&path, format!("the method has no input `{name}` fed once for every call")));
            };
            let shape: Vec<i64> = t.shape().iter().map(|&d| d as i64).collect();
            let fits = shape.len() == f.bound.len() && shape.iter().zip(&f.bound).all(|(d, b)| d <= b);
            if !fits || t.dtype() != f.dtype {
                return Err(err(
                    &path,
                    format!(
                        "input `{name}` is {}{shape:?}; the method takes {} within {:?}",
                        t.dtype(),
                        f.dtype.name(),
                        f.bound
                    ),
                ));
            }
            let bytes = t.to_le_bytes();
            f.buf.bytes_mut()[..bytes.len()].copy_from_slice(&bytes);
            f.sizes = shape;
        }
        Ok(())
    }

    /// One call of `prefill` (for the prompt, when present) or `decode`; the last row of the logits.
    fn call(&mut self, call: &Call) -> Result<Vec<f32>, RunError> {
        let (q, slots) = (call.tokens.len(), self.slots);
        let part = match (&mut self.prefill, call.role) {
            (Some(p), Role::Prefill) => p,
            _ => &mut self.decode,
        };
        let r = &mut part.runner;
        let inputs = call.inputs().map_err(|e| err(r.path(), e.to_string()))?;
        let ints = |name: &str| inputs[name].as_i64().map(<[i64]>::to_vec).map_err(|e| err(r.path(), e.to_string()));
        let mut ids = ints("input_ids")?;
        let mut positions = ints("position_ids")?;
        let mut mask = inputs["attention_mask"].to_le_bytes();
        // SAFETY: every bound buffer (locals and the session's) lives until `execute` returns
        // and is not moved meanwhile; the caches and logits are the session's own.
        unsafe {
            r.bind_input(0, ids.as_mut_ptr().cast(), DType::I64, &[1, q as i64])?;
            if self.slotted {
                // the cache slots are the positions
                r.bind_input(1, positions.as_mut_ptr().cast(), DType::I64, &[q as i64])?;
            } else {
                r.bind_input(1, mask.as_mut_ptr(), DType::Bool, &[1, 1, q as i64, slots as i64])?;
                r.bind_input(2, positions.as_mut_ptr().cast(), DType::I64, &[1, q as i64])?;
            }
            for (i, (dtype, sizes, buf)) in self.caches.iter_mut().enumerate() {
                r.bind_input(3 + i, buf.ptr(), *dtype, sizes)?;
                if part.zero_copy {
                    let n = buf.bytes().len();
                    r.bind_output(i, buf.ptr(), n)?;
                    r.bind_output(part.logits + 1 + i, buf.ptr(), n)?;
                }
            }
            let first_fixed = 3 + self.caches.len();
            for (j, f) in self.fixed.iter_mut().enumerate() {
                r.bind_input(first_fixed + j, f.buf.ptr(), f.dtype, &f.sizes)?;
            }
            if part.zero_copy {
                let n = self.logits.bytes().len();
                r.bind_output(part.logits, self.logits.ptr(), n)?;
            }
        }
        r.execute()?;
        if !part.zero_copy {
            // the updated caches back into the session's buffers
            for (i, (_, _, buf)) in self.caches.iter_mut().enumerate() {
                let (data, dtype, shape) = r.output_view(part.logits + 1 + i)?;
                let n = shape.iter().product::<usize>() * dtype.size();
                // SAFETY: the runtime's output holds `n` bytes until the next execute.
                let src = unsafe { std::slice::from_raw_parts(data, n) };
                buf.bytes_mut()[..n].copy_from_slice(src);
            }
        }
        let (data, dtype, shape) = r.output_view(part.logits)?;
        if dtype != DType::F32 || shape.last() != Some(&self.vocab) {
            return Err(err(
                r.path(),
                format!("logits are {}{shape:?}; expected f32 [.., {}]", dtype.name(), self.vocab),
            ));
        }
        let rows = shape.iter().product::<usize>() / self.vocab;
        // SAFETY: `rows * vocab` f32 at `data` (the session's buffer or the runtime's output).
        let all = unsafe { std::slice::from_raw_parts(data.cast::<f32>(), rows * self.vocab) };
        Ok(all[(rows - 1) * self.vocab..].to_vec())
    }
}

impl generation::Session for EtSession {
    const FORMAT: ExportFormat = ExportFormat::Executorch;

    fn open(export: &GenerationExport) -> hfexport_core::Result<EtSession> {
        Ok(EtSession::load(export)?)
    }

    fn runtime(&self) -> String {
        crate::runtime::runtime_label()
    }

    fn kind(&self) -> &'static str {
        match (self.slotted, self.zero_copy()) {
            (true, _) => "stateful",
            (false, true) => "zero-copy",
            (false, false) => "",
        }
    }

    fn reset(&mut self) -> hfexport_core::Result<()> {
        for (_, _, b) in &mut self.caches {
            b.bytes_mut().fill(0);
        }
        Ok(())
    }

    fn run(&mut self, call: &Call) -> hfexport_core::Result<Vec<f32>> {
        Ok(self.call(call)?)
    }

    fn set_fixed_inputs(&mut self, inputs: &BTreeMap<String, Tensor>) -> hfexport_core::Result<()> {
        Ok(self.bind_fixed(inputs)?)
    }
}
