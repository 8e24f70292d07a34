//! The facade a product depends on: `hfexport = { default-features = false, features = ["onnx"] }`.
//!
//! It re-exports the core IR and the checkpoint loaders; each exporter will sit behind a cargo
//! feature of the same name (`dynamo`, `onnx`, `executorch`, `openvino`), with
//! `AutoHfExporter::from_config` picking one from an [`ExportConfig`]. No exporter exists yet,
//! so the facade only offers what is built: configs, graphs from checkpoints and the
//! reference evaluator.

pub use hfexport_core as core;
pub use hfexport_models as models;

pub use hfexport_core::{AutoExportConfig, DType, Evaluator, ExportConfig, ExportFormat, Graph, Tensor};
pub use hfexport_models::{build, BuildOptions, Checkpoint, ModelConfig, Task};
