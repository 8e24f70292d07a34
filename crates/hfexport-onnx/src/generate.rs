//! Greedy generation over a generation export's components in ONNX Runtime (cargo feature
//! `runtime`): with a static cache updated in place, or with a growing cache.
//!
//! A static-cache export (`hfexport export --for-generation --static-cache N
//! --multi-token-decode --dynamic`, docs/io-contracts.md, "Static cache") has the
//! component `decode`: inputs `input_ids` int64 [1, q], `attention_mask` bool [1, 1, q, slots],
//! `position_ids` int64 [1, q] and `past_key_values.<name>` per cache tensor; outputs `logits`
//! [1, q, vocab] and `present.<name>` per cache tensor. Without `--multi-token-decode` it also
//! has a `prefill` of that interface, for the prompt, bound to the same cache buffers.
//!
//! A growing-cache export (`--for-generation` without `--static-cache`) has `decode` alone
//! (`input_ids`, `attention_mask` int64 [1, past + q], `position_ids` and `past_key_values.<name>`
//! of the past length → `logits`, `present.<name>`), which takes the prompt over an empty past;
//! an encoder-decoder's (the merged decoder) takes `input_ids`, the fixed encoder states and
//! mask, and its caches.
//! Its cache changes shape every step, so nothing can be bound once: each call's
//! `present.<name>` values, owned by ONNX Runtime, are passed back as the next call's
//! `past_key_values.<name>` as they are (no host copy).
//!
//! Static cache: each cache buffer is allocated once, zeroed, with the shape of the graph's own input
//! metadata (its one symbolic axis set to the cache length, `cache_len` in `export.json`), and
//! bound through one [`IoBinding`] as both `past_key_values.<name>` and `present.<name>`: ONNX Runtime
//! writes the new keys/values into the very buffer it reads, so nothing is copied between
//! steps. Per call only `input_ids`, `attention_mask` (slot `j` visible to query `i` iff
//! `j <= pos + i`), `position_ids` are bound, and `logits` is bound to host memory.
//!
//! [`OrtSession`] is only these runtime calls; the loop around them (the prompt's calls, the
//! position, the static cache's bounds, the stop rules) is core's [`GenerationLoop`].
//!
//! `crates/hfexport/examples/generate_onnx.rs` is a whole program that exports a checkpoint for
//! generation and generates with it (a test runs it on the demo checkpoint).

use crate::runtime::{environment, to_ort};
use crate::{OnnxError, Result};
use hfexport_core::cache_ports;
use hfexport_core::generation::{self, Call, GenerationExport, GenerationLoop};
pub use hfexport_core::generation::{argmax, StopReason};
use hfexport_core::metadata::Component;
use hfexport_core::plan::{CacheMode, Role};
use hfexport_core::{DType, ExportFormat, Tensor};
use ort::memory::{Allocator, MemoryInfo};
use ort::session::{IoBinding, Session, SessionInputValue};
use ort::value::{DynTensor, DynTensorValueType, DynValue, TensorElementType, ValueRef, ValueType};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The component whose steps a generator runs.
pub const COMPONENT: &str = "decode";
/// The symbol of `export.json` whose maximum is the number of cache slots.
pub const CACHE_SYMBOL: &str = "cache_len";

fn err(msg: impl Into<String>) -> OnnxError {
    OnnxError::Runtime(msg.into())
}

/// One cache tensor: a single buffer bound as `past_key_values.<name>` and `present.<name>` of every graph.
#[derive(Debug)]
struct CacheBuffer {
    /// `<name>` (without the `past_key_values.` / `present.` prefix).
    name: String,
    input: String,
    output: String,
    value: DynTensor,
    /// A recurrent layer's state (no slot axis): the whole tensor is the past, so a new prompt
    /// starts from zeros.
    recurrent: bool,
}

