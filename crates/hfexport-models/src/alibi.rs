//! ALiBi, attention with linear biases (Bloom, Falcon with `alibi`): each head adds
//! `slope * key position` to its scores instead of rotating queries and keys.
//!
//! The biases are folded into an additive float mask per distinct kind of ALiBi layer, made
//! once per graph next to the boolean mask (as T5's relative bias is), so the attention op and
//! every backend's lowering stay as they are. Key positions are counted over the attention
//! mask as transformers' `build_alibi_tensor` counts them (`(cumsum(mask) - 1) * mask`), or are
//! the cache slots of a static cache (one unpadded row).

use hfexport_core::ops::BinaryOp;
use hfexport_core::{DType, Dim, Op, Tensor, ValueId};

use crate::config::AttentionSpec;
use crate::decoder::{Decoder, LayerInputs};
use crate::error::Result;
use crate::schema::Alibi;

/// What an ALiBi layer's biases depend on: the arithmetic, its head count and head size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AlibiKind {
    kind: Alibi,
    heads: usize,
    head_dim: usize,
}

impl AlibiKind {
    pub(crate) fn of(a: &AttentionSpec) -> Option<AlibiKind> {
        a.alibi.map(|kind| AlibiKind { kind, heads: a.heads, head_dim: a.head_dim })
    }
}

/// The slope of each head, as transformers' `_get_alibi_slopes` computes them in f32: powers
/// `1..=n` of `2^(-8/n)` for the largest power of two `n <= heads`, then the odd powers of
/// `2^(-4/n)` for the remaining heads.
pub(crate) fn slopes(heads: usize) -> Vec<f32> {
    let closest = 1usize << heads.ilog2();
    let base = |n: usize| 2f64.powf(-(2f64.powf(-((n as f64).log2() - 3.0)))) as f32;
    let power = |b: f32, p: usize| (b as f64).powi(p as i32) as f32;
    let mut slopes: Vec<f32> = (1..=closest).map(|p| power(base(closest), p)).collect();
    let extra = base(2 * closest);
    slopes.extend((0..closest.min(heads - closest)).map(|i| power(extra, 2 * i + 1)));
    slopes
}

impl Decoder<'_> {
    /// Adds to `shared` the biased mask of every kind of ALiBi layer the model has. Key
    /// positions are counted over `attention_mask` `[b, keys]` when the graph has one, else
    /// they are `shared.key_positions` (a static cache's slots).
    pub(crate) fn alibi_masks(&mut self, shared: &mut LayerInputs, attention_mask: Option<ValueId>) -> Result<()> {
        let mut kinds: Vec<AlibiKind> = vec![];
        for kind in self.cfg.layers.iter().filter_map(|l| AlibiKind::of(l.attention()?)) {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        if kinds.is_empty() {
            return Ok(());
        }
        let keys = match attention_mask {
            Some(am) => self.mask_positions("alibi.key_positions", am)?,
            None => shared.key_positions,
        };
        for kind in kinds {
            let mask = self.alibi_mask(kind, shared.mask, keys)?;
            shared.alibi.push((kind, mask));
        }
        Ok(())
    }

    /// `where(mask, bias, lowest)` `[b, heads, queries, keys]`, the bias `slope * position` of
    /// each head and key (`positions` `[b, keys]`, i64) in the arithmetic of `k.kind`.
    fn alibi_mask(&mut self, k: AlibiKind, mask: ValueId, positions: ValueId) -> Result<ValueId> {
        let dtype = self.opts.dtype;
        let p = format!("alibi.h{}d{}", k.heads, k.head_dim);
        let falcon = k.kind == Alibi::Falcon;
        let shape = self.g.info(positions).shape.clone();
        let one = Dim::konst(1);
        let mut pos = self.op(&format!("{p}.positions"), Op::Cast(DType::F32), &[positions])?;
        if falcon {
            pos = self.bf16_rounded(&format!("{p}.positions"), pos)?;
        }
        let pos = self.op(
            &format!("{p}.per_key"),
            Op::Reshape { shape: vec![shape[0].clone(), one.clone(), one.clone(), shape[1].clone()] },
            &[pos],
        )?;
        let mut slopes = slopes(k.heads);
        if falcon {
            slopes = slopes.into_iter().map(|s| half::bf16::from_f32(s).to_f32()).collect();
        }
        let slopes = Tensor::float(DType::F32, vec![1, k.heads, 1, 1], slopes)?;
        let slopes = self.op(&format!("{p}.slopes"), Op::Constant(slopes), &[])?;
        let mut bias = self.op(&format!("{p}.bias"), Op::Binary(BinaryOp::Mul), &[slopes, pos])?;
        if falcon {
            bias = self.bf16_rounded(&format!("{p}.bias"), bias)?;
        }
        if dtype != DType::F32 {
            bias = self.op(&format!("{p}.bias_cast"), Op::Cast(dtype), &[bias])?;
        }
        if falcon {
            let root = Tensor::float(dtype, vec![], vec![(k.head_dim as f32).sqrt()])?;
            let root = self.op(&format!("{p}.sqrt_head_dim"), Op::Constant(root), &[])?;
            bias = self.op(&format!("{p}.bias_scaled"), Op::Binary(BinaryOp::Div), &[bias, root])?;
        }
        self.masked_bias(&format!("{p}.mask"), mask, bias)
    }

    /// `x` (f32) rounded to bfloat16 and back, as torch rounds a bfloat16 tensor's products.
    fn bf16_rounded(&mut self, name: &str, x: ValueId) -> Result<ValueId> {
        let b = self.op(&format!("{name}.bf16"), Op::Cast(DType::BF16), &[x])?;
        self.op(&format!("{name}.rounded"), Op::Cast(DType::F32), &[b])
    }
}

#[cfg(test)]
mod tests {
    use super::slopes;

    /// transformers' `_get_alibi_slopes(n)` for a power of two and for counts between.
    #[test]
    fn slopes_match_transformers() {
        assert_eq!(slopes(8), (1..=8).map(|i| 0.5f32.powi(i)).collect::<Vec<_>>());
        assert_eq!(slopes(4), vec![0.25, 0.0625, 0.015625, 0.00390625]);
        // 6 heads: 2^(-2 i) for i in 1..=4, then 2^(-1), 2^(-3) from the base of 8
        assert_eq!(slopes(6), vec![0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]);
        assert_eq!(slopes(1), vec![2f32.powi(-8)]);
        assert_eq!(slopes(3), vec![2f32.powi(-4), 2f32.powi(-8), 2f32.powi(-2)]);
    }
}
