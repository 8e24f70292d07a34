//! The OpenVINO [`Backend`]: which ops the IR lowers natively, the writer of all components
//! (one shared `.bin`), the stateful view of a component, and the OpenVINO runner behind the
//! feature `runtime`.

use crate::lower::{native, LowerOptions};
use crate::writer::write_components;
use hfexport_core::backend::{Backend, Lowering, Runner, WeightProgress, Written};
use hfexport_core::config::{ExportFormat, OpenvinoConfig};
use hfexport_core::generation::Generator;
#[cfg(feature = "runtime")]
use hfexport_core::generation::{timed_greedy, Generated};
use hfexport_core::metadata::Component;
use hfexport_core::plan::Planned;
use hfexport_core::{Error, ExportConfig, Op, Result, TensorSource};
use std::collections::BTreeMap;
use std::path::Path;

/// The runtime the exports are built and checked for.
pub fn runtime_pins() -> BTreeMap<String, String> {
    BTreeMap::from([("openvino".to_string(), "2026.4.1".to_string())])
}

/// The OpenVINO backend (`export_format: "openvino"`).
pub struct Openvino;

/// The one instance the facade lists.
pub static BACKEND: Openvino = Openvino;

fn openvino_config(cfg: &ExportConfig) -> Result<&OpenvinoConfig> {
    match cfg {
        ExportConfig::Openvino(c) => Ok(c),
        other => Err(Error::Config(format!("the openvino backend got a {} config", other.format().as_str()))),
    }
}

impl Backend for Openvino {
    fn format(&self) -> ExportFormat {
        ExportFormat::Openvino
    }

    fn lowering(&self, op: &Op, _cfg: &ExportConfig) -> Lowering {
        if native(op) {
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
        let cfg = openvino_config(cfg)?;
        let opts = LowerOptions { stateful: cfg.stateful, compress_to_fp16: cfg.compress_to_fp16 };
        let files = write_components(components, src, dir, opts, progress)?;
        Ok(files.into_iter().map(|files| Written { files, note: None }).collect())
    }

    /// A stateful export keeps its cache pairs as variables of the infer request.
    fn describe(&self, planned: &Planned, files: Vec<String>, cfg: &ExportConfig) -> Component {
        let c = Component::from_planned(planned, files);
        match openvino_config(cfg) {
            Ok(ov) if ov.stateful => c.fold_cache_pairs_into_states(),
            _ => c,
        }
    }

    #[allow(unused_variables)]
    fn open_runner(&self, dir: &Path, component: &Component, cfg: &ExportConfig) -> Result<Box<dyn Runner>> {
        self.runner_available()?;
        #[cfg(feature = "runtime")]
        {
            let runner = crate::runtime::OvRunner::load_component(dir, component)?;
            // f16-compressed weights are held to the tolerance of a float16 export
            let compressed = openvino_config(cfg)?.compress_to_fp16;
            Ok(Box::new(OvComponent { runner, stateful: !component.states.is_empty(), compressed }))
        }
        #[cfg(not(feature = "runtime"))]
        unreachable!("runner_available failed above")
    }

    fn runner_available(&self) -> Result<()> {
        hfexport_core::backend::runner_built(
            cfg!(feature = "runtime"),
            "running OpenVINO exports needs the OpenVINO runner, which is not compiled into this build: build \
             hfexport with the cargo feature `openvino-runtime`",
        )
    }

    fn runtime_name(&self) -> &'static str {
        "openvino"
    }

    #[allow(unused_variables)]
    fn open_generator(&self, dir: &Path) -> Result<Box<dyn Generator>> {
        self.runner_available()?;
        #[cfg(feature = "runtime")]
        {
            Ok(Box::new(OvGeneration(crate::generate::OvGenerator::load(dir)?)))
        }
        #[cfg(not(feature = "runtime"))]
        unreachable!("runner_available failed above")
    }
}

/// OpenVINO (CPU, f32 inference precision) behind the [`Runner`] interface. A stateful model's
/// caches are variables that start at zeros: it is fed without the cache inputs and with
/// `beam_idx` [0], and only its own outputs (`logits`) are compared.
#[cfg(feature = "runtime")]
struct OvComponent {
    runner: crate::runtime::OvRunner,
    stateful: bool,
    compressed: bool,
}

#[cfg(feature = "runtime")]
impl Runner for OvComponent {
    fn runtime(&self) -> String {
        format!("openvino {}", crate::runtime::loaded_version().unwrap_or_else(|| "(unknown version)".into()))
    }

    fn run(
        &mut self,
        inputs: &BTreeMap<String, hfexport_core::Tensor>,
    ) -> Result<BTreeMap<String, hfexport_core::Tensor>> {
        if !self.stateful {
            return Ok(self.runner.run(inputs)?);
        }
        let mut feed: BTreeMap<String, hfexport_core::Tensor> =
            inputs.iter().filter(|(k, _)| !k.starts_with("input.")).map(|(k, v)| (k.clone(), v.clone())).collect();
        let beam = hfexport_core::Tensor::int(hfexport_core::DType::I32, vec![1], vec![0])?;
        feed.insert(crate::lower::BEAM_IDX.into(), beam);
        Ok(self.runner.run(&feed)?)
    }

    fn compares(&self, output: &str) -> bool {
        !(self.stateful && output.starts_with("output."))
    }

    fn stateful(&self) -> bool {
        self.stateful
    }

    fn atol(&self, dtype: hfexport_core::DType) -> f32 {
        let narrowed = self.compressed && dtype == hfexport_core::DType::F32;
        hfexport_core::backend::verification_atol(if narrowed { hfexport_core::DType::F16 } else { dtype })
    }
}

impl From<crate::OvError> for Error {
    fn from(e: crate::OvError) -> Error {
        match e {
            crate::OvError::Core(c) => c,
            other => Error::Source(Box::new(other)),
        }
    }
}

/// [`crate::generate::OvGenerator`] behind the core [`Generator`] interface.
#[cfg(feature = "runtime")]
struct OvGeneration(crate::generate::OvGenerator);

#[cfg(feature = "runtime")]
impl Generator for OvGeneration {
    fn runtime(&self) -> String {
        format!("openvino {}", crate::runtime::loaded_version().unwrap_or_else(|| "(unknown version)".into()))
    }

    fn kind(&self) -> &'static str {
        if self.0.is_stateful() {
            "stateful"
        } else {
            ""
        }
    }

    fn set_fixed_inputs(&mut self, inputs: &BTreeMap<String, hfexport_core::Tensor>) -> Result<()> {
        Ok(self.0.set_fixed_inputs(inputs)?)
    }

    fn generate(&mut self, prompt: &[i64], max_new_tokens: usize, eos: &[i64]) -> Result<Generated> {
        timed_greedy(&mut self.0, prompt, max_new_tokens, eos)
    }
}
