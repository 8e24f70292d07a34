//! The `.pt2` backend: after core's passes (decomposition of the high-level ops without a
//! native ATen lowering), each component is lowered to ATen and written as one program of a
//! single archive, `model.pt2`: weights streamed one tensor at a time as raw little-endian
//! files (no pickle anywhere), each distinct weight stored once however many programs use it
//! (their weight configs point at the same `data/weights/weight_N`), lifted constants, the
//! program JSON and the files torch 2.13 requires for each program. Payloads are STORED and
//! 64-byte aligned (torch maps them from the file); the JSON entries (programs, payload
//! configs) are DEFLATE-compressed, which torch's reader inflates: a program's JSON is ~60 KB
//! per decoder layer, ~20% of a tiny checkpoint's archive uncompressed, ~1% compressed.
//!
//! A forward export holds the one program `model` (`torch.export.load(path)` returns it); a
//! generation export holds `prefill` and `decode`, each loaded with
//! `torch.export.pt2_archive._package.load_pt2(path).exported_programs[name]`.

use crate::program::{exported_program, payload_entry, CallStyle, Symbols};
use crate::zip::ZipWriter;
use crate::{DynamoError, Result};
use hfexport_aten::{lower, native, AtenGraph, TensorMeta};
use hfexport_core::backend::{
    compiled_in, Backend, Lowering, ModelFacts, Runtime, WeightProgress, WeightTable, Written as Written_,
};
use hfexport_core::cache_ports;
use hfexport_core::config::ExportFormat;
use hfexport_core::plan::Planned;
use hfexport_core::{Dim, ExportConfig, Graph, Op, TensorSource};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// The archive every `.pt2` export writes, one program per component.
pub const FILE: &str = "model.pt2";
/// Its root folder.
pub const ROOT: &str = "model";

/// The runtime the exports are built and checked for.
pub fn runtime_pins() -> BTreeMap<String, String> {
    BTreeMap::from([("torch".to_string(), "2.13.0".to_string())])
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// The archive, relative to the export folder (every component lists it).
    pub files: Vec<String>,
    /// Distinct weight files stored.
    pub weights: usize,
}

/// The `.pt2` backend (`export_format: "dynamo"`).
pub struct Dynamo;

/// The one instance the facade lists.
pub static BACKEND: Dynamo = Dynamo;

impl Backend for Dynamo {
    fn format(&self) -> ExportFormat {
        ExportFormat::Dynamo
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
        _cfg: &ExportConfig,
        progress: WeightProgress,
    ) -> hfexport_core::Result<Vec<Written_>> {
        let w = write_archive(components, src, dir, progress)?;
        Ok(components.iter().map(|_| Written_ { files: w.files.clone(), note: None }).collect())
    }

    fn runtime(&self) -> hfexport_core::Result<&'static dyn Runtime> {
        compiled_in(
            crate::RUNTIME,
            "running .pt2 exports needs the libtorch runner, which is not compiled into this build: build \
             hfexport with the cargo feature `dynamo-runtime` (hfexport-cli: `tch`) and LIBTORCH=<site-packages>/torch",
        )
    }

    fn runtime_name(&self) -> &'static str {
        "libtorch"
    }
}

impl From<DynamoError> for hfexport_core::Error {
    fn from(e: DynamoError) -> hfexport_core::Error {
        match e {
            DynamoError::Core(c) => c,
            other => hfexport_core::Error::Source(Box::new(other)),
        }
    }
}

/// The call style of a component: generation components (they take `position_ids`, or caches)
/// are called positionally, the forward graph with keywords.
pub fn call_style(g: &Graph) -> CallStyle {
    let generation = g.inputs().iter().any(|p| p.name == "position_ids" || cache_ports::is_past(&p.name))
        || g.outputs().iter().any(|p| cache_ports::is_present(&p.name));
    if generation {
        CallStyle::Positional
    } else {
        CallStyle::Keywords
    }
}

