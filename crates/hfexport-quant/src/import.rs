//! Checkpoints quantized on the hub, imported as they are stored: GPTQ (4-bit, `desc_act`
//! false, symmetric or not, `checkpoint_format` `gptq` or `gptq_v2`) and AWQ (GEMM layout) read
//! as the same representation the quantization pass writes (values one per byte `u8 [out, in]`,
//! zero points `u8 [out, groups]`, scales `[out, groups]`), never through a float copy.
//!
//! A quantized module `P` stores `P.qweight`, `P.qzeros`, `P.scales` (and GPTQ's `P.g_idx`).
//! `hfexport-models` reads the layout from `config.json` (`prequantized.rs`) and its
//! `Checkpoint` answers for virtual tensors next to them, unpacked here ([`PreQuant`]): `P.weight`
//! (the dequantized float weight `[out, in]`, so builders and the reference evaluator see an
//! ordinary linear) and `P.qweight:values`, `P.qweight:zeros`, `P.qweight:scales` (the parts).
//! [`load_prequantized`] then puts the parts back in the graph as the same `QuantLinear` a
//! recipe's asymmetric int4 weight gives, and every format lowers it the same way.
//!
//! Packings (int32 words, 8 nibbles each, nibble `k` at bits `4k..4k+4`):
//! - GPTQ `qweight [in / 8, out]`: word `(r, o)` holds inputs `8r..8r+8` of output `o`;
//!   `qzeros [groups, out / 8]`: word `(g, c)` holds outputs `8c..8c+8`; the `gptq` format stores
//!   each zero point minus one (AutoGPTQ's convention), `gptq_v2` as is.
//! - AWQ `qweight [in, out / 8]` and `qzeros [groups, out / 8]`: nibble `k` holds output column
//!   `8c + [0, 2, 4, 6, 1, 3, 5, 7][k]`.
//! - `scales [groups, out]` in both. Dequantized: `(q - z) * s`.

use hfexport_core::decompose::{decompose, drop_unread_weights, rebuild};
use hfexport_core::graph::Producer;
use hfexport_core::{DType, Error, Graph, Op, Result, Tensor, TensorInfo, ValueId, WeightExpr};

/// How a checkpoint's quantized modules are laid out (`quantization_config` of config.json,
/// read by `hfexport-models`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreQuant {
    pub method: Method,
    pub group: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `zeros_minus_one`: the `gptq` checkpoint format (not `gptq_v2`).
    Gptq {
        zeros_minus_one: bool,
    },
    Awq,
}

const AWQ_ORDER: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];

/// The parts of a virtual tensor name.
pub const VALUES: &str = ":values";
pub const ZEROS: &str = ":zeros";
pub const SCALES: &str = ":scales";

impl PreQuant {
    /// `[out, in]` of a module from its `qweight` shape.
    pub fn dims(&self, qweight: &[usize]) -> Option<(usize, usize)> {
        match (self.method, qweight) {
            (Method::Gptq { .. }, [r, out]) => Some((*out, r * 8)),
            (Method::Awq, [inp, c]) => Some((c * 8, *inp)),
            _ => None,
        }
    }

    /// The info of part `suffix` (`VALUES`, `ZEROS`, `SCALES`) of a module with `qweight` and
    /// `scales` infos.
    pub fn part_info(&self, suffix: &str, qweight: &TensorInfo, scales: &TensorInfo) -> Option<TensorInfo> {
        let (out, inp) = self.dims(&qweight.shape)?;
        let groups = *scales.shape.first()?;
        match suffix {
            VALUES => Some(TensorInfo { dtype: DType::U8, shape: vec![out, inp] }),
            ZEROS => Some(TensorInfo { dtype: DType::U8, shape: vec![out, groups] }),
            SCALES => Some(TensorInfo { dtype: scales.dtype, shape: vec![out, groups] }),
            _ => None,
        }
    }

    /// `q` as `u8 [out, in]`.
    pub fn values(&self, qweight: &Tensor) -> Result<Tensor> {
        let (out, inp) = self.dims(qweight.shape()).ok_or_else(|| bad_shape("qweight", qweight))?;
        let words = words(qweight)?;
        let mut q = vec![0u8; out * inp];
        match self.method {
            Method::Gptq { .. } => {
                for r in 0..inp / 8 {
                    for o in 0..out {
                        let w = words[r * out + o];
                        for k in 0..8 {
                            q[o * inp + 8 * r + k] = ((w >> (4 * k)) & 0xF) as u8;
                        }
                    }
                }
            }
            Method::Awq => {
                for i in 0..inp {
                    for c in 0..out / 8 {
                        let w = words[i * (out / 8) + c];
                        for (k, col) in AWQ_ORDER.iter().enumerate() {
                            q[(8 * c + col) * inp + i] = ((w >> (4 * k)) & 0xF) as u8;
                        }
                    }
                }
            }
        }
        tensor(DType::U8, vec![out, inp], q)
    }

    /// Zero points as `u8 [out, groups]` (GPTQ's stored minus-one undone).
    pub fn zeros(&self, qzeros: &Tensor) -> Result<Tensor> {
        let [groups, c] = *qzeros.shape() else { return Err(bad_shape("qzeros", qzeros)) };
        let (out, words) = (c * 8, words(qzeros)?);
        let mut z = vec![0u8; out * groups];
        for g in 0..groups {
            for c in 0..out / 8 {
                let w = words[g * (out / 8) + c];
                for (k, awq_col) in AWQ_ORDER.iter().enumerate() {
                    let (col, plus) = match self.method {
                        Method::Gptq { zeros_minus_one } => (8 * c + k, u8::from(zeros_minus_one)),
                        Method::Awq => (8 * c + awq_col, 0),
                    };
                    z[col * groups + g] = ((w >> (4 * k)) & 0xF) as u8 + plus;
                }
            }
        }
        tensor(DType::U8, vec![out, groups], z)
    }

