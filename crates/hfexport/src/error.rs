//! The facade's error type: model and core errors (backend errors arrive as core errors), and
//! what only the facade can say (an unsupported request, a failed verification).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Model(#[from] hfexport_models::ModelError),
    #[error(transparent)]
    Core(#[from] hfexport_core::Error),
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
    /// The progress observer asked to stop ([`crate::ExportProgress::cancelled`]); the output
    /// folder does not appear.
    #[error("the export was cancelled")]
    Cancelled,
    /// `--verify` could not compare (an output missing or of another shape, inputs it cannot make).
    #[error("verification in {runtime} failed: {msg}")]
    VerificationFailed { runtime: String, msg: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
