//! The closed op set: primitives every backend lowers, and high-level ops that carry a
//! decomposition into primitives (see `decompose.rs`) so a backend can lower them natively or
//! ask core to expand them.
//!
//! Each op has here: its name, its attributes as text (for the dump), and shape/dtype
//! inference over symbolic dims. Reference evaluation lives in `eval.rs`, decompositions in
//! `decompose.rs`; both match on this enum, so adding a variant is a compile error until every
//! place handles it.

use crate::dim::{broadcast_shapes, product, shape_to_string, Dim};
use crate::dtype::DType;
use crate::graph::ValueInfo;
use crate::rope::RopeConfig;
use crate::tensor::Tensor;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Exp,
    Sqrt,
    Reciprocal,
    Tanh,
    Sigmoid,
    Cos,
    Sin,
    /// The Gauss error function (exact GELU is built on it).
    Erf,
    /// The natural logarithm (softplus is built on it).
    Log,
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Max,
    Min,
    Equal,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    And,
    Or,
}

impl BinaryOp {
    pub fn is_comparison(self) -> bool {
        use BinaryOp::*;
        matches!(self, Equal | Less | LessEqual | Greater | GreaterEqual)
    }
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceKind {
    Sum,
    Mean,
    Max,
}

/// An MLP's activation (`hidden_act`), by what it computes; the transformers names that compute
/// exactly it (`activations.py: ACT2CLS`) map to it in [`Activation::from_hf`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// `silu` / `swish`: `x * sigmoid(x)`.
    Silu,
    /// `gelu`: exact GELU, `0.5 x (1 + erf(x / √2))`.
    Gelu,
    /// `gelu_pytorch_tanh` / `gelu_new`: the tanh approximation of GELU.
    GeluTanh,
    /// `relu`: `max(x, 0)`.
    Relu,
    /// `quick_gelu`: `x * sigmoid(1.702 x)`.
    QuickGelu,
}

impl Activation {
    pub const NAMES: [&'static str; 7] =
        ["silu", "swish", "gelu", "gelu_pytorch_tanh", "gelu_new", "relu", "quick_gelu"];

    pub fn from_hf(name: &str) -> Option<Activation> {
        match name {
            "silu" | "swish" => Some(Activation::Silu),
            "gelu" => Some(Activation::Gelu),
            "gelu_pytorch_tanh" | "gelu_new" => Some(Activation::GeluTanh),
            "relu" => Some(Activation::Relu),
            "quick_gelu" => Some(Activation::QuickGelu),
            _ => None,
        }
    }
}

/// How a `Moe` picks each token's experts and weighs them, from the router logits (in f32).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Routing {
    /// `softmax(logits)`, the `top_k` largest, divided by their sum when `normalize`.
    Softmax { normalize: bool },
    /// Group-limited routing (DeepSeek's): the experts in `groups` equal groups of which only
    /// the `top_groups` best compete (a group's score as [`RouterScore::group_by_two`] says);
    /// the `top_k` best competing experts, weighted by their scores (uncorrected), divided by
    /// their sum (plus 1e-20) when `normalize`, times `scale`. The logits are computed from x
    /// and the router cast to f32. One group is plain top-k over the (corrected) scores.
    Grouped { score: RouterScore, groups: usize, top_groups: usize, normalize: bool, scale: f32 },
}

/// The expert scores of a [`Routing::Grouped`] and how they choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouterScore {
    /// `softmax(logits)`; a group's score is its best expert's (DeepSeek-V2).
    Softmax,
    /// `softmax(logits)`; a group's score is the sum of its two best (Mistral 4).
    SoftmaxTwoBest,
    /// `sigmoid(logits)`, experts chosen by `sigmoid + correction` (a `Moe` input `[experts]`,
    /// DeepSeek-V3's and GLM-4.5's `e_score_correction_bias`); a group's score is the sum of
    /// its two best corrected scores.
    SigmoidCorrected,
    /// `sigmoid(logits)`, experts chosen by them; a group's score is the sum of its two best
    /// (Llama 4's router, in one group).
    Sigmoid,
    /// `softmax(logits)`, experts chosen by `softmax + correction` (ERNIE 4.5's
    /// `moe_statics.e_score_correction_bias`); a group's score is the sum of its two best.
    SoftmaxCorrected,
}

impl RouterScore {
    /// Whether the scores are `sigmoid(logits)` rather than `softmax(logits)`.
    pub fn sigmoid(self) -> bool {
        matches!(self, RouterScore::Sigmoid | RouterScore::SigmoidCorrected)
    }

    /// Whether experts are chosen by their scores plus a correction input.
    pub fn corrected(self) -> bool {
        matches!(self, RouterScore::SigmoidCorrected | RouterScore::SoftmaxCorrected)
    }

    /// Whether a group's score is the sum of its two best (else its best).
    pub fn group_by_two(self) -> bool {
        self != RouterScore::Softmax
    }

    /// What an expert outside the competing groups scores: 0 for uncorrected scores (as
    /// transformers' `masked_fill`), the lowest f32 for corrected ones (which may be negative).
    pub fn masked_value(self) -> f32 {
        if self.corrected() {
            f32::MIN
        } else {
            0.0
        }
    }
}

impl Routing {
    /// Whether the routing reads a correction input after the weights and biases.
    pub fn corrected(&self) -> bool {
        matches!(self, Routing::Grouped { score, .. } if score.corrected())
    }
}

/// How an expert combines its gate and up projections.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Glu {
    /// `act(gate) * up`.
    Gated(Activation),
    /// GPT-OSS's clamped SwiGLU: `g = min(gate, limit)`, `u = clamp(up, -limit, limit)`,
    /// `g * sigmoid(alpha * g) * (u + 1)`.
    Clamped { alpha: f32, limit: f32 },
}

/// The sliding window of a convolution or a pooling over the trailing (spatial) axes of
/// `[batch, channels, *spatial]`, one entry per spatial axis (one or two: torch's `conv1d`,
/// `conv2d`, `max_pool2d`). Padding may differ at the two ends of an axis: TensorFlow's
/// "SAME" padding, which MobileNet checkpoints use, pads one more row at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub kernel: Vec<usize>,
    pub stride: Vec<usize>,
    pub dilation: Vec<usize>,
    pub pads_begin: Vec<usize>,
    pub pads_end: Vec<usize>,
}

impl Window {
    /// A window of `kernel` with torch's symmetric `padding` and no dilation.
    pub fn new(kernel: &[usize], stride: &[usize], padding: &[usize]) -> Window {
        Window {
            kernel: kernel.to_vec(),
            stride: stride.to_vec(),
            dilation: vec![1; kernel.len()],
            pads_begin: padding.to_vec(),
            pads_end: padding.to_vec(),
        }
    }

    pub fn rank(&self) -> usize {
        self.kernel.len()
    }

    /// The output length of spatial axis `axis` over an input of `len`, `None` when the padded
    /// input is shorter than the (dilated) kernel.
    pub fn out_len(&self, axis: usize, len: usize) -> Option<usize> {
        let span = self.dilation[axis] * (self.kernel[axis] - 1) + 1;
        let padded = len + self.pads_begin[axis] + self.pads_end[axis];
        (padded >= span).then(|| (padded - span) / self.stride[axis] + 1)
    }

