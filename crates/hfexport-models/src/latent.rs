//! Multi-head latent attention (DeepSeek-V2/V3, transformers' `DeepseekV2Attention`): each
//! token's keys and values are one compressed latent (`kv_lora_rank` wide, normed) plus one
//! rotary key shared by the heads (`qk_rope_head_dim`), and those two are what a generation
//! graph caches, as transformers 5.23 caches them. The queries come from one projection or a
//! low-rank pair with a norm between (`q_lora_rank`).
//!
//! Two forms attend over the cached latent (`BuildOptions::latent`, see [`LatentForm`] for
//! their costs): the expanded one, transformers' own, turns the latent of every position into
//! each head's keys and values (`kv_b_proj`) before a plain attention; the absorbed one
//! multiplies each head's query by its key part of `kv_b_proj` instead, attends with one key
//! head over the latent itself and expands only the attended result by the value part. A
//! generation export's decode components take the absorbed form, its prefill and forward
//! graphs the expanded one.
//!
//! A rotary over neighbouring channel pairs (V2, V3's `rope_interleave`) is the usual
//! rotate-half one over reordered rows of the projections that make the rotary channels (as
//! GPT-J's): scores are unchanged, and V3's de-interleaved output is exactly this order.

use hfexport_core::{Dim, LatentForm, Op, ValueId};

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
        let mut q = self.split_heads(&vb.pp("q"), q, [h, qk], None)?;
        if let Some(qs) = l.query_scale {
            // per position, so before or after the rotary alike
            q = self.scale_queries_by_position(&vb.name("q_scaled"), q, s.positions, qs)?;
        }
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
        let kv_b = vb.pp(layout.kv_b);
        let parts = Parts { q_nope, q_rot, latent, k_rot, mask: s.mask };
        let o = match self.opts.latent {
            LatentForm::Absorbed => self.absorbed(vb, &kv_b, l, parts)?,
            LatentForm::Auto | LatentForm::Expanded => self.expanded(vb, &kv_b, l, parts)?,
        };
        let o = self.op(&vb.name("heads_last"), Op::Transpose { perm: vec![0, 2, 1, 3] }, &[o])?;
        let os = self.g.info(o).shape.clone();
        let merged = vec![os[0].clone(), os[1].clone(), Dim::from(h * l.v_dim)];
        let o = self.op(&vb.name("merge_heads"), Op::Reshape { shape: merged }, &[o])?;
        let out = vb.pp(self.arch.layout.attention.out);
        self.linear(&out, hs, h * l.v_dim, self.cfg.o_bias, o)
    }

    /// Every head's keys and values from the latent of every position (`kv_b_proj`), then a
    /// plain attention: `[b, h, s, v_dim]`.
    fn expanded(&mut self, vb: &Vb, kv_b: &Vb, l: &LatentSpec, p: Parts) -> Result<ValueId> {
        let (h, nope) = (l.heads, l.nope_dim);
        let kv = self.linear(kv_b, h * (nope + l.v_dim), l.kv_lora_rank, false, p.latent)?;
        let ks = self.g.info(kv).shape.clone();
        let per_head = vec![ks[0].clone(), ks[2].clone(), Dim::from(h), Dim::from(nope + l.v_dim)];
        let kv = self.op(&vb.name("kv_heads"), Op::Reshape { shape: per_head }, &[kv])?;
        let kv = self.op(&vb.name("kv_heads_first"), Op::Transpose { perm: vec![0, 2, 1, 3] }, &[kv])?;
        let k_nope = self.channels(&vb.name("k_nope"), kv, 0, nope)?;
        let v = self.channels(&vb.name("v"), kv, nope, nope + l.v_dim)?;
        let mut wide = self.g.info(p.k_rot).shape.clone();
        wide[1] = Dim::from(h);
        let k_rot = self.op(&vb.name("k_rot_heads"), Op::Expand { shape: wide }, &[p.k_rot])?;
        let k = self.op(&vb.name("k"), Op::Concat { axis: 3 }, &[k_nope, k_rot])?;
        let q = self.op(&vb.name("query"), Op::Concat { axis: 3 }, &[p.q_nope, p.q_rot])?;
        self.op(&vb.name("attention"), attention(l), &[q, k, v, p.mask])
    }

    /// The key expansion folded into the queries (`q_nope · W_uk` per head: `kv_lora_rank`
    /// channels), one attention whose single key head is the latent and the rotary key and
    /// whose values are the latent, then each head's value expansion (`W_uv ·`): `[b, h, s,
    /// v_dim]`, equal to [`Decoder::expanded`]'s up to rounding. `W_uk` and `W_uv` are views of
    /// the stored `kv_b_proj` weight (`[h, nope + v, rank]`, sliced), which the prefill's
    /// expansion reads too, so a generation export stores it once; runtimes fold the views.
    /// Every product is a per-head `[h, m, k] x [h, k, n]` (no broadcast batch axes).
    fn absorbed(&mut self, vb: &Vb, kv_b: &Vb, l: &LatentSpec, p: Parts) -> Result<ValueId> {
        let (h, nope, v, rank) = (l.heads, l.nope_dim, l.v_dim, l.kv_lora_rank);
        let w = self.weight(kv_b, "weight", &[h * (nope + v), rank])?;
        let per_head = [h, nope + v, rank].map(Dim::from).to_vec();
        let w = self.op(&vb.name("kv_b_heads"), Op::Reshape { shape: per_head }, &[w])?;
        let slice = |start: usize, end: usize| Op::Slice { axis: 1, start: Dim::from(start), end: Dim::from(end) };
        let w_uk = self.op(&vb.name("w_uk"), slice(0, nope), &[w])?;
        let w_uv = self.op(&vb.name("w_uv"), slice(nope, nope + v), &[w])?;
        let q = self.heads_major(&vb.name("q_nope_heads"), p.q_nope)?;
        let q = self.op(&vb.name("q_latent"), Op::MatMul, &[q, w_uk])?;
        let q_latent = self.heads_minor(&vb.name("q_latent_heads"), q, p.q_nope)?;
        let q = self.op(&vb.name("query"), Op::Concat { axis: 3 }, &[q_latent, p.q_rot])?;
        let k = self.op(&vb.name("k"), Op::Concat { axis: 3 }, &[p.latent, p.k_rot])?;
        // one key head for all (`fold_query_groups` puts the heads along its query axis)
        let o = self.op(&vb.name("attention"), attention(l), &[q, k, p.latent, p.mask])?;
        let o = self.heads_major(&vb.name("attended_heads"), o)?;
        let o = self.op(&vb.name("attended_columns"), Op::Transpose { perm: vec![0, 2, 1] }, &[o])?;
        let o = self.op(&vb.name("values"), Op::MatMul, &[w_uv, o])?;
        let o = self.op(&vb.name("values_rows"), Op::Transpose { perm: vec![0, 2, 1] }, &[o])?;
        self.heads_minor(&vb.name("values_heads"), o, p.q_nope)
    }

    /// `[b, h, s, c]` -> `[h, b * s, c]`.
    fn heads_major(&mut self, name: &str, x: ValueId) -> Result<ValueId> {
        let [b, h, s, c] = <[Dim; 4]>::try_from(self.g.info(x).shape.clone()).expect("[b, h, s, c]");
        let x = self.op(&format!("{name}.transpose"), Op::Transpose { perm: vec![1, 0, 2, 3] }, &[x])?;
        self.op(name, Op::Reshape { shape: vec![h, b.mul(&s), c] }, &[x])
    }

    /// `[h, b * s, c]` -> `[b, h, s, c]`, `b` and `s` those of `like` (`[b, h, s, ...]`).
    fn heads_minor(&mut self, name: &str, x: ValueId, like: ValueId) -> Result<ValueId> {
        let (xs, ls) = (self.g.info(x).shape.clone(), self.g.info(like).shape.clone());
        let shape = vec![xs[0].clone(), ls[0].clone(), ls[2].clone(), xs[2].clone()];
        let x = self.op(&format!("{name}.split"), Op::Reshape { shape }, &[x])?;
        self.op(name, Op::Transpose { perm: vec![1, 0, 2, 3] }, &[x])
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

/// What both forms attend with: the queries' plain and rotary channels `[b, h, s, ...]`, the
/// cached latent `[b, 1, t, kv_lora_rank]` and rotary key `[b, 1, t, rope]`, the mask.
#[derive(Clone, Copy)]
struct Parts {
    q_nope: ValueId,
    q_rot: ValueId,
    latent: ValueId,
    k_rot: ValueId,
    mask: ValueId,
}

/// The attention op of a latent layer (its scale; no softcap, window or sinks).
fn attention(l: &LatentSpec) -> Op {
    Op::Attention { scale: l.scale as f32, softcap: None, sliding_window: None, sinks: false }
}

/// The rows of one head's (or the latent's) `pass` channels as stored, then its `rope` rotary
/// channels' neighbouring pairs as rotate-half halves, from row `start`.
fn rotary_rows(start: usize, pass: usize, rope: usize) -> impl Iterator<Item = usize> {
    (start..start + pass).chain(pairs_as_halves(1, rope, rope).into_iter().map(move |c| start + pass + c))
}
