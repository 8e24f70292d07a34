//! Decompositions of high-level ops into primitives, and the rewrite that applies them.
//!
//! A backend lowers natively the high-level ops its runtime does well (ONNX `Attention`,
//! OpenVINO's fused RMS pattern, …) and asks core to expand the rest with [`decompose`].
//! Each expansion computes what the reference evaluator computes for the op, in the same
//! order and dtypes as transformers; the tests evaluate both and compare.

use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::{Graph, Node, ValueId};
use crate::ops::{moe_few_tokens, Activation, BinaryOp, Glu, Op, ReduceKind, RouterScore, Routing, UnaryOp, Window};
use crate::rope::RopeConfig;
use crate::tensor::Tensor;

/// Expands every high-level op selected by `select`, repeatedly, until none is left
/// (an expansion may itself emit high-level ops, e.g. a gated MLP emits `Linear`s).
pub fn decompose(src: &Graph, select: &dyn Fn(&Op) -> bool) -> Result<Graph> {
    let wanted = |g: &Graph| g.nodes().iter().any(|n| n.op.is_high_level() && select(&n.op));
    let mut cur = src.clone();
    while wanted(&cur) {
        cur = decompose_once(&cur, select)?;
    }
    Ok(cur)
}

fn decompose_once(src: &Graph, select: &dyn Fn(&Op) -> bool) -> Result<Graph> {
    rebuild(src, &mut |g, node, ins| {
        if node.op.is_high_level() && select(&node.op) {
            expand(g, node, ins)
        } else {
            g.add_node(&node.name, node.op.clone(), ins)
        }
    })
}

/// Re-emits one node of a rewrite into the new graph; returns its outputs there.
pub type EmitNode<'a> = dyn FnMut(&mut Graph, &Node, &[ValueId]) -> Result<Vec<ValueId>> + 'a;

/// A copy of `src` whose nodes are re-emitted by `emit` (given the node and its inputs in the
/// new graph; it returns the node's outputs there), in order. Weights `src` no longer reads
/// are dropped, so a rewrite that replaces a weight runs `rebuild` twice (see
/// [`drop_unread_weights`]).
pub fn rebuild(src: &Graph, emit: &mut EmitNode) -> Result<Graph> {
    let (mut g, mut map) = src.empty_like();
    for node in src.nodes() {
        let ins = node
            .inputs
            .iter()
            .map(|v| map[v.0].ok_or_else(|| src.invalid(format!("node `{}` reads a value defined later", node.name))))
            .collect::<Result<Vec<_>>>()?;
        for (o, n) in node.outputs.iter().zip(emit(&mut g, node, &ins)?) {
            map[o.0] = Some(n);
        }
    }
    g.finish_rewrite(src, &map)?;
    Ok(g)
}

/// `src` without the weights no node reads (after a rewrite replaced them).
pub fn drop_unread_weights(src: &Graph) -> Result<Graph> {
    rebuild(src, &mut |g, node, ins| g.add_node(&node.name, node.op.clone(), ins))
}

/// Folds every attention's sliding window into its mask: `Attention { sliding_window: Some(w) }`
/// over `(q, k, v, mask, q_pos, k_pos)` becomes the primitives of
/// `mask AND (q_pos - k_pos < w)` and an `Attention` without a window over `(q, k, v, mask')`.
/// Backends whose runtime has a native attention run this first, so the window logic lives
/// here once instead of in every lowering.
pub fn fold_sliding_windows(src: &Graph) -> Result<Graph> {
    rebuild(src, &mut |g, node, ins| match &node.op {
        Op::Attention { scale, softcap, sliding_window: Some(w), sinks } => {
            let mut e = Emitter { g, prefix: node.name.clone() };
            let mask = e.window_mask(ins[3], *w, ins[4], ins[5])?;
            let op = Op::Attention { scale: *scale, softcap: *softcap, sliding_window: None, sinks: *sinks };
            let kept: Vec<ValueId> = [ins[0], ins[1], ins[2], mask].into_iter().chain(ins.get(6).copied()).collect();
            g.add_node(&node.name, op, &kept)
        }
        _ => g.add_node(&node.name, node.op.clone(), ins),
    })
}

/// Grouped-query attention with no copy of the keys and values per query head: the `g` query
/// heads that share a key head ride along its query axis (`q [b, kvh * g, s, d]` viewed as
/// `[b, kvh, g * s, d]`, the mask spread to match), one attention per key head, and the result
/// viewed back as `[b, h, s, dv]`. Without it every backend's attention (decomposed, or a
/// runtime's own without grouped heads) repeats the cache per query head on every call, which
/// dominated long-context decode steps (`cargo xtask bench generate-onnx`'s int4 graph at 2000
/// positions: 174 ms a token with the repeat, 60 without). Attention with sinks (one logit per
/// query head) or a window still to fold keeps its heads, as does every node `keep` picks (a
/// node of `src`, where a runtime's own attention wants the heads as they are).
pub fn fold_query_groups(src: &Graph, keep: &dyn Fn(&Graph, &Node) -> bool) -> Result<Graph> {
    rebuild(src, &mut |g, node, ins| match &node.op {
        Op::Attention { sliding_window: None, sinks: false, .. } if !keep(src, node) => {
            let (h, kvh) = (g.info(ins[0]).shape[1].as_const(), g.info(ins[1]).shape[1].as_const());
            match (h, kvh) {
                (Some(h), Some(kvh)) if kvh > 0 && h > kvh && h % kvh == 0 => {
                    let mut e = Emitter { g, prefix: node.name.clone() };
                    e.grouped_attention(&node.name, node.op.clone(), ins, h / kvh)
                }
                _ => g.add_node(&node.name, node.op.clone(), ins),
            }
        }
        _ => g.add_node(&node.name, node.op.clone(), ins),
    })
}

/// Sets each `Moe`'s `few_tokens` from its input's shape as the export will run it (a decode
/// component is the prefill graph with `sequence` fixed to 1, after the block was built): each
/// batch row brings a static number of tokens `c` with `c * top_k <= experts`.
pub fn choose_moe_strategies(src: &Graph) -> Result<Graph> {
    rebuild(src, &mut |g, node, ins| match &node.op {
        Op::Moe { top_k, routing, glu, biased, weigh_input, own_router, .. } => {
            let few_tokens = moe_few_tokens(&g.info(ins[0]).shape, *top_k, &g.info(ins[1]).shape[0]);
            let op = Op::Moe {
                top_k: *top_k,
                routing: *routing,
                glu: *glu,
                biased: *biased,
                few_tokens,
                weigh_input: *weigh_input,
                own_router: *own_router,
            };
            g.add_node(&node.name, op, ins)
        }
        _ => g.add_node(&node.name, node.op.clone(), ins),
    })
}

/// Appends the primitive expansion of one high-level node to `g`; returns its outputs.
pub fn expand(g: &mut Graph, node: &Node, ins: &[ValueId]) -> Result<Vec<ValueId>> {
    let mut e = Emitter { g, prefix: node.name.clone() };
    match &node.op {
        Op::RmsNorm { eps } => Ok(vec![e.rms_norm(ins[0], ins[1], *eps)?]),
        Op::LayerNorm { eps } => Ok(vec![e.layer_norm(ins[0], ins[1], ins.get(2).copied(), *eps)?]),
        Op::Activate(act) => Ok(vec![e.activation(ins[0], *act)?]),
        Op::RotaryCosSin { rope } => {
            let (c, s) = e.rotary_cos_sin(rope, ins[0])?;
            Ok(vec![c, s])
        }
        Op::ApplyRotary => Ok(vec![e.apply_rotary(ins[0], ins[1], ins[2])?]),
        Op::Attention { scale, softcap, sliding_window, sinks } => {
            let window = sliding_window.map(|w| (w, ins[4], ins[5]));
            let sinks = sinks.then(|| ins[ins.len() - 1]);
            Ok(vec![e.attention(ins[0], ins[1], ins[2], ins[3], (*scale, *softcap), window, sinks)?])
        }
        Op::Linear => Ok(vec![e.linear(ins[0], ins[1], ins.get(2).copied())?]),
        Op::GatedMlp { act } => Ok(vec![e.gated_mlp(ins, *act)?]),
        Op::TopK { k } => {
            let (v, i) = e.top_k(ins[0], *k)?;
            Ok(vec![v, i])
        }
        Op::Moe { top_k, routing, glu, few_tokens, weigh_input, own_router, .. } => {
            let experts = (*glu, *weigh_input);
            Ok(vec![e.moe(ins, *top_k, *routing, experts, (*few_tokens, *own_router))?])
        }
        Op::QuantLinear { group, zero_point, .. } => {
            let n = 3 + usize::from(*zero_point);
            let w = e.dequantize(&ins[1..n], *group, *zero_point)?;
            Ok(vec![e.op("linear", Op::Linear, &[&[ins[0], w][..], &ins[n..]].concat())?])
        }
        Op::QuantGather { group, zero_point, .. } => {
            let n = 2 + usize::from(*zero_point);
            Ok(vec![e.quant_gather(&ins[..n], ins[n], *group, *zero_point)?])
        }
        Op::CacheUpdate | Op::ScatterSlots => Ok(vec![e.cache_update(ins[0], ins[1], ins[2])?]),
        Op::Conv { window, groups } => Ok(vec![e.conv(ins[0], ins[1], ins.get(2).copied(), window, *groups)?]),
        Op::MaxPool { window } => Ok(vec![e.max_pool(ins[0], window)?]),
        Op::SelectiveScan => {
            let (y, h) = e.selective_scan(ins)?;
            Ok(vec![y, h])
        }
        Op::DeltaScan => {
            let (o, s) = e.delta_scan(ins)?;
            Ok(vec![o, s])
        }
        // primitives: nothing to expand (listed, so a new op says which kind it is)
        Op::Constant(_)
        | Op::Unary(_)
        | Op::Binary(_)
        | Op::Where
        | Op::Cast(_)
        | Op::MatMul
        | Op::Reduce { .. }
        | Op::Softmax { .. }
        | Op::CumSum { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Expand { .. }
        | Op::Concat { .. }
        | Op::Slice { .. }
        | Op::Gather { .. }
        | Op::Iota { .. } => Err(Error::Verify {
            graph: e.g.name.clone(),
            msg: format!("node `{}`: {} is a primitive, it has no decomposition", node.name, node.op.name()),
        }),
    }
}

/// How a sequence loop feeds one input of a recurrence op to its [`ScanStep`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopInput {
    /// One position per step along `axis` (the step sees length 1 there).
    Sliced { axis: usize },
    /// A state: the first step reads the op's input, each later one the step's output `from`.
    Carried { from: usize },
    /// The whole tensor at every step.
    Invariant,
}