    /// The output's spatial shape over `x`'s spatial dims, or why it has none: a static axis
    /// must be at least the window; a symbolic one gives `⌊(len + pads - span) / stride⌋ + 1`
    /// (an input too short for it fails in the runtime, as it does in torch).
    pub fn out_shape(&self, x: &[Dim]) -> Result<Vec<Dim>, String> {
        let r = self.rank();
        let lists = [&self.stride, &self.dilation, &self.pads_begin, &self.pads_end];
        if !(1..=2).contains(&r) || lists.iter().any(|l| l.len() != r) {
            return Err(format!("a window needs 1 or 2 spatial axes, each with every attribute: {self:?}"));
        }
        if self.kernel.iter().chain(&self.stride).chain(&self.dilation).any(|&v| v == 0) {
            return Err(format!("kernel, stride and dilation must be positive: {self:?}"));
        }
        if x.len() != r + 2 {
            return Err(format!("x {} is not [batch, channels] and {r} spatial axes", shape_to_string(x)));
        }
        (0..r)
            .map(|i| match x[2 + i].as_const() {
                Some(len) => self.out_len(i, len.max(0) as usize).map(Dim::from).ok_or_else(|| {
                    format!("spatial axis {} of length {len} is shorter than the window {self:?}", 2 + i)
                }),
                None => {
                    let span = self.dilation[i] * (self.kernel[i] - 1) + 1;
                    let slack = (self.pads_begin[i] + self.pads_end[i]) as i64 - span as i64;
                    Ok(x[2 + i].add(&Dim::konst(slack)).floor_div(self.stride[i] as i64).add(&Dim::konst(1)))
                }
            })
            .collect()
    }

    /// [`Window::out_shape`] when every spatial axis is static (what a decomposition into
    /// constant gathers needs).
    pub fn static_out_shape(&self, x: &[Dim]) -> Result<Vec<usize>, String> {
        let out = self.out_shape(x)?;
        out.iter()
            .map(|d| d.as_const().map(|v| v as usize))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| format!("spatial axes {} are not static", shape_to_string(&x[2..])))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    // ---- primitives ----
    /// A small inline constant (masks, scalars); weights are lazy graph weights instead.
    Constant(Tensor),
    Unary(UnaryOp),
    /// Numpy-broadcasting binary op; comparisons and logical ops produce bool.
    Binary(BinaryOp),
    /// `where(cond, a, b)`, broadcasting.
    Where,
    Cast(DType),
    /// Batched matrix product `[..., m, k] x [..., k, n]`, batch dims broadcast.
    MatMul,
    Reduce {
        kind: ReduceKind,
        axes: Vec<usize>,
        keep_dims: bool,
    },
    Softmax {
        axis: usize,
    },
    /// Running sum along `axis` (`y[i] = x[0] + ... + x[i]`), in the input's dtype: positions
    /// counted over an attention mask.
    CumSum {
        axis: usize,
    },
    Reshape {
        shape: Vec<Dim>,
    },
    Transpose {
        perm: Vec<usize>,
    },
    /// Broadcast to `shape` (numpy rules).
    Expand {
        shape: Vec<Dim>,
    },
    Concat {
        axis: usize,
    },
    /// `x[..., start:end, ...]` on `axis`, step 1.
    Slice {
        axis: usize,
        start: Dim,
        end: Dim,
    },
    /// `data.index_select(axis, indices)` with an indices tensor of any rank.
    Gather {
        axis: usize,
    },
    /// `[0, 1, …, len - 1]` as i64.
    Iota {
        len: Dim,
    },

