//! The lowering table: one function per core op, emitting ONNX nodes.
//!
//! Every value gets an ONNX name (graph inputs and outputs keep their port names, weights
//! their checkpoint names, the rest `v<id>`). Symbolic dims are computed at run time from the
//! input shapes: each symbol is read once with `Shape(start, end)` from the first input axis
//! that carries it, and a dim polynomial becomes `Mul`/`Add` over those, cached per dim, so
//! `Reshape`, `Expand`, `Slice` and `Range` work at any batch and sequence length.
//!
//! High-level ops must be decomposed before lowering unless [`native`] says the opset has
//! them; the exporter runs that decomposition.

use crate::proto::{
    attribute_proto::AttributeType, tensor_proto::DataType, tensor_shape_proto, type_proto, AttributeProto, GraphProto,
    NodeProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use crate::{OnnxError, Result};
use hfexport_core::config::OnnxQuantOps;
use hfexport_core::decompose::{scan_step, LoopInput, LoopOutput};
use hfexport_core::graph::{Node, Producer};
use hfexport_core::ops::{Activation, Glu, ReduceKind, Routing};
use hfexport_core::shape_program::{DimError, DimLowering, ShapeEmitter};
use hfexport_core::{DType, Dim, Graph, Op, Tensor, ValueId, WeightExpr, Window};
use std::collections::HashMap;

/// The first opset with `RMSNormalization`, `RotaryEmbedding` and `Attention`.
pub const OPSET_NATIVE_LLM_OPS: u32 = 23;

/// The first opset with `LayerNormalization`.
pub const OPSET_LAYER_NORM: u32 = 17;

/// The first opset with `Gelu` (exact and tanh-approximated).
pub const OPSET_GELU: u32 = 20;

/// Whether `op` has a native ONNX lowering at `opset` (else core decomposes it first). Every
/// variant is listed, so a new op does not compile until it is decided here.
///
/// `Attention` is native from opset 23 with the mask it is given; ONNX Runtime's NaN on fully
/// masked rows of a bool mask is worked around by a core patch
/// (`passes::ORT_ATTENTION_ADDITIVE_MASK`) that hands it an additive float mask. With a softcap
/// it stays decomposed: ONNX applies the softcap after the mask, which would unmask.
pub fn native(op: &Op, opset: u32) -> bool {
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
        // `Gemm(transB=1)` reads the `[out, in]` weight as stored: no Transpose for the runtime
        // to fold at load time
        Op::Linear => true,
        // `ScatterElements` copies its input to its output and then writes the new rows; ONNX
        // Runtime skips the copy when both are one buffer, which is what makes io-binding a
        // cache input and its output to the same memory an in-place update
        Op::CacheUpdate | Op::ScatterSlots => true,
        Op::RmsNorm { .. } | Op::ApplyRotary => opset >= OPSET_NATIVE_LLM_OPS,
        // with `stash_type = 1`: mean and variance in f32, as torch computes them
        Op::LayerNorm { .. } => opset >= OPSET_LAYER_NORM,
        Op::Activate(act) => activation_op(*act, opset).is_some(),
        // a sliding window is folded into the mask first (`Pass::FoldSlidingWindows`)
        // ONNX `Attention` has no sink logits
        Op::Attention { softcap, sliding_window, sinks, .. } => {
            opset >= OPSET_NATIVE_LLM_OPS && softcap.is_none() && sliding_window.is_none() && !sinks
        }
        // no ONNX op computes rotary tables; the gated MLP is `Linear`s and elementwise ops
        Op::RotaryCosSin { .. } | Op::GatedMlp { .. } => false,
        Op::TopK { .. } => true,
        // no standard ONNX op; with `ort_fusions: "cpu"` a SwiGLU one is ONNX Runtime's
        // `com.microsoft.MoE` ([`ort_cpu_contrib`]), else core's decomposition runs
        Op::Moe { .. } => false,
        // ONNX Runtime's `com.microsoft.MatMulNBits` / `GatherBlockQuantized`: blocks of a power
        // of two from 16 (a per-channel head over a hidden size that is not one is decomposed:
        // standard `Cast`/`Mul` ops feeding `Gemm` / `Gather`)
        Op::QuantLinear { group, .. } | Op::QuantGather { group, .. } => ort_block(*group),
        // one `Scan` over the sequence, whose body is core's recurrent step (`Ctx::scan`,
        // `decompose::scan_step`)
        Op::SelectiveScan | Op::DeltaScan => true,
        Op::Conv { .. } | Op::MaxPool { .. } => true,
    }
}

/// The attributes ONNX `Conv` and `MaxPool` share: kernel, strides and the pads, every axis's
/// beginning first, then every axis's end.
fn window_attrs(w: &Window) -> Vec<AttributeProto> {
    let ints = |v: &[usize]| v.iter().map(|&i| i as i64).collect::<Vec<_>>();
    let pads: Vec<i64> = ints(&w.pads_begin).into_iter().chain(ints(&w.pads_end)).collect();
    vec![attr_ints("kernel_shape", &ints(&w.kernel)), attr_ints("strides", &ints(&w.stride)), attr_ints("pads", &pads)]
}

/// The attributes of a `Scan` whose f32 body graph `name` is `nodes` with ports `(inputs,
/// outputs)`: the states first, then one scan input per entry of `input_axes` (the axis each is
/// sliced along); the scan outputs stacked along `output_axes`.
fn scan_attrs(
    name: String,
    nodes: Vec<NodeProto>,
    (inputs, outputs): (&[String], &[String]),
    (input_axes, output_axes): (&[i64], &[i64]),
) -> Vec<AttributeProto> {
    let graph = GraphProto {
        name: Some(name),
        node: nodes,
        input: inputs.iter().map(|p| f32_port(p)).collect(),
        output: outputs.iter().map(|p| f32_port(p)).collect(),
        ..Default::default()
    };
    vec![
        AttributeProto {
            name: Some("body".into()),
            g: Some(graph),
            r#type: Some(AttributeType::Graph as i32),
            ..Default::default()
        },
        attr_int("num_scan_inputs", input_axes.len() as i64),
        attr_ints("scan_input_axes", input_axes),
        attr_ints("scan_output_axes", output_axes),
    ]
}

