//! Writes the components of an export into its `onnx/` folder: a graph each (`model.onnx` for a
//! lone component, else `<c>.onnx`; quantized and half-precision graphs named as transformers.js's
//! `dtype` option looks for them, [`Naming`]), and one `model.onnx.data` they share (every
//! distinct weight once, external, each at an offset aligned to [`ALIGN`]).
//!
//! Weights are streamed: each one is produced by its lazy expression (straight from the
//! checkpoint's mmap, converted in chunks when the dtype changes) into the core
//! [`WeightSink`] (direct I/O, a writer thread), each chunk's source pages released once it is
//! written, so peak memory does not grow with the model or its largest tensor.

use crate::lower::{lower, onnx_dtype, Lowered, MS_DOMAIN};
use crate::proto::{
    tensor_proto::{DataLocation, DataType},
    GraphProto, ModelProto, OperatorSetIdProto, StringStringEntryProto, TensorProto,
};
use crate::{OnnxError, Result};
use hfexport_core::backend::{WeightProgress, WeightTable};
use hfexport_core::config::OnnxQuantOps;
use hfexport_core::plan::{merged_seq2seq, Planned, Role};
use hfexport_core::sink::WeightSink;
use hfexport_core::{DType, TensorSource};
use prost::Message;
use std::io::Write;
use std::path::Path;

/// Offset alignment of tensors in the external data file (lets runtimes mmap them).
pub const ALIGN: u64 = 4096;
/// ONNX IR version written (ONNX 1.16+, ONNX Runtime 1.18+).
pub const IR_VERSION: i64 = 10;

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> OnnxError + '_ {
    move |source| OnnxError::Io { path: path.to_path_buf(), source }
}

/// The folder of every ONNX file of an export: where transformers.js, fastembed and
/// sentence-transformers look for `model.onnx`, and which optimum's search for `*.onnx` under
/// the export folder finds; ONNX Runtime GenAI's `genai_config.json` names the path.
pub const ONNX_DIR: &str = "onnx";

/// How an export's ONNX files are named: the graph of a lone component is `model`, else the
/// component's name; both carry the suffix of transformers.js's `dtype` (`fp32` none, `fp16`
/// `_fp16`, `q4` `_q4`, `q4f16` `_q4f16`, `q8` `_quantized`); the shared weights file is
/// `model<suffix>.onnx.data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Naming {
    pub suffix: &'static str,
}

impl Naming {
    /// The suffix of graphs whose linear weights have `bits` (when quantized) and whose float
    /// dtype is half precision or not.
    pub fn new(bits: Option<u8>, half: bool) -> Naming {
        let suffix = match (bits, half) {
            (Some(4), true) => "_q4f16",
            (Some(4), false) => "_q4",
            (Some(_), _) => "_quantized",
            (None, true) => "_fp16",
            (None, false) => "",
        };
        Naming { suffix }
    }

    /// The graph of `component`, relative to the export folder: a lone component's is `model`;
    /// an encoder-decoder over a growing cache has optimum's and transformers.js's
    /// `encoder_model` and `decoder_model_merged`; any other is named as the component.
    pub fn graph(&self, components: &[Planned], component: &Planned) -> String {
        let merged = merged_seq2seq(components);
        let stem = match (components.len(), component.spec.role) {
            (1, _) => "model",
            (_, Role::Encoder) if merged => "encoder_model",
            (_, Role::Decode) if merged => "decoder_model_merged",
            _ => &component.spec.name,
        };
        format!("{ONNX_DIR}/{stem}{}.onnx", self.suffix)
    }

    /// The weights file, relative to the graphs (the `location` every initializer names).
    pub fn data(&self) -> String {
        format!("model{}.onnx.data", self.suffix)
    }
}

