//! [`AutoHfExporter`]: checkpoint -> typed plan -> shapes -> staged folder -> the backend's
//! passes and writer -> `export.json` -> commit. One pipeline for every format.

use crate::backends::backend;
use crate::samples::sample_sizes;
use crate::verification::{compare_with_float, merge, verify_component};
use crate::{Error, Result};
use hfexport_core::artifact::StagedDir;
use hfexport_core::backend::{prepare, Backend, Lowering, ModelFacts, DEFAULT_SLOTS};
use hfexport_core::fault;
use hfexport_core::metadata::{self, ExportMetadata, QuantQuality, Source, Verification};
use hfexport_core::plan::{Exit, Planned, Role};
use hfexport_core::{dynamic, AutoExportConfig, DType, ExportConfig, Op};
use hfexport_models::{
    build_forward, build_generation, BuildOptions, Checkpoint, GenerationConfig, ModelConfig, Task, Weights,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Files copied from the checkpoint into every export, when present: the configs, and every
/// file a tokenizer is loaded from (the fast `tokenizer.json`, and the slow tokenizers' own:
/// WordPiece's `vocab.txt`, SentencePiece's `spiece.model` (T5, ALBERT),
/// `sentencepiece.bpe.model` (XLM-R, M2M100, mBART), `spm.model` (DeBERTa-v3), Marian's
/// `source.spm` / `target.spm`, Whisper's `normalizer.json`), so that `AutoTokenizer` loads
/// from the export folder what it loads from the checkpoint.
pub const COPIED_FILES: [&str; 18] = [
    "config.json",
    "generation_config.json",
    "preprocessor_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
    "vocab.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "spm.model",
    "source.spm",
    "target.spm",
    "normalizer.json",
];

/// One export job.
#[derive(Debug, Clone)]
pub struct ExportRequest {
    pub model: PathBuf,
    pub output: PathBuf,
    /// `None`: the checkpoint's default task ([`Task::of_model`]: its class's, or a
    /// sentence-transformers folder's sentence embedding).
    pub task: Option<Task>,
    /// Float dtype of the exported weights and activations.
    pub dtype: DType,
    /// Replace a non-empty output folder.
    pub force: bool,
    /// Export the components of a generation loop instead of the forward graph.
    pub generation: Option<Generation>,
}

impl ExportRequest {
    /// The task asked for, else the checkpoint's default ([`Task::of_model`]).
    pub fn task_of(&self, model: &ModelConfig) -> Task {
        self.task.unwrap_or_else(|| Task::of_model(model))
    }
}

/// `export_for_generation` options (the Python `cache_implementation="static"`,
/// `max_cache_len`, `multi_token_decode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation {
    pub static_cache: Option<usize>,
    pub multi_token_decode: bool,
}

/// The components of an export before the backend's passes ([`AutoHfExporter::plan`]).
#[derive(Debug, Clone)]
pub struct ExportPlan {
    /// Built, with the config's shapes and the backend's default bounds applied.
    pub components: Vec<Planned>,
    /// Runtime checks the config's shapes need (recorded in `export.json`).
    pub runtime_checks: Vec<String>,
    /// What the backend chose for the request (e.g. default bounds), for the progress output.
    pub notes: Vec<String>,
}

/// Progress of a long export as lines, for a log or a test.
pub type Progress<'a> = &'a mut dyn FnMut(&str);

/// What a long export reports ([`AutoHfExporter::export_with`]): notes, one line each, and the
/// weights as the writer streams them (a command line draws a bar from these).
pub trait ExportProgress {
    /// A line: a stage begun, a choice made, a result.
    fn note(&mut self, msg: &str);
    /// Distinct weight `done` (0-based) of `total` is being written; `name` is its tensor, and
    /// `written` the bytes in the export's files so far.
    fn weight(&mut self, done: usize, total: usize, name: &str, written: u64);
    /// Every weight is written.
    fn weights_written(&mut self) {}
    /// `--verify`: sample input `done` (0-based) of `total` of component `name` is being run in
    /// the runtime and the reference evaluator (`done == total`: the component is verified).
    fn verify_case(&mut self, _name: &str, _done: usize, _total: usize) {}
    /// Asked after each weight and each verified sample: `true` stops the export with
    /// [`Error::Cancelled`] (the staging folder is removed; the output folder does not appear).
    /// The Python package answers `true` once its callback raised or Ctrl-C was pressed.
    fn cancelled(&self) -> bool {
        false
    }
}

