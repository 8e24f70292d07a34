//! The facade a product depends on: `hfexport = { default-features = false, features = ["onnx"] }`.
//!
//! [`AutoHfExporter`] picks the backend from an [`ExportConfig`] (as `AutoHfExporter` does in
//! `transformers.exporters`); each backend sits behind a cargo feature of its name, and a
//! format whose feature is off is an error that names the feature. The rooms:
//!
//! - [`exporter`]: the one pipeline (plan, shapes, staged folder, backend passes and writer,
//!   `export.json`, commit) and [`verify_export`];
//! - [`backends`](mod@backends): the list of backends compiled in (the only place naming format features);
//! - [`verification`]: any component in its runtime against the reference evaluator;
//! - [`samples`]: sample inputs fitted to a component's I/O contract;
//! - [`audio`] and [`image`]: a WAV to Whisper's features, a PNG or JPEG to a vision tower's
//!   pixel values, as transformers' preprocessors compute them;
//! - [`error`]: the error type.

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
pub use hfexport_quant as quant;

pub mod audio;
pub mod backends;
pub mod ctc;
pub mod error;
pub mod exporter;
pub mod image;
pub mod samples;
pub mod verification;

pub use backends::{backend, backends};
pub use error::{Error, Result};
pub use exporter::{
    verify_export, AutoHfExporter, ExportPlan, ExportProgress, ExportRequest, Generation, Progress, ProgressLines,
    COPIED_FILES,
};
pub use hfexport_core::backend::verification_atol;
pub use hfexport_core::{AutoExportConfig, DType, Evaluator, ExportConfig, ExportFormat, Graph, LatentForm, Tensor};
pub use hfexport_models::{build, BuildOptions, Checkpoint, ModelConfig, Task};
pub use samples::{cases_for, generation_case, sample_cases, sample_sizes, SampleCase};
