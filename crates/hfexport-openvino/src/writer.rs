//! Writes lowered networks: one `.bin` (every `Const`'s bytes, weights streamed one chunk at a
//! time through the core [`WeightSink`], 64-byte aligned, each distinct weight once across components) and each component's
//! XML (`openvino_model.xml` for a lone component, else `openvino_<component>.xml`) with its
//! `Const`s' `offset` and `size` in that `.bin`.

use crate::ir::Network;
use crate::lower::{lower, ConstSource, LowerOptions};
use crate::{OvError, Result};
use hfexport_core::backend::{distinct_weights, WeightProgress, WeightTable};
use hfexport_core::plan::{merged_seq2seq, Planned, Role};
use hfexport_core::sink::WeightSink;
use hfexport_core::{DType, Graph, TensorSource, WeightExpr};
use std::io::Write;
use std::path::Path;

/// Alignment of each constant in the `.bin` (the reader needs none; it helps mmap'd loads).
pub const ALIGN: u64 = 64;

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> OvError + '_ {
    move |source| OvError::Io { path: path.to_path_buf(), source }
}

/// The XML of a component: `openvino_model.xml` for a lone one, whatever its name (a forward
/// `model`, or a stateful generation export's `decode`: where optimum-intel, OpenVINO GenAI and
/// sentence-transformers' openvino backend look); an encoder-decoder over a growing cache's
/// `openvino_encoder_model.xml` and `openvino_decoder_model.xml` (optimum-intel's
/// `OVModelForSeq2SeqLM`); else `openvino_<c>.xml`.
pub fn xml_name(components: &[Planned], component: &Planned) -> String {
    match (components, component.spec.role) {
        ([_], _) => "openvino_model.xml".into(),
        (_, Role::Encoder) if merged_seq2seq(components) => "openvino_encoder_model.xml".into(),
        (_, Role::Decode) if merged_seq2seq(components) => "openvino_decoder_model.xml".into(),
        _ => format!("openvino_{}.xml", component.spec.name),
    }
}

/// The weights file of an export: `openvino_model.bin`, beside a lone component's XML (where
/// `read_model` looks by default) or shared by all when there are several.
pub const BIN_NAME: &str = "openvino_model.bin";

/// Writes every component's XML and one `.bin` holding their constants, each distinct weight
/// once; returns the file names of each component (its XML, then the `.bin`).
pub fn write_components(
    components: &[Planned],
    src: &dyn TensorSource,
    dir: &Path,
    opts: LowerOptions,
    progress: WeightProgress,
) -> Result<Vec<Vec<String>>> {
    let bin_name = BIN_NAME.to_string();
    let bin_path = dir.join(&bin_name);
    let mut out = WeightSink::create(&bin_path).map_err(io_err(&bin_path))?;
    let mut table = WeightTable::<(u64, u64)>::default();
    let mut inline = std::collections::HashMap::<Vec<u8>, (u64, u64)>::new();
    let total = distinct_weights(components);
    let mut done = 0usize;
    let mut files = vec![];
    for c in components {
        let g = &c.graph;
        let lowered = lower(g, opts)?;
        let mut net: Network = lowered.net;
        for (path, source) in &lowered.consts {
            let mut append = |write: &mut dyn FnMut(&mut dyn Write) -> Result<u64>| -> Result<(u64, u64)> {
                let at = out.align_to(ALIGN).map_err(io_err(&bin_path))?;
                let size = write(&mut out)?;
                Ok((at, size))
            };
            let (at, size) = match source {
                // small constants (rotary tables, shapes) repeat across components too
                ConstSource::Inline(bytes) => match inline.get(bytes) {
                    Some(&placed) => placed,
                    None => {
                        let placed = append(&mut |out| {
                            out.write_all(bytes).map_err(io_err(&bin_path))?;
                            Ok(bytes.len() as u64)
                        })?;
                        inline.insert(bytes.clone(), placed);
                        placed
                    }
                },
                ConstSource::Packed { index } => {
                    let w = &g.weights()[*index];
                    let packed = WeightExpr::Pack { expr: Box::new(w.expr.clone()), high_first: false, per_row: false };
                    table.place(&packed, || {
                        progress(done, total, &w.name).map_err(io_err(&bin_path))?;
                        done += 1;
                        append(&mut |out| packed.stream_le_bytes(src, &mut |b| out.write_all(b)).map_err(OvError::from))
                    })?
                }
                ConstSource::Weight { index, compress } => {
                    let w = &g.weights()[*index];
                    // a compressed copy is another tensor than the plain one
                    let key =
                        if *compress { WeightExpr::Cast(Box::new(w.expr.clone()), DType::F16) } else { w.expr.clone() };
                    table.place(&key, || {
                        progress(done, total, &w.name).map_err(io_err(&bin_path))?;
                        done += 1;
                        append(&mut |out| write_weight(g, *index, *compress, src, out))
                    })?
                }
            };
            let data = &mut net.layer_mut(path).expect("a lowered constant's path").data;
            data.push(("offset", at.to_string()));
            data.push(("size", size.to_string()));
        }
        let xml_name = xml_name(components, c);
        let xml_path = dir.join(&xml_name);
        std::fs::write(&xml_path, net.to_xml(&g.name)).map_err(io_err(&xml_path))?;
        files.push(vec![xml_name, bin_name.clone()]);
    }
    out.finish().map_err(io_err(&bin_path))?;
    if merged_seq2seq(components) {
        link_bins_beside_xmls(dir, &mut files)?;
    }
    Ok(files)
}

