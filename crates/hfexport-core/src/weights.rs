//! Lazy weights: a graph names checkpoint tensors and the transforms to apply to them; bytes
//! are produced one tensor at a time, when a writer or the evaluator asks for them.
//!
//! This is what lets an exporter stream a model far larger than memory: the graph holds only
//! names, shapes and a short transform chain per weight, and a [`TensorSource`] (the mmapped
//! checkpoint of `hfexport-models`) materialises one tensor on demand.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::quant::{QuantKernelRef, QuantPart, QuantScheme};
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Shape and dtype of a stored tensor, known without reading its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// Where lazy weights come from (a checkpoint, or an in-memory map in tests and benches).
pub trait TensorSource: Send + Sync {
    /// Dtype and shape of `name`, without reading its data.
    fn info(&self, name: &str) -> Result<TensorInfo>;
    /// Materialises `name` (decoded from its stored dtype, nothing else applied).
    fn load(&self, name: &str) -> Result<Tensor>;
    /// The stored little-endian bytes of `name` without a copy, where the source has them
    /// (an mmapped file); lets writers stream and convert a weight in chunks.
    fn raw(&self, _name: &str) -> Option<&[u8]> {
        None
    }
    /// Tells the source a writer is done with `name` (an mmapped file drops its pages, so
    /// resident memory does not grow with the model).
    fn release(&self, _name: &str) {}
    /// Tells the source a writer is done with `bytes`, a piece of what [`TensorSource::raw`]
    /// returned: an mmapped file drops those pages as soon as each chunk is written, so that
    /// resident memory stays flat even within a tensor of many gigabytes.
    fn release_bytes(&self, _bytes: &[u8]) {}
}

/// Elements converted per chunk when streaming a cast weight (and stored bytes handed on per
/// chunk, each released after it): what a writer holds of one tensor at a time.
pub const STREAM_CHUNK: usize = 1 << 20;
/// Elements per parallel task when converting a chunk (rayon splits a chunk this finely).
pub const PAR_CHUNK: usize = 1 << 16;

/// How to produce a weight's value from stored tensors.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WeightExpr {
    /// A stored tensor, by its checkpoint name.
    Stored(String),
    /// Converted to another dtype (e.g. bf16 checkpoint weights exported as f32).
    Cast(Box<WeightExpr>, DType),
    /// A 2-D transpose (e.g. `[out, in]` linear weights for a backend that wants `[in, out]`,
    /// or GPT-2's `Conv1D` weights, stored `[in, out]`).
    Transpose(Box<WeightExpr>),
    /// `x[start..end]` along `axis` (one projection of a fused `qkv_proj` or `gate_up_proj`).
    Slice { expr: Box<WeightExpr>, axis: usize, start: usize, end: usize },
    /// `1 + x` (Gemma's RMSNorm scales by `1 + weight`).
    OnePlus(Box<WeightExpr>),
    /// Rows (entries along axis 0) of `expr` in the order `rows` gives (a projection whose output
    /// channels are reordered: GPT-J's rotate-every-two pairs read as rotate-half ones).
    Rows { expr: Box<WeightExpr>, rows: Vec<usize> },
    /// Equal-shaped parts stacked along a new leading axis (a mixture-of-experts layer's
    /// per-expert weights as one `[experts, out, in]` tensor); streamed part by part.
    Stack(Vec<WeightExpr>),
    /// Equal-shaped parts `[..., rows, cols]` with their rows interleaved into
    /// `[..., n * rows, cols]`: row `n * i + j` is part `j`'s row `i` (ONNX Runtime's fused
    /// SwiGLU experts take gate and up rows alternately). Build it with
    /// [`WeightExpr::interleave_rows`], which keeps a stack streaming part by part.
    Interleave(Vec<WeightExpr>),
    /// One part of a 2-D float weight quantized by `scheme` (see [`crate::quant`]), scales
    /// rounded to `scale_dtype`: computed by `kernel` from whole rows of the float weight while
    /// streaming, one tensor at a time, never stored as float.
    Quantize { expr: Box<WeightExpr>, scheme: QuantScheme, scale_dtype: DType, part: QuantPart, kernel: QuantKernelRef },
    /// 4-bit values (one per byte, i8 or u8: the low nibble of each) packed two per byte, the
    /// even element in the high nibble when `high_first` (ExecuTorch's `embedding_4bit`), else in
    /// the low one (ONNX Runtime, OpenVINO, XNNPACK): each row on its own into
    /// `u8 [..., ceil(n / 2)]` when `per_row` (ONNX Runtime's zero points), else over the flat
    /// tensor into `u8 [ceil(numel / 2)]` (OpenVINO's `u4`/`i4` constants).
    Pack { expr: Box<WeightExpr>, high_first: bool, per_row: bool },
    /// Each element repeated `times` times along the last axis, `[..., n]` -> `[..., n * times]`
    /// (per-channel scales spread over the blocks of a kernel that wants small blocks).
    Repeat { expr: Box<WeightExpr>, times: usize },
    /// `expr[index]`: one entry of the leading axis, that axis dropped (one expert of a stored
    /// `[experts, ...]` tensor); reads only that entry's bytes where the source has raw bytes.
    Item { expr: Box<WeightExpr>, index: usize },
    /// MXFP4 blocks decoded to f32 (see [`crate::quant::decode_mxfp4`]): u8 `blocks
    /// [..., groups, 16]` and `scales [..., groups]` -> `[..., groups * 32]`.
    Mxfp4 { blocks: Box<WeightExpr>, scales: Box<WeightExpr> },
}

