//! The OpenVINO exporter: IR v11 (`openvino_<component>.xml` + `.bin`) written directly from a
//! core graph.
//!
//! - [`ir`]: the in-memory network and its XML form;
//! - [`lower`]: the lowering table from core ops to OpenVINO opset layers (and the stateful
//!   folding of cache pairs into `ReadValue`/`Assign` variables);
//! - [`writer`]: the `.bin` (weights streamed, optionally compressed to f16) and the `.xml`;
//! - [`export`]: passes + writer for one component;
//! - `runtime` and `generate` (cargo feature `runtime`): the runner over the wheel's C library
//!   and the runtime calls of core's generation loop.

pub mod error;
pub mod export;
#[cfg(feature = "runtime")]
pub mod generate;
pub mod ir;
pub mod lower;
#[cfg(feature = "runtime")]
pub mod runtime;
pub mod writer;

pub use error::{OvError, Result};

/// OpenVINO, when the cargo feature `runtime` builds it in ([`export::Openvino`]'s runtime).
#[cfg(feature = "runtime")]
pub const RUNTIME: Option<&'static dyn hfexport_core::backend::Runtime> = Some(&runtime::OpenvinoRuntime);
/// OpenVINO, when the cargo feature `runtime` builds it in ([`export::Openvino`]'s runtime).
#[cfg(not(feature = "runtime"))]
pub const RUNTIME: Option<&'static dyn hfexport_core::backend::Runtime> = None;
