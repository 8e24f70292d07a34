//! The OpenVINO exporter: IR v11 (`openvino_<component>.xml` + `.bin`) written directly from a
//! core graph.
//!
//! - [`ir`]: the in-memory network and its XML form;
//! - [`lower`]: the lowering table from core ops to OpenVINO opset layers (and the stateful
//!   folding of cache pairs into `ReadValue`/`Assign` variables);
//! - [`writer`]: the `.bin` (weights streamed, optionally compressed to f16) and the `.xml`;
//! - [`export`]: passes + writer for one component.

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
