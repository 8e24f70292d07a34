use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DynamoError {
    #[error(transparent)]
    Core(#[from] hfexport_core::Error),
    #[error(transparent)]
    Lowering(#[from] hfexport_aten::LowerError),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("weight `{tensor}`: expected {expected} bytes, the checkpoint gave {actual}")]
    WeightSize { tensor: String, expected: u64, actual: u64 },
}

pub type Result<T> = std::result::Result<T, DynamoError>;