/// A loop body's port `name`: an f32 tensor of any shape.
fn f32_port(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(onnx_dtype(DType::F32) as i32),
                shape: None,
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `(bits, group, zero_point)` of a `QuantLinear` / `QuantGather`.
type Quant = (u8, usize, bool);

/// Whether ONNX Runtime's block-quantized kernels take blocks of `group` elements.
fn ort_block(group: usize) -> bool {
    group.is_power_of_two() && group >= 16
}

/// The ops lowered to ONNX Runtime CPU contrib ops under `ort_fusions: "cpu"` (files other
/// ONNX runtimes, OpenVINO's reader among them, cannot read): a SwiGLU `Moe` as
/// `com.microsoft.MoE`, which runs only the selected experts (float32 only on CPU).
pub fn ort_cpu_contrib(op: &Op) -> bool {
    matches!(
        op,
        Op::Moe {
            glu: Glu::Gated(Activation::Silu),
            biased: false,
            routing: Routing::Softmax { .. },
            weigh_input: false,
            own_router: false,
            ..
        }
    )
}

/// The domain of ONNX Runtime's contrib ops.
pub const MS_DOMAIN: &str = "com.microsoft";

/// The ONNX op computing `act` at `opset`, with its attributes; `None`: core decomposes it.
fn activation_op(act: Activation, opset: u32) -> Option<(&'static str, Vec<AttributeProto>)> {
    match act {
        Activation::Relu => Some(("Relu", vec![])),
        Activation::Gelu if opset >= OPSET_GELU => Some(("Gelu", vec![attr_string("approximate", "none")])),
        Activation::GeluTanh if opset >= OPSET_GELU => Some(("Gelu", vec![attr_string("approximate", "tanh")])),
        // `Gelu` came in opset 20; no ONNX op computes silu or quick_gelu (`HardSwish` is another
        // function)
        Activation::Gelu | Activation::GeluTanh | Activation::Silu | Activation::QuickGelu => None,
    }
}

pub fn onnx_dtype(d: DType) -> DataType {
    match d {
        DType::F32 => DataType::Float,
        DType::F16 => DataType::Float16,
        DType::BF16 => DataType::Bfloat16,
        DType::I64 => DataType::Int64,
        DType::I32 => DataType::Int32,
        DType::Bool => DataType::Bool,
        DType::U8 => DataType::Uint8,
        DType::I8 => DataType::Int8,
    }
}

/// Nodes and I/O declarations of a lowered graph (initializers are added by the writer).
pub struct Lowered {
    pub nodes: Vec<NodeProto>,
    pub inputs: Vec<ValueInfoProto>,
    pub outputs: Vec<ValueInfoProto>,
    /// ONNX name of each weight, in graph order.
    pub weight_names: Vec<String>,
    /// Initializers the lowering computes from graph weights (a contrib op's own layout).
    pub derived: Vec<Derived>,
}

/// An initializer computed from graph weights by a lazy expression, written like a weight.
pub struct Derived {
    pub name: String,
    pub expr: WeightExpr,
    pub dtype: DType,
    pub dims: Vec<i64>,
    /// 4-bit values packed two per byte: written as `INT4` (`dtype` i8) or `UINT4` (u8).
    pub nibbles: bool,
}

pub fn lower(g: &Graph, opset: u32, quant_ops: OnnxQuantOps) -> Result<Lowered> {
    Ok(lower_nested(g, opset, quant_ops, "", 0)?.0)
}

/// [`lower`] with every computed value named under `prefix` (graph inputs, weights and
/// outputs keep their own names) and helper names counted from `fresh` (a loop body's names
/// must not shadow the outer graph's); also the next fresh number.
fn lower_nested(
    g: &Graph,
    opset: u32,
    quant_ops: OnnxQuantOps,
    prefix: &str,
    fresh: usize,
) -> Result<(Lowered, usize)> {
    let mut cx = Ctx::new(g, opset, quant_ops, prefix)?;
    cx.em.fresh = fresh;
    for n in g.nodes() {
        cx.lower_node(n).map_err(|e| match e {
            OnnxError::Lowering { .. } => e,
            other => OnnxError::Lowering { node: n.name.clone(), op: n.op.name().into(), msg: other.to_string() },
        })?;
    }
    let fresh = cx.em.fresh;
    Ok((cx.finish()?, fresh))
}

struct Ctx<'g> {
    g: &'g Graph,
    opset: u32,
    quant_ops: OnnxQuantOps,
    names: Vec<String>,
    em: Emit,
    dims: DimLowering<String>,
    derived: Vec<Derived>,
}

/// The node list being built, and fresh helper names.
#[derive(Default)]
struct Emit {
    nodes: Vec<NodeProto>,
    fresh: usize,
    /// How often each node name was pushed: ONNX wants node names unique, and a block applied
    /// more than once (ALBERT's shared layers) repeats its names.
    names: HashMap<String, usize>,
}

impl Emit {
    fn tmp(&mut self, hint: &str) -> String {
        self.fresh += 1;
        format!("hfx.{hint}.{}", self.fresh)
    }

    fn push(
        &mut self,
        op_type: &str,
        name: &str,
        inputs: Vec<String>,
        outputs: Vec<String>,
        attrs: Vec<AttributeProto>,
    ) {
        self.push_in(None, op_type, name, (inputs, outputs), attrs);
    }

    /// A node of the operator set `domain` (`None`: the default one), under a name no other
    /// node of this list has.
    fn push_in(
        &mut self,
        domain: Option<&str>,
        op_type: &str,
        name: &str,
        (inputs, outputs): (Vec<String>, Vec<String>),
        attrs: Vec<AttributeProto>,
    ) {
        let seen = self.names.entry(name.to_string()).or_default();
        *seen += 1;
        let name = match *seen {
            1 => name.to_string(),
            n => format!("{name}#{n}"),
        };
        self.nodes.push(NodeProto {
            name: Some(name),
            op_type: Some(op_type.into()),
            domain: domain.map(Into::into),
            input: inputs,
            output: outputs,
            attribute: attrs,
            ..Default::default()
        });
    }

