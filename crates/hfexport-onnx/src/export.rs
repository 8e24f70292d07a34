//! The ONNX [`Backend`]: which ops each opset lowers natively, the writer of all components
//! (one shared external data file), and the ONNX Runtime runner behind the feature `runtime`.

use crate::lower::{native, ort_cpu_contrib, OPSET_NATIVE_LLM_OPS};
use crate::writer::write_components;
use hfexport_core::backend::{Backend, Lowering, ModelFacts, Runner, WeightProgress, Written};
use hfexport_core::config::{ExportFormat, OnnxConfig, OnnxQuantOps, OrtFusions};
use hfexport_core::generation::Generator;
#[cfg(feature = "runtime")]
use hfexport_core::generation::{timed_greedy, Generated};
use hfexport_core::metadata::Component;
use hfexport_core::plan::Planned;
use hfexport_core::{Error, ExportConfig, Op, Result, TensorSource};
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
        let files = write_components(components, src, dir, opset(cfg), cfg.quant_ops, progress)?;
        Ok(files.into_iter().map(|files| Written { files, note: None }).collect())
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

    #[allow(unused_variables)]
    fn open_runner(&self, dir: &Path, component: &Component, cfg: &ExportConfig) -> Result<Box<dyn Runner>> {
        self.runner_available()?;
        #[cfg(feature = "runtime")]
        {
            let runner = crate::runtime::OnnxRunner::load(dir.join(component.file(".onnx")?))?;
            Ok(Box::new(OrtRunner(runner)))
        }
        #[cfg(not(feature = "runtime"))]
        unreachable!("runner_available failed above")
    }

    fn runner_available(&self) -> Result<()> {
        hfexport_core::backend::runner_built(
            cfg!(feature = "runtime"),
            "running ONNX exports needs the ONNX Runtime runner, which is not compiled into this build: build \
             hfexport with the cargo feature `onnx-runtime`",
        )
    }

    fn runtime_name(&self) -> &'static str {
        "onnxruntime"
    }

    #[allow(unused_variables)]
    fn open_generator(&self, dir: &Path) -> Result<Box<dyn Generator>> {
        self.runner_available()?;
        #[cfg(feature = "runtime")]
        {
            Ok(Box::new(OrtGenerator(crate::generate::Generator::load(dir)?)))
        }
        #[cfg(not(feature = "runtime"))]
        unreachable!("runner_available failed above")
    }
}

/// ONNX Runtime behind the [`Runner`] interface: in-place cache outputs (`output.*`) are the
/// caller's bound buffers, not compared.
#[cfg(feature = "runtime")]
struct OrtRunner(crate::runtime::OnnxRunner);

#[cfg(feature = "runtime")]
impl Runner for OrtRunner {
    fn runtime(&self) -> String {
        format!("onnxruntime {}", crate::runtime::loaded_version().unwrap_or_else(|| "(unknown version)".into()))
    }

    fn run(
        &mut self,
        inputs: &BTreeMap<String, hfexport_core::Tensor>,
    ) -> Result<BTreeMap<String, hfexport_core::Tensor>> {
        Ok(self.0.run(inputs)?)
    }

    /// Accuracy level 4 quantizes `A` to int8 per block of `K` (`lower.rs: matmul_nbits`).
    fn quantized_rtol(&self) -> f32 {
        hfexport_core::backend::ACTIVATION_QUANT_RTOL
    }
    fn compares(&self, output: &str) -> bool {
        !output.starts_with("output.")
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

/// [`crate::generate::Generator`] behind the core [`Generator`] interface.
#[cfg(feature = "runtime")]
struct OrtGenerator(crate::generate::Generator);

#[cfg(feature = "runtime")]
impl Generator for OrtGenerator {
    fn runtime(&self) -> String {
        format!("onnxruntime {}", crate::runtime::loaded_version().unwrap_or_else(|| "(unknown version)".into()))
    }

    fn set_fixed_inputs(&mut self, inputs: &BTreeMap<String, hfexport_core::Tensor>) -> Result<()> {
        Ok(self.0.set_fixed_inputs(inputs)?)
    }

    fn generate(&mut self, prompt: &[i64], max_new_tokens: usize, eos: &[i64]) -> Result<Generated> {
        timed_greedy(&mut self.0, prompt, max_new_tokens, eos)
    }
}
