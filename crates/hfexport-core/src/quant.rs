//! Weight quantization: the schemes, the recipe an export config carries, and the arithmetic.
//!
//! A quantized weight is never a new stored tensor: it is a lazy [`crate::WeightExpr::Quantize`]
//! over the float weight, one part at a time (integer values, scales, zero points), so a writer
//! quantizes one tensor while it streams it and the evaluator dequantizes exactly what a
//! runtime reads. Integer values are held one per byte in the IR (`i8` for symmetric schemes,
//! `u8` for asymmetric ones); a backend that stores 4-bit values two per byte packs them with
//! [`crate::WeightExpr::Pack`] in the nibble order its runtime reads.
//!
//! The arithmetic, per row of `[out, in]` (per embedding row), per group of `group` consecutive
//! input elements, in f32, rounding half to even (as `torch.round`):
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
//! consistent (what XNNPACK's bfloat16 scales need). Dequantization is `(q - z) * s`.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::weights::QuantPart;
use serde_json::{Map, Value};

/// How one tensor is quantized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct QuantScheme {
    /// 4 or 8.
    pub bits: u8,
    /// Consecutive input elements sharing a scale; `None` is one scale per output channel.
    pub group: Option<usize>,
    pub symmetric: bool,
    /// Symmetric scales kept positive and normal (torchao's convention, the only one
    /// XNNPACK accepts): `s = max(max|w| / 7.5, eps)` for 4 bits, `max(max|w| / 127, eps)` for
    /// 8, with `eps` float32's machine epsilon. Set by the format, never by a recipe.
    pub positive_scales: bool,
}

impl QuantScheme {
    pub const INT4: QuantScheme = QuantScheme::new(4, Some(32), true);
    pub const INT8: QuantScheme = QuantScheme::new(8, None, true);

    pub const fn new(bits: u8, group: Option<usize>, symmetric: bool) -> QuantScheme {
        QuantScheme { bits, group, symmetric, positive_scales: false }
    }

    /// The group length for rows of `cols` elements, or an error naming `tensor` when the group
    /// does not divide them.
    pub fn group_len(&self, tensor: &str, cols: usize) -> Result<usize> {
        let g = self.group.unwrap_or(cols);
        if g == 0 || !cols.is_multiple_of(g) {
            return Err(Error::Weight {
                tensor: tensor.to_string(),
                msg: format!("quantization group size {g} does not divide its input dimension {cols}"),
            });
        }
        Ok(g)
    }

    /// The integer dtype of the values in the IR: `i8` for symmetric, `u8` for asymmetric.
    pub fn value_dtype(&self) -> DType {
        if self.symmetric {
            DType::I8
        } else {
            DType::U8
        }
    }

    /// `int4`, `uint8/g64`, … as reports and errors show it.
    pub fn label(&self) -> String {
        let kind = if self.symmetric { "int" } else { "uint" };
        match self.group {
            Some(g) => format!("{kind}{}/g{g}", self.bits),
            None => format!("{kind}{}/channel", self.bits),
        }
    }
}

/// What a format needs of quantized weights beyond the recipe
/// ([`crate::backend::Backend::quant_form`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuantForm {
    /// The dtype group-wise scales are rounded to before quantizing (`None`: the export
    /// dtype); the graph still reads them in the export dtype, as exact casts.
    pub group_scales: Option<DType>,
    /// Symmetric schemes with positive, normal scales ([`QuantScheme::positive_scales`]).
    pub positive_scales: bool,
}

/// What an export quantizes and how (`"quantizer"` in an export config, `--quantize`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QuantRecipe {
    /// Every `Linear` weight of the decoder layers.
    pub weights: QuantScheme,
    /// The output head; `None` keeps it in the export dtype.
    pub lm_head: Option<QuantScheme>,
    /// The token embeddings; `None` keeps them in the export dtype.
    pub embeddings: Option<QuantScheme>,
    /// Modules left unquantized: a module name as transformers spells it (the weight's name
    /// without `.weight`, e.g. `model.layers.0.mlp.down_proj`) or a prefix of one
    /// (`model.layers.0`), or a node name.
    pub exclude: Vec<String>,
}

impl QuantRecipe {
    /// The default recipe of `--quantize int4|int8`: the named scheme on the layers, int8
    /// per-channel head and embeddings.
    pub fn preset(name: &str) -> Result<QuantRecipe> {
        let weights = match name {
            "int4" => QuantScheme::INT4,
            "int8" => QuantScheme::INT8,
            other => return Err(Error::Config(format!("quantize `{other}` is not valid; valid: int4, int8"))),
        };
        Ok(QuantRecipe {
            weights,
            lm_head: Some(QuantScheme::INT8),
            embeddings: Some(QuantScheme::INT8),
            exclude: vec![],
        })
    }