/// [`ExportProgress`] as lines through a closure: every note, and every 16th weight (and the
/// last) as `weights <i>/<n>: <name>`.
pub struct ProgressLines<'a>(pub Progress<'a>);

impl ExportProgress for ProgressLines<'_> {
    fn note(&mut self, msg: &str) {
        (self.0)(msg)
    }

    fn weight(&mut self, done: usize, total: usize, name: &str, _written: u64) {
        if done.is_multiple_of(16) || done + 1 == total {
            (self.0)(&format!("weights {}/{total}: {name}", done + 1));
        }
    }
}

/// Picks the exporter for a config.
#[derive(Debug, Clone)]
pub struct AutoHfExporter {
    config: ExportConfig,
    /// Run the artifact in its runtime against the reference evaluator before commit.
    verify: bool,
}

impl AutoHfExporter {
    pub fn from_config(config: ExportConfig) -> Result<AutoHfExporter> {
        backend(config.format())?;
        Ok(AutoHfExporter { config, verify: false })
    }

    pub fn config(&self) -> &ExportConfig {
        &self.config
    }

    /// Verify the artifact in its runtime before the folder is committed (`--verify`); the
    /// result is recorded in export.json and a mismatch fails the export.
    pub fn with_verify(mut self, verify: bool) -> AutoHfExporter {
        self.verify = verify;
        self
    }