/// Writes [`FILE`] from prepared components: one program per component, named after it.
pub fn write_archive(
    components: &[Planned],
    src: &dyn TensorSource,
    dir: &Path,
    progress: WeightProgress,
) -> Result<Written> {
    let mut names = HashSet::new();
    for c in components {
        let n = c.spec.name.as_str();
        let ok = !n.is_empty() && n.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-');
        if !ok || !names.insert(n) {
            return Err(DynamoError::Core(hfexport_core::Error::Config(format!(
                "component name `{n}` cannot name a .pt2 program (letters, digits, `_`, `-`; unique)"
            ))));
        }
    }
    let lowered: Vec<AtenGraph> = components.iter().map(|c| lower(&c.graph)).collect::<std::result::Result<_, _>>()?;
    let total = {
        let mut seen = HashSet::new();
        components
            .iter()
            .zip(&lowered)
            .flat_map(|(c, a)| a.parameters.iter().map(|(_, _, i)| &c.graph.weights()[*i].expr))
            .filter(|e| seen.insert(*e))
            .count()
    };
    let path = dir.join(FILE);
    let io = |source: std::io::Error| DynamoError::Io { path: path.clone(), source };
    let mut zip = ZipWriter::create(&path, ROOT).map_err(io)?;
    // each distinct weight: its file and byte size
    let mut table: WeightTable<(String, u64)> = WeightTable::default();
    let mut constants = 0usize;
    for (c, aten) in components.iter().zip(&lowered) {
        let (g, program) = (&c.graph, c.spec.name.as_str());
        let syms = Symbols::of(g);
        let mut config = serde_json::Map::new();
        for (fqn, value, index) in &aten.parameters {
            let w = &g.weights()[*index];
            let meta = &aten.tensors[value];
            let expected = byte_size(meta);
            let done = table.len();
            let (file, size) = table.place(&w.expr, || -> Result<(String, u64)> {
                progress(done, total, fqn).map_err(io)?;
                let file = format!("weight_{done}");
                let mut streamed = 0u64;
                let mut err = None;
                zip.add_streamed(&format!("data/weights/{file}"), expected, &mut |sink| match w
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
                    None if streamed != expected => {
                        DynamoError::WeightSize { tensor: fqn.clone(), expected, actual: streamed }
                    }
                    None => io(e),
                })?;
                Ok((file, expected))
            })?;
            if size != expected {
                // the same weight expression gives the same bytes; a program that types it
                // otherwise is a lowering bug
                return Err(DynamoError::WeightSize { tensor: fqn.clone(), expected, actual: size });
            }
            config.insert(fqn.clone(), payload_entry(&syms, &file, meta, meta.dtype.is_float()));
        }
        zip.add_deflated(&format!("data/weights/{program}_weights_config.json"), &config_json(config)).map_err(io)?;

        let mut config = serde_json::Map::new();
        for (name, value, t) in &aten.constants {
            let file = format!("tensor_{constants}");
            constants += 1;
            zip.add(&format!("data/constants/{file}"), &t.to_le_bytes()).map_err(io)?;
            config.insert(name.clone(), payload_entry(&syms, &file, &aten.tensors[value], false));
        }
        zip.add_deflated(&format!("data/constants/{program}_constants_config.json"), &config_json(config))
            .map_err(io)?;

        let json = exported_program(g, aten, call_style(g));
        zip.add_deflated(&format!("models/{program}.json"), &serde_json::to_vec(&json).expect("json")).map_err(io)?;
        // must exist; empty means "no example inputs" (no pickle needed)
        zip.add(&format!("data/sample_inputs/{program}.pt"), b"").map_err(io)?;
    }
    zip.add("archive_format", b"pt2").map_err(io)?;
    zip.add("archive_version", b"0").map_err(io)?;
    zip.add(".data/version", b"6\n").map_err(io)?;
    zip.add("byteorder", b"little").map_err(io)?;
    zip.finish().map_err(io)?;
    Ok(Written { files: vec![FILE.to_string()], weights: table.len() })
}

fn config_json(entries: serde_json::Map<String, Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({"config": entries})).expect("json")
}

fn byte_size(m: &TensorMeta) -> u64 {
    m.sizes.iter().map(|d: &Dim| d.as_const().unwrap_or(0) as u64).product::<u64>() * m.dtype.size() as u64
}
