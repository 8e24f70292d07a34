//! The ONNX exporter of one component: core passes (patches, decomposition of the high-level
//! ops this opset cannot express), then the streaming writer.

use crate::lower::{native, OPSET_NATIVE_LLM_OPS};
use crate::writer::{write_component, Progress};
use crate::Result;
use hfexport_core::config::{ExportFormat, OnnxConfig};
use hfexport_core::passes::{Pass, PassManager, PatchRegistry, Stage};
use hfexport_core::{Graph, Op, TensorSource};
use std::collections::BTreeMap;
use std::path::Path;

/// Opset written when the config names none.
pub const DEFAULT_OPSET: u32 = 21;

/// The runtime the exports are built and checked for.
pub fn runtime_pins() -> BTreeMap<String, String> {
    BTreeMap::from([("onnxruntime".to_string(), "1.32.0".to_string())])
}

/// What one component export produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub files: Vec<String>,
    pub opset: u32,
    pub patches_applied: Vec<String>,
    /// The graph as written (after decomposition), for verification and metadata.
    pub graph: Graph,
}

/// Decomposition selectors (a pass takes a plain fn): below opset 23 every high-level op is
/// expanded, from 23 on only those without a native lowering.
fn decompose_before_native_ops(op: &Op) -> bool {
    !native(op, OPSET_NATIVE_LLM_OPS - 1)
}

fn decompose_with_native_ops(op: &Op) -> bool {
    !native(op, OPSET_NATIVE_LLM_OPS)
}

pub fn export_component(
    graph: &Graph,
    src: &dyn TensorSource,
    dir: &Path,
    component: &str,
    cfg: &OnnxConfig,
    progress: Progress,
) -> Result<Written> {
    let opset = cfg.opset_version.unwrap_or(DEFAULT_OPSET);
    let mut pm = PassManager::new(PatchRegistry::builtin(), runtime_pins());
    pm.add(Pass::Patches { stage: Stage::Build, format: None })
        .add(Pass::FoldSlidingWindows)
        .add(if opset >= OPSET_NATIVE_LLM_OPS {
            Pass::Decompose { name: "onnx-opset23", select: decompose_with_native_ops }
        } else {
            Pass::Decompose { name: "onnx", select: decompose_before_native_ops }
        })
        .add(Pass::Patches { stage: Stage::Backend, format: Some(ExportFormat::Onnx) });
    let (g, report) = pm.run(graph.clone())?;
    let files = write_component(&g, src, dir, component, opset, progress)?;
    Ok(Written { files, opset, patches_applied: report.patches_applied, graph: g })
}