    /// Emits a helper node with a fresh output name.
    fn helper(&mut self, op_type: &str, inputs: Vec<String>, attrs: Vec<AttributeProto>) -> String {
        let out = self.tmp(op_type);
        self.push(op_type, &out.clone(), inputs, vec![out.clone()], attrs);
        out
    }

    fn constant(&mut self, t: &Tensor) -> String {
        let out = self.tmp("const");
        self.push(
            "Constant",
            &out.clone(),
            vec![],
            vec![out.clone()],
            vec![attr_tensor("value", tensor_proto(&out, t))],
        );
        out
    }
}

impl ShapeEmitter for Emit {
    type Value = String;
    type Error = OnnxError;

    fn input_axis(&mut self, input: &str, axis: usize) -> Result<String> {
        Ok(self.helper(
            "Shape",
            vec![input.to_string()],
            vec![attr_int("start", axis as i64), attr_int("end", axis as i64 + 1)],
        ))
    }

    fn const_i64(&mut self, values: &[i64]) -> Result<String> {
        Ok(self.constant(&Tensor::i64(vec![values.len()], values.to_vec())?))
    }

    fn mul(&mut self, a: String, b: String) -> Result<String> {
        Ok(self.helper("Mul", vec![a, b], vec![]))
    }

    fn add(&mut self, a: String, b: String) -> Result<String> {
        Ok(self.helper("Add", vec![a, b], vec![]))
    }

    /// ONNX's integer `Div` truncates; the floors core builds never divide a negative value.
    fn floor_div(&mut self, a: String, b: String) -> Result<String> {
        Ok(self.helper("Div", vec![a, b], vec![]))
    }

    fn concat(&mut self, parts: Vec<String>) -> Result<String> {
        Ok(self.helper("Concat", parts, vec![attr_int("axis", 0)]))
    }
}

fn dim_error(e: DimError<OnnxError>) -> OnnxError {
    match e {
        DimError::Unbound(msg) => OnnxError::Lowering { node: "(shape)".into(), op: "Dim".into(), msg },
        DimError::Emit(e) => e,
    }
}

fn attr_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        r#type: Some(AttributeType::Int as i32),
        ..Default::default()
    }
}

fn attr_float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        f: Some(v),
        r#type: Some(AttributeType::Float as i32),
        ..Default::default()
    }
}

fn attr_string(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        s: Some(v.as_bytes().to_vec()),
        r#type: Some(AttributeType::String as i32),
        ..Default::default()
    }
}

fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        r#type: Some(AttributeType::Ints as i32),
        ..Default::default()
    }
}

fn attr_tensor(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        t: Some(t),
        r#type: Some(AttributeType::Tensor as i32),
        ..Default::default()
    }
}

/// An inline tensor (small constants only; weights go to external data).
pub fn tensor_proto(name: &str, t: &Tensor) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: t.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(onnx_dtype(t.dtype()) as i32),
        raw_data: Some(t.to_le_bytes()),
        ..Default::default()
    }
}

