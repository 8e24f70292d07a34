//! The quantization data the IR and the export config carry, and what a quantized weight
//! means; the arithmetic that produces one lives in `hfexport-quant`.
//!
//! A quantized weight is never a new stored tensor: it is a lazy [`crate::WeightExpr::Quantize`]
//! over the float weight, one [`QuantPart`] at a time (integer values, scales, zero points), so a
//! writer quantizes one tensor while it streams it and the evaluator dequantizes exactly what a
//! runtime reads. The expression names its [`QuantScheme`] as data and holds the
//! [`QuantKernel`] that computes the parts from whole rows of the float weight (round-to-nearest,
//! `hfexport_quant::Rtn`, implements it): core streams rows through the kernel without knowing
//! its arithmetic, and `hfexport-quant` depends on core, never the reverse.
//!
//! Integer values are held one per byte in the IR (`i8` for symmetric schemes, `u8` for
//! asymmetric ones); a backend that stores 4-bit values two per byte packs them with
//! [`crate::WeightExpr::Pack`] in the nibble order its runtime reads.
//!
//! Core keeps what every format and the reference evaluator must agree on: the schemes, the
//! recipe as an export config spells it (`"quantizer"`, a field of [`crate::ExportConfig`]), what
//! a format asks of the scales ([`QuantForm`]) and dequantization, `(q - z) * s`, the meaning of
//! `QuantLinear` / `QuantGather` ([`dequantize`]). `docs/quantization.md` gives the arithmetic.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use serde_json::{Map, Value};
use std::sync::Arc;

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

/// Which tensor of a quantized weight a [`crate::WeightExpr::Quantize`] produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum QuantPart {
    /// `q` as the IR holds it: `i8` (symmetric) or `u8` (asymmetric) `[rows, cols]`.
    Values,
    /// `u8` values with the symmetric range shifted by `2^(bits-1)` (the implicit zero point
    /// of ONNX Runtime's `MatMulNBits` and XNNPACK's 4-bit filters); asymmetric values as is.
    Unsigned,
    /// `[rows, groups]` in the scale dtype.
    Scales,
    /// `u8 [rows, groups]` (asymmetric schemes only).
    ZeroPoints,
}

/// The arithmetic behind [`crate::WeightExpr::Quantize`]: one part of whole rows of a float
/// weight. Implemented outside core (`hfexport_quant::Rtn`); a kernel must be row-local (the
/// bytes of a set of rows depend on those rows only), so a writer may quantize a weight a chunk
/// of rows at a time, on several cores, and concatenate the results.
pub trait QuantKernel: Send + Sync + std::fmt::Debug {
    /// A name that identifies the arithmetic (`"rtn"`): expressions with the same name, scheme,
    /// scale dtype and part are equal (a weight quantized twice the same way is stored once).
    fn name(&self) -> &'static str;

    /// The little-endian bytes of `part` (dtype and layout as [`QuantPart`] says) for `rows`:
    /// whole rows, in f32 as the float expression gives them, of `group`-element groups.
    fn quantize(
        &self,
        rows: &[f32],
        group: usize,
        scheme: &QuantScheme,
        scale_dtype: DType,
        part: QuantPart,
    ) -> Vec<u8>;
}

/// A shared [`QuantKernel`], compared and hashed by its name (so [`crate::WeightExpr`] stays
/// `Eq + Hash`).
#[derive(Debug, Clone)]
pub struct QuantKernelRef(pub Arc<dyn QuantKernel>);

impl QuantKernelRef {
    pub fn new(kernel: impl QuantKernel + 'static) -> QuantKernelRef {
        QuantKernelRef(Arc::new(kernel))
    }
}

impl std::ops::Deref for QuantKernelRef {
    type Target = dyn QuantKernel;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl PartialEq for QuantKernelRef {
    fn eq(&self, other: &QuantKernelRef) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for QuantKernelRef {}

impl std::hash::Hash for QuantKernelRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name().hash(state);
    }
}

/// How a runtime rounds the input of a quantized linear before its integer dot products, so
/// the reference evaluator can compute as it does ([`crate::Evaluator::run_with`]) and
/// `--verify` can compare like with like.
#[derive(Debug, Clone, Copy)]
pub enum ActivationRounding {
    /// Symmetric int8 over blocks of the input features, `scale = max|x| / 127` (ONNX
    /// Runtime's `MatMulNBits` at accuracy level 4). The function gives the block length for a
    /// weight quantized in groups of `group` over `cols` input features, or `None` where the
    /// runtime computes in float (the lowering's choice).
    Int8Blocks(fn(usize, usize) -> Option<usize>),
    /// Asymmetric int8 per row, the range widened to hold 0 (XNNPACK's dynamically quantized
    /// linears: `scale = (max - min) / 255`, an integer zero point).
    Int8PerRow,
}

impl ActivationRounding {
    /// `x [..., cols]` rounded as the runtime rounds it for a weight in groups of `group`, or
    /// `None` where the runtime does not round it.
    pub fn apply(self, x: &Tensor, group: usize) -> Result<Option<Tensor>> {
        let cols = *x.shape().last().unwrap_or(&1);
        let block = match self {
            ActivationRounding::Int8Blocks(block) => match block(group, cols) {
                Some(b) => b,
                None => return Ok(None),
            },
            ActivationRounding::Int8PerRow => cols,
        };
        if block == 0 || !cols.is_multiple_of(block) {
            return Err(Error::Tensor(format!("activation blocks of {block} do not divide {cols} features")));
        }
        let mut v = x.cast(DType::F32).as_f32()?.to_vec();
        for b in v.chunks_mut(block) {
            match self {
                ActivationRounding::Int8Blocks(_) => round_symmetric(b),
                ActivationRounding::Int8PerRow => round_asymmetric(b),
            }
        }
        Ok(Some(Tensor::f32(x.shape().to_vec(), v)?.cast(x.dtype())))
    }
}