/// Writes each component's graph into `dir`'s [`ONNX_DIR`], all of them reading their weights
/// from one data file in which a weight used by several components is stored once. Returns the
/// file names of each component relative to `dir` (its `.onnx`, then the data file).
#[allow(clippy::too_many_arguments)]
pub fn write_components(
    components: &[Planned],
    src: &dyn TensorSource,
    dir: &Path,
    naming: Naming,
    opset: u32,
    quant_ops: OnnxQuantOps,
    progress: WeightProgress,
) -> Result<Vec<Vec<String>>> {
    let onnx_dir = dir.join(ONNX_DIR);
    std::fs::create_dir_all(&onnx_dir).map_err(io_err(&onnx_dir))?;
    let data_name = naming.data();
    let data_path = onnx_dir.join(&data_name);
    let mut out = WeightSink::create(&data_path).map_err(io_err(&data_path))?;
    let mut table = WeightTable::<(u64, u64)>::default();
    let lowered: Vec<Lowered> = components.iter().map(|c| lower(&c.graph, opset, quant_ops)).collect::<Result<_>>()?;
    // every graph weight and derived initializer, as the table will place them
    let inits: Vec<Vec<Init>> = components.iter().zip(&lowered).map(|(c, l)| initializers_of(&c.graph, l)).collect();
    let total = inits.iter().flatten().map(|i| &i.expr).collect::<std::collections::HashSet<_>>().len();
    let mut done = 0usize;
    let mut files = vec![];
    for ((c, lowered), inits) in components.iter().zip(lowered).zip(inits) {
        let g = &c.graph;
        let mut initializers = Vec::with_capacity(inits.len());
        for init in inits {
            let (at, len) = table.place(&init.expr, || -> Result<(u64, u64)> {
                progress(done, total, &init.name).map_err(io_err(&data_path))?;
                done += 1;
                let numel = init.dims.iter().product::<i64>() as u64;
                let expected = match init.nibbles {
                    true => numel.div_ceil(2),
                    false => numel * init.dtype.size() as u64,
                };
                let at = out.align_to(ALIGN).map_err(io_err(&data_path))?;
                let written = init.expr.stream_le_bytes(src, &mut |b| out.write_all(b))?;
                if written != expected {
                    return Err(OnnxError::WeightSize { tensor: init.source.clone(), expected, actual: written });
                }
                Ok((at, written))
            })?;
            let entry = |k: &str, v: String| StringStringEntryProto { key: Some(k.into()), value: Some(v) };
            initializers.push(TensorProto {
                name: Some(init.name),
                dims: init.dims,
                data_type: Some(match (init.nibbles, init.dtype) {
                    (true, DType::I8) => DataType::Int4 as i32,
                    (true, _) => DataType::Uint4 as i32,
                    (false, d) => onnx_dtype(d) as i32,
                }),
                data_location: Some(DataLocation::External as i32),
                external_data: vec![
                    entry("location", data_name.clone()),
                    entry("offset", at.to_string()),
                    entry("length", len.to_string()),
                ],
                ..Default::default()
            });
        }
        let model = ModelProto {
            ir_version: Some(IR_VERSION),
            opset_import: opset_imports(&lowered.nodes, opset),
            producer_name: Some("hfexport".into()),
            producer_version: Some(env!("CARGO_PKG_VERSION").into()),
            graph: Some(GraphProto {
                name: Some(g.name.clone()),
                node: lowered.nodes,
                initializer: initializers,
                input: lowered.inputs,
                output: lowered.outputs,
                ..Default::default()
            }),
            ..Default::default()
        };
        let model_name = naming.graph(components, c);
        let model_path = dir.join(&model_name);
        std::fs::write(&model_path, model.encode_to_vec()).map_err(io_err(&model_path))?;
        files.push(vec![model_name, format!("{ONNX_DIR}/{data_name}")]);
    }
    out.finish().map_err(io_err(&data_path))?;
    Ok(files)
}

/// One initializer to write: a graph weight or a lowering's derived tensor.
struct Init {
    /// Its ONNX name.
    name: String,
    /// What errors name (the graph weight's name).
    source: String,
    expr: hfexport_core::WeightExpr,
    dtype: hfexport_core::DType,
    dims: Vec<i64>,
    /// Packed 4-bit values (`INT4` / `UINT4`).
    nibbles: bool,
}

/// The graph's weights under their ONNX names, then the lowering's derived initializers; a
/// weight no node reads is left out (gate and up weights a contrib op reads interleaved).
fn initializers_of(g: &hfexport_core::Graph, lowered: &Lowered) -> Vec<Init> {
    let read: std::collections::HashSet<&str> =
        lowered.nodes.iter().flat_map(|n| n.input.iter().map(String::as_str)).collect();
    let weights = g.weights().iter().zip(&lowered.weight_names).filter(|(_, name)| read.contains(name.as_str())).map(
        |(w, name)| {
            let info = g.info(w.value);
            Init {
                name: name.clone(),
                source: w.name.clone(),
                expr: w.expr.clone(),
                dtype: info.dtype,
                dims: info.shape.iter().map(|d| d.as_const().unwrap_or(0)).collect(),
                nibbles: false,
            }
        },
    );
    let derived = lowered.derived.iter().map(|d| Init {
        name: d.name.clone(),
        source: d.name.clone(),
        expr: d.expr.clone(),
        dtype: d.dtype,
        dims: d.dims.clone(),
        nibbles: d.nibbles,
    });
    weights.chain(derived).collect()
}

/// The default domain at `opset`, and ONNX Runtime's contrib domain when a node uses it.
fn opset_imports(nodes: &[crate::proto::NodeProto], opset: u32) -> Vec<OperatorSetIdProto> {
    let mut imports = vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(opset as i64) }];
    if nodes.iter().any(|n| n.domain.as_deref() == Some(MS_DOMAIN)) {
        imports.push(OperatorSetIdProto { domain: Some(MS_DOMAIN.into()), version: Some(1) });
    }
    imports
}
