//! The OpenVINO exporter of one component: core passes (patches, decomposition of the
//! high-level ops without a native lowering), then the streaming writer.

use crate::lower::{native, LowerOptions};
use crate::writer::{write_component, Progress};
use crate::Result;
use hfexport_core::config::{ExportFormat, OpenvinoConfig};
use hfexport_core::passes::{Pass, PassManager, PatchRegistry, Stage};
use hfexport_core::{Graph, Op, TensorSource};
use std::collections::BTreeMap;
use std::path::Path;

/// The runtime the exports are built and checked for.
pub fn runtime_pins() -> BTreeMap<String, String> {
    BTreeMap::from([("openvino".to_string(), "2026.4.1".to_string())])
}

/// What one component export produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub files: Vec<String>,
    pub patches_applied: Vec<String>,
    /// The graph as written (after decomposition).
    pub graph: Graph,
}

fn decompose_for_openvino(op: &Op) -> bool {
    !native(op)
}

pub fn export_component(
    graph: &Graph,
    src: &dyn TensorSource,
    dir: &Path,
    component: &str,
    cfg: &OpenvinoConfig,
    progress: Progress,
) -> Result<Written> {
    let mut pm = PassManager::new(PatchRegistry::builtin(), runtime_pins());
    pm.add(Pass::Patches { stage: Stage::Build, format: None })
        .add(Pass::FoldSlidingWindows)
        .add(Pass::Decompose { name: "openvino", select: decompose_for_openvino })
        .add(Pass::Patches { stage: Stage::Backend, format: Some(ExportFormat::Openvino) });
    let (g, report) = pm.run(graph.clone())?;
    let opts = LowerOptions { stateful: cfg.stateful, compress_to_fp16: cfg.compress_to_fp16 };
    let files = write_component(&g, src, dir, component, opts, progress)?;
    Ok(Written { files, patches_applied: report.patches_applied, graph: g })
}