impl CacheBuffer {
    /// Zeroes the buffer in place (it stays bound).
    fn zero(&mut self) {
        let n: i64 = self.value.shape().iter().product();
        let bytes = self.value.data_type().byte_size(n as usize).unwrap_or(0);
        let ptr = self.value.data_ptr_mut();
        if !ptr.is_null() {
            // SAFETY: a host tensor of `bytes` bytes allocated by ONNX Runtime's CPU allocator,
            // owned by this buffer; no run is in progress while `&mut self` is held.
            unsafe { ptr.cast::<u8>().write_bytes(0, bytes) };
        }
    }
}

/// One loaded graph with its IoBinding (the caches bound once, for good).
#[derive(Debug)]
struct BoundGraph {
    session: Session,
    binding: IoBinding,
    path: PathBuf,
    head: Head,
}

/// A cache input of a graph: `past_key_values.<name>`, its element type and shape (-1 = symbolic).
type CacheSpec = (String, TensorElementType, Vec<i64>);

/// The per-call inputs every static-cache decode graph takes; a growing-cache one takes
/// `input_ids` and those of the others it declares (an encoder-decoder's merged decode has no
/// `attention_mask` or `position_ids`).
const STATIC_CALL_INPUTS: [&str; 3] = ["input_ids", "attention_mask", "position_ids"];

/// The cache inputs of a `kind` (static- or growing-cache) decode graph, each with its
/// `present.<name>` output, after checking the per-call inputs `needs` are there.
fn decode_caches(session: &Session, here: &str, kind: &str, needs: &[&str]) -> Result<Vec<CacheSpec>> {
    for &want in needs {
        if !session.inputs().iter().any(|i| i.name() == want) {
            return Err(err(format!("{here}: the graph has no input `{want}`; is this a {kind} decode graph?")));
        }
    }
    let mut caches = vec![];
    for input in session.inputs() {
        let Some(name) = cache_ports::cache_of_past(input.name()) else { continue };
        let ValueType::Tensor { ty, shape, .. } = input.dtype() else {
            return Err(err(format!("{here}: cache input `{}` is not a tensor", input.name())));
        };
        let output = cache_ports::present(name);
        if !session.outputs().iter().any(|o| o.name() == output) {
            return Err(err(format!("{here}: cache input `{}` has no output `{output}`", input.name())));
        }
        caches.push((name.to_string(), *ty, shape.to_vec()));
    }
    if caches.is_empty() {
        return Err(err(format!(
            "{here}: the graph has no `past_key_values.<name>` cache inputs; is this a {kind} decode graph?"
        )));
    }
    Ok(caches)
}

impl BoundGraph {
    /// Loads `<dir>/<file>` of `component` and checks the static-cache decode interface;
    /// returns it with its cache inputs.
    fn load(
        env: &ort::environment::Environment,
        dir: &Path,
        comp: &Component,
    ) -> Result<(Session, PathBuf, Vec<CacheSpec>)> {
        let (session, path) = open_component(env, dir, comp)?;
        let here = path.display().to_string();
        let caches = decode_caches(&session, &here, "static-cache", &STATIC_CALL_INPUTS)?;
        for (name, _, shape) in &caches {
            let symbolic = shape.iter().filter(|&&d| d < 0).count();
            if symbolic > 1 {
                return Err(err(format!(
                    "{here}: cache input `{}` has shape {shape:?} with {symbolic} symbolic axes; a static cache has \
                     at most one (the cache length; none for a recurrent state)",
                    cache_ports::past(name)
                )));
            }
        }
        Ok((session, path, caches))
    }

    /// Binds every cache buffer as both input and output of `session`.
    fn bind(session: Session, path: PathBuf, caches: &mut [CacheBuffer]) -> Result<BoundGraph> {
        let here = path.display().to_string();
        let head = Head::of(&session, &here)?;
        let mut binding =
            session.create_binding().map_err(|e| err(format!("{here}: cannot create an IoBinding: {e}")))?;
        for c in caches {
            // The tensor was made by `DynTensor::new` (owned by ONNX Runtime's allocator): ort binds
            // it as it is, no clone, and accepts it as a pre-allocated output.
            binding
                .bind_input(c.input.as_str(), &c.value)
                .map_err(|e| err(format!("{here}: cannot bind `{}`: {e}", c.input)))?;
            binding
                .bind_output(c.output.as_str(), &mut c.value)
                .map_err(|e| err(format!("{here}: cannot bind `{}`: {e}", c.output)))?;
        }
        Ok(BoundGraph { session, binding, path, head })
    }
}

