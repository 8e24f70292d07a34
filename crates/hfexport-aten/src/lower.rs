//! The lowering table from core ops to ATen calls, one arm per op.
//!
//! Native: `Linear` (`aten.linear`), `LayerNorm` (`aten.layer_norm`, what torch.export emits
//! for `nn.LayerNorm`), `Activate` for the activations ATen has without a string argument
//! (`aten.gelu`, `aten.silu`, `aten.relu`), `Attention` without softcap
//! (`aten.scaled_dot_product_attention` with an additive mask, a sliding window already folded
//! into it by core, and `enable_gqa`) and `CacheUpdate` / `ScatterSlots` (`aten.index_copy` on
//! axis 2, whose result becomes a mutation of the cache input) and `Conv` (`aten.convolution`). A symmetric `QuantLinear` is
//! [`QUANT_LINEAR`], for the `.pte` writer's XNNPACK delegates only. The other high-level ops
//! are decomposed by core first.
//! Symbolic sizes are `aten.sym_size.int` reads combined with `_operator.mul`/`add`/`floordiv`, through
//! core's [`DimLowering`].

use crate::graph::{Arg, AtenGraph, Call, Output, SymIntArg, TensorMeta};
use hfexport_core::graph::{Node, Producer};
use hfexport_core::ops::{Activation, ReduceKind};
use hfexport_core::shape_program::{DimError, DimLowering, ShapeEmitter};
use hfexport_core::{BinaryOp, DType, Dim, Graph, Op, Tensor, UnaryOp, ValueId, Window};

#[derive(Debug, thiserror::Error)]
#[error("cannot lower node `{node}` ({op}) to ATen: {msg}")]
pub struct LowerError {
    pub node: String,
    pub op: String,
    pub msg: String,
}

type Result<T> = std::result::Result<T, LowerError>;

/// A symmetric `QuantLinear` (`input`, `weight` the integer values `[out, in]`, `scales`
/// `[out, in / group_size]`, `bias`, `bits`, `group_size`): no kernel library registers it;
/// only the `.pte` writer is given it, and makes it an XNNPACK delegate call (`.pt2`
/// decomposes `QuantLinear` first, see [`native`]).
pub const QUANT_LINEAR: &str = "hfexport.quant_linear";

/// Whether `op` is lowered natively (else core decomposes it first), for the `.pt2` writer
/// (the `.pte` writer decides in `hfexport_executorch::export::native`). Every variant is
/// listed, so a new op does not compile until it is decided here.
pub fn native(op: &Op) -> bool {
    match op {
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
        | Op::Iota { .. } => true,
        Op::Linear | Op::CacheUpdate | Op::ScatterSlots | Op::LayerNorm { .. } => true,
        Op::Activate(act) => activation_target(*act).is_some(),
        // a sliding window is folded into the mask first (`Pass::FoldSlidingWindows`)
        Op::Attention { softcap, sliding_window, sinks, .. } => softcap.is_none() && sliding_window.is_none() && !sinks,
        // torch.export's core ATen set has no RMS norm, rotary or gated MLP op
        Op::RmsNorm { .. } | Op::RotaryCosSin { .. } | Op::ApplyRotary | Op::GatedMlp { .. } => false,
        // `aten.topk` returns a pair, which the ATen graph's one-output calls do not model;
        // core's rank-counting decomposition is exact. No core ATen op is a MoE block.
        Op::TopK { .. } | Op::Moe { .. } => false,
        // int8 constants and a plain dequantize chain (`_to_copy`, `sub`, `mul`, `view`)
        // feeding `linear` / `index_select`: what `torch.export.load` runs without torchao
        Op::QuantLinear { .. } | Op::QuantGather { .. } => false,
        // unrolled over a static sequence by core (no `higher_order.scan` call is written yet)
        Op::SelectiveScan | Op::DeltaScan => false,
        // `aten.convolution` (after `aten.constant_pad_nd` where the padding is asymmetric)
        Op::Conv { .. } => true,
        // torch.export's max pooling (`max_pool2d_with_indices`) returns a pair, which the
        // ATen graph's one-output calls do not model: core's gathers and maximum are exact
        Op::MaxPool { .. } => false,
    }
}

