//! The error type at the public boundary of `hfexport-models`.
//!
//! Checkpoints come from users, so every failure has to say *where*: the file, the JSON key or
//! the tensor involved. The variants carry those as structured fields (callers and tests match
//! on them) and the messages print them, so a CLI user can fix the folder without a debugger.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ModelError {
    /// A file or folder could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A repo id the hub cache has no snapshot of (`path`: the cache searched).
    #[error("{msg} (hub cache: {})", path.display())]
    HubCache { path: PathBuf, msg: String },

    /// A JSON file does not parse (`msg` is serde's text, with line and column).
    #[error("{}: invalid JSON: {msg}", path.display())]
    Json { path: PathBuf, msg: String },

    /// A `config.json` key is missing, has the wrong type or an absurd value.
    #[error("{}: `{key}`: {msg}", path.display())]
    Config { path: PathBuf, key: String, msg: String },

    /// `architectures[0]` (or `model_type`) names a model this build does not export: no entry
    /// of the family registry claims it. `nearest`: the closest supported classes.
    #[error(
        "`{class}`{} is not supported by this build of hfexport; nearest supported: {} \
         (`hfexport inspect --supported` lists every class)",
        model_type.as_ref().map(|t| format!(" (model_type `{t}`)")).unwrap_or_default(),
        nearest.join(", ")
    )]
    UnsupportedArchitecture { class: String, model_type: Option<String>, nearest: Vec<String> },

    /// A safetensors file is malformed (header, dtype, shape or offsets).
    #[error("{}: invalid safetensors file: {msg}", path.display())]
    Safetensors { path: PathBuf, msg: String },

    /// A tensor the model needs is not in the checkpoint (`path`: the file or folder searched).
    #[error("tensor `{tensor}` not found in {}", path.display())]
    MissingTensor { tensor: String, path: PathBuf },

    /// A tensor exists but its shape or dtype is not what the model needs.
    #[error("tensor `{tensor}` in {}: expected {expected}, found {actual}", path.display())]
    TensorMismatch { tensor: String, path: PathBuf, expected: String, actual: String },

    /// The same tensor name is stored in two weight files.
    #[error("tensor `{tensor}` is stored twice: in {} and in {}", first.display(), second.display())]
    DuplicateTensor { tensor: String, first: PathBuf, second: PathBuf },

    /// `model.safetensors.index.json` is malformed or names a shard it must not.
    #[error("{}: {msg}", path.display())]
    ShardIndex { path: PathBuf, msg: String },

    /// A checkpoint folder holds no `*.safetensors` file.
    #[error("{}: no weights found (expected model.safetensors, model.safetensors.index.json or *.safetensors{})", dir.display(), if *has_bin { "; pytorch_model.bin is not supported, convert it to safetensors" } else { "" })]
    NoWeights { dir: PathBuf, has_bin: bool },

    #[error(transparent)]
    Core(#[from] hfexport_core::Error),
}

pub type Result<T, E = ModelError> = std::result::Result<T, E>;

impl ModelError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> ModelError {
        ModelError::Io { path: path.into(), source }
    }

    pub(crate) fn json(path: impl Into<PathBuf>, err: &serde_json::Error) -> ModelError {
        ModelError::Json { path: path.into(), msg: err.to_string() }
    }

    pub(crate) fn config(path: impl Into<PathBuf>, key: &str, msg: impl Into<String>) -> ModelError {
        ModelError::Config { path: path.into(), key: key.to_string(), msg: msg.into() }
    }

    pub(crate) fn safetensors(path: impl Into<PathBuf>, msg: impl Into<String>) -> ModelError {
        ModelError::Safetensors { path: path.into(), msg: msg.into() }
    }

    pub(crate) fn shard_index(path: impl Into<PathBuf>, msg: impl Into<String>) -> ModelError {
        ModelError::ShardIndex { path: path.into(), msg: msg.into() }
    }
}
