//! The ATen side shared by the two PyTorch-family writers (`.pt2` and `.pte` both speak ATen):
//! [`graph`], a graph of ATen operator calls with its signature (user inputs, parameters,
//! lifted constants, user outputs, mutated inputs), and [`lower`](mod@lower), the lowering table from core
//! ops to it.

pub mod graph;
pub mod lower;

pub use graph::{Arg, AtenGraph, Call, Output, SymIntArg, TensorMeta};
pub use lower::{lower, native, LowerError};