/// ONNX Runtime's side of [`GenerationLoop`] over an export folder's `decode` component (and
/// `prefill`, when the export has one) — see the module docs.
#[derive(Debug)]
pub struct OrtSession {
    engine: Engine,
}

/// Greedy generation in ONNX Runtime.
pub type Generator = GenerationLoop<OrtSession>;

/// How the cache lives between calls.
#[derive(Debug)]
enum Engine {
    /// Buffers bound once as input and output of every graph, updated in place.
    Static(Box<StaticCache>),
    /// Each call's `present.<name>` values become the next call's `past_key_values.<name>`.
    Growing(Box<GrowingCache>),
}

impl OrtSession {
    /// The `decode.onnx` this session runs.
    pub fn model_path(&self) -> &Path {
        match &self.engine {
            Engine::Static(s) => &s.decode.path,
            Engine::Growing(g) => &g.path,
        }
    }

    /// The `prefill.onnx` the prompt goes through, when the export has one.
    pub fn prefill_path(&self) -> Option<&Path> {
        match &self.engine {
            Engine::Static(s) => s.prefill.as_ref().map(|p| p.path.as_path()),
            Engine::Growing(_) => None,
        }
    }

    /// The vocabulary size, when the graph's `logits` output says it.
    pub fn vocab_size(&self) -> Option<usize> {
        self.head().vocab
    }

    /// Cache names (`0.key`, …), without the `past_key_values.`/`present.` prefix.
    pub fn cache_names(&self) -> Vec<&str> {
        match &self.engine {
            Engine::Static(s) => s.caches.iter().map(|c| c.name.as_str()).collect(),
            Engine::Growing(g) => g.caches.iter().map(|(n, _, _)| n.as_str()).collect(),
        }
    }

    /// The current contents of a cache tensor as f32: for a static cache, read from the buffer
    /// bound to ONNX Runtime itself (what the next step reads). The only copy ever made of a
    /// cache, and only when asked for. A growing cache before its first call is an error.
    pub fn cache(&self, name: &str) -> Result<Tensor> {
        let value = self.cache_value(name)?;
        let shape: Vec<usize> = value.shape().iter().map(|&d| d as usize).collect();
        let data: Vec<f32> = match value.data_type() {
            TensorElementType::Float32 => value.try_extract_tensor::<f32>().map(|(_, d)| d.to_vec()),
            TensorElementType::Float16 => {
                value.try_extract_tensor::<half::f16>().map(|(_, d)| d.iter().map(|x| x.to_f32()).collect())
            }
            TensorElementType::Bfloat16 => {
                value.try_extract_tensor::<half::bf16>().map(|(_, d)| d.iter().map(|x| x.to_f32()).collect())
            }
            other => return Err(err(format!("cache `{name}` is {other:?}, not a float tensor"))),
        }
        .map_err(|e| err(format!("cache `{name}`: {e}")))?;
        Ok(Tensor::float(DType::F32, shape, data)?)
    }

    /// Host address of a cache buffer. For a static cache it stays the same for the
    /// session's life (the buffer is never reallocated or swapped); a growing cache gets new
    /// buffers every call.
    pub fn cache_address(&self, name: &str) -> Option<usize> {
        self.cache_value(name).ok().map(|v| v.data_ptr() as usize)
    }

    /// The graph whose `logits` the loop reads (its vocabulary size).
    fn head(&self) -> &Head {
        match &self.engine {
            Engine::Static(s) => &s.decode.head,
            Engine::Growing(g) => &g.head,
        }
    }

