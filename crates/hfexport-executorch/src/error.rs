use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EtError {
    #[error(transparent)]
    Core(#[from] hfexport_core::Error),
    #[error(transparent)]
    Lowering(#[from] hfexport_aten::LowerError),
    #[error(transparent)]
    Program(#[from] crate::program::ProgramError),
    #[error("{0}")]
    Backend(String),
    #[error("{0}")]
    Plan(String),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("constant `{name}`: expected {expected} bytes, the checkpoint gave {actual}")]
    WeightSize { name: String, expected: u64, actual: u64 },
}

pub type Result<T> = std::result::Result<T, EtError>;
