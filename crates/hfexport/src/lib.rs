//! The facade a product depends on: `hfexport = { default-features = false, features = ["onnx"] }`.
//!
//! [`AutoHfExporter`] picks the exporter from an [`ExportConfig`] (as `AutoHfExporter` does
//! in `transformers.exporters`); each backend sits behind a cargo feature of its name, and a
//! format whose feature is off is an error that names the feature. An export builds the graph
//! from the checkpoint, applies the config's shapes, writes into a staging folder, adds
//! `export.json` and the config/tokenizer files, and moves the folder into place only then.

pub use hfexport_core as core;
#[cfg(feature = "dynamo")]
pub use hfexport_dynamo as dynamo;
#[cfg(feature = "executorch")]
pub use hfexport_executorch as executorch;
pub use hfexport_models as models;
#[cfg(feature = "onnx")]
pub use hfexport_onnx as onnx;
#[cfg(feature = "openvino")]
pub use hfexport_openvino as openvino;

pub use hfexport_core::{AutoExportConfig, DType, Evaluator, ExportConfig, ExportFormat, Graph, Tensor};
pub use hfexport_models::{build, BuildOptions, Checkpoint, ModelConfig, Task};

use hfexport_core::artifact::StagedDir;
use hfexport_core::metadata::{self, Component, ExportMetadata, Source, Verification};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Model(#[from] hfexport_models::ModelError),
    #[error(transparent)]
    Core(#[from] hfexport_core::Error),
    #[cfg(feature = "onnx")]
    #[error(transparent)]
    Onnx(#[from] hfexport_onnx::OnnxError),
    #[cfg(feature = "openvino")]
    #[error(transparent)]
    Openvino(#[from] hfexport_openvino::OvError),
    #[cfg(feature = "dynamo")]
    #[error(transparent)]
    Dynamo(#[from] hfexport_dynamo::DynamoError),
    #[cfg(feature = "executorch")]
    #[error(transparent)]
    Executorch(#[from] hfexport_executorch::EtError),
    #[cfg(feature = "executorch-runtime")]
    #[error(transparent)]
    ExecutorchRun(#[from] hfexport_executorch::runtime::RunError),
    #[cfg(feature = "dynamo-runtime")]
    #[error(transparent)]
    Libtorch(#[from] hfexport_dynamo::runner::RunError),
    #[error("{0}")]
    Unsupported(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `--verify`: the artifact's runtime and the reference evaluator disagree beyond `atol`.
    #[error(
        "verification failed: `{tensor}` at {index:?}: {runtime} gives {got}, the reference evaluator {expected} \
         (|diff| {diff:e} > atol {atol:e})"
    )]
    VerificationMismatch {
        runtime: String,
        tensor: String,
        index: Vec<usize>,
        got: f32,
        expected: f32,
        diff: f32,
        atol: f32,
    },
    /// `--verify` could not compare (an output missing or of another shape, inputs it cannot make).
    #[error("verification in {runtime} failed: {msg}")]
    VerificationFailed { runtime: String, msg: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Files copied from the checkpoint into every export, when present.
pub const COPIED_FILES: [&str; 10] = [
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
];

/// Sizes of symbolic dims in a static (non-dynamic) export: the sample shape.
pub fn sample_sizes() -> BTreeMap<String, i64> {
    BTreeMap::from([("batch".to_string(), 1), ("sequence".to_string(), 16)])
}

/// One export job.
#[derive(Debug, Clone)]
pub struct ExportRequest {
    pub model: PathBuf,
    pub output: PathBuf,
    pub task: Task,
    /// Float dtype of the exported weights and activations.
    pub dtype: DType,
    /// Replace a non-empty output folder.
    pub force: bool,
    /// Export the components of a generation loop instead of the forward graph.
    pub generation: Option<Generation>,
}

/// `export_for_generation` options (the Python `cache_implementation="static"`,
/// `max_cache_len`, `multi_token_decode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation {
    pub static_cache: Option<usize>,
    pub multi_token_decode: bool,
}

/// Progress of a long export, for a command line or a log.
pub type Progress<'a> = &'a mut dyn FnMut(&str);

/// Picks the exporter for a config.
#[derive(Debug, Clone)]
pub struct AutoHfExporter {
    config: ExportConfig,
    /// Run the artifact in its runtime against the reference evaluator before commit.
    verify: bool,
}

impl AutoHfExporter {
    pub fn from_config(config: ExportConfig) -> Result<AutoHfExporter> {
        match config.format() {
            ExportFormat::Onnx if cfg!(feature = "onnx") => {}
            ExportFormat::Onnx => {
                return Err(Error::Unsupported("the onnx exporter needs the cargo feature `onnx` of hfexport".into()))
            }
            ExportFormat::Openvino if cfg!(feature = "openvino") => {}
            ExportFormat::Dynamo if cfg!(feature = "dynamo") => {}
            ExportFormat::Dynamo => {
                return Err(Error::Unsupported(
                    "the dynamo exporter needs the cargo feature `dynamo` of hfexport".into(),
                ))
            }
            ExportFormat::Openvino => {
                return Err(Error::Unsupported(
                    "the openvino exporter needs the cargo feature `openvino` of hfexport".into(),
                ))
            }
            ExportFormat::Executorch if cfg!(feature = "executorch") => {}
            ExportFormat::Executorch => {
                return Err(Error::Unsupported(
                    "the executorch exporter needs the cargo feature `executorch` of hfexport".into(),
                ))
            }
        }
        Ok(AutoHfExporter { config, verify: false })
    }

    pub fn config(&self) -> &ExportConfig {
        &self.config
    }

    /// Runs the export; the output folder appears only if everything succeeded.
    pub fn export(&self, req: &ExportRequest, progress: Progress) -> Result<ExportMetadata> {
        self.check_verify_available()?;
        let ckpt = Checkpoint::open(&req.model)?;
        let opts = BuildOptions { dtype: req.dtype, ..Default::default() };
        let mut components = match &req.generation {
            None => vec![("model".to_string(), build(&ckpt.config, &ckpt, req.task, &opts)?)],
            Some(gen) => {
                if !self.config.common().dynamic {
                    return Err(Error::Unsupported(
                        "a generation export needs --dynamic (query and cache lengths stay symbolic)".into(),
                    ));
                }
                if gen.static_cache == Some(0) {
                    return Err(Error::Unsupported("--static-cache must be at least 1".into()));
                }
                let mut components = hfexport_models::build_generation(
                    &ckpt.config,
                    &ckpt,
                    &opts,
                    gen.static_cache,
                    gen.multi_token_decode,
                )?;
                // A stateful model keeps its cache inside the infer request, which a separate
                // prefill model cannot hand over: `decode` serves the prompt too.
                if matches!(&self.config, ExportConfig::Openvino(c) if c.stateful) {
                    components.retain(|(name, _)| name != "prefill");
                }
                components
            }
        };
        let mut runtime_checks = vec![];
        for (_, graph) in &mut components {
            runtime_checks.extend(hfexport_core::dynamic::apply(graph, self.config.common(), &sample_sizes())?);
        }
        let staged = StagedDir::create(&req.output, req.force)?;
        progress(&format!("building {} for {}", self.config.format().as_str(), ckpt.config.architecture));
        let mut written = vec![];
        let (mut patches_applied, mut runtime_pins) = (vec![], BTreeMap::new());
        for (name, graph) in &components {
            let (component, patches, pins) = self.write(name, graph, &ckpt, staged.path(), progress)?;
            written.push(component);
            patches_applied.extend(patches);
            runtime_pins = pins;
        }
        copy_side_files(&req.model, staged.path())?;
        let verification = match self.verify {
            true => Some(self.verify_components(&components, &written, &ckpt, staged.path(), req.dtype, progress)?),
            false => None,
        };
        let mut symbols = BTreeMap::new();
        for (_, graph) in &components {
            symbols.extend(metadata::symbols_of(graph));
        }
        let meta = ExportMetadata {
            schema_version: metadata::SCHEMA_VERSION,
            hfexport_version: env!("CARGO_PKG_VERSION").to_string(),
            source: Source {
                architecture: ckpt.config.architecture.clone(),
                model_type: ckpt.config.model_type.clone(),
                checkpoint: req.model.display().to_string(),
            },
            format: self.config.format().as_str().to_string(),
            task: "causal-lm".to_string(),
            dtype: match req.dtype {
                DType::F16 => "float16",
                DType::BF16 => "bfloat16",
                _ => "float32",
            }
            .to_string(),
            config: self.config.to_dict(),
            symbols,
            components: written,
            patches_applied,
            runtime_checks,
            runtime_pins,
            verification,
        };
        meta.write(staged.path())?;
        staged.commit()?;
        Ok(meta)
    }

    #[allow(unused_variables)]
    fn write(
        &self,
        name: &str,
        graph: &Graph,
        ckpt: &Checkpoint,
        dir: &Path,
        progress: Progress,
    ) -> Result<(Component, Vec<String>, BTreeMap<String, String>)> {
        match &self.config {
            #[cfg(feature = "onnx")]
            ExportConfig::Onnx(cfg) => {
                if cfg.ort_fusions.is_some() {
                    return Err(Error::Unsupported("ort_fusions is not implemented yet".into()));
                }
                let mut step = |i: usize, n: usize, name: &str| {
                    if i.is_multiple_of(16) || i + 1 == n {
                        progress(&format!("weights {}/{n}: {name}", i + 1));
                    }
                };
                let w = hfexport_onnx::export::export_component(graph, ckpt, dir, name, cfg, &mut step)?;
                Ok((
                    Component::from_graph(name, graph, w.files),
                    w.patches_applied,
                    hfexport_onnx::export::runtime_pins(),
                ))
            }
            #[cfg(feature = "dynamo")]
            ExportConfig::Dynamo(cfg) => {
                let mut step = |i: usize, n: usize, name: &str| {
                    if i.is_multiple_of(16) || i + 1 == n {
                        progress(&format!("weights {}/{n}: {name}", i + 1));
                    }
                };
                let w = hfexport_dynamo::export::export_component(graph, ckpt, dir, name, cfg, &mut step)?;
                Ok((
                    Component::from_graph(name, graph, w.files),
                    w.patches_applied,
                    hfexport_dynamo::export::runtime_pins(),
                ))
            }
            #[cfg(feature = "openvino")]
            ExportConfig::Openvino(cfg) => {
                let mut step = |i: usize, n: usize, name: &str| {
                    if i.is_multiple_of(16) || i + 1 == n {
                        progress(&format!("weights {}/{n}: {name}", i + 1));
                    }
                };
                let w = hfexport_openvino::export::export_component(graph, ckpt, dir, name, cfg, &mut step)?;
                let component = Component::from_graph(name, graph, w.files);
                let component = if cfg.stateful { component.fold_cache_pairs_into_states() } else { component };
                Ok((component, w.patches_applied, hfexport_openvino::export::runtime_pins()))
            }
            #[cfg(feature = "executorch")]
            ExportConfig::Executorch(cfg) => {
                let mut step = |i: usize, n: usize, name: &str| {
                    if i.is_multiple_of(16) || i + 1 == n {
                        progress(&format!("weights {}/{n}: {name}", i + 1));
                    }
                };
                let w = hfexport_executorch::export::export_component(graph, ckpt, dir, name, cfg, &mut step)?;
                progress(&format!("{name}.pte: memory plan of {:.1} MiB", w.arena as f64 / (1u64 << 20) as f64));
                Ok((
                    Component::from_graph(name, graph, w.files),
                    w.patches_applied,
                    hfexport_executorch::export::runtime_pins(),
                ))
            }
            #[allow(unreachable_patterns)]
            other => {
                Err(Error::Unsupported(format!("the {} exporter is not implemented yet", other.format().as_str())))
            }
        }
    }
}

fn copy_side_files(model: &Path, dir: &Path) -> Result<()> {
    for name in COPIED_FILES {
        let src = model.join(name);
        if src.is_file() {
            std::fs::copy(&src, dir.join(name)).map_err(|source| Error::Io { path: src.clone(), source })?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Verification in the artifact's runtime (`hfexport export --verify`, `verify_export`).
// The artifact runs in its real runtime (ONNX Runtime: feature `onnx-runtime`) and the graph
// it was written from runs in the reference evaluator, on sample inputs fitted to the graph's
// shapes; every output must agree within `verification_atol` at non-padded positions.
// ---------------------------------------------------------------------------------------------

/// Absolute tolerance on logits of an export in `dtype`: 1e-4 for float32, 5e-2 for float16,
/// 2e-1 for bfloat16.
///
/// Both sides compute in the reduced dtype, each rounding in its own order, so they differ by
/// up to twice what either differs from float32. Measured on the committed fixtures (logits
/// of std ~1.2): ONNX Runtime's f16 and the reference evaluator's f16 are each up to 1.8e-2
/// from the f32 logits, in opposite directions, and up to 1.8e-2 from each other; 1e-2 fails
/// correct exports. bfloat16 keeps 3 fewer mantissa bits than float16.
pub fn verification_atol(dtype: DType) -> f32 {
    match dtype {
        DType::F16 => 5e-2,
        DType::BF16 => 2e-1,
        _ => 1e-4,
    }
}

/// One sample input of a verification.
#[derive(Debug, Clone)]
pub struct SampleCase {
    /// What it is, e.g. `[2, 7], row 0 left-padded by 3` (recorded in export.json).
    pub name: String,
    pub inputs: BTreeMap<String, Tensor>,
}

/// The sample inputs of a forward graph (`input_ids`, `attention_mask`): batch 2 x 7 tokens with
/// row 0 left-padded by 3, and batch 1 x 5. A static axis keeps its size and a symbolic one is
/// clamped into its range, so the cases fit any export of the graph.
pub fn sample_cases(graph: &Graph, vocab: usize) -> Result<Vec<SampleCase>> {
    let names: Vec<&str> = graph.inputs().iter().map(|p| p.name.as_str()).collect();
    let (Some(ids), Some(mask), 2) = (graph.input("input_ids"), graph.input("attention_mask"), names.len()) else {
        return Err(Error::Unsupported(format!(
            "verification covers forward graphs with inputs input_ids and attention_mask; this one has {}",
            names.join(", ")
        )));
    };
    let (ids, mask) = (graph.info(ids.value), graph.info(mask.value));
    if ids.rank() != 2 || mask.shape != ids.shape {
        return Err(Error::Unsupported(
            "verification needs input_ids and attention_mask of one [batch, seq] shape".into(),
        ));
    }
    let fit = |d: &hfexport_core::Dim, want: i64| match d.as_const() {
        Some(c) => c.max(0) as usize,
        None => {
            let (lo, hi) = d.bounds(&graph.symbols);
            want.clamp(lo.max(1), hi.max(1)) as usize
        }
    };
    let vocab = vocab.max(1) as i64;
    let mut cases = vec![];
    for (k, (b, s, pad)) in [(2i64, 7i64, 3usize), (1, 5, 0)].into_iter().enumerate() {
        let (b, s) = (fit(&ids.shape[0], b), fit(&ids.shape[1], s));
        let pad = pad.min(s.saturating_sub(1));
        let n = b * s;
        let keep: Vec<bool> = (0..n).map(|i| !(i / s == 0 && i % s < pad)).collect();
        let tokens: Vec<i64> =
            (0..n).map(|i| if keep[i] { (i as i64 * 31 + 7 + k as i64 * 13) % vocab } else { 0 }).collect();
        let ids_t = Tensor::int(ids.dtype, vec![b, s], tokens)?;
        let mask_t = match mask.dtype {
            DType::Bool => Tensor::bool(vec![b, s], keep)?,
            d if d.is_int() => Tensor::int(d, vec![b, s], keep.iter().map(|&m| i64::from(m)).collect())?,
            d => Tensor::float(d, vec![b, s], keep.iter().map(|&m| f32::from(u8::from(m))).collect())?,
        };
        let name = match pad {
            0 => format!("[{b}, {s}]"),
            p => format!("[{b}, {s}], row 0 left-padded by {p}"),
        };
        cases.push(SampleCase {
            name,
            inputs: BTreeMap::from([("input_ids".to_string(), ids_t), ("attention_mask".to_string(), mask_t)]),
        });
    }
    Ok(cases)
}

/// The sample inputs of any graph the builders make: [`sample_cases`] for a forward graph, one
/// [`generation_case`] for a generation component (its inputs include `position_ids`).
pub fn cases_for(graph: &Graph, vocab: usize) -> Result<Vec<SampleCase>> {
    match graph.input("position_ids") {
        Some(_) => Ok(vec![generation_case(graph, vocab, SAMPLE_PAST)?]),
        None if graph.inputs().iter().any(|p| p.name.starts_with("input.")) => {
            Err(Error::Unsupported("a graph with cache inputs but no position_ids cannot be verified".into()))
        }
        None if graph.outputs().iter().any(|p| p.name.starts_with("output.")) => {
            Ok(vec![generation_case(graph, vocab, SAMPLE_PAST)?])
        }
        None => sample_cases(graph, vocab),
    }
}

/// Tokens already in the cache in a generation sample, and new tokens per call (when the graph
/// does not fix it).
const SAMPLE_PAST: usize = 4;
const SAMPLE_QUERY: i64 = 3;

/// One sample input of a generation component, by the contract of DESIGN.md: a cache holding
/// `past` tokens (deterministic nonzero values in every slot, so a wrong mask shows; all zeros
/// when `past` is 0, the state a stateful model starts from) and [`SAMPLE_QUERY`] new tokens at
/// the positions after them (one, when the graph fixes the query length). A static cache (`attention_mask` [1, 1, q, slots], bool) gets 12 slots, or
/// its fixed size; a growing cache gets an all-ones `attention_mask` [1, past + q]; a prefill
/// with no cache input starts at position 0.
pub fn generation_case(graph: &Graph, vocab: usize, past: usize) -> Result<SampleCase> {
    let unsupported = |msg: String| Error::Unsupported(format!("verification of a generation component: {msg}"));
    let has_cache = graph.inputs().iter().any(|p| p.name.starts_with("input."));
    let past = if has_cache { past } else { 0 };
    let mut bindings = hfexport_core::dim::Bindings::default();
    for (s, r) in graph.symbols.iter() {
        let want = match s.name() {
            "sequence" => SAMPLE_QUERY,
            "cache_len" => 12,
            "past_len" => past as i64,
            _ => 1,
        };
        bindings.unify(&hfexport_core::Dim::sym(s), want.clamp(r.min, r.max))?;
    }
    let shape_of = |name: &str| -> Result<Vec<usize>> {
        let p = graph.input(name).ok_or_else(|| unsupported(format!("no input `{name}`")))?;
        graph.info(p.value).shape.iter().map(|d| Ok(d.eval(&bindings)?.max(0) as usize)).collect()
    };
    let ids_shape = shape_of("input_ids")?;
    let [1, q] = ids_shape[..] else {
        return Err(unsupported(format!("input_ids has shape {ids_shape:?}, expected [1, q]")));
    };
    let vocab = vocab.max(1) as i64;
    let mut inputs = BTreeMap::new();
    for port in graph.inputs() {
        let info = graph.info(port.value);
        let shape = shape_of(&port.name)?;
        let n: usize = shape.iter().product();
        let t = match port.name.as_str() {
            "input_ids" => Tensor::int(info.dtype, shape, (0..q as i64).map(|i| (i * 31 + 7) % vocab).collect())?,
            "position_ids" => Tensor::int(info.dtype, shape, (past..past + q).map(|p| p as i64).collect())?,
            "attention_mask" => match shape[..] {
                // static cache: slot j visible to query i iff j <= past + i
                [1, 1, rows, slots] if rows == q => {
                    let keep = (0..q).flat_map(|i| (0..slots).map(move |j| j <= past + i)).collect();
                    Tensor::bool(shape, keep)?
                }
                [1, len] if len == past + q => Tensor::int(info.dtype, shape, vec![1; n])?,
                _ => return Err(unsupported(format!("attention_mask of shape {shape:?} fits no cache contract"))),
            },
            name if name.starts_with("input.") => {
                let scale = if past == 0 { 0.0 } else { 0.5 };
                Tensor::float(DType::F32, shape, (0..n).map(|i| ((i as f32) * 0.37).sin() * scale).collect())?
                    .cast(info.dtype)
            }
            other => return Err(unsupported(format!("unknown input `{other}`"))),
        };
        inputs.insert(port.name.clone(), t);
    }
    let name = match past {
        0 if has_cache => format!("{q} token{} into an empty cache", if q == 1 { "" } else { "s" }),
        0 => format!("prefill of {q} tokens"),
        p => format!("{q} new token{} after {p} cached", if q == 1 { "" } else { "s" }),
    };
    Ok(SampleCase { name, inputs })
}

/// The worst difference seen so far: (tensor, index, runtime value, reference value, |diff|).
#[cfg_attr(
    not(any(feature = "onnx-runtime", feature = "openvino-runtime", feature = "dynamo-runtime")),
    allow(dead_code)
)]
type Worst = (String, Vec<usize>, f32, f32, f32);

/// Compares every reference output with the runtime's at the positions the mask keeps (an
/// output whose leading dims are the mask's `[batch, seq]`; any other output everywhere).
#[cfg_attr(
    not(any(feature = "onnx-runtime", feature = "openvino-runtime", feature = "dynamo-runtime")),
    allow(dead_code)
)]
fn compare_outputs(
    runtime: &str,
    case: &SampleCase,
    got: &BTreeMap<String, Tensor>,
    want: &BTreeMap<String, Tensor>,
    worst: &mut Option<Worst>,
) -> Result<()> {
    let failed = |msg: String| Error::VerificationFailed { runtime: runtime.to_string(), msg };
    let mask = case.inputs.get("attention_mask").map(|m| m.cast(DType::F32));
    for (name, w) in want {
        let g = got.get(name).ok_or_else(|| failed(format!("output `{name}` is missing (case {})", case.name)))?;
        if g.shape() != w.shape() {
            return Err(failed(format!(
                "output `{name}` has shape {:?}, the reference evaluator {:?} (case {})",
                g.shape(),
                w.shape(),
                case.name
            )));
        }
        let (gf, wf) = (g.cast(DType::F32), w.cast(DType::F32));
        let (gv, wv) = (gf.as_f32()?, wf.as_f32()?);
        let keep: Option<(&[f32], usize)> = match &mask {
            Some(m) if w.shape().len() >= 2 && w.shape()[..2] == *m.shape() => {
                Some((m.as_f32()?, w.numel() / m.numel().max(1)))
            }
            _ => None,
        };
        for (i, (&a, &b)) in gv.iter().zip(wv).enumerate() {
            if let Some((m, inner)) = keep {
                if m[i / inner.max(1)] == 0.0 {
                    continue;
                }
            }
            let d = if a == b { 0.0 } else { (a - b).abs() };
            let d = if d.is_nan() { f32::INFINITY } else { d };
            if worst.as_ref().is_none_or(|w| d > w.4) {
                let mut index = vec![0; w.shape().len()];
                let mut r = i;
                for (k, &n) in w.shape().iter().enumerate().rev() {
                    index[k] = r % n.max(1);
                    r /= n.max(1);
                }
                *worst = Some((format!("{name} (case {})", case.name), index, a, b, d));
            }
        }
    }
    Ok(())
}

/// Runs `model` in ONNX Runtime and compares with the reference evaluator ([`verify_in`]).
#[cfg(feature = "onnx-runtime")]
fn verify_onnx(
    graph: &Graph,
    ckpt: &Checkpoint,
    model: &Path,
    dtype: DType,
    progress: Progress,
) -> Result<Verification> {
    use hfexport_onnx::runtime;
    let runner = runtime::OnnxRunner::load(model)?;
    let runtime = format!("onnxruntime {}", runtime::loaded_version().unwrap_or_else(|| "(unknown version)".into()));
    let cases = cases_for(graph, ckpt.config.vocab_size)?;
    verify_in(
        &runtime,
        &|inputs| Ok(runner.run(inputs)?),
        cases,
        &|_| true,
        graph,
        ckpt,
        verification_atol(dtype),
        progress,
    )
}

/// Runs `model` in OpenVINO (CPU, f32 precision) and compares with the reference evaluator.
///
/// A stateful model's caches are variables that start at zeros: its sample runs the new tokens
/// into an empty cache (the evaluator gets zero caches), `beam_idx` is [0], and only the
/// model's own outputs (`logits`) are compared.
#[cfg(feature = "openvino-runtime")]
fn verify_openvino(
    graph: &Graph,
    ckpt: &Checkpoint,
    model: &Path,
    stateful: bool,
    dtype: DType,
    progress: Progress,
) -> Result<Verification> {
    use hfexport_openvino::runtime;
    let runner = runtime::OvRunner::load(model)?;
    let runtime = format!("openvino {}", runtime::loaded_version().unwrap_or_else(|| "(unknown version)".into()));
    let vocab = ckpt.config.vocab_size;
    if !stateful {
        let cases = cases_for(graph, vocab)?;
        return verify_in(
            &runtime,
            &|i| Ok(runner.run(i)?),
            cases,
            &|_| true,
            graph,
            ckpt,
            verification_atol(dtype),
            progress,
        );
    }
    let cases = vec![generation_case(graph, vocab, 0)?];
    let run = |inputs: &BTreeMap<String, Tensor>| -> Result<BTreeMap<String, Tensor>> {
        let mut feed: BTreeMap<String, Tensor> =
            inputs.iter().filter(|(k, _)| !k.starts_with("input.")).map(|(k, v)| (k.clone(), v.clone())).collect();
        feed.insert(hfexport_openvino::lower::BEAM_IDX.into(), Tensor::int(DType::I32, vec![1], vec![0])?);
        Ok(runner.run(&feed)?)
    };
    verify_in(
        &runtime,
        &run,
        cases,
        &|name| !name.starts_with("output."),
        graph,
        ckpt,
        verification_atol(dtype),
        progress,
    )
}

/// Runs the `.pt2` `model` with libtorch and compares with the reference evaluator: outputs
/// are named after the graph's, a static cache's output is its input updated in place.
#[cfg(feature = "dynamo-runtime")]
fn verify_dynamo(
    graph: &Graph,
    ckpt: &Checkpoint,
    model: &Path,
    dtype: DType,
    progress: Progress,
) -> Result<Verification> {
    use hfexport_dynamo::runner::{linked_version, Pt2Runner};
    let runner = Pt2Runner::load(model)?;
    let runtime = format!("libtorch {}", linked_version());
    let outputs: Vec<String> = graph.outputs().iter().map(|p| p.name.clone()).collect();
    let aliases: BTreeMap<String, String> =
        graph.aliases().iter().map(|a| (a.output.clone(), a.input.clone())).collect();
    let cases = cases_for(graph, ckpt.config.vocab_size)?;
    let run = |inputs: &BTreeMap<String, Tensor>| Ok(runner.run(inputs, &outputs, &aliases)?);
    verify_in(&runtime, &run, cases, &|_| true, graph, ckpt, verification_atol(dtype), progress)
}

/// Runs the `.pte` `model` in the ExecuTorch runtime and compares with the reference evaluator:
/// the method's outputs are `[updated caches, user outputs, updated caches]`, named after the
/// graph's. XNNPACK's kernels reassociate sums, so its tolerance is at least 1e-3.
#[cfg(feature = "executorch-runtime")]
fn verify_executorch(
    graph: &Graph,
    ckpt: &Checkpoint,
    model: &Path,
    xnnpack: bool,
    dtype: DType,
    progress: Progress,
) -> Result<Verification> {
    use hfexport_executorch::runtime::{linked_version, output_names, EtRunner};
    let runner = std::cell::RefCell::new(EtRunner::load(model)?);
    let runtime = format!("executorch {}", linked_version());
    let inputs: Vec<String> = graph.inputs().iter().map(|p| p.name.clone()).collect();
    let outputs: Vec<String> = graph.outputs().iter().map(|p| p.name.clone()).collect();
    let aliased: Vec<String> = graph.aliases().iter().map(|a| a.output.clone()).collect();
    let names = output_names(&outputs, &aliased);
    let cases = cases_for(graph, ckpt.config.vocab_size)?;
    let run = |feeds: &BTreeMap<String, Tensor>| Ok(runner.borrow_mut().run_named(feeds, &inputs, &names)?);
    let atol = if xnnpack { verification_atol(dtype).max(1e-3) } else { verification_atol(dtype) };
    verify_in(&runtime, &run, cases, &|_| true, graph, ckpt, atol, progress)
}

/// The artifact's `run` against `graph` in the reference evaluator on [`cases_for`] the graph;
/// a difference beyond [`verification_atol`] is an error naming the worst tensor and index.
#[cfg(any(
    feature = "onnx-runtime",
    feature = "openvino-runtime",
    feature = "dynamo-runtime",
    feature = "executorch-runtime"
))]
type RunArtifact<'a> = &'a dyn Fn(&BTreeMap<String, Tensor>) -> Result<BTreeMap<String, Tensor>>;

#[cfg(any(
    feature = "onnx-runtime",
    feature = "openvino-runtime",
    feature = "dynamo-runtime",
    feature = "executorch-runtime"
))]
#[allow(clippy::too_many_arguments)]
fn verify_in(
    runtime: &str,
    run: RunArtifact,
    cases: Vec<SampleCase>,
    compared: &dyn Fn(&str) -> bool,
    graph: &Graph,
    ckpt: &Checkpoint,
    atol: f32,
    progress: Progress,
) -> Result<Verification> {
    progress(&format!("verifying in {runtime} against the reference evaluator ({} sample inputs)", cases.len()));
    let ev = Evaluator::new(graph, ckpt)?;
    let mut worst = None;
    for case in &cases {
        let got = run(&case.inputs)?;
        let mut want = ev.run(&case.inputs)?;
        want.retain(|name, _| compared(name));
        compare_outputs(runtime, case, &got, &want, &mut worst)?;
    }
    let max_abs_diff = worst.as_ref().map_or(0.0, |w| w.4);
    if let Some((tensor, index, got, expected, diff)) = worst.filter(|w| w.4 > atol) {
        return Err(Error::VerificationMismatch {
            runtime: runtime.to_string(),
            tensor,
            index,
            got,
            expected,
            diff,
            atol,
        });
    }
    progress(&format!("verified: max |diff| {max_abs_diff:e} (atol {atol:e})"));
    Ok(Verification {
        runtime: runtime.to_string(),
        reference: format!("hfexport {} reference evaluator", env!("CARGO_PKG_VERSION")),
        max_abs_diff,
        atol,
        inputs: cases.into_iter().map(|c| c.name).collect(),
    })
}