    fn cache_value(&self, name: &str) -> Result<ValueRef<'_, DynTensorValueType>> {
        let found = match &self.engine {
            Engine::Static(s) => s.caches.iter().find(|c| c.name == name).map(|c| Some(c.value.view())),
            Engine::Growing(g) => g
                .caches
                .iter()
                .position(|(n, _, _)| n == name)
                .map(|i| g.values.get(i).and_then(|v| v.view().downcast::<DynTensorValueType>().ok())),
        };
        match found {
            Some(Some(v)) => Ok(v),
            Some(None) => Err(err(format!("cache `{name}` holds nothing yet: run the prompt first"))),
            None => Err(err(format!(
                "no cache `{name}` in {} (caches: {})",
                self.model_path().display(),
                self.cache_names().join(", ")
            ))),
        }
    }

    /// Loads a static-cache export (`decode`, and `prefill` when listed), whose cache buffers
    /// are allocated once and bound, or a growing-cache export (`decode`).
    fn load(export: &GenerationExport) -> Result<OrtSession> {
        let (dir, decode) = (export.dir.as_path(), export.decode());
        let env = environment(&[dir])?;
        let engine = match (decode.spec.cache, export.slots(), export.prefill()) {
            (CacheMode::StaticInPlace, Some(slots), prefill) => {
                Engine::Static(Box::new(StaticCache::load(&env, dir, decode, prefill, slots)?))
            }
            (CacheMode::Growing, None, _) => Engine::Growing(Box::new(GrowingCache::load(&env, dir, decode)?)),
            (cache, _, _) => {
                return Err(err(format!(
                    "{}: `{}` has cache {cache:?} with no `{CACHE_SYMBOL}` range; generation needs a static or growing \
                     cache",
                    dir.display(),
                    decode.name()
                )))
            }
        };
        Ok(OrtSession { engine })
    }

    fn run_call(&mut self, call: &Call) -> Result<Vec<f32>> {
        check_vocab(self.head().vocab, call.tokens, call.pos)?;
        match &mut self.engine {
            Engine::Static(s) => s.run(call),
            Engine::Growing(g) => g.run(call),
        }
    }
}

impl generation::Session for OrtSession {
    const FORMAT: ExportFormat = ExportFormat::Onnx;

    fn open(export: &GenerationExport) -> hfexport_core::Result<OrtSession> {
        Ok(OrtSession::load(export)?)
    }

    fn runtime(&self) -> String {
        crate::runtime::runtime_label()
    }

    /// Stale slots of a static cache need no clearing: the mask hides every slot past the
    /// current position, and each is overwritten before it becomes visible. A recurrent state
    /// has no slots: it is zeroed.
    fn reset(&mut self) -> hfexport_core::Result<()> {
        match &mut self.engine {
            Engine::Growing(g) => g.reset()?,
            Engine::Static(s) => s.caches.iter_mut().filter(|c| c.recurrent).for_each(CacheBuffer::zero),
        }
        Ok(())
    }

    fn run(&mut self, call: &Call) -> hfexport_core::Result<Vec<f32>> {
        Ok(self.run_call(call)?)
    }

    fn set_fixed_inputs(&mut self, inputs: &BTreeMap<String, Tensor>) -> hfexport_core::Result<()> {
        match &mut self.engine {
            Engine::Static(s) => Ok(s.bind_fixed(inputs)?),
            Engine::Growing(g) => Ok(g.set_fixed(inputs)?),
        }
    }
}

/// What the loop needs to know of a graph's `logits` output.
#[derive(Debug, Clone, Copy)]
struct Head {
    dtype: TensorElementType,
    vocab: Option<usize>,
}

impl Head {
    fn of(session: &Session, here: &str) -> Result<Head> {
        match session.outputs().iter().find(|o| o.name() == "logits").map(|o| o.dtype()) {
            Some(ValueType::Tensor { ty, shape, .. }) => {
                Ok(Head { dtype: *ty, vocab: shape.last().filter(|&&v| v > 0).map(|&v| v as usize) })
            }
            Some(other) => Err(err(format!("{here}: output `logits` is not a tensor ({other:?})"))),
            None => Err(err(format!("{here}: the graph has no output `logits`"))),
        }
    }
}