impl WeightExpr {
    pub fn stored(name: &str) -> WeightExpr {
        WeightExpr::Stored(name.to_string())
    }

    /// The stored tensors this expression reads.
    pub fn sources(&self) -> Vec<&str> {
        match self {
            WeightExpr::Stored(n) => vec![n.as_str()],
            WeightExpr::Cast(e, _) | WeightExpr::Transpose(e) | WeightExpr::OnePlus(e) => e.sources(),
            WeightExpr::Slice { expr, .. }
            | WeightExpr::Quantize { expr, .. }
            | WeightExpr::Pack { expr, .. }
            | WeightExpr::Repeat { expr, .. }
            | WeightExpr::Item { expr, .. }
            | WeightExpr::Rows { expr, .. } => expr.sources(),
            WeightExpr::Mxfp4 { blocks, scales } => [blocks.sources(), scales.sources()].concat(),
            WeightExpr::Stack(parts) | WeightExpr::Interleave(parts) => {
                parts.iter().flat_map(WeightExpr::sources).collect()
            }
        }
    }

    /// Quantized values as the unsigned codes `q + 2^(bits-1)` that block-quantized kernels
    /// with an implicit zero point take (ONNX Runtime's `MatMulNBits`, XNNPACK's `qbint4`);
    /// any other expression (already unsigned, scales, zero points) unchanged.
    pub fn as_unsigned(self) -> WeightExpr {
        match self {
            WeightExpr::Quantize { expr, scheme, scale_dtype, part: QuantPart::Values, kernel } => {
                WeightExpr::Quantize { expr, scheme, scale_dtype, part: QuantPart::Unsigned, kernel }
            }
            other => other,
        }
    }

    /// `parts` with their rows interleaved; when every part is a stack of the same length (or
    /// a cast of one), the interleave goes inside: a stack of per-item interleaves, which still
    /// streams one item at a time.
    pub fn interleave_rows(parts: Vec<WeightExpr>) -> WeightExpr {
        let stacked = |e: &WeightExpr| -> Option<Vec<WeightExpr>> {
            match e {
                WeightExpr::Stack(items) => Some(items.clone()),
                WeightExpr::Cast(inner, to) => match &**inner {
                    WeightExpr::Stack(items) => {
                        Some(items.iter().map(|i| WeightExpr::Cast(Box::new(i.clone()), *to)).collect())
                    }
                    _ => None,
                },
                _ => None,
            }
        };
        let stacks: Option<Vec<Vec<WeightExpr>>> = parts.iter().map(stacked).collect();
        match stacks {
            Some(stacks) if stacks.windows(2).all(|w| w[0].len() == w[1].len()) && !stacks.is_empty() => {
                let n = stacks[0].len();
                WeightExpr::Stack(
                    (0..n).map(|i| WeightExpr::Interleave(stacks.iter().map(|s| s[i].clone()).collect())).collect(),
                )
            }
            _ => WeightExpr::Interleave(parts),
        }
    }

    /// `self[start..end]` along `axis`.
    pub fn slice(self, axis: usize, start: usize, end: usize) -> WeightExpr {
        WeightExpr::Slice { expr: Box::new(self), axis, start, end }
    }