    /// Reads `{"weights": "int4", "group_size": 32, "symmetric": true, "lm_head": "int8",
    /// "embeddings": "int8", "exclude": [...]}`; a string is a preset.
    pub fn from_json(v: &Value) -> Result<QuantRecipe> {
        let obj = match v {
            Value::String(s) => return QuantRecipe::preset(s),
            Value::Object(o) => o,
            other => {
                return Err(Error::Config(format!("quantizer must be \"int4\", \"int8\" or an object, got {other}")))
            }
        };
        const KEYS: [&str; 7] = ["weights", "group_size", "symmetric", "lm_head", "embeddings", "exclude", "method"];
        if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(Error::Config(format!("quantizer.{k} is not a known key; valid: {}", KEYS.join(", "))));
        }
        let bits_of = |key: &str, v: &Value| -> Result<u8> {
            match v.as_str() {
                Some("int4") => Ok(4),
                Some("int8") => Ok(8),
                _ => Err(Error::Config(format!("quantizer.{key} must be \"int4\" or \"int8\", got {v}"))),
            }
        };
        let weights_key = obj.get("weights").or_else(|| obj.get("method"));
        let bits = match weights_key {
            None => 4,
            Some(v) => bits_of("weights", v)?,
        };
        let symmetric = match obj.get("symmetric") {
            None => true,
            Some(Value::Bool(b)) => *b,
            Some(v) => return Err(Error::Config(format!("quantizer.symmetric must be true or false, got {v}"))),
        };
        let group = match obj.get("group_size") {
            None => QuantScheme::preset_group(bits),
            Some(Value::Null) => None,
            Some(Value::String(s)) if s == "channel" => None,
            Some(v) => match v.as_u64() {
                Some(g @ (32 | 64 | 128)) => Some(g as usize),
                _ => {
                    return Err(Error::Config(format!(
                        "quantizer.group_size must be 32, 64, 128 or \"channel\", got {v}"
                    )))
                }
            },
        };
        if bits == 4 && group.is_none() {
            return Err(Error::Config("quantizer: int4 weights need a group_size (32, 64 or 128)".into()));
        }
        let side = |key: &str| -> Result<Option<QuantScheme>> {
            match obj.get(key) {
                None => Ok(Some(QuantScheme::INT8)),
                Some(Value::Null) | Some(Value::Bool(false)) => Ok(None),
                Some(v) => match bits_of(key, v)? {
                    8 => Ok(Some(QuantScheme::INT8)),
                    _ => Ok(Some(QuantScheme::new(4, group, symmetric).with_group_or(32))),
                },
            }
        };
        let exclude = match obj.get("exclude") {
            None | Some(Value::Null) => vec![],
            Some(Value::Array(a)) => a
                .iter()
                .map(|e| {
                    e.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| Error::Config(format!("quantizer.exclude must list node names, got {e}")))
                })
                .collect::<Result<_>>()?,
            Some(v) => return Err(Error::Config(format!("quantizer.exclude must be a list, got {v}"))),
        };
        Ok(QuantRecipe {
            weights: QuantScheme::new(bits, group, symmetric),
            lm_head: side("lm_head")?,
            embeddings: side("embeddings")?,
            exclude,
        })
    }

    /// The recipe as the config dict spells it (written to `export.json`).
    pub fn to_json(&self) -> Value {
        let side = |s: &Option<QuantScheme>| match s {
            None => Value::Null,
            Some(s) => Value::String(format!("int{}", s.bits)),
        };
        let mut m = Map::new();
        m.insert("weights".into(), Value::String(format!("int{}", self.weights.bits)));
        m.insert(
            "group_size".into(),
            self.weights.group.map_or(Value::String("channel".into()), |g| Value::from(g as u64)),
        );
        m.insert("symmetric".into(), Value::Bool(self.weights.symmetric));
        m.insert("lm_head".into(), side(&self.lm_head));
        m.insert("embeddings".into(), side(&self.embeddings));
        m.insert("exclude".into(), Value::from(self.exclude.clone()));
        Value::Object(m)
    }

    /// Whether a node is left unquantized by `exclude`.
    pub fn excludes(&self, node: &str) -> bool {
        self.exclude.iter().any(|e| node == e || node.starts_with(&format!("{e}.")))
    }
}