/// A token id outside the vocabulary is an error naming it (ONNX Runtime would fail in
/// `Gather` with a message about indices).
fn check_vocab(vocab: Option<usize>, tokens: &[i64], pos: usize) -> Result<()> {
    if let Some(v) = vocab {
        if let Some((i, t)) = tokens.iter().enumerate().find(|(_, &t)| t < 0 || t as usize >= v) {
            return Err(err(format!(
                "token id {t} (at position {}) is outside the vocabulary of {v} tokens (ids 0..{v})",
                pos + i
            )));
        }
    }
    Ok(())
}

/// Opens `<dir>/<component's .onnx file>` in ONNX Runtime; errors name the file.
fn open_component(env: &ort::environment::Environment, dir: &Path, comp: &Component) -> Result<(Session, PathBuf)> {
    let file = comp.files.iter().find(|f| f.ends_with(".onnx")).ok_or_else(|| {
        err(format!(
            "{}: component `{}` lists no .onnx file (files: {})",
            dir.display(),
            comp.name(),
            comp.files.join(", ")
        ))
    })?;
    let path = dir.join(file);
    if !path.is_file() {
        return Err(err(format!("{}: no such ONNX model file", path.display())));
    }
    let session = Session::builder(env)
        .and_then(|mut b| b.commit_from_file(&path))
        .map_err(|e| err(format!("{}: ONNX Runtime cannot load this model: {e}", path.display())))?;
    Ok((session, path))
}

/// A static cache: buffers bound once to every graph, and the graphs.
#[derive(Debug)]
struct StaticCache {
    decode: BoundGraph,
    /// The prompt's graph of a static cache export with a one-token `decode`.
    prefill: Option<BoundGraph>,
    caches: Vec<CacheBuffer>,
    /// Inputs bound once and fed to every call (an encoder-decoder's cross-attention keys and
    /// values), kept alive with the bindings.
    fixed: Vec<DynValue>,
}

impl StaticCache {
    fn load(
        env: &ort::environment::Environment,
        dir: &Path,
        decode: &Component,
        prefill: Option<&Component>,
        slots: usize,
    ) -> Result<StaticCache> {
        let (decode, decode_path, specs) = BoundGraph::load(env, dir, decode)?;
        let prefill = match prefill {
            Some(c) => {
                let (s, path, theirs) = BoundGraph::load(env, dir, c)?;
                let same = theirs.len() == specs.len() && theirs.iter().all(|t| specs.contains(t));
                if !same {
                    return Err(err(format!(
                        "{}: the caches of `prefill` and `{COMPONENT}` differ in name, type or shape; one buffer per \
                         cache cannot serve both",
                        dir.display()
                    )));
                }
                Some((s, path))
            }
            None => None,
        };
        let allocator = Allocator::default();
        let mut caches = vec![];
        for (name, ty, shape) in specs {
            let recurrent = shape.iter().all(|&d| d >= 0);
            let shape: Vec<i64> = shape.iter().map(|&d| if d < 0 { slots as i64 } else { d }).collect();
            let value = DynTensor::new(&allocator, ty, shape.clone()).map_err(|e| {
                err(format!("{}: cannot allocate cache `{name}` {ty:?}{shape:?}: {e}", decode_path.display()))
            })?;
            let (input, output) = (cache_ports::past(&name), cache_ports::present(&name));
            let mut buffer = CacheBuffer { input, output, name, value, recurrent };
            // Zeroed once, here (ort zeroes new host tensors too; this does not rely on it).
            buffer.zero();
            caches.push(buffer);
        }
        let decode = BoundGraph::bind(decode, decode_path, &mut caches)?;
        let prefill = match prefill {
            Some((s, path)) => Some(BoundGraph::bind(s, path, &mut caches)?),
            None => None,
        };
        Ok(StaticCache { decode, prefill, caches, fixed: vec![] })
    }

    /// Binds `inputs` to every graph for all later calls.
    fn bind_fixed(&mut self, inputs: &BTreeMap<String, Tensor>) -> Result<()> {
        self.fixed.clear();
        for (name, t) in inputs {
            let value = to_ort(t).map_err(|e| err(format!("input `{name}`: {e}")))?;
            for g in std::iter::once(&mut self.decode).chain(self.prefill.as_mut()) {
                if !g.session.inputs().iter().any(|i| i.name() == name) {
                    return Err(err(format!("{}: the graph has no input `{name}`", g.path.display())));
                }
                g.binding
                    .bind_input(name.as_str(), &value)
                    .map_err(|e| err(format!("{}: cannot bind `{name}`: {e}", g.path.display())))?;
            }
            self.fixed.push(value);
        }
        Ok(())
    }

