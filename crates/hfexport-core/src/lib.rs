//! The backend-neutral heart of hfexport: dtypes, tensors, symbolic dims, lazy weights.
pub mod dim;
pub mod dtype;
pub mod error;
pub mod rope;
pub mod tensor;
pub mod weights;

pub use dim::{Bindings, Dim, SymRange, Symbol, SymbolScope};
pub use dtype::DType;
pub use error::{Error, Result};
pub use rope::{RopeConfig, RopeScaling};
pub use tensor::{Tensor, TensorData};
pub use weights::{MemorySource, TensorInfo, TensorSource, WeightExpr};