impl AutoHfExporter {
    /// Verify the artifact in its runtime before the folder is committed (`--verify`); the
    /// result is recorded in export.json and a mismatch fails the export.
    pub fn with_verify(mut self, verify: bool) -> AutoHfExporter {
        self.verify = verify;
        self
    }

    /// Whether verification is compiled in for this format (checked before any work).
    fn check_verify_available(&self) -> Result<()> {
        if !self.verify {
            return Ok(());
        }
        match self.config.format() {
            ExportFormat::Onnx if cfg!(feature = "onnx-runtime") => Ok(()),
            ExportFormat::Onnx => Err(Error::Unsupported(
                "verify needs the ONNX Runtime runner, which is not compiled into this build: build hfexport with \
                 the cargo feature `onnx-runtime`"
                    .into(),
            )),
            ExportFormat::Openvino if cfg!(feature = "openvino-runtime") => Ok(()),
            ExportFormat::Openvino => Err(Error::Unsupported(
                "verify needs the OpenVINO runner, which is not compiled into this build: build hfexport with the \
                 cargo feature `openvino-runtime`"
                    .into(),
            )),
            ExportFormat::Dynamo if cfg!(feature = "dynamo-runtime") => Ok(()),
            ExportFormat::Dynamo => Err(Error::Unsupported(
                "verify needs the libtorch runner, which is not compiled into this build: build hfexport with the \
                 cargo feature `dynamo-runtime` (hfexport-cli: `tch`) and LIBTORCH=<site-packages>/torch"
                    .into(),
            )),
            ExportFormat::Executorch if cfg!(feature = "executorch-runtime") => Ok(()),
            ExportFormat::Executorch => Err(Error::Unsupported(
                "verify needs the ExecuTorch runner, which is not compiled into this build: build hfexport with the \
                 cargo feature `executorch-runtime` (hfexport-cli: `executorch-runtime`; it builds against the \
                 executorch==1.5.1 wheel in .venv/)"
                    .into(),
            )),
        }
    }

