//! The ONNX [`Backend`]: which ops each opset lowers natively, the writer of all components
//! (one shared external data file), and the ONNX Runtime runner behind the feature `runtime`
//! ([`crate::RUNTIME`]).

use crate::lower::{native, ort_cpu_contrib, OPSET_NATIVE_LLM_OPS};
use crate::writer::{write_components, Naming};
use hfexport_core::backend::{compiled_in, Backend, Lowering, ModelFacts, Runtime, WeightProgress, Written};
use hfexport_core::config::{ExportFormat, OnnxConfig, OnnxQuantOps, OrtFusions};
use hfexport_core::metadata::Component;
use hfexport_core::plan::Planned;
use hfexport_core::{DType, Error, ExportConfig, Op, Result, TensorSource};
use std::collections::BTreeMap;
use std::path::Path;

/// Opset written when the config names none.
pub const DEFAULT_OPSET: u32 = 21;

/// The runtime the exports are built and checked for.
pub fn runtime_pins() -> BTreeMap<String, String> {
    BTreeMap::from([("onnxruntime".to_string(), "1.32.0".to_string())])
}

/// The ONNX backend (`export_format: "onnx"`).
pub struct Onnx;

/// The one instance the facade lists.
pub static BACKEND: Onnx = Onnx;

fn onnx_config(cfg: &ExportConfig) -> Result<&OnnxConfig> {
    match cfg {
        ExportConfig::Onnx(c) => Ok(c),
        other => Err(Error::Config(format!("the onnx backend got a {} config", other.format().as_str()))),
    }
}

/// The opset an export writes.
pub fn opset(cfg: &OnnxConfig) -> u32 {
    let default = if cfg.genai { crate::genai::GENAI_OPSET } else { DEFAULT_OPSET };
    cfg.opset_version.unwrap_or(default)
}

impl Backend for Onnx {
    fn format(&self) -> ExportFormat {
        ExportFormat::Onnx
    }

    fn lowering(&self, op: &Op, cfg: &ExportConfig) -> Lowering {
        let opset = onnx_config(cfg).map_or(OPSET_NATIVE_LLM_OPS - 1, opset);
        let ort_cpu = onnx_config(cfg).is_ok_and(|c| c.ort_fusions == Some(OrtFusions::Cpu));
        // standard ONNX writes any quantized op as `DequantizeLinear` (opset 21+, checked by the config)
        let standard_quant = onnx_config(cfg).is_ok_and(|c| c.quant_ops == OnnxQuantOps::Standard)
            && matches!(op, Op::QuantLinear { .. } | Op::QuantGather { .. });
        if native(op, opset) || (ort_cpu && ort_cpu_contrib(op)) || standard_quant {
            Lowering::Native
        } else {
            Lowering::Decompose
        }
    }

    fn runtime_pins(&self) -> BTreeMap<String, String> {
        runtime_pins()
    }

    fn write(
        &self,
        components: &[Planned],
        src: &dyn TensorSource,
        _model: &ModelFacts,
        dir: &Path,
        cfg: &ExportConfig,
        progress: WeightProgress,
    ) -> Result<Vec<Written>> {
        let cfg = onnx_config(cfg)?;
        if let Some(f) = cfg.ort_fusions.filter(|f| *f != OrtFusions::Cpu) {
            return Err(Error::Config(format!(
                "ort_fusions {f:?} is not implemented (\"cpu\" is: ONNX Runtime's CPU contrib ops)"
            )));
        }
        if cfg.genai {
            crate::genai::check_components(components)?;
        }
        let naming = naming(components, cfg);
        let files = write_components(components, src, dir, naming, opset(cfg), cfg.quant_ops, progress)?;
        Ok(files.into_iter().map(|files| Written { files, note: None }).collect())
    }

    fn check_model(&self, model: &ModelFacts, cfg: &ExportConfig) -> Result<()> {
        match onnx_config(cfg)?.genai {
            true => crate::genai::check_model(model),
            false => Ok(()),
        }
    }

    fn runtime_files(
        &self,
        components: &[Component],
        model: &ModelFacts,
        dir: &Path,
        cfg: &ExportConfig,
    ) -> Result<()> {
        match onnx_config(cfg)?.genai {
            true => crate::genai::write_config(components, model, dir),
            false => Ok(()),
        }
    }

    fn runtime(&self) -> Result<&'static dyn Runtime> {
        compiled_in(
            crate::RUNTIME,
            "running ONNX exports needs the ONNX Runtime runner, which is not compiled into this build: build \
             hfexport with the cargo feature `onnx-runtime`",
        )
    }

    fn runtime_name(&self) -> &'static str {
        "onnxruntime"
    }
}

impl From<crate::OnnxError> for Error {
    fn from(e: crate::OnnxError) -> Error {
        match e {
            crate::OnnxError::Core(c) => c,
            other => Error::Source(Box::new(other)),
        }
    }
}

/// The names of an export's files: its quantization (the linear weights' bits) and whether its
/// graphs compute in half precision (the `logits` or first output is f16).
fn naming(components: &[Planned], cfg: &OnnxConfig) -> Naming {
    let half = components.iter().any(|c| {
        let g = &c.graph;
        g.outputs().first().is_some_and(|p| g.info(p.value).dtype == DType::F16)
    });
    Naming::new(cfg.common.quantizer.as_ref().map(|q| q.weights.bits), half)
}