/// The ATen operator computing `act` from `self` alone; `None`: core decomposes it.
fn activation_target(act: Activation) -> Option<&'static str> {
    match act {
        Activation::Gelu => Some("aten.gelu.default"),
        Activation::Silu => Some("aten.silu.default"),
        Activation::Relu => Some("aten.relu.default"),
        // tanh GELU is `aten.gelu` with the string argument `approximate`, which the ATen graph
        // does not carry; quick_gelu has no operator
        Activation::GeluTanh | Activation::QuickGelu => None,
    }
}

fn err(node: &str, op: &str, msg: impl Into<String>) -> LowerError {
    LowerError { node: node.into(), op: op.into(), msg: msg.into() }
}

/// A run-time integer: a constant, a SymInt value (with its expression), or a list of them.
#[derive(Debug, Clone)]
pub enum SymVal {
    Int(i64),
    Sym(String, Dim),
    List(Vec<SymVal>),
}

impl SymVal {
    fn arg(&self) -> SymIntArg {
        match self {
            SymVal::Int(i) => SymIntArg::Int(*i),
            SymVal::Sym(n, _) => SymIntArg::Sym(n.clone()),
            SymVal::List(_) => unreachable!("a list is not one SymInt"),
        }
    }

    fn dim(&self) -> Dim {
        match self {
            SymVal::Int(i) => Dim::konst(*i),
            SymVal::Sym(_, d) => d.clone(),
            SymVal::List(_) => unreachable!("a list is not one SymInt"),
        }
    }

    fn list(self) -> Vec<SymIntArg> {
        match self {
            SymVal::List(v) => v.iter().map(SymVal::arg).collect(),
            one => vec![one.arg()],
        }
    }
}

/// Calls being emitted, with fresh names.
struct Emit<'g> {
    g: &'g Graph,
    out: AtenGraph,
    names: Vec<String>,
    fresh: usize,
}

impl Emit<'_> {
    /// The Python name of node `node`, made unique: two core names can map to one identifier
    /// (`mlp.shared_expert/gate` and `mlp.shared_expert_gate`).
    fn node_name(&self, node: &str) -> String {
        let base = python_name(node);
        let taken = |n: &String| self.out.tensors.contains_key(n) || self.out.sym_ints.contains_key(n);
        let mut name = base.clone();
        let mut i = 0;
        while taken(&name) {
            i += 1;
            name = format!("{base}_{i}");
        }
        name
    }

    fn fresh(&mut self, hint: &str) -> String {
        self.fresh += 1;
        format!("{hint}_{}", self.fresh)
    }

    /// A call with one tensor output of `meta`; returns its value name.
    fn call(&mut self, target: &'static str, args: Vec<(&'static str, Arg)>, meta: TensorMeta) -> String {
        let name = self.fresh(target.rsplit('.').nth(1).unwrap_or("v"));
        self.call_named(target, args, meta, name)
    }

    fn call_named(
        &mut self,
        target: &'static str,
        args: Vec<(&'static str, Arg)>,
        meta: TensorMeta,
        name: String,
    ) -> String {
        self.out.tensors.insert(name.clone(), meta);
        self.out.calls.push(Call { target, args, outputs: vec![Output::Tensor(name.clone())] });
        name
    }

    fn sym_call(&mut self, target: &'static str, args: Vec<(&'static str, Arg)>, expr: Dim) -> SymVal {
        let name = self.fresh("sym");
        self.out.sym_ints.insert(name.clone(), expr.clone());
        self.out.calls.push(Call { target, args, outputs: vec![Output::SymInt(name.clone())] });
        SymVal::Sym(name, expr)
    }

    /// A lifted tensor constant.
    fn constant(&mut self, t: &Tensor) -> String {
        let value = self.fresh("c_lifted_tensor");
        let name = format!("lifted_tensor_{}", self.out.constants.len());
        self.out.tensors.insert(
            value.clone(),
            TensorMeta { dtype: t.dtype(), sizes: t.shape().iter().map(|&d| Dim::konst(d as i64)).collect() },
        );
        self.out.constants.push((name, value.clone(), t.clone()));
        value
    }
}

