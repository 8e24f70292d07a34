//! Round-to-nearest: the arithmetic that turns whole rows of a float weight into integer
//! values, scales and zero points, and [`Rtn`], the kernel core's lazy
//! [`WeightExpr::Quantize`] calls while a writer streams a weight.
//!
//! It lives here, not in core, so core carries quantized weights as data (a scheme, a part, a
//! kernel handle) without owning how they are computed. The arithmetic, per row of `[out, in]`
//! (per embedding row), per group of `group` consecutive input elements, in f32, rounding half
//! to even (as `torch.round`):
//! - symmetric 4-bit: `v` = the group's value of largest magnitude (with its sign),
//!   `s = v / -8`, `q = clamp(round(w / s), -8, 7)` (ONNX Runtime's and MLAS's convention: the
//!   larger half of the range holds the extreme);
//! - symmetric 8-bit: `s = max|w| / 127`, `q = clamp(round(w / s), -127, 127)`;
//! - asymmetric `b` bits: `lo = min(min w, 0)`, `hi = max(max w, 0)`, `s = (hi - lo) / (2^b - 1)`,
//!   `z = clamp(round(-lo / s), 0, 2^b - 1)`, `q = clamp(round(w / s) + z, 0, 2^b - 1)`;
//! - a group of zeros has `s = 0`, `q = 0` (`z = 0`);
//! - for a format that takes positive scales only (ExecuTorch's XNNPACK), symmetric schemes
//!   use torchao's convention instead ([`QuantScheme::positive_scales`]): `s = max(max|w| /
//!   7.5, eps)` for 4 bits (`q` clamped to [-8, 7] as above), `max(max|w| / 127, eps)` for 8.
//!
//! The scale is rounded to its storage dtype before `q` is computed, so the stored pair is
//! consistent (what XNNPACK's bfloat16 scales need). Dequantization is core's
//! [`hfexport_core::quant::dequantize`], `(q - z) * s`.

use hfexport_core::{DType, QuantKernel, QuantKernelRef, QuantPart, QuantScheme, WeightExpr};

/// The round-to-nearest kernel of [`WeightExpr::Quantize`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Rtn;

impl Rtn {
    /// The lazy expression for `part` of `expr` (a 2-D float weight) quantized by `scheme`,
    /// scales rounded to `scale_dtype`.
    pub fn part(expr: &WeightExpr, scheme: QuantScheme, scale_dtype: DType, part: QuantPart) -> WeightExpr {
        WeightExpr::Quantize {
            expr: Box::new(expr.clone()),
            scheme,
            scale_dtype,
            part,
            kernel: QuantKernelRef::new(Rtn),
        }
    }
}

impl QuantKernel for Rtn {
    fn name(&self) -> &'static str {
        "rtn"
    }

    fn quantize(
        &self,
        rows: &[f32],
        group: usize,
        scheme: &QuantScheme,
        scale_dtype: DType,
        part: QuantPart,
    ) -> Vec<u8> {
        // the scales and zero points alone need one pass over each group
        let values = matches!(part, QuantPart::Values | QuantPart::Unsigned);
        quantize_rows_for(rows, group, scheme, scale_dtype, values).part_bytes(part, scheme, scale_dtype)
    }
}

/// Whole rows quantized: the parts as flat vectors.
pub struct QuantizedRows {
    /// `q` one per byte: an i8's bits (symmetric) or a u8 (asymmetric).
    pub values: Vec<u8>,
    /// Already rounded to the scale dtype.
    pub scales: Vec<f32>,
    pub zero_points: Vec<u8>,
}

/// Quantizes rows of `data` (whole rows: its length is a multiple of the row length, itself a
/// multiple of `group`) group by group.
pub fn quantize_rows(data: &[f32], group: usize, scheme: &QuantScheme, scale_dtype: DType) -> QuantizedRows {
    quantize_rows_for(data, group, scheme, scale_dtype, true)
}

/// [`quantize_rows`], computing the values only when `values` (the scales and zero points
/// alone need one pass over each group).
pub fn quantize_rows_for(
    data: &[f32],
    group: usize,
    scheme: &QuantScheme,
    scale_dtype: DType,
    values: bool,
) -> QuantizedRows {
    let groups = data.len() / group;
    let mut out = QuantizedRows {
        values: Vec::with_capacity(if values { data.len() } else { 0 }),
        scales: Vec::with_capacity(groups),
        zero_points: Vec::with_capacity(if scheme.symmetric { 0 } else { groups }),
    };
    for chunk in data.chunks(group) {
        let (s, z) = group_params(chunk, scheme, scale_dtype);
        out.scales.push(s);
        if !scheme.symmetric {
            out.zero_points.push(z as u8);
        }
        if values {
            out.values.extend(chunk.iter().map(|&x| quantize_one(x, s, z, scheme) as u8));
        }
    }
    out
}