    /// Dtype and shape of the result, from the stored tensors' metadata only.
    pub fn info(&self, src: &dyn TensorSource) -> Result<TensorInfo> {
        match self {
            WeightExpr::Stored(n) => src.info(n),
            WeightExpr::Cast(e, d) => Ok(TensorInfo { dtype: *d, ..e.info(src)? }),
            WeightExpr::Transpose(e) => {
                let i = e.info(src)?;
                match i.shape.as_slice() {
                    [a, b] => Ok(TensorInfo { dtype: i.dtype, shape: vec![*b, *a] }),
                    s => Err(Error::Weight {
                        tensor: e.sources().join(","),
                        msg: format!("transpose needs a 2-D tensor, got shape {s:?}"),
                    }),
                }
            }
            WeightExpr::OnePlus(e) => e.info(src),
            WeightExpr::Slice { expr, axis, start, end } => {
                let mut i = expr.info(src)?;
                check_slice(expr, &i.shape, *axis, *start, *end)?;
                i.shape[*axis] = end - start;
                Ok(i)
            }
            WeightExpr::Stack(parts) => {
                let info = alike(parts, src)?;
                let shape = std::iter::once(parts.len()).chain(info.shape).collect();
                Ok(TensorInfo { dtype: info.dtype, shape })
            }
            WeightExpr::Interleave(parts) => {
                let info = alike(parts, src)?;
                let mut shape = info.shape.clone();
                match shape.len() {
                    r if r >= 2 => shape[r - 2] *= parts.len(),
                    _ => {
                        return Err(Error::Weight {
                            tensor: self.sources().join(","),
                            msg: format!("interleaving rows needs rank >= 2, got shape {:?}", info.shape),
                        })
                    }
                }
                Ok(TensorInfo { dtype: info.dtype, shape })
            }
            WeightExpr::Quantize { expr, scheme, scale_dtype, part, .. } => {
                let i = expr.info(src)?;
                let [rows, cols] = i.shape[..] else {
                    return Err(Error::Weight {
                        tensor: expr.sources().join(","),
                        msg: format!("only 2-D weights are quantized, got shape {:?}", i.shape),
                    });
                };
                let groups = cols / scheme.group_len(&expr.sources().join(","), cols)?;
                Ok(match part {
                    QuantPart::Values => TensorInfo { dtype: scheme.value_dtype(), shape: vec![rows, cols] },
                    QuantPart::Unsigned => TensorInfo { dtype: DType::U8, shape: vec![rows, cols] },
                    QuantPart::Scales => TensorInfo { dtype: *scale_dtype, shape: vec![rows, groups] },
                    QuantPart::ZeroPoints => TensorInfo { dtype: DType::U8, shape: vec![rows, groups] },
                })
            }
            WeightExpr::Pack { expr, per_row, .. } => {
                let i = expr.info(src)?;
                if !matches!(i.dtype, DType::I8 | DType::U8) || i.shape.is_empty() {
                    return Err(Error::Weight {
                        tensor: expr.sources().join(","),
                        msg: format!("packing 4-bit values needs i8/u8, got {}{:?}", i.dtype, i.shape),
                    });
                }
                let shape = match per_row {
                    true => {
                        let mut s = i.shape.clone();
                        *s.last_mut().expect("not empty") = s[s.len() - 1].div_ceil(2);
                        s
                    }
                    false => vec![i.shape.iter().product::<usize>().div_ceil(2)],
                };
                Ok(TensorInfo { dtype: DType::U8, shape })
            }
            WeightExpr::Repeat { expr, times } => {
                let mut i = expr.info(src)?;
                if let Some(n) = i.shape.last_mut() {
                    *n *= times;
                }
                Ok(i)
            }
            WeightExpr::Rows { expr, rows } => {
                let mut i = expr.info(src)?;
                check_rows(expr, &i.shape, rows)?;
                i.shape[0] = rows.len();
                Ok(i)
            }
            WeightExpr::Item { expr, index } => {
                let i = expr.info(src)?;
                check_item(expr, &i.shape, *index)?;
                Ok(TensorInfo { dtype: i.dtype, shape: i.shape[1..].to_vec() })
            }
            WeightExpr::Mxfp4 { blocks, scales } => {
                let (b, s) = (blocks.info(src)?, scales.info(src)?);
                let fits = b.dtype == DType::U8
                    && s.dtype == DType::U8
                    && b.shape.len() >= 2
                    && b.shape.last() == Some(&16)
                    && b.shape[..b.shape.len() - 1] == s.shape[..];
                if !fits {
                    return Err(Error::Weight {
                        tensor: self.sources().join(","),
                        msg: format!(
                            "MXFP4 blocks {}{:?} and scales {}{:?} do not fit (u8 [..., groups, 16] and [..., groups])",
                            b.dtype, b.shape, s.dtype, s.shape
                        ),
                    });
                }
                let mut shape = s.shape.clone();
                *shape.last_mut().expect("rank >= 1") *= 32;
                Ok(TensorInfo { dtype: DType::F32, shape })
            }
        }
    }

