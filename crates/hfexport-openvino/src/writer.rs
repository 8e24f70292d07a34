//! Writes a lowered network: `openvino_<component>.bin` (every `Const`'s bytes, weights streamed
//! one tensor at a time, 64-byte aligned) and then `openvino_<component>.xml` with each
//! `Const`'s `offset` and `size`.

use crate::ir::Network;
use crate::lower::{lower, ConstSource, LowerOptions};
use crate::{OvError, Result};
use hfexport_core::{Graph, TensorSource};
use std::io::Write;
use std::path::Path;

/// Alignment of each constant in the `.bin` (the reader needs none; it helps mmap'd loads).
pub const ALIGN: u64 = 64;

pub type Progress<'a> = &'a mut dyn FnMut(usize, usize, &str);

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> OvError + '_ {
    move |source| OvError::Io { path: path.to_path_buf(), source }
}

/// The file names of a component: (`openvino_<c>.xml`, `openvino_<c>.bin`).
pub fn file_names(component: &str) -> (String, String) {
    (format!("openvino_{component}.xml"), format!("openvino_{component}.bin"))
}

pub fn write_component(
    g: &Graph,
    src: &dyn TensorSource,
    dir: &Path,
    component: &str,
    opts: LowerOptions,
    progress: Progress,
) -> Result<Vec<String>> {
    let lowered = lower(g, opts)?;
    let mut net: Network = lowered.net;
    let (xml_name, bin_name) = file_names(component);
    let bin_path = dir.join(&bin_name);
    let file = std::fs::File::create(&bin_path).map_err(io_err(&bin_path))?;
    let mut out = std::io::BufWriter::with_capacity(8 << 20, file);
    let mut offset = 0u64;
    let n_weights = g.weights().len();
    for (layer, source) in &lowered.consts {
        let pad = (ALIGN - offset % ALIGN) % ALIGN;
        out.write_all(&vec![0u8; pad as usize]).map_err(io_err(&bin_path))?;
        offset += pad;
        let size = match source {
            ConstSource::Inline(bytes) => {
                out.write_all(bytes).map_err(io_err(&bin_path))?;
                bytes.len() as u64
            }
            ConstSource::Weight { index, compress } => {
                let w = &g.weights()[*index];
                progress(*index, n_weights, &w.name);
                let info = g.info(w.value);
                let numel: u64 = info.shape.iter().map(|d| d.as_const().unwrap_or(0) as u64).product();
                let (expected, written) = if *compress {
                    let mut f16 = F16Sink::default();
                    let read = w.expr.stream_le_bytes(src, &mut |b| f16.push(b, &mut out))?;
                    (numel * 4, (read, f16.written))
                } else {
                    let read = w.expr.stream_le_bytes(src, &mut |b| out.write_all(b))?;
                    (numel * info.dtype.size() as u64, (read, read))
                };
                if written.0 != expected {
                    return Err(OvError::WeightSize { tensor: w.name.clone(), expected, actual: written.0 });
                }
                written.1
            }
        };
        let data = &mut net.layers[*layer].data;
        data.push(("offset", offset.to_string()));
        data.push(("size", size.to_string()));
        offset += size;
    }
    out.flush().map_err(io_err(&bin_path))?;
    drop(out);
    let xml_path = dir.join(&xml_name);
    std::fs::write(&xml_path, net.to_xml(&g.name)).map_err(io_err(&xml_path))?;
    Ok(vec![xml_name, bin_name])
}

/// Narrows streamed little-endian f32 bytes to f16 (`compress_to_fp16`), carrying a float split
/// across chunks.
#[derive(Default)]
struct F16Sink {
    carry: Vec<u8>,
    written: u64,
}

impl F16Sink {
    fn push(&mut self, bytes: &[u8], out: &mut impl Write) -> std::io::Result<()> {
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