    /// One call of `prefill` (for the prompt, when present) or `decode`; returns the last row
    /// of the logits.
    fn run(&mut self, call: &Call) -> Result<Vec<f32>> {
        let g = match (&mut self.prefill, call.role) {
            (Some(p), Role::Prefill) => p,
            _ => &mut self.decode,
        };
        let here = g.path.display().to_string();
        let fail = |what: &str, e: ort::Error| err(format!("{here}: {what}: {e}"));
        // Owned tensors are bound as they are (ort clones only tensors made from borrowed data).
        let inputs = ort_values(call)?;
        for (name, v) in &inputs {
            g.binding.bind_input(name.as_str(), v).map_err(|e| fail(&format!("binding {name}"), e))?;
        }
        // Rebound every call to a fresh host allocation: its shape changes with q, and ONNX
        // Runtime would otherwise try to reuse the previous call's logits buffer.
        g.binding.bind_output_to_device("logits", &MemoryInfo::default()).map_err(|e| fail("binding logits", e))?;

        let outputs = g.session.run_binding(&g.binding).map_err(|e| fail("ONNX Runtime failed", e))?;
        // In place: every cache output is the bound buffer itself, not a new allocation.
        for c in &self.caches {
            let out = outputs.get(&c.output).ok_or_else(|| err(format!("{here}: no output `{}`", c.output)))?;
            let same = out
                .view()
                .downcast::<DynTensorValueType>()
                .map(|t| t.data_ptr() == c.value.data_ptr())
                .unwrap_or(false);
            if !same {
                return Err(err(format!(
                    "{here}: ONNX Runtime returned `{}` in a new buffer instead of updating the bound cache in place",
                    c.output
                )));
            }
        }
        let logits = outputs.get("logits").ok_or_else(|| err(format!("{here}: no output `logits`")))?;
        let row = last_row(logits, g.head.dtype).map_err(|e| err(format!("{here}: output `logits`: {e}")))?;
        drop(outputs);
        Ok(row)
    }
}

/// A growing cache: every `decode` call takes the previous call's `present.<name>` values as its
/// `past_key_values.<name>` (values owned by ONNX Runtime, passed back as they are: no host
/// copy) and returns them one call longer; the prompt goes in over an empty past.
#[derive(Debug)]
struct GrowingCache {
    session: Session,
    path: PathBuf,
    head: Head,
    /// The cache inputs, in the order of `decode`'s inputs.
    caches: Vec<CacheSpec>,
    /// The latest `present.<name>` per cache (the empty past after a reset).
    values: Vec<DynValue>,
    /// Inputs fed unchanged to every call (an encoder-decoder's encoder states and mask).
    fixed: Vec<(String, DynValue)>,
}

impl GrowingCache {
    fn load(env: &ort::environment::Environment, dir: &Path, decode: &Component) -> Result<GrowingCache> {
        let (session, path) = open_component(env, dir, decode)?;
        let here = path.display().to_string();
        let head = Head::of(&session, &here)?;
        let caches = decode_caches(&session, &here, "growing-cache", &["input_ids"])?;
        let mut cache = GrowingCache { session, path, head, caches, values: vec![], fixed: vec![] };
        cache.reset()?;
        Ok(cache)
    }

    /// The empty past of one sequence: batch 1, no positions.
    fn reset(&mut self) -> Result<()> {
        let allocator = Allocator::default();
        let here = self.path.display();
        self.values = self
            .caches
            .iter()
            .map(|(name, ty, shape)| {
                let dims: Vec<_> = shape.iter().map(|&d| usize::try_from(d).ok()).collect();
                let shape: Vec<i64> = generation::empty_past(&dims).into_iter().map(|d| d as i64).collect();
                DynTensor::new(&allocator, *ty, shape.clone())
                    .map(DynValue::from)
                    .map_err(|e| err(format!("{here}: cannot allocate the empty past `{name}` {ty:?}{shape:?}: {e}")))
            })
            .collect::<Result<_>>()?;
        Ok(())
    }

