//! The facade a product depends on: `hfexport = { default-features = false, features = ["onnx"] }`.
//!
//! [`AutoHfExporter`] picks the exporter from an [`ExportConfig`] (as `AutoHfExporter` does
//! in `transformers.exporters`); each backend sits behind a cargo feature of its name, and a
//! format whose feature is off is an error that names the feature. An export builds the graph
//! from the checkpoint, applies the config's shapes, writes into a staging folder, adds
//! `export.json` and the config/tokenizer files, and moves the folder into place only then.

pub use hfexport_core as core;
pub use hfexport_models as models;
#[cfg(feature = "onnx")]
pub use hfexport_onnx as onnx;

pub use hfexport_core::{AutoExportConfig, DType, Evaluator, ExportConfig, ExportFormat, Graph, Tensor};
pub use hfexport_models::{build, BuildOptions, Checkpoint, ModelConfig, Task};

use hfexport_core::artifact::StagedDir;
use hfexport_core::metadata::{self, Component, ExportMetadata, Source};
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
    #[error("{0}")]
    Unsupported(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
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
}

/// Progress of a long export, for a command line or a log.
pub type Progress<'a> = &'a mut dyn FnMut(&str);

/// Picks the exporter for a config.
#[derive(Debug, Clone)]
pub struct AutoHfExporter {
    config: ExportConfig,
}

impl AutoHfExporter {
    pub fn from_config(config: ExportConfig) -> Result<AutoHfExporter> {
        match config.format() {
            ExportFormat::Onnx if cfg!(feature = "onnx") => {}
            ExportFormat::Onnx => {
                return Err(Error::Unsupported("the onnx exporter needs the cargo feature `onnx` of hfexport".into()))
            }
            other => {
                return Err(Error::Unsupported(format!(
                    "the {} exporter is not implemented yet; available: onnx",
                    other.as_str()
                )))
            }
        }
        Ok(AutoHfExporter { config })
    }

    pub fn config(&self) -> &ExportConfig {
        &self.config
    }

    /// Runs the export; the output folder appears only if everything succeeded.
    pub fn export(&self, req: &ExportRequest, progress: Progress) -> Result<ExportMetadata> {
        let ckpt = Checkpoint::open(&req.model)?;
        let mut graph = build(&ckpt.config, &ckpt, req.task, &BuildOptions { dtype: req.dtype, ..Default::default() })?;
        let runtime_checks = hfexport_core::dynamic::apply(&mut graph, self.config.common(), &sample_sizes())?;
        let staged = StagedDir::create(&req.output, req.force)?;
        progress(&format!("building {} for {}", self.config.format().as_str(), ckpt.config.architecture));
        let (component, patches_applied, runtime_pins) = self.write(&graph, &ckpt, staged.path(), progress)?;
        copy_side_files(&req.model, staged.path())?;
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
            symbols: metadata::symbols_of(&graph),
            components: vec![component],
            patches_applied,
            runtime_checks,
            runtime_pins,
            verification: None,
        };
        meta.write(staged.path())?;
        staged.commit()?;
        Ok(meta)
    }

    #[allow(unused_variables)]
    fn write(
        &self,
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
                    if i % 16 == 0 || i + 1 == n {
                        progress(&format!("weights {}/{n}: {name}", i + 1));
                    }
                };
                let w = hfexport_onnx::export::export_component(graph, ckpt, dir, "model", cfg, &mut step)?;
                Ok((
                    Component::from_graph("model", graph, w.files),
                    w.patches_applied,
                    hfexport_onnx::export::runtime_pins(),
                ))
            }
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