impl ShapeEmitter for Emit<'_> {
    type Value = SymVal;
    type Error = LowerError;

    fn input_axis(&mut self, input: &str, axis: usize) -> Result<SymVal> {
        let port = self.g.input(input).ok_or_else(|| err("(shape)", "Dim", format!("no graph input `{input}`")))?;
        let expr = self.g.info(port.value).shape[axis].clone();
        let value = self.names[port.value.0].clone();
        Ok(self.sym_call("aten.sym_size.int", vec![("self", Arg::Tensor(value)), ("dim", Arg::Int(axis as i64))], expr))
    }

    fn const_i64(&mut self, values: &[i64]) -> Result<SymVal> {
        Ok(match values {
            [one] => SymVal::Int(*one),
            many => SymVal::List(many.iter().map(|&v| SymVal::Int(v)).collect()),
        })
    }

    fn mul(&mut self, a: SymVal, b: SymVal) -> Result<SymVal> {
        Ok(match (&a, &b) {
            (SymVal::Int(x), SymVal::Int(y)) => SymVal::Int(x * y),
            _ => {
                let expr = a.dim().mul(&b.dim());
                self.sym_call("_operator.mul", vec![("a", Arg::SymInt(a.arg())), ("b", Arg::SymInt(b.arg()))], expr)
            }
        })
    }

    fn add(&mut self, a: SymVal, b: SymVal) -> Result<SymVal> {
        Ok(match (&a, &b) {
            (SymVal::Int(x), SymVal::Int(y)) => SymVal::Int(x + y),
            _ => {
                let expr = a.dim().add(&b.dim());
                self.sym_call("_operator.add", vec![("a", Arg::SymInt(a.arg())), ("b", Arg::SymInt(b.arg()))], expr)
            }
        })
    }

    fn floor_div(&mut self, a: SymVal, b: SymVal) -> Result<SymVal> {
        Ok(match (&a, &b) {
            (SymVal::Int(x), SymVal::Int(y)) => SymVal::Int(x.div_euclid(*y)),
            _ => {
                let by = b.dim().as_const().ok_or_else(|| err("(shape)", "Dim", "a floor by a symbolic divisor"))?;
                let expr = a.dim().floor_div(by);
                self.sym_call(
                    "_operator.floordiv",
                    vec![("a", Arg::SymInt(a.arg())), ("b", Arg::SymInt(b.arg()))],
                    expr,
                )
            }
        })
    }

    fn concat(&mut self, parts: Vec<SymVal>) -> Result<SymVal> {
        Ok(SymVal::List(parts))
    }
}

fn dim_error(e: DimError<LowerError>) -> LowerError {
    match e {
        DimError::Unbound(msg) => err("(shape)", "Dim", msg),
        DimError::Emit(e) => e,
    }
}

/// Lowers a graph whose high-level ops are [`native`] or decomposed.
pub fn lower(g: &Graph) -> Result<AtenGraph> {
    let mut names: Vec<String> = (0..g.num_values()).map(|i| format!("v{i}")).collect();
    let mut out = AtenGraph::default();
    for p in g.inputs() {
        let name = python_name(&p.name);
        names[p.value.0] = name.clone();
        out.user_inputs.push((p.name.clone(), name.clone()));
        out.tensors.insert(name, meta(g, p.value));
    }
    for (i, w) in g.weights().iter().enumerate() {
        let name = format!("p_{}", python_name(&w.name));
        names[w.value.0] = name.clone();
        out.parameters.push((w.name.clone(), name.clone(), i));
        out.tensors.insert(name, meta(g, w.value));
    }
    let mut em = Emit { g, out, names, fresh: 0 };
    let mut dims = DimLowering::new(g);
    for n in g.nodes() {
        lower_node(&mut em, &mut dims, n).map_err(|e| {
            if e.node == "(shape)" {
                err(&n.name, n.op.name(), e.msg)
            } else {
                e
            }
        })?;
    }
    for p in g.outputs() {
        let value = em.names[p.value.0].clone();
        match g.aliases().iter().find(|a| a.output == p.name) {
            Some(a) => em.out.mutations.push((a.input.clone(), value)),
            None => em.out.user_outputs.push((p.name.clone(), value)),
        }
    }
    Ok(em.out)
}

/// A value name torch accepts as a Python identifier (`past_key_values.0.key` →
/// `past_key_values_0_key`).
pub fn python_name(s: &str) -> String {
    let mut n: String = s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    if n.starts_with(|c: char| c.is_ascii_digit()) {
        n.insert(0, '_');
    }
    n
}

fn meta(g: &Graph, v: ValueId) -> TensorMeta {
    let i = g.info(v);
    TensorMeta { dtype: i.dtype, sizes: i.shape.clone() }
}