/// Rounds half to even like `f32::round_ties_even`, without the library call that needs on
/// x86-64 without SSE4.1: adding and subtracting 1.5 * 2^23 leaves the nearest integer (ties to
/// even, the default rounding mode) for |x| < 2^22; larger values are integers already.
#[inline]
fn round_even(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    if x.abs() < 4_194_304.0 {
        (x + MAGIC) - MAGIC
    } else {
        x
    }
}

/// `x` as the nearest value of `dtype` (a scale as it will be stored).
fn round_to(dtype: DType, x: f32) -> f32 {
    match dtype {
        DType::F16 => half::f16::from_f32(x).to_f32(),
        DType::BF16 => half::bf16::from_f32(x).to_f32(),
        _ => x,
    }
}

/// A group's scale (rounded to `scale_dtype`) and zero point.
fn group_params(chunk: &[f32], scheme: &QuantScheme, scale_dtype: DType) -> (f32, i32) {
    if scheme.symmetric && scheme.positive_scales {
        let levels = if scheme.bits == 4 { 7.5 } else { 127.0 };
        let s = (chunk.iter().fold(0f32, |m, x| m.max(x.abs())) / levels).max(f32::EPSILON);
        (round_to(scale_dtype, s), 0)
    } else if scheme.symmetric {
        let s = match scheme.bits {
            4 => {
                let v = chunk.iter().copied().fold(0f32, |m, x| if x.abs() > m.abs() { x } else { m });
                v / -8.0
            }
            _ => chunk.iter().fold(0f32, |m, x| m.max(x.abs())) / 127.0,
        };
        (round_to(scale_dtype, s), 0)
    } else {
        let levels = ((1u32 << scheme.bits) - 1) as f32;
        let lo = chunk.iter().copied().fold(0f32, f32::min);
        let hi = chunk.iter().copied().fold(0f32, f32::max);
        let s = round_to(scale_dtype, (hi - lo) / levels);
        let z = if s == 0.0 { 0.0 } else { round_even(-lo / s).clamp(0.0, levels) };
        (s, z as i32)
    }
}