fn value_info(name: &str, dtype: DType, shape: &[Dim]) -> ValueInfoProto {
    let dims = shape
        .iter()
        .map(|d| tensor_shape_proto::Dimension {
            value: Some(match d.as_const() {
                Some(v) => tensor_shape_proto::dimension::Value::DimValue(v),
                None => tensor_shape_proto::dimension::Value::DimParam(d.to_string()),
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(onnx_dtype(dtype) as i32),
                shape: Some(TensorShapeProto { dim: dims }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl<'g> Ctx<'g> {
    fn new(g: &'g Graph, opset: u32, quant_ops: OnnxQuantOps, prefix: &str) -> Result<Ctx<'g>> {
        let mut names: Vec<String> = (0..g.num_values()).map(|i| format!("{prefix}v{i}")).collect();
        for p in g.inputs() {
            names[p.value.0] = p.name.clone();
        }
        for w in g.weights() {
            names[w.value.0] = w.name.clone();
        }
        // a value computed by a node and exported once takes the output's name
        for p in g.outputs() {
            let produced_by_node = matches!(g.producer(p.value), Producer::Node { .. });
            let unique = g.outputs().iter().filter(|q| q.value == p.value).count() == 1;
            if produced_by_node && unique {
                names[p.value.0] = p.name.clone();
            }
        }
        Ok(Ctx { g, opset, quant_ops, names, em: Emit::default(), dims: DimLowering::new(g), derived: vec![] })
    }

    fn name(&self, v: ValueId) -> String {
        self.names[v.0].clone()
    }

    fn const_i64(&mut self, v: &[i64]) -> String {
        let t = Tensor::i64(vec![v.len()], v.to_vec()).expect("length matches");
        self.em.constant(&t)
    }

    /// A 1-element int64 tensor holding the run-time value of `d`.
    fn dim(&mut self, d: &Dim) -> Result<String> {
        self.dims.dim(&mut self.em, d).map_err(dim_error)
    }

    /// A 1-D int64 tensor holding a whole shape.
    fn shape(&mut self, dims: &[Dim]) -> Result<String> {
        self.dims.shape(&mut self.em, dims).map_err(dim_error)
    }

    fn lower_node(&mut self, n: &Node) -> Result<()> {
        let ins: Vec<String> = n.inputs.iter().map(|v| self.name(*v)).collect();
        let outs: Vec<String> = n.outputs.iter().map(|v| self.name(*v)).collect();
        let simple = |op_type: &str| (op_type.to_string(), ins.clone(), vec![]);
        let (op_type, inputs, attrs): (String, Vec<String>, Vec<AttributeProto>) = match &n.op {
            Op::Constant(t) => ("Constant".into(), vec![], vec![attr_tensor("value", tensor_proto(&outs[0], t))]),
            // core names its elementwise ops as ONNX does, except for two comparisons
            Op::Unary(_) | Op::Binary(_) => simple(match n.op.name() {
                "LessEqual" => "LessOrEqual",
                "GreaterEqual" => "GreaterOrEqual",
                same => same,
            }),
            Op::Where => simple("Where"),
            Op::Cast(d) => ("Cast".into(), ins.clone(), vec![attr_int("to", onnx_dtype(*d) as i64)]),
            Op::MatMul => simple("MatMul"),
            Op::Reduce { kind, axes, keep_dims } => {
                let op = match kind {
                    ReduceKind::Sum => "ReduceSum",
                    ReduceKind::Mean => "ReduceMean",
                    ReduceKind::Max => "ReduceMax",
                };
                let axes: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
                let keep = attr_int("keepdims", *keep_dims as i64);
                // axes became an input in opset 13 for ReduceSum and in 18 for the others
                if *kind == ReduceKind::Sum || self.opset >= 18 {
                    let a = self.const_i64(&axes);
                    (op.into(), vec![ins[0].clone(), a], vec![keep])
                } else {
                    (op.into(), ins.clone(), vec![attr_ints("axes", &axes), keep])
                }
            }
            Op::Softmax { axis } => ("Softmax".into(), ins.clone(), vec![attr_int("axis", *axis as i64)]),
            Op::CumSum { axis } => {
                // the axis is a 0-D input
                let a = self.em.constant(&Tensor::i64(vec![], vec![*axis as i64])?);
                ("CumSum".into(), vec![ins[0].clone(), a], vec![])
            }
            Op::Reshape { shape } => {
                let s = self.shape(shape)?;
                ("Reshape".into(), vec![ins[0].clone(), s], self.reshape_attrs(shape))
            }
            Op::Transpose { perm } => {
                let perm: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
                ("Transpose".into(), ins.clone(), vec![attr_ints("perm", &perm)])
            }
            Op::Expand { shape } => {
                let s = self.shape(shape)?;
                ("Expand".into(), vec![ins[0].clone(), s], vec![])
            }
            Op::Concat { axis } => ("Concat".into(), ins.clone(), vec![attr_int("axis", *axis as i64)]),
            Op::Slice { axis, start, end } => {
                let (s, e) = (self.dim(start)?, self.dim(end)?);
                let a = self.const_i64(&[*axis as i64]);
                ("Slice".into(), vec![ins[0].clone(), s, e, a], vec![])
            }
            Op::Gather { axis } => ("Gather".into(), ins.clone(), vec![attr_int("axis", *axis as i64)]),
            // sorted, largest first; ONNX orders equal values by index, as torch.topk does
            Op::TopK { k } => {
                let k = self.const_i64(&[*k as i64]);
                let attrs = vec![attr_int("axis", -1), attr_int("largest", 1), attr_int("sorted", 1)];
                ("TopK".into(), vec![ins[0].clone(), k], attrs)
            }
            Op::Iota { len } => {
                let l = self.dim(len)?;
                let axes = self.const_i64(&[0]);
                let limit = self.em.helper("Squeeze", vec![l, axes], vec![]);
                let zero = self.em.constant(&Tensor::i64(vec![], vec![0]).expect("scalar"));
                let one = self.em.constant(&Tensor::i64(vec![], vec![1]).expect("scalar"));
                ("Range".into(), vec![zero, limit, one], vec![])
            }
            Op::Linear => return self.linear(n, &ins, &outs),
            Op::Conv { window, groups } => {
                let mut attrs = window_attrs(window);
                let dilations: Vec<i64> = window.dilation.iter().map(|&d| d as i64).collect();
                attrs.extend([attr_ints("dilations", &dilations), attr_int("group", *groups as i64)]);
                ("Conv".into(), ins.clone(), attrs)
            }
            Op::MaxPool { window } => ("MaxPool".into(), ins.clone(), window_attrs(window)),
            Op::SelectiveScan | Op::DeltaScan => return self.scan(n, &ins, &outs),
            Op::QuantLinear { bits, group, zero_point } if self.quant_ops == OnnxQuantOps::Standard => {
                return self.dq_matmul(n, &ins, &outs, (*bits, *group, *zero_point))
            }
            Op::QuantGather { bits, group, zero_point } if self.quant_ops == OnnxQuantOps::Standard => {
                return self.dq_gather(n, &ins, &outs, (*bits, *group, *zero_point))
            }
            Op::QuantLinear { bits, group, zero_point } => {
                return self.matmul_nbits(n, &ins, &outs, (*bits, *group, *zero_point))
            }
            Op::QuantGather { bits, group, zero_point } => {
                return self.gather_block_quantized(n, &ins, &outs, (*bits, *group, *zero_point))
            }
            Op::Moe { top_k, routing: Routing::Softmax { normalize }, .. } => {
                return self.ort_moe(n, &ins, &outs, *top_k, *normalize)
            }
            Op::CacheUpdate | Op::ScatterSlots => {
                let ns = self.g.info(n.inputs[1]).shape.clone();
                let one = Dim::konst(1);
                let col = self.shape(&[one.clone(), one.clone(), ns[2].clone(), one])?;
                let idx = self.em.helper("Reshape", vec![ins[2].clone(), col], vec![]);
                let full = self.shape(&ns)?;
                let idx = self.em.helper("Expand", vec![idx, full], vec![]);
                ("ScatterElements".into(), vec![ins[0].clone(), idx, ins[1].clone()], vec![attr_int("axis", 2)])
            }
            Op::RmsNorm { eps } if native(&n.op, self.opset) => {
                let attrs = vec![attr_int("axis", -1), attr_float("epsilon", *eps), attr_int("stash_type", 1)];
                ("RMSNormalization".into(), ins.clone(), attrs)
            }
            Op::LayerNorm { eps } if native(&n.op, self.opset) => {
                let attrs = vec![attr_int("axis", -1), attr_float("epsilon", *eps), attr_int("stash_type", 1)];
                ("LayerNormalization".into(), ins.clone(), attrs)
            }
            Op::Activate(act) if native(&n.op, self.opset) => {
                let (op_type, attrs) = activation_op(*act, self.opset).expect("native");
                (op_type.into(), ins.clone(), attrs)
            }
            Op::ApplyRotary if native(&n.op, self.opset) => {
                let (cos, sin) =
                    (self.rotary_half(n.inputs[1], n.inputs[0])?, self.rotary_half(n.inputs[2], n.inputs[0])?);
                ("RotaryEmbedding".into(), vec![ins[0].clone(), cos, sin], vec![])
            }
            // the mask as given: bool (true = may attend) or additive, both ONNX `attn_mask`s
            Op::Attention { scale, .. } if native(&n.op, self.opset) => {
                let (q, k) = (self.g.info(n.inputs[0]), self.g.info(n.inputs[1]));
                let heads = |d: &Dim| d.as_const().unwrap_or(0);
                let attrs = vec![
                    attr_int("q_num_heads", heads(&q.shape[1])),
                    attr_int("kv_num_heads", heads(&k.shape[1])),
                    attr_float("scale", *scale),
                ];
                ("Attention".into(), ins[..4].to_vec(), attrs)
            }
            // not native at this opset (or with these attributes): core decomposes them first
            Op::RmsNorm { .. }
            | Op::LayerNorm { .. }
            | Op::Activate(_)
            | Op::ApplyRotary
            | Op::Attention { .. }
            | Op::RotaryCosSin { .. }
            | Op::GatedMlp { .. }
            | Op::Moe { .. } => {
                return Err(OnnxError::Lowering {
                    node: n.name.clone(),
                    op: n.op.name().into(),
                    msg: format!("has no native lowering at opset {}; it should have been decomposed", self.opset),
                })
            }
        };
        self.em.push(&op_type, &n.name, inputs, outs, attrs);
        Ok(())
    }

    /// [`Op::SelectiveScan`] and [`Op::DeltaScan`] as one `Scan` over the sequence (O(L) for
    /// any run-time length): the body is core's one-step graph ([`scan_step`]) lowered as any
    /// graph, its values named under the node's. The scan state holds the carried inputs and
    /// the invariant ones (carried unchanged, so the body reads no outer-scope value); a scan
    /// input's slice comes without its axis, so the body unsqueezes it back to the step's length
    /// 1, and squeezes each per-step output before `Scan` stacks it.
    fn scan(&mut self, n: &Node, ins: &[String], outs: &[String]) -> Result<()> {
        let step = scan_step(self.g, n)?;
        let (lowered, fresh) =
            lower_nested(&step.body, self.opset, self.quant_ops, &format!("{}.", n.name), self.em.fresh)?;
        let refuse = |msg: &str| OnnxError::Lowering { node: n.name.clone(), op: n.op.name().into(), msg: msg.into() };
        if !lowered.weight_names.is_empty() || !lowered.derived.is_empty() {
            return Err(refuse("the step graph reads a weight; a Scan body holds only inline constants"));
        }
        // a final value leaves a Scan only as a state: each `Last` output must be carried
        let carried = |j: usize| step.inputs.contains(&LoopInput::Carried { from: j });
        if step.outputs.iter().enumerate().any(|(j, o)| *o == LoopOutput::Last && !carried(j)) {
            return Err(refuse("a last-value output of the step is not carried into the next step"));
        }
        // the nodes before the step's (reading the body's inputs) and after (reading its outputs)
        let mut pre = Emit { fresh, ..Emit::default() };
        let (body_ins, body_outs) = (step.body.inputs(), step.body.outputs());
        let (mut states, mut state_outs, mut finals) = (vec![], vec![], vec![]);
        let (mut sliced, mut scanned, mut input_axes) = (vec![], vec![], vec![]);
        for (i, how) in step.inputs.iter().enumerate() {
            let port = body_ins[i].name.clone();
            match *how {
                LoopInput::Sliced { axis } => {
                    let slice = format!("{port}.slice");
                    let axes = pre.constant(&Tensor::i64(vec![1], vec![axis as i64]).expect("1-D"));
                    pre.push("Unsqueeze", &port, vec![slice.clone(), axes], vec![port.clone()], vec![]);
                    sliced.push(slice);
                    scanned.push(ins[i].clone());
                    input_axes.push(axis as i64);
                }
                LoopInput::Carried { from } => {
                    states.push((port, ins[i].clone()));
                    state_outs.push(body_outs[from].name.clone());
                    finals.push(outs[from].clone());
                }
                LoopInput::Invariant => {
                    let kept = format!("{port}.kept");
                    pre.push("Identity", &kept, vec![port.clone()], vec![kept.clone()], vec![]);
                    states.push((port, ins[i].clone()));
                    state_outs.push(kept);
                    finals.push(pre.tmp("scan_invariant"));
                }
            }
        }
        let mut post = Emit { fresh: pre.fresh, ..Emit::default() };
        let (mut stacked, mut stacked_outs, mut output_axes) = (vec![], vec![], vec![]);
        for (j, how) in step.outputs.iter().enumerate() {
            if let LoopOutput::Stacked { axis } = *how {
                let squeezed = format!("{}.squeezed", body_outs[j].name);
                let axes = post.constant(&Tensor::i64(vec![1], vec![axis as i64]).expect("1-D"));
                let port = body_outs[j].name.clone();
                post.push("Squeeze", &squeezed, vec![port, axes], vec![squeezed.clone()], vec![]);
                stacked.push(squeezed);
                stacked_outs.push(outs[j].clone());
                output_axes.push(axis as i64);
            }
        }
        self.em.fresh = post.fresh;
        let nodes = [pre.nodes, lowered.nodes, post.nodes].concat();
        let (state_ins, outer_states): (Vec<String>, Vec<String>) = states.into_iter().unzip();
        let ports = ([state_ins, sliced].concat(), [state_outs, stacked].concat());
        let axes = (&input_axes[..], &output_axes[..]);
        let attrs = scan_attrs(format!("{}.step", n.name), nodes, (&ports.0[..], &ports.1[..]), axes);
        let outputs = [finals, stacked_outs].concat();
        self.em.push("Scan", &n.name, [outer_states, scanned].concat(), outputs, attrs);
        Ok(())
    }

    /// A `Reshape` to `dims`: `allowzero` where a symbolic size may be 0 (an encoder-decoder's
    /// fresh encoder rows after the first call), which ONNX would otherwise read as "keep the
    /// input's size" (no shape here uses that).
    fn reshape_attrs(&self, dims: &[Dim]) -> Vec<AttributeProto> {
        let may_be_zero = |d: &Dim| d.as_const().is_none() && d.bounds(&self.g.symbols).0 <= 0;
        match dims.iter().any(may_be_zero) {
            true => vec![attr_int("allowzero", 1)],
            false => vec![],
        }
    }

    /// `x [..., in]` -> `Gemm(x2d, w, b, transB=1)` on `[rows, in]` -> back to `[..., out]`.
    fn linear(&mut self, n: &Node, ins: &[String], outs: &[String]) -> Result<()> {
        let (xs, ys) = (self.g.info(n.inputs[0]).shape.clone(), self.g.info(n.outputs[0]).shape.clone());
        let gemm = |cx: &mut Self, a: String, out: String| {
            let mut inputs = vec![a, ins[1].clone()];
            inputs.extend(ins.get(2).cloned());
            cx.em.push("Gemm", &n.name, inputs, vec![out], vec![attr_int("transB", 1)]);
        };
        if xs.len() == 2 {
            gemm(self, ins[0].clone(), outs[0].clone());
            return Ok(());
        }
        let rows = [hfexport_core::dim::product(&xs[..xs.len() - 1]), xs[xs.len() - 1].clone()];
        let flat = self.shape(&rows)?;
        let x2 = self.em.helper("Reshape", vec![ins[0].clone(), flat], self.reshape_attrs(&rows));
        let y2 = self.em.tmp("gemm");
        gemm(self, x2, y2.clone());
        let back = self.shape(&ys)?;
        let attrs = self.reshape_attrs(&ys);
        self.em.push("Reshape", &format!("{}/unflatten", n.name), vec![y2, back], outs.to_vec(), attrs);
        Ok(())
    }

    /// `com.microsoft.MatMulNBits`: `B` is the values shifted to unsigned (`q + 2^(bits-1)`,
    /// the op's default zero point, so a symmetric weight has no zero-point input) and, for 4
    /// bits, packed two per byte low nibble first, `[N, blocks, block * bits / 8]`; scales
    /// `[N, blocks]`; asymmetric zero points `u8 [N, ceil(blocks * bits / 8)]`. Accuracy level 4:
    /// the CPU kernel quantizes `A` to int8 per block and uses integer dot products.
    fn matmul_nbits(&mut self, n: &Node, ins: &[String], outs: &[String], (bits, group, zp): Quant) -> Result<()> {
        let w = self.g.info(n.inputs[1]).shape.clone();
        let (rows, cols) = (w[0].as_const().unwrap_or(0), w[1].as_const().unwrap_or(0));
        let block = matmul_nbits_block(group, cols as usize) as i64;
        let spread = (group as i64 / block) as usize;
        let blocks = cols / block;
        let b = self.quant_initializer(n, 1, ".B", bits == 4, 1, vec![rows, blocks, block * bits as i64 / 8])?;
        let scales = match spread {
            1 => ins[2].clone(),
            _ => self.quant_initializer(n, 2, ".scales", false, spread, vec![rows, blocks])?,
        };
        let mut inputs = vec![ins[0].clone(), b, scales];
        let params = 3 + usize::from(zp);
        if zp {
            inputs.push(self.quant_initializer(
                n,
                3,
                ".zero_points",
                bits == 4,
                spread,
                vec![rows, (blocks * bits as i64 + 7) / 8],
            )?);
        }
        if let Some(bias) = ins.get(params) {
            inputs.extend([String::new(), String::new()][usize::from(zp)..].iter().cloned());
            inputs.push(bias.clone());
        }
        let attrs = vec![
            attr_int("K", cols),
            attr_int("N", rows),
            attr_int("bits", bits as i64),
            attr_int("block_size", block),
            attr_int("accuracy_level", 4),
        ];
        self.ms_node("MatMulNBits", n, inputs, outs, attrs);
        Ok(())
    }

    /// `com.microsoft.GatherBlockQuantized` over the table's rows, with the layout of
    /// [`Ctx::matmul_nbits`]'s `B` as `[rows, cols * bits / 8]` (a tied head quantized alike reads
    /// the same bytes).
    fn gather_block_quantized(
        &mut self,
        n: &Node,
        ins: &[String],
        outs: &[String],
        (bits, group, zp): Quant,
    ) -> Result<()> {
        let w = self.g.info(n.inputs[0]).shape.clone();
        let (rows, cols) = (w[0].as_const().unwrap_or(0), w[1].as_const().unwrap_or(0));
        let data = self.quant_initializer(n, 0, ".data", bits == 4, 1, vec![rows, cols * bits as i64 / 8])?;
        let ids = ins[ins.len() - 1].clone();
        let mut inputs = vec![data, ids, ins[1].clone()];
        if zp {
            let blocks = cols / group as i64;
            let dims = vec![rows, (blocks * bits as i64 + 7) / 8];
            inputs.push(self.quant_initializer(n, 2, ".zero_points", bits == 4, 1, dims)?);
        }
        let attrs = vec![
            attr_int("gather_axis", 0),
            attr_int("quantize_axis", 1),
            attr_int("block_size", group as i64),
            attr_int("bits", bits as i64),
        ];
        self.ms_node("GatherBlockQuantized", n, inputs, outs, attrs);
        Ok(())
    }

    /// An initializer derived from the quantized weight part at input `slot`: its unsigned
    /// form (values) or itself (scales, zero points), each element repeated `spread` times along
    /// the rows (a group cut into `spread` blocks), packed two per byte when `pack` (4 bits).
    fn quant_initializer(
        &mut self,
        n: &Node,
        slot: usize,
        suffix: &str,
        pack: bool,
        spread: usize,
        dims: Vec<i64>,
    ) -> Result<String> {
        let expr = self.weight_expr(n, slot)?.as_unsigned();
        let dtype = self.g.info(n.inputs[slot]).dtype;
        let expr = match spread {
            1 => expr,
            times => WeightExpr::Repeat { expr: Box::new(expr), times },
        };
        let expr = match pack {
            true => WeightExpr::Pack { expr: Box::new(expr), high_first: false, per_row: true },
            false => expr,
        };
        let name = format!("{}{suffix}", n.name);
        let dtype = if dtype.is_float() { dtype } else { DType::U8 };
        self.derived.push(Derived { name: name.clone(), expr, dtype, dims, nibbles: false });
        Ok(name)
    }

    /// Standard ONNX (`quant_ops: "standard"`): `DequantizeLinear` (opset 21, `block_size` the
    /// group, axis 0) over the values transposed to `[K, N]` with scales (and zero points)
    /// `[K / group, N]`, feeding `MatMul` (+ bias): the pattern ONNX Runtime's
    /// `DQMatMulToMatMulNBits` fusion turns into `MatMulNBits` for 4-bit blocks of a power of
    /// two from 16. The transposed parts are computed one tensor at a time in memory.
    fn dq_matmul(&mut self, n: &Node, ins: &[String], outs: &[String], (bits, group, zp): Quant) -> Result<()> {
        let w = self.g.info(n.inputs[1]).shape.clone();
        let (rows, cols) = (w[0].as_const().unwrap_or(0), w[1].as_const().unwrap_or(0));
        let blocks = cols / group as i64;
        let mut dq_in = vec![
            self.dq_initializer(n, 1, ".qT", bits == 4, vec![cols, rows])?,
            self.dq_initializer(n, 2, ".scalesT", false, vec![blocks, rows])?,
        ];
        if zp {
            dq_in.push(self.dq_initializer(n, 3, ".zero_pointsT", bits == 4, vec![blocks, rows])?);
        }
        let attrs = vec![attr_int("axis", 0), attr_int("block_size", group as i64)];
        let weight = self.em.helper("DequantizeLinear", dq_in, attrs);
        let bias = ins.get(3 + usize::from(zp));
        let product = match bias {
            Some(_) => self.em.tmp("matmul"),
            None => outs[0].clone(),
        };
        self.em.push("MatMul", &n.name, vec![ins[0].clone(), weight], vec![product.clone()], vec![]);
        if let Some(b) = bias {
            self.em.push("Add", &format!("{}/bias", n.name), vec![product, b.clone()], outs.to_vec(), vec![]);
        }
        Ok(())
    }

    /// Standard ONNX: `DequantizeLinear` of the table (`block_size` the group along axis 1;
    /// 4-bit values packed flat) feeding `Gather` of the rows.
    fn dq_gather(&mut self, n: &Node, ins: &[String], outs: &[String], (bits, group, zp): Quant) -> Result<()> {
        let w = self.g.info(n.inputs[0]).shape.clone();
        let (rows, cols) = (w[0].as_const().unwrap_or(0), w[1].as_const().unwrap_or(0));
        let blocks = cols / group as i64;
        let values = match bits {
            4 => self.dq_packed(n, 0, ".q4", vec![rows, cols])?,
            _ => ins[0].clone(),
        };
        let mut dq_in = vec![values, ins[1].clone()];
        if zp {
            dq_in.push(match bits {
                4 => self.dq_packed(n, 2, ".zero_points4", vec![rows, blocks])?,
                _ => ins[2].clone(),
            });
        }
        let attrs = vec![attr_int("axis", 1), attr_int("block_size", group as i64)];
        let table = self.em.helper("DequantizeLinear", dq_in, attrs);
        let ids = ins[ins.len() - 1].clone();
        self.em.push("Gather", &n.name, vec![table, ids], outs.to_vec(), vec![attr_int("axis", 0)]);
        Ok(())
    }

    /// The quantized part at input `slot` transposed (`dims` = its transposed shape), packed
    /// flat two per byte when `nibbles`.
    fn dq_initializer(&mut self, n: &Node, slot: usize, suffix: &str, nibbles: bool, dims: Vec<i64>) -> Result<String> {
        let expr = WeightExpr::Transpose(Box::new(self.weight_expr(n, slot)?));
        self.push_derived(n, slot, suffix, expr, nibbles, dims)
    }

    /// The 4-bit part at input `slot` packed flat two per byte, low nibble first.
    fn dq_packed(&mut self, n: &Node, slot: usize, suffix: &str, dims: Vec<i64>) -> Result<String> {
        let expr = self.weight_expr(n, slot)?;
        self.push_derived(n, slot, suffix, expr, true, dims)
    }

    fn push_derived(
        &mut self,
        n: &Node,
        slot: usize,
        suffix: &str,
        expr: WeightExpr,
        nibbles: bool,
        dims: Vec<i64>,
    ) -> Result<String> {
        let expr = match nibbles {
            true => WeightExpr::Pack { expr: Box::new(expr), high_first: false, per_row: false },
            false => expr,
        };
        let name = format!("{}{suffix}", n.name);
        let dtype = self.g.info(n.inputs[slot]).dtype;
        self.derived.push(Derived { name: name.clone(), expr, dtype, dims, nibbles });
        Ok(name)
    }

    /// The expression of the constant weight at input `slot` of a quantized op.
    fn weight_expr(&self, n: &Node, slot: usize) -> Result<WeightExpr> {
        match self.g.producer(n.inputs[slot]) {
            Producer::Weight(w) => Ok(self.g.weights()[w].expr.clone()),
            _ => Err(OnnxError::Lowering {
                node: n.name.clone(),
                op: n.op.name().into(),
                msg: "quantized ops need constant weights".into(),
            }),
        }
    }

    fn ms_node(&mut self, op: &str, n: &Node, inputs: Vec<String>, outs: &[String], attribute: Vec<AttributeProto>) {
        self.em.push_in(Some(MS_DOMAIN), op, &n.name, (inputs, outs.to_vec()), attribute);
    }

    /// `com.microsoft.MoE` (ONNX Runtime's CPU kernel, float32): the router logits as a `Gemm`
    /// (the op applies the softmax, top-k and renormalisation itself), gate and up interleaved
    /// row by row into `fc1 [E, 2I, H]` as its `swiglu_fusion = 1` wants (an initializer of its
    /// own, streamed expert by expert; gate and up computed at run time are interleaved by
    /// nodes instead), `down` as `fc2`.
    fn ort_moe(&mut self, n: &Node, ins: &[String], outs: &[String], k: usize, normalize: bool) -> Result<()> {
        let x = self.g.info(n.inputs[0]).clone();
        if x.dtype != DType::F32 {
            return Err(OnnxError::Lowering {
                node: n.name.clone(),
                op: "Moe".into(),
                msg: format!("ONNX Runtime's CPU com.microsoft.MoE runs float32 only, not {}: export float32 or without ort_fusions", x.dtype),
            });
        }
        let ws = self.g.info(n.inputs[2]).shape.clone();
        let (h, e, i) = (x.shape[2].clone(), ws[0].clone(), ws[1].clone());
        let rows = hfexport_core::dim::product(&x.shape[..2]);
        let flat = self.shape(&[rows, h.clone()])?;
        let x2 = self.em.helper("Reshape", vec![ins[0].clone(), flat], vec![]);
        let logits = self.em.helper("Gemm", vec![x2.clone(), ins[1].clone()], vec![attr_int("transB", 1)]);
        let fc1 = self.interleaved_fc1(n, ins, [e, i.mul(&Dim::konst(2)), h])?;
        let y = self.em.tmp("moe");
        let attrs = vec![
            attr_int("k", k as i64),
            attr_string("activation_type", "swiglu"),
            attr_int("swiglu_fusion", 1),
            attr_float("activation_alpha", 1.0),
            attr_float("activation_beta", 0.0),
            attr_int("normalize_routing_weights", normalize as i64),
        ];
        let inputs = vec![x2, logits, fc1, String::new(), ins[4].clone()];
        self.em.push_in(Some(MS_DOMAIN), "MoE", &n.name, (inputs, vec![y.clone()]), attrs);
        let back = self.shape(&x.shape)?;
        self.em.push("Reshape", &format!("{}/unflatten", n.name), vec![y, back], outs.to_vec(), vec![]);
        Ok(())
    }

    /// Gate and up rows interleaved into `[E, 2I, H]`: an initializer computed from the two
    /// weights' expressions, or `Unsqueeze`/`Concat`/`Reshape` nodes when they are not weights.
    fn interleaved_fc1(&mut self, n: &Node, ins: &[String], dims: [Dim; 3]) -> Result<String> {
        let (g, u) = (self.g.producer(n.inputs[2]), self.g.producer(n.inputs[3]));
        if let (Producer::Weight(a), Producer::Weight(b)) = (g, u) {
            let parts = vec![self.g.weights()[a].expr.clone(), self.g.weights()[b].expr.clone()];
            let name = format!("{}.fc1", n.name);
            self.derived.push(Derived {
                name: name.clone(),
                expr: WeightExpr::interleave_rows(parts),
                dtype: self.g.info(n.inputs[2]).dtype,
                dims: dims.iter().map(|d| d.as_const().unwrap_or(0)).collect(),
                nibbles: false,
            });
            return Ok(name);
        }
        let axis = self.const_i64(&[2]);
        let g = self.em.helper("Unsqueeze", vec![ins[2].clone(), axis.clone()], vec![]);
        let u = self.em.helper("Unsqueeze", vec![ins[3].clone(), axis], vec![]);
        let gu = self.em.helper("Concat", vec![g, u], vec![attr_int("axis", 2)]);
        let fused = self.shape(&dims)?;
        Ok(self.em.helper("Reshape", vec![gu, fused], vec![]))
    }

    /// `RotaryEmbedding` takes cos/sin as `[batch, seq, d/2]`: core's tables repeat each half
    /// (`[b|1, seq, d]`), so take the first half and expand the batch to `x`'s.
    fn rotary_half(&mut self, table: ValueId, x: ValueId) -> Result<String> {
        let (ts, xs) = (self.g.info(table).shape.clone(), self.g.info(x).shape.clone());
        let half = ts[2].div_exact(2)?;
        let (zero, end, axis) = (self.dim(&Dim::konst(0))?, self.dim(&half)?, self.const_i64(&[2]));
        let name = self.name(table);
        let sliced = self.em.helper("Slice", vec![name, zero, end, axis], vec![]);
        let shape = self.shape(&[xs[0].clone(), ts[1].clone(), half])?;
        Ok(self.em.helper("Expand", vec![sliced, shape], vec![]))
    }

    fn finish(mut self) -> Result<Lowered> {
        let g = self.g;
        let inputs =
            g.inputs().iter().map(|p| value_info(&p.name, g.info(p.value).dtype, &g.info(p.value).shape)).collect();
        let mut outputs = vec![];
        for p in g.outputs() {
            let i = g.info(p.value);
            if self.names[p.value.0] != p.name {
                // exported under another name too, or an input/weight passed through
                let src = self.names[p.value.0].clone();
                self.em.push("Identity", &format!("output.{}", p.name), vec![src], vec![p.name.clone()], vec![]);
            }
            outputs.push(value_info(&p.name, i.dtype, &i.shape));
        }
        let weight_names = g.weights().iter().map(|w| self.names[w.value.0].clone()).collect();
        Ok(Lowered { nodes: self.em.nodes, inputs, outputs, weight_names, derived: self.derived })
    }
}

/// `MatMulNBits`' block length for a weight quantized in groups of `group` over `cols` inputs.
/// MLAS's fast kernels take blocks of 16..=256: a wider group (a per-channel head) is cut into
/// blocks of 128 sharing the row's scale (and zero point), the same weights.
fn matmul_nbits_block(group: usize, cols: usize) -> usize {
    if group > 256 && cols.is_multiple_of(128) {
        128
    } else {
        group
    }
}

/// The blocks over which ONNX Runtime rounds a `QuantLinear`'s input to int8 (`MatMulNBits` at
/// accuracy level 4), or `None` where the op is lowered to float `Gemm` ([`ort_block`]): the
/// runner's [`hfexport_core::ActivationRounding::Int8Blocks`].
pub(crate) fn rounded_block(group: usize, cols: usize) -> Option<usize> {
    ort_block(group).then(|| matmul_nbits_block(group, cols))
}