    // ---- high-level ops (each has a decomposition) ----
    /// `w * (x * rsqrt(mean(x², -1) + eps))`, computed in f32 like transformers' RMSNorm.
    RmsNorm {
        eps: f32,
    },
    /// `x [..., n], weight [n] (, bias [n])` -> `(x - mean) / sqrt(var + eps) * weight (+ bias)`
    /// over the last axis with the biased variance, computed in f32 and rounded once to `x`'s
    /// dtype, like torch's `layer_norm`.
    LayerNorm {
        eps: f32,
    },
    /// An activation applied elementwise (a plain MLP's `fc -> act -> proj`).
    Activate(Activation),
    /// `position_ids [b, s]` -> `cos, sin [b, s, rope.dim]` (f32, times the attention scaling).
    RotaryCosSin {
        rope: RopeConfig,
    },
    /// `x [b, h, s, d], cos [b, s, d], sin [b, s, d]` -> `x*cos + rotate_half(x)*sin`. The
    /// tables repeat their first half in the second, as `RotaryCosSin` makes them: a lowering
    /// may read only the first half (ONNX `RotaryEmbedding` does).
    ApplyRotary,
    /// `q [b, h, s, d], k [b, kvh, t, d], v [b, kvh, t, dv], mask [b|1, 1, s|1, t]`
    /// (+ `q_pos [b|1, s], k_pos [b|1, t]` when `sliding_window` is set) -> `[b, h, s, dv]`.
    /// GQA when `kvh < h`. A bool mask (true = may attend, what builders emit): masked scores
    /// take the dtype's lowest value, never -inf. A float mask of `q`'s dtype is additive: it
    /// is added to the scaled (and capped) scores in f32 before the softmax (what a patch turns
    /// a bool mask into for a runtime that mishandles bool masks); with 0 and the dtype's lowest
    /// value it gives the bool mask's result on every row with a key to attend, and in float32
    /// on fully masked rows too. A sliding window needs a bool mask. With `sinks`, a last input
    /// `sinks [h]` (q's dtype) is one more logit per head that every query's softmax includes
    /// and whose probability is dropped (GPT-OSS's learned attention sinks): the
    /// probabilities of a row sum to less than one.
    Attention {
        scale: f32,
        softcap: Option<f32>,
        sliding_window: Option<usize>,
        sinks: bool,
    },
    /// `x [..., in] · w[out, in]ᵀ (+ b[out])`.
    Linear,
    /// `cache [b, h, L, d], new [b, h, q, d], slots i64 [b|1, q]` -> the cache with row
    /// `slots[j]` of axis 2 replaced by `new[.., j, ..]` (a static KV cache written at the
    /// positions of the new tokens). Backends realise it in place, each its own way (OpenVINO's
    /// stateful export grows a state by the new rows, relying on calls in position order).
    CacheUpdate,
    /// `CacheUpdate`'s computation with no licence to realise it another way than writing the
    /// rows at their slots (never by growing a state); what a patch turns a `CacheUpdate` into
    /// for a runtime that fails on the other realisation.
    ScatterSlots,
    /// `down(act(gate(x)) * up(x))` with weights `[inter, hidden], [inter, hidden], [hidden, inter]`
    /// and optionally their biases `[inter], [inter], [hidden]` (inputs 4..7).
    GatedMlp {
        act: Activation,
    },
    /// `x [..., n]` -> `values [..., k]` (x's dtype), `indices [..., k]` (i64): the `k` largest
    /// along the last axis, largest first; equal values in index order (as `torch.topk` and
    /// ONNX `TopK` order them).
    TopK {
        k: usize,
    },
    /// A sparse mixture-of-experts MLP: `x [b, s, hidden], router [experts, hidden],
    /// gate [experts, inter, hidden], up [experts, inter, hidden], down [experts, hidden, inter]`
    /// (, when `biased`: `router_bias [experts]`, `gate_bias [experts, inter]`, `up_bias
    /// [experts, inter]`, `down_bias [experts, hidden]`: GPT-OSS's router and experts) ->
    /// `[b, s, hidden]`.
    /// (, with `Routing::Grouped { score: SigmoidCorrected, .. }`: the correction `[experts]`).
    /// Per token: the `top_k` experts and their weights as `routing` picks them from the logits
    /// `x · routerᵀ (+ b)` (`Softmax { normalize: true }` is a softmax over the chosen logits),
    /// rounded to x's dtype; the output is `Σ p_e · down_e(glu(gate_e(x), up_e(x)))` over the
    /// selected experts (the expert weights are stacked `[out, in]` linears, as the checkpoint
    /// stores each expert). `few_tokens`: each batch row brings a static number of tokens `c`
    /// with `c * top_k <= experts` (a decode step), which the plan knows and a backend may
    /// lower differently (only the selected experts' weights per token). `weigh_input`: the
    /// weights scale each expert's input instead, `Σ down_e(glu(gate_e(p_e x), up_e(p_e x)))`
    /// (Llama 4, whose experts see every token pre-scaled by its router score).
    /// `own_router`: a router module of its own (Gemma 4's), two more inputs, last: the logits
    /// are computed from `router_x [b, s, hidden]` instead of `x` (its own norm of the residual,
    /// while the experts read another), and each chosen expert's weight is multiplied by its
    /// entry of `expert_scale [experts]` (after any renormalisation).
    Moe {
        top_k: usize,
        routing: Routing,
        glu: Glu,
        biased: bool,
        few_tokens: bool,
        weigh_input: bool,
        own_router: bool,
    },
    /// `Linear` over a quantized weight: `x [..., in], q [out, in] (i8, or u8 with zero
    /// points), scales [out, in / group] (x's dtype) (, zero_points u8 [out, in / group]
    /// when `zero_point`) (, bias [out])` -> `x · ((q - z) * s)ᵀ (+ b)`. `bits` (4 or 8) is the
    /// range of `q`, which the IR holds one value per byte (see `quant.rs`).
    QuantLinear {
        bits: u8,
        group: usize,
        zero_point: bool,
    },
    /// Rows of a quantized table: `q [rows, cols], scales [rows, cols / group] (, zero_points)
    /// , ids (i64, any rank)` -> `(q[ids] - z[ids]) * s[ids]` of shape `[ids..., cols]` in the
    /// scales' dtype (a quantized embedding).
    QuantGather {
        bits: u8,
        group: usize,
        zero_point: bool,
    },
    /// A convolution as torch's `conv1d` / `conv2d`: `x [b, cin, *spatial], w [cout, cin /
    /// groups, *kernel] (, bias [cout])` -> `[b, cout, *out]`, the input padded with zeros as
    /// the window says; channel group `i` of the output reads group `i` of the input (a
    /// depthwise convolution has `groups == cin`). Spatial dims may be symbolic (raw audio of
    /// any length); the output's are then floors ([`Window::out_shape`]).
    Conv {
        window: Window,
        groups: usize,
    },
    /// The largest value in each window, as torch's `max_pool2d` (padding never wins):
    /// `x [b, c, *spatial]` -> `[b, c, *out]`, spatial dims as [`Op::Conv`]'s.
    MaxPool {
        window: Window,
    },
    /// The selective scan of Mamba and Mamba2 over the sequence, in f32: `x [b, d, L],
    /// dt [b, d, L] (after softplus), A [d, n], B [b, L, g, n], C [b, L, g, n], h0 [b, d, n]`
    /// -> `y [b, d, L]`, `h [b, d, n]`. The `d` channels form `g` equal groups (Mamba2's
    /// `n_groups`; Mamba has one), channel `c` reading group `c / (d / g)` of B and C. Per step,
    /// as transformers' recurrent path: `h = exp(dt_t * A) * h + (dt_t * B_t) * x_t`,
    /// `y_t = h · C_t`. The `D` skip and the gate are the caller's. The recurrence is O(L): a
    /// backend without a loop lowering gets the steps unrolled over a static `L` (a decode step
    /// is one), never a quadratic form.
    SelectiveScan,
    /// The gated delta rule of Qwen3-Next's and Qwen3.5's linear attention over the sequence,
    /// in f32: `q [b, h, L, dk]` (L2-normalised and scaled), `k [b, h, L, dk]` (L2-normalised),
    /// `v [b, h, L, dv]`, `g [b, h, L]` (the log decay), `beta [b, h, L]`, `S0 [b, h, dk, dv]`
    /// -> `o [b, h, L, dv]`, `S [b, h, dk, dv]`. Per step, as transformers'
    /// `torch_recurrent_gated_delta_rule`: `S = S * exp(g_t)`, `delta = (v_t - S^T k_t) *
    /// beta_t`, `S = S + k_t (outer) delta`, `o_t = S^T q_t`. Like [`Op::SelectiveScan`], a
    /// recurrence O(L): a backend without a loop gets it unrolled over a static `L`.
    DeltaScan,
}