/// How a sequence loop gathers one output of a recurrence op from its [`ScanStep`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopOutput {
    /// Every step's output, concatenated along `axis`.
    Stacked { axis: usize },
    /// The last step's (a state's final value).
    Last,
}

/// One position of a recurrence op ([`Op::SelectiveScan`], [`Op::DeltaScan`]) as a graph of
/// its own, for a backend whose runtime loops over a run-time sequence (OpenVINO's
/// `TensorIterator`, ONNX's `Scan`): the body's inputs are the op's, in order (a sliced one at
/// length 1 on its axis), its outputs the op's for one position; every name in it starts with
/// the node's (ONNX forbids a body to shadow an outer name). The step is the one the unrolled
/// decomposition repeats, so a loop computes what the evaluator does.
#[derive(Debug, Clone)]
pub struct ScanStep {
    pub body: Graph,
    pub inputs: Vec<LoopInput>,
    pub outputs: Vec<LoopOutput>,
}

/// The [`ScanStep`] of recurrence `node` of `g`.
pub fn scan_step(g: &Graph, node: &Node) -> Result<ScanStep> {
    use LoopInput::{Carried, Invariant, Sliced};
    use LoopOutput::{Last, Stacked};
    // the sequence axis of `[b, d, L]` and `[b, h, L, *]` inputs, and of `B`, `C` `[b, L, g, n]`
    let (seq, rows, state) = (Sliced { axis: 2 }, Sliced { axis: 1 }, Carried { from: 1 });
    let (names, inputs) = match node.op {
        Op::SelectiveScan => (["x", "dt", "a", "b", "c", "h"], [seq, seq, Invariant, rows, rows, state]),
        Op::DeltaScan => (["q", "k", "v", "g", "beta", "s"], [seq, seq, seq, seq, seq, state]),
        _ => return Err(g.invalid(format!("node `{}`: {} is not a recurrence", node.name, node.op.name()))),
    };
    let mut body = Graph::new(&format!("{}/step", node.name));
    body.symbols = g.symbols.clone();
    let mut ins = [ValueId(0); 6];
    for (i, (&v, how)) in node.inputs.iter().zip(&inputs).enumerate() {
        let info = g.info(v);
        let mut shape = info.shape.clone();
        if let Sliced { axis } = how {
            shape[*axis] = Dim::konst(1);
        }
        ins[i] = body.add_input(&format!("{}.{}", node.name, names[i]), info.dtype, shape)?;
    }
    let mut e = Emitter { g: &mut body, prefix: node.name.clone() };
    let (out, state) = match node.op {
        Op::SelectiveScan => {
            let groups = e.shape(ins[3])[2].clone();
            let (a, h) = e.scan_groups(ins[2], ins[5], &groups)?;
            let (y, h) = e.selective_step("step", [ins[0], ins[1], a, ins[3], ins[4]], h)?;
            let shape = e.shape(ins[5]);
            (y, e.op("state", Op::Reshape { shape }, &[h])?)
        }
        _ => e.delta_step("step", [ins[0], ins[1], ins[2], ins[3], ins[4]], ins[5])?,
    };
    body.add_output(&format!("{}.out", node.name), out)?;
    body.add_output(&format!("{}.state", node.name), state)?;
    Ok(ScanStep { body, inputs: inputs.to_vec(), outputs: vec![Stacked { axis: 2 }, Last] })
}

/// Emits primitives under a name prefix (`layers.0.mlp/gate`), with short helpers.
struct Emitter<'a> {
    g: &'a mut Graph,
    prefix: String,
}

