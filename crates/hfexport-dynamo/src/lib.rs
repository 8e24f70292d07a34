//! The Dynamo exporter: a PyTorch ExportedProgram `.pt2` archive, the file `torch.export.save`
//! writes and `torch.export.load` (torch 2.13) reads, written directly from a core graph.
//!
//! - [`archive`]: reading an archive back with zip-slip and size checks (`hfexport run`);
//! - [`zip`]: the archive container (STORED entries, 64-byte aligned data, zip64);
//! - [`program`]: the serialized ExportedProgram JSON of an ATen graph (schema 8.20);
//! - [`export`]: passes, ATen lowering (`hfexport-aten`) and the archive of one component.

pub mod archive;
pub mod error;
pub mod export;
pub mod program;
pub mod zip;

pub use error::{DynamoError, Result};