    /// Verifies every component written into `dir` and merges the results: the worst difference
    /// of all, each sample named after its component when there are several.
    fn verify_components(
        &self,
        components: &[(String, Graph)],
        written: &[Component],
        ckpt: &Checkpoint,
        dir: &Path,
        dtype: DType,
        progress: Progress,
    ) -> Result<Verification> {
        let mut merged: Option<Verification> = None;
        for ((name, graph), component) in components.iter().zip(written) {
            let mut v = self.verify_written(graph, ckpt, dir, component, dtype, progress)?;
            if components.len() > 1 {
                v.inputs = v.inputs.iter().map(|i| format!("{name}: {i}")).collect();
            }
            merged = Some(match merged {
                None => v,
                Some(mut m) => {
                    m.max_abs_diff = m.max_abs_diff.max(v.max_abs_diff);
                    m.inputs.extend(v.inputs);
                    m
                }
            });
        }
        merged.ok_or_else(|| Error::Unsupported("nothing to verify: the export has no components".into()))
    }

    /// Verifies the component written into `dir` from `graph`.
    #[allow(unused_variables)]
    fn verify_written(
        &self,
        graph: &Graph,
        ckpt: &Checkpoint,
        dir: &Path,
        component: &Component,
        dtype: DType,
        progress: Progress,
    ) -> Result<Verification> {
        self.check_verify_available()?;
        match &self.config {
            #[cfg(feature = "onnx-runtime")]
            ExportConfig::Onnx(_) => {
                let file =
                    component.files.iter().find(|f| f.ends_with(".onnx")).ok_or_else(|| {
                        Error::Unsupported(format!("component `{}` has no .onnx file", component.name))
                    })?;
                verify_onnx(graph, ckpt, &dir.join(file), dtype, progress)
            }
            #[cfg(feature = "openvino-runtime")]
            ExportConfig::Openvino(cfg) => {
                let file =
                    component.files.iter().find(|f| f.ends_with(".xml")).ok_or_else(|| {
                        Error::Unsupported(format!("component `{}` has no .xml file", component.name))
                    })?;
                // f16-compressed weights are held to the tolerance of a float16 export
                let tolerance_of = if cfg.compress_to_fp16 && dtype == DType::F32 { DType::F16 } else { dtype };
                verify_openvino(graph, ckpt, &dir.join(file), !component.states.is_empty(), tolerance_of, progress)
            }
            #[cfg(feature = "executorch-runtime")]
            ExportConfig::Executorch(cfg) => {
                let file =
                    component.files.iter().find(|f| f.ends_with(".pte")).ok_or_else(|| {
                        Error::Unsupported(format!("component `{}` has no .pte file", component.name))
                    })?;
                let xnnpack = cfg.backend == hfexport_core::config::ExecutorchBackend::Xnnpack;
                verify_executorch(graph, ckpt, &dir.join(file), xnnpack, dtype, progress)
            }
            #[cfg(feature = "dynamo-runtime")]
            ExportConfig::Dynamo(_) => {
                let file =
                    component.files.iter().find(|f| f.ends_with(".pt2")).ok_or_else(|| {
                        Error::Unsupported(format!("component `{}` has no .pt2 file", component.name))
                    })?;
                verify_dynamo(graph, ckpt, &dir.join(file), dtype, progress)
            }
            #[allow(unreachable_patterns)]
            _ => Err(Error::Unsupported(format!(
                "cannot verify {} exports in this build",
                self.config.format().as_str()
            ))),
        }
    }
}

