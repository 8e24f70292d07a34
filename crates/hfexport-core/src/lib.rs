//! The backend-neutral heart of hfexport.
//!
//! - [`graph`]: the one graph type (SSA values, symbolic shapes, lazy weights, in-place aliases),
//!   with [`ops`] the closed op set and its shape/dtype inference;
//! - [`dim`]: symbolic dims as an integer polynomial algebra with symbol ranges;
//! - [`decompose`]: high-level ops expanded into primitives; [`passes`]: the pass manager and
//!   the patch registry; [`verify`]: graph invariants; [`dump`]: the stable text form;
//! - [`eval`]: the reference evaluator, the oracle every exported artifact is checked against;
//! - [`plan`]: the typed components of an export; [`cache_ports`]: the names of every cache's
//!   ports; [`backend`]: the one `Backend` trait and the
//!   pipeline every format shares;
//! - [`sink`]: the one streaming file writer of every container's weights (direct I/O, a
//!   writer thread, CRC while streaming);
//! - [`config`]: export configs and `AutoExportConfig`, mirroring the Python names;
//! - [`quant`]: the quantization data the IR and configs carry (schemes, recipe, parts, the
//!   kernel trait) and dequantization; the arithmetic is `hfexport-quant`'s.
//!
//! Nothing here names ONNX, OpenVINO or ATen: backends lower from this crate.

pub mod artifact;
pub mod backend;
pub mod cache_ports;
pub mod config;
pub mod decompose;
pub mod dim;
pub mod dtype;
pub mod dump;
pub mod dynamic;
pub mod error;
pub mod eval;
pub mod fault;
pub mod generation;
pub mod graph;
pub mod integrity;
mod kernels;
pub mod limits;
pub mod metadata;
pub mod ops;
pub mod passes;
pub mod plan;
pub mod quant;
pub mod rope;
pub mod shape_program;
pub mod sink;
pub mod tensor;
pub mod venv;
pub mod verify;
pub mod weights;

pub use config::{AutoExportConfig, ExportConfig, ExportFormat, LatentForm};
pub use dim::{Bindings, Dim, Factor, SymRange, Symbol, SymbolScope};
pub use dtype::DType;
pub use error::{Error, Result};
pub use eval::Evaluator;
pub use graph::{Graph, ValueId, ValueInfo};
/// The error function in f64, which stable Rust lacks (the gate cutoffs of Gemma 3n invert it).
pub use kernels::erf64;
pub use ops::{Activation, BinaryOp, Glu, Op, ReduceKind, RouterScore, Routing, UnaryOp, Window};
pub use quant::{ActivationRounding, QuantForm, QuantKernel, QuantKernelRef, QuantPart, QuantRecipe, QuantScheme};
pub use rope::{RopeConfig, RopeScaling};
pub use tensor::{Tensor, TensorData};
pub use weights::{MemorySource, TensorInfo, TensorSource, WeightExpr};
