//! The OpenVINO [`Backend`]: which ops the IR lowers natively, the writer of all components
//! (one shared `.bin`), the stateful view of a component, and the OpenVINO runner behind the
//! feature `runtime` ([`crate::RUNTIME`]).

use crate::lower::{native, LowerOptions};
use crate::writer::write_components;
use hfexport_core::backend::{compiled_in, Backend, Lowering, ModelFacts, Runtime, WeightProgress, Written};
use hfexport_core::config::{ExportFormat, OpenvinoConfig};
use hfexport_core::graph::{Node, Producer};
use hfexport_core::metadata::Component;
use hfexport_core::plan::Planned;
use hfexport_core::{Error, ExportConfig, Graph, Op, Result, TensorSource};
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

pub(crate) fn openvino_config(cfg: &ExportConfig) -> Result<&OpenvinoConfig> {
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
        _model: &ModelFacts,
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
            Ok(ov) if ov.stateful => c.fold_cache_pairs_into_states().with_beam_idx(),
            _ => c,
        }
    }

    /// Stateful models keep their caches as variables of the infer request.
    fn keeps_cache_in_runtime(&self, cfg: &ExportConfig) -> bool {
        openvino_config(cfg).is_ok_and(|c| c.stateful)
    }

    /// Keys read straight from a state (a stateful export's cache, grown by the new rows) are
    /// what the CPU plugin fuses into `ScaledDotProductAttentionWithKVCache`, which takes
    /// grouped heads as they are and refuses a query axis longer than the new keys.
    fn keeps_query_groups(&self, g: &Graph, attention: &Node, cfg: &ExportConfig) -> bool {
        let from_cache = match g.producer(attention.inputs[1]) {
            Producer::Node { node, .. } => {
                let n = &g.nodes()[node];
                matches!(n.op, Op::Concat { .. } | Op::CacheUpdate)
                    && n.inputs.first().is_some_and(|&v| matches!(g.producer(v), Producer::Input(_)))
            }
            _ => false,
        };
        from_cache && self.keeps_cache_in_runtime(cfg)
    }

    fn runtime(&self) -> Result<&'static dyn Runtime> {
        compiled_in(
            crate::RUNTIME,
            "running OpenVINO exports needs the OpenVINO runner, which is not compiled into this build: build \
             hfexport with the cargo feature `openvino-runtime`",
        )
    }

    fn runtime_name(&self) -> &'static str {
        "openvino"
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