    /// Materialises the weight.
    pub fn materialize(&self, src: &dyn TensorSource) -> Result<Tensor> {
        match self {
            WeightExpr::Stored(n) => src.load(n),
            WeightExpr::Cast(e, d) => Ok(e.materialize(src)?.cast(*d)),
            WeightExpr::Transpose(e) => {
                let t = e.materialize(src)?;
                let [r, c] = t.shape() else {
                    return Err(Error::Weight {
                        tensor: e.sources().join(","),
                        msg: format!("transpose needs a 2-D tensor, got shape {:?}", t.shape()),
                    });
                };
                let (r, c) = (*r, *c);
                let v = t.cast(DType::F32);
                let data = v.as_f32()?;
                let mut out = vec![0f32; r * c];
                for i in 0..r {
                    for j in 0..c {
                        out[j * r + i] = data[i * c + j];
                    }
                }
                Ok(Tensor::f32(vec![c, r], out)?.cast(t.dtype()))
            }
            WeightExpr::OnePlus(e) => {
                let t = e.materialize(src)?;
                let v: Vec<f32> = t.cast(DType::F32).as_f32()?.iter().map(|x| 1.0 + x).collect();
                Ok(Tensor::f32(t.shape().to_vec(), v)?.cast(t.dtype()))
            }
            WeightExpr::Slice { expr, axis, start, end } => {
                let t = expr.materialize(src)?;
                check_slice(expr, t.shape(), *axis, *start, *end)?;
                let (outer, inner) =
                    (t.shape()[..*axis].iter().product::<usize>(), t.shape()[axis + 1..].iter().product::<usize>());
                let (len, size) = (t.shape()[*axis], t.dtype().size());
                let bytes = t.to_le_bytes();
                let mut out = Vec::with_capacity(outer * (end - start) * inner * size);
                for o in 0..outer {
                    let row = (o * len) * inner * size;
                    out.extend_from_slice(&bytes[row + start * inner * size..row + end * inner * size]);
                }
                let mut shape = t.shape().to_vec();
                shape[*axis] = end - start;
                Tensor::from_le_bytes(t.dtype(), shape, &out)
            }
            WeightExpr::Stack(parts) => {
                let info = self.info(src)?;
                let mut bytes = vec![];
                for p in parts {
                    bytes.extend(p.materialize(src)?.to_le_bytes());
                }
                Tensor::from_le_bytes(info.dtype, info.shape, &bytes)
            }
            WeightExpr::Interleave(parts) => {
                let info = self.info(src)?;
                let part_bytes: Vec<Vec<u8>> =
                    parts.iter().map(|p| Ok(p.materialize(src)?.to_le_bytes())).collect::<Result<_>>()?;
                let cols = info.shape[info.shape.len() - 1];
                let row = cols * info.dtype.size();
                let rows = part_bytes[0].len() / row.max(1);
                let mut bytes = Vec::with_capacity(rows * row * parts.len());
                for i in 0..rows {
                    for p in &part_bytes {
                        bytes.extend_from_slice(&p[i * row..(i + 1) * row]);
                    }
                }
                Tensor::from_le_bytes(info.dtype, info.shape, &bytes)
            }
            WeightExpr::Quantize { expr, scheme, scale_dtype, part, kernel } => {
                let info = self.info(src)?;
                if *part == QuantPart::ZeroPoints && scheme.symmetric {
                    return Err(Error::Weight {
                        tensor: expr.sources().join(","),
                        msg: format!("a {} scheme has no zero points", scheme.label()),
                    });
                }
                let w = expr.materialize(src)?;
                let group = scheme.group_len(&expr.sources().join(","), w.shape()[1])?;
                let q = kernel.quantize(w.cast(DType::F32).as_f32()?, group, scheme, *scale_dtype, *part);
                Tensor::from_le_bytes(info.dtype, info.shape, &q)
            }
            WeightExpr::Pack { expr, high_first, per_row } => {
                let info = self.info(src)?;
                let t = expr.materialize(src)?;
                let row = if *per_row { *t.shape().last().unwrap_or(&1) } else { usize::MAX };
                let mut packer = NibblePacker::new(row, *high_first);
                packer.push(&t.to_le_bytes());
                packer.finish();
                Tensor::from_le_bytes(DType::U8, info.shape, &packer.out)
            }
            WeightExpr::Item { expr, index } => {
                let info = self.info(src)?;
                if let Some((bytes, dtype)) = self.raw_view(src) {
                    return Tensor::from_le_bytes(dtype, info.shape, bytes);
                }
                let t = expr.materialize(src)?;
                let size = t.numel() / t.shape()[0] * t.dtype().size();
                let bytes = t.to_le_bytes();
                Tensor::from_le_bytes(t.dtype(), info.shape, &bytes[index * size..(index + 1) * size])
            }
            WeightExpr::Mxfp4 { blocks, scales } => {
                let info = self.info(src)?;
                let (b, s) = (blocks.materialize(src)?, scales.materialize(src)?);
                Tensor::f32(info.shape, crate::quant::decode_mxfp4(&b.to_le_bytes(), &s.to_le_bytes()))
            }
            WeightExpr::Rows { expr, rows } => {
                let t = expr.materialize(src)?;
                check_rows(expr, t.shape(), rows)?;
                let row = t.shape()[1..].iter().product::<usize>() * t.dtype().size();
                let bytes = t.to_le_bytes();
                let out: Vec<u8> = rows.iter().flat_map(|&r| &bytes[r * row..(r + 1) * row]).copied().collect();
                let mut shape = t.shape().to_vec();
                shape[0] = rows.len();
                Tensor::from_le_bytes(t.dtype(), shape, &out)
            }
            WeightExpr::Repeat { expr, times } => {
                let t = expr.materialize(src)?;
                let size = t.dtype().size();
                let bytes: Vec<u8> = t
                    .to_le_bytes()
                    .chunks(size)
                    .flat_map(|e| std::iter::repeat_n(e, *times).flatten().copied())
                    .collect();
                Tensor::from_le_bytes(t.dtype(), self.info(src)?.shape, &bytes)
            }
        }
    }

    /// For a float weight that is a stored tensor (or a leading-axis slice of one), possibly
    /// cast: the stored bytes, their dtype, and the dtype the expression casts them to; lets a
    /// quantizer stream it in whole rows.
    fn float_rows<'s>(&self, src: &'s dyn TensorSource) -> Option<(&'s [u8], DType, DType)> {
        match self {
            WeightExpr::Cast(inner, to) => inner.raw_view(src).map(|(b, from)| (b, from, *to)),
            _ => self.raw_view(src).map(|(b, from)| (b, from, from)),
        }
        .filter(|(_, from, to)| from.is_float() && to.is_float())
    }

    /// The stored bytes this expression reads unchanged, when it is a stored tensor or a
    /// leading-axis slice of one and the source has raw bytes: (bytes, their dtype).
    fn raw_view<'s>(&self, src: &'s dyn TensorSource) -> Option<(&'s [u8], DType)> {
        match self {
            WeightExpr::Stored(n) => Some((src.raw(n)?, src.info(n).ok()?.dtype)),
            WeightExpr::Slice { expr, axis: 0, start, end } => {
                let (bytes, dtype) = expr.raw_view(src)?;
                let len = *expr.info(src).ok()?.shape.first()?;
                let row = bytes.len() / len.max(1);
                (end <= &len).then(|| (&bytes[start * row..end * row], dtype))
            }
            WeightExpr::Item { expr, index } => {
                let (bytes, dtype) = expr.raw_view(src)?;
                let len = *expr.info(src).ok()?.shape.first()?;
                let row = bytes.len() / len.max(1);
                (index < &len).then(|| (&bytes[index * row..(index + 1) * row], dtype))
            }
            _ => None,
        }
    }
}

