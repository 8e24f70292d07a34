//! The reference evaluator: runs a graph on host tensors. It is the oracle every exported
//! artifact is checked against, so it favours obvious code over speed except in the matrix
//! products (see `kernels.rs`), which is what keeps a 0.6B-parameter forward in seconds.
//!
//! High-level ops are evaluated directly (not through their decomposition); the test suite
//! checks that both paths agree. Every computed shape is checked against the shape inferred
//! at build time, so a wrong inference rule cannot hide behind a permissive kernel.

use crate::dim::{Bindings, Dim};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::{Graph, Node, Producer, ValueId};
use crate::kernels as k;
use crate::ops::{Activation, Glu, Op, Routing};
use crate::quant::{dequantize, ActivationRounding};
use crate::rope::RopeConfig;
use crate::tensor::Tensor;
use crate::weights::TensorSource;
use std::collections::BTreeMap;

/// A graph with its weights materialised, ready to run many times.
pub struct Evaluator<'g> {
    graph: &'g Graph,
    weights: Vec<Tensor>,
}

enum Slot<'a> {
    Empty,
    Borrowed(&'a Tensor),
    Owned(Tensor),
}

impl<'g> Evaluator<'g> {
    /// Materialises every weight of `graph` from `src`, checking dtype and shape.
    pub fn new(graph: &'g Graph, src: &dyn TensorSource) -> Result<Evaluator<'g>> {
        let weights = graph
            .weights()
            .iter()
            .map(|w| {
                let t = w.expr.materialize(src)?;
                let info = graph.info(w.value);
                let shape: Vec<usize> = info.shape.iter().map(|d| d.as_const().unwrap_or(-1) as usize).collect();
                if t.dtype() != info.dtype || t.shape() != shape.as_slice() {
                    return Err(Error::Weight {
                        tensor: w.name.clone(),
                        msg: format!(
                            "graph expects {}{:?}, source gave {}{:?}",
                            info.dtype,
                            shape,
                            t.dtype(),
                            t.shape()
                        ),
                    });
                }
                Ok(t)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Evaluator { graph, weights })
    }

    /// Runs the graph; `inputs` must hold every graph input by name.
    pub fn run(&self, inputs: &BTreeMap<String, Tensor>) -> Result<BTreeMap<String, Tensor>> {
        self.run_with(inputs, None)
    }

    /// [`Evaluator::run`] with every `QuantLinear`'s input rounded as `rounding` says (how a
    /// runtime that quantizes activations computes it); `None` is the exact graph.
    pub fn run_with(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        rounding: Option<ActivationRounding>,
    ) -> Result<BTreeMap<String, Tensor>> {
        let g = self.graph;
        let bindings = bind_inputs(g, inputs)?;
        let mut slots: Vec<Slot> = (0..g.num_values()).map(|_| Slot::Empty).collect();
        for p in g.inputs() {
            slots[p.value.0] = Slot::Borrowed(&inputs[&p.name]);
        }
        for w in g.weights() {
            if let Producer::Weight(i) = g.producer(w.value) {
                slots[w.value.0] = Slot::Borrowed(&self.weights[i]);
            }
        }
        let last_use = last_uses(g);
        for (ni, node) in g.nodes().iter().enumerate() {
            let outs = {
                let ins = node
                    .inputs
                    .iter()
                    .map(|v| match &slots[v.0] {
                        Slot::Borrowed(t) => Ok(*t),
                        Slot::Owned(t) => Ok(t),
                        Slot::Empty => Err(eval_err(node, format!("input %{} was not computed", v.0))),
                    })
                    .collect::<Result<Vec<&Tensor>>>()?;
                let rounded = match (&node.op, rounding) {
                    (Op::QuantLinear { group, .. }, Some(r)) => {
                        r.apply(ins[0], *group).map_err(|e| eval_err(node, e.to_string()))?
                    }
                    _ => None,
                };
                let mut ins = ins;
                if let Some(x) = &rounded {
                    ins[0] = x;
                }
                eval_node(node, &ins, &bindings).map_err(|e| match e {
                    Error::Tensor(msg) | Error::Dim(msg) => eval_err(node, msg),
                    other => other,
                })?
            };
            for (v, t) in node.outputs.iter().zip(outs) {
                check_shape(g, node, *v, &t, &bindings)?;
                slots[v.0] = Slot::Owned(t);
            }
            for v in &node.inputs {
                if last_use[v.0] == Some(ni) && matches!(slots[v.0], Slot::Owned(_)) {
                    slots[v.0] = Slot::Empty;
                }
            }
        }
        g.outputs()
            .iter()
            .map(|p| {
                let t = match &slots[p.value.0] {
                    Slot::Borrowed(t) => (*t).clone(),
                    Slot::Owned(t) => t.clone(),
                    Slot::Empty => return Err(g.invalid(format!("output `{}` was not computed", p.name))),
                };
                Ok((p.name.clone(), t))
            })
            .collect()
    }
}

fn eval_err(node: &Node, msg: String) -> Error {
    Error::Eval { node: node.name.clone(), op: node.op.name().to_string(), msg }
}

/// Index of the last node reading each value; graph outputs are never released.
fn last_uses(g: &Graph) -> Vec<Option<usize>> {
    let mut last = vec![None; g.num_values()];
    for (i, n) in g.nodes().iter().enumerate() {
        for v in &n.inputs {
            last[v.0] = Some(i);
        }
    }
    for p in g.outputs() {
        last[p.value.0] = None;
    }
    last
}

/// Checks names, dtypes and shapes of `inputs` against the graph and binds its symbols.
pub fn bind_inputs(g: &Graph, inputs: &BTreeMap<String, Tensor>) -> Result<Bindings> {
    let expected: Vec<&str> = g.inputs().iter().map(|p| p.name.as_str()).collect();
    if let Some(extra) = inputs.keys().find(|k| !expected.contains(&k.as_str())) {
        return Err(Error::Input {
            input: extra.clone(),
            msg: format!("not an input of the graph (inputs: {})", expected.join(", ")),
        });
    }
    let mut b = Bindings::default();
    for p in g.inputs() {
        let t = inputs.get(&p.name).ok_or_else(|| Error::Input {
            input: p.name.clone(),
            msg: format!("missing (inputs: {})", expected.join(", ")),
        })?;
        let info = g.info(p.value);
        let err = |msg: String| Error::Input { input: p.name.clone(), msg };
        if t.dtype() != info.dtype {
            return Err(err(format!("dtype is {}, expected {}", t.dtype(), info.dtype)));
        }
        if t.shape().len() != info.rank() {
            return Err(err(format!(
                "rank is {} ({:?}), expected {}",
                t.shape().len(),
                t.shape(),
                crate::dim::shape_to_string(&info.shape)
            )));
        }
    }
    // bare symbols first, then dims that are expressions of them (`past_len + sequence`)
    for compound in [false, true] {
        for p in g.inputs() {
            let t = &inputs[&p.name];
            for (d, &n) in g.info(p.value).shape.iter().zip(t.shape()) {
                if (d.as_symbol().is_none() && d.as_const().is_none()) == compound {
                    b.unify(d, n as i64).map_err(|e| Error::Input { input: p.name.clone(), msg: e.to_string() })?;
                }
            }
        }
    }
    b.check_ranges(&g.symbols).map_err(|e| Error::Input { input: "(shapes)".into(), msg: e.to_string() })?;
    Ok(b)
}

fn check_shape(g: &Graph, node: &Node, v: ValueId, t: &Tensor, b: &Bindings) -> Result<()> {
    let info = g.info(v);
    let expected = eval_shape(&info.shape, b)?;
    if t.shape() != expected.as_slice() || t.dtype() != info.dtype {
        return Err(eval_err(
            node,
            format!("computed {}{:?} but inference said {}{:?}", t.dtype(), t.shape(), info.dtype, expected),
        ));
    }
    Ok(())
}

/// Concrete shape of symbolic dims under `b`; a negative extent is an error.
pub fn eval_shape(dims: &[Dim], b: &Bindings) -> Result<Vec<usize>> {
    dims.iter()
        .map(|d| {
            let v = d.eval(b)?;
            usize::try_from(v).map_err(|_| Error::Dim(format!("`{d}` evaluates to {v}")))
        })
        .collect()
}

fn eval_usize(d: &Dim, b: &Bindings) -> Result<usize> {
    Ok(eval_shape(std::slice::from_ref(d), b)?[0])
}

fn eval_node(node: &Node, ins: &[&Tensor], b: &Bindings) -> Result<Vec<Tensor>> {
    let one = |t: Tensor| Ok(vec![t]);
    match &node.op {
        Op::Constant(t) => one(t.clone()),
        Op::Unary(u) => one(k::unary(*u, ins[0])?),
        Op::Binary(op) => one(k::binary(*op, ins[0], ins[1])?),
        Op::Where => one(k::where_(ins[0], ins[1], ins[2])?),
        Op::Cast(d) => one(ins[0].cast(*d)),
        Op::MatMul => one(k::matmul(ins[0], ins[1])?),
        Op::Reduce { kind, axes, keep_dims } => one(k::reduce(*kind, ins[0], axes, *keep_dims)?),
        Op::Softmax { axis } => one(k::softmax(ins[0], *axis)?),
        Op::CumSum { axis } => one(k::cumsum(ins[0], *axis)?),
        Op::Reshape { shape } => one(ins[0].clone().reshaped(eval_shape(shape, b)?)?),
        Op::Transpose { perm } => one(k::transpose(ins[0], perm)?),
        Op::Expand { shape } => one(k::expand(ins[0], &eval_shape(shape, b)?)?),
        Op::Concat { axis } => one(k::concat(ins, *axis)?),
        Op::Slice { axis, start, end } => one(k::slice(ins[0], *axis, eval_usize(start, b)?, eval_usize(end, b)?)?),
        Op::Gather { axis } => one(k::gather(ins[0], ins[1], *axis)?),
        Op::Iota { len } => one(k::iota(eval_usize(len, b)?)?),
        Op::RmsNorm { eps } => one(rms_norm(ins[0], ins[1], *eps)?),
        Op::LayerNorm { eps } => one(layer_norm(ins[0], ins[1], ins.get(2).copied(), *eps)?),
        Op::Activate(act) => one(activate(ins[0], *act)?),
        Op::RotaryCosSin { rope } => {
            let (c, s) = rotary_cos_sin(rope, ins[0])?;
            Ok(vec![c, s])
        }
        Op::ApplyRotary => one(apply_rotary(ins[0], ins[1], ins[2])?),
        Op::Attention { scale, softcap, sliding_window, sinks } => {
            let window = sliding_window.map(|w| (w, ins[4], ins[5]));
            let sinks = sinks.then(|| ins[ins.len() - 1]);
            one(attention(ins[0], ins[1], ins[2], ins[3], *scale, *softcap, window, sinks)?)
        }
        Op::Linear => one(k::linear(ins[0], ins[1], ins.get(2).copied())?),
        Op::GatedMlp { act } => one(gated_mlp(ins, *act)?),
        Op::TopK { k } => {
            let (v, i) = top_k(ins[0], *k)?;
            Ok(vec![v, i])
        }
        Op::Moe { top_k, routing, glu, weigh_input, own_router, .. } => {
            one(moe(ins, *top_k, *routing, (*glu, *weigh_input), *own_router)?)
        }
        Op::QuantLinear { zero_point, .. } => {
            let n = 3 + usize::from(*zero_point);
            let w = dequantize(ins[1], ins[2], zero_point.then(|| ins[3]))?;
            one(k::linear(ins[0], &w, ins.get(n).copied())?)
        }
        Op::QuantGather { zero_point, .. } => {
            let w = dequantize(ins[0], ins[1], zero_point.then(|| ins[2]))?;
            one(k::gather(&w, ins[ins.len() - 1], 0)?)
        }
        Op::CacheUpdate | Op::ScatterSlots => one(cache_update(ins[0], ins[1], ins[2])?),
        Op::Conv { window, groups } => one(k::conv(ins[0], ins[1], ins.get(2).copied(), window, *groups)?),
        Op::MaxPool { window } => one(k::max_pool(ins[0], window)?),
        Op::SelectiveScan => {
            let (y, h) = selective_scan(ins)?;
            Ok(vec![y, h])
        }
        Op::DeltaScan => {
            let (o, s) = delta_scan(ins)?;
            Ok(vec![o, s])
        }
    }
}

fn rms_norm(x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
    let n = *x.shape().last().expect("rank >= 1");
    let xs = k::to_f32(x);
    let v = xs.as_f32()?;
    let mut out = Vec::with_capacity(v.len());
    for row in v.chunks(n.max(1)) {
        let mean = (row.iter().map(|&a| (a * a) as f64).sum::<f64>() / n as f64) as f32;
        let r = 1.0 / (mean + eps).sqrt();
        out.extend(row.iter().map(|&a| a * r));
    }
    let normed = Tensor::f32(x.shape().to_vec(), out)?.cast(x.dtype()).cast(w.dtype());
    k::binary(crate::ops::BinaryOp::Mul, w, &normed)
}

/// Mean and biased variance per row in f64, the affine part in f32, rounded once to `x`'s dtype.
fn layer_norm(x: &Tensor, w: &Tensor, b: Option<&Tensor>, eps: f32) -> Result<Tensor> {
    let n = *x.shape().last().expect("rank >= 1");
    let (xs, w) = (x.as_f32()?, w.as_f32()?);
    let b = b.map(Tensor::as_f32).transpose()?;
    let mut out = Vec::with_capacity(xs.len());
    for row in xs.chunks(n.max(1)) {
        let mean = row.iter().map(|&a| a as f64).sum::<f64>() / n as f64;
        let var = row.iter().map(|&a| (a as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        let (mean, rstd) = (mean as f32, 1.0 / (var as f32 + eps).sqrt());
        for (j, &a) in row.iter().enumerate() {
            let y = (a - mean) * rstd * w[j];
            out.push(b.map_or(y, |b| y + b[j]));
        }
    }
    Tensor::float(x.dtype(), x.shape().to_vec(), out)
}

/// Inverse frequencies for these positions: constant, except for dynamic NTK and longrope,
/// which depend on the longest position seen (`max(position_ids) + 1`).
pub fn rope_inv_freq(rope: &RopeConfig, pos: &Tensor) -> Result<Vec<f32>> {
    let longest = || -> Result<i64> { Ok(pos.as_i64()?.iter().copied().max().unwrap_or(0) + 1) };
    if let Some((short, long, original_max)) = rope.longrope_inv_freqs() {
        return Ok(if longest()? > original_max as i64 { long } else { short });
    }
    let Some((factor, max_pos, exponent)) = rope.dynamic_base_exponent() else {
        return Ok(rope.inv_freq());
    };
    let len = (longest()? as f32).max(max_pos);
    let base = rope.theta as f32 * ((factor * len / max_pos) - (factor - 1.0)).powf(exponent);
    let dim = rope.dim as f32;
    Ok((0..rope.dim).step_by(2).map(|i| 1.0 / base.powf(i as f32 / dim)).collect())
}

fn rotary_cos_sin(rope: &RopeConfig, pos: &Tensor) -> Result<(Tensor, Tensor)> {
    let inv = rope_inv_freq(rope, pos)?;
    let scaling = rope.attention_scaling();
    let half = inv.len();
    let ids = pos.as_i64()?;
    let (mut cos, mut sin) = (Vec::with_capacity(ids.len() * 2 * half), Vec::with_capacity(ids.len() * 2 * half));
    for &p in ids {
        for _ in 0..2 {
            for &f in &inv {
                let a = p as f32 * f;
                cos.push(a.cos() * scaling);
                sin.push(a.sin() * scaling);
            }
        }
    }
    let mut shape = pos.shape().to_vec();
    shape.push(2 * half);
    Ok((Tensor::f32(shape.clone(), cos)?, Tensor::f32(shape, sin)?))
}

fn apply_rotary(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let [b, h, s, d] = *x.shape() else {
        return Err(Error::Tensor("x must be rank 4".into()));
    };
    let cb = cos.shape()[0];
    let (xv, cv, sv) = (x.as_f32()?, cos.as_f32()?, sin.as_f32()?);
    let half = d / 2;
    let mut out = vec![0f32; xv.len()];
    for bi in 0..b {
        let cbi = if cb == 1 { 0 } else { bi };
        for hi in 0..h {
            for si in 0..s {
                let xo = ((bi * h + hi) * s + si) * d;
                let co = (cbi * s + si) * d;
                for j in 0..d {
                    let rot = if j < half { -xv[xo + j + half] } else { xv[xo + j - half] };
                    out[xo + j] = xv[xo + j] * cv[co + j] + rot * sv[co + j];
                }
            }
        }
    }
    Tensor::float(x.dtype(), x.shape().to_vec(), out)
}

#[allow(clippy::too_many_arguments)] // the op's inputs and attributes, as `Op::Attention` lists them
fn attention(
    q: &Tensor,
    kk: &Tensor,
    v: &Tensor,
    mask: &Tensor,
    scale: f32,
    softcap: Option<f32>,
    window: Option<(usize, &Tensor, &Tensor)>,
    sinks: Option<&Tensor>,
) -> Result<Tensor> {
    let [b, h, s, d] = *q.shape() else {
        return Err(Error::Tensor("q must be rank 4".into()));
    };
    let (kvh, t, dv) = (kk.shape()[1], kk.shape()[2], v.shape()[3]);
    let rep = h / kvh;
    // one mask for all heads, or one per head (T5's relative position bias)
    let mh = if mask.shape().len() == 4 && mask.shape()[1] == h { h } else { 1 };
    let mask = k::expand(mask, &[b, mh, s, t])?;
    // bool: true = may attend; float: added to the scores (in f32, as the decomposition does)
    let additive = mask.dtype() != crate::dtype::DType::Bool;
    let mask = if additive { k::to_f32(&mask) } else { mask };
    let (mv, mf) = if additive { (&[][..], mask.as_f32()?) } else { (mask.as_bool()?, &[][..]) };
    let window = match window {
        Some((w, qp, kp)) => Some((w as i64, k::expand(qp, &[b, s])?, k::expand(kp, &[b, t])?)),
        None => None,
    };
    let (qv, kv, vv) = (q.as_f32()?, kk.as_f32()?, v.as_f32()?);
    let sinks = sinks.map(k::to_f32);
    let sinks = sinks.as_ref().map(|s| s.as_f32()).transpose()?;
    let low = q.dtype().min_finite();
    let round = |x: f32| Tensor::scalar_float(q.dtype(), x).as_f32().map(|v| v[0]);
    let mut out = vec![0f32; b * h * s * dv];
    let mut scores = vec![0f32; s * t];
    for bi in 0..b {
        for hi in 0..h {
            let kvi = hi / rep;
            let qo = (bi * h + hi) * s * d;
            let ko = (bi * kvh + kvi) * t * d;
            let vo = (bi * kvh + kvi) * t * dv;
            // scores = q · kᵀ, reading k transposed through strides
            k::sgemm(s, d, t, &qv[qo..qo + s * d], d, 1, &kv[ko..ko + t * d], 1, d, &mut scores);
            for i in 0..s {
                let row = &mut scores[i * t..(i + 1) * t];
                for (j, x) in row.iter_mut().enumerate() {
                    let mut y = round(*x * scale)?;
                    if let Some(cap) = softcap {
                        y = round((y / cap).tanh() * cap)?;
                    }
                    let m = ((bi * mh + hi % mh) * s + i) * t + j;
                    if additive {
                        // inference refuses a window with an additive mask
                        *x = y + mf[m];
                        continue;
                    }
                    let mut allowed = mv[m];
                    if let Some((w, qp, kp)) = &window {
                        allowed &= qp.as_i64()?[bi * s + i] - kp.as_i64()?[bi * t + j] < *w;
                    }
                    *x = if allowed { y } else { low };
                }
                // softmax in f32, then back to the query dtype (transformers' eager attention);
                // a sink is one more logit in the row whose probability is dropped
                let sink = sinks.map(|s| s[hi]);
                let max = row.iter().copied().chain(sink).fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0f32;
                row.iter_mut().for_each(|x| {
                    *x = (*x - max).exp();
                    sum += *x;
                });
                sum += sink.map_or(0f32, |s| (s - max).exp());
                for x in row.iter_mut() {
                    *x = round(*x / sum)?;
                }
            }
            let oo = (bi * h + hi) * s * dv;
            k::sgemm(s, t, dv, &scores, t, 1, &vv[vo..vo + t * dv], dv, 1, &mut out[oo..oo + s * dv]);
        }
    }
    Tensor::float(q.dtype(), vec![b, h, s, dv], out)
}

fn cache_update(cache: &Tensor, new: &Tensor, slots: &Tensor) -> Result<Tensor> {
    let [b, h, len, d] = *cache.shape() else { return Err(Error::Tensor("cache must be rank 4".into())) };
    let q = new.shape()[2];
    let pb = slots.shape()[0];
    let (ids, src) = (slots.as_i64()?, new.as_f32()?);
    let mut out = cache.as_f32()?.to_vec();
    for bi in 0..b {
        for j in 0..q {
            let slot = ids[(if pb == 1 { 0 } else { bi }) * q + j];
            if slot < 0 || slot as usize >= len {
                return Err(Error::Tensor(format!("position {slot} is outside the cache of {len} slots")));
            }
            for hi in 0..h {
                let dst = ((bi * h + hi) * len + slot as usize) * d;
                let from = ((bi * h + hi) * q + j) * d;
                out[dst..dst + d].copy_from_slice(&src[from..from + d]);
            }
        }
    }
    Tensor::float(cache.dtype(), cache.shape().to_vec(), out)
}

/// [`Op::SelectiveScan`] step by step in f32, in transformers' order: `dB = dt * B`,
/// `dBx = dB * x`, `h = exp(dt * A) * h + dBx`, `y = h · C`.
fn selective_scan(ins: &[&Tensor]) -> Result<(Tensor, Tensor)> {
    let (x, h0) = (ins[0], ins[5]);
    let [b, d, len] = *x.shape() else { return Err(Error::Tensor("x must be rank 3".into())) };
    let (g, n) = (ins[3].shape()[2], ins[2].shape()[1]);
    let per_group = d / g;
    let [xs, dt, a, bs, cs] = [0, 1, 2, 3, 4].map(|i| ins[i].as_f32());
    let (xs, dt, a, bs, cs) = (xs?, dt?, a?, bs?, cs?);
    let mut h = h0.as_f32()?.to_vec();
    let mut y = vec![0f32; b * d * len];
    for bi in 0..b {
        for t in 0..len {
            for di in 0..d {
                let at_group = ((bi * len + t) * g + di / per_group) * n;
                let (bt, ct) = (&bs[at_group..][..n], &cs[at_group..][..n]);
                let at = (bi * d + di) * len + t;
                let (step, xv) = (dt[at], xs[at]);
                let state = &mut h[(bi * d + di) * n..][..n];
                let mut acc = 0f32;
                for j in 0..n {
                    state[j] = (step * a[di * n + j]).exp() * state[j] + step * bt[j] * xv;
                    acc += state[j] * ct[j];
                }
                y[at] = acc;
            }
        }
    }
    Ok((Tensor::float(x.dtype(), x.shape().to_vec(), y)?, Tensor::float(h0.dtype(), h0.shape().to_vec(), h)?))
}

/// [`Op::DeltaScan`] step by step in f32, in transformers' order: `S *= exp(g)`, `kv = S^T k`,
/// `delta = (v - kv) * beta`, `S += k delta^T`, `o = S^T q`.
fn delta_scan(ins: &[&Tensor]) -> Result<(Tensor, Tensor)> {
    let (v, s0) = (ins[2], ins[5]);
    let [b, h, len, dk] = *ins[0].shape() else { return Err(Error::Tensor("q must be rank 4".into())) };
    let dv = v.shape()[3];
    let [q, k, vs, g, beta] = [0, 1, 2, 3, 4].map(|i| ins[i].as_f32());
    let (q, k, vs, g, beta) = (q?, k?, vs?, g?, beta?);
    let mut s = s0.as_f32()?.to_vec();
    let mut o = vec![0f32; b * h * len * dv];
    let mut kv = vec![0f32; dv];
    for bh in 0..b * h {
        let state = &mut s[bh * dk * dv..][..dk * dv];
        for t in 0..len {
            let at = bh * len + t;
            let (q_t, k_t, v_t) = (&q[at * dk..][..dk], &k[at * dk..][..dk], &vs[at * dv..][..dv]);
            let decay = g[at].exp();
            state.iter_mut().for_each(|x| *x *= decay);
            kv.fill(0.0);
            for i in 0..dk {
                for j in 0..dv {
                    kv[j] += state[i * dv + j] * k_t[i];
                }
            }
            for i in 0..dk {
                for j in 0..dv {
                    state[i * dv + j] += k_t[i] * ((v_t[j] - kv[j]) * beta[at]);
                }
            }
            let out = &mut o[at * dv..][..dv];
            for i in 0..dk {
                for j in 0..dv {
                    out[j] += state[i * dv + j] * q_t[i];
                }
            }
        }
    }
    Ok((Tensor::float(v.dtype(), v.shape().to_vec(), o)?, Tensor::float(s0.dtype(), s0.shape().to_vec(), s)?))
}

/// `ins`: x, gate, up, down weights, then optionally the three biases.
fn gated_mlp(ins: &[&Tensor], act: Activation) -> Result<Tensor> {
    let (x, wg, wu, wd) = (ins[0], ins[1], ins[2], ins[3]);
    let bias = |i: usize| ins.get(i).copied();
    let gate = k::linear(x, wg, bias(4))?;
    let up = k::linear(x, wu, bias(5))?;
    let h = k::binary(crate::ops::BinaryOp::Mul, &activate(&gate, act)?, &up)?;
    k::linear(&h, wd, bias(6))
}

/// `act` elementwise, in f32 and rounded once to `x`'s dtype (as torch's activation kernels).
fn activate(x: &Tensor, act: Activation) -> Result<Tensor> {
    let v: Vec<f32> = x.as_f32()?.iter().map(|&a| activation(act, a)).collect();
    Tensor::float(x.dtype(), x.shape().to_vec(), v)
}

/// Each activation's formula, as torch computes it (`decompose.rs` emits the same as ops).
fn activation(act: Activation, a: f32) -> f32 {
    let sigmoid = |a: f32| 1.0 / (1.0 + (-a).exp());
    match act {
        Activation::Silu => a * sigmoid(a),
        Activation::Gelu => a * 0.5 * (1.0 + k::erf(a * std::f32::consts::FRAC_1_SQRT_2)),
        Activation::GeluTanh => {
            let c = (2.0f32 / std::f32::consts::PI).sqrt();
            0.5 * a * (1.0 + (c * (a + 0.044715 * a * a * a)).tanh())
        }
        Activation::Relu => a.max(0.0),
        Activation::QuickGelu => a * sigmoid(1.702 * a),
    }
}

/// The `k` largest of each last-axis row, largest first, equal values in index order.
/// Each token's `top` experts (`[tokens * top]`) and their weights in f32, as `routing` picks
/// them from the logits of `x2 [tokens, hidden]`.
fn route(
    x2: &Tensor,
    router: &Tensor,
    bias: Option<&Tensor>,
    correction: Option<&Tensor>,
    top: usize,
    routing: Routing,
) -> Result<(Vec<f32>, Vec<i64>)> {
    let (score, groups, top_groups, normalize, scale) = match routing {
        Routing::Softmax { normalize } => {
            let probs = k::softmax(&k::linear(x2, router, bias)?.cast(DType::F32), 1)?;
            let (weights, experts) = top_k(&probs, top)?;
            let mut w = weights.as_f32()?.to_vec();
            if normalize {
                for row in w.chunks_mut(top) {
                    let sum: f32 = row.iter().sum();
                    row.iter_mut().for_each(|v| *v /= sum);
                }
            }
            return Ok((w, experts.as_i64()?.to_vec()));
        }
        Routing::Grouped { score, groups, top_groups, normalize, scale } => {
            (score, groups, top_groups, normalize, scale)
        }
    };
    let f32 = |t: &Tensor| t.cast(DType::F32);
    let logits = k::linear(&f32(x2), &f32(router), bias.map(f32).as_ref())?;
    let e = logits.shape()[1];
    let scores = match score.sigmoid() {
        false => k::softmax(&logits, 1)?.as_f32()?.to_vec(),
        true => logits.as_f32()?.iter().map(|&l| 1.0 / (1.0 + (-l).exp())).collect(),
    };
    let correction = match correction {
        Some(c) => f32(c).as_f32()?.to_vec(),
        None => vec![0.0; e],
    };
    let size = e / groups;
    let fill = score.masked_value();
    let (mut weights, mut experts) = (vec![], vec![]);
    for s in scores.chunks(e) {
        let choice: Vec<f32> = s.iter().zip(&correction).map(|(a, b)| a + b).collect();
        let group_scores: Vec<f32> = choice
            .chunks(size)
            .map(|g| match score.group_by_two() {
                false => g.iter().copied().fold(f32::NEG_INFINITY, f32::max),
                true => largest(g, 2).iter().map(|&i| g[i]).sum(),
            })
            .collect();
        let kept = largest(&group_scores, top_groups);
        let masked: Vec<f32> =
            choice.iter().enumerate().map(|(i, &c)| if kept.contains(&(i / size)) { c } else { fill }).collect();
        let picks = largest(&masked, top);
        let mut w: Vec<f32> = picks.iter().map(|&i| s[i]).collect();
        if normalize {
            let sum = w.iter().sum::<f32>() + 1e-20;
            w.iter_mut().for_each(|v| *v /= sum);
        }
        weights.extend(w.iter().map(|v| v * scale));
        experts.extend(picks.iter().map(|&i| i as i64));
    }
    Ok((weights, experts))
}

/// The indices of the `k` largest of `values`, largest first, ties in index order.
fn largest(values: &[f32], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    order.truncate(k);
    order
}

fn top_k(x: &Tensor, k: usize) -> Result<(Tensor, Tensor)> {
    let n = *x.shape().last().expect("rank >= 1");
    let (mut values, mut indices) = (vec![], vec![]);
    for row in x.as_f32()?.chunks(n.max(1)) {
        let mut order: Vec<usize> = (0..n).collect();
        // stable: ties keep index order
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
        values.extend(order[..k].iter().map(|&i| row[i]));
        indices.extend(order[..k].iter().map(|&i| i as i64));
    }
    let mut shape = x.shape().to_vec();
    *shape.last_mut().expect("rank >= 1") = k;
    Ok((Tensor::float(x.dtype(), shape.clone(), values)?, Tensor::i64(shape, indices)?))
}

/// What an expert's gate and up projections make (see [`Glu`]), in their dtype.
fn gated(g: &Tensor, u: &Tensor, glu: Glu) -> Result<Tensor> {
    use crate::ops::BinaryOp;
    match glu {
        Glu::Gated(act) => k::binary(BinaryOp::Mul, &activate(g, act)?, u),
        Glu::Clamped { alpha, limit } => {
            let round = |v: f32| Tensor::scalar_float(g.dtype(), v).as_f32().map(|x| x[0]);
            let (alpha, limit) = (round(alpha)?, round(limit)?);
            let sigmoid = |x: f32| 1.0 / (1.0 + (-x).exp());
            let out = g.as_f32()?.iter().zip(u.as_f32()?).map(|(&g, &u)| {
                let g = round(g.min(limit))?;
                let u = round(u.clamp(-limit, limit))?;
                let glu = round(g * round(sigmoid(round(g * alpha)?))?)?;
                round(round(u + 1.0)? * glu)
            });
            Tensor::float(g.dtype(), g.shape().to_vec(), out.collect::<Result<_>>()?)
        }
    }
}

/// transformers' sparse MoE block: the routing weights in f32 (see [`route`]), rounded to x's
/// dtype; then each expert, in ascending order, on the tokens that selected it (as
/// `Qwen3MoeExperts.forward` loops).
fn moe(
    ins: &[&Tensor],
    top: usize,
    routing: Routing,
    (glu, weigh_input): (Glu, bool),
    own_router: bool,
) -> Result<Tensor> {
    use crate::ops::BinaryOp;
    // a router of its own: its input and the experts' factors, last
    let (own, ins) = match own_router {
        true => (Some((ins[ins.len() - 2], ins[ins.len() - 1])), &ins[..ins.len() - 2]),
        false => (None, ins),
    };
    let (x, router, wg, wu, wd) = (ins[0], ins[1], ins[2], ins[3], ins[4]);
    // `[router, gate, up, down]` biases, when given
    let bias = |i: usize| ins.get(5 + i).copied().filter(|_| ins.len() >= 9);
    let hidden = x.shape()[2];
    let tokens = x.numel() / hidden.max(1);
    let x2 = x.clone().reshaped(vec![tokens, hidden])?;
    let correction = routing.corrected().then(|| ins[ins.len() - 1]);
    let routed = match own {
        Some((r, _)) => r.clone().reshaped(vec![tokens, hidden])?,
        None => x2.clone(),
    };
    let (mut w, experts) = route(&routed, router, bias(0), correction, top, routing)?;
    if let Some((_, scale)) = own {
        let scale = scale.cast(DType::F32);
        let scale = scale.as_f32()?;
        w.iter_mut().zip(&experts).for_each(|(w, &e)| *w *= scale[e as usize]);
    }
    let experts = Tensor::i64(vec![tokens, top], experts)?;
    let w = Tensor::f32(vec![tokens, top], w)?.cast(x.dtype());
    let (w, experts) = (w.as_f32()?, experts.as_i64()?);
    let mut out = vec![0f32; tokens * hidden];
    for e in 0..router.shape()[0] {
        let picks: Vec<(usize, f32)> =
            (0..tokens * top).filter(|&j| experts[j] == e as i64).map(|j| (j / top, w[j])).collect();
        if picks.is_empty() {
            continue;
        }
        let rows = Tensor::i64(vec![picks.len()], picks.iter().map(|p| p.0 as i64).collect())?;
        let pw = Tensor::float(x.dtype(), vec![picks.len(), 1], picks.iter().map(|p| p.1).collect())?;
        let mut xe = k::gather(&x2, &rows, 0)?;
        if weigh_input {
            xe = k::binary(BinaryOp::Mul, &xe, &pw)?;
        }
        let expert = |t: &Tensor| -> Result<Tensor> {
            let s = t.shape()[1..].to_vec();
            k::gather(t, &Tensor::i64(vec![1], vec![e as i64])?, 0)?.reshaped(s)
        };
        let expert_bias = |i: usize| bias(i).map(expert).transpose();
        let g = k::linear(&xe, &expert(wg)?, expert_bias(1)?.as_ref())?;
        let u = k::linear(&xe, &expert(wu)?, expert_bias(2)?.as_ref())?;
        let y = k::linear(&gated(&g, &u, glu)?, &expert(wd)?, expert_bias(3)?.as_ref())?;
        let y = match weigh_input {
            true => y,
            false => k::binary(BinaryOp::Mul, &y, &pw)?,
        };
        for ((t, _), row) in picks.iter().zip(y.as_f32()?.chunks(hidden)) {
            let dst = &mut out[t * hidden..(t + 1) * hidden];
            dst.iter_mut().zip(row).for_each(|(d, v)| *d += v);
        }
    }
    Tensor::float(x.dtype(), x.shape().to_vec(), out)
}
