//! The one list of backends compiled into this build. This is the only place that names the
//! formats' cargo features; everything else goes through [`hfexport_core::backend::Backend`].

use crate::{Error, Result};
use hfexport_core::backend::Backend;
use hfexport_core::ExportFormat;

/// Every backend compiled in.
pub fn backends() -> Vec<&'static dyn Backend> {
    vec![
        #[cfg(feature = "onnx")]
        &hfexport_onnx::export::BACKEND,
        #[cfg(feature = "openvino")]
        &hfexport_openvino::export::BACKEND,
        #[cfg(feature = "dynamo")]
        &hfexport_dynamo::export::BACKEND,
        #[cfg(feature = "executorch")]
        &hfexport_executorch::export::BACKEND,
    ]
}

/// The backend of `format`, or an error naming the cargo feature that builds it in.
pub fn backend(format: ExportFormat) -> Result<&'static dyn Backend> {
    backends().into_iter().find(|b| b.format() == format).ok_or_else(|| {
        Error::Unsupported(format!("the {0} exporter needs the cargo feature `{0}` of hfexport", format.as_str()))
    })
}
