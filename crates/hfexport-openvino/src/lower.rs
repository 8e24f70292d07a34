//! The lowering table: core ops to OpenVINO opset layers, one arm per op.
//!
//! Native: `Linear` (`MatMul` with `transpose_b`, the `[out, in]` weight as stored),
//! `LayerNorm` (`MVN` with the eps inside the square root, then `Multiply`/`Add`: what
//! OpenVINO's own PyTorch frontend makes of `layer_norm`), `Activate` (`Gelu` exact or tanh,
//! `Relu`, `Swish` with beta 1 for silu and 1.702 for quick_gelu),
//! `Attention` without softcap (opset13 `ScaledDotProductAttention` with an explicit additive
//! mask and `causal=false`, a sliding window already folded into the mask by core; grouped KV heads repeated with `Unsqueeze → Broadcast → Reshape` on
//! constant shapes, the form the CPU plugin's stateful SDPA fusion recognises), `CacheUpdate`
//! and `ScatterSlots` (`ScatterUpdate` on axis 2). Everything else high-level is decomposed by core first; its
//! RMS-norm decomposition (`x * 1/sqrt(mean(x²) + eps) * w`) is the sequence OpenVINO's
//! `RMSFusion` matches, with `Reciprocal` written as `Divide(1, ·)`.
//!
//! Symbolic dims are computed at run time through core's [`DimLowering`]; graph inputs are
//! `Parameter`s whose shapes carry each symbol's range (`1..512`).
//!
//! Stateful (`stateful=true`, a generation component): every cache pair `past_key_values.<n>` /
//! `present.<n>` becomes a variable `<n>`: `ReadValue` (initialised empty: batch from
//! `input_ids`, length 0) → `Gather` by the new input `beam_idx` (i32 `[batch]`, the beam order
//! OpenVINO GenAI passes) on axis 0, and an `Assign` of the updated cache instead of a result.
//! The state grows by each call's tokens (`Concat`), also for a static cache, whose
//! `CacheUpdate` would otherwise copy every slot each step: its mask's first columns (as many as
//! keys) are used, so calls must come in position order, and the caller keeps within
//! `max_cache_len` (the generator does). This is the pattern the CPU plugin fuses into its
//! stateful attention kernel. A `ScatterSlots` (what the core patch
//! `openvino-static-query-cache-scatter` makes of a one-token decode's `CacheUpdate`s, which the
//! CPU plugin fails to compile grown) writes its state in place with `ScatterUpdate` instead.

use crate::ir::{element_type, Body, Layer, Network, Out, PortInfo, PortMapEntry};
use crate::{OvError, Result};
use hfexport_core::cache_ports;
use hfexport_core::decompose::{scan_step, LoopInput, LoopOutput};
use hfexport_core::graph::{Node, Producer};
use hfexport_core::ops::{Activation, Glu, ReduceKind, Routing};
use hfexport_core::shape_program::{DimError, DimLowering, ShapeEmitter};
use hfexport_core::{BinaryOp, DType, Dim, Graph, Op, QuantPart, Tensor, UnaryOp, ValueId, Window};
use std::collections::HashMap;

/// Whether `op` is lowered natively (else core decomposes it first). Every variant is listed,
/// so a new op does not compile until it is decided here.
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
        Op::Linear | Op::CacheUpdate | Op::ScatterSlots => true,
        // every activation is one opset layer
        Op::LayerNorm { .. } | Op::Activate(_) => true,
        // a sliding window is folded into the mask first (`Pass::FoldSlidingWindows`)
        Op::Attention { softcap, sliding_window, sinks, .. } => softcap.is_none() && sliding_window.is_none() && !sinks,
        // the RMS-norm decomposition is the pattern OpenVINO's `RMSFusion` matches, the rotary
        // one what `RoPEFusion` matches
        Op::RmsNorm { .. } | Op::RotaryCosSin { .. } | Op::ApplyRotary | Op::GatedMlp { .. } => false,
        Op::TopK { .. } => true,
        // a SwiGLU MoE over a run-time number of tokens becomes the "tiled" expert block the
        // 2026.4 CPU plugin turns into its `GatherMatmul` (only the selected experts run); the
        // pass leaves a static token count (a stateful decode step is [1, 1]) unfused, so a
        // decode step takes core's gathered experts, as do the other activations and biased
        // experts
        Op::Moe { glu, biased, few_tokens, routing, weigh_input, own_router, .. } => {
            *glu == Glu::Gated(Activation::Silu)
                && !biased
                && !few_tokens
                && !weigh_input
                && !own_router
                && matches!(routing, Routing::Softmax { .. })
        }
        // NNCF's decompression pattern over `[rows, groups, group]` constants (`quant_weights`),
        // which the CPU plugin runs as a compressed FullyConnected / Gather (core's chain over
        // `[rows, cols]` would be constant-folded into float weights at compile time)
        Op::QuantLinear { .. } | Op::QuantGather { .. } => true,
        // one `TensorIterator` over any sequence, its body core's one-step graph
        Op::SelectiveScan | Op::DeltaScan => true,
        // `Convolution` / `GroupConvolution` and `MaxPool` with explicit pads
        Op::Conv { .. } | Op::MaxPool { .. } => true,
    }
}

/// Where a `Const` layer's bytes come from (the writer streams them into the `.bin`).
#[derive(Debug, Clone)]
pub enum ConstSource {
    Inline(Vec<u8>),
    /// Graph weight number `index` (4-bit values one per byte) packed two per byte, the even
    /// element in the low nibble, over the whole tensor (`u4` / `i4`).
    Packed {
        index: usize,
    },
    /// Graph weight number `index`, written as f16 when `compress` (then a decompressing
    /// `Convert` follows the `Const`).
    Weight {
        index: usize,
        compress: bool,
    },
}

/// A lowered network and the `Const` layers whose bytes the writer must place, each by its
/// path ([`Network::layer_mut`]: a body's constants sit inside their `TensorIterator`).
pub struct Lowered {
    pub net: Network,
    pub consts: Vec<(Vec<usize>, ConstSource)>,
}

/// Options of the lowering.
#[derive(Debug, Clone, Copy)]
pub struct LowerOptions {
    pub stateful: bool,
    pub compress_to_fp16: bool,
}

/// The input name of a stateful export's beam reordering.
pub const BEAM_IDX: &str = "beam_idx";

/// The cache pairs a stateful export folds into variables: graph input `past_key_values.<n>` and
/// output `present.<n>` (a static cache's in-place pair, or a growing cache's past and present), as
/// (input, output, variable `<n>`).
pub fn state_pairs(g: &Graph) -> Vec<(String, String, String)> {
    g.inputs()
        .iter()
        .filter_map(|p| {
            let n = cache_ports::cache_of_past(&p.name)?;
            let out = cache_ports::present(n);
            g.outputs().iter().any(|o| o.name == out).then(|| (p.name.clone(), out, n.to_string()))
        })
        .collect()
}