    fn backend(&self) -> &'static dyn Backend {
        backend(self.config.format()).expect("checked in from_config")
    }

    /// Whether verification is compiled in for this format (checked before any work).
    pub(crate) fn check_verify_available(&self) -> Result<()> {
        match self.verify {
            true => {
                self.backend().runtime()?;
                Ok(())
            }
            false => Ok(()),
        }
    }

    /// The typed components of a request, with the config's shapes and the backend's default
    /// bounds applied; the runtime checks those shapes need.
    pub fn plan(&self, req: &ExportRequest, ckpt: &Checkpoint) -> Result<ExportPlan> {
        self.plan_model(req, &ckpt.config, ckpt)
    }

    /// [`AutoHfExporter::plan`] for a model config and any source of weight shapes (no bytes
    /// are read: a test can plan a full-size model without its weights).
    pub fn plan_model(&self, req: &ExportRequest, model: &ModelConfig, weights: &dyn Weights) -> Result<ExportPlan> {
        let latent = self.config.common().latent_attention;
        // every recurrence a model may hold must loop natively
        let native = |op: Op| self.backend().lowering(&op, &self.config) == Lowering::Native;
        let sequence_loops = native(Op::SelectiveScan) && native(Op::DeltaScan);
        let image_size = self.config.common().image_size;
        let slot_positions = self.backend().slot_positions(&self.config);
        let opts =
            BuildOptions { dtype: req.dtype, latent, sequence_loops, image_size, slot_positions, ..Default::default() };
        let task = req.task_of(model);
        let mut components = match &req.generation {
            None => build_forward(model, weights, task, &opts)?,
            Some(_) if !task.generates(&model.family()?) => {
                return Err(Error::Unsupported(format!(
                    "{} exports for generation are causal LMs and encoder-decoders; the task here is `{}` \
                     (export it without --for-generation)",
                    model.architecture,
                    task.name()
                )))
            }
            Some(gen) => {
                if !self.config.common().dynamic {
                    return Err(Error::Unsupported(
                        "a generation export needs --dynamic (query and cache lengths stay symbolic)".into(),
                    ));
                }
                if gen.static_cache == Some(0) {
                    return Err(Error::Unsupported("--static-cache must be at least 1".into()));
                }
                // A cache kept inside the runtime cannot be handed over by a separate prefill:
                // `decode` serves the prompt too. Longrope picks its factors by the longest
                // position of a call, so a prompt fed one token per call would be rotated unlike
                // transformers' one call: such a model keeps the multi-token decode.
                let in_runtime = self.backend().keeps_cache_in_runtime(&self.config);
                let multi = gen.multi_token_decode || (in_runtime && rope_depends_on_call_length(model));
                // a text decoder called at `cache_position` keeps a static cache even unasked
                let slots = match gen.static_cache {
                    None if slot_positions && hfexport_models::takes_slots(model) => {
                        Some(DEFAULT_SLOTS.min(hfexport_models::max_context(model) as usize))
                    }
                    given => given,
                };
                let mut components = build_generation(model, weights, &opts, slots, multi)?;
                if in_runtime {
                    components.retain(|c| c.spec.role != Role::Prefill);
                }
                components
            }
        };
        let common = self.config.common();
        let mut runtime_checks = vec![];
        for c in &mut components {
            runtime_checks.extend(dynamic::apply(&mut c.graph, common, &sample_sizes())?);
            // a GPTQ/AWQ checkpoint's modules stay quantized (never a float copy)
            c.graph = hfexport_quant::load_prequantized(&c.graph, &|n| weights.info(n))?;
            if let Some(recipe) = &common.quantizer {
                let mut recipe = recipe.clone();
                recipe.exclude.extend(model.kept_float()?);
                let form = self.backend().quant_form(&recipe, &self.config)?;
                c.graph = hfexport_quant::quantize_graph(&c.graph, &recipe, form)?;
            }
        }
        // what the user left open, the backend may bound (ExecuTorch: to fit its memory plan)
        let open: Vec<_> = components.iter().map(|c| dynamic::open_symbols(c, common)).collect();
        let defaults = self.backend().default_bounds(&components, &open, &self.config)?;
        for (c, maxima) in components.iter_mut().zip(&defaults.maxima) {
            dynamic::narrow(&mut c.graph, maxima)?;
        }
        let mut notes: Vec<String> = defaults.note.into_iter().collect();
        if model.family()?.config.text_config && model.vision.is_none() && model.dual.is_none() {
            notes.push(format!(
                "{} is an image-text checkpoint: only its text model is exported (its vision tower is not built for \
                 this class yet), so the export takes text only",
                model.architecture
            ));
        }
        if req.task.is_none() && task == Task::SentenceEmbedding {
            notes.push(
                "a sentence-transformers folder (modules.json): exported for sentence-embedding, the embedding \
                 `SentenceTransformer.encode` computes (`--task feature-extraction` exports the token states alone)"
                    .to_string(),
            );
        }
        if req.generation.is_some() && model.scans() && !sequence_loops {
            notes.push(format!(
                "{} scans its state over the sequence and {} has no loop lowering: `decode` takes one token per call, \
                 and the prompt goes through it token by token (export.json: `input_ids` [1, 1], no `prefill`)",
                model.architecture,
                self.config.format().as_str()
            ));
        }
        Ok(ExportPlan { components, runtime_checks, notes })
    }

    /// Runs the export; the output folder appears only if everything succeeded.
    pub fn export(&self, req: &ExportRequest, progress: Progress) -> Result<ExportMetadata> {
        self.export_with(req, &mut ProgressLines(progress))
    }

    /// [`AutoHfExporter::export`], reporting weights one by one to `observer`.
    pub fn export_with(&self, req: &ExportRequest, observer: &mut dyn ExportProgress) -> Result<ExportMetadata> {
        self.check_verify_available()?;
        let backend = self.backend();
        // a local folder, or a hub repo id's snapshot in the Hugging Face cache
        let ckpt = Checkpoint::open(&req.model)?;
        let model = ckpt.dir().to_path_buf();
        let ExportPlan { components, runtime_checks, notes } = self.plan(req, &ckpt)?;
        let facts = model_facts(&ckpt.config, &model)?;
        backend.check_model(&facts, &self.config)?;
        let staged = StagedDir::create(&req.output, req.force)?;
        for stale in staged.removed_stale() {
            observer.note(&format!("removed {}, the staging folder of an interrupted export", stale.display()));
        }
        observer.note(&format!("building {} for {}", self.config.format().as_str(), ckpt.config.architecture));
        for note in &notes {
            observer.note(note);
        }
        let (prepared, patches_applied) = prepare(backend, &self.config, &components)?;
        let mut step = |i: usize, n: usize, name: &str| {
            if i == 1 {
                fault::point(fault::WEIGHTS);
            }
            observer.weight(i, n, name, files_bytes(staged.path()));
            match observer.cancelled() {
                true => Err(hfexport_core::backend::cancelled()),
                false => Ok(()),
            }
        };
        let written = backend.write(&prepared, &ckpt, &facts, staged.path(), &self.config, &mut step);
        if observer.cancelled() {
            return Err(Error::Cancelled);
        }
        let written = written?;
        observer.weights_written();
        fault::point(fault::GRAPH);
        let mut described = vec![];
        for (planned, w) in components.iter().zip(written) {
            if let Some(note) = &w.note {
                observer.note(note);
            }
            described.push(backend.describe(planned, w.files, &self.config));
        }
        copy_side_files(&model, staged.path())?;
        backend.runtime_files(&described, &facts, staged.path(), &self.config)?;
        let verification = match self.verify {
            true => {
                let mut v = self.verify_all(&components, &described, &ckpt, staged.path(), req.dtype, observer)?;
                v.against_float = self.against_float(req, &ckpt, &components, observer)?;
                Some(v)
            }
            false => None,
        };
        let mut symbols = BTreeMap::new();
        for c in &components {
            symbols.extend(metadata::symbols_of(&c.graph));
        }
        let meta = ExportMetadata {
            schema_version: metadata::SCHEMA_VERSION,
            hfexport_version: env!("CARGO_PKG_VERSION").to_string(),
            source: Source {
                architecture: ckpt.config.architecture.clone(),
                model_type: ckpt.config.model_type.clone(),
                checkpoint: model.display().to_string(),
                hub: hfexport_models::hub::snapshot_of(&model)
                    .map(|(repo, sha)| hfexport_core::metadata::HubSource { repo, sha }),
            },
            format: self.config.format().as_str().to_string(),
            task: req.task_of(&ckpt.config).name().to_string(),
            dtype: req.dtype.user_name().to_string(),
            config: self.config.to_dict(),
            symbols,
            components: described,
            patches_applied,
            runtime_checks,
            runtime_pins: backend.runtime_pins(),
            verification,
            files: hfexport_core::integrity::record_files(staged.path())?,
        };
        meta.write(staged.path())?;
        staged.commit()?;
        Ok(meta)
    }

    /// Verifies every component written into `dir` against its planned graph (the graph before
    /// the backend's passes: the reference is the model, not the lowering).
    /// For a quantized export: the first logits component against the float model's (the same
    /// request planned without the quantizer), in the reference evaluator.
    fn against_float(
        &self,
        req: &ExportRequest,
        ckpt: &Checkpoint,
        components: &[Planned],
        progress: &mut dyn ExportProgress,
    ) -> Result<Option<QuantQuality>> {
        if self.config.common().quantizer.is_none() {
            return Ok(None);
        }
        let mut dict = self.config.to_dict();
        dict["quantizer"] = serde_json::Value::Null;
        let float = AutoHfExporter::from_config(AutoExportConfig::from_dict(&dict)?)?.plan(req, ckpt)?;
        let pair = components.iter().zip(&float.components).find(|(c, _)| c.spec.exit == Exit::Logits);
        let Some((quant, float)) = pair else { return Ok(None) };
        let q = compare_with_float(quant, float, ckpt, ckpt.config.vocab_size)?;
        progress.note(&format!(
            "against the float model (`{}`, reference evaluator): top-1 agreement {:.1}% over {} positions, \
             max relative logit error {:.2}%",
            quant.spec.name,
            100.0 * q.top1_agreement,
            q.positions,
            100.0 * q.max_rel_logit_error
        ));
        Ok(Some(q))
    }

    fn verify_all(
        &self,
        components: &[Planned],
        described: &[metadata::Component],
        ckpt: &Checkpoint,
        dir: &Path,
        dtype: DType,
        progress: &mut dyn ExportProgress,
    ) -> Result<Verification> {
        let backend = self.backend();
        let mut results = vec![];
        for (planned, component) in components.iter().zip(described) {
            let mut runner = backend.runtime()?.open_runner(dir, component, &self.config)?;
            let v = verify_component(&mut *runner, planned, ckpt, ckpt.config.vocab_size, dtype, progress)?;
            results.push((component, v));
        }
        merge(results)
    }
}

