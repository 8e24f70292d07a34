//! The error type at the public boundary of `hfexport-onnx`.

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum OnnxError {
    #[error("cannot lower node `{node}` ({op}) to ONNX: {msg}")]
    Lowering { node: String, op: String, msg: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("weight `{tensor}`: wrote {actual} bytes, expected {expected}")]
    WeightSize { tensor: String, expected: u64, actual: u64 },
    #[error(transparent)]
    Core(#[from] hfexport_core::Error),
    /// The ONNX Runtime runner (feature `runtime`): the library is missing, or a model failed
    /// to load or run. The message names the file.
    #[error("{0}")]
    Runtime(String),
}

pub type Result<T, E = OnnxError> = std::result::Result<T, E>;