/// The common info of equal-shaped parts (of a stack or an interleave), or an error naming
/// the first part that differs.
fn alike(parts: &[WeightExpr], src: &dyn TensorSource) -> Result<TensorInfo> {
    let first = parts
        .first()
        .ok_or_else(|| Error::Weight { tensor: "stack".into(), msg: "a stack needs at least one part".into() })?;
    let info = first.info(src)?;
    for p in &parts[1..] {
        let other = p.info(src)?;
        if other != info {
            return Err(Error::Weight {
                tensor: p.sources().join(","),
                msg: format!(
                    "is {}{:?}, but {} is {}{:?}: stacked or interleaved parts must be alike",
                    other.dtype,
                    other.shape,
                    first.sources().join(","),
                    info.dtype,
                    info.shape
                ),
            });
        }
    }
    Ok(info)
}

/// Gathered rows must exist in the tensor they are read from.
fn check_rows(expr: &WeightExpr, shape: &[usize], rows: &[usize]) -> Result<()> {
    match (shape.first(), rows.iter().max()) {
        (Some(&len), Some(&max)) if max < len => Ok(()),
        _ => Err(Error::Weight {
            tensor: expr.sources().join(","),
            msg: format!("rows up to {:?} are outside shape {shape:?}", rows.iter().max()),
        }),
    }
}

/// An item must be an entry of the leading axis of the tensor it reads.
fn check_item(expr: &WeightExpr, shape: &[usize], index: usize) -> Result<()> {
    match shape.first() {
        Some(&len) if index < len => Ok(()),
        _ => Err(Error::Weight {
            tensor: expr.sources().join(","),
            msg: format!("item {index} is outside the leading axis of shape {shape:?}"),
        }),
    }
}

/// A slice must stay inside the tensor it reads.
fn check_slice(expr: &WeightExpr, shape: &[usize], axis: usize, start: usize, end: usize) -> Result<()> {
    match shape.get(axis) {
        Some(&len) if start < end && end <= len => Ok(()),
        _ => Err(Error::Weight {
            tensor: expr.sources().join(","),
            msg: format!("slice {start}..{end} along axis {axis} is outside shape {shape:?}"),
        }),
    }
}