/// Verifies an existing export folder against the checkpoint it was made from: rebuilds the
/// graph with the export's config and dtype, runs the artifact in its runtime and the graph in
/// the reference evaluator (as `--verify` does before commit). export.json is not changed.
pub fn verify_export(dir: &Path, checkpoint: &Path) -> Result<Verification> {
    let meta = ExportMetadata::read(dir)?;
    let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(&meta.config)?)?.with_verify(true);
    exporter.check_verify_available()?;
    let dtype = DType::from_user_name(&meta.dtype)
        .ok_or_else(|| Error::Unsupported(format!("export.json: dtype `{}` is not valid", meta.dtype)))?;
    let task = Task::parse(&meta.task).map_err(|e| Error::Unsupported(format!("export.json: {e}")))?;
    let ckpt = Checkpoint::open(checkpoint)?;
    let mut graph = build(&ckpt.config, &ckpt, task, &BuildOptions { dtype, ..Default::default() })?;
    hfexport_core::dynamic::apply(&mut graph, exporter.config.common(), &sample_sizes())?;
    exporter.verify_written(&graph, &ckpt, dir, meta.component("model")?, dtype, &mut |_| {})
}

#[cfg(test)]
mod verification_tests {
    use super::*;

    fn fixture_graph(dynamic: bool) -> Graph {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/llama");
        let ckpt = Checkpoint::open(&dir).unwrap();
        let mut g = build(&ckpt.config, &ckpt, Task::CausalLm, &BuildOptions::default()).unwrap();
        let cfg =
            AutoExportConfig::from_dict(&serde_json::json!({"export_format": "onnx", "dynamic": dynamic})).unwrap();
        hfexport_core::dynamic::apply(&mut g, cfg.common(), &sample_sizes()).unwrap();
        g
    }

