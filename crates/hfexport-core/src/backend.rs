//! The one backend interface and the one pipeline every format goes through.
//!
//! A backend crate implements [`Backend`] behind its cargo feature; the facade and the CLI
//! hold a list of them and never match on formats. [`prepare`] runs the same passes for every
//! backend (build-stage patches, sliding windows folded into masks, decomposition of what the
//! backend does not lower natively, backend patches), driven by the backend's per-op
//! [`Lowering`] decisions; the backend then writes all components of an export at once, so
//! weights they share are stored once ([`WeightTable`]).
//!
//! Running is apart from exporting: a format's [`Runtime`] exists only when its cargo feature
//! builds it in, so [`Backend::runtime`] is the one place that says whether it is, and the
//! runtime holds only runtime calls (its [`Runner`] per component, its
//! [`crate::generation::Session`] under the shared generation loop).

use crate::config::{ExportConfig, ExportFormat};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::generation::Generator;
use crate::graph::{Graph, Node};
use crate::metadata::Component;
use crate::ops::Op;
use crate::passes::{Pass, PassManager, PatchRegistry, Stage};
use crate::plan::Planned;
use crate::quant::{ActivationRounding, QuantForm, QuantRecipe};
use crate::tensor::Tensor;
use crate::weights::{TensorSource, WeightExpr};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

/// A backend's decision for one op: lower it as it is, or expand it into primitives first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lowering {
    Native,
    Decompose,
}

/// Progress of a writer: (weights done, weights in all, name of the current one). An error
/// (the caller cancelled: [`cancelled`]) stops the writer, which returns it as its I/O error.
pub type WeightProgress<'a> = &'a mut dyn FnMut(usize, usize, &str) -> std::io::Result<()>;

/// The error a [`WeightProgress`] returns to stop a writer: the export was cancelled.
pub fn cancelled() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::Interrupted, "the export was cancelled")
}

/// What a backend wrote for one component.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// Files of the component, relative to the export folder (shared files included).
    pub files: Vec<String>,
    /// A note for the progress output (e.g. the size of a memory plan).
    pub note: Option<String>,
}

/// Upper bounds a backend picks for the symbols a request left open
/// ([`Backend::default_bounds`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DefaultBounds {
    /// Per component, in order: symbol -> its new maximum (symbols not listed keep theirs).
    pub maxima: Vec<BTreeMap<String, i64>>,
    /// What was chosen and why, for the export's progress output.
    pub note: Option<String>,
}

/// What a runtime other than hfexport's needs to know of the model beyond the graphs
/// ([`Backend::runtime_files`]): sizes from `config.json`, special tokens and sampling defaults
/// from `generation_config.json` (over `config.json`'s).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelFacts {
    /// `config.json`'s `model_type` (the architecture class when it has none).
    pub model_type: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_layers: usize,
    /// The layers that attend over an earlier layer's keys and values, keeping none of their own
    /// (Gemma 4's `num_kv_shared_layers`).
    pub shared_kv_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    /// The longest sequence the graphs take (`max_position_embeddings`, times the factor of a
    /// dynamic-NTK rope), the bound of their `past_len + sequence`.
    pub context_length: usize,
    pub bos_token_id: Option<i64>,
    pub eos_token_ids: Vec<i64>,
    pub pad_token_id: Option<i64>,
    /// Sampling defaults under their `generation_config.json` names (`do_sample`, `temperature`,
    /// `top_k`, `top_p`, `repetition_penalty`); only the keys the checkpoint sets.
    pub sampling: BTreeMap<String, serde_json::Value>,
}

/// The static cache's slots of a generation export with no `--static-cache` in a format whose
/// decode takes `cache_position` ([`Backend::slot_positions`]); at most the model's context.
pub const DEFAULT_SLOTS: usize = 2048;

/// One deployment format.
pub trait Backend: Send + Sync {
    fn format(&self) -> ExportFormat;

    /// Whether `op` is lowered natively under `cfg`. Implementations match every op variant
    /// with no catch-all arm, so a new op does not compile until each backend decides.
    fn lowering(&self, op: &Op, cfg: &ExportConfig) -> Lowering;

    /// What this format asks of a quantization recipe under `cfg`: an error naming what it
    /// cannot hold (ExecuTorch's XNNPACK: asymmetric or int8 group-wise linears), else how its
    /// scales must be formed (the default: the recipe's arithmetic as documented).
    fn quant_form(&self, _recipe: &QuantRecipe, _cfg: &ExportConfig) -> Result<QuantForm> {
        Ok(QuantForm::default())
    }