impl Emitter<'_> {
    fn op(&mut self, part: &str, op: Op, ins: &[ValueId]) -> Result<ValueId> {
        let name = format!("{}/{part}", self.prefix);
        self.g.op(&name, op, ins)
    }
    fn bin(&mut self, part: &str, op: BinaryOp, a: ValueId, b: ValueId) -> Result<ValueId> {
        self.op(part, Op::Binary(op), &[a, b])
    }
    fn un(&mut self, part: &str, op: UnaryOp, a: ValueId) -> Result<ValueId> {
        self.op(part, Op::Unary(op), &[a])
    }
    fn scalar(&mut self, part: &str, dtype: DType, v: f64) -> Result<ValueId> {
        let t = if dtype.is_float() {
            Tensor::float(dtype, vec![], vec![v as f32])?
        } else {
            Tensor::int(dtype, vec![], vec![v as i64])?
        };
        self.op(part, Op::Constant(t), &[])
    }
    fn cast(&mut self, part: &str, x: ValueId, to: DType) -> Result<ValueId> {
        if self.g.info(x).dtype == to {
            return Ok(x);
        }
        self.op(part, Op::Cast(to), &[x])
    }
    fn shape(&self, x: ValueId) -> Vec<Dim> {
        self.g.info(x).shape.clone()
    }

    /// `x [b, c, *spatial]` padded with `fill` as `window` says, then every tap of the window
    /// (kernel positions in row-major order) as `[b, c, *out]`: gathers of constant rows and
    /// columns, so strides and dilations need nothing else.
    fn window_taps(&mut self, x: ValueId, window: &Window, fill: f64) -> Result<Vec<ValueId>> {
        let out =
            window.static_out_shape(&self.shape(x)).map_err(|m| self.g.invalid(format!("{}: {m}", self.prefix)))?;
        let mut x = x;
        for i in 0..window.rank() {
            x = self.pad_axis(x, 2 + i, [window.pads_begin[i], window.pads_end[i]], fill)?;
        }
        // the rows each kernel row reads, then within them the columns each kernel column reads
        let mut taps = vec![x];
        for (i, &len) in out.iter().enumerate() {
            let mut next = vec![];
            for (t, &v) in taps.iter().enumerate() {
                for k in 0..window.kernel[i] {
                    let at: Vec<i64> =
                        (0..len).map(|o| (o * window.stride[i] + k * window.dilation[i]) as i64).collect();
                    let at = self.op(&format!("tap{i}.{t}.{k}.at"), Op::Constant(Tensor::i64(vec![len], at)?), &[])?;
                    next.push(self.op(&format!("tap{i}.{t}.{k}"), Op::Gather { axis: 2 + i }, &[v, at])?);
                }
            }
            taps = next;
        }
        Ok(taps)
    }

    /// `x` with `before` and `after` entries of `fill` around `axis`.
    fn pad_axis(&mut self, x: ValueId, axis: usize, [before, after]: [usize; 2], fill: f64) -> Result<ValueId> {
        if before + after == 0 {
            return Ok(x);
        }
        let shape = self.shape(x);
        let value = Tensor::float(self.dtype(x), vec![1; shape.len()], vec![fill as f32])?;
        let value = self.op(&format!("pad{axis}.value"), Op::Constant(value), &[])?;
        let mut parts = vec![];
        for (side, n) in [("before", before), ("after", after)] {
            if n > 0 {
                let mut at = shape.clone();
                at[axis] = Dim::from(n);
                parts.push(self.op(&format!("pad{axis}.{side}"), Op::Expand { shape: at }, &[value])?);
            }
        }
        parts.insert(usize::from(before > 0), x);
        self.op(&format!("pad{axis}"), Op::Concat { axis }, &parts)
    }

    /// [`Op::Conv`] as one batched matrix product per group over the taps (im2col): the taps
    /// stacked `[b, groups, cin / groups * taps, positions]` (channel-major, as the weight
    /// `[cout, cin / groups, *kernel]` flattens), times the weight seen as `[groups, cout /
    /// groups, cin / groups * taps]`.
    fn conv(
        &mut self,
        x: ValueId,
        w: ValueId,
        bias: Option<ValueId>,
        window: &Window,
        groups: usize,
    ) -> Result<ValueId> {
        let xs = self.shape(x);
        let out = window.static_out_shape(&xs).map_err(|m| self.g.invalid(format!("{}: {m}", self.prefix)))?;
        let (batch, d) = (xs[0].clone(), |v: usize| Dim::from(v));
        // static, as inference checked
        let (cin, cout) = (xs[1].as_const().unwrap_or(0) as usize, self.shape(w)[0].as_const().unwrap_or(0) as usize);
        let (positions, cg) = (out.iter().product::<usize>(), cin / groups);
        let taps = self.window_taps(x, window, 0.0)?;
        let n = taps.len();
        let mut cols = vec![];
        for (i, t) in taps.into_iter().enumerate() {
            let shape = vec![batch.clone(), d(groups), d(cg), d(1), d(positions)];
            cols.push(self.op(&format!("col{i}"), Op::Reshape { shape }, &[t])?);
        }
        let cols = match cols[..] {
            [one] => one,
            _ => self.op("cols", Op::Concat { axis: 3 }, &cols)?,
        };
        let cols = self.op(
            "cols.flat",
            Op::Reshape { shape: vec![batch.clone(), d(groups), d(cg * n), d(positions)] },
            &[cols],
        )?;
        let w = self.op("weight.flat", Op::Reshape { shape: vec![d(groups), d(cout / groups), d(cg * n)] }, &[w])?;
        let y = self.op("matmul", Op::MatMul, &[w, cols])?;
        let shape: Vec<Dim> = [batch, d(cout)].into_iter().chain(out.iter().map(|&o| d(o))).collect();
        let y = self.op("out", Op::Reshape { shape }, &[y])?;
        match bias {
            Some(b) => {
                let per_channel = [d(cout)].into_iter().chain(out.iter().map(|_| d(1))).collect();
                let b = self.op("bias.channels", Op::Reshape { shape: per_channel }, &[b])?;
                self.bin("biased", BinaryOp::Add, y, b)
            }
            None => Ok(y),
        }
    }

    /// [`Op::MaxPool`] as the elementwise max of its taps, the padding the dtype's lowest value.
    fn max_pool(&mut self, x: ValueId, window: &Window) -> Result<ValueId> {
        let lowest = f64::from(self.dtype(x).min_finite());
        let taps = self.window_taps(x, window, lowest)?;
        let mut y = taps[0];
        for (i, &t) in taps.iter().enumerate().skip(1) {
            y = self.bin(&format!("max{i}"), BinaryOp::Max, y, t)?;
        }
        Ok(y)
    }

    /// [`Op::SelectiveScan`] unrolled over its static sequence, one [`Emitter::selective_step`]
    /// per position; the outputs concatenated. A run-time sequence length needs the backend's
    /// own loop over [`scan_step`]: refused here.
    fn selective_scan(&mut self, ins: &[ValueId]) -> Result<(ValueId, ValueId)> {
        let len = self.static_steps("a selective scan", &self.shape(ins[0])[2].clone())?;
        let [x, dt, a, b, c, h0] = [ins[0], ins[1], ins[2], ins[3], ins[4], ins[5]];
        let groups = self.shape(b)[2].clone();
        let (a, mut h) = self.scan_groups(a, h0, &groups)?;
        let mut ys = Vec::with_capacity(len as usize);
        for t in 0..len {
            let at = |axis| Op::Slice { axis, start: Dim::konst(t), end: Dim::konst(t + 1) };
            let x_t = self.op(&format!("x.{t}"), at(2), &[x])?;
            let dt_t = self.op(&format!("dt.{t}"), at(2), &[dt])?;
            let b_t = self.op(&format!("b.{t}"), at(1), &[b])?;
            let c_t = self.op(&format!("c.{t}"), at(1), &[c])?;
            let (y, next) = self.selective_step(&t.to_string(), [x_t, dt_t, a, b_t, c_t], h)?;
            ys.push(y);
            h = next;
        }
        let y = match ys[..] {
            [one] => one,
            _ => self.op("y", Op::Concat { axis: 2 }, &ys)?,
        };
        let hs = self.shape(h0);
        let state = self.op("state", Op::Reshape { shape: hs }, &[h])?;
        Ok((y, state))
    }

    /// `A [d, n]` viewed `[g, d / g, n]` and the state `h [b, d, n]` viewed `[b, g, d / g, n]`:
    /// each group's channels against its `B` and `C`.
    fn scan_groups(&mut self, a: ValueId, h: ValueId, groups: &Dim) -> Result<(ValueId, ValueId)> {
        let hs = self.shape(h);
        let (batch, d, n) = (hs[0].clone(), hs[1].clone(), hs[2].clone());
        // shape inference of both scans requires static channels and groups
        let (Some(d_n), Some(g_n)) = (d.as_const(), groups.as_const()) else {
            let msg = format!("node `{}`: scan channels ({d}) and groups ({groups}) must be static", self.prefix);
            return Err(Error::Verify { graph: self.g.name.clone(), msg });
        };
        let per_group = Dim::konst(d_n / g_n);
        let a = self.op("a_groups", Op::Reshape { shape: vec![groups.clone(), per_group.clone(), n.clone()] }, &[a])?;
        let h = self.op("state_groups", Op::Reshape { shape: vec![batch, groups.clone(), per_group, n] }, &[h])?;
        Ok((a, h))
    }

    /// One position of a selective scan, the decode step transformers' `selective_state_update`
    /// computes (in f32): `x_t`, `dt_t` `[b, d, 1]`, `A` and the state grouped
    /// ([`Emitter::scan_groups`]), `B_t`, `C_t` `[b, 1, g, n]`; returns `y_t [b, d, 1]` and
    /// the next grouped state. `t` names the step's nodes.
    fn selective_step(&mut self, t: &str, [x, dt, a, b, c]: [ValueId; 5], h: ValueId) -> Result<(ValueId, ValueId)> {
        let (xs, hs) = (self.shape(x), self.shape(h));
        let (batch, d) = (xs[0].clone(), xs[1].clone());
        let (g, per_group, n) = (hs[1].clone(), hs[2].clone(), hs[3].clone());
        let grouped = vec![batch.clone(), g.clone(), per_group, Dim::konst(1)];
        let x = self.op(&format!("x_groups.{t}"), Op::Reshape { shape: grouped.clone() }, &[x])?;
        let dt = self.op(&format!("dt_groups.{t}"), Op::Reshape { shape: grouped }, &[dt])?;
        // B_t [b, 1, g, n] -> [b, g, 1, n]; C_t as columns [b, g, n, 1]
        let row = vec![batch.clone(), g.clone(), Dim::konst(1), n.clone()];
        let b = self.op(&format!("b_groups.{t}"), Op::Reshape { shape: row }, &[b])?;
        let column = vec![batch.clone(), g, n, Dim::konst(1)];
        let c = self.op(&format!("c_col.{t}"), Op::Reshape { shape: column }, &[c])?;
        let da = self.bin(&format!("dt_a.{t}"), BinaryOp::Mul, dt, a)?;
        let da = self.un(&format!("decay.{t}"), UnaryOp::Exp, da)?;
        let db = self.bin(&format!("db.{t}"), BinaryOp::Mul, dt, b)?;
        let dbx = self.bin(&format!("dbx.{t}"), BinaryOp::Mul, db, x)?;
        let kept = self.bin(&format!("kept.{t}"), BinaryOp::Mul, da, h)?;
        let h = self.bin(&format!("state.{t}"), BinaryOp::Add, kept, dbx)?;
        let y = self.op(&format!("y_groups.{t}"), Op::MatMul, &[h, c])?;
        let y = self.op(&format!("y.{t}"), Op::Reshape { shape: vec![batch, d, Dim::konst(1)] }, &[y])?;
        Ok((y, h))
    }

    /// The steps of a recurrence over `len`, which must be static: a run-time length needs the
    /// backend's own loop, refused here naming the scan.
    fn static_steps(&self, what: &str, len: &Dim) -> Result<i64> {
        len.as_const().ok_or_else(|| {
            Error::Config(format!(
                "`{}`: {what} over a sequence of run-time length (`{len}`) needs a loop, which this format's \
                 lowering does not have yet; export with a fixed sequence (without --dynamic), or for generation \
                 (--for-generation --static-cache N: the decode step takes one token per call)",
                self.prefix
            ))
        })
    }

    /// [`Op::DeltaScan`] unrolled over its static sequence, one [`Emitter::delta_step`] per
    /// position; the outputs concatenated.
    fn delta_scan(&mut self, ins: &[ValueId]) -> Result<(ValueId, ValueId)> {
        let len = self.static_steps("a gated delta rule", &self.shape(ins[0])[2].clone())?;
        let [q, k, v, g, beta, mut s] = [ins[0], ins[1], ins[2], ins[3], ins[4], ins[5]];
        let mut os = Vec::with_capacity(len as usize);
        for t in 0..len {
            let at = |axis| Op::Slice { axis, start: Dim::konst(t), end: Dim::konst(t + 1) };
            let mut slice = |name: &str, x| self.op(&format!("{name}.{t}"), at(2), &[x]);
            let step = [slice("q", q)?, slice("k", k)?, slice("v", v)?, slice("g", g)?, slice("beta", beta)?];
            let (o, next) = self.delta_step(&t.to_string(), step, s)?;
            os.push(o);
            s = next;
        }
        let o = match os[..] {
            [one] => one,
            _ => self.op("o", Op::Concat { axis: 2 }, &os)?,
        };
        Ok((o, s))
    }

    /// One position of the gated delta rule as transformers' `torch_recurrent_gated_delta_rule`
    /// computes it (in f32): `q_t`, `k_t` `[b, h, 1, dk]`, `v_t [b, h, 1, dv]`, `g_t`,
    /// `beta_t` `[b, h, 1]`, the state `S [b, h, dk, dv]`: `S *= exp(g_t)`,
    /// `delta = (v_t - k_t S) * beta_t`, `S += k_t^T delta`, `o_t = q_t S`; returns `o_t` and
    /// the next state.
    fn delta_step(&mut self, t: &str, [q, k, v, g, beta]: [ValueId; 5], s: ValueId) -> Result<(ValueId, ValueId)> {
        let gs = self.shape(g);
        let column = vec![gs[0].clone(), gs[1].clone(), Dim::konst(1), Dim::konst(1)];
        let g = self.op(&format!("g_col.{t}"), Op::Reshape { shape: column.clone() }, &[g])?;
        let beta = self.op(&format!("beta_col.{t}"), Op::Reshape { shape: column }, &[beta])?;
        let decay = self.un(&format!("decay.{t}"), UnaryOp::Exp, g)?;
        let s = self.bin(&format!("decayed.{t}"), BinaryOp::Mul, s, decay)?;
        let kv = self.op(&format!("kv.{t}"), Op::MatMul, &[k, s])?;
        let diff = self.bin(&format!("diff.{t}"), BinaryOp::Sub, v, kv)?;
        let delta = self.bin(&format!("delta.{t}"), BinaryOp::Mul, diff, beta)?;
        let k_col = self.op(&format!("k_col.{t}"), Op::Transpose { perm: vec![0, 1, 3, 2] }, &[k])?;
        let update = self.op(&format!("update.{t}"), Op::MatMul, &[k_col, delta])?;
        let s = self.bin(&format!("state.{t}"), BinaryOp::Add, s, update)?;
        Ok((self.op(&format!("o.{t}"), Op::MatMul, &[q, s])?, s))
    }

    fn dtype(&self, x: ValueId) -> DType {
        self.g.info(x).dtype
    }

    fn rms_norm(&mut self, x: ValueId, w: ValueId, eps: f32) -> Result<ValueId> {
        let in_dtype = self.dtype(x);
        let last = self.shape(x).len() - 1;
        let xf = self.cast("to_f32", x, DType::F32)?;
        let sq = self.bin("square", BinaryOp::Mul, xf, xf)?;
        let mean = self.op("mean", Op::Reduce { kind: ReduceKind::Mean, axes: vec![last], keep_dims: true }, &[sq])?;
        let e = self.scalar("eps", DType::F32, eps as f64)?;
        let var = self.bin("add_eps", BinaryOp::Add, mean, e)?;
        let sd = self.un("sqrt", UnaryOp::Sqrt, var)?;
        let r = self.un("rsqrt", UnaryOp::Reciprocal, sd)?;
        let n = self.bin("normalize", BinaryOp::Mul, xf, r)?;
        let n = self.cast("to_input_dtype", n, in_dtype)?;
        let w_dtype = self.dtype(w);
        let n = self.cast("to_weight_dtype", n, w_dtype)?;
        self.bin("scale", BinaryOp::Mul, w, n)
    }

    /// All in f32 (the weight and bias too), rounded once to `x`'s dtype, as torch's kernel.
    fn layer_norm(&mut self, x: ValueId, w: ValueId, b: Option<ValueId>, eps: f32) -> Result<ValueId> {
        let in_dtype = self.dtype(x);
        let last = self.shape(x).len() - 1;
        let mean_op = Op::Reduce { kind: ReduceKind::Mean, axes: vec![last], keep_dims: true };
        let xf = self.cast("to_f32", x, DType::F32)?;
        let mean = self.op("mean", mean_op.clone(), &[xf])?;
        let d = self.bin("centered", BinaryOp::Sub, xf, mean)?;
        let sq = self.bin("square", BinaryOp::Mul, d, d)?;
        let var = self.op("var", mean_op, &[sq])?;
        let e = self.scalar("eps", DType::F32, eps as f64)?;
        let var = self.bin("add_eps", BinaryOp::Add, var, e)?;
        let sd = self.un("sqrt", UnaryOp::Sqrt, var)?;
        let r = self.un("rsqrt", UnaryOp::Reciprocal, sd)?;
        let n = self.bin("normalize", BinaryOp::Mul, d, r)?;
        let wf = self.cast("weight_f32", w, DType::F32)?;
        let mut y = self.bin("scale", BinaryOp::Mul, n, wf)?;
        if let Some(b) = b {
            let bf = self.cast("bias_f32", b, DType::F32)?;
            y = self.bin("shift", BinaryOp::Add, y, bf)?;
        }
        self.cast("to_input_dtype", y, in_dtype)
    }

    /// A constant `[dim / 2]` f32 table of inverse frequencies.
    fn freq_table(&mut self, part: &str, inv: Vec<f32>) -> Result<ValueId> {
        self.op(part, Op::Constant(Tensor::f32(vec![inv.len()], inv)?), &[])
    }

    /// `max(position_ids) + 1`, the longest position seen (i64 scalar).
    fn longest_position(&mut self, pos: ValueId) -> Result<ValueId> {
        let m = self.op("max_pos", Op::Reduce { kind: ReduceKind::Max, axes: vec![0, 1], keep_dims: false }, &[pos])?;
        let one = self.scalar("one", DType::I64, 1.0)?;
        self.bin("len", BinaryOp::Add, m, one)
    }

    /// longrope: the long table once the longest position passes the original context, else
    /// the short one (`torch.where(seq_len > original_max, long, short)`).
    fn longrope_inv_freq(&mut self, pos: ValueId, short: Vec<f32>, long: Vec<f32>, orig: usize) -> Result<ValueId> {
        let len = self.longest_position(pos)?;
        let mp = self.scalar("orig_len", DType::I64, orig as f64)?;
        let is_long = self.bin("is_long", BinaryOp::Greater, len, mp)?;
        let (short, long) = (self.freq_table("short_inv_freq", short)?, self.freq_table("long_inv_freq", long)?);
        self.op("inv_freq", Op::Where, &[is_long, long, short])
    }

    fn inv_freq(&mut self, rope: &RopeConfig, pos: ValueId) -> Result<ValueId> {
        if let Some((short, long, orig)) = rope.longrope_inv_freqs() {
            return self.longrope_inv_freq(pos, short, long, orig);
        }
        let Some((factor, max_pos, exponent)) = rope.dynamic_base_exponent() else {
            return self.freq_table("inv_freq", rope.inv_freq());
        };
        // base' = theta * ((factor * L / max_pos) - (factor - 1)) ** (dim / (dim - 2)),
        // L = max(max(position_ids) + 1, max_pos)
        let len = self.longest_position(pos)?;
        let mp = self.scalar("orig_len", DType::I64, max_pos as f64)?;
        let len = self.bin("len_clamped", BinaryOp::Max, len, mp)?;
        let lf = self.cast("len_f32", len, DType::F32)?;
        let fc = self.scalar("factor", DType::F32, factor as f64)?;
        let t = self.bin("scaled_len", BinaryOp::Mul, lf, fc)?;
        let mpf = self.scalar("orig_len_f32", DType::F32, max_pos as f64)?;
        let t = self.bin("ratio", BinaryOp::Div, t, mpf)?;
        let fm1 = self.scalar("factor_m1", DType::F32, (factor - 1.0) as f64)?;
        let t = self.bin("shift", BinaryOp::Sub, t, fm1)?;
        let ex = self.scalar("exponent", DType::F32, exponent as f64)?;
        let t = self.bin("pow", BinaryOp::Pow, t, ex)?;
        let th = self.scalar("theta", DType::F32, rope.theta)?;
        let base = self.bin("base", BinaryOp::Mul, th, t)?;
        let dim = rope.dim as f32;
        let exps: Vec<f32> = (0..rope.dim).step_by(2).map(|i| i as f32 / dim).collect();
        let exps = self.op("exponents", Op::Constant(Tensor::f32(vec![exps.len()], exps)?), &[])?;
        let p = self.bin("pos_freqs", BinaryOp::Pow, base, exps)?;
        self.un("inv_freq", UnaryOp::Reciprocal, p)
    }

    fn rotary_cos_sin(&mut self, rope: &RopeConfig, pos: ValueId) -> Result<(ValueId, ValueId)> {
        let inv = self.inv_freq(rope, pos)?;
        let s = self.shape(pos);
        let pf = self.cast("pos_f32", pos, DType::F32)?;
        let pf = self.op("pos_col", Op::Reshape { shape: vec![s[0].clone(), s[1].clone(), Dim::konst(1)] }, &[pf])?;
        let freqs = self.bin("freqs", BinaryOp::Mul, pf, inv)?;
        let emb = self.op("emb", Op::Concat { axis: 2 }, &[freqs, freqs])?;
        let mut cos = self.un("cos", UnaryOp::Cos, emb)?;
        let mut sin = self.un("sin", UnaryOp::Sin, emb)?;
        let scaling = rope.attention_scaling();
        if scaling != 1.0 {
            let sc = self.scalar("attention_scaling", DType::F32, scaling as f64)?;
            cos = self.bin("cos_scaled", BinaryOp::Mul, cos, sc)?;
            sin = self.bin("sin_scaled", BinaryOp::Mul, sin, sc)?;
        }
        Ok((cos, sin))
    }

    fn apply_rotary(&mut self, x: ValueId, cos: ValueId, sin: ValueId) -> Result<ValueId> {
        let xs = self.shape(x);
        let cs = self.shape(cos);
        let c4 = vec![cs[0].clone(), Dim::konst(1), cs[1].clone(), cs[2].clone()];
        let cos4 = self.op("cos_heads", Op::Reshape { shape: c4.clone() }, &[cos])?;
        let sin4 = self.op("sin_heads", Op::Reshape { shape: c4 }, &[sin])?;
        let d = xs[3].clone();
        let half = d.div_exact(2)?;
        let x1 = self.op("x1", Op::Slice { axis: 3, start: Dim::konst(0), end: half.clone() }, &[x])?;
        let x2 = self.op("x2", Op::Slice { axis: 3, start: half, end: d }, &[x])?;
        let nx2 = self.un("neg_x2", UnaryOp::Neg, x2)?;
        let rot = self.op("rotate_half", Op::Concat { axis: 3 }, &[nx2, x1])?;
        let a = self.bin("x_cos", BinaryOp::Mul, x, cos4)?;
        let b = self.bin("rot_sin", BinaryOp::Mul, rot, sin4)?;
        self.bin("out", BinaryOp::Add, a, b)
    }

    /// `[b, kvh, t, d]` -> `[b, kvh * rep, t, d]`, each kv head repeated `rep` times in place.
    fn repeat_kv(&mut self, part: &str, x: ValueId, rep: i64) -> Result<ValueId> {
        if rep == 1 {
            return Ok(x);
        }
        let s = self.shape(x);
        let five = vec![s[0].clone(), s[1].clone(), Dim::konst(1), s[2].clone(), s[3].clone()];
        let x = self.op(&format!("{part}_unsqueeze"), Op::Reshape { shape: five.clone() }, &[x])?;
        let mut wide = five;
        wide[2] = Dim::konst(rep);
        let x = self.op(&format!("{part}_expand"), Op::Expand { shape: wide }, &[x])?;
        let heads = s[1].mul(&Dim::konst(rep));
        self.op(
            &format!("{part}_repeat"),
            Op::Reshape { shape: vec![s[0].clone(), heads, s[2].clone(), s[3].clone()] },
            &[x],
        )
    }

    /// `mask [b|1, 1, s|1, t] AND (q_pos - k_pos < window)`: a sliding window on top of the
    /// caller's causal mask, from the query and key positions.
    fn window_mask(&mut self, mask: ValueId, w: usize, qp: ValueId, kp: ValueId) -> Result<ValueId> {
        let (qs, ks) = (self.shape(qp), self.shape(kp));
        let q4 = self.op(
            "q_pos",
            Op::Reshape { shape: vec![qs[0].clone(), Dim::konst(1), qs[1].clone(), Dim::konst(1)] },
            &[qp],
        )?;
        let k4 = self.op(
            "k_pos",
            Op::Reshape { shape: vec![ks[0].clone(), Dim::konst(1), Dim::konst(1), ks[1].clone()] },
            &[kp],
        )?;
        let diff = self.bin("distance", BinaryOp::Sub, q4, k4)?;
        let wv = self.scalar("window", DType::I64, w as f64)?;
        let inside = self.bin("in_window", BinaryOp::Less, diff, wv)?;
        self.bin("window_mask", BinaryOp::And, mask, inside)
    }

    #[allow(clippy::too_many_arguments)]
    fn attention(
        &mut self,
        q: ValueId,
        k: ValueId,
        v: ValueId,
        mask: ValueId,
        (scale, softcap): (f32, Option<f32>),
        window: Option<(usize, ValueId, ValueId)>,
        sinks: Option<ValueId>,
    ) -> Result<ValueId> {
        let dtype = self.dtype(q);
        let h = self.shape(q)[1].as_const().unwrap_or(1);
        let kvh = self.shape(k)[1].as_const().unwrap_or(1);
        let k = self.repeat_kv("k", k, h / kvh.max(1))?;
        let v = self.repeat_kv("v", v, h / kvh.max(1))?;
        let kt = self.op("k_t", Op::Transpose { perm: vec![0, 1, 3, 2] }, &[k])?;
        let sc = self.op("scores", Op::MatMul, &[q, kt])?;
        let sv = self.scalar("scale", dtype, scale as f64)?;
        let mut sc = self.bin("scaled", BinaryOp::Mul, sc, sv)?;
        if let Some(cap) = softcap {
            let c = self.scalar("softcap", dtype, cap as f64)?;
            let d = self.bin("capped_div", BinaryOp::Div, sc, c)?;
            let t = self.un("capped_tanh", UnaryOp::Tanh, d)?;
            sc = self.bin("capped", BinaryOp::Mul, t, c)?;
        }
        let sc = if self.dtype(mask) == DType::Bool {
            let mask = match window {
                Some((w, qp, kp)) => self.window_mask(mask, w, qp, kp)?,
                None => mask,
            };
            let low = self.scalar("masked_value", dtype, dtype.min_finite() as f64)?;
            let sc = self.op("masked", Op::Where, &[mask, sc, low])?;
            self.cast("scores_f32", sc, DType::F32)?
        } else {
            // an additive mask (inference refuses it with a window), added in f32 so that the
            // dtype's lowest value plus a score cannot overflow to -inf
            let sc = self.cast("scores_f32", sc, DType::F32)?;
            let m = self.cast("mask_f32", mask, DType::F32)?;
            self.bin("masked", BinaryOp::Add, sc, m)?
        };
        let p = match sinks {
            Some(sinks) => self.softmax_with_sinks(sc, sinks)?,
            None => self.op("softmax", Op::Softmax { axis: 3 }, &[sc])?,
        };
        let p = self.cast("probs", p, dtype)?;
        self.op("out", Op::MatMul, &[p, v])
    }

    /// `op` (an `Attention` over `q [b, h, s, d]`, `k` and `v` `[b, h / groups, t, ...]` and
    /// `mask`) with each key head's `groups` query heads along its query axis (see
    /// [`fold_query_groups`]); the attention keeps the node's name. A mask whose head axis is
    /// neither 1 nor `h` leaves the node as it is.
    fn grouped_attention(&mut self, name: &str, op: Op, ins: &[ValueId], groups: i64) -> Result<Vec<ValueId>> {
        let (q, k, v, mask) = (ins[0], ins[1], ins[2], ins[3]);
        let (qs, ks, ms) = (self.shape(q), self.shape(k), self.shape(mask));
        let rows = qs[2].mul(&Dim::konst(groups));
        let mask = match ms[1].as_const() {
            // one mask for every head: the same rows for each member of a group
            Some(1) => {
                let wide = vec![ms[0].clone(), Dim::konst(groups), qs[2].clone(), ms[3].clone()];
                let m = self.op("mask_groups", Op::Expand { shape: wide }, &[mask])?;
                let flat = vec![ms[0].clone(), Dim::konst(1), rows.clone(), ms[3].clone()];
                self.op("mask_rows", Op::Reshape { shape: flat }, &[m])?
            }
            // a mask per query head (ALiBi's biases): the heads of a group are consecutive
            Some(n) if Dim::konst(n) == qs[1] => {
                let wide = vec![ms[0].clone(), qs[1].clone(), qs[2].clone(), ms[3].clone()];
                let m = self.op("mask_heads", Op::Expand { shape: wide }, &[mask])?;
                let flat = vec![ms[0].clone(), ks[1].clone(), rows.clone(), ms[3].clone()];
                self.op("mask_rows", Op::Reshape { shape: flat }, &[m])?
            }
            _ => return self.g.add_node(name, op, ins),
        };
        let folded = vec![qs[0].clone(), ks[1].clone(), rows, qs[3].clone()];
        let q = self.op("query_rows", Op::Reshape { shape: folded }, &[q])?;
        let o = self.g.op(name, op, &[q, k, v, mask])?;
        let shape = vec![qs[0].clone(), qs[1].clone(), qs[2].clone(), self.shape(v)[3].clone()];
        Ok(vec![self.op("heads", Op::Reshape { shape }, &[o])?])
    }

    /// The softmax of f32 scores `[b, h, s, t]` over `t` keys and one more logit per head
    /// (`sinks [h]`), the sink's probability dropped: GPT-OSS's `cat([scores, sinks])`,
    /// softmax, `[..., :-1]`.
    fn softmax_with_sinks(&mut self, scores: ValueId, sinks: ValueId) -> Result<ValueId> {
        let s = self.shape(scores);
        let one = Dim::konst(1);
        let sinks = self.cast("sinks_f32", sinks, DType::F32)?;
        let col = vec![one.clone(), s[1].clone(), one.clone(), one];
        let col = self.op("sinks_col", Op::Reshape { shape: col }, &[sinks])?;
        let wide = vec![s[0].clone(), s[1].clone(), s[2].clone(), Dim::konst(1)];
        let col = self.op("sinks_rows", Op::Expand { shape: wide }, &[col])?;
        let all = self.op("with_sinks", Op::Concat { axis: 3 }, &[scores, col])?;
        let p = self.op("softmax", Op::Softmax { axis: 3 }, &[all])?;
        self.op("sinks_dropped", Op::Slice { axis: 3, start: Dim::konst(0), end: s[3].clone() }, &[p])
    }

    /// `(q - z) * s` over groups, in f32, then the scales' dtype: `q, s (, z)` of shapes
    /// `[rows, cols], [rows, groups] (, [rows, groups])` -> `[rows, cols]`. Also serves a gathered
    /// `[ids..., cols]` / `[ids..., groups]` (any leading dims).
    fn dequantize(&mut self, params: &[ValueId], group: usize, zero_point: bool) -> Result<ValueId> {
        let (q, s) = (params[0], params[1]);
        let (shape, dtype) = (self.shape(q), self.dtype(s));
        let lead = &shape[..shape.len() - 1];
        let cols = shape[shape.len() - 1].clone();
        let grouped: Vec<Dim> =
            lead.iter().cloned().chain([cols.div_exact(group as i64)?, Dim::konst(group as i64)]).collect();
        let one: Vec<Dim> = lead.iter().cloned().chain([cols.div_exact(group as i64)?, Dim::konst(1)]).collect();
        let qf = self.cast("q_f32", q, DType::F32)?;
        let mut w = self.op("q_groups", Op::Reshape { shape: grouped }, &[qf])?;
        if zero_point {
            let z = self.cast("zp_f32", params[2], DType::F32)?;
            let z = self.op("zp_groups", Op::Reshape { shape: one.clone() }, &[z])?;
            w = self.bin("centered", BinaryOp::Sub, w, z)?;
        }
        let sf = self.cast("scales_f32", s, DType::F32)?;
        let sf = self.op("scales_groups", Op::Reshape { shape: one }, &[sf])?;
        let w = self.bin("scaled", BinaryOp::Mul, w, sf)?;
        let w = self.op("weight", Op::Reshape { shape }, &[w])?;
        self.cast("weight_dtype", w, dtype)
    }

    /// The rows of `q`, the scales (and zero points) at `ids`, dequantized.
    fn quant_gather(&mut self, params: &[ValueId], ids: ValueId, group: usize, zero_point: bool) -> Result<ValueId> {
        let rows = params
            .iter()
            .enumerate()
            .map(|(i, &p)| self.op(&format!("rows{i}"), Op::Gather { axis: 0 }, &[p, ids]))
            .collect::<Result<Vec<_>>>()?;
        self.dequantize(&rows, group, zero_point)
    }

    fn linear(&mut self, x: ValueId, w: ValueId, b: Option<ValueId>) -> Result<ValueId> {
        let wt = self.op("w_t", Op::Transpose { perm: vec![1, 0] }, &[w])?;
        let y = self.op("matmul", Op::MatMul, &[x, wt])?;
        match b {
            Some(b) => self.bin("bias", BinaryOp::Add, y, b),
            None => Ok(y),
        }
    }

    /// Without a scatter primitive: a one-hot `[b|1, 1, L, q]` of the slots places the new rows
    /// by a matrix product (exact: one 1 per row), and `Where` keeps the old rows elsewhere.
    /// Reads the cache it replaces, so it is not an in-place realisation; backends that bind the
    /// cache in place lower `CacheUpdate` natively.
    fn cache_update(&mut self, cache: ValueId, new: ValueId, slots: ValueId) -> Result<ValueId> {
        let (cs, ps) = (self.shape(cache), self.shape(slots));
        let dtype = self.dtype(cache);
        let len = cs[2].clone();
        let iota = self.op("slots_all", Op::Iota { len: len.clone() }, &[])?;
        let col = self.op(
            "slot_col",
            Op::Reshape { shape: vec![Dim::konst(1), Dim::konst(1), len, Dim::konst(1)] },
            &[iota],
        )?;
        let row = self.op(
            "new_row",
            Op::Reshape { shape: vec![ps[0].clone(), Dim::konst(1), Dim::konst(1), ps[1].clone()] },
            &[slots],
        )?;
        let hit = self.bin("one_hot", BinaryOp::Equal, col, row)?;
        let hit_f = self.cast("one_hot_f", hit, dtype)?;
        let placed = self.op("placed", Op::MatMul, &[hit_f, new])?;
        let any = self.op("written", Op::Reduce { kind: ReduceKind::Max, axes: vec![3], keep_dims: true }, &[hit_f])?;
        let zero = self.scalar("zero", dtype, 0.0)?;
        let written = self.bin("written_mask", BinaryOp::Greater, any, zero)?;
        self.op("out", Op::Where, &[written, placed, cache])
    }

    /// `ins`: x, gate, up, down weights, then optionally the three biases.
    fn gated_mlp(&mut self, ins: &[ValueId], act: Activation) -> Result<ValueId> {
        let with_bias = |w: ValueId, b: usize| -> Vec<ValueId> {
            let x = ins[0];
            ins.get(b).map_or(vec![x, w], |b| vec![x, w, *b])
        };
        let gate = self.op("gate", Op::Linear, &with_bias(ins[1], 4))?;
        let up = self.op("up", Op::Linear, &with_bias(ins[2], 5))?;
        let a = self.activation(gate, act)?;
        let h = self.bin("gated", BinaryOp::Mul, a, up)?;
        let down: Vec<ValueId> = [h, ins[3]].into_iter().chain(ins.get(6).copied()).collect();
        self.op("down", Op::Linear, &down)
    }

    /// Top-k by rank counting (for runtimes without a top-k op): the rank of `x_e` is the
    /// number of `x_j > x_e` plus the number of equal `x_j` before it (torch's order); the
    /// `r`-th output is the element of rank `r`, picked by a one-hot product, so values are
    /// exact for finite inputs. Costs `n²` comparisons per row (`n` is the expert count).
    fn top_k(&mut self, x: ValueId, k: usize) -> Result<(ValueId, ValueId)> {
        let (shape, dtype) = (self.shape(x), self.dtype(x));
        let rank = shape.len();
        let n = shape[rank - 1].as_const().unwrap_or(0) as usize;
        let lead = &shape[..rank - 1];
        let with =
            |tail: &[usize]| -> Vec<Dim> { lead.iter().cloned().chain(tail.iter().map(|&d| Dim::from(d))).collect() };
        let col = self.op("topk_col", Op::Reshape { shape: with(&[n, 1]) }, &[x])?;
        let row = self.op("topk_row", Op::Reshape { shape: with(&[1, n]) }, &[x])?;
        let greater = self.bin("topk_greater", BinaryOp::Greater, row, col)?;
        let equal = self.bin("topk_equal", BinaryOp::Equal, row, col)?;
        let earlier = Tensor::bool(vec![n, n], (0..n * n).map(|i| i % n < i / n).collect())?;
        let earlier = self.op("topk_earlier", Op::Constant(earlier), &[])?;
        let tie = self.bin("topk_tie", BinaryOp::And, equal, earlier)?;
        let before = self.bin("topk_before", BinaryOp::Or, greater, tie)?;
        let before = self.cast("topk_before_f", before, DType::F32)?;
        let ranks =
            self.op("topk_rank", Op::Reduce { kind: ReduceKind::Sum, axes: vec![rank], keep_dims: false }, &[before])?;
        let ranks = self.op("topk_rank_row", Op::Reshape { shape: with(&[1, n]) }, &[ranks])?;
        let slots = Tensor::f32(vec![k, 1], (0..k).map(|r| r as f32).collect())?;
        let slots = self.op("topk_slots", Op::Constant(slots), &[])?;
        let pick = self.bin("topk_pick", BinaryOp::Equal, ranks, slots)?;
        let pick_f = self.cast("topk_pick_f", pick, DType::F32)?;
        let ids = Tensor::f32(vec![n], (0..n).map(|i| i as f32).collect())?;
        let ids = self.op("topk_ids", Op::Constant(ids), &[])?;
        let picked_ids = self.bin("topk_picked_ids", BinaryOp::Mul, pick_f, ids)?;
        let sum = |e: &mut Self, part: &str, v: ValueId| {
            e.op(part, Op::Reduce { kind: ReduceKind::Sum, axes: vec![rank], keep_dims: false }, &[v])
        };
        let indices = sum(self, "topk_index_f", picked_ids)?;
        let indices = self.cast("topk_indices", indices, DType::I64)?;
        let pick_x = self.cast("topk_pick_x", pick, dtype)?;
        let picked = self.bin("topk_picked", BinaryOp::Mul, pick_x, row)?;
        let values = sum(self, "topk_values", picked)?;
        Ok((values, indices))
    }

    /// The router, then one of two strategies. With `few_tokens` (a decode step), each token
    /// gathers its `top_k` experts' weights and runs them as one batched matrix-vector product:
    /// cost grows with `top_k`, not the expert count. Otherwise (prefill, forward) every expert
    /// runs on every token as two wide matmuls and the outputs are weighted by the dense routing
    /// matrix (zero for the experts not selected), which keeps shapes static and matmuls large.
    fn moe(
        &mut self,
        ins: &[ValueId],
        top_k: usize,
        routing: Routing,
        (glu, weigh_input): (Glu, bool),
        (few_tokens, own_router): (bool, bool),
    ) -> Result<ValueId> {
        // a router of its own: its input and the experts' factors, last
        let (own, ins) = match own_router {
            true => (Some((ins[ins.len() - 2], ins[ins.len() - 1])), &ins[..ins.len() - 2]),
            false => (None, ins),
        };
        let (x, router, wg, wu, wd) = (ins[0], ins[1], ins[2], ins[3], ins[4]);
        let biased = ins.len() >= 9;
        let biases = ins.get(5..9).filter(|_| biased).map(|b| [b[1], b[2], b[3]]);
        let (xs, dtype) = (self.shape(x), self.dtype(x));
        let hidden = xs[2].clone();
        let tokens = xs[0].mul(&xs[1]);
        let x2 = self.op("tokens", Op::Reshape { shape: vec![tokens.clone(), hidden.clone()] }, &[x])?;
        let router_bias = ins.get(5).copied().filter(|_| biased);
        let correction = routing.corrected().then(|| ins[ins.len() - 1]);
        let routed = match own {
            Some((r, _)) => {
                self.op("router_tokens", Op::Reshape { shape: vec![tokens.clone(), hidden.clone()] }, &[r])?
            }
            None => x2,
        };
        let (mut weights, picked) = self.route([routed, router], router_bias, correction, top_k, routing)?;
        if let Some((_, scale)) = own {
            // each chosen expert's factor, gathered by its index
            let scale = self.cast("expert_scale_f32", scale, DType::F32)?;
            let factors = self.op("expert_factors", Op::Gather { axis: 0 }, &[scale, picked])?;
            weights = self.op("scaled_weights", Op::Binary(BinaryOp::Mul), &[weights, factors])?;
        }
        let weights = self.cast("routing_weights", weights, dtype)?;
        let experts = Experts { weights: [wg, wu, wd], biases, glu, weigh_input };
        let y = match few_tokens {
            true => self.moe_gathered(x2, weights, picked, &experts, top_k)?,
            false => self.moe_dense(x2, weights, picked, &experts, top_k)?,
        };
        self.op("out", Op::Reshape { shape: xs }, &[y])
    }

    /// Each token's `k` experts `[t, k]` (i64) and their weights (f32), as `routing` picks
    /// them from the logits of `x [t, h]` (`eval.rs: route` computes the same).
    fn route(
        &mut self,
        [x, router]: [ValueId; 2],
        bias: Option<ValueId>,
        correction: Option<ValueId>,
        k: usize,
        routing: Routing,
    ) -> Result<(ValueId, ValueId)> {
        let Routing::Grouped { score, groups, top_groups, normalize, scale } = routing else {
            let Routing::Softmax { normalize } = routing else { unreachable!("matched above") };
            let logits = self.op("router", Op::Linear, &[&[x, router][..], bias.as_slice()].concat())?;
            let logits = self.cast("router_f32", logits, DType::F32)?;
            let probs = self.op("router_probs", Op::Softmax { axis: 1 }, &[logits])?;
            let top = self.g.add_node(&format!("{}/router_top_k", self.prefix), Op::TopK { k }, &[probs])?;
            let weights = match normalize {
                true => self.divide_by_sum("router", top[0], None)?,
                false => top[0],
            };
            return Ok((weights, top[1]));
        };
        let (xf, rf) = (self.cast("router_x_f32", x, DType::F32)?, self.cast("router_w_f32", router, DType::F32)?);
        let bf = bias.map(|b| self.cast("router_bias_f32", b, DType::F32)).transpose()?;
        let logits = self.op("router", Op::Linear, &[&[xf, rf][..], bf.as_slice()].concat())?;
        let scores = match score.sigmoid() {
            false => self.op("router_scores", Op::Softmax { axis: 1 }, &[logits])?,
            true => self.un("router_scores", UnaryOp::Sigmoid, logits)?,
        };
        let mut choice = match correction {
            Some(c) => {
                let c = self.cast("router_correction_f32", c, DType::F32)?;
                self.bin("router_choice", BinaryOp::Add, scores, c)?
            }
            None => scores,
        };
        if groups > 1 {
            choice = self.keep_top_groups(choice, score, groups, top_groups)?;
        }
        let top = self.g.add_node(&format!("{}/router_top_k", self.prefix), Op::TopK { k }, &[choice])?;
        let picked = top[1];
        // the chosen experts' uncorrected scores, by a one-hot product (exact)
        let s = self.shape(scores);
        let (t, e, one) = (s[0].clone(), s[1].clone(), Dim::konst(1));
        let ids = self.op("router_expert_ids", Op::Iota { len: e.clone() }, &[])?;
        let col =
            self.op("router_picked_col", Op::Reshape { shape: vec![t.clone(), Dim::from(k), one.clone()] }, &[picked])?;
        let hit = self.bin("router_picked_hit", BinaryOp::Equal, col, ids)?;
        let hit = self.cast("router_picked_one_hot", hit, DType::F32)?;
        let rows = self.op("router_score_rows", Op::Reshape { shape: vec![t, one, e] }, &[scores])?;
        let picked_scores = self.bin("router_picked_scores", BinaryOp::Mul, hit, rows)?;
        let sum = Op::Reduce { kind: ReduceKind::Sum, axes: vec![2], keep_dims: false };
        let mut weights = self.op("router_weights", sum, &[picked_scores])?;
        if normalize {
            weights = self.divide_by_sum("router", weights, Some(1e-20))?;
        }
        let scale = self.scalar("router_scale", DType::F32, scale as f64)?;
        Ok((self.bin("router_scaled", BinaryOp::Mul, weights, scale)?, picked))
    }

    /// `w [t, k]` divided by its sum over `k` (plus `eps`).
    fn divide_by_sum(&mut self, part: &str, w: ValueId, eps: Option<f64>) -> Result<ValueId> {
        let sum = Op::Reduce { kind: ReduceKind::Sum, axes: vec![1], keep_dims: true };
        let mut sum = self.op(&format!("{part}_top_sum"), sum, &[w])?;
        if let Some(eps) = eps {
            let eps = self.scalar(&format!("{part}_sum_eps"), DType::F32, eps)?;
            sum = self.bin(&format!("{part}_top_sum_eps"), BinaryOp::Add, sum, eps)?;
        }
        self.bin(&format!("{part}_normalized"), BinaryOp::Div, w, sum)
    }

    /// `choice [t, e]` with the experts outside the `top_groups` best of `groups` groups (each
    /// scored by its best or its two best, [`RouterScore::group_by_two`]) set to
    /// [`RouterScore::masked_value`], DeepSeek's group-limited routing.
    fn keep_top_groups(
        &mut self,
        choice: ValueId,
        score: RouterScore,
        groups: usize,
        top_groups: usize,
    ) -> Result<ValueId> {
        let s = self.shape(choice);
        let (t, e) = (s[0].clone(), s[1].as_const().unwrap_or(0) as usize);
        let (size, g, one) = (Dim::from(e / groups), Dim::from(groups), Dim::konst(1));
        let grouped = vec![t.clone(), g.clone(), size.clone()];
        let per_group = self.op("router_groups", Op::Reshape { shape: grouped.clone() }, &[choice])?;
        let group_scores = match score.group_by_two() {
            true => {
                let two =
                    self.g.add_node(&format!("{}/router_group_top2", self.prefix), Op::TopK { k: 2 }, &[per_group])?;
                let sum = Op::Reduce { kind: ReduceKind::Sum, axes: vec![2], keep_dims: false };
                self.op("router_group_scores", sum, &[two[0]])?
            }
            false => {
                let max = Op::Reduce { kind: ReduceKind::Max, axes: vec![2], keep_dims: false };
                self.op("router_group_scores", max, &[per_group])?
            }
        };
        let top = self.g.add_node(
            &format!("{}/router_top_groups", self.prefix),
            Op::TopK { k: top_groups },
            &[group_scores],
        )?;
        let ids = self.op("router_group_ids", Op::Iota { len: g.clone() }, &[])?;
        let col = self.op(
            "router_kept_col",
            Op::Reshape { shape: vec![t.clone(), Dim::from(top_groups), one.clone()] },
            &[top[1]],
        )?;
        let hit = self.bin("router_kept_hit", BinaryOp::Equal, col, ids)?;
        let hit = self.cast("router_kept_one_hot", hit, DType::F32)?;
        let max = Op::Reduce { kind: ReduceKind::Max, axes: vec![1], keep_dims: false };
        let kept = self.op("router_kept_groups", max, &[hit])?;
        let kept = self.op("router_kept_col3", Op::Reshape { shape: vec![t.clone(), g, one] }, &[kept])?;
        let kept = self.op("router_kept_experts", Op::Expand { shape: grouped }, &[kept])?;
        let kept = self.op("router_kept_flat", Op::Reshape { shape: vec![t, Dim::from(e)] }, &[kept])?;
        let half = self.scalar("router_half", DType::F32, 0.5)?;
        let kept = self.bin("router_kept", BinaryOp::Greater, kept, half)?;
        let fill = self.scalar("router_masked_value", DType::F32, score.masked_value() as f64)?;
        self.op("router_competing", Op::Where, &[kept, choice, fill])
    }

    /// `x [t, h]`: each token's `k` experts' weights gathered into `[t*k, inter, h]` and
    /// applied as matrix-vector products; the `k` results weighted and summed -> `[t, h]`.
    fn moe_gathered(
        &mut self,
        x: ValueId,
        weights: ValueId,
        picked: ValueId,
        experts: &Experts,
        k: usize,
    ) -> Result<ValueId> {
        let [wg, wu, wd] = experts.weights;
        let xs = self.shape(x);
        let (t, h) = (xs[0].clone(), xs[1].clone());
        let tk = t.mul(&Dim::from(k));
        let one = Dim::konst(1);
        let flat = self.op("expert_ids", Op::Reshape { shape: vec![tk.clone()] }, &[picked])?;
        let col =
            self.op("token_col", Op::Reshape { shape: vec![t.clone(), one.clone(), h.clone(), one.clone()] }, &[x])?;
        let col =
            self.op("token_cols", Op::Expand { shape: vec![t.clone(), Dim::from(k), h.clone(), one.clone()] }, &[col])?;
        let mut col =
            self.op("token_per_pick", Op::Reshape { shape: vec![tk.clone(), h.clone(), one.clone()] }, &[col])?;
        if experts.weigh_input {
            let w = self.op(
                "input_weights",
                Op::Reshape { shape: vec![tk.clone(), one.clone(), one.clone()] },
                &[weights],
            )?;
            col = self.bin("token_weighted", BinaryOp::Mul, col, w)?;
        }
        // each pick's expert bias `[e, n]` gathered as a column `[t*k, n, 1]`, added to its product
        let project = |s: &mut Self, part: &str, w: ValueId, b: Option<ValueId>, input: ValueId| {
            let picked_w = s.op(&format!("{part}_picked"), Op::Gather { axis: 0 }, &[w, flat])?;
            let y = s.op(part, Op::MatMul, &[picked_w, input])?;
            let Some(b) = b else { return Ok(y) };
            let rows = s.shape(b)[1].clone();
            let b = s.op(&format!("{part}_bias_picked"), Op::Gather { axis: 0 }, &[b, flat])?;
            let b =
                s.op(&format!("{part}_bias_col"), Op::Reshape { shape: vec![tk.clone(), rows, one.clone()] }, &[b])?;
            s.bin(&format!("{part}_biased"), BinaryOp::Add, y, b)
        };
        let bias = |i: usize| experts.biases.map(|b| b[i]);
        let g = project(self, "gate", wg, bias(0), col)?;
        let u = project(self, "up", wu, bias(1), col)?;
        let a = self.glu(g, u, experts.glu)?;
        let d = project(self, "down", wd, bias(2), a)?;
        let mut d = self.op("per_pick", Op::Reshape { shape: vec![t.clone(), Dim::from(k), h.clone()] }, &[d])?;
        if !experts.weigh_input {
            let w = self.op("pick_weights", Op::Reshape { shape: vec![t, Dim::from(k), one] }, &[weights])?;
            d = self.bin("weighted", BinaryOp::Mul, d, w)?;
        }
        self.op("combined", Op::Reduce { kind: ReduceKind::Sum, axes: vec![1], keep_dims: false }, &[d])
    }

    /// `x [t, h]`: every expert on every token (`[e*inter, h] · [h, t]`, then a batched down
    /// projection), weighted by the dense `[t, e]` routing matrix -> `[t, h]`.
    fn moe_dense(
        &mut self,
        x: ValueId,
        weights: ValueId,
        picked: ValueId,
        experts: &Experts,
        k: usize,
    ) -> Result<ValueId> {
        let [wg, wu, wd] = experts.weights;
        let (xs, ws, dtype) = (self.shape(x), self.shape(wg), self.dtype(x));
        let (t, h, e, inter) = (xs[0].clone(), xs[1].clone(), ws[0].clone(), ws[1].clone());
        let one = Dim::konst(1);
        let ids = self.op("expert_range", Op::Iota { len: e.clone() }, &[])?;
        let picked =
            self.op("picked_col", Op::Reshape { shape: vec![t.clone(), Dim::from(k), one.clone()] }, &[picked])?;
        let hit = self.bin("picked_one_hot", BinaryOp::Equal, picked, ids)?;
        let hit = self.cast("picked_one_hot_f", hit, dtype)?;
        let w =
            self.op("pick_weights", Op::Reshape { shape: vec![t.clone(), Dim::from(k), one.clone()] }, &[weights])?;
        let dense = self.bin("routing_spread", BinaryOp::Mul, hit, w)?;
        let dense =
            self.op("routing_dense", Op::Reduce { kind: ReduceKind::Sum, axes: vec![1], keep_dims: false }, &[dense])?;
        let dt = self.op("routing_per_expert", Op::Transpose { perm: vec![1, 0] }, &[dense])?;
        let dt = self.op("routing_col", Op::Reshape { shape: vec![e.clone(), one.clone(), t.clone()] }, &[dt])?;
        let xt = self.op("tokens_last", Op::Transpose { perm: vec![1, 0] }, &[x])?;
        let rows = e.mul(&inter);
        // an expert bias `[e, n]` as columns `[e, n, 1]` added to every token's product
        let add_bias = |s: &mut Self, part: &str, y: ValueId, b: Option<ValueId>| -> Result<ValueId> {
            let Some(b) = b else { return Ok(y) };
            let bs = s.shape(b);
            let b = s.op(
                &format!("{part}_bias_col"),
                Op::Reshape { shape: vec![bs[0].clone(), bs[1].clone(), one.clone()] },
                &[b],
            )?;
            s.bin(&format!("{part}_biased"), BinaryOp::Add, y, b)
        };
        let bias = |i: usize| experts.biases.map(|b| b[i]);
        let project = |s: &mut Self, part: &str, w: ValueId, b: Option<ValueId>| -> Result<ValueId> {
            let w2 = s.op(&format!("{part}_rows"), Op::Reshape { shape: vec![rows.clone(), h.clone()] }, &[w])?;
            let y = s.op(part, Op::MatMul, &[w2, xt])?;
            let y = s.op(
                &format!("{part}_per_expert"),
                Op::Reshape { shape: vec![e.clone(), inter.clone(), t.clone()] },
                &[y],
            )?;
            // an expert's input scaled by its weight: its (linear) projections scaled so
            let y = match experts.weigh_input {
                true => s.bin(&format!("{part}_weighted"), BinaryOp::Mul, y, dt)?,
                false => y,
            };
            add_bias(s, part, y, b)
        };
        let g = project(self, "gate", wg, bias(0))?;
        let u = project(self, "up", wu, bias(1))?;
        let a = self.glu(g, u, experts.glu)?;
        let d = self.op("down", Op::MatMul, &[wd, a])?;
        let mut d = add_bias(self, "down", d, bias(2))?;
        if !experts.weigh_input {
            d = self.bin("weighted", BinaryOp::Mul, d, dt)?;
        }
        let y = self.op("combined", Op::Reduce { kind: ReduceKind::Sum, axes: vec![0], keep_dims: false }, &[d])?;
        self.op("tokens_first", Op::Transpose { perm: vec![1, 0] }, &[y])
    }

    /// An expert's gate and up projections combined (see [`Glu`]; `eval.rs: gated` computes
    /// the same).
    fn glu(&mut self, g: ValueId, u: ValueId, glu: Glu) -> Result<ValueId> {
        match glu {
            Glu::Gated(act) => {
                let a = self.activation(g, act)?;
                self.bin("gated", BinaryOp::Mul, a, u)
            }
            Glu::Clamped { alpha, limit } => {
                let dtype = self.dtype(g);
                let hi = self.scalar("glu_limit", dtype, limit as f64)?;
                let lo = self.scalar("glu_neg_limit", dtype, -limit as f64)?;
                let g = self.bin("glu_gate_clamped", BinaryOp::Min, g, hi)?;
                let u = self.bin("glu_up_floor", BinaryOp::Max, u, lo)?;
                let u = self.bin("glu_up_clamped", BinaryOp::Min, u, hi)?;
                let a = self.scalar("glu_alpha", dtype, alpha as f64)?;
                let ga = self.bin("glu_scaled", BinaryOp::Mul, g, a)?;
                let s = self.un("glu_sigmoid", UnaryOp::Sigmoid, ga)?;
                let glu = self.bin("glu", BinaryOp::Mul, g, s)?;
                let one = self.scalar("glu_one", dtype, 1.0)?;
                let u1 = self.bin("glu_up_plus_one", BinaryOp::Add, u, one)?;
                self.bin("gated", BinaryOp::Mul, u1, glu)
            }
        }
    }

    /// Each activation's formula as primitives in `x`'s dtype (`eval.rs: activation` computes
    /// the same); shared by `Activate` and `GatedMlp`.
    fn activation(&mut self, x: ValueId, act: Activation) -> Result<ValueId> {
        let dtype = self.dtype(x);
        match act {
            Activation::Silu => {
                let s = self.un("sigmoid", UnaryOp::Sigmoid, x)?;
                self.bin("silu", BinaryOp::Mul, x, s)
            }
            Activation::Gelu => {
                // x * 0.5 * (1 + erf(x * (1 / √2))), torch's order
                let c = self.scalar("gelu_inv_sqrt2", dtype, std::f64::consts::FRAC_1_SQRT_2)?;
                let t = self.bin("gelu_scaled", BinaryOp::Mul, x, c)?;
                let e = self.un("gelu_erf", UnaryOp::Erf, t)?;
                let one = self.scalar("gelu_one", dtype, 1.0)?;
                let e1 = self.bin("gelu_plus_one", BinaryOp::Add, e, one)?;
                let half = self.scalar("gelu_half", dtype, 0.5)?;
                let hx = self.bin("gelu_half_x", BinaryOp::Mul, x, half)?;
                self.bin("gelu", BinaryOp::Mul, hx, e1)
            }
            Activation::GeluTanh => self.gelu_tanh(x),
            Activation::Relu => {
                let zero = self.scalar("relu_zero", dtype, 0.0)?;
                self.bin("relu", BinaryOp::Max, x, zero)
            }
            Activation::QuickGelu => {
                let c = self.scalar("quick_gelu_alpha", dtype, 1.702)?;
                let t = self.bin("quick_gelu_scaled", BinaryOp::Mul, x, c)?;
                let s = self.un("quick_gelu_sigmoid", UnaryOp::Sigmoid, t)?;
                self.bin("quick_gelu", BinaryOp::Mul, x, s)
            }
        }
    }

    fn gelu_tanh(&mut self, x: ValueId) -> Result<ValueId> {
        let dtype = self.dtype(x);
        let x2 = self.bin("gelu_x2", BinaryOp::Mul, x, x)?;
        let x3 = self.bin("gelu_x3", BinaryOp::Mul, x2, x)?;
        let c1 = self.scalar("gelu_c1", dtype, 0.044715)?;
        let t = self.bin("gelu_cubic", BinaryOp::Mul, x3, c1)?;
        let inner = self.bin("gelu_inner", BinaryOp::Add, x, t)?;
        let c2 = self.scalar("gelu_c2", dtype, (2.0f64 / std::f64::consts::PI).sqrt())?;
        let inner = self.bin("gelu_scaled", BinaryOp::Mul, inner, c2)?;
        let th = self.un("gelu_tanh", UnaryOp::Tanh, inner)?;
        let one = self.scalar("gelu_one", dtype, 1.0)?;
        let th1 = self.bin("gelu_plus_one", BinaryOp::Add, th, one)?;
        let half = self.scalar("gelu_half", dtype, 0.5)?;
        let hx = self.bin("gelu_half_x", BinaryOp::Mul, x, half)?;
        self.bin("gelu", BinaryOp::Mul, hx, th1)
    }
}

/// A `Moe`'s stacked experts: `[gate, up, down]` weights, their biases where given, and how
/// gate and up combine.
struct Experts {
    weights: [ValueId; 3],
    biases: Option<[ValueId; 3]>,
    glu: Glu,
    /// The routing weights scale each expert's input (`Op::Moe`'s `weigh_input`).
    weigh_input: bool,
}