/// Gives each XML of `files` a `.bin` of its own name, hard-linked to the shared one (no second
/// copy of the bytes): optimum-intel's encoder-decoder classes read each IR with
/// `read_model(xml)`, which looks for the `.bin` beside the XML under the same name.
fn link_bins_beside_xmls(dir: &Path, files: &mut [Vec<String>]) -> Result<()> {
    for f in files.iter_mut() {
        let own = f[0].replace(".xml", ".bin");
        let (shared, link) = (dir.join(&f[1]), dir.join(&own));
        std::fs::hard_link(&shared, &link).map_err(io_err(&link))?;
        f[1] = own;
    }
    std::fs::remove_file(dir.join(BIN_NAME)).map_err(io_err(&dir.join(BIN_NAME)))
}

/// Streams weight `index` of `g` into `out` (narrowed to f16 when `compress`); its byte size.
fn write_weight(g: &Graph, index: usize, compress: bool, src: &dyn TensorSource, out: &mut dyn Write) -> Result<u64> {
    let w = &g.weights()[index];
    let info = g.info(w.value);
    let numel: u64 = info.shape.iter().map(|d| d.as_const().unwrap_or(0) as u64).product();
    let (expected, read, written) = if compress {
        let mut f16 = F16Sink::default();
        let read = w.expr.stream_le_bytes(src, &mut |b| f16.push(b, out))?;
        (numel * 4, read, f16.written)
    } else {
        let read = w.expr.stream_le_bytes(src, &mut |b| out.write_all(b))?;
        (numel * info.dtype.size() as u64, read, read)
    };
    if read != expected {
        return Err(OvError::WeightSize { tensor: w.name.clone(), expected, actual: read });
    }
    Ok(written)
}

/// Narrows streamed little-endian f32 bytes to f16 (`compress_to_fp16`), carrying a float split
/// across chunks.
#[derive(Default)]
struct F16Sink {
    carry: Vec<u8>,
    written: u64,
}

impl F16Sink {
    fn push(&mut self, bytes: &[u8], out: &mut dyn Write) -> std::io::Result<()> {
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(bytes);
        let whole = buf.len() / 4 * 4;
        let narrowed: Vec<u8> = buf[..whole]
            .chunks_exact(4)
            .flat_map(|c| half::f16::from_f32(f32::from_le_bytes([c[0], c[1], c[2], c[3]])).to_le_bytes())
            .collect();
        out.write_all(&narrowed)?;
        self.written += narrowed.len() as u64;
        self.carry = buf[whole..].to_vec();
        Ok(())
    }
}