    /// Upstream runtime versions the exports are built and checked for.
    fn runtime_pins(&self) -> BTreeMap<String, String>;

    /// Writes every component (graphs already through [`prepare`]) into `dir`; weights used by
    /// several components are written once (`model`: what a format records of the checkpoint
    /// inside its files, ExecuTorch's LLM-runner constants). Returns one [`Written`] per
    /// component, in order.
    fn write(
        &self,
        components: &[Planned],
        src: &dyn TensorSource,
        model: &ModelFacts,
        dir: &Path,
        cfg: &ExportConfig,
        progress: WeightProgress,
    ) -> Result<Vec<Written>>;

    /// Default upper bounds for the symbols of each component that the request left open
    /// (`open[i]`, names of component `i`'s symbols with no maximum from the user:
    /// [`crate::dynamic::open_symbols`]), called once the config's shapes are applied. They
    /// are applied before [`prepare`] and recorded in `export.json` as the symbols' ranges.
    /// The default keeps the model's ranges; a format that reserves memory at the bounds
    /// narrows them (ExecuTorch: until its memory plan fits a budget).
    fn default_bounds(
        &self,
        _components: &[Planned],
        _open: &[BTreeSet<String>],
        _cfg: &ExportConfig,
    ) -> Result<DefaultBounds> {
        Ok(DefaultBounds::default())
    }

    /// The refusal, before anything is written, of a model that [`Backend::runtime_files`] could
    /// not describe truthfully to its runtime. The default refuses none.
    fn check_model(&self, _model: &ModelFacts, _cfg: &ExportConfig) -> Result<()> {
        Ok(())
    }

    /// Whether `prepare` leaves this grouped-query `Attention` node of `g` as it is, with no
    /// `decompose::fold_query_groups`: where the runtime attends grouped heads without copies
    /// itself and needs the query axis to be the new tokens. The default folds.
    fn keeps_query_groups(&self, _g: &Graph, _attention: &Node, _cfg: &ExportConfig) -> bool {
        false
    }

    /// Files another runtime needs to load the export as it is, written into `dir` once every
    /// component is written and described (ONNX with `"genai"`: ONNX Runtime GenAI's
    /// `genai_config.json`). The default writes none.
    fn runtime_files(
        &self,
        _components: &[Component],
        _model: &ModelFacts,
        _dir: &Path,
        _cfg: &ExportConfig,
    ) -> Result<()> {
        Ok(())
    }

    /// The component as `export.json` records it (a backend may fold ports, e.g. into states).
    fn describe(&self, planned: &Planned, files: Vec<String>, _cfg: &ExportConfig) -> Component {
        Component::from_planned(planned, files)
    }

    /// Whether a text decoder's static cache takes `cache_position` (`Positions::Slots`) in
    /// place of `attention_mask` and `position_ids` under `cfg`, one `decode` serving prompts
    /// and steps, and a generation export has a static cache by default
    /// ([`DEFAULT_SLOTS`]): the form ExecuTorch's LLM runners call. The default: no.
    fn slot_positions(&self, _cfg: &ExportConfig) -> bool {
        false
    }

    /// Whether a generation export keeps its cache inside the runtime under `cfg` (OpenVINO's
    /// stateful models: variables of the infer request). A separate prefill component could
    /// not hand such a cache over, so `decode` serves the prompt too. The default: no.
    fn keeps_cache_in_runtime(&self, _cfg: &ExportConfig) -> bool {
        false
    }

    /// This format's runtime when it is compiled in, else a config error saying which cargo
    /// feature builds it in ([`compiled_in`]).
    fn runtime(&self) -> Result<&'static dyn Runtime>;

    /// The runtime this format runs in (`onnxruntime`, `openvino`, `libtorch`, `executorch`).
    fn runtime_name(&self) -> &'static str;
}

/// A format's runtime, behind its backend's cargo feature: what runs written components for
/// `--verify` and `hfexport run`, and generates. Implementations hold only runtime calls; the
/// generation loop is [`crate::generation::GenerationLoop`] over the runtime's
/// [`crate::generation::Session`].
pub trait Runtime: Sync {
    /// Opens a written component in this runtime.
    fn open_runner(&self, dir: &Path, component: &Component, cfg: &ExportConfig) -> Result<Box<dyn Runner>>;

    /// Opens the generation components of the export in `dir` in this runtime.
    fn open_generator(&self, dir: &Path) -> Result<Box<dyn Generator>>;
}