fn lower_node(em: &mut Emit, dims: &mut DimLowering<SymVal>, n: &Node) -> Result<()> {
    let g = em.g;
    let ins: Vec<String> = n.inputs.iter().map(|v| em.names[v.0].clone()).collect();
    let t = |i: usize| Arg::Tensor(ins[i].clone());
    let m = meta(g, n.outputs[0]);
    let name = em.node_name(&n.name);
    let (target, args): (&'static str, Vec<(&'static str, Arg)>) = match &n.op {
        Op::Constant(c) => {
            let v = em.constant(c);
            em.names[n.outputs[0].0] = v;
            return Ok(());
        }
        Op::Unary(u) => (
            match u {
                UnaryOp::Neg => "aten.neg.default",
                UnaryOp::Exp => "aten.exp.default",
                UnaryOp::Sqrt => "aten.sqrt.default",
                UnaryOp::Reciprocal => "aten.reciprocal.default",
                UnaryOp::Tanh => "aten.tanh.default",
                UnaryOp::Sigmoid => "aten.sigmoid.default",
                UnaryOp::Cos => "aten.cos.default",
                UnaryOp::Sin => "aten.sin.default",
                UnaryOp::Erf => "aten.erf.default",
                UnaryOp::Log => "aten.log.default",
                UnaryOp::Not => "aten.logical_not.default",
            },
            vec![("self", t(0))],
        ),
        Op::Binary(b) => {
            let int_div = *b == BinaryOp::Div && !g.info(n.inputs[0]).dtype.is_float();
            let target = match b {
                BinaryOp::Add => "aten.add.Tensor",
                BinaryOp::Sub => "aten.sub.Tensor",
                BinaryOp::Mul => "aten.mul.Tensor",
                // the IR's integer division floors (its divisors are positive)
                BinaryOp::Div if int_div => "aten.floor_divide.default",
                BinaryOp::Div => "aten.div.Tensor",
                BinaryOp::Pow => "aten.pow.Tensor_Tensor",
                BinaryOp::Max => "aten.maximum.default",
                BinaryOp::Min => "aten.minimum.default",
                BinaryOp::Equal => "aten.eq.Tensor",
                BinaryOp::Less => "aten.lt.Tensor",
                BinaryOp::LessEqual => "aten.le.Tensor",
                BinaryOp::Greater => "aten.gt.Tensor",
                BinaryOp::GreaterEqual => "aten.ge.Tensor",
                BinaryOp::And => "aten.logical_and.default",
                BinaryOp::Or => "aten.logical_or.default",
            };
            let second = if target == "aten.pow.Tensor_Tensor" { "exponent" } else { "other" };
            (target, vec![("self", t(0)), (second, t(1))])
        }
        Op::Where => ("aten.where.self", vec![("condition", t(0)), ("self", t(1)), ("other", t(2))]),
        Op::Cast(d) => ("aten._to_copy.default", vec![("self", t(0)), ("dtype", Arg::ScalarType(*d))]),
        Op::MatMul => ("aten.matmul.default", vec![("self", t(0)), ("other", t(1))]),
        Op::Reduce { kind, axes, keep_dims } => {
            let dims_arg = Arg::Ints(axes.iter().map(|&a| a as i64).collect());
            match kind {
                ReduceKind::Sum => (
                    "aten.sum.dim_IntList",
                    vec![("self", t(0)), ("dim", dims_arg), ("keepdim", Arg::Bool(*keep_dims))],
                ),
                ReduceKind::Mean => {
                    ("aten.mean.dim", vec![("self", t(0)), ("dim", dims_arg), ("keepdim", Arg::Bool(*keep_dims))])
                }
                ReduceKind::Max => {
                    ("aten.amax.default", vec![("self", t(0)), ("dim", dims_arg), ("keepdim", Arg::Bool(*keep_dims))])
                }
            }
        }
        Op::CumSum { axis } => ("aten.cumsum.default", vec![("self", t(0)), ("dim", Arg::Int(*axis as i64))]),
        Op::Softmax { axis } => (
            "aten._softmax.default",
            vec![("self", t(0)), ("dim", Arg::Int(*axis as i64)), ("half_to_float", Arg::Bool(false))],
        ),
        Op::Reshape { shape } => {
            let s = dims.shape(em, shape).map_err(dim_error)?;
            ("aten.reshape.default", vec![("self", t(0)), ("shape", Arg::SymInts(s.list()))])
        }
        Op::Transpose { perm } => (
            "aten.permute.default",
            vec![("self", t(0)), ("dims", Arg::Ints(perm.iter().map(|&p| p as i64).collect()))],
        ),
        Op::Expand { shape } => {
            let s = dims.shape(em, shape).map_err(dim_error)?;
            ("aten.expand.default", vec![("self", t(0)), ("size", Arg::SymInts(s.list()))])
        }
        Op::Concat { axis } => {
            ("aten.cat.default", vec![("tensors", Arg::Tensors(ins.clone())), ("dim", Arg::Int(*axis as i64))])
        }
        Op::Slice { axis, start, end } => {
            let (s, e) = (dims.dim(em, start).map_err(dim_error)?, dims.dim(em, end).map_err(dim_error)?);
            (
                "aten.slice.Tensor",
                vec![
                    ("self", t(0)),
                    ("dim", Arg::Int(*axis as i64)),
                    ("start", Arg::SymInt(s.arg())),
                    ("end", Arg::SymInt(e.arg())),
                    ("step", Arg::SymInt(SymIntArg::Int(1))),
                ],
            )
        }
        Op::Gather { axis } => {
            let mut idx: Vec<Option<String>> = vec![None; *axis];
            idx.push(Some(ins[1].clone()));
            ("aten.index.Tensor", vec![("self", t(0)), ("indices", Arg::OptTensors(idx))])
        }
        Op::Iota { len } => {
            let l = dims.dim(em, len).map_err(dim_error)?;
            (
                "aten.arange.start_step",
                vec![
                    ("start", Arg::Int(0)),
                    ("end", Arg::SymInt(l.arg())),
                    ("step", Arg::Int(1)),
                    ("dtype", Arg::ScalarType(DType::I64)),
                ],
            )
        }
        Op::Linear => {
            let mut a = vec![("input", t(0)), ("weight", t(1))];
            if ins.len() > 2 {
                a.push(("bias", t(2)));
            }
            ("aten.linear.default", a)
        }
        Op::LayerNorm { eps } => {
            let last = g.info(n.inputs[0]).shape.last().cloned().expect("rank >= 1");
            let normalized = dims.shape(em, &[last]).map_err(dim_error)?;
            let bias = if ins.len() > 2 { t(2) } else { Arg::None };
            (
                "aten.layer_norm.default",
                vec![
                    ("input", t(0)),
                    ("normalized_shape", Arg::SymInts(normalized.list())),
                    ("weight", t(1)),
                    ("bias", bias),
                    ("eps", Arg::Float(*eps as f64)),
                    ("cudnn_enable", Arg::Bool(false)),
                ],
            )
        }
        Op::Activate(act) => match activation_target(*act) {
            Some(target) => (target, vec![("self", t(0))]),
            None => {
                return Err(err(
                    &n.name,
                    n.op.name(),
                    format!("{act:?} has no ATen operator; it should have been decomposed"),
                ))
            }
        },
        Op::CacheUpdate | Op::ScatterSlots => {
            let slots = em.call(
                "aten.reshape.default",
                vec![("self", t(2)), ("shape", Arg::SymInts(vec![SymIntArg::Int(-1)]))],
                TensorMeta {
                    dtype: DType::I64,
                    sizes: vec![g.info(n.inputs[2]).shape.iter().fold(Dim::konst(1), |a, d| a.mul(d))],
                },
            );
            (
                "aten.index_copy.default",
                vec![("self", t(0)), ("dim", Arg::Int(2)), ("index", Arg::Tensor(slots)), ("source", t(1))],
            )
        }
        Op::Attention { scale, softcap: None, sliding_window: None, sinks: false } => {
            let mask = attention_mask(em, n);
            (
                "aten.scaled_dot_product_attention.default",
                vec![
                    ("query", t(0)),
                    ("key", t(1)),
                    ("value", t(2)),
                    ("attn_mask", Arg::Tensor(mask)),
                    ("dropout_p", Arg::Float(0.0)),
                    ("is_causal", Arg::Bool(false)),
                    ("scale", Arg::Float(*scale as f64)),
                    ("enable_gqa", Arg::Bool(true)),
                ],
            )
        }
        Op::QuantLinear { bits, group, zero_point: false } => {
            // a bias that is not a checkpoint weight is added after the call (a delegate's
            // operands are constants)
            let const_bias = n.inputs.get(3).is_some_and(|&b| matches!(g.producer(b), Producer::Weight(_)));
            let args = |bias| {
                vec![
                    ("input", t(0)),
                    ("weight", t(1)),
                    ("scales", t(2)),
                    ("bias", bias),
                    ("bits", Arg::Int(*bits as i64)),
                    ("group_size", Arg::Int(*group as i64)),
                ]
            };
            match (ins.len() > 3, const_bias) {
                (true, false) => {
                    let product = em.call(QUANT_LINEAR, args(Arg::None), m.clone());
                    ("aten.add.Tensor", vec![("self", Arg::Tensor(product)), ("other", t(3))])
                }
                (true, true) => (QUANT_LINEAR, args(t(3))),
                (false, _) => (QUANT_LINEAR, args(Arg::None)),
            }
        }
        Op::Conv { window, groups } => convolution(em, n, &ins, window, *groups),
        Op::Attention { .. }
        | Op::MaxPool { .. }
        | Op::RmsNorm { .. }
        | Op::RotaryCosSin { .. }
        | Op::ApplyRotary
        | Op::GatedMlp { .. }
        | Op::TopK { .. }
        | Op::Moe { .. }
        | Op::SelectiveScan
        | Op::DeltaScan
        | Op::QuantLinear { zero_point: true, .. }
        | Op::QuantGather { .. } => {
            return Err(err(&n.name, n.op.name(), "has no native ATen lowering; it should have been decomposed"))
        }
    };
    let v = em.call_named(target, args, m, name);
    em.names[n.outputs[0].0] = v;
    Ok(())
}

