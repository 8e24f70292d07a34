//! Gemma 3n's residual streams (AltUp) and low-rank residual (LAuReL), as blocks around the
//! shared decoder layer.
//!
//! The residual is `n` streams, carried between layers as one `[b, s, n, hidden]` value: the
//! token embeddings and `n - 1` projections of them (each rescaled to the embeddings' RMS). A
//! layer predicts every stream as a per-token mix of all of them (the mix from the `tanh` of a
//! router over the active stream), runs the ordinary layer body ([`Decoder::layer_body`], with
//! LAuReL beside its attention) on the active prediction, and corrects every prediction by its
//! share of what the layer added; the per-layer embeddings then feed the other streams. After
//! the last layer the other streams are projected back, rescaled to the first's RMS, and all
//! are averaged. Nothing here is a new op: the mixes are a batched `MatMul` and broadcasts.

use hfexport_core::ops::{Activation, BinaryOp, ReduceKind, UnaryOp};
use hfexport_core::{Dim, Op, Tensor, ValueId};

use crate::config::AltUp;
use crate::decoder::{Decoder, LayerInputs, Vb};
use crate::error::Result;
use crate::layout::{AltUpLayout, LaurelLayout};

/// The floor of a projection's mean square before its RMS divides (transformers' clamp).
const MIN_MEAN_SQUARE: f64 = 1e-5;