/// A component running in its runtime, fed and read by the graph's port names.
pub trait Runner {
    /// The runtime and its version, e.g. `onnxruntime 1.32.0`.
    fn runtime(&self) -> String;
    fn run(&mut self, inputs: &BTreeMap<String, Tensor>) -> Result<BTreeMap<String, Tensor>>;
    /// Whether the runtime returns graph output `name` for comparison (in-place cache outputs
    /// a runtime keeps as state are not).
    fn compares(&self, _output: &str) -> bool {
        true
    }
    /// A stateful runner starts from an empty cache: samples must hold no past tokens.
    fn stateful(&self) -> bool {
        false
    }
    /// The absolute tolerance on outputs of an export in `dtype` ([`verification_atol`]; a
    /// runtime whose kernels reassociate sums, or that narrows weights, allows more).
    fn atol(&self, dtype: DType) -> f32 {
        verification_atol(dtype)
    }
    /// How the runtime rounds the inputs of quantized linears (ONNX Runtime's `MatMulNBits`
    /// at accuracy level 4, XNNPACK's dynamically quantized linears); `None` for runtimes that
    /// compute them in float from exactly dequantized weights.
    fn activation_rounding(&self) -> Option<ActivationRounding> {
        None
    }
}

/// What [`Backend::runtime`] returns: the `runtime` a cargo feature compiled in, else a
/// config error saying what is `missing` and which feature builds it in.
pub fn compiled_in(runtime: Option<&'static dyn Runtime>, missing: &str) -> Result<&'static dyn Runtime> {
    runtime.ok_or_else(|| Error::Config(missing.to_string()))
}

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

/// Runs the passes every backend shares on each component; returns the prepared components
/// and the patches applied (each named once, in the order first applied).
pub fn prepare(
    backend: &'static dyn Backend,
    cfg: &ExportConfig,
    components: &[Planned],
) -> Result<(Vec<Planned>, Vec<String>)> {
    if backend.format() != cfg.format() {
        return Err(Error::Config(format!(
            "the {} backend got a {} config",
            backend.format().as_str(),
            cfg.format().as_str()
        )));
    }
    let format = backend.format();
    let owned = cfg.clone();
    let select = Arc::new(move |op: &Op| backend.lowering(op, &owned) == Lowering::Decompose);
    let owned = cfg.clone();
    let keep = Arc::new(move |g: &Graph, attention: &Node| backend.keeps_query_groups(g, attention, &owned));
    let mut pm = PassManager::new(PatchRegistry::builtin(), backend.runtime_pins());
    pm.add(Pass::Patches { stage: Stage::Build, format: None })
        .add(Pass::FoldSlidingWindows)
        .add(Pass::FoldQueryGroups { keep })
        .add(Pass::ChooseMoeStrategies)
        .add(Pass::Decompose { name: format.as_str(), select })
        .add(Pass::Patches { stage: Stage::Backend, format: Some(format) });
    let mut patches: Vec<String> = vec![];
    let mut prepared = Vec::with_capacity(components.len());
    for c in components {
        let (graph, report) = pm.run(c.graph.clone())?;
        for p in report.patches_applied {
            if !patches.contains(&p) {
                patches.push(p);
            }
        }
        prepared.push(Planned { spec: c.spec.clone(), graph });
    }
    Ok((prepared, patches))
}

/// Where each distinct weight of an export was written, so a second component that uses the
/// same weight (same stored tensors, same transforms) points at the first copy.
#[derive(Debug)]
pub struct WeightTable<L> {
    placed: HashMap<WeightExpr, L>,
}

impl<L: Clone> Default for WeightTable<L> {
    fn default() -> Self {
        WeightTable { placed: HashMap::new() }
    }
}

impl<L: Clone> WeightTable<L> {
    /// The location of `expr`, writing it with `write` the first time it is asked for.
    pub fn place<E>(&mut self, expr: &WeightExpr, write: impl FnOnce() -> Result<L, E>) -> Result<L, E> {
        if let Some(l) = self.placed.get(expr) {
            return Ok(l.clone());
        }
        let l = write()?;
        self.placed.insert(expr.clone(), l.clone());
        Ok(l)
    }

    /// Number of distinct weights written.
    pub fn len(&self) -> usize {
        self.placed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.placed.is_empty()
    }
}

/// Distinct weights over all components (what a progress bar counts).
pub fn distinct_weights(components: &[Planned]) -> usize {
    let mut seen = std::collections::HashSet::new();
    components.iter().flat_map(|c| c.graph.weights()).filter(|w| seen.insert(&w.expr)).count()
}