    /// Scales `[groups, out]` transposed to `[out, groups]`, in their stored dtype.
    pub fn scales(&self, scales: &Tensor) -> Result<Tensor> {
        let [groups, out] = *scales.shape() else { return Err(bad_shape("scales", scales)) };
        let (size, bytes) = (scales.dtype().size(), scales.to_le_bytes());
        let mut t = vec![0u8; bytes.len()];
        for g in 0..groups {
            for o in 0..out {
                t[(o * groups + g) * size..][..size].copy_from_slice(&bytes[(g * out + o) * size..][..size]);
            }
        }
        tensor(scales.dtype(), vec![out, groups], t)
    }

    /// Checks GPTQ's `g_idx` is the plain `i / group` (no activation-order permutation).
    pub fn check_g_idx(&self, name: &str, g_idx: &Tensor, inp: usize, groups: usize) -> Result<()> {
        let ids = g_idx.cast(DType::I64);
        let ids = ids.as_i64()?;
        let group = inp / groups.max(1);
        match ids.iter().enumerate().find(|(i, &g)| g != (i / group.max(1)) as i64) {
            None => Ok(()),
            Some((i, g)) => Err(Error::Weight {
                tensor: name.to_string(),
                msg: format!(
                    "input {i} is in group {g}, not {}: an activation-order (desc_act) permutation, which is not \
                     supported",
                    i / group.max(1)
                ),
            }),
        }
    }
}

fn words(t: &Tensor) -> Result<Vec<u32>> {
    if t.dtype() != DType::I32 {
        return Err(Error::Tensor(format!("packed 4-bit weights must be int32, got {}", t.dtype())));
    }
    Ok(t.to_le_bytes().chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

fn tensor(dtype: DType, shape: Vec<usize>, bytes: Vec<u8>) -> Result<Tensor> {
    Tensor::from_le_bytes(dtype, shape, &bytes)
}

fn bad_shape(what: &str, t: &Tensor) -> Error {
    Error::Tensor(format!("{what} has an unexpected shape {:?}", t.shape()))
}

/// `g` with each `Linear` whose weight is a GPTQ/AWQ module's dequantized virtual tensor
/// (`P.weight`, see the module docs) reading the module's own parts instead:
/// `QuantLinear { bits: 4, group, zero_point: true }` over `P.qweight:values` (u8),
/// `P.qweight:scales` (cast to the export dtype) and `P.qweight:zeros`. `info` answers for the
/// checkpoint's tensors (virtual ones included).
pub fn load_prequantized(g: &Graph, info: &dyn Fn(&str) -> Option<TensorInfo>) -> Result<Graph> {
    let quantized_module = |e: &WeightExpr| {
        stored_name(e)
            .and_then(|n| n.strip_suffix(".weight"))
            .is_some_and(|p| info(&format!("{p}.qweight{VALUES}")).is_some())
    };
    if !g.weights().iter().any(|w| quantized_module(&w.expr)) {
        return Ok(g.clone());
    }
    let g = &decompose(g, &|op| matches!(op, Op::GatedMlp { .. }))?;
    let rewritten = rebuild(g, &mut |out, node, ins| {
        let prefix = match (&node.op, ins.get(1).map(|&v| out.producer(v))) {
            (Op::Linear, Some(Producer::Weight(w))) => {
                stored_name(&out.weights()[w].expr).and_then(|n| n.strip_suffix(".weight")).map(str::to_string)
            }
            _ => None,
        };
        let parts = prefix.as_ref().and_then(|p| {
            let part = |s: &str| info(&format!("{p}.qweight{s}")).map(|i| (format!("{p}.qweight{s}"), i));
            Some((part(VALUES)?, part(SCALES)?, part(ZEROS)?))
        });
        let (Some(prefix), Some(((vn, vi), (sn, si), (zn, zi)))) = (prefix, parts) else {
            return out.add_node(&node.name, node.op.clone(), ins);
        };
        let dtype = out.info(ins[1]).dtype;
        let scales = match si.dtype == dtype {
            true => WeightExpr::stored(&sn),
            false => WeightExpr::Cast(Box::new(WeightExpr::stored(&sn)), dtype),
        };
        let q = out.add_weight(&format!("{prefix}.weight_q"), WeightExpr::stored(&vn), vi.dtype, &vi.shape);
        let s = out.add_weight(&format!("{prefix}.weight_scales"), scales, dtype, &si.shape);
        let z = out.add_weight(&format!("{prefix}.weight_zero_points"), WeightExpr::stored(&zn), zi.dtype, &zi.shape);
        let group = vi.shape[1] / si.shape[1].max(1);
        let all: Vec<ValueId> = [&[ins[0], q, s, z][..], &ins[2..]].concat();
        out.add_node(&node.name, Op::QuantLinear { bits: 4, group, zero_point: true }, &all)
    })?;
    drop_unread_weights(&rewritten)
}

/// The stored tensor a float weight reads, possibly through a cast.
fn stored_name(e: &WeightExpr) -> Option<&str> {
    match e {
        WeightExpr::Stored(n) => Some(n),
        WeightExpr::Cast(inner, _) => stored_name(inner),
        _ => None,
    }
}