/// `aten.convolution` of [`Op::Conv`]; its padding is one per axis, so an asymmetric one
/// (TensorFlow's "SAME") pads the input first with `aten.constant_pad_nd`.
fn convolution(
    em: &mut Emit,
    n: &Node,
    ins: &[String],
    window: &Window,
    groups: usize,
) -> (&'static str, Vec<(&'static str, Arg)>) {
    let ints = |v: &[usize]| Arg::Ints(v.iter().map(|&i| i as i64).collect());
    let mut input = ins[0].clone();
    let mut padding = window.pads_begin.clone();
    if window.pads_begin != window.pads_end {
        let x = em.g.info(n.inputs[0]);
        let mut sizes = x.shape.clone();
        for (i, size) in sizes[2..].iter_mut().enumerate() {
            *size = size.add(&Dim::from(window.pads_begin[i] + window.pads_end[i]));
        }
        // the pairs run from the last axis backwards
        let pad = (0..window.rank()).rev().flat_map(|i| [window.pads_begin[i], window.pads_end[i]]).collect::<Vec<_>>();
        let args = vec![("self", Arg::Tensor(input)), ("pad", ints(&pad)), ("value", Arg::Float(0.0))];
        input = em.call("aten.constant_pad_nd.default", args, TensorMeta { dtype: x.dtype, sizes });
        padding = vec![0; window.rank()];
    }
    let bias = ins.get(2).map_or(Arg::None, |b| Arg::Tensor(b.clone()));
    (
        "aten.convolution.default",
        vec![
            ("input", Arg::Tensor(input)),
            ("weight", Arg::Tensor(ins[1].clone())),
            ("bias", bias),
            ("stride", ints(&window.stride)),
            ("padding", ints(&padding)),
            ("dilation", ints(&window.dilation)),
            ("transposed", Arg::Bool(false)),
            ("output_padding", ints(&vec![0; window.rank()])),
            ("groups", Arg::Int(groups as i64)),
        ],
    )
}

/// The additive mask: as given when it is one, else 0 where the bool mask lets a key be
/// attended and the dtype's lowest value elsewhere (never -inf, so a fully masked row stays
/// finite).
fn attention_mask(em: &mut Emit, n: &Node) -> String {
    let g = em.g;
    let dtype = g.info(n.inputs[0]).dtype;
    let mask = em.names[n.inputs[3].0].clone();
    if g.info(n.inputs[3]).dtype != DType::Bool {
        return mask;
    }
    let sizes = g.info(n.inputs[3]).shape.clone();
    let zero = em.constant(&Tensor::scalar_float(dtype, 0.0));
    let low = em.constant(&Tensor::scalar_float(dtype, dtype.min_finite()));
    em.call(
        "aten.where.self",
        vec![("condition", Arg::Tensor(mask)), ("self", Arg::Tensor(zero)), ("other", Arg::Tensor(low))],
        TensorMeta { dtype, sizes },
    )
}