impl Op {
    pub fn name(&self) -> &'static str {
        match self {
            Op::Constant(_) => "Constant",
            Op::Unary(u) => match u {
                UnaryOp::Neg => "Neg",
                UnaryOp::Exp => "Exp",
                UnaryOp::Sqrt => "Sqrt",
                UnaryOp::Reciprocal => "Reciprocal",
                UnaryOp::Tanh => "Tanh",
                UnaryOp::Sigmoid => "Sigmoid",
                UnaryOp::Cos => "Cos",
                UnaryOp::Sin => "Sin",
                UnaryOp::Erf => "Erf",
                UnaryOp::Log => "Log",
                UnaryOp::Not => "Not",
            },
            Op::Binary(b) => match b {
                BinaryOp::Add => "Add",
                BinaryOp::Sub => "Sub",
                BinaryOp::Mul => "Mul",
                BinaryOp::Div => "Div",
                BinaryOp::Pow => "Pow",
                BinaryOp::Max => "Max",
                BinaryOp::Min => "Min",
                BinaryOp::Equal => "Equal",
                BinaryOp::Less => "Less",
                BinaryOp::LessEqual => "LessEqual",
                BinaryOp::Greater => "Greater",
                BinaryOp::GreaterEqual => "GreaterEqual",
                BinaryOp::And => "And",
                BinaryOp::Or => "Or",
            },
            Op::Where => "Where",
            Op::Cast(_) => "Cast",
            Op::MatMul => "MatMul",
            Op::Reduce { kind, .. } => match kind {
                ReduceKind::Sum => "ReduceSum",
                ReduceKind::Mean => "ReduceMean",
                ReduceKind::Max => "ReduceMax",
            },
            Op::Softmax { .. } => "Softmax",
            Op::CumSum { .. } => "CumSum",
            Op::Reshape { .. } => "Reshape",
            Op::Transpose { .. } => "Transpose",
            Op::Expand { .. } => "Expand",
            Op::Concat { .. } => "Concat",
            Op::Slice { .. } => "Slice",
            Op::Gather { .. } => "Gather",
            Op::Iota { .. } => "Iota",
            Op::RmsNorm { .. } => "RmsNorm",
            Op::LayerNorm { .. } => "LayerNorm",
            Op::Activate(_) => "Activate",
            Op::RotaryCosSin { .. } => "RotaryCosSin",
            Op::ApplyRotary => "ApplyRotary",
            Op::Attention { .. } => "Attention",
            Op::Linear => "Linear",
            Op::GatedMlp { .. } => "GatedMlp",
            Op::TopK { .. } => "TopK",
            Op::Moe { .. } => "Moe",
            Op::QuantLinear { .. } => "QuantLinear",
            Op::QuantGather { .. } => "QuantGather",
            Op::Conv { .. } => "Conv",
            Op::MaxPool { .. } => "MaxPool",
            Op::SelectiveScan => "SelectiveScan",
            Op::DeltaScan => "DeltaScan",
            Op::CacheUpdate => "CacheUpdate",
            Op::ScatterSlots => "ScatterSlots",
        }
    }

    /// Rewrites every dim held in the op's attributes.
    pub fn map_dims(&mut self, f: &dyn Fn(&Dim) -> Dim) {
        match self {
            Op::Reshape { shape } | Op::Expand { shape } => shape.iter_mut().for_each(|d| *d = f(d)),
            Op::Slice { start, end, .. } => {
                *start = f(start);
                *end = f(end);
            }
            Op::Iota { len } => *len = f(len),
            // no dims in their attributes (listed, so a new op says whether it has any)
            Op::Constant(_)
            | Op::Unary(_)
            | Op::Binary(_)
            | Op::Where
            | Op::Cast(_)
            | Op::MatMul
            | Op::Reduce { .. }
            | Op::Softmax { .. }
            | Op::CumSum { .. }
            | Op::Transpose { .. }
            | Op::Concat { .. }
            | Op::Gather { .. }
            | Op::RmsNorm { .. }
            | Op::LayerNorm { .. }
            | Op::Activate(_)
            | Op::RotaryCosSin { .. }
            | Op::ApplyRotary
            | Op::Attention { .. }
            | Op::Linear
            | Op::CacheUpdate
            | Op::ScatterSlots
            | Op::GatedMlp { .. }
            | Op::TopK { .. }
            | Op::Moe { .. }
            | Op::QuantLinear { .. }
            | Op::QuantGather { .. }
            | Op::Conv { .. }
            | Op::MaxPool { .. }
            | Op::SelectiveScan
            | Op::DeltaScan => {}
        }
    }

    /// True for ops that carry a decomposition into primitives (`decompose::expand`).
    pub fn is_high_level(&self) -> bool {
        match self {
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
            | Op::Iota { .. } => false,
            Op::RmsNorm { .. }
            | Op::LayerNorm { .. }
            | Op::Activate(_)
            | Op::RotaryCosSin { .. }
            | Op::ApplyRotary
            | Op::Attention { .. }
            | Op::Linear
            | Op::CacheUpdate
            | Op::ScatterSlots
            | Op::GatedMlp { .. }
            | Op::TopK { .. }
            | Op::Moe { .. }
            | Op::QuantLinear { .. }
            | Op::QuantGather { .. }
            | Op::Conv { .. }
            | Op::MaxPool { .. }
            | Op::SelectiveScan
            | Op::DeltaScan => true,
        }
    }

    /// Attributes as stable text for the dump (`{axis=2}`), empty when there are none.
    pub fn attrs(&self) -> String {
        let dims = |d: &[Dim]| shape_to_string(d);
        let s = match self {
            Op::Constant(t) => format!("{}{:?}", t.dtype(), t.shape()),
            Op::Cast(d) => format!("to={d}"),
            Op::Reduce { axes, keep_dims, .. } => format!("axes={axes:?}, keep_dims={keep_dims}"),
            Op::Softmax { axis } | Op::CumSum { axis } | Op::Concat { axis } | Op::Gather { axis } => {
                format!("axis={axis}")
            }
            Op::Reshape { shape } | Op::Expand { shape } => format!("shape={}", dims(shape)),
            Op::Transpose { perm } => format!("perm={perm:?}"),
            Op::Slice { axis, start, end } => format!("axis={axis}, start={start}, end={end}"),
            Op::Iota { len } => format!("len={len}"),
            Op::RmsNorm { eps } | Op::LayerNorm { eps } => format!("eps={eps:e}"),
            Op::Activate(act) => format!("act={act:?}"),
            Op::RotaryCosSin { rope } => {
                format!(
                    "type={}, theta={}, dim={}, scaling={}",
                    rope.rope_type(),
                    rope.theta,
                    rope.dim,
                    rope.attention_scaling()
                )
            }
            Op::Attention { scale, softcap, sliding_window, sinks } => {
                let mut s = format!("scale={scale}");
                if *sinks {
                    s += ", sinks";
                }
                if let Some(c) = softcap {
                    s += &format!(", softcap={c}");
                }
                if let Some(w) = sliding_window {
                    s += &format!(", window={w}");
                }
                s
            }
            Op::GatedMlp { act } => format!("act={act:?}"),
            Op::Conv { window, groups } => format!("{}, groups={groups}", window_attrs(window)),
            Op::MaxPool { window } => window_attrs(window),
            Op::TopK { k } => format!("k={k}"),
            Op::QuantLinear { bits, group, zero_point } | Op::QuantGather { bits, group, zero_point } => {
                format!("bits={bits}, group={group}, zero_point={zero_point}")
            }
            Op::Moe { top_k, routing, glu, biased, few_tokens, weigh_input, own_router } => format!(
                "top_k={top_k}, routing={routing:?}, glu={glu:?}, biased={biased}, few_tokens={few_tokens}, \
                 weigh_input={weigh_input}, own_router={own_router}"
            ),
            // attributes in the name (`Add`, `ReduceMax`) or none
            Op::Unary(_)
            | Op::Binary(_)
            | Op::Where
            | Op::MatMul
            | Op::ApplyRotary
            | Op::Linear
            | Op::CacheUpdate
            | Op::ScatterSlots
            | Op::SelectiveScan
            | Op::DeltaScan => String::new(),
        };
        if s.is_empty() {
            s
        } else {
            format!("{{{s}}}")
        }
    }

    /// Output dtypes and shapes from input infos; the error is a plain message, the graph adds
    /// the node name and op.
    pub fn infer(&self, ins: &[&ValueInfo]) -> Result<Vec<ValueInfo>, String> {
        let one = |dtype, shape| Ok(vec![ValueInfo::new(dtype, shape)]);
        match self {
            Op::Constant(t) => {
                arity(ins, 0)?;
                one(t.dtype(), t.shape().iter().map(|&d| Dim::from(d)).collect())
            }
            Op::Unary(u) => {
                arity(ins, 1)?;
                let x = ins[0];
                match u {
                    UnaryOp::Not if x.dtype != DType::Bool => Err(format!("Not needs bool, got {}", x.dtype)),
                    UnaryOp::Not => one(DType::Bool, x.shape.clone()),
                    UnaryOp::Neg => one(x.dtype, x.shape.clone()),
                    _ => {
                        float_input(x, 0)?;
                        one(x.dtype, x.shape.clone())
                    }
                }
            }
            Op::Binary(b) => {
                arity(ins, 2)?;
                let (a, c) = (ins[0], ins[1]);
                if a.dtype != c.dtype {
                    return Err(format!("operand dtypes differ: {} vs {}", a.dtype, c.dtype));
                }
                let shape = bcast(&a.shape, &c.shape)?;
                if b.is_logical() {
                    if a.dtype != DType::Bool {
                        return Err(format!("{b:?} needs bool operands, got {}", a.dtype));
                    }
                    one(DType::Bool, shape)
                } else if b.is_comparison() {
                    one(DType::Bool, shape)
                } else if a.dtype == DType::Bool {
                    Err(format!("{b:?} does not take bool operands"))
                } else {
                    one(a.dtype, shape)
                }
            }
            Op::Where => {
                arity(ins, 3)?;
                if ins[0].dtype != DType::Bool {
                    return Err(format!("condition must be bool, got {}", ins[0].dtype));
                }
                if ins[1].dtype != ins[2].dtype {
                    return Err(format!("branch dtypes differ: {} vs {}", ins[1].dtype, ins[2].dtype));
                }
                let s = bcast(&bcast(&ins[0].shape, &ins[1].shape)?, &ins[2].shape)?;
                one(ins[1].dtype, s)
            }
            Op::Cast(d) => {
                arity(ins, 1)?;
                one(*d, ins[0].shape.clone())
            }
            Op::MatMul => {
                arity(ins, 2)?;
                let (a, b) = (ins[0], ins[1]);
                float_input(a, 0)?;
                if a.dtype != b.dtype {
                    return Err(format!("operand dtypes differ: {} vs {}", a.dtype, b.dtype));
                }
                if a.rank() < 2 || b.rank() < 2 {
                    return Err("MatMul needs operands of rank >= 2".into());
                }
                let (m, k) = (&a.shape[a.rank() - 2], &a.shape[a.rank() - 1]);
                let (k2, n) = (&b.shape[b.rank() - 2], &b.shape[b.rank() - 1]);
                if k != k2 {
                    return Err(format!("inner dims differ: {k} vs {k2}"));
                }
                let mut shape = bcast(&a.shape[..a.rank() - 2], &b.shape[..b.rank() - 2])?;
                shape.push(m.clone());
                shape.push(n.clone());
                one(a.dtype, shape)
            }
            Op::Reduce { kind, axes, keep_dims } => {
                arity(ins, 1)?;
                let x = ins[0];
                if *kind == ReduceKind::Mean {
                    float_input(x, 0)?;
                }
                check_axes(axes, x.rank())?;
                let shape = x
                    .shape
                    .iter()
                    .enumerate()
                    .filter_map(|(i, d)| match (axes.contains(&i), keep_dims) {
                        (true, true) => Some(Dim::konst(1)),
                        (true, false) => None,
                        (false, _) => Some(d.clone()),
                    })
                    .collect();
                one(x.dtype, shape)
            }
            Op::Softmax { axis } => {
                arity(ins, 1)?;
                float_input(ins[0], 0)?;
                check_axes(&[*axis], ins[0].rank())?;
                one(ins[0].dtype, ins[0].shape.clone())
            }
            Op::CumSum { axis } => {
                arity(ins, 1)?;
                if !matches!(ins[0].dtype, DType::F32 | DType::I64) {
                    return Err(format!("CumSum sums f32 or i64, got {}", ins[0].dtype));
                }
                check_axes(&[*axis], ins[0].rank())?;
                one(ins[0].dtype, ins[0].shape.clone())
            }
            Op::Reshape { shape } => {
                arity(ins, 1)?;
                let (from, to) = (product(&ins[0].shape), product(shape));
                if from != to {
                    return Err(format!(
                        "cannot reshape {} ({from} elements) to {} ({to} elements)",
                        shape_to_string(&ins[0].shape),
                        shape_to_string(shape)
                    ));
                }
                one(ins[0].dtype, shape.clone())
            }
            Op::Transpose { perm } => {
                arity(ins, 1)?;
                let mut sorted = perm.clone();
                sorted.sort_unstable();
                if sorted != (0..ins[0].rank()).collect::<Vec<_>>() {
                    return Err(format!("{perm:?} is not a permutation of rank {}", ins[0].rank()));
                }
                one(ins[0].dtype, perm.iter().map(|&p| ins[0].shape[p].clone()).collect())
            }
            Op::Expand { shape } => {
                arity(ins, 1)?;
                let out = bcast(&ins[0].shape, shape)?;
                if &out != shape {
                    return Err(format!(
                        "cannot expand {} to {}",
                        shape_to_string(&ins[0].shape),
                        shape_to_string(shape)
                    ));
                }
                one(ins[0].dtype, out)
            }
            Op::Concat { axis } => {
                if ins.is_empty() {
                    return Err("Concat needs at least one input".into());
                }
                let first = ins[0];
                check_axes(&[*axis], first.rank())?;
                let mut total = Dim::konst(0);
                for (i, x) in ins.iter().enumerate() {
                    if x.dtype != first.dtype || x.rank() != first.rank() {
                        return Err(format!(
                            "input {i} is {}{}, input 0 is {}{}",
                            x.dtype,
                            shape_to_string(&x.shape),
                            first.dtype,
                            shape_to_string(&first.shape)
                        ));
                    }
                    for (j, (a, b)) in x.shape.iter().zip(&first.shape).enumerate() {
                        if j != *axis && a != b {
                            return Err(format!("input {i} differs from input 0 on axis {j}: {a} vs {b}"));
                        }
                    }
                    total = total.add(&x.shape[*axis]);
                }
                let mut shape = first.shape.clone();
                shape[*axis] = total;
                one(first.dtype, shape)
            }
            Op::Slice { axis, start, end } => {
                arity(ins, 1)?;
                check_axes(&[*axis], ins[0].rank())?;
                let mut shape = ins[0].shape.clone();
                shape[*axis] = end.sub(start);
                one(ins[0].dtype, shape)
            }
            Op::Gather { axis } => {
                arity(ins, 2)?;
                let (data, idx) = (ins[0], ins[1]);
                check_axes(&[*axis], data.rank())?;
                if !idx.dtype.is_int() {
                    return Err(format!("indices must be integers, got {}", idx.dtype));
                }
                let mut shape = data.shape[..*axis].to_vec();
                shape.extend(idx.shape.iter().cloned());
                shape.extend(data.shape[axis + 1..].iter().cloned());
                one(data.dtype, shape)
            }
            Op::Iota { len } => {
                arity(ins, 0)?;
                one(DType::I64, vec![len.clone()])
            }
            Op::RmsNorm { .. } => {
                arity(ins, 2)?;
                let (x, w) = (ins[0], ins[1]);
                float_input(x, 0)?;
                let last = x.shape.last().ok_or("RmsNorm needs rank >= 1")?;
                if w.shape != [last.clone()] {
                    return Err(format!("weight {} does not match last axis {last}", shape_to_string(&w.shape)));
                }
                one(w.dtype, x.shape.clone())
            }
            Op::LayerNorm { .. } => {
                if ins.len() != 2 && ins.len() != 3 {
                    return Err(format!("LayerNorm takes x, weight and an optional bias; got {} inputs", ins.len()));
                }
                let x = ins[0];
                float_input(x, 0)?;
                let last = x.shape.last().ok_or("LayerNorm needs rank >= 1")?;
                for (p, name) in ins[1..].iter().zip(["weight", "bias"]) {
                    if p.shape != [last.clone()] || p.dtype != x.dtype {
                        return Err(format!(
                            "{name} {}{} does not fit x {}{} (last axis {last})",
                            p.dtype,
                            shape_to_string(&p.shape),
                            x.dtype,
                            shape_to_string(&x.shape)
                        ));
                    }
                }
                one(x.dtype, x.shape.clone())
            }
            Op::Activate(_) => {
                arity(ins, 1)?;
                float_input(ins[0], 0)?;
                one(ins[0].dtype, ins[0].shape.clone())
            }
            Op::RotaryCosSin { rope } => {
                arity(ins, 1)?;
                rope.check()?;
                let p = ins[0];
                if p.dtype != DType::I64 || p.rank() != 2 {
                    return Err(format!(
                        "position_ids must be i64 [batch, seq], got {}{}",
                        p.dtype,
                        shape_to_string(&p.shape)
                    ));
                }
                let shape = vec![p.shape[0].clone(), p.shape[1].clone(), Dim::from(rope.dim)];
                Ok(vec![ValueInfo::new(DType::F32, shape.clone()), ValueInfo::new(DType::F32, shape)])
            }
            Op::ApplyRotary => {
                arity(ins, 3)?;
                let (x, c, s) = (ins[0], ins[1], ins[2]);
                float_input(x, 0)?;
                if x.rank() != 4 || c.rank() != 3 || c.shape != s.shape {
                    return Err("ApplyRotary needs x [b, h, s, d] and cos/sin [b, s, d]".into());
                }
                if c.dtype != x.dtype || s.dtype != x.dtype {
                    return Err(format!("cos/sin dtype {} differs from x dtype {}", c.dtype, x.dtype));
                }
                let d = &x.shape[3];
                if d.as_const().is_some_and(|d| d % 2 != 0) {
                    return Err(format!("rotary dim {d} is odd"));
                }
                let cos4 = [c.shape[0].clone(), Dim::konst(1), c.shape[1].clone(), c.shape[2].clone()];
                if bcast(&x.shape, &cos4)? != x.shape {
                    return Err(format!(
                        "cos {} does not broadcast to x {}",
                        shape_to_string(&c.shape),
                        shape_to_string(&x.shape)
                    ));
                }
                one(x.dtype, x.shape.clone())
            }
            Op::Attention { sliding_window, sinks, .. } => {
                arity(ins, 4 + 2 * usize::from(sliding_window.is_some()) + usize::from(*sinks))?;
                let (q, k, v, m) = (ins[0], ins[1], ins[2], ins[3]);
                float_input(q, 0)?;
                if q.rank() != 4 || k.rank() != 4 || v.rank() != 4 {
                    return Err("q, k, v must be rank 4 [batch, heads, seq, head_dim]".into());
                }
                if q.dtype != k.dtype || q.dtype != v.dtype {
                    return Err("q, k, v dtypes differ".into());
                }
                if q.shape[3] != k.shape[3] || k.shape[2] != v.shape[2] || k.shape[1] != v.shape[1] {
                    return Err(format!(
                        "q {}, k {}, v {} do not fit",
                        shape_to_string(&q.shape),
                        shape_to_string(&k.shape),
                        shape_to_string(&v.shape)
                    ));
                }
                let (h, kvh) = (q.shape[1].as_const(), k.shape[1].as_const());
                match (h, kvh) {
                    (Some(h), Some(kvh)) if kvh > 0 && h % kvh == 0 => {}
                    _ => {
                        return Err(format!("query heads {} are not a multiple of kv heads {}", q.shape[1], k.shape[1]))
                    }
                }
                if m.dtype != DType::Bool && m.dtype != q.dtype {
                    return Err(format!("mask must be bool or additive {}, got {}", q.dtype, m.dtype));
                }
                if m.dtype != DType::Bool && sliding_window.is_some() {
                    return Err("a sliding window needs a bool mask (fold it before making the mask additive)".into());
                }
                let scores = [q.shape[0].clone(), q.shape[1].clone(), q.shape[2].clone(), k.shape[2].clone()];
                if bcast(&scores, &m.shape)? != scores {
                    return Err(format!(
                        "mask {} does not broadcast to scores {}",
                        shape_to_string(&m.shape),
                        shape_to_string(&scores)
                    ));
                }
                if sliding_window.is_some() {
                    let (qp, kp) = (ins[4], ins[5]);
                    if qp.dtype != DType::I64 || kp.dtype != DType::I64 || qp.rank() != 2 || kp.rank() != 2 {
                        return Err("q_pos / k_pos must be i64 [batch, seq]".into());
                    }
                }
                if *sinks {
                    let s = ins[ins.len() - 1];
                    if s.shape != [q.shape[1].clone()] || s.dtype != q.dtype {
                        return Err(format!(
                            "sinks {}{} must be {}[{}] (one per query head)",
                            s.dtype,
                            shape_to_string(&s.shape),
                            q.dtype,
                            q.shape[1]
                        ));
                    }
                }
                one(q.dtype, vec![q.shape[0].clone(), q.shape[1].clone(), q.shape[2].clone(), v.shape[3].clone()])
            }
            Op::Linear => {
                if ins.len() != 2 && ins.len() != 3 {
                    return Err(format!("Linear takes 2 or 3 inputs, got {}", ins.len()));
                }
                let (x, w) = (ins[0], ins[1]);
                float_input(x, 0)?;
                if w.rank() != 2 || x.shape.last() != Some(&w.shape[1]) {
                    return Err(format!(
                        "x {} does not fit weight {} ([out, in])",
                        shape_to_string(&x.shape),
                        shape_to_string(&w.shape)
                    ));
                }
                if x.dtype != w.dtype {
                    return Err(format!("x dtype {} differs from weight dtype {}", x.dtype, w.dtype));
                }
                check_bias(ins.get(2).copied(), w)?;
                let mut shape = x.shape.clone();
                *shape.last_mut().expect("rank >= 1") = w.shape[0].clone();
                one(x.dtype, shape)
            }
            Op::QuantLinear { bits, group, zero_point } => {
                let n_params = 3 + usize::from(*zero_point);
                if ins.len() != n_params && ins.len() != n_params + 1 {
                    return Err(format!("QuantLinear takes {n_params} or {} inputs, got {}", n_params + 1, ins.len()));
                }
                let x = ins[0];
                float_input(x, 0)?;
                let w = quant_params(&ins[1..n_params], *bits, *group, *zero_point, x.dtype)?;
                if x.shape.last() != Some(&w[1]) {
                    return Err(format!(
                        "x {} does not fit weight {} ([out, in])",
                        shape_to_string(&x.shape),
                        shape_to_string(&w)
                    ));
                }
                if let Some(b) = ins.get(n_params) {
                    if b.shape != [w[0].clone()] || b.dtype != x.dtype {
                        return Err(format!(
                            "bias {}{} does not fit weight {}",
                            b.dtype,
                            shape_to_string(&b.shape),
                            shape_to_string(&w)
                        ));
                    }
                }
                let mut shape = x.shape.clone();
                *shape.last_mut().expect("rank >= 1") = w[0].clone();
                one(x.dtype, shape)
            }
            Op::QuantGather { bits, group, zero_point } => {
                let n_params = 2 + usize::from(*zero_point);
                arity(ins, n_params + 1)?;
                let dtype = ins[1].dtype;
                float_input(ins[1], 1)?;
                let w = quant_params(&ins[..n_params], *bits, *group, *zero_point, dtype)?;
                let ids = ins[n_params];
                if !matches!(ids.dtype, DType::I64 | DType::I32) {
                    return Err(format!("ids must be i64 or i32, got {}", ids.dtype));
                }
                one(dtype, ids.shape.iter().cloned().chain([w[1].clone()]).collect())
            }
            Op::Conv { window, groups } => conv_infos(ins, window, *groups),
            Op::MaxPool { window } => {
                arity(ins, 1)?;
                float_input(ins[0], 0)?;
                let out = window.out_shape(&ins[0].shape)?;
                one(ins[0].dtype, ins[0].shape[..2].iter().cloned().chain(out).collect())
            }
            Op::SelectiveScan => selective_scan_infos(ins),
            Op::DeltaScan => delta_scan_infos(ins),
            Op::CacheUpdate | Op::ScatterSlots => {
                arity(ins, 3)?;
                let (c, n, p) = (ins[0], ins[1], ins[2]);
                let fits = c.rank() == 4
                    && n.rank() == 4
                    && c.dtype == n.dtype
                    && c.shape[..2] == n.shape[..2]
                    && c.shape[3] == n.shape[3]
                    && p.dtype == DType::I64
                    && p.rank() == 2
                    && p.shape[1] == n.shape[2];
                if !fits {
                    return Err(format!(
                        "cache {}{}, new {}{}, slots {}{} do not fit",
                        c.dtype,
                        shape_to_string(&c.shape),
                        n.dtype,
                        shape_to_string(&n.shape),
                        p.dtype,
                        shape_to_string(&p.shape)
                    ));
                }
                one(c.dtype, c.shape.clone())
            }
            Op::GatedMlp { .. } => {
                if ins.len() != 4 && ins.len() != 7 {
                    return Err(format!("GatedMlp takes 4 inputs, or 7 with biases; got {}", ins.len()));
                }
                let (x, g, u, d) = (ins[0], ins[1], ins[2], ins[3]);
                float_input(x, 0)?;
                let hidden = x.shape.last().ok_or("x must have rank >= 1")?;
                let ok = g.rank() == 2
                    && g.shape == u.shape
                    && &g.shape[1] == hidden
                    && d.shape == [hidden.clone(), g.shape[0].clone()];
                if !ok {
                    return Err(format!(
                        "weights gate {}, up {}, down {} do not fit hidden {hidden}",
                        shape_to_string(&g.shape),
                        shape_to_string(&u.shape),
                        shape_to_string(&d.shape)
                    ));
                }
                if ins.len() == 7 {
                    let fits = ins[4].shape == [g.shape[0].clone()]
                        && ins[5].shape == [g.shape[0].clone()]
                        && ins[6].shape == [hidden.clone()];
                    if !fits {
                        return Err("biases do not fit the gate/up/down weights".into());
                    }
                }
                one(x.dtype, x.shape.clone())
            }
            Op::TopK { k } => {
                arity(ins, 1)?;
                let x = ins[0];
                float_input(x, 0)?;
                let n = x.shape.last().ok_or("TopK needs rank >= 1")?;
                if *k == 0 || n.as_const().is_none_or(|n| *k as i64 > n) {
                    return Err(format!("k = {k} must be in 1..={n} (a static last axis)"));
                }
                let mut shape = x.shape.clone();
                *shape.last_mut().expect("rank >= 1") = Dim::from(*k);
                Ok(vec![ValueInfo::new(x.dtype, shape.clone()), ValueInfo::new(DType::I64, shape)])
            }
            Op::Moe { top_k, biased, routing, weigh_input, own_router, .. } => {
                let (corrected, own) = (usize::from(routing.corrected()), 2 * usize::from(*own_router));
                arity(ins, 5 + 4 * usize::from(*biased) + corrected + own)?;
                if *own_router {
                    let (router_x, scale) = (ins[ins.len() - 2], ins[ins.len() - 1]);
                    if router_x.shape != ins[0].shape || router_x.dtype != ins[0].dtype {
                        return Err(format!(
                            "router_x {} must be shaped and typed like x {}",
                            shape_to_string(&router_x.shape),
                            shape_to_string(&ins[0].shape)
                        ));
                    }
                    if scale.shape != [ins[1].shape[0].clone()] || scale.dtype != ins[0].dtype {
                        return Err(format!("expert_scale {} must be [experts]", shape_to_string(&scale.shape)));
                    }
                }
                let ins = &ins[..ins.len() - own];
                if *weigh_input && *biased {
                    // an expert weighed 0 would still add its biases
                    return Err("experts weighed by their input have no biases".into());
                }
                let (x, r, g, u, d) = (ins[0], ins[1], ins[2], ins[3], ins[4]);
                float_input(x, 0)?;
                if x.rank() != 3 {
                    return Err(format!("x must be [batch, seq, hidden], got {}", shape_to_string(&x.shape)));
                }
                if ins[1..].iter().any(|w| w.dtype != x.dtype) {
                    return Err(format!("expert weights and biases must be {} like x", x.dtype));
                }
                let hidden = &x.shape[2];
                let fits = r.rank() == 2
                    && &r.shape[1] == hidden
                    && g.rank() == 3
                    && g.shape == u.shape
                    && g.shape[0] == r.shape[0]
                    && &g.shape[2] == hidden
                    && d.shape == [g.shape[0].clone(), hidden.clone(), g.shape[1].clone()];
                if !fits {
                    return Err(format!(
                        "router {}, gate {}, up {}, down {} do not fit hidden {hidden}",
                        shape_to_string(&r.shape),
                        shape_to_string(&g.shape),
                        shape_to_string(&u.shape),
                        shape_to_string(&d.shape)
                    ));
                }
                if *biased {
                    let (e, i) = (g.shape[0].clone(), g.shape[1].clone());
                    let want =
                        [vec![e.clone()], vec![e.clone(), i.clone()], vec![e.clone(), i], vec![e, hidden.clone()]];
                    if ins[5..].iter().zip(&want).any(|(b, w)| &b.shape != w) {
                        return Err("biases do not fit the router and expert weights".into());
                    }
                }
                if routing.corrected() && ins[ins.len() - 1].shape != [g.shape[0].clone()] {
                    return Err("the routing correction must be [experts]".into());
                }
                if let Routing::Grouped { groups, top_groups, .. } = routing {
                    let e = r.shape[0].as_const().unwrap_or(0) as usize;
                    if *groups == 0 || !e.is_multiple_of(*groups) || *top_groups == 0 || top_groups > groups {
                        return Err(format!(
                            "{e} experts do not split into {groups} groups of which {top_groups} compete"
                        ));
                    }
                    if *top_k > top_groups * (e / groups) {
                        return Err(format!(
                            "top_k = {top_k} is more than the {} experts of {top_groups} groups",
                            top_groups * (e / groups)
                        ));
                    }
                }
                match r.shape[0].as_const() {
                    Some(e) if *top_k >= 1 && *top_k as i64 <= e => one(x.dtype, x.shape.clone()),
                    _ => Err(format!("top_k = {top_k} must be in 1..={} (the expert count)", r.shape[0])),
                }
            }
        }
    }
}

