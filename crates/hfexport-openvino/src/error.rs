use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum OvError {
    #[error(transparent)]
    Core(#[from] hfexport_core::Error),
    #[error("cannot lower node `{node}` ({op}) to OpenVINO: {msg}")]
    Lowering { node: String, op: String, msg: String },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("weight `{tensor}`: expected {expected} bytes, the checkpoint gave {actual}")]
    WeightSize { tensor: String, expected: u64, actual: u64 },
    #[error("OpenVINO: {0}")]
    Runtime(String),
}

pub type Result<T> = std::result::Result<T, OvError>;
