//! The Dynamo exporter: a PyTorch ExportedProgram `.pt2` archive, the file `torch.export.save`
//! writes and `torch.export.load` (torch 2.13) reads, written directly from a core graph.
//!
//! - [`archive`]: reading an archive back with zip-slip and size checks (`hfexport run`);
//! - [`zip`]: the archive container (STORED entries, 64-byte aligned data, zip64);
//! - [`program`]: the serialized ExportedProgram JSON of an ATen graph (schema 8.20);
//! - [`export`]: passes, ATen lowering (`hfexport-aten`) and the archive of one component;
//! - `runner` (feature `tch`): runs a `.pt2` from Rust with libtorch's kernels;
//! - `generate` (feature `tch`): the greedy loop over a generation export, caches in place.

pub mod archive;
pub mod error;
pub mod export;
#[cfg(feature = "tch")]
pub mod generate;
pub mod program;
#[cfg(feature = "tch")]
pub mod runner;
pub mod zip;

pub use error::{DynamoError, Result};