    /// Feeds `inputs` to every later call; each must be an input of the graph.
    fn set_fixed(&mut self, inputs: &BTreeMap<String, Tensor>) -> Result<()> {
        self.fixed = inputs
            .iter()
            .map(|(name, t)| {
                if !self.session.inputs().iter().any(|i| i.name() == name) {
                    return Err(err(format!("{}: the graph has no input `{name}`", self.path.display())));
                }
                Ok((name.clone(), to_ort(t).map_err(|e| err(format!("input `{name}`: {e}")))?))
            })
            .collect::<Result<_>>()?;
        Ok(())
    }

    /// Runs `decode` on `call` after the caches so far (positions `0..call.pos`); returns the
    /// last logits row and keeps the new caches.
    fn run(&mut self, call: &Call) -> Result<Vec<f32>> {
        let here = self.path.display().to_string();
        let fail = |what: &str, e: ort::Error| err(format!("{here}: {what}: {e}"));
        let takes = |name: &str| self.session.inputs().iter().any(|i| i.name() == name);
        let mut inputs: Vec<(Cow<str>, SessionInputValue)> = ort_values(call)?
            .into_iter()
            .filter(|(name, _)| takes(name))
            .map(|(name, v)| (name.into(), v.into()))
            .collect();
        inputs.extend(self.fixed.iter().map(|(name, v)| (name.as_str().into(), v.into())));
        for ((n, _, _), v) in self.caches.iter().zip(&self.values) {
            inputs.push((cache_ports::past(n).into(), v.into()));
        }
        let mut outputs = self.session.run(inputs).map_err(|e| fail("ONNX Runtime failed", e))?;
        let logits = outputs.get("logits").ok_or_else(|| err(format!("{here}: no output `logits`")))?;
        let row = last_row(logits, self.head.dtype).map_err(|e| err(format!("{here}: output `logits`: {e}")))?;
        self.values = self
            .caches
            .iter()
            .map(|(n, _, _)| {
                outputs
                    .remove(cache_ports::present(n).as_str())
                    .ok_or_else(|| err(format!("{here}: no output `present.{n}`")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(row)
    }
}

/// The per-call inputs of `call` (`input_ids`, `attention_mask`, `position_ids`) as ONNX
/// Runtime values.
fn ort_values(call: &Call) -> Result<Vec<(String, DynValue)>> {
    let mut values = vec![];
    for (name, t) in call.inputs()? {
        let v = to_ort(&t).map_err(|e| err(format!("input `{name}`: {e}")))?;
        values.push((name, v));
    }
    Ok(values)
}

/// The last row of logits [1, q, vocab], as f32.
fn last_row(v: &DynValue, ty: TensorElementType) -> std::result::Result<Vec<f32>, String> {
    fn row<T: ort::value::PrimitiveTensorElementType + Copy>(
        v: &DynValue,
        f: impl Fn(T) -> f32,
    ) -> std::result::Result<Vec<f32>, String> {
        let (shape, data) = v.try_extract_tensor::<T>().map_err(|e| e.to_string())?;
        let vocab = *shape.last().ok_or("is a scalar")? as usize;
        if shape.len() != 3 || vocab == 0 || data.len() < vocab {
            return Err(format!("has shape {:?}, expected [1, q, vocab]", &shape[..]));
        }
        Ok(data[data.len() - vocab..].iter().map(|&x| f(x)).collect())
    }
    match ty {
        TensorElementType::Float32 => row::<f32>(v, |x| x),
        TensorElementType::Float16 => row::<half::f16>(v, |x| x.to_f32()),
        TensorElementType::Bfloat16 => row::<half::bf16>(v, |x| x.to_f32()),
        other => Err(format!("is {other:?}, not a float tensor")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_without_export_json_is_named() {
        let e = Generator::load("/nonexistent/export").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/export"), "{e}");
    }
}