fn quantize_one(x: f32, s: f32, z: i32, scheme: &QuantScheme) -> i16 {
    if s == 0.0 {
        return z as i16;
    }
    let r = round_even(x / s);
    let (lo, hi) = match (scheme.symmetric, scheme.bits) {
        (true, 4) => (-8.0, 7.0),
        (true, _) => (-127.0, 127.0),
        (false, b) => (0.0, ((1u32 << b) - 1) as f32),
    };
    if scheme.symmetric {
        r.clamp(lo, hi) as i16
    } else {
        (r + z as f32).clamp(lo, hi) as i16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hfexport_core::quant::dequantize;
    use hfexport_core::{MemorySource, Result, Tensor};

    /// Part `part` of `w` quantized by `scheme`, through the weight expression writers stream.
    fn part(w: &Tensor, scheme: QuantScheme, part: QuantPart) -> Result<Tensor> {
        let mut src = MemorySource::default();
        src.insert("w", w.clone());
        Rtn::part(&WeightExpr::stored("w"), scheme, DType::F32, part).materialize(&src)
    }

    /// The documented conventions on hand-made groups.
    #[test]
    fn recipes_follow_their_documented_formulas() {
        let w = Tensor::f32(vec![1, 4], vec![0.5, -1.6, 0.8, 0.0]).unwrap();
        let s4 = QuantScheme::new(4, Some(4), true);
        assert_eq!(part(&w, s4, QuantPart::Scales).unwrap().as_f32().unwrap(), [0.2]);
        let q = part(&w, s4, QuantPart::Values).unwrap();
        assert_eq!(q.to_le_bytes().iter().map(|&b| b as i8).collect::<Vec<_>>(), [2, -8, 4, 0]);
        let s8 = QuantScheme::new(8, None, true);
        assert!((part(&w, s8, QuantPart::Scales).unwrap().as_f32().unwrap()[0] - 1.6 / 127.0).abs() < 1e-9);
        let a4 = QuantScheme::new(4, Some(4), false);
        let (q, s, z) = (
            part(&w, a4, QuantPart::Values).unwrap(),
            part(&w, a4, QuantPart::Scales).unwrap(),
            part(&w, a4, QuantPart::ZeroPoints).unwrap(),
        );
        assert_eq!(z.to_le_bytes()[0], 10, "round(-lo / s) = round(1.6 / 0.16)");
        let back = dequantize(&q, &s, Some(&z)).unwrap();
        for (a, b) in back.as_f32().unwrap().iter().zip([0.5, -1.6, 0.8, 0.0]) {
            assert!((a - b).abs() <= 0.08 + 1e-6, "{a} vs {b}");
        }
        assert!(part(&w, QuantScheme { group: Some(3), ..s4 }, QuantPart::Values).is_err());
        assert!(part(&w, s4, QuantPart::ZeroPoints).is_err(), "a symmetric scheme has no zero points");
    }

    /// XNNPACK's form: positive scales (torchao's `max|w| / 7.5`), a zero group at `eps`.
    #[test]
    fn positive_scales_follow_torchao() {
        let w = Tensor::f32(vec![2, 4], vec![0.5, -1.5, 0.75, 1.5, 0.0, 0.0, 0.0, 0.0]).unwrap();
        let p4 = QuantScheme { positive_scales: true, ..QuantScheme::new(4, Some(4), true) };
        assert_eq!(part(&w, p4, QuantPart::Scales).unwrap().as_f32().unwrap(), [0.2, f32::EPSILON]);
        let q = part(&w, p4, QuantPart::Values).unwrap().to_le_bytes();
        // 1.5 / 0.2 = 7.5 rounds to 8, clamped to 7; -7.5 rounds to -8
        assert_eq!(q.iter().map(|&b| b as i8).collect::<Vec<_>>(), [2, -8, 4, 7, 0, 0, 0, 0]);
        let p8 = QuantScheme { positive_scales: true, ..QuantScheme::new(8, None, true) };
        assert!((part(&w, p8, QuantPart::Scales).unwrap().as_f32().unwrap()[0] - 1.5 / 127.0).abs() < 1e-9);
    }

    #[test]
    fn rounding_is_half_to_even() {
        for i in -4000..4000 {
            let x = i as f32 * 0.25 + if i % 7 == 0 { 1e-3 } else { 0.0 };
            assert_eq!(round_even(x), x.round_ties_even(), "{x}");
        }
        for x in [0.5f32, 1.5, 2.5, -0.5, -2.5, 1e7 + 1.0, -3e9, 4_194_303.5, 8_388_607.0] {
            assert_eq!(round_even(x), x.round_ties_even(), "{x}");
        }
    }

    /// Every part streamed by core's writer path (stored bf16 rows cast to f32, over two stream
    /// chunks of several parallel tasks each, packed or not) has the bytes of the materialised
    /// part, which is `quantize_rows` on the whole tensor.
    #[test]
    fn streamed_parts_equal_the_whole_tensor_quantized() {
        use hfexport_core::weights::{PAR_CHUNK, STREAM_CHUNK};
        use hfexport_core::{TensorInfo, TensorSource};
        struct Raw(MemorySource, Vec<u8>);
        impl TensorSource for Raw {
            fn info(&self, n: &str) -> Result<TensorInfo> {
                self.0.info(n)
            }
            fn load(&self, n: &str) -> Result<Tensor> {
                self.0.load(n)
            }
            fn raw(&self, _: &str) -> Option<&[u8]> {
                Some(&self.1)
            }
        }
        let (rows, cols) = (STREAM_CHUNK / 96 + 7, 96);
        assert!(rows * cols > STREAM_CHUNK && PAR_CHUNK / cols < rows);
        let vals: Vec<f32> = (0..rows * cols).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
        let t = Tensor::f32(vec![rows, cols], vals).unwrap().cast(DType::BF16);
        let floats = t.cast(DType::F32).as_f32().unwrap().to_vec();
        let mut mem = MemorySource::default();
        mem.insert("w", t.clone());
        let src = Raw(mem, t.to_le_bytes());
        let w = WeightExpr::Cast(Box::new(WeightExpr::stored("w")), DType::F32);
        for (bits, group, symmetric) in
            [(4, Some(32), true), (4, Some(96), false), (8, None, true), (8, Some(32), false)]
        {
            let scheme = QuantScheme::new(bits, group, symmetric);
            let mut parts = vec![QuantPart::Values, QuantPart::Unsigned, QuantPart::Scales];
            if !symmetric {
                parts.push(QuantPart::ZeroPoints);
            }
            for part in parts {
                let q = Rtn::part(&w, scheme, DType::F16, part);
                let whole = quantize_rows(&floats, group.unwrap_or(cols), &scheme, DType::F16);
                assert_eq!(q.materialize(&src).unwrap().to_le_bytes(), whole.part_bytes(part, &scheme, DType::F16));
                let mut exprs = vec![q.clone()];
                if part != QuantPart::Scales {
                    for per_row in [true, false] {
                        exprs.push(WeightExpr::Pack { expr: Box::new(q.clone()), high_first: false, per_row });
                    }
                }
                for e in exprs {
                    let mut streamed = vec![];
                    let n = e
                        .stream_le_bytes(&src, &mut |b| {
                            streamed.extend_from_slice(b);
                            Ok(())
                        })
                        .unwrap();
                    assert_eq!(n as usize, streamed.len());
                    assert_eq!(streamed, e.materialize(&src).unwrap().to_le_bytes(), "{e}");
                }
            }
        }
    }
}
