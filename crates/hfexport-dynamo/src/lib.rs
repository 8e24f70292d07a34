//! The Dynamo exporter: a PyTorch ExportedProgram `.pt2` archive in the layout torch 2.13's
//! `torch.export.save` / `package_pt2` write, written directly from core graphs: one
//! `model.pt2` per export, one program per component (a forward export: `model`, which
//! `torch.export.load` returns; a generation export: `prefill` and `decode`, loaded with
//! `load_pt2(path).exported_programs[name]`), each weight stored once.
//!
//! - [`archive`]: reading an archive back with zip-slip and size checks (`hfexport run`);
//! - [`zip`]: the archive container (STORED entries, 64-byte aligned data, zip64);
//! - [`program`]: the serialized ExportedProgram JSON of an ATen graph (schema 8.20);
//! - [`export`]: the backend: ATen lowering (`hfexport-aten`) of each component and the archive;
//! - `runner` (feature `tch`): runs a program of a `.pt2` from Rust with libtorch's kernels;
//! - `generate` (feature `tch`): the runtime calls of core's generation loop, caches in place.

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

/// libtorch, when the cargo feature `tch` builds it in ([`export::Dynamo`]'s runtime).
#[cfg(feature = "tch")]
pub const RUNTIME: Option<&'static dyn hfexport_core::backend::Runtime> = Some(&runner::LibtorchRuntime);
/// libtorch, when the cargo feature `tch` builds it in ([`export::Dynamo`]'s runtime).
#[cfg(not(feature = "tch"))]
pub const RUNTIME: Option<&'static dyn hfexport_core::backend::Runtime> = None;