impl WeightExpr {
    /// Produces the weight's little-endian bytes in order, in pieces, without materialising
    /// the whole tensor when it is a stored tensor or a cast of one and the source has raw
    /// bytes. Returns the number of bytes produced.
    pub fn stream_le_bytes(
        &self,
        src: &dyn TensorSource,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<u64> {
        let io = |name: &str, e: std::io::Error| Error::Weight {
            tensor: name.to_string(),
            msg: format!("write failed: {e}"),
        };
        let name = self.to_string();
        let out = match self {
            // part by part (a cast applies to each part), releasing each part's pages after it
            WeightExpr::Stack(parts) => return stream_parts(parts.iter().cloned(), src, sink),
            WeightExpr::Cast(inner, to) if matches!(**inner, WeightExpr::Stack(_)) => {
                let WeightExpr::Stack(parts) = &**inner else { unreachable!("matched above") };
                let cast = parts.iter().map(|p| WeightExpr::Cast(Box::new(p.clone()), *to));
                return stream_parts(cast, src, sink);
            }
            WeightExpr::Quantize { expr, scheme, scale_dtype, part, kernel } if expr.float_rows(src).is_some() => {
                if *part == QuantPart::ZeroPoints && scheme.symmetric {
                    return Err(Error::Weight {
                        tensor: expr.sources().join(","),
                        msg: format!("a {} scheme has no zero points", scheme.label()),
                    });
                }
                let (bytes, from, to) = expr.float_rows(src).expect("checked");
                let cols = self.info(src).and_then(|_| expr.info(src))?.shape[1];
                let group = scheme.group_len(&expr.sources().join(","), cols)?;
                // whole rows per chunk, each converted as the expression would, then quantized
                let rows = (STREAM_CHUNK / cols.max(1)).max(1);
                let task_rows = (PAR_CHUNK / cols.max(1)).max(1);
                let mut total = 0u64;
                for chunk in bytes.chunks(rows * cols * from.size()) {
                    // whole rows per task, on every core, each converted as the expression
                    // would and quantized; the parts concatenate in row order
                    let out: Vec<Vec<u8>> = chunk
                        .par_chunks(task_rows * cols * from.size())
                        .map(|raw| {
                            let floats = floats_of(raw, from, to)?;
                            Ok(kernel.quantize(&floats, group, scheme, *scale_dtype, *part))
                        })
                        .collect::<Result<_>>()?;
                    for piece in &out {
                        sink(piece).map_err(|e| io(&name, e))?;
                        total += piece.len() as u64;
                    }
                    src.release_bytes(chunk);
                }
                total
            }
            WeightExpr::Repeat { expr, times } => {
                let size = expr.info(src)?.dtype.size();
                let (mut total, mut out) = (0u64, vec![]);
                expr.stream_le_bytes(src, &mut |b| {
                    out.clear();
                    b.chunks(size).for_each(|e| (0..*times).for_each(|_| out.extend_from_slice(e)));
                    total += out.len() as u64;
                    sink(&out)
                })?;
                total
            }
            WeightExpr::Pack { expr, high_first, per_row } => {
                let row = match per_row {
                    true => *expr.info(src)?.shape.last().unwrap_or(&1),
                    false => usize::MAX,
                };
                let mut packer = NibblePacker::new(row, *high_first);
                let mut total = 0u64;
                expr.stream_le_bytes(src, &mut |b| {
                    packer.push(b);
                    total += packer.out.len() as u64;
                    let r = sink(&packer.out);
                    packer.out.clear();
                    r
                })?;
                packer.finish();
                total += packer.out.len() as u64;
                sink(&packer.out).map_err(|e| io(&name, e))?;
                total
            }
            WeightExpr::Cast(inner, to) if inner.raw_view(src).is_some() => {
                let (bytes, from) = inner.raw_view(src).expect("checked");
                let mut total = 0u64;
                let mut buf = Vec::with_capacity(STREAM_CHUNK * to.size());
                for chunk in bytes.chunks(STREAM_CHUNK * from.size()) {
                    convert_le_bytes(from, *to, chunk, &mut buf)?;
                    sink(&buf).map_err(|e| io(&name, e))?;
                    src.release_bytes(chunk);
                    total += buf.len() as u64;
                }
                total
            }
            _ if self.raw_view(src).is_some() => {
                let (bytes, dtype) = self.raw_view(src).expect("checked");
                for chunk in bytes.chunks(STREAM_CHUNK * dtype.size()) {
                    sink(chunk).map_err(|e| io(&name, e))?;
                    src.release_bytes(chunk);
                }
                bytes.len() as u64
            }
            _ => {
                let b = self.materialize(src)?.to_le_bytes();
                sink(&b).map_err(|e| io(&name, e))?;
                b.len() as u64
            }
        };
        for n in self.sources() {
            src.release(n);
        }
        Ok(out)
    }
}

/// Packs a stream of 4-bit values (one per byte) two per byte, flushing a half-filled byte
/// at the end of each `row` (usize::MAX: one row, the whole tensor); an element's nibble is the
/// low one of its byte (an i8's two's complement, a u8 as is).
struct NibblePacker {
    row: usize,
    high_first: bool,
    col: usize,
    pending: Option<u8>,
    out: Vec<u8>,
}

impl NibblePacker {
    fn new(row: usize, high_first: bool) -> NibblePacker {
        NibblePacker { row, high_first, col: 0, pending: None, out: vec![] }
    }

    fn push(&mut self, bytes: &[u8]) {
        for &v in bytes {
            match self.pending.take() {
                None => self.pending = Some(v),
                Some(a) => self.out.push(self.pair(a, v)),
            }
            self.col += 1;
            if self.col == self.row {
                self.col = 0;
                self.finish();
            }
        }
    }

    fn pair(&self, a: u8, b: u8) -> u8 {
        let (a, b) = (a & 0xF, b & 0xF);
        if self.high_first {
            (a << 4) | b
        } else {
            a | (b << 4)
        }
    }