impl Decoder<'_> {
    /// A layer over the streams `[b, s, n, hidden]`: predict, the layer body on the active
    /// prediction, correct, then the per-layer embedding's update added to every stream but
    /// the first.
    pub(crate) fn altup_layer(
        &mut self,
        vb: &Vb,
        i: usize,
        (altup, names): (AltUp, AltUpLayout),
        streams: ValueId,
        s: &LayerInputs,
        act: Activation,
    ) -> Result<ValueId> {
        let block = vb.pp(names.prefix);
        let predictions = self.altup_predict(&block, (altup, names), streams)?;
        let active = self.stream(&block.name("active_prediction"), predictions, altup.active)?;
        let out = self.layer_body(vb, i, active, s, act)?;
        let corrected = self.altup_correct(&block, (altup, names), predictions, out)?;
        let (Some(per_layer), Some(pl)) = (s.per_layer, self.arch.layout.per_layer_inputs) else {
            return Ok(corrected);
        };
        let mut first = self.stream(&block.name("first_prediction"), corrected, altup.active)?;
        if altup.correct_scale {
            let w = self.weight(&block, names.output_scale, &[self.cfg.hidden_size])?;
            first = self.op(&block.name("first_prediction.scaled"), Op::Binary(BinaryOp::Mul), &[first, w])?;
        }
        let y = self.per_layer_update(vb, i, pl, first, per_layer, act)?;
        let y = self.unsqueeze_stream(&vb.name("per_layer_update"), y)?;
        let mut rest = vec![1.0; altup.streams];
        rest[0] = 0.0;
        let rest = self.stream_column(&vb.name("per_layer_update.streams"), rest)?;
        let y = self.op(&vb.name("per_layer_update.spread"), Op::Binary(BinaryOp::Mul), &[y, rest])?;
        self.op(&vb.name("streams"), Op::Binary(BinaryOp::Add), &[corrected, y])
    }

    /// The streams `[b, s, n, hidden]` of the token embeddings `h`: `h` first, then each of the
    /// root's projections of it rescaled to `h`'s RMS.
    pub(crate) fn altup_streams(&mut self, root: &Vb, names: AltUpLayout, n: usize, h: ValueId) -> Result<ValueId> {
        let target = self.rms(&root.name("altup.target_rms"), h)?;
        let mut streams = vec![self.unsqueeze_stream(&root.name("altup.stream.0"), h)?];
        for j in 1..n {
            let vb = root.pp(names.projections).pp(j - 1);
            let p = self.rescaled_projection(&vb, h, target)?;
            streams.push(self.unsqueeze_stream(&vb.name("stream"), p)?);
        }
        self.op(&root.name("altup.streams"), Op::Concat { axis: 2 }, &streams)
    }

    /// The hidden states `[b, s, hidden]` after the last layer: the first stream and the
    /// others projected back (each rescaled to the first's RMS), averaged.
    pub(crate) fn altup_merge(&mut self, root: &Vb, names: AltUpLayout, n: usize, streams: ValueId) -> Result<ValueId> {
        let first = self.stream(&root.name("altup.unembed.0"), streams, 0)?;
        let target = self.rms(&root.name("altup.unembed.target_rms"), first)?;
        let mut all = vec![self.unsqueeze_stream(&root.name("altup.unembed.0.stream"), first)?];
        for j in 1..n {
            let vb = root.pp(names.unembed).pp(j - 1);
            let x = self.stream(&vb.name("input"), streams, j)?;
            let p = self.rescaled_projection(&vb, x, target)?;
            all.push(self.unsqueeze_stream(&vb.name("stream"), p)?);
        }
        let all = self.op(&root.name("altup.unembedded"), Op::Concat { axis: 2 }, &all)?;
        let mean = Op::Reduce { kind: ReduceKind::Mean, axes: vec![2], keep_dims: false };
        self.op(&root.name("altup.merged"), mean, &[all])
    }

    /// LAuReL beside an attention: `(h + x + norm(right(left(x)))) / sqrt(2)`, `h` the
    /// attention's residual sum and `x` its normed input.
    pub(crate) fn laurel(
        &mut self,
        vb: &Vb,
        names: LaurelLayout,
        rank: usize,
        (h, x): (ValueId, ValueId),
    ) -> Result<ValueId> {
        let hs = self.cfg.hidden_size;
        let y = self.linear(&vb.pp(names.left), rank, hs, false, x)?;
        let y = self.linear(&vb.pp(names.right), hs, rank, false, y)?;
        let y = self.norm(&vb.pp(names.norm), hs, y)?;
        let y = self.op(&vb.name("residual"), Op::Binary(BinaryOp::Add), &[x, y])?;
        let sum = self.op(&vb.name("sum"), Op::Binary(BinaryOp::Add), &[h, y])?;
        self.scale(&vb.name("scaled"), sum, 0.5f64.sqrt())
    }

    /// Every stream predicted as its own value plus a per-token mix of all streams:
    /// `p_j = x_j + Σ_i c[j * n + i] x_i`, `c = prediction(router(active stream))`.
    fn altup_predict(&mut self, vb: &Vb, (altup, names): (AltUp, AltUpLayout), streams: ValueId) -> Result<ValueId> {
        let n = altup.streams;
        let active = self.stream(&vb.name("active"), streams, altup.active)?;
        let modalities = self.altup_router(vb, names, (n, "predict"), active)?;
        let c = self.linear(&vb.pp(names.prediction), n * n, n, false, modalities)?;
        let sh = self.g.info(c).shape.clone();
        let square = vec![sh[0].clone(), sh[1].clone(), Dim::from(n), Dim::from(n)];
        let c = self.op(&vb.pp(names.prediction).name("square"), Op::Reshape { shape: square }, &[c])?;
        let mixed = self.op(&vb.name("mixed"), Op::MatMul, &[c, streams])?;
        self.op(&vb.name("predictions"), Op::Binary(BinaryOp::Add), &[mixed, streams])
    }

    /// The predictions corrected by the layer's output `out`: each stream plus its share
    /// `1 + correction(router(out))` of the innovation `out - prediction[active]`.
    fn altup_correct(
        &mut self,
        vb: &Vb,
        (altup, names): (AltUp, AltUpLayout),
        predictions: ValueId,
        out: ValueId,
    ) -> Result<ValueId> {
        let n = altup.streams;
        let modalities = self.altup_router(vb, names, (n, "correct"), out)?;
        let active = self.stream(&vb.name("corrected_active"), predictions, altup.active)?;
        let innovation = self.op(&vb.name("innovation"), Op::Binary(BinaryOp::Sub), &[out, active])?;
        let innovation = self.unsqueeze_stream(&vb.name("innovation.stream"), innovation)?;
        let correction = vb.pp(names.correction);
        let c = self.linear(&correction, n, n, false, modalities)?;
        let one = self.scalar(&correction.name("one"), 1.0)?;
        let c = self.op(&correction.name("plus_one"), Op::Binary(BinaryOp::Add), &[c, one])?;
        let c = self.op(&correction.name("shares"), Op::Reshape { shape: self.per_stream(c, n) }, &[c])?;
        let shares = self.op(&vb.name("shares"), Op::Binary(BinaryOp::Mul), &[innovation, c])?;
        self.op(&vb.name("corrected"), Op::Binary(BinaryOp::Add), &[predictions, shares])
    }

    /// The streams' weights `[b, s, n]` of a stream's value `x`: `tanh(router(norm(x) /
    /// hidden))`. A layer routes twice (`step`: its prediction, its correction) over one
    /// router: the weights are declared once, the nodes named by the step.
    fn altup_router(&mut self, vb: &Vb, names: AltUpLayout, (n, step): (usize, &str), x: ValueId) -> Result<ValueId> {
        let (hs, eps) = (self.cfg.hidden_size, self.cfg.norm_eps as f32);
        let name = |what: &str| vb.name(format!("{step}.{what}"));
        let norm = self.weight(&vb.pp(names.router_norm), "weight", &[hs])?;
        let r = self.op(&name("router_norm"), Op::RmsNorm { eps }, &[x, norm])?;
        let r = self.scale(&name("router_input"), r, 1.0 / hs as f64)?;
        let w = self.weight(&vb.pp(names.router), "weight", &[n, hs])?;
        let r = self.op(&name("router"), Op::Linear, &[r, w])?;
        self.op(&name("modalities"), Op::Unary(UnaryOp::Tanh), &[r])
    }

    /// `proj(x) * target / sqrt(max(mean(proj(x)²), 1e-5))`, `target` an RMS `[b, s, 1]`.
    fn rescaled_projection(&mut self, vb: &Vb, x: ValueId, target: ValueId) -> Result<ValueId> {
        let hs = self.cfg.hidden_size;
        let p = self.linear(vb, hs, hs, false, x)?;
        let ms = self.mean_square(&vb.name("mean_square"), p)?;
        let floor = self.scalar(&vb.name("floor"), MIN_MEAN_SQUARE)?;
        let ms = self.op(&vb.name("mean_square.floored"), Op::Binary(BinaryOp::Max), &[ms, floor])?;
        let rms = self.op(&vb.name("rms"), Op::Unary(UnaryOp::Sqrt), &[ms])?;
        let scaled = self.op(&vb.name("retargeted"), Op::Binary(BinaryOp::Mul), &[p, target])?;
        self.op(&vb.name("rescaled"), Op::Binary(BinaryOp::Div), &[scaled, rms])
    }

    /// `sqrt(mean(x², -1))`, kept as `[b, s, 1]`.
    fn rms(&mut self, name: &str, x: ValueId) -> Result<ValueId> {
        let ms = self.mean_square(&format!("{name}.mean_square"), x)?;
        self.op(name, Op::Unary(UnaryOp::Sqrt), &[ms])
    }

    fn mean_square(&mut self, name: &str, x: ValueId) -> Result<ValueId> {
        let sq = self.op(&format!("{name}.squared"), Op::Binary(BinaryOp::Mul), &[x, x])?;
        let last = self.g.info(x).shape.len() - 1;
        self.op(name, Op::Reduce { kind: ReduceKind::Mean, axes: vec![last], keep_dims: true }, &[sq])
    }

    /// Stream `j` `[b, s, hidden]` of `[b, s, n, hidden]` streams.
    fn stream(&mut self, name: &str, streams: ValueId, j: usize) -> Result<ValueId> {
        let sh = self.g.info(streams).shape.clone();
        let slice = Op::Slice { axis: 2, start: Dim::from(j), end: Dim::from(j + 1) };
        let x = self.op(&format!("{name}.slice"), slice, &[streams])?;
        let shape = vec![sh[0].clone(), sh[1].clone(), sh[3].clone()];
        self.op(name, Op::Reshape { shape }, &[x])
    }

    /// `[b, s, hidden]` as one stream `[b, s, 1, hidden]`.
    fn unsqueeze_stream(&mut self, name: &str, x: ValueId) -> Result<ValueId> {
        let sh = self.g.info(x).shape.clone();
        let shape = vec![sh[0].clone(), sh[1].clone(), Dim::konst(1), sh[2].clone()];
        self.op(name, Op::Reshape { shape }, &[x])
    }

    /// The shape `[b, s, n, 1]` of `[b, s, n]` factors `x`: one per stream, over its channels.
    fn per_stream(&self, x: ValueId, n: usize) -> Vec<Dim> {
        let sh = &self.g.info(x).shape;
        vec![sh[0].clone(), sh[1].clone(), Dim::from(n), Dim::konst(1)]
    }

    /// A constant `[n, 1]` of one factor per stream, in the graph's dtype.
    fn stream_column(&mut self, name: &str, factors: Vec<f64>) -> Result<ValueId> {
        let n = factors.len();
        let t = Tensor::float(self.opts.dtype, vec![n, 1], factors.into_iter().map(|f| f as f32).collect())?;
        self.op(name, Op::Constant(t), &[])
    }
}