/// The bytes of the files directly in `dir` (an export's components write nowhere else).
fn files_bytes(dir: &Path) -> u64 {
    let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
    entries.filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum()
}

/// Copies the checkpoint's files that the export's users load beside the graphs: the
/// [`COPIED_FILES`], and a sentence-transformers folder's configs and module folders (a Dense
/// module's weights too), so that `SentenceTransformer(export, backend=...)` runs the modules
/// the checkpoint has.
fn copy_side_files(model: &Path, dir: &Path) -> Result<()> {
    let sentence = hfexport_models::sentence::CONFIG_FILES;
    for name in COPIED_FILES.iter().chain(&sentence) {
        let src = model.join(name);
        if src.is_file() {
            copy_file(&src, &dir.join(name))?;
        }
    }
    for folder in hfexport_models::sentence::module_folders(model)? {
        copy_tree(&model.join(&folder), &dir.join(&folder))?;
    }
    Ok(())
}

fn copy_file(src: &Path, dst: &Path) -> Result<()> {
    std::fs::copy(src, dst).map(drop).map_err(|source| Error::Io { path: src.to_path_buf(), source })
}

/// Copies the files under `src` (absent: nothing) into `dst`, creating its folders.
fn copy_tree(src: &Path, dst: &Path) -> Result<()> {
    if !src.is_dir() {
        return Ok(());
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    std::fs::create_dir_all(dst).map_err(io(dst))?;
    for entry in std::fs::read_dir(src).map_err(io(src))? {
        let entry = entry.map_err(io(src))?;
        let (from, to) = (entry.path(), dst.join(entry.file_name()));
        match entry.file_type().map_err(io(&from))?.is_dir() {
            true => copy_tree(&from, &to)?,
            false => copy_file(&from, &to)?,
        }
    }
    Ok(())
}

/// The model as runtimes beside ours see it: `config.json`'s sizes, `generation_config.json`'s
/// special tokens (each over `config.json`'s) and sampling defaults.
fn model_facts(config: &ModelConfig, dir: &Path) -> Result<ModelFacts> {
    let gen = GenerationConfig::from_dir(dir)?;
    let mut sampling = BTreeMap::new();
    let numbers =
        [("temperature", gen.temperature), ("top_p", gen.top_p), ("repetition_penalty", gen.repetition_penalty)];
    for (key, value) in numbers {
        if let Some(v) = value {
            sampling.insert(key.to_string(), serde_json::json!(v));
        }
    }
    if let Some(v) = gen.do_sample {
        sampling.insert("do_sample".to_string(), serde_json::json!(v));
    }
    if let Some(v) = gen.top_k {
        sampling.insert("top_k".to_string(), serde_json::json!(v));
    }
    Ok(ModelFacts {
        model_type: config.model_type.clone().unwrap_or_else(|| config.architecture.clone()),
        vocab_size: config.vocab_size,
        hidden_size: config.hidden_size,
        num_layers: config.num_hidden_layers,
        shared_kv_layers: config.layers.iter().filter_map(|l| l.attention()).filter(|a| a.kv_source.is_some()).count(),
        num_heads: config.num_attention_heads,
        num_kv_heads: config.num_key_value_heads,
        head_dim: config.head_dim,
        context_length: hfexport_models::max_context(config) as usize,
        bos_token_id: gen.bos_token_id.or(config.bos_token_id),
        eos_token_ids: GenerationConfig::stop_token_ids(dir)?,
        pad_token_id: gen.pad_token_id.or(config.pad_token_id),
        sampling,
    })
}

/// Verifies an existing export folder against the checkpoint it was made from: rebuilds the
/// plan with the export's config, dtype and generation options (read back from the components'
/// roles and caches), runs every component in its runtime and its graph in the reference
/// evaluator (as `--verify` does before commit). export.json is not changed.
pub fn verify_export(dir: &Path, checkpoint: &Path) -> Result<Verification> {
    let meta = ExportMetadata::read(dir)?;
    hfexport_core::integrity::check_component_sizes(dir, &meta)?;
    let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(&meta.config)?)?.with_verify(true);
    exporter.check_verify_available()?;
    let dtype = DType::from_user_name(&meta.dtype)
        .ok_or_else(|| Error::Unsupported(format!("export.json: dtype `{}` is not valid", meta.dtype)))?;
    let task = Task::parse(&meta.task).map_err(|e| Error::Unsupported(format!("export.json: {e}")))?;
    let generation = meta.by_role(Role::Decode).map(|decode| {
        let static_cache = decode.static_slots();
        Generation { static_cache, multi_token_decode: static_cache.is_some() && meta.by_role(Role::Prefill).is_none() }
    });
    let req = ExportRequest {
        model: checkpoint.to_path_buf(),
        output: dir.to_path_buf(),
        task: Some(task),
        dtype,
        force: false,
        generation,
    };
    let ckpt = Checkpoint::open(checkpoint)?;
    let components = exporter.plan(&req, &ckpt)?.components;
    let mut described = vec![];
    for c in &components {
        described.push(meta.component(&c.spec.name)?.clone());
    }
    exporter.verify_all(&components, &described, &ckpt, dir, dtype, &mut ProgressLines(&mut |_| {}))
}

/// Whether a rope's tables depend on the longest position of the call (longrope's short and
/// long factors), not only on each token's position.
fn rope_depends_on_call_length(model: &ModelConfig) -> bool {
    let longrope = |r: &hfexport_core::RopeConfig| matches!(r.scaling, hfexport_core::RopeScaling::LongRope { .. });
    longrope(&model.rope) || model.sliding_rope.as_ref().is_some_and(longrope)
}