    fn finish(&mut self) {
        if let Some(a) = self.pending.take() {
            let byte = self.pair(a, 0);
            self.out.push(byte);
        }
    }
}

fn stream_parts(
    parts: impl Iterator<Item = WeightExpr>,
    src: &dyn TensorSource,
    sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> Result<u64> {
    let mut total = 0;
    for p in parts {
        total += p.stream_le_bytes(src, sink)?;
    }
    Ok(total)
}

/// The values a cast from `from` to `to` gives for little-endian `bytes`, as f32 (a weight to
/// quantize: rounded to `to` first, so it quantizes as the materialised weight does).
fn floats_of(bytes: &[u8], from: DType, to: DType) -> Result<Vec<f32>> {
    let (mut cast, mut f32s) = (vec![], vec![]);
    let as_f32: &[u8] = match (from, to) {
        (DType::F32, DType::F32) => bytes,
        (_, DType::F32) => {
            convert_le_bytes(from, to, bytes, &mut f32s)?;
            &f32s
        }
        _ => {
            convert_le_bytes(from, to, bytes, &mut cast)?;
            convert_le_bytes(to, DType::F32, &cast, &mut f32s)?;
            &f32s
        }
    };
    Ok(as_f32.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// Converts little-endian elements of `from` into `to`, replacing `out`'s contents. The
/// common widening casts of checkpoint weights are bit operations, spread over every core; the
/// rest go through [`Tensor::cast`].
pub fn convert_le_bytes(from: DType, to: DType, bytes: &[u8], out: &mut Vec<u8>) -> Result<()> {
    out.clear();
    let widen = |out: &mut Vec<u8>, one: fn([u8; 2]) -> f32| {
        out.resize(bytes.len() * 2, 0);
        out.par_chunks_mut(PAR_CHUNK * 4).zip(bytes.par_chunks(PAR_CHUNK * 2)).for_each(|(o, i)| {
            for (o, i) in o.chunks_exact_mut(4).zip(i.chunks_exact(2)) {
                o.copy_from_slice(&one([i[0], i[1]]).to_le_bytes());
            }
        });
    };
    match (from, to) {
        // bf16 is the upper half of an f32: widening is a shift
        (DType::BF16, DType::F32) => widen(out, |b| f32::from_bits(u32::from(u16::from_le_bytes(b)) << 16)),
        (DType::F16, DType::F32) => widen(out, |b| half::f16::from_le_bytes(b).to_f32()),
        _ => {
            let t = Tensor::from_le_bytes(from, vec![bytes.len() / from.size()], bytes)?.cast(to);
            out.extend_from_slice(&t.to_le_bytes());
        }
    }
    Ok(())
}

impl std::fmt::Display for WeightExpr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WeightExpr::Stored(n) => write!(f, "{n}"),
            WeightExpr::Cast(e, d) => write!(f, "cast<{d}>({e})"),
            WeightExpr::Transpose(e) => write!(f, "transpose({e})"),
            WeightExpr::Slice { expr, axis, start, end } => write!(f, "slice<{axis}:{start}..{end}>({expr})"),
            WeightExpr::OnePlus(e) => write!(f, "1+({e})"),
            WeightExpr::Quantize { expr, scheme, part, .. } => write!(f, "{part:?}<{}>({expr})", scheme.label()),
            WeightExpr::Repeat { expr, times } => write!(f, "repeat<{times}>({expr})"),
            WeightExpr::Item { expr, index } => write!(f, "{expr}[{index}]"),
            WeightExpr::Mxfp4 { blocks, scales } => write!(f, "mxfp4({blocks}, {scales})"),
            WeightExpr::Rows { expr, rows } => write!(f, "rows<{}>({expr})", rows.len()),
            WeightExpr::Pack { expr, high_first, per_row } => {
                let order = if *high_first { "high" } else { "low" };
                write!(f, "pack4<{order}{}>({expr})", if *per_row { ", rows" } else { "" })
            }
            WeightExpr::Interleave(parts) => {
                let parts: Vec<String> = parts.iter().map(ToString::to_string).collect();
                write!(f, "interleave({})", parts.join(", "))
            }
            WeightExpr::Stack(parts) => match parts.as_slice() {
                [first, .., last] if parts.len() > 2 => write!(f, "stack[{}]({first}, …, {last})", parts.len()),
                _ => {
                    let parts: Vec<String> = parts.iter().map(ToString::to_string).collect();
                    write!(f, "stack[{}]({})", parts.len(), parts.join(", "))
                }
            },
        }
    }
}

/// A [`TensorSource`] over tensors held in memory (tests, benches, generated weights).
#[derive(Debug, Default, Clone)]
pub struct MemorySource {
    tensors: std::collections::BTreeMap<String, Tensor>,
}

impl MemorySource {
    pub fn insert(&mut self, name: &str, t: Tensor) {
        self.tensors.insert(name.to_string(), t);
    }
}

impl TensorSource for MemorySource {
    fn info(&self, name: &str) -> Result<TensorInfo> {
        let t = self.load_ref(name)?;
        Ok(TensorInfo { dtype: t.dtype(), shape: t.shape().to_vec() })
    }
    fn load(&self, name: &str) -> Result<Tensor> {
        self.load_ref(name).cloned()
    }
}

impl MemorySource {
    fn load_ref(&self, name: &str) -> Result<&Tensor> {
        self.tensors.get(name).ok_or_else(|| Error::Weight { tensor: name.to_string(), msg: "no such tensor".into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One expert of a stacked tensor, and MXFP4 blocks of one expert decoded to its rows;
    /// an item past the leading axis is an error naming the tensor.
    #[test]
    fn items_and_mxfp4_blocks() {
        let mut src = MemorySource::default();
        src.insert("w", Tensor::f32(vec![2, 1, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap());
        let item = |name: &str, index| WeightExpr::Item { expr: Box::new(WeightExpr::stored(name)), index };
        assert_eq!(item("w", 1).materialize(&src).unwrap().as_f32().unwrap(), [3.0, 4.0]);
        assert_eq!(item("w", 1).info(&src).unwrap().shape, [1, 2]);
        assert!(item("w", 2).info(&src).unwrap_err().to_string().contains('w'));
        let mut blocks = vec![0u8; 2 * 16];
        blocks[16] = 0x32; // expert 1: 1.0, 1.5
        src.insert("blocks", Tensor::from_le_bytes(DType::U8, vec![2, 1, 1, 16], &blocks).unwrap());
        src.insert("scales", Tensor::from_le_bytes(DType::U8, vec![2, 1, 1], &[127, 128]).unwrap());
        let e = WeightExpr::Mxfp4 { blocks: Box::new(item("blocks", 1)), scales: Box::new(item("scales", 1)) };
        assert_eq!(e.info(&src).unwrap(), TensorInfo { dtype: DType::F32, shape: vec![1, 32] });
        let t = e.materialize(&src).unwrap();
        assert_eq!(&t.as_f32().unwrap()[..3], [2.0, 3.0, 0.0]);
        let wrong = WeightExpr::Mxfp4 { blocks: Box::new(item("w", 0)), scales: Box::new(item("scales", 1)) };
        assert!(wrong.info(&src).unwrap_err().to_string().contains("MXFP4"));
    }

    /// Interleaved rows alternate between the parts; over two stacks the interleave goes
    /// inside, item by item, with the same bytes.
    #[test]
    fn interleaved_rows_alternate() {
        let mut src = MemorySource::default();
        src.insert("a", Tensor::f32(vec![2, 2, 1], vec![1.0, 2.0, 3.0, 4.0]).unwrap());
        src.insert("b", Tensor::f32(vec![2, 2, 1], vec![-1.0, -2.0, -3.0, -4.0]).unwrap());
        let e = WeightExpr::Interleave(vec![WeightExpr::stored("a"), WeightExpr::stored("b")]);
        assert_eq!(e.info(&src).unwrap().shape, [2, 4, 1]);
        let t = e.materialize(&src).unwrap();
        assert_eq!(t.as_f32().unwrap(), [1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.0, -4.0]);
        for name in ["a0", "a1", "b0", "b1"] {
            let (part, sign) = (&name[1..], if name.starts_with('a') { 1.0 } else { -1.0 });
            let i: f32 = part.parse().unwrap();
            src.insert(name, Tensor::f32(vec![2, 1], vec![sign * (2.0 * i + 1.0), sign * (2.0 * i + 2.0)]).unwrap());
        }
        let stack = |p: &str| {
            WeightExpr::Stack(vec![WeightExpr::stored(&format!("{p}0")), WeightExpr::stored(&format!("{p}1"))])
        };
        let inner = WeightExpr::interleave_rows(vec![stack("a"), stack("b")]);
        assert!(matches!(&inner, WeightExpr::Stack(items) if items.len() == 2));
        let mut streamed = vec![];
        inner
            .stream_le_bytes(&src, &mut |b| {
                streamed.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
        assert_eq!(streamed, t.to_le_bytes());
    }

    /// Rows come out in the order given; a row past the end is an error naming the tensor.
    #[test]
    fn rows_are_gathered_in_order() {
        let mut src = MemorySource::default();
        src.insert("w", Tensor::f32(vec![3, 2], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap());
        let rows = |rows: Vec<usize>| WeightExpr::Rows { expr: Box::new(WeightExpr::stored("w")), rows };
        let t = rows(vec![2, 0]).materialize(&src).unwrap();
        assert_eq!((t.shape(), t.as_f32().unwrap()), (&[2, 2][..], &[4.0, 5.0, 0.0, 1.0][..]));
        assert_eq!(rows(vec![1, 1, 2, 0]).info(&src).unwrap().shape, [4, 2]);
        assert!(rows(vec![3]).info(&src).unwrap_err().to_string().contains('w'));
    }

    /// The bit-level fast paths equal the general cast for every value class.
    #[test]
    fn fast_conversions_equal_the_general_cast() {
        let classes = [0.0f32, -0.0, 1.0, -2.5, 3.0e38, 1.0e-40, f32::INFINITY, f32::NEG_INFINITY, 65504.0, 1.0 / 3.0];
        // several parallel tasks and a short last one
        let values: Vec<f32> =
            (0..3 * PAR_CHUNK + 5).map(|i| classes[i % classes.len()] * (1 + i % 3) as f32).collect();
        for from in [DType::BF16, DType::F16] {
            let t = Tensor::f32(vec![values.len()], values.to_vec()).unwrap().cast(from);
            let mut fast = vec![];
            convert_le_bytes(from, DType::F32, &t.to_le_bytes(), &mut fast).unwrap();
            assert_eq!(fast, t.cast(DType::F32).to_le_bytes(), "{from}");
        }
        let mut out = vec![];
        convert_le_bytes(DType::F32, DType::BF16, &1.5f32.to_le_bytes(), &mut out).unwrap();
        assert_eq!(out, half::bf16::from_f32(1.5).to_le_bytes());
    }

    /// 4-bit values pack two per byte in either nibble order, a row (or the tensor) of odd
    /// length ending in a half-filled byte.
    #[test]
    fn nibbles_pack_in_either_order() {
        let mut src = MemorySource::default();
        let bytes = [0x1, 0xF, 0x8, 0x7, (-8i8) as u8, 7];
        src.insert("q", Tensor::from_le_bytes(DType::U8, vec![2, 3], &bytes).unwrap());
        let pack = |high_first, per_row| {
            let e = WeightExpr::Pack { expr: Box::new(WeightExpr::stored("q")), high_first, per_row };
            e.materialize(&src).unwrap().to_le_bytes()
        };
        assert_eq!(pack(false, false), [0xF1, 0x78, 0x78]);
        assert_eq!(pack(true, false), [0x1F, 0x87, 0x87]);
        assert_eq!(pack(false, true), [0xF1, 0x08, 0x87, 0x07]);
        assert_eq!(pack(true, true), [0x1F, 0x80, 0x78, 0x70]);
    }
}
