//! Multi-head latent attention (DeepSeek-V2/V3, transformers' `DeepseekV2Attention`): each
//! token's keys and values are one compressed latent (`kv_lora_rank` wide, normed) plus one
//! rotary key shared by the heads (`qk_rope_head_dim`), and those two are what a generation
//! graph caches, as transformers 5.23 caches them; every call expands the whole cached latent
//! to each head's key and value channels (`kv_b_proj`) before a plain attention. The queries
//! come from one projection or a low-rank pair with a norm between (`q_lora_rank`).
//!
//! A rotary over neighbouring channel pairs (V2, V3's `rope_interleave`) is the usual
//! rotate-half one over reordered rows of the projections that make the rotary channels (as
//! GPT-J's): scores are unchanged, and V3's de-interleaved output is exactly this order.

use hfexport_core::{Dim, Op, ValueId};

use crate::blocks::pairs_as_halves;
use crate::config::LatentSpec;
use crate::decoder::{Decoder, LayerInputs, Vb};
use crate::error::{ModelError, Result};

/// The epsilon of the query and latent norms, which `DeepseekV2RMSNorm` builds with its
/// default whatever `rms_norm_eps` says.
const LATENT_NORM_EPS: f32 = 1e-6;

impl Decoder<'_> {
    /// The latent attention of layer `layer` (its attention `Vb`) over `x`.
    pub(crate) fn latent_attention(
        &mut self,
        vb: &Vb,
        layer: usize,
        l: &LatentSpec,
        x: ValueId,
        s: &LayerInputs,
    ) -> Result<ValueId> {
        let layout = self.arch.layout.latent.ok_or_else(|| ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: "latent attention layers in a family without its projections".into(),
        })?;
        let (hs, h, bias) = (self.cfg.hidden_size, l.heads, self.cfg.attention_bias);
        let (nope, rope, kv_rank) = (l.nope_dim, l.rope_dim, l.kv_lora_rank);
        let qk = nope + rope;
        // queries [b, h, s, nope + rope], their rotary rows as rotate-half pairs where interleaved
        let q_rows = l.interleaved.then(|| (0..h).flat_map(|i| rotary_rows(i * qk, nope, rope)).collect::<Vec<_>>());
        let q = match l.q_lora_rank {
            None => self.reordered_linear(&vb.pp(layout.q), [h * qk, hs], false, q_rows.as_deref(), x)?,
            Some(rank) => {
                let a = self.linear(&vb.pp(layout.q_a), rank, hs, bias, x)?;
                let a = self.latent_norm(&vb.pp(layout.q_norm), rank, a)?;
                self.reordered_linear(&vb.pp(layout.q_b), [h * qk, rank], false, q_rows.as_deref(), a)?
            }
        };
        let q = self.split_heads(&vb.pp("q"), q, [h, qk], None)?;
        let q_nope = self.channels(&vb.name("q_nope"), q, 0, nope)?;
        let q_rot = self.channels(&vb.name("q_rot"), q, nope, qk)?;
        // the latent and the shared rotary key, one "head" each: [b, 1, s, rank], [b, 1, s, rope]
        let kv_rows = l.interleaved.then(|| rotary_rows(0, kv_rank, rope).collect::<Vec<_>>());
        let ckv = self.reordered_linear(&vb.pp(layout.kv_a), [kv_rank + rope, hs], bias, kv_rows.as_deref(), x)?;
        let latent = self.channels(&vb.name("latent"), ckv, 0, kv_rank)?;
        let latent = self.latent_norm(&vb.pp(layout.kv_norm), kv_rank, latent)?;
        let latent = self.split_heads(&vb.pp("latent"), latent, [1, kv_rank], None)?;
        let k_rot = self.channels(&vb.name("k_rot"), ckv, kv_rank, kv_rank + rope)?;
        let k_rot = self.split_heads(&vb.pp("k_rot"), k_rot, [1, rope], None)?;
        let tables = s.tables(&l.rope);
        let q_rot = self.rotate(&vb.name("q_rotary"), q_rot, tables, [rope, rope])?;
        let k_rot = self.rotate(&vb.name("k_rotary"), k_rot, tables, [rope, rope])?;
        let (latent, k_rot) = self.cached_kv(vb.path(), layer, latent, k_rot, s.positions)?;
        // every head's keys and values from the latent of every position: [b, h, t, ...]
        let kv = self.linear(&vb.pp(layout.kv_b), h * (nope + l.v_dim), kv_rank, false, latent)?;
        let ks = self.g.info(kv).shape.clone();
        let per_head = vec![ks[0].clone(), ks[2].clone(), Dim::from(h), Dim::from(nope + l.v_dim)];
        let kv = self.op(&vb.name("kv_heads"), Op::Reshape { shape: per_head }, &[kv])?;
        let kv = self.op(&vb.name("kv_heads_first"), Op::Transpose { perm: vec![0, 2, 1, 3] }, &[kv])?;
        let k_nope = self.channels(&vb.name("k_nope"), kv, 0, nope)?;
        let v = self.channels(&vb.name("v"), kv, nope, nope + l.v_dim)?;
        let mut wide = self.g.info(k_rot).shape.clone();
        wide[1] = Dim::from(h);
        let k_rot = self.op(&vb.name("k_rot_heads"), Op::Expand { shape: wide }, &[k_rot])?;
        let k = self.op(&vb.name("k"), Op::Concat { axis: 3 }, &[k_nope, k_rot])?;
        let q = self.op(&vb.name("query"), Op::Concat { axis: 3 }, &[q_nope, q_rot])?;
        let op = Op::Attention { scale: l.scale as f32, softcap: None, sliding_window: None, sinks: false };
        let o = self.op(&vb.name("attention"), op, &[q, k, v, s.mask])?;
        let o = self.op(&vb.name("heads_last"), Op::Transpose { perm: vec![0, 2, 1, 3] }, &[o])?;
        let os = self.g.info(o).shape.clone();
        let merged = vec![os[0].clone(), os[1].clone(), Dim::from(h * l.v_dim)];
        let o = self.op(&vb.name("merge_heads"), Op::Reshape { shape: merged }, &[o])?;
        let out = vb.pp(self.arch.layout.attention.out);
        self.linear(&out, hs, h * l.v_dim, self.cfg.o_bias, o)
    }

    /// `x[..., start..end]` on the last axis.
    fn channels(&mut self, name: &str, x: ValueId, start: usize, end: usize) -> Result<ValueId> {
        let axis = self.g.info(x).shape.len() - 1;
        self.op(name, Op::Slice { axis, start: Dim::from(start), end: Dim::from(end) }, &[x])
    }

    /// The RMS norm of the queries' or the latent's low-rank channels (weights at `vb`).
    fn latent_norm(&mut self, vb: &Vb, size: usize, x: ValueId) -> Result<ValueId> {
        let w = self.weight(vb, "weight", &[size])?;
        self.op(vb.path(), Op::RmsNorm { eps: LATENT_NORM_EPS }, &[x, w])
    }
}

/// The rows of one head's (or the latent's) `pass` channels as stored, then its `rope` rotary
/// channels' neighbouring pairs as rotate-half halves, from row `start`.
fn rotary_rows(start: usize, pass: usize, rope: usize) -> impl Iterator<Item = usize> {
    (start..start + pass).chain(pairs_as_halves(1, rope, rope).into_iter().map(move |c| start + pass + c))
}