impl QuantScheme {
    fn preset_group(bits: u8) -> Option<usize> {
        if bits == 4 {
            Some(32)
        } else {
            None
        }
    }

    fn with_group_or(self, g: usize) -> QuantScheme {
        QuantScheme { group: self.group.or(Some(g)), ..self }
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

impl QuantizedRows {
    /// The little-endian bytes of one part (see [`QuantPart`]).
    pub fn part_bytes(&self, part: QuantPart, scheme: &QuantScheme, scale_dtype: DType) -> Vec<u8> {
        match part {
            QuantPart::Values => self.values.clone(),
            QuantPart::Unsigned if !scheme.symmetric => self.values.clone(),
            QuantPart::Unsigned => {
                let shift = 1u8 << (scheme.bits - 1);
                self.values.iter().map(|v| v.wrapping_add(shift)).collect()
            }
            QuantPart::Scales => match scale_dtype {
                DType::F16 => self.scales.iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect(),
                DType::BF16 => self.scales.iter().flat_map(|&v| half::bf16::from_f32(v).to_le_bytes()).collect(),
                _ => self.scales.iter().flat_map(|v| v.to_le_bytes()).collect(),
            },
            QuantPart::ZeroPoints => self.zero_points.clone(),
        }
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

/// `(q - z) * s` back to a float `[rows, cols]` tensor of the scales' dtype (computed in f32).
pub fn dequantize(values: &Tensor, scales: &Tensor, zero_points: Option<&Tensor>) -> Result<Tensor> {
    let (rows, cols) = match values.shape() {
        [r, c] => (*r, *c),
        s => return Err(Error::Tensor(format!("quantized values must be 2-D, got {s:?}"))),
    };
    let groups = *scales.shape().last().unwrap_or(&1);
    if groups == 0 || cols % groups != 0 || scales.shape() != [rows, groups] {
        return Err(Error::Tensor(format!("scales {:?} do not fit values {:?}", scales.shape(), values.shape())));
    }
    let g = cols / groups;
    let ints = int_values(values)?;
    let zs = zero_points.map(int_values).transpose()?;
    let s = scales.cast(DType::F32);
    let s = s.as_f32()?;
    let out: Vec<f32> = ints
        .iter()
        .enumerate()
        .map(|(i, &q)| {
            let gi = (i / cols) * groups + (i % cols) / g;
            let z = zs.as_ref().map_or(0.0, |z| z[gi]);
            (q - z) * s[gi]
        })
        .collect();
    Ok(Tensor::f32(vec![rows, cols], out)?.cast(scales.dtype()))
}

/// Integer values of an i8 or u8 tensor as f32.
fn int_values(t: &Tensor) -> Result<Vec<f32>> {
    let b = t.to_le_bytes();
    match t.dtype() {
        DType::I8 => Ok(b.iter().map(|&v| v as i8 as f32).collect()),
        DType::U8 => Ok(b.iter().map(|&v| v as f32).collect()),
        d => Err(Error::Tensor(format!("quantized values must be i8 or u8, got {d}"))),
    }
}

/// Packs 4-bit values (the low nibble of each byte: an i8's two's complement, a u8 as is) two
/// per byte along the flat order; `high_first` puts the even element in the high nibble
/// (ExecuTorch's `embedding_4bit`), otherwise the low one (ONNX Runtime, OpenVINO, XNNPACK).
pub fn pack_nibbles(bytes: &[u8], high_first: bool) -> Vec<u8> {
    bytes
        .chunks(2)
        .map(|p| {
            let (a, b) = (p[0] & 0xF, p.get(1).copied().unwrap_or(0) & 0xF);
            if high_first {
                (a << 4) | b
            } else {
                a | (b << 4)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Part `part` of `w` quantized by `scheme`, through the weight expression writers stream.
    fn part(w: &Tensor, scheme: QuantScheme, part: QuantPart) -> crate::Result<Tensor> {
        let mut src = crate::MemorySource::default();
        src.insert("w", w.clone());
        let e = crate::WeightExpr::Quantize {
            expr: Box::new(crate::WeightExpr::stored("w")),
            scheme,
            scale_dtype: DType::F32,
            part,
        };
        e.materialize(&src)
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

    #[test]
    fn nibbles_pack_in_either_order() {
        assert_eq!(pack_nibbles(&[0x1, 0xF, 0x8, 0x7], false), [0xF1, 0x78]);
        assert_eq!(pack_nibbles(&[0x1, 0xF, 0x8, 0x7], true), [0x1F, 0x87]);
        assert_eq!(pack_nibbles(&[(-8i8) as u8, 7], false), [0x78]);
    }
}
