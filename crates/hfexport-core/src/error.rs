//! The error type at the public boundary of `hfexport-core`.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("tensor: {0}")]
    Tensor(String),
    #[error("symbolic dim: {0}")]
    Dim(String),
    #[error("shape inference failed at node `{node}` ({op}): {msg}")]
    Infer { node: String, op: String, msg: String },
    #[error("graph `{graph}` is invalid: {msg}")]
    Verify { graph: String, msg: String },
    #[error("evaluation failed at node `{node}` ({op}): {msg}")]
    Eval { node: String, op: String, msg: String },
    #[error("input `{input}`: {msg}")]
    Input { input: String, msg: String },
    #[error("weight `{tensor}`: {msg}")]
    Weight { tensor: String, msg: String },
    #[error("export folder: {0}")]
    Artifact(String),
    #[error("export config: {0}")]
    Config(String),
    #[error("pass `{pass}` failed: {source}")]
    Pass {
        pass: String,
        #[source]
        source: Box<Error>,
    },
    /// A generation loop's own check failed (an empty prompt, a full static cache, a folder
    /// that is no generation export).
    #[error("{0}")]
    Generation(String),
    #[error(transparent)]
    Source(Box<dyn std::error::Error + Send + Sync>),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