    #[test]
    fn sample_cases_fit_static_and_dynamic_graphs() {
        let shapes = |g: &Graph| -> Vec<(Vec<usize>, i64)> {
            sample_cases(g, 256)
                .unwrap()
                .iter()
                .map(|c| {
                    let m = &c.inputs["attention_mask"];
                    (m.shape().to_vec(), m.as_i64().unwrap().iter().filter(|&&x| x == 0).count() as i64)
                })
                .collect()
        };
        assert_eq!(shapes(&fixture_graph(true)), [(vec![2, 7], 3), (vec![1, 5], 0)]);
        assert_eq!(shapes(&fixture_graph(false)), [(vec![1, 16], 3), (vec![1, 16], 0)]);
        let case = &sample_cases(&fixture_graph(true), 256).unwrap()[0];
        assert!(case.inputs["input_ids"].as_i64().unwrap().iter().all(|&t| (0..256).contains(&t)));
    }

    #[test]
    fn comparison_skips_padding_and_names_the_worst_element() {
        let mask = Tensor::i64(vec![1, 2], vec![0, 1]).unwrap();
        let case = SampleCase { name: "c".into(), inputs: BTreeMap::from([("attention_mask".to_string(), mask)]) };
        let want = BTreeMap::from([("logits".to_string(), Tensor::f32(vec![1, 2, 2], vec![0.0; 4]).unwrap())]);
        // position 0 is padding: its huge difference does not count
        let got =
            BTreeMap::from([("logits".to_string(), Tensor::f32(vec![1, 2, 2], vec![9.0, 9.0, 0.5, -2.0]).unwrap())]);
        let mut worst = None;
        compare_outputs("rt", &case, &got, &want, &mut worst).unwrap();
        let (tensor, index, g, e, d) = worst.unwrap();
        assert_eq!((tensor.as_str(), index, g, e, d), ("logits (case c)", vec![0, 1, 1], -2.0, 0.0, 2.0));
        // NaN is the worst possible difference; a shape mismatch is an error
        let got = BTreeMap::from([(
            "logits".to_string(),
            Tensor::f32(vec![1, 2, 2], vec![0.0, 0.0, f32::NAN, 0.0]).unwrap(),
        )]);
        let mut worst = None;
        compare_outputs("rt", &case, &got, &want, &mut worst).unwrap();
        assert_eq!(worst.unwrap().4, f32::INFINITY);
        let got = BTreeMap::from([("logits".to_string(), Tensor::f32(vec![1, 4], vec![0.0; 4]).unwrap())]);
        let e = compare_outputs("rt", &case, &got, &want, &mut None).unwrap_err().to_string();
        assert!(e.contains("logits") && e.contains("[1, 4]"), "{e}");
    }

    #[test]
    fn verify_without_the_runtime_feature_says_which_feature() {
        let cfg = AutoExportConfig::from_dict(&serde_json::json!({"export_format": "onnx"})).unwrap();
        let r = AutoHfExporter::from_config(cfg).unwrap().with_verify(true).check_verify_available();
        if cfg!(feature = "onnx-runtime") {
            r.unwrap();
        } else {
            assert!(r.unwrap_err().to_string().contains("`onnx-runtime`"));
        }
    }
}