/// `x` to `round(x * 127 / max|x|)` in `[-127, 127]` and back.
fn round_symmetric(x: &mut [f32]) {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    if amax == 0.0 {
        return;
    }
    let (scale, recip) = (amax / 127.0, 127.0 / amax);
    x.iter_mut().for_each(|v| *v = (*v * recip).round_ties_even().clamp(-127.0, 127.0) * scale);
}

/// `x` to int8 with `scale = (max - min) / 255` over a range holding 0 and the zero point
/// `round(-128 - min / scale)`, and back.
fn round_asymmetric(x: &mut [f32]) {
    let (lo, hi) = x.iter().fold((0f32, 0f32), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
    if hi == lo {
        return;
    }
    let scale = (hi - lo) / 255.0;
    let zero = (-128.0 - lo / scale).round_ties_even().clamp(-128.0, 127.0);
    x.iter_mut().for_each(|v| *v = (((*v / scale).round_ties_even() + zero).clamp(-128.0, 127.0) - zero) * scale);
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

/// The FP4 (E2M1) values of MXFP4's 4-bit codes (OCP microscaling), as transformers'
/// `integrations/mxfp4.py` tables them.
const FP4_VALUES: [f32; 16] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0];

/// MXFP4 blocks decoded (GPT-OSS's experts as the hub stores them): `blocks [rows, groups, 16]`
/// (two codes per byte, the even element in the low nibble) and `scales [rows, groups]` (E8M0
/// exponents biased by 127) -> `[rows, groups * 32]` f32, each code's value times
/// `2^(scale - 127)`; exact, as transformers' `ldexp` is.
pub fn decode_mxfp4(blocks: &[u8], scales: &[u8]) -> Vec<f32> {
    let mut out = Vec::with_capacity(blocks.len() * 2);
    for (group, &scale) in blocks.chunks_exact(16).zip(scales) {
        let factor = 2f32.powi(i32::from(scale) - 127);
        for &byte in group {
            out.push(FP4_VALUES[usize::from(byte & 0x0F)] * factor);
            out.push(FP4_VALUES[usize::from(byte >> 4)] * factor);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ONNX Runtime's blocks: `round(x * 127 / max|x|)` per block, ties to even; a block the
    /// runtime computes in float is left alone.
    #[test]
    fn activations_round_per_block_as_mlas_does() {
        let x = Tensor::f32(vec![1, 4], vec![1.0, -0.5, 0.25, 0.0]).unwrap();
        let blocks = ActivationRounding::Int8Blocks(|g, _| (g == 2).then_some(2));
        let r = blocks.apply(&x, 2).unwrap().unwrap();
        // block [1, -0.5]: scale 1/127, -63.5 -> -64 (even); block [0.25, 0]: exact
        assert_eq!(r.as_f32().unwrap(), &[1.0, -64.0 / 127.0, 0.25, 0.0]);
        assert!(blocks.apply(&x, 4).unwrap().is_none());
    }

    /// XNNPACK's rows: the range widened to 0, 255 steps, an integer zero point.
    #[test]
    fn activations_round_per_row_with_a_zero_point() {
        let x = Tensor::f32(vec![2, 3], vec![0.1, 0.5, 1.0, -2.0, -1.0, -0.3]).unwrap();
        let r = ActivationRounding::Int8PerRow.apply(&x, 3).unwrap().unwrap();
        let r = r.as_f32().unwrap();
        for (row, lo) in [(0, 0f32), (1, -2.0)] {
            let hi = if row == 0 { 1.0 } else { 0.0 };
            let scale = (hi - lo) / 255.0;
            for i in 0..3 {
                let (got, want) = (r[row * 3 + i], x.as_f32().unwrap()[row * 3 + i]);
                assert!((got - want).abs() <= scale / 2.0 + 1e-7, "{got} vs {want}");
                let steps = got / scale;
                assert!((steps - steps.round()).abs() < 1e-3, "{got} is not on the grid of {scale}");
            }
        }
    }

    /// Codes pair up low nibble first; the scale byte is a power of two biased by 127.
    #[test]
    fn mxfp4_decodes_codes_and_exponents() {
        let mut blocks = vec![0u8; 32];
        blocks[0] = 0x92; // 1.0 (code 2), then -0.5 (code 9)
        blocks[15] = 0xF7; // 6.0, then -6.0
        blocks[16] = 0x01; // second group: 0.5, then 0.0
        let out = decode_mxfp4(&blocks, &[127 + 2, 127 - 1]);
        assert_eq!(out.len(), 64);
        assert_eq!(&out[..2], &[4.0, -2.0]);
        assert_eq!(&out[30..32], &[24.0, -24.0]);
        assert_eq!(&out[32..34], &[0.25, 0.0]);
        assert!(out[2..30].iter().all(|&v| v == 0.0));
    }
}
