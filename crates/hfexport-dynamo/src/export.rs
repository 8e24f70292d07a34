//! The `.pt2` exporter of one component: core passes (decomposition of the high-level ops
//! without a native ATen lowering), the ATen lowering, then the archive: weights streamed one
//! tensor at a time as raw little-endian files (no pickle anywhere), lifted constants, the
//! program JSON and the files `torch.export.load` requires.

use crate::program::{exported_program, payload_entry, CallStyle, Symbols};
use crate::zip::ZipWriter;
use crate::{DynamoError, Result};
use hfexport_aten::{lower, native, TensorMeta};
use hfexport_core::config::{CommonConfig, ExportFormat};
use hfexport_core::passes::{Pass, PassManager, PatchRegistry, Stage};
use hfexport_core::{Dim, Graph, Op, TensorSource};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// The runtime the exports are built and checked for.
pub fn runtime_pins() -> BTreeMap<String, String> {
    BTreeMap::from([("torch".to_string(), "2.13.0".to_string())])
}

pub type Progress<'a> = &'a mut dyn FnMut(usize, usize, &str);

/// What one component export produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub files: Vec<String>,
    pub patches_applied: Vec<String>,
}

fn decompose_for_aten(op: &Op) -> bool {
    !native(op)
}

/// The call style of a component: generation components (they take `position_ids`, or caches)
/// are called positionally, the forward graph with keywords.
pub fn call_style(g: &Graph) -> CallStyle {
    let generation = g.inputs().iter().any(|p| p.name == "position_ids" || p.name.starts_with("input."))
        || g.outputs().iter().any(|p| p.name.starts_with("output."));
    if generation {
        CallStyle::Positional
    } else {
        CallStyle::Keywords
    }
}

pub fn export_component(
    graph: &Graph,
    src: &dyn TensorSource,
    dir: &Path,
    component: &str,
    _cfg: &CommonConfig,
    progress: Progress,
) -> Result<Written> {
    let mut pm = PassManager::new(PatchRegistry::builtin(), runtime_pins());
    pm.add(Pass::Patches { stage: Stage::Build, format: None })
        .add(Pass::FoldSlidingWindows)
        .add(Pass::Decompose { name: "aten", select: decompose_for_aten })
        .add(Pass::Patches { stage: Stage::Backend, format: Some(ExportFormat::Dynamo) });
    let (g, report) = pm.run(graph.clone())?;
    let aten = lower(&g)?;
    let file = format!("{component}.pt2");
    let path = dir.join(&file);
    let io = |source: std::io::Error| DynamoError::Io { path: path.clone(), source };
    let mut zip = ZipWriter::create(&path, component).map_err(io)?;
    let syms = Symbols::of(&g);

    let mut config = serde_json::Map::new();
    let n = aten.parameters.len();
    for (i, (fqn, value, index)) in aten.parameters.iter().enumerate() {
        progress(i, n, fqn);
        let w = &g.weights()[*index];
        let meta = &aten.tensors[value];
        let expected = byte_size(meta);
        let name = format!("weight_{i}");
        let mut streamed = 0u64;
        let mut err = None;
        zip.add_streamed(&format!("data/weights/{name}"), expected, &mut |sink| match w
            .expr
            .stream_le_bytes(src, &mut |b| sink(b))
        {
            Ok(k) => {
                streamed = k;
                Ok(())
            }
            Err(e) => {
                err = Some(e);
                Err(std::io::Error::other("reading the checkpoint failed"))
            }
        })
        .map_err(|e| match err.take() {
            Some(core) => DynamoError::Core(core),
            None if streamed != expected => DynamoError::WeightSize { tensor: fqn.clone(), expected, actual: streamed },
            None => io(e),
        })?;
        config.insert(fqn.clone(), payload_entry(&syms, &name, meta, true));
    }
    zip.add("data/weights/model_weights_config.json", &config_json(config)).map_err(io)?;

    let mut config = serde_json::Map::new();
    for (i, (name, value, t)) in aten.constants.iter().enumerate() {
        let file = format!("tensor_{i}");
        zip.add(&format!("data/constants/{file}"), &t.to_le_bytes()).map_err(io)?;
        config.insert(name.clone(), payload_entry(&syms, &file, &aten.tensors[value], false));
    }
    zip.add("data/constants/model_constants_config.json", &config_json(config)).map_err(io)?;

    let program = exported_program(&g, &aten, call_style(&g));
    zip.add("models/model.json", &serde_json::to_vec(&program).expect("json")).map_err(io)?;
    // must exist; empty means "no example inputs" (no pickle needed)
    zip.add("data/sample_inputs/model.pt", b"").map_err(io)?;
    zip.add("archive_format", b"pt2").map_err(io)?;
    zip.add("archive_version", b"0").map_err(io)?;
    zip.add(".data/version", b"6\n").map_err(io)?;
    zip.add("byteorder", b"little").map_err(io)?;
    zip.finish().map_err(io)?;
    Ok(Written { files: vec![file], patches_applied: report.patches_applied })
}

fn config_json(entries: serde_json::Map<String, Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({"config": entries})).expect("json")
}

fn byte_size(m: &TensorMeta) -> u64 {
    m.sizes.iter().map(|d: &Dim| d.as_const().unwrap_or(0) as u64).product::<u64>() * m.dtype.size() as u64
}