/// `Moe`'s `few_tokens` for an input `x [b, s, h]`: each row brings a static number of tokens
/// `s` with `s * top_k <= experts` (running each token's own experts costs less than running
/// every expert).
pub fn moe_few_tokens(x: &[Dim], top_k: usize, experts: &Dim) -> bool {
    let experts = experts.as_const().unwrap_or(0);
    x.get(1).and_then(Dim::as_const).is_some_and(|c| c * top_k as i64 <= experts)
}

/// Checks a quantized weight's `q, scales (, zero_points)` against each other and the float
/// `dtype` of the scales; returns the weight's `[out, in]`.
fn quant_params(
    ins: &[&ValueInfo],
    bits: u8,
    group: usize,
    zero_point: bool,
    dtype: DType,
) -> Result<Vec<Dim>, String> {
    let (q, s) = (ins[0], ins[1]);
    let want = if zero_point { DType::U8 } else { DType::I8 };
    if bits != 4 && bits != 8 {
        return Err(format!("bits must be 4 or 8, got {bits}"));
    }
    if q.rank() != 2 || q.dtype != want {
        return Err(format!("values must be {want} [out, in], got {}{}", q.dtype, shape_to_string(&q.shape)));
    }
    let groups = q.shape[1]
        .div_exact(group as i64)
        .map_err(|_| format!("group {group} does not divide the input dimension {}", q.shape[1]))?;
    let grid = vec![q.shape[0].clone(), groups];
    if s.shape != grid || s.dtype != dtype {
        return Err(format!(
            "scales {}{} do not fit: want {dtype}{}",
            s.dtype,
            shape_to_string(&s.shape),
            shape_to_string(&grid)
        ));
    }
    if let Some(z) = ins.get(2).filter(|_| zero_point) {
        if z.shape != grid || z.dtype != DType::U8 {
            return Err(format!(
                "zero points {}{} do not fit: want u8{}",
                z.dtype,
                shape_to_string(&z.shape),
                shape_to_string(&grid)
            ));
        }
    }
    Ok(q.shape.clone())
}