/// `1,2`: a list attribute.
fn list(v: &[usize]) -> String {
    v.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// The strides and explicit pads a convolution and a pooling layer share.
fn window_attrs(w: &Window) -> Vec<(&'static str, String)> {
    vec![
        ("strides", list(&w.stride)),
        ("pads_begin", list(&w.pads_begin)),
        ("pads_end", list(&w.pads_end)),
        ("auto_pad", "explicit".into()),
    ]
}

fn dims_of(shape: &[Dim]) -> Vec<i64> {
    shape.iter().map(|d| d.as_const().unwrap_or(-1)).collect()
}

/// The quantized weight parts of `g`, from the `QuantLinear` / `QuantGather` nodes reading
/// them: weight value -> (part, bits, group).
fn quant_parts(g: &Graph) -> HashMap<ValueId, (QuantPart, u8, usize)> {
    let mut parts = HashMap::new();
    for n in g.nodes() {
        let (first, bits, group, zero_point) = match n.op {
            Op::QuantLinear { bits, group, zero_point } => (1, bits, group, zero_point),
            Op::QuantGather { bits, group, zero_point } => (0, bits, group, zero_point),
            _ => continue,
        };
        parts.insert(n.inputs[first], (QuantPart::Values, bits, group));
        parts.insert(n.inputs[first + 1], (QuantPart::Scales, bits, group));
        if zero_point {
            parts.insert(n.inputs[first + 2], (QuantPart::ZeroPoints, bits, group));
        }
    }
    parts
}

/// The `Const` port of a quantized weight part as NNCF lays it out for the CPU plugin's
/// decompression patterns: values `[rows, groups, group]` (`[rows, cols]` per channel) of
/// `i4`/`u4`/`i8`/`u8`, scales and zero points `[rows, groups, 1]` (`[rows, 1]`). The bytes
/// are the IR's own (row-major), only the dims differ.
fn quant_layout((part, bits, group): (QuantPart, u8, usize), info: &hfexport_core::ValueInfo) -> Option<PortInfo> {
    let rows = info.shape[0].as_const()?;
    let grid = |groups: i64, inner: i64| if groups == 1 { vec![rows, inner] } else { vec![rows, groups, inner] };
    let port = match part {
        QuantPart::Values | QuantPart::Unsigned => {
            let cols = info.shape[1].as_const()?;
            PortInfo { nibbles: bits == 4, ..port(info.dtype, grid(cols / group as i64, group as i64)) }
        }
        QuantPart::Scales | QuantPart::ZeroPoints => {
            let groups = info.shape[1].as_const()?;
            PortInfo { nibbles: part == QuantPart::ZeroPoints && bits == 4, ..port(info.dtype, grid(groups, 1)) }
        }
    };
    Some(port)
}

fn port(dtype: DType, dims: Vec<i64>) -> PortInfo {
    PortInfo { dtype, dims, names: vec![], nibbles: false }
}

/// The layer list being built, the constants to place, and how to read each graph input.
struct Emit {
    net: Network,
    consts: Vec<(Vec<usize>, ConstSource)>,
    /// Where a graph input's dims are read: its Parameter, or a state's `ReadValue` (the CPU
    /// plugin's stateful SDPA fusion allows a `ShapeOf` there, not after the beam `Gather`).
    inputs: HashMap<String, Out>,
    fresh: usize,
}

impl Emit {
    fn layer(
        &mut self,
        name: String,
        ty: &'static str,
        version: &'static str,
        data: Vec<(&'static str, String)>,
        inputs: Vec<Out>,
        outputs: Vec<PortInfo>,
    ) -> usize {
        let layer =
            Layer { name, ty, version, data, inputs, outputs, decompression: false, output_names: None, body: None };
        self.net.add(layer)
    }

    fn helper_name(&mut self, ty: &str) -> String {
        self.fresh += 1;
        format!("hfx.{ty}.{}", self.fresh)
    }

    /// A one-output helper layer.
    fn op(
        &mut self,
        ty: &'static str,
        version: &'static str,
        data: Vec<(&'static str, String)>,
        inputs: Vec<Out>,
        out: PortInfo,
    ) -> Out {
        let name = self.helper_name(ty);
        let layer = self.layer(name, ty, version, data, inputs, vec![out]);
        Out { layer, index: 0 }
    }

    fn binary(&mut self, ty: &'static str, a: Out, b: Out, out: PortInfo) -> Out {
        self.op(ty, "opset1", vec![("auto_broadcast", "numpy".into())], vec![a, b], out)
    }

    fn constant(&mut self, t: &Tensor) -> Out {
        let name = self.helper_name("Const");
        self.const_layer(
            name,
            t.dtype(),
            t.shape().iter().map(|&d| d as i64).collect(),
            ConstSource::Inline(t.to_le_bytes()),
        )
    }

    /// A `Const` layer; `offset` and `size` are filled in by the writer.
    fn const_layer(&mut self, name: String, dtype: DType, dims: Vec<i64>, src: ConstSource) -> Out {
        self.const_port(name, port(dtype, dims), src)
    }

    fn const_port(&mut self, name: String, out: PortInfo, src: ConstSource) -> Out {
        let shape = out.dims.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
        let data = vec![("element_type", out.element_type().to_string()), ("shape", shape)];
        let layer = self.layer(name, "Const", "opset1", data, vec![], vec![out]);
        self.consts.push((vec![layer], src));
        Out { layer, index: 0 }
    }

    fn const_i64(&mut self, v: &[i64]) -> Out {
        self.constant(&Tensor::i64(vec![v.len()], v.to_vec()).expect("length matches"))
    }

    fn scalar_i64(&mut self, v: i64) -> Out {
        self.constant(&Tensor::i64(vec![], vec![v]).expect("scalar"))
    }
}

impl ShapeEmitter for Emit {
    type Value = Out;
    type Error = OvError;

    fn input_axis(&mut self, input: &str, axis: usize) -> Result<Out> {
        let src = *self.inputs.get(input).ok_or_else(|| OvError::Lowering {
            node: "(shape)".into(),
            op: "Dim".into(),
            msg: format!("graph input `{input}` is not lowered yet"),
        })?;
        let rank = self.net.port(src).dims.len() as i64;
        let shape =
            self.op("ShapeOf", "opset3", vec![("output_type", "i64".into())], vec![src], port(DType::I64, vec![rank]));
        let idx = self.const_i64(&[axis as i64]);
        let zero = self.scalar_i64(0);
        Ok(self.op(
            "Gather",
            "opset8",
            vec![("batch_dims", "0".into())],
            vec![shape, idx, zero],
            port(DType::I64, vec![1]),
        ))
    }

    fn const_i64(&mut self, values: &[i64]) -> Result<Out> {
        Ok(Emit::const_i64(self, values))
    }

    fn mul(&mut self, a: Out, b: Out) -> Result<Out> {
        Ok(self.binary("Multiply", a, b, port(DType::I64, vec![1])))
    }

    fn add(&mut self, a: Out, b: Out) -> Result<Out> {
        Ok(self.binary("Add", a, b, port(DType::I64, vec![1])))
    }

    /// `Divide` floors integers (its `m_pythondiv` defaults to true).
    fn floor_div(&mut self, a: Out, b: Out) -> Result<Out> {
        Ok(self.binary("Divide", a, b, port(DType::I64, vec![1])))
    }

    fn concat(&mut self, parts: Vec<Out>) -> Result<Out> {
        let n = parts.len() as i64;
        Ok(self.op("Concat", "opset1", vec![("axis", "0".into())], parts, port(DType::I64, vec![n])))
    }
}

struct Ctx<'g> {
    g: &'g Graph,
    opts: LowerOptions,
    em: Emit,
    dims: DimLowering<Out>,
    vals: Vec<Option<Out>>,
    /// Graph inputs folded into state variables.
    states: std::collections::HashSet<ValueId>,
    /// `CacheUpdate` outputs realised as a state grown by `Concat` (stateful static caches).
    grown: std::collections::HashSet<ValueId>,
}

fn dim_error(e: DimError<OvError>) -> OvError {
    match e {
        DimError::Unbound(msg) => OvError::Lowering { node: "(shape)".into(), op: "Dim".into(), msg },
        DimError::Emit(e) => e,
    }
}

/// `min..max` of a symbol, `?` of any other dynamic dim: the Parameter shape syntax.
fn parameter_shape(g: &Graph, shape: &[Dim]) -> String {
    let parts: Vec<String> = shape
        .iter()
        .map(|d| match (d.as_const(), d.as_symbol()) {
            (Some(c), _) => c.to_string(),
            (None, Some(s)) => {
                let r = g.symbols.range(s);
                format!("{}..{}", r.min, r.max)
            }
            _ => "?".into(),
        })
        .collect();
    parts.join(",")
}

pub fn lower(g: &Graph, opts: LowerOptions) -> Result<Lowered> {
    // A stateful encoder-decoder's merged decode keeps its cross-attention keys and values as
    // states the first call fills: their projections read every encoder row (no encoder past).
    let owned;
    let g = match opts.stateful && g.symbols.get(cache_ports::ENCODER_PAST).is_some() {
        true => {
            let mut cross = g.clone();
            cross.substitute_symbol(cache_ports::ENCODER_PAST, &Dim::konst(0))?;
            owned = cross;
            &owned
        }
        false => g,
    };
    let em = Emit { net: Network::default(), consts: vec![], inputs: HashMap::new(), fresh: 0 };
    let mut cx = Ctx {
        g,
        opts,
        em,
        dims: DimLowering::new(g),
        vals: vec![None; g.num_values()],
        states: Default::default(),
        grown: Default::default(),
    };
    cx.inputs()?;
    cx.weights();
    for n in g.nodes() {
        if let Some(variable) = cx.cross_state(n) {
            cx.cross_state_read(n, variable);
            continue;
        }
        cx.lower_node(n).map_err(|e| match e {
            OvError::Lowering { .. } => e,
            other => OvError::Lowering { node: n.name.clone(), op: n.op.name().into(), msg: other.to_string() },
        })?;
    }
    cx.outputs()?;
    Ok(Lowered { net: cx.em.net, consts: cx.em.consts })
}

impl<'g> Ctx<'g> {
    fn val(&self, v: ValueId) -> Out {
        self.vals[v.0].expect("values are lowered in topological order")
    }

    fn info_port(&self, v: ValueId) -> PortInfo {
        let i = self.g.info(v);
        port(i.dtype, dims_of(&i.shape))
    }

    fn dim(&mut self, d: &Dim) -> Result<Out> {
        self.dims.dim(&mut self.em, d).map_err(dim_error)
    }

    fn shape(&mut self, dims: &[Dim]) -> Result<Out> {
        self.dims.shape(&mut self.em, dims).map_err(dim_error)
    }

    /// Whether graph input `name` becomes a variable (stateful cache).
    fn is_state(&self, name: &str) -> bool {
        self.opts.stateful && state_pairs(self.g).iter().any(|(i, _, _)| i == name)
    }

    fn inputs(&mut self) -> Result<()> {
        let g = self.g;
        let mut has_state = false;
        for p in g.inputs() {
            if self.is_state(&p.name) {
                has_state = true;
                continue;
            }
            let i = g.info(p.value);
            let data =
                vec![("shape", parameter_shape(g, &i.shape)), ("element_type", element_type(i.dtype).to_string())];
            let mut out = port(i.dtype, dims_of(&i.shape));
            out.names = vec![p.name.clone()];
            let layer = self.em.layer(p.name.clone(), "Parameter", "opset1", data, vec![], vec![out]);
            let o = Out { layer, index: 0 };
            self.vals[p.value.0] = Some(o);
            self.em.inputs.insert(p.name.clone(), o);
        }
        if !has_state {
            return Ok(());
        }
        let data = vec![("shape", "?".to_string()), ("element_type", "i32".to_string())];
        let beam = PortInfo { dtype: DType::I32, dims: vec![-1], names: vec![BEAM_IDX.into()], nibbles: false };
        let layer = self.em.layer(BEAM_IDX.into(), "Parameter", "opset1", data, vec![], vec![beam]);
        let beam = Out { layer, index: 0 };
        for p in g.inputs() {
            // a cross-attention state is read where its keys are made ([`Ctx::cross_state`])
            if !self.is_state(&p.name) || cache_ports::cache_of_past(&p.name).is_some_and(cache_ports::is_encoder_cache)
            {
                continue;
            }
            let (read, o) = self.state(&p.name, p.value, beam)?;
            self.states.insert(p.value);
            self.vals[p.value.0] = Some(o);
            self.em.inputs.insert(p.name.clone(), read);
        }
        Ok(())
    }

    /// `(mask, q_pos, k_pos, w)` when `v` is a sliding window folded into a mask as core's
    /// `fold_sliding_windows` writes it: `mask AND (q_pos - k_pos < w)`.
    fn folded_window(&self, v: ValueId) -> Option<(ValueId, ValueId, ValueId, i64)> {
        let node = |v: ValueId| match self.g.producer(v) {
            Producer::Node { node, .. } => Some(&self.g.nodes()[node]),
            _ => None,
        };
        let and = node(v).filter(|n| n.op == Op::Binary(BinaryOp::And))?;
        let less = node(and.inputs[1]).filter(|n| n.op == Op::Binary(BinaryOp::Less))?;
        let sub = node(less.inputs[0]).filter(|n| n.op == Op::Binary(BinaryOp::Sub))?;
        let Op::Constant(w) = &node(less.inputs[1])?.op else { return None };
        let w = *w.as_i64().ok()?.first()?;
        Some((and.inputs[0], sub.inputs[0], sub.inputs[1], w))
    }

    /// A folded window's mask in the form OpenVINO's PagedAttention conversion (OpenVINO GenAI's
    /// default backend) reads a layer's window from, gpt-oss's and Gemma 3's:
    /// `Broadcast(((true & (k_pos > q_pos + (-w))) & mask & true) & true)` (bitwise, in that
    /// input order), which the `Select` of [`Self::attention_mask`] then takes; any other form
    /// is converted with no window at all.
    fn paged_window_mask(&mut self, (mask, q_pos, k_pos, w): (ValueId, ValueId, ValueId, i64)) -> Out {
        let (mask, q, k) = (self.val(mask), self.val(q_pos), self.val(k_pos));
        let dims = self.em.net.port(mask).dims.clone();
        let q_dims = self.em.net.port(q).dims.clone();
        let offset = self.em.scalar_i64(-w);
        let start = self.em.binary("Add", q, offset, port(DType::I64, q_dims));
        let inside = self.em.binary("Greater", k, start, port(DType::Bool, dims.clone()));
        let yes = self.em.constant(&Tensor::bool(vec![], vec![true]).expect("scalar"));
        let mut and = |a: Out, b: Out| {
            let data = vec![("auto_broadcast", "numpy".into())];
            self.em.op("BitwiseAnd", "opset13", data, vec![a, b], port(DType::Bool, dims.clone()))
        };
        let chain = and(yes, inside);
        let chain = and(chain, mask);
        let chain = and(yes, chain);
        let chain = and(chain, yes);
        let rank = dims.len() as i64;
        let data = vec![("output_type", "i64".into())];
        let shape = self.em.op("ShapeOf", "opset3", data, vec![chain], port(DType::I64, vec![rank]));
        let data = vec![("mode", "numpy".into())];
        self.em.op("Broadcast", "opset3", data, vec![chain, shape], port(DType::Bool, dims))
    }

    /// The variable of the cross-attention state `n` reads, when `n` is the `Concat` of an
    /// encoder-decoder's encoder past (a stateful export's, [`lower`]: the past is empty) and
    /// this call's projections of the encoder rows.
    fn cross_state(&self, n: &Node) -> Option<String> {
        let Producer::Input(i) = self.g.producer(*n.inputs.first()?) else { return None };
        let cache = cache_ports::cache_of_past(&self.g.inputs()[i].name)?;
        (matches!(n.op, Op::Concat { .. }) && self.opts.stateful && cache_ports::is_encoder_cache(cache))
            .then(|| cache.to_string())
    }

    /// `ReadValue(projections)` of the cross-attention state `variable`: the first call after a
    /// reset stores the projections of its encoder rows, and every later call reads them back
    /// (optimum-intel's stateful encoder-decoders keep them so). No beam reordering: the beams
    /// of one input share its encoder rows.
    fn cross_state_read(&mut self, n: &Node, variable: String) {
        let (fresh, out) = (self.val(n.inputs[1]), n.outputs[0]);
        self.vals[out.0] = Some(self.read_value(&variable, out, fresh));
    }

    /// `ReadValue(init)` of variable `variable`, typed and shaped as value `v`.
    fn read_value(&mut self, variable: &str, v: ValueId, init: Out) -> Out {
        let i = self.g.info(v);
        let var_shape: Vec<String> =
            i.shape.iter().map(|d| d.as_const().map_or("?".into(), |c| c.to_string())).collect();
        let data = vec![
            ("variable_id", variable.to_string()),
            ("variable_type", element_type(i.dtype).to_string()),
            ("variable_shape", var_shape.join(",")),
        ];
        let port = self.info_port(v);
        let layer = self.em.layer(format!("{variable}/read"), "ReadValue", "opset6", data, vec![init], vec![port]);
        Out { layer, index: 0 }
    }

    /// `ReadValue(zeros) → Gather(beam_idx)` for cache input `name`: (the read, the gathered).
    fn state(&mut self, name: &str, v: ValueId, beam: Out) -> Result<(Out, Out)> {
        let g = self.g;
        let i = g.info(v);
        let variable = cache_ports::cache_of_past(name).unwrap_or(name).to_string();
        // A state that grows by each call's tokens starts empty (length 0); a static one that is
        // written in place starts with its slots; the other dims are read from the inputs.
        let empty: &[&str] = if self.grows(v) { &["past_len", "cache_len"] } else { &["past_len"] };
        let init_dims: Vec<Dim> = i
            .shape
            .iter()
            .map(|d| {
                empty.iter().filter_map(|n| g.symbols.get(n)).fold(d.clone(), |d, s| d.substitute(&s, &Dim::konst(0)))
            })
            .collect();
        let shape = self.shape(&init_dims)?;
        let zero = self.em.constant(&Tensor::scalar_float(i.dtype, 0.0));
        let init = self.em.op(
            "Broadcast",
            "opset3",
            vec![("mode", "numpy".into())],
            vec![zero, shape],
            port(i.dtype, dims_of(&init_dims)),
        );
        let read = self.read_value(&variable, v, init);
        let axis = self.em.scalar_i64(0);
        let gathered =
            self.em.op("Gather", "opset8", vec![("batch_dims", "0".into())], vec![read, beam, axis], self.info_port(v));
        Ok((read, gathered))
    }

    fn weights(&mut self) {
        let g = self.g;
        let quantized = quant_parts(g);
        for (index, w) in g.weights().iter().enumerate() {
            if let Some(port) = quantized.get(&w.value).and_then(|&p| quant_layout(p, g.info(w.value))) {
                let src = match port.nibbles {
                    true => ConstSource::Packed { index },
                    false => ConstSource::Weight { index, compress: false },
                };
                self.vals[w.value.0] = Some(self.em.const_port(w.name.clone(), port, src));
                continue;
            }
            let i = g.info(w.value);
            let dims = dims_of(&i.shape);
            let compress = self.opts.compress_to_fp16 && i.dtype == DType::F32;
            let stored = if compress { DType::F16 } else { i.dtype };
            let c = self.em.const_layer(w.name.clone(), stored, dims.clone(), ConstSource::Weight { index, compress });
            let o = if compress {
                let data = vec![("destination_type", "f32".to_string())];
                let layer = self.em.layer(
                    format!("{}/decompress", w.name),
                    "Convert",
                    "opset1",
                    data,
                    vec![c],
                    vec![port(DType::F32, dims)],
                );
                self.em.net.layers[layer].decompression = true;
                Out { layer, index: 0 }
            } else {
                c
            };
            self.vals[w.value.0] = Some(o);
        }
    }

    fn outputs(&mut self) -> Result<()> {
        let g = self.g;
        for p in g.outputs() {
            let mut src = self.val(p.value);
            let pair = state_pairs(g).into_iter().find(|(_, o, _)| *o == p.name);
            if let (true, Some((_, _, variable))) = (self.opts.stateful, pair) {
                let data = vec![("variable_id", variable.clone())];
                self.em.layer(format!("{variable}/assign"), "Assign", "opset6", data, vec![src], vec![]);
                continue;
            }
            // A Parameter or Const keeps its own name: name a copy instead.
            if matches!(self.em.net.layers[src.layer].ty, "Parameter" | "Const") {
                let i = g.info(p.value);
                let data = vec![("destination_type", element_type(i.dtype).to_string())];
                src = self.em.op("Convert", "opset1", data, vec![src], self.info_port(p.value));
            }
            self.em.net.port_mut(src).names.push(p.name.clone());
            let name = format!("{}/result", p.name);
            let layer = self.em.layer(name, "Result", "opset1", vec![], vec![src], vec![]);
            self.em.net.layers[layer].output_names = Some(p.name.clone());
        }
        Ok(())
    }

    fn lower_node(&mut self, n: &Node) -> Result<()> {
        let ins: Vec<Out> = n.inputs.iter().map(|v| self.val(*v)).collect();
        if let Op::TopK { k } = n.op {
            return self.top_k(n, ins[0], k);
        }
        if matches!(n.op, Op::SelectiveScan | Op::DeltaScan) {
            return self.tensor_iterator(n, &ins);
        }
        if let Op::Moe {
            top_k,
            routing: Routing::Softmax { normalize },
            glu: Glu::Gated(Activation::Silu),
            biased: false,
            few_tokens: false,
            weigh_input: false,
            own_router: false,
        } = n.op
        {
            let o = self.tiled_moe(n, &ins, top_k, normalize);
            self.vals[n.outputs[0].0] = Some(o);
            return Ok(());
        }
        let out = self.info_port(n.outputs[0]);
        let name = n.name.clone();
        let one = |cx: &mut Self,
                   ty: &'static str,
                   version: &'static str,
                   data: Vec<(&'static str, String)>,
                   inputs: Vec<Out>| {
            let layer = cx.em.layer(name.clone(), ty, version, data, inputs, vec![out.clone()]);
            Out { layer, index: 0 }
        };
        let numpy = || vec![("auto_broadcast", "numpy".to_string())];
        let o = match &n.op {
            Op::Constant(t) => {
                let c = self.em.constant(t);
                self.em.net.layers[c.layer].name = name.clone();
                c
            }
            Op::Unary(u) => match u {
                UnaryOp::Reciprocal => {
                    let dtype = self.g.info(n.inputs[0]).dtype;
                    let one_c = self.em.constant(&Tensor::scalar_float(dtype, 1.0));
                    one(
                        self,
                        "Divide",
                        "opset1",
                        vec![("auto_broadcast", "numpy".into()), ("m_pythondiv", "true".into())],
                        vec![one_c, ins[0]],
                    )
                }
                other => {
                    let ty = match other {
                        UnaryOp::Neg => "Negative",
                        UnaryOp::Exp => "Exp",
                        UnaryOp::Sqrt => "Sqrt",
                        UnaryOp::Tanh => "Tanh",
                        UnaryOp::Sigmoid => "Sigmoid",
                        UnaryOp::Cos => "Cos",
                        UnaryOp::Sin => "Sin",
                        UnaryOp::Erf => "Erf",
                        UnaryOp::Log => "Log",
                        UnaryOp::Not => "LogicalNot",
                        UnaryOp::Reciprocal => unreachable!("handled above"),
                    };
                    one(self, ty, "opset1", vec![], ins)
                }
            },
            Op::Binary(b) => {
                let ty = match b {
                    BinaryOp::Add => "Add",
                    BinaryOp::Sub => "Subtract",
                    BinaryOp::Mul => "Multiply",
                    BinaryOp::Div => "Divide",
                    BinaryOp::Pow => "Power",
                    BinaryOp::Max => "Maximum",
                    BinaryOp::Min => "Minimum",
                    BinaryOp::Equal => "Equal",
                    BinaryOp::Less => "Less",
                    BinaryOp::LessEqual => "LessEqual",
                    BinaryOp::Greater => "Greater",
                    BinaryOp::GreaterEqual => "GreaterEqual",
                    BinaryOp::And => "LogicalAnd",
                    BinaryOp::Or => "LogicalOr",
                };
                let mut data = numpy();
                if *b == BinaryOp::Div {
                    // integer division truncates in core (as in C and ONNX), not floors
                    data.push(("m_pythondiv", "false".into()));
                }
                one(self, ty, "opset1", data, ins)
            }
            Op::Where => one(self, "Select", "opset1", numpy(), ins),
            Op::Cast(d) => one(self, "Convert", "opset1", vec![("destination_type", element_type(*d).into())], ins),
            Op::MatMul => one(
                self,
                "MatMul",
                "opset1",
                vec![("transpose_a", "false".into()), ("transpose_b", "false".into())],
                ins,
            ),
            Op::Reduce { kind, axes, keep_dims } => {
                let ty = match kind {
                    ReduceKind::Sum => "ReduceSum",
                    ReduceKind::Mean => "ReduceMean",
                    ReduceKind::Max => "ReduceMax",
                };
                let axes: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
                let a = self.em.const_i64(&axes);
                one(self, ty, "opset1", vec![("keep_dims", keep_dims.to_string())], vec![ins[0], a])
            }
            Op::Softmax { axis } => one(self, "SoftMax", "opset8", vec![("axis", axis.to_string())], ins),
            Op::CumSum { axis } => {
                let a = self.em.scalar_i64(*axis as i64);
                let attrs = vec![("exclusive", "false".to_string()), ("reverse", "false".to_string())];
                one(self, "CumSum", "opset3", attrs, vec![ins[0], a])
            }
            Op::Reshape { shape } => {
                let s = self.shape(shape)?;
                one(self, "Reshape", "opset1", vec![("special_zero", "false".into())], vec![ins[0], s])
            }
            Op::Transpose { perm } => {
                let p: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
                let p = self.em.const_i64(&p);
                one(self, "Transpose", "opset1", vec![], vec![ins[0], p])
            }
            Op::Expand { shape } => {
                let s = self.shape(shape)?;
                one(self, "Broadcast", "opset3", vec![("mode", "numpy".into())], vec![ins[0], s])
            }
            Op::Concat { axis } => {
                // The last axis is written -1: RoPEFusion matches rotate_half's Concat only so.
                let rank = self.g.info(n.outputs[0]).shape.len();
                let axis = if *axis + 1 == rank { -1 } else { *axis as i64 };
                one(self, "Concat", "opset1", vec![("axis", axis.to_string())], ins)
            }
            Op::Slice { axis, start, end } => {
                let (s, e) = (self.dim(start)?, self.dim(end)?);
                let step = self.em.const_i64(&[1]);
                let ax = self.em.const_i64(&[*axis as i64]);
                one(self, "Slice", "opset8", vec![], vec![ins[0], s, e, step, ax])
            }
            Op::Gather { axis } => {
                let ax = self.em.scalar_i64(*axis as i64);
                one(self, "Gather", "opset8", vec![("batch_dims", "0".into())], vec![ins[0], ins[1], ax])
            }
            Op::Iota { len } => {
                let l = self.dim(len)?;
                let axes = self.em.const_i64(&[0]);
                let limit = self.em.op("Squeeze", "opset1", vec![], vec![l, axes], port(DType::I64, vec![]));
                let (zero, step) = (self.em.scalar_i64(0), self.em.scalar_i64(1));
                one(self, "Range", "opset4", vec![("output_type", "i64".into())], vec![zero, limit, step])
            }
            Op::Linear => {
                let data = vec![("transpose_a", "false".into()), ("transpose_b", "true".into())];
                if ins.len() == 2 {
                    one(self, "MatMul", "opset1", data, ins)
                } else {
                    let mm = self.em.op("MatMul", "opset1", data, vec![ins[0], ins[1]], out.clone());
                    one(self, "Add", "opset1", numpy(), vec![mm, ins[2]])
                }
            }
            Op::LayerNorm { eps } => {
                let axes = self.em.const_i64(&[-1]);
                let data = vec![
                    ("eps", eps.to_string()),
                    ("normalize_variance", "true".into()),
                    ("eps_mode", "inside_sqrt".into()),
                ];
                let mvn = self.em.op("MVN", "opset6", data, vec![ins[0], axes], out.clone());
                match ins.get(2) {
                    None => one(self, "Multiply", "opset1", numpy(), vec![mvn, ins[1]]),
                    Some(&b) => {
                        let scaled = self.em.binary("Multiply", mvn, ins[1], out.clone());
                        one(self, "Add", "opset1", numpy(), vec![scaled, b])
                    }
                }
            }
            Op::Activate(act) => {
                let dtype = self.g.info(n.inputs[0]).dtype;
                match act {
                    Activation::Gelu => one(self, "Gelu", "opset7", vec![("approximation_mode", "ERF".into())], ins),
                    Activation::GeluTanh => {
                        one(self, "Gelu", "opset7", vec![("approximation_mode", "TANH".into())], ins)
                    }
                    Activation::Relu => one(self, "Relu", "opset1", vec![], ins),
                    // Swish: x * sigmoid(beta * x), beta 1 when not given
                    Activation::Silu => one(self, "Swish", "opset4", vec![], ins),
                    Activation::QuickGelu => {
                        let beta = self.em.constant(&Tensor::scalar_float(dtype, 1.702));
                        one(self, "Swish", "opset4", vec![], vec![ins[0], beta])
                    }
                }
            }
            // A state grows instead: the CPU plugin then fuses ReadValue → Gather → Concat → Assign
            // with the attention, and no step copies the whole static cache. Calls must come in
            // position order, as a stateful model's caller makes them.
            Op::CacheUpdate if self.grows(n.inputs[0]) => {
                self.grown.insert(n.outputs[0]);
                one(self, "Concat", "opset1", vec![("axis", "2".into())], vec![ins[0], ins[1]])
            }
            Op::CacheUpdate | Op::ScatterSlots => {
                let flat = self.em.const_i64(&[-1]);
                let q = self.g.info(n.inputs[2]).shape.iter().fold(Dim::konst(1), |a, d| a.mul(d));
                let idx = self.em.op(
                    "Reshape",
                    "opset1",
                    vec![("special_zero", "false".into())],
                    vec![ins[2], flat],
                    port(DType::I64, dims_of(&[q])),
                );
                let axis = self.em.scalar_i64(2);
                one(self, "ScatterUpdate", "opset3", vec![], vec![ins[0], idx, ins[1], axis])
            }
            Op::Attention { scale, softcap: None, sliding_window: None, sinks: false } => {
                let (q, k) = (self.g.info(n.inputs[0]).clone(), self.g.info(n.inputs[1]).clone());
                let mut mask = self.attention_mask(n);
                if self.grown.contains(&n.inputs[1]) {
                    mask = self.mask_to_key_length(mask, ins[1]);
                }
                let (hq, hkv) = (q.shape[1].as_const().unwrap_or(0), k.shape[1].as_const().unwrap_or(0));
                let (kk, vv) = if hq != hkv && hkv > 0 {
                    (self.repeat_kv(n.inputs[1], hq / hkv)?, self.repeat_kv(n.inputs[2], hq / hkv)?)
                } else {
                    (ins[1], ins[2])
                };
                let s = self.em.constant(&Tensor::scalar_float(q.dtype, *scale));
                one(
                    self,
                    "ScaledDotProductAttention",
                    "opset13",
                    vec![("causal", "false".into())],
                    vec![ins[0], kk, vv, mask, s],
                )
            }
            Op::QuantLinear { zero_point, .. } => {
                let w = self.dequantized(n, &ins[1..], *zero_point)?;
                let data = vec![("transpose_a", "false".into()), ("transpose_b", "true".into())];
                let bias = ins.get(3 + usize::from(*zero_point)).copied();
                match bias {
                    None => one(self, "MatMul", "opset1", data, vec![ins[0], w]),
                    Some(b) => {
                        let mm = self.em.op("MatMul", "opset1", data, vec![ins[0], w], out.clone());
                        one(self, "Add", "opset1", numpy(), vec![mm, b])
                    }
                }
            }
            Op::QuantGather { zero_point, .. } => {
                let table = self.dequantized(n, &ins[..ins.len() - 1], *zero_point)?;
                let ax = self.em.scalar_i64(0);
                let ids = ins[ins.len() - 1];
                one(self, "Gather", "opset8", vec![("batch_dims", "0".into())], vec![table, ids, ax])
            }
            Op::Conv { window, groups } => {
                let conv = self.convolution(n, &ins, window, *groups, out.clone());
                match ins.get(2) {
                    None => {
                        self.em.net.layers[conv.layer].name = name.clone();
                        conv
                    }
                    Some(&b) => {
                        let rank = out.dims.len();
                        let channels: Vec<i64> = (0..rank).map(|i| if i == 1 { -1 } else { 1 }).collect();
                        let shape = self.em.const_i64(&channels);
                        let cout = out.dims[1];
                        let bias_dims = (0..rank).map(|i| if i == 1 { cout } else { 1 }).collect();
                        let data = vec![("special_zero", "false".into())];
                        let b = self.em.op("Reshape", "opset1", data, vec![b, shape], port(out.dtype, bias_dims));
                        one(self, "Add", "opset1", numpy(), vec![conv, b])
                    }
                }
            }
            Op::MaxPool { window } => {
                let mut data = window_attrs(window);
                data.push(("kernel", list(&window.kernel)));
                data.push(("rounding_type", "floor".into()));
                one(self, "MaxPool", "opset1", data, ins)
            }
            Op::Attention { .. }
            | Op::RmsNorm { .. }
            | Op::RotaryCosSin { .. }
            | Op::ApplyRotary
            | Op::GatedMlp { .. }
            | Op::SelectiveScan
            | Op::DeltaScan
            | Op::TopK { .. }
            | Op::Moe { .. } => {
                return Err(OvError::Lowering {
                    node: n.name.clone(),
                    op: n.op.name().into(),
                    msg: "has no native OpenVINO lowering; it should have been decomposed".into(),
                })
            }
        };
        self.vals[n.outputs[0].0] = Some(o);
        Ok(())
    }

    /// [`Op::Conv`] without its bias: a `Convolution`, or a `GroupConvolution` over the weight
    /// seen as `[groups, cout / groups, cin / groups, *kernel]`.
    fn convolution(&mut self, n: &Node, ins: &[Out], window: &Window, groups: usize, out: PortInfo) -> Out {
        let mut data = window_attrs(window);
        data.push(("dilations", list(&window.dilation)));
        if groups == 1 {
            return self.em.op("Convolution", "opset1", data, vec![ins[0], ins[1]], out);
        }
        let w = self.g.info(n.inputs[1]);
        let mut grouped = dims_of(&w.shape);
        grouped[0] /= groups as i64;
        grouped.insert(0, groups as i64);
        let shape = self.em.const_i64(&grouped);
        let reshape = vec![("special_zero", "false".into())];
        let w = self.em.op("Reshape", "opset1", reshape, vec![ins[1], shape], port(w.dtype, grouped));
        self.em.op("GroupConvolution", "opset1", data, vec![ins[0], w], out)
    }

    /// NNCF's decompression subgraph over `quant_layout`'s constants: `Convert` to the scales'
    /// type (not marked `decompression`: that rt_info, meant for f16 weights, lets the plugin
    /// fold the chain into float weights), minus the converted zero points, times the scales, then
    /// `Reshape` to `[rows, cols]` when grouped; the float weight the consumer reads.
    fn dequantized(&mut self, n: &Node, params: &[Out], zero_point: bool) -> Result<Out> {
        let w = self.g.info(n.inputs[if matches!(n.op, Op::QuantLinear { .. }) { 1 } else { 0 }]).clone();
        let dtype = self.em.net.port(params[1]).dtype;
        let grouped = self.em.net.port(params[0]).dims.clone();
        let as_float = |cx: &mut Self, x: Out| {
            let dims = cx.em.net.port(x).dims.clone();
            let data = vec![("destination_type", element_type(dtype).to_string())];
            cx.em.op("Convert", "opset1", data, vec![x], port(dtype, dims))
        };
        let mut v = as_float(self, params[0]);
        if zero_point {
            let z = as_float(self, params[2]);
            v = self.em.binary("Subtract", v, z, port(dtype, grouped.clone()));
        }
        v = self.em.binary("Multiply", v, params[1], port(dtype, grouped.clone()));
        let dims = dims_of(&w.shape);
        if grouped.len() == 3 {
            let shape = self.em.const_i64(&dims);
            v = self.em.op(
                "Reshape",
                "opset1",
                vec![("special_zero", "false".into())],
                vec![v, shape],
                port(dtype, dims),
            );
        }
        Ok(v)
    }

    /// [`Op::SelectiveScan`] and [`Op::DeltaScan`] as one `TensorIterator` over the sequence
    /// (O(L) for any run-time length): its body is core's one-step graph ([`scan_step`]),
    /// lowered as any graph; sliced inputs are cut one position per iteration, states carried by
    /// back edges, per-step outputs concatenated, and a state's last value is the layer's.
    fn tensor_iterator(&mut self, n: &Node, ins: &[Out]) -> Result<()> {
        let step = scan_step(self.g, n)?;
        let body = lower(&step.body, LowerOptions { stateful: false, ..self.opts })?;
        let layer_of = |ty: &str, name: &str| {
            let found = body.net.layers.iter().position(|l| {
                l.ty == ty && if ty == "Result" { l.output_names.as_deref() == Some(name) } else { l.name == name }
            });
            found.ok_or_else(|| OvError::Lowering {
                node: n.name.clone(),
                op: n.op.name().into(),
                msg: format!("the step graph has no {ty} `{name}`"),
            })
        };
        let (body_ins, body_outs) = (step.body.inputs(), step.body.outputs());
        let mut port_map = vec![];
        let mut back_edges = vec![];
        for (i, how) in step.inputs.iter().enumerate() {
            let param = layer_of("Parameter", &body_ins[i].name)?;
            let axis = match *how {
                LoopInput::Sliced { axis } => Some(axis),
                LoopInput::Carried { from } => {
                    back_edges.push((layer_of("Result", &body_outs[from].name)?, param));
                    None
                }
                LoopInput::Invariant => None,
            };
            port_map.push(PortMapEntry { output: false, external_port_id: i, internal_layer_id: param, axis });
        }
        for (j, how) in step.outputs.iter().enumerate() {
            let axis = match *how {
                LoopOutput::Stacked { axis } => Some(axis),
                LoopOutput::Last => None,
            };
            let result = layer_of("Result", &body_outs[j].name)?;
            port_map.push(PortMapEntry {
                output: true,
                external_port_id: ins.len() + j,
                internal_layer_id: result,
                axis,
            });
        }
        let ports = n.outputs.iter().map(|&o| self.info_port(o)).collect();
        let layer = self.em.layer(n.name.clone(), "TensorIterator", "opset1", vec![], ins.to_vec(), ports);
        self.em.net.layers[layer].body = Some(Box::new(Body { net: body.net, port_map, back_edges }));
        for (path, src) in body.consts {
            // a body weight's index would be read in the outer graph's weights
            if !matches!(src, ConstSource::Inline(_)) {
                return Err(OvError::Lowering {
                    node: n.name.clone(),
                    op: n.op.name().into(),
                    msg: "the step graph reads a weight; a loop body holds only inline constants".into(),
                });
            }
            self.em.consts.push(([&[layer][..], &path].concat(), src));
        }
        for (j, &o) in n.outputs.iter().enumerate() {
            self.vals[o.0] = Some(Out { layer, index: j });
        }
        Ok(())
    }

    /// `TopK-11` (values and i64 indices, largest first; `stable` keeps equal values in index
    /// order, as torch.topk).
    fn top_k(&mut self, n: &Node, x: Out, k: usize) -> Result<()> {
        let kc = self.em.scalar_i64(k as i64);
        let data = vec![
            ("axis", "-1".to_string()),
            ("mode", "max".into()),
            ("sort", "value".into()),
            ("index_element_type", "i64".into()),
            ("stable", "true".into()),
        ];
        let ports = vec![self.info_port(n.outputs[0]), self.info_port(n.outputs[1])];
        let layer = self.em.layer(n.name.clone(), "TopK", "opset11", data, vec![x, kc], ports);
        self.vals[n.outputs[0].0] = Some(Out { layer, index: 0 });
        self.vals[n.outputs[1].0] = Some(Out { layer, index: 1 });
        Ok(())
    }

    /// A SwiGLU `Moe` as the expert block `ConvertTiledMoeBlockTo3GatherMatmuls` (OpenVINO
    /// 2026.4 CPU plugin) matches: the tokens tiled once per expert, each projection one batched
    /// `MatMul` over the `[E, out, in]` weights (`transpose_b`), silu as `Sigmoid` x `Multiply`
    /// (a `Swish` is not matched), and the routing weights scattered into a dense `[t, E]` mask
    /// that weights the per-expert outputs before a sum over experts. The plugin turns the three
    /// matmuls into `GatherMatmul`s that run only the selected experts; unfused, the block
    /// computes every expert and gives the same values. 2026.4.1's `GatherMatmul` runs only with
    /// constant expert weights (an export's always are; `tests/op_coverage.rs` lists the gap).
    fn tiled_moe(&mut self, n: &Node, ins: &[Out], top_k: usize, normalize: bool) -> Out {
        let (x, wg) = (self.g.info(n.inputs[0]).clone(), self.g.info(n.inputs[2]).clone());
        let dtype = x.dtype;
        let h = x.shape[2].as_const().unwrap_or(-1);
        let (e, i) = (wg.shape[0].as_const().unwrap_or(-1), wg.shape[1].as_const().unwrap_or(-1));
        let numpy = || vec![("auto_broadcast", "numpy".to_string())];
        let tb = || vec![("transpose_a", "false".to_string()), ("transpose_b", "true".to_string())];
        let em = &mut self.em;
        let rows = em.const_i64(&[-1, h]);
        let x2 = em.op(
            "Reshape",
            "opset1",
            vec![("special_zero", "false".into())],
            vec![ins[0], rows],
            port(dtype, vec![-1, h]),
        );
        let logits = em.op("MatMul", "opset1", tb(), vec![x2, ins[1]], port(dtype, vec![-1, e]));
        let to_f32 = |em: &mut Emit, v: Out, dims: Vec<i64>| match dtype {
            DType::F32 => v,
            _ => em.op("Convert", "opset1", vec![("destination_type", "f32".into())], vec![v], port(DType::F32, dims)),
        };
        let logits = to_f32(em, logits, vec![-1, e]);
        let probs =
            em.op("Softmax", "opset8", vec![("axis", "-1".into())], vec![logits], port(DType::F32, vec![-1, e]));
        let kc = em.scalar_i64(top_k as i64);
        let data = vec![
            ("axis", "-1".to_string()),
            ("mode", "max".into()),
            ("sort", "value".into()),
            ("index_element_type", "i64".into()),
            ("stable", "true".into()),
        ];
        let k = top_k as i64;
        let ports = vec![port(DType::F32, vec![-1, k]), port(DType::I64, vec![-1, k])];
        let name = em.helper_name("TopK");
        let topk = em.layer(name, "TopK", "opset11", data, vec![probs, kc], ports);
        let (mut w, idx) = (Out { layer: topk, index: 0 }, Out { layer: topk, index: 1 });
        if normalize {
            let last = em.const_i64(&[-1]);
            let sum = em.op(
                "ReduceSum",
                "opset1",
                vec![("keep_dims", "true".into())],
                vec![w, last],
                port(DType::F32, vec![-1, 1]),
            );
            w = em.op("Divide", "opset1", numpy(), vec![w, sum], port(DType::F32, vec![-1, k]));
        }
        let zero = em.constant(&Tensor::scalar_float(DType::F32, 0.0));
        let zeros = em.binary("Multiply", probs, zero, port(DType::F32, vec![-1, e]));
        let axis = em.scalar_i64(1);
        let data = vec![("reduction", "none".to_string()), ("use_init_val", "true".into())];
        let mask =
            em.op("ScatterElementsUpdate", "opset12", data, vec![zeros, idx, w, axis], port(DType::F32, vec![-1, e]));
        let mask = match dtype {
            DType::F32 => mask,
            d => em.op(
                "Convert",
                "opset1",
                vec![("destination_type", element_type(d).into())],
                vec![mask],
                port(d, vec![-1, e]),
            ),
        };
        let perm = em.const_i64(&[1, 0]);
        let mask = em.op("Transpose", "opset1", vec![], vec![mask, perm], port(dtype, vec![e, -1]));
        let last = em.const_i64(&[-1]);
        let mask = em.op("Unsqueeze", "opset1", vec![], vec![mask, last], port(dtype, vec![e, -1, 1]));
        let reps = em.const_i64(&[e, 1]);
        let xt = em.op("Tile", "opset1", vec![], vec![x2, reps], port(dtype, vec![-1, h]));
        // `[e * t, h]` or `[e, t, h]` as `[e, t, h]` (the pass matches both reshapes)
        let per_expert = |em: &mut Emit, v: Out| {
            let shape = em.const_i64(&[e, -1, h]);
            em.op(
                "Reshape",
                "opset1",
                vec![("special_zero", "true".into())],
                vec![v, shape],
                port(dtype, vec![e, -1, h]),
            )
        };
        let xr = per_expert(em, xt);
        let g = em.op("MatMul", "opset1", tb(), vec![xr, ins[2]], port(dtype, vec![e, -1, i]));
        let u = em.op("MatMul", "opset1", tb(), vec![xr, ins[3]], port(dtype, vec![e, -1, i]));
        let sg = em.op("Sigmoid", "opset1", vec![], vec![g], port(dtype, vec![e, -1, i]));
        let silu = em.binary("Multiply", g, sg, port(dtype, vec![e, -1, i]));
        let a = em.binary("Multiply", silu, u, port(dtype, vec![e, -1, i]));
        let d = em.op("MatMul", "opset1", tb(), vec![a, ins[4]], port(dtype, vec![e, -1, h]));
        let d = per_expert(em, d);
        let d = em.binary("Multiply", d, mask, port(dtype, vec![e, -1, h]));
        let first = em.const_i64(&[0]);
        let y =
            em.op("ReduceSum", "opset1", vec![("keep_dims", "false".into())], vec![d, first], port(dtype, vec![-1, h]));
        let shape =
            em.op("ShapeOf", "opset3", vec![("output_type", "i64".into())], vec![ins[0]], port(DType::I64, vec![3]));
        let out = self.info_port(n.outputs[0]);
        let data = vec![("special_zero", "false".into())];
        let layer = self.em.layer(n.name.clone(), "Reshape", "opset1", data, vec![y, shape], vec![out]);
        Out { layer, index: 0 }
    }

    /// Whether graph input `v` becomes a state grown by each call's rows: it is one (stateful), a
    /// `CacheUpdate` writes it (a `ScatterSlots` writes its slots in place), and only native
    /// attentions read the update (they take the mask's first columns, as many as keys; a
    /// decomposed attention, e.g. with soft-capping, sizes its tensors by the whole cache, so
    /// its state keeps every slot and is written in place).
    fn grows(&self, v: ValueId) -> bool {
        let native_attention =
            |m: &Node| matches!(m.op, Op::Attention { softcap: None, sliding_window: None, sinks: false, .. });
        let read_natively =
            |update: ValueId| self.g.nodes().iter().filter(|m| m.inputs.contains(&update)).all(native_attention);
        self.opts.stateful
            && self.g.nodes().iter().any(|n| n.op == Op::CacheUpdate && n.inputs[0] == v && read_natively(n.outputs[0]))
    }

    /// The first `keys.shape[2]` columns of a static-cache mask, for keys of a grown state.
    fn mask_to_key_length(&mut self, mask: Out, keys: Out) -> Out {
        let m = self.em.net.port(mask).clone();
        let rank = self.em.net.port(keys).dims.len() as i64;
        let shape = self.em.op(
            "ShapeOf",
            "opset3",
            vec![("output_type", "i64".into())],
            vec![keys],
            port(DType::I64, vec![rank]),
        );
        let (idx, zero) = (self.em.const_i64(&[2]), self.em.scalar_i64(0));
        let len = self.em.op(
            "Gather",
            "opset8",
            vec![("batch_dims", "0".into())],
            vec![shape, idx, zero],
            port(DType::I64, vec![1]),
        );
        let (start, step, axis) = (self.em.const_i64(&[0]), self.em.const_i64(&[1]), self.em.const_i64(&[3]));
        let mut dims = m.dims.clone();
        if let Some(last) = dims.last_mut() {
            *last = -1;
        }
        self.em.op("Slice", "opset8", vec![], vec![mask, start, len, step, axis], port(m.dtype, dims))
    }

    /// `[b, kvh, t, d]` → `[b, kvh·groups, t, d]`, each KV head repeated `groups` times.
    fn repeat_kv(&mut self, v: ValueId, groups: i64) -> Result<Out> {
        let i = self.g.info(v).clone();
        let src = self.val(v);
        let (kvh, d) = (i.shape[1].as_const().unwrap_or(-1), i.shape[3].as_const().unwrap_or(-1));
        let dims = dims_of(&i.shape);
        let axes = self.em.const_i64(&[2]);
        let u = self.em.op(
            "Unsqueeze",
            "opset1",
            vec![],
            vec![src, axes],
            port(i.dtype, vec![dims[0], kvh, 1, dims[2], d]),
        );
        let reps = self.em.const_i64(&[1, 1, groups, 1, 1]);
        let b = self.em.op(
            "Broadcast",
            "opset3",
            vec![("mode", "bidirectional".into())],
            vec![u, reps],
            port(i.dtype, vec![dims[0], kvh, groups, dims[2], d]),
        );
        let to = self.em.const_i64(&[0, kvh * groups, -1, d]);
        Ok(self.em.op(
            "Reshape",
            "opset1",
            vec![("special_zero", "true".into())],
            vec![b, to],
            port(i.dtype, vec![dims[0], kvh * groups, dims[2], d]),
        ))
    }

    /// The additive mask of an `Attention`: as given when it is one, else 0 where the bool mask
    /// lets a key be attended and the dtype's lowest value elsewhere (never -inf, so a fully
    /// masked row stays finite).
    fn attention_mask(&mut self, n: &Node) -> Out {
        let mut mask = self.val(n.inputs[3]);
        if self.g.info(n.inputs[3]).dtype != DType::Bool {
            return mask;
        }
        if let Some(window) = self.folded_window(n.inputs[3]) {
            mask = self.paged_window_mask(window);
        }
        let dims = self.em.net.port(mask).dims.clone();
        let dtype = self.g.info(n.inputs[0]).dtype;
        let zero = self.em.constant(&Tensor::scalar_float(dtype, 0.0));
        let low = self.em.constant(&Tensor::scalar_float(dtype, dtype.min_finite()));
        self.em.op(
            "Select",
            "opset1",
            vec![("auto_broadcast", "numpy".into())],
            vec![mask, zero, low],
            port(dtype, dims),
        )
    }
}