fn arity(ins: &[&ValueInfo], n: usize) -> Result<(), String> {
    if ins.len() != n {
        return Err(format!("expected {n} inputs, got {}", ins.len()));
    }
    Ok(())
}

fn float_input(x: &ValueInfo, i: usize) -> Result<(), String> {
    if !x.dtype.is_float() {
        return Err(format!("input {i} must be float, got {}", x.dtype));
    }
    Ok(())
}

fn check_axes(axes: &[usize], rank: usize) -> Result<(), String> {
    if let Some(a) = axes.iter().find(|&&a| a >= rank) {
        return Err(format!("axis {a} out of range for rank {rank}"));
    }
    Ok(())
}

fn bcast(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, String> {
    broadcast_shapes(a, b)
        .ok_or_else(|| format!("shapes {} and {} do not broadcast", shape_to_string(a), shape_to_string(b)))
}

/// A bias `[out]` of the weight `w`'s dtype (`w` `[out, ...]`), where there is one.
fn check_bias(bias: Option<&ValueInfo>, w: &ValueInfo) -> Result<(), String> {
    match bias {
        Some(b) if b.shape != [w.shape[0].clone()] || b.dtype != w.dtype => Err(format!(
            "bias {}{} does not fit weight {}",
            b.dtype,
            shape_to_string(&b.shape),
            shape_to_string(&w.shape)
        )),
        _ => Ok(()),
    }
}

fn window_attrs(w: &Window) -> String {
    format!(
        "kernel={:?}, stride={:?}, dilation={:?}, pads_begin={:?}, pads_end={:?}",
        w.kernel, w.stride, w.dilation, w.pads_begin, w.pads_end
    )
}

/// [`Op::Conv`]'s output: `[b, cout, *out]` once `w` is `[cout, cin / groups, *kernel]` with
/// `groups` dividing both channel counts, and the bias (if any) `[cout]`, all of x's dtype.
fn conv_infos(ins: &[&ValueInfo], window: &Window, groups: usize) -> Result<Vec<ValueInfo>, String> {
    if ins.len() != 2 && ins.len() != 3 {
        return Err(format!("Conv takes 2 inputs, or 3 with a bias; got {}", ins.len()));
    }
    let (x, w) = (ins[0], ins[1]);
    float_input(x, 0)?;
    let out = window.out_shape(&x.shape)?;
    let (cin, cout) = (x.shape[1].as_const(), w.shape.first().and_then(Dim::as_const));
    let kernel: Vec<Dim> = window.kernel.iter().map(|&k| Dim::from(k)).collect();
    let fits = match (cin, cout) {
        (Some(cin), Some(cout)) => {
            let g = groups as i64;
            g > 0
                && cin % g == 0
                && cout % g == 0
                && w.rank() == window.rank() + 2
                && w.shape[1] == Dim::konst(cin / g)
                && w.shape[2..] == kernel[..]
        }
        _ => false,
    };
    if !fits || w.dtype != x.dtype {
        return Err(format!(
            "x {}{} does not fit weight {}{} ([cout, cin / {groups}, *kernel {:?}], static channels)",
            x.dtype,
            shape_to_string(&x.shape),
            w.dtype,
            shape_to_string(&w.shape),
            window.kernel
        ));
    }
    check_bias(ins.get(2).copied(), w)?;
    let shape = [x.shape[0].clone(), w.shape[0].clone()].into_iter().chain(out).collect();
    Ok(vec![ValueInfo::new(x.dtype, shape)])
}

/// [`Op::DeltaScan`]'s outputs: `o` like `v`, the last state like `S0`, once every input is f32
/// and they agree on `b`, `h`, `L`, `dk` and `dv`.
fn delta_scan_infos(ins: &[&ValueInfo]) -> Result<Vec<ValueInfo>, String> {
    arity(ins, 6)?;
    let (q, k, v, g, beta, s) = (ins[0], ins[1], ins[2], ins[3], ins[4], ins[5]);
    if let Some((i, x)) = ins.iter().enumerate().find(|(_, x)| x.dtype != DType::F32) {
        return Err(format!("input {i} must be f32, got {}", x.dtype));
    }
    let ranks = [q, k, v, g, beta, s].map(ValueInfo::rank);
    let fits = ranks == [4, 4, 4, 3, 3, 4]
        && q.shape == k.shape
        && v.shape[..3] == q.shape[..3]
        && g.shape[..] == q.shape[..3]
        && beta.shape == g.shape
        && s.shape == [q.shape[0].clone(), q.shape[1].clone(), q.shape[3].clone(), v.shape[3].clone()];
    if !fits {
        let all: Vec<String> = ins.iter().map(|x| shape_to_string(&x.shape)).collect();
        return Err(format!(
            "q [b, h, L, dk], k [b, h, L, dk], v [b, h, L, dv], g [b, h, L], beta [b, h, L], S0 [b, h, dk, dv] do \
             not fit: {}",
            all.join(", ")
        ));
    }
    Ok(vec![v.clone(), s.clone()])
}

/// [`Op::SelectiveScan`]'s outputs: `y` like `x`, the last state like `h0`, once every input
/// is f32 and they agree on `b`, `d`, `L`, `g` (dividing `d`) and `n`.
fn selective_scan_infos(ins: &[&ValueInfo]) -> Result<Vec<ValueInfo>, String> {
    arity(ins, 6)?;
    let (x, dt, a, b, c, h) = (ins[0], ins[1], ins[2], ins[3], ins[4], ins[5]);
    if let Some((i, v)) = ins.iter().enumerate().find(|(_, v)| v.dtype != DType::F32) {
        return Err(format!("input {i} must be f32, got {}", v.dtype));
    }
    let ranks = [x, dt, a, b, c, h].map(ValueInfo::rank);
    let fits = ranks == [3, 3, 2, 4, 4, 3]
        && dt.shape == x.shape
        && a.shape[0] == x.shape[1]
        && b.shape == c.shape
        && b.shape[0] == x.shape[0]
        && b.shape[1] == x.shape[2]
        && b.shape[3] == a.shape[1]
        && h.shape == [x.shape[0].clone(), x.shape[1].clone(), a.shape[1].clone()];
    let groups_divide = match (x.shape[1].as_const(), b.shape[2].as_const()) {
        (Some(d), Some(g)) => g > 0 && d % g == 0,
        _ => false,
    };
    if !fits || !groups_divide {
        let all: Vec<String> = ins.iter().map(|v| shape_to_string(&v.shape)).collect();
        return Err(format!(
            "x [b, d, L], dt [b, d, L], A [d, n], B [b, L, g, n], C [b, L, g, n], h0 [b, d, n] with static d and g \
             dividing it do not fit: {}",
            all.join(", ")
        ));
    }
    Ok(vec![x.clone(), h.clone()])
}
