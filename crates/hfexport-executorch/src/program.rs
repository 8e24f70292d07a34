//! The ExecuTorch method of an [`AtenGraph`]: EValues, operators and kernel calls, in the
//! shape `program.fbs` serializes (see [`crate::pte`]).
//!
//! ExecuTorch runs `.out` kernels only, each call listing every schema argument in order, then
//! its `out` tensor, then one return slot (the `out` again). This module maps each functional
//! ATen call of the shared lowering (`hfexport-aten`) to the kernel the wheel's libraries
//! register (`kernel.rs`), with rewrites where they register nothing: `matmul` becomes views
//! around `bmm`, a cache's `index_copy` becomes an in-place `index_put_` into the cache input
//! itself, so the cache is updated where the caller bound it, and a reshape is an `et_view`
//! that aliases its input's memory (as upstream's `remove_view_copy`), a copy only when returned. SymInt arithmetic becomes
//! `aten::sym_size.int` and `executorch_prim::*.Scalar` writing Int EValues that IntLists name.
//!
//! Every non-constant tensor gets its upper-bound sizes from the symbols' ranges
//! (`DYNAMIC_BOUND` when any dim is symbolic); [`crate::plan`] then places them.

use crate::xnnpack::{self, Delegate};
use hfexport_aten::lower::QUANT_LINEAR;
use hfexport_aten::{Arg, AtenGraph, Output, SymIntArg, TensorMeta};
use hfexport_core::cache_ports;
use hfexport_core::graph::Weight;
use hfexport_core::{DType, Dim, SymbolScope, Tensor, WeightExpr};
use std::collections::HashMap;

/// Where a tensor's data comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// Set by the caller (`set_input` shares the caller's memory) or by `set_output_data_ptr`.
    Unplanned,
    /// In the planned arena, at the offset [`crate::plan`] assigns.
    Planned(Option<u64>),
    /// The method's constant `i` (1-based: `Method::constants[i - 1]`; the program maps it to
    /// its buffer in the shared constant segment, [`crate::pte::Layout`]).
    Constant(usize),
    /// A view of EValue `i` (`executorch_prim::et_view` points it at `i`'s data at run time):
    /// no memory of its own, and `i` lives as long as the view.
    Alias(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub struct TensorValue {
    pub dtype: DType,
    pub sizes: Vec<Dim>,
    /// Upper-bound sizes (what the plan reserves and the file records).
    pub bound: Vec<i64>,
    pub data: Data,
    /// The value name in the ATen graph (dumps and errors only; not serialized).
    pub name: String,
}

impl TensorValue {
    pub fn dynamic(&self) -> bool {
        self.sizes.iter().any(|d| d.as_const().is_none())
    }

    pub fn nbytes(&self) -> u64 {
        self.bound.iter().map(|&d| d.max(0) as u64).product::<u64>() * self.dtype.size() as u64
    }
}

/// One EValue.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Bool(bool),
    Double(f64),
    Tensor(TensorValue),
    /// EValue indices of Int values (constants or SymInts written at run time).
    IntList(Vec<usize>),
    TensorList(Vec<usize>),
    OptTensorList(Vec<Option<usize>>),
}

/// Where a constant's bytes come from.
#[derive(Debug, Clone, PartialEq)]
pub enum ConstSource {
    /// Graph weight `i`, streamed from the checkpoint.
    Weight(usize),
    /// A lifted constant.
    Tensor(Tensor),
    /// Bytes derived from graph weights in a layout a delegate reads (XNNPACK's packed
    /// `qbint4` values, bfloat16 block scales), named for progress.
    Derived { name: String, expr: WeightExpr },
}

/// What an instruction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Operator `i` of [`Method::operators`].
    Kernel(usize),
    /// Delegate `i` of [`Method::delegates`].
    Delegate(usize),
}

/// One instruction: a kernel call (EValue arguments, return slot included) or a delegate call
/// (its inputs, then its outputs).
#[derive(Debug, Clone, PartialEq)]
pub struct Instr {
    pub call: Call,
    pub args: Vec<usize>,
}

/// One method (`forward`, or a component's name) before serialization.
#[derive(Debug, Clone, Default)]
pub struct Method {
    pub name: String,
    pub values: Vec<Value>,
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
    /// (name, overload): `("aten::add", "out")`.
    pub operators: Vec<(String, String)>,
    pub instrs: Vec<Instr>,
    /// The constants the kernels read (`Data::Constant(i + 1)`), with their byte sizes.
    pub constants: Vec<(ConstSource, u64)>,
    /// XNNPACK delegates, in call order.
    pub delegates: Vec<Delegate>,
    /// Bytes of the planned arena (memory id 1).
    pub arena: u64,
    /// Planned tensors that live from one call to the next: the caches of a decode called at
    /// `cache_position` (the program's mutable buffers), never reused by the plan.
    pub buffers: Vec<usize>,
}

impl Method {
    pub fn tensor(&self, i: usize) -> Option<&TensorValue> {
        match &self.values[i] {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }
}

/// Which kernels run the linear algebra.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Every `Linear` and permute is an XNNPACK delegate call; the rest runs on the CPU kernels.
    Xnnpack,
    /// The wheel's portable and optimized CPU kernels only.
    Portable,
}

/// What the memory plan allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Alloc {
    /// Inputs other than caches.
    pub graph_input: bool,
    pub graph_output: bool,
    /// Cache inputs (updated in place).
    pub mutable_buffers: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot lower `{value}` ({target}) to an ExecuTorch kernel: {msg}")]
pub struct ProgramError {
    pub value: String,
    pub target: String,
    pub msg: String,
}

type Result<T> = std::result::Result<T, ProgramError>;

/// A kernel: ExecuTorch operator, overload, and the ATen call's arguments in schema order
/// (`Some(name)`) or a fixed literal for an argument the lowering never sets.
struct Kernel {
    name: &'static str,
    overload: &'static str,
    args: &'static [(&'static str, Lit)],
}

#[derive(Clone, Copy)]
enum Lit {
    /// From the call's argument of that name (absent: Null).
    Arg,
    Int(i64),
    Bool(bool),
    Null,
}

use Lit::Arg as A;

macro_rules! k {
    ($name:literal, $overload:literal, [$(($a:literal, $l:expr)),* $(,)?]) => {
        Kernel { name: $name, overload: $overload, args: &[$(($a, $l)),*] }
    };
}

/// The `.out` kernel of each functional ATen target (the 1.5.1 wheel registers all of them).
fn kernel(target: &str) -> Option<Kernel> {
    let unary = |name: &'static str| Kernel { name, overload: "out", args: &[("self", A)] };
    let binary =
        |name: &'static str, overload: &'static str| Kernel { name, overload, args: &[("self", A), ("other", A)] };
    Some(match target {
        "aten.add.Tensor" => k!("aten::add", "out", [("self", A), ("other", A), ("alpha", Lit::Int(1))]),
        "aten.sub.Tensor" => k!("aten::sub", "out", [("self", A), ("other", A), ("alpha", Lit::Int(1))]),
        "aten.mul.Tensor" => binary("aten::mul", "out"),
        "aten.div.Tensor" => binary("aten::div", "out"),
        "aten.floor_divide.default" => binary("aten::floor_divide", "out"),
        "aten.pow.Tensor_Tensor" => k!("aten::pow", "Tensor_Tensor_out", [("self", A), ("exponent", A)]),
        "aten.maximum.default" => binary("aten::maximum", "out"),
        "aten.minimum.default" => binary("aten::minimum", "out"),
        "aten.eq.Tensor" => binary("aten::eq", "Tensor_out"),
        "aten.lt.Tensor" => binary("aten::lt", "Tensor_out"),
        "aten.le.Tensor" => binary("aten::le", "Tensor_out"),
        "aten.gt.Tensor" => binary("aten::gt", "Tensor_out"),
        "aten.ge.Tensor" => binary("aten::ge", "Tensor_out"),
        "aten.logical_and.default" => binary("aten::logical_and", "out"),
        "aten.logical_or.default" => binary("aten::logical_or", "out"),
        "aten.logical_not.default" => unary("aten::logical_not"),
        "aten.neg.default" => unary("aten::neg"),
        "aten.exp.default" => unary("aten::exp"),
        "aten.log.default" => unary("aten::log"),
        "aten.sqrt.default" => unary("aten::sqrt"),
        "aten.reciprocal.default" => unary("aten::reciprocal"),
        "aten.tanh.default" => unary("aten::tanh"),
        "aten.sigmoid.default" => unary("aten::sigmoid"),
        "aten.cos.default" => unary("aten::cos"),
        "aten.sin.default" => unary("aten::sin"),
        "aten.erf.default" => unary("aten::erf"),
        "aten.relu.default" => unary("aten::relu"),
        "aten.where.self" => k!("aten::where", "self_out", [("condition", A), ("self", A), ("other", A)]),
        "aten._to_copy.default" => {
            k!("aten::_to_copy", "out", [("self", A), ("non_blocking", Lit::Bool(false)), ("memory_format", Lit::Null)])
        }
        "aten.sum.dim_IntList" => {
            k!("aten::sum", "IntList_out", [("self", A), ("dim", A), ("keepdim", A), ("dtype", Lit::Null)])
        }
        "aten.mean.dim" => k!("aten::mean", "out", [("self", A), ("dim", A), ("keepdim", A), ("dtype", Lit::Null)]),
        "aten.amax.default" => k!("aten::amax", "out", [("self", A), ("dim", A), ("keepdim", A)]),
        "aten._softmax.default" => k!("aten::_softmax", "out", [("self", A), ("dim", A), ("half_to_float", A)]),
        "aten.cumsum.default" => k!("aten::cumsum", "out", [("self", A), ("dim", A), ("dtype", Lit::Null)]),
        "aten.permute.default" => k!("aten::permute_copy", "out", [("self", A), ("dims", A)]),
        "aten.expand.default" => {
            k!("aten::expand_copy", "out", [("self", A), ("size", A), ("implicit", Lit::Bool(false))])
        }
        "aten.cat.default" => k!("aten::cat", "out", [("tensors", A), ("dim", A)]),
        "aten.slice.Tensor" => {
            k!("aten::slice_copy", "Tensor_out", [("self", A), ("dim", A), ("start", A), ("end", A), ("step", A)])
        }
        "aten.index.Tensor" => k!("aten::index", "Tensor_out", [("self", A), ("indices", A)]),
        // the dtype comes from `out`
        "aten.arange.start_step" => k!("aten::arange", "start_out", [("start", A), ("end", A), ("step", A)]),
        "aten.linear.default" => k!("aten::linear", "out", [("input", A), ("weight", A), ("bias", A)]),
        "aten.convolution.default" => k!(
            "aten::convolution",
            "out",
            [
                ("input", A),
                ("weight", A),
                ("bias", A),
                ("stride", A),
                ("padding", A),
                ("dilation", A),
                ("transposed", A),
                ("output_padding", A),
                ("groups", A)
            ]
        ),
        "aten.constant_pad_nd.default" => k!("aten::constant_pad_nd", "out", [("self", A), ("pad", A), ("value", A)]),
        _ => return None,
    })
}

/// The ScalarType numbers of `scalar_type.fbs`.
pub fn scalar_type(d: DType) -> i8 {
    match d {
        DType::U8 => 0,
        DType::I8 => 1,
        DType::I32 => 3,
        DType::I64 => 4,
        DType::F16 => 5,
        DType::F32 => 6,
        DType::Bool => 11,
        DType::BF16 => 15,
    }
}

pub fn dtype_of(st: i8) -> Option<DType> {
    DType::ALL.into_iter().find(|d| scalar_type(*d) == st)
}

struct Builder<'a> {
    a: &'a AtenGraph,
    /// The core graph's weights (`a.parameters` index them).
    weights: &'a [Weight],
    scope: &'a SymbolScope,
    m: Method,
    /// ATen value name → EValue.
    names: HashMap<String, usize>,
    ints: HashMap<i64, usize>,
    ops: HashMap<(&'static str, &'static str), usize>,
    /// Parameters and lifted constants, made constant-segment EValues on first use (a weight
    /// only an XNNPACK delegate reads never enters the constant segment).
    pending: HashMap<String, (String, ConstSource)>,
    /// Value names the method returns (a view of them must be a copy).
    returned: std::collections::HashSet<String>,
}

impl Builder<'_> {
    fn push(&mut self, v: Value) -> usize {
        self.m.values.push(v);
        self.m.values.len() - 1
    }

    /// A constant Int EValue (shared: constants are never written).
    fn int(&mut self, v: i64) -> usize {
        if let Some(&i) = self.ints.get(&v) {
            return i;
        }
        let i = self.push(Value::Int(v));
        self.ints.insert(v, i);
        i
    }

    fn tensor(&mut self, name: &str, meta: &TensorMeta, data: Data) -> usize {
        let bound = meta.sizes.iter().map(|d| d.bounds(self.scope).1).collect();
        self.push(Value::Tensor(TensorValue {
            dtype: meta.dtype,
            sizes: meta.sizes.clone(),
            bound,
            data,
            name: name.to_string(),
        }))
    }

    fn op(&mut self, name: &'static str, overload: &'static str) -> usize {
        let n = self.m.operators.len();
        *self.ops.entry((name, overload)).or_insert_with(|| {
            self.m.operators.push((name.to_string(), overload.to_string()));
            n
        })
    }

    /// The cache input `port` holding its updated contents `value`: the input itself when a call
    /// wrote it in place (`index_put_`), else after `copy_(input, value)` (a recurrent state,
    /// computed whole), so the caller's buffer is what the method updates.
    fn write_back(&mut self, port: &str, value: &str) -> Result<usize> {
        let new = self.value(value, "output")?;
        let input = self.a.user_inputs.iter().find(|(p, _)| p == port).map(|(_, v)| v.clone());
        let Some(cache) = input.and_then(|v| self.names.get(&v).copied()) else {
            return Err(ProgramError {
                value: value.into(),
                target: "copy_".into(),
                msg: format!("updates `{port}`, which is not a user input"),
            });
        };
        if new != cache {
            let op = self.op("aten::copy_", "");
            let non_blocking = self.push(Value::Bool(false));
            self.m.instrs.push(Instr { call: Call::Kernel(op), args: vec![cache, new, non_blocking, cache] });
        }
        Ok(cache)
    }

    fn value(&mut self, name: &str, target: &str) -> Result<usize> {
        if let Some(&v) = self.names.get(name) {
            return Ok(v);
        }
        let Some((label, source)) = self.pending.remove(name) else {
            return Err(ProgramError {
                value: name.into(),
                target: target.into(),
                msg: "used before it is defined".into(),
            });
        };
        let c = self.tensor(&label, &self.a.tensors[name], Data::Constant(self.m.constants.len() + 1));
        let bytes = self.m.tensor(c).expect("tensor").nbytes();
        self.m.constants.push((source, bytes));
        self.names.insert(name.to_string(), c);
        Ok(c)
    }

    /// `linear` as an XNNPACK delegate call, when its weight (and bias) are checkpoint
    /// constants of a dtype XNNPACK takes; `None` otherwise.
    fn linear_delegate(&mut self, call: &hfexport_aten::Call, out: &str) -> Result<Option<usize>> {
        let arg = |n: &str| call.args.iter().find(|(k, _)| *k == n).map(|(_, a)| a);
        let (Some(Arg::Tensor(x)), Some(Arg::Tensor(w))) = (arg("input"), arg("weight")) else { return Ok(None) };
        let bias = match arg("bias") {
            Some(Arg::Tensor(b)) => Some(b),
            None | Some(Arg::None) => None,
            Some(_) => return Ok(None),
        };
        let is_const = |n: &String| self.pending.contains_key(n) || self.const_source(n).is_some();
        let dtype = self.a.tensors[w].dtype;
        if xnnpack::datatype(dtype).is_none() || !is_const(w) || !bias.is_none_or(is_const) {
            return Ok(None);
        }
        let input = self.value(x, call.target)?;
        let meta = &self.a.tensors[out];
        let output = self.tensor(out, meta, Data::Planned(None));
        let dims = |b: &Self, n: &String| -> Vec<i64> {
            b.a.tensors[n].sizes.iter().map(|d| d.as_const().unwrap_or(0)).collect()
        };
        let (wd, bd) = (dims(self, w), bias.map(|b| dims(self, b)));
        let w_src = self.const_source(w).expect("checked");
        let b_src = bias.map(|b| self.const_source(b).expect("checked"));
        let d = xnnpack::fully_connected(
            self.m.tensor(input).expect("tensor"),
            (w_src, &wd),
            b_src.zip(bd.as_deref()),
            self.m.tensor(output).expect("tensor"),
        );
        self.m.delegates.push(d);
        let index = self.m.delegates.len() - 1;
        self.m.instrs.push(Instr { call: Call::Delegate(index), args: vec![input, output] });
        Ok(Some(output))
    }

    /// [`QUANT_LINEAR`] as an XNNPACK dynamically quantized FullyConnected: `qbint4` values
    /// packed two per byte (unsigned, low nibble first) with the bfloat16 block scales the
    /// quantization pass rounded them to, or `qcint8` values with float32 scales per row.
    fn quant_linear_delegate(&mut self, call: &hfexport_aten::Call, out: &str) -> Result<usize> {
        let fail = |msg: String| ProgramError { value: out.into(), target: call.target.into(), msg };
        let arg = |n: &str| call.args.iter().find(|(k, _)| *k == n).map(|(_, a)| a);
        let tensor = |n: &str| match arg(n) {
            Some(Arg::Tensor(t)) => Ok(t.clone()),
            other => Err(fail(format!("`{n}` is {other:?}, not a tensor"))),
        };
        let int = |n: &str| match arg(n) {
            Some(Arg::Int(i)) => Ok(*i as usize),
            other => Err(fail(format!("`{n}` is {other:?}, not an int"))),
        };
        let (x, w, s, bits, group) =
            (tensor("input")?, tensor("weight")?, tensor("scales")?, int("bits")?, int("group_size")?);
        let bias = match arg("bias") {
            Some(Arg::Tensor(b)) => Some(b.clone()),
            _ => None,
        };
        if self.a.tensors[&x].dtype != DType::F32 {
            return Err(fail(format!(
                "XNNPACK's quantized linears take float32 activations, not {}; export in float32 or with the \
                 portable backend",
                self.a.tensors[&x].dtype.name()
            )));
        }
        let weight_expr = |b: &Self, n: &str| -> Result<WeightExpr> {
            match b.const_source(n) {
                Some(ConstSource::Weight(i)) => Ok(b.weights[i].expr.clone()),
                _ => Err(fail(format!("`{n}` is not a checkpoint weight"))),
            }
        };
        let (q, scales) = (weight_expr(self, &w)?, weight_expr(self, &s)?);
        let derived = |what: &str, expr| ConstSource::Derived { name: format!("{w} ({what})"), expr };
        let dims = |b: &Self, n: &String| -> Vec<i64> {
            b.a.tensors[n].sizes.iter().map(|d| d.as_const().unwrap_or(0)).collect()
        };
        let wd = dims(self, &w);
        let filter = match bits {
            4 => {
                // the pass stored bfloat16-rounded scales read as float32: XNNPACK takes the bfloat16
                let WeightExpr::Cast(bf16, _) = scales else {
                    return Err(fail(format!("the int4 scales of `{w}` are not rounded to bfloat16")));
                };
                let packed = WeightExpr::Pack { expr: Box::new(q.as_unsigned()), high_first: false, per_row: true };
                xnnpack::QuantFilter::Blockwise {
                    values: derived("qbint4", packed),
                    scales: derived("bf16 scales", *bf16),
                    group,
                }
            }
            8 => xnnpack::QuantFilter::Channelwise {
                values: self.const_source(&w).expect("checked"),
                scales: self.const_source(&s).expect("checked"),
            },
            _ => return Err(fail(format!("XNNPACK has no {bits}-bit quantized linear"))),
        };
        let input = self.value(&x, call.target)?;
        let output = self.tensor(out, &self.a.tensors[out], Data::Planned(None));
        let bias = bias
            .map(|b| {
                Ok((self.const_source(&b).ok_or_else(|| fail(format!("bias `{b}` is not constant")))?, dims(self, &b)))
            })
            .transpose()?;
        let d = xnnpack::quantized_fully_connected(
            self.m.tensor(input).expect("tensor"),
            filter,
            &wd,
            bias.as_ref().map(|(s, d)| (s.clone(), d.as_slice())),
            self.m.tensor(output).expect("tensor"),
        );
        self.m.delegates.push(d);
        let index = self.m.delegates.len() - 1;
        self.m.instrs.push(Instr { call: Call::Delegate(index), args: vec![input, output] });
        Ok(output)
    }

    /// `permute` as an XNNPACK transpose delegate call (a dtype XNNPACK takes, a computed input).
    fn permute_delegate(&mut self, call: &hfexport_aten::Call, out: &str) -> Result<Option<usize>> {
        let arg = |n: &str| call.args.iter().find(|(k, _)| *k == n).map(|(_, a)| a);
        let (Some(Arg::Tensor(x)), Some(Arg::Ints(dims))) = (arg("self"), arg("dims")) else { return Ok(None) };
        if xnnpack::datatype(self.a.tensors[x].dtype).is_none() || self.const_source(x).is_some() {
            return Ok(None);
        }
        let input = self.value(x, call.target)?;
        let output = self.tensor(out, &self.a.tensors[out], Data::Planned(None));
        let perm: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        let d =
            xnnpack::transpose(self.m.tensor(input).expect("tensor"), &perm, self.m.tensor(output).expect("tensor"));
        self.m.delegates.push(d);
        let index = self.m.delegates.len() - 1;
        self.m.instrs.push(Instr { call: Call::Delegate(index), args: vec![input, output] });
        Ok(Some(output))
    }

    /// Where a parameter or lifted constant's bytes come from (whether or not it is an EValue yet).
    fn const_source(&self, name: &str) -> Option<ConstSource> {
        if let Some((_, s)) = self.pending.get(name) {
            return Some(s.clone());
        }
        let index = self.a.parameters.iter().find(|(_, v, _)| v == name).map(|(_, _, i)| *i);
        match index {
            Some(i) => Some(ConstSource::Weight(i)),
            None => self.a.constants.iter().find(|(_, v, _)| v == name).map(|(_, _, t)| ConstSource::Tensor(t.clone())),
        }
    }

    fn sym(&mut self, s: &SymIntArg, target: &str) -> Result<usize> {
        match s {
            SymIntArg::Int(i) => Ok(self.int(*i)),
            SymIntArg::Sym(n) => self.value(n, target),
        }
    }

    fn arg(&mut self, a: &Arg, target: &str) -> Result<usize> {
        Ok(match a {
            Arg::Tensor(n) => self.value(n, target)?,
            Arg::Tensors(ns) => {
                let v = ns.iter().map(|n| self.value(n, target)).collect::<Result<_>>()?;
                self.push(Value::TensorList(v))
            }
            Arg::OptTensors(ns) => {
                let v =
                    ns.iter().map(|n| n.as_ref().map(|n| self.value(n, target)).transpose()).collect::<Result<_>>()?;
                self.push(Value::OptTensorList(v))
            }
            Arg::Int(i) => self.int(*i),
            Arg::Ints(v) => {
                let items = v.iter().map(|&i| self.int(i)).collect();
                self.push(Value::IntList(items))
            }
            Arg::SymInt(s) => self.sym(s, target)?,
            Arg::SymInts(v) => {
                let items = v.iter().map(|s| self.sym(s, target)).collect::<Result<_>>()?;
                self.push(Value::IntList(items))
            }
            Arg::Float(f) => self.push(Value::Double(*f)),
            Arg::Bool(b) => self.push(Value::Bool(*b)),
            Arg::ScalarType(d) => self.int(scalar_type(*d) as i64),
            Arg::None => self.push(Value::Null),
        })
    }

    /// An `.out` kernel call writing a new planned tensor of `meta`.
    fn out_call(
        &mut self,
        name: &'static str,
        overload: &'static str,
        mut args: Vec<usize>,
        out: &str,
        meta: &TensorMeta,
    ) -> usize {
        let o = self.tensor(out, meta, Data::Planned(None));
        let op = self.op(name, overload);
        args.extend([o, o]);
        self.m.instrs.push(Instr { call: Call::Kernel(op), args });
        o
    }

    /// The call as its `.out` kernel ([`kernel`]) writing a new planned tensor.
    fn kernel_call(&mut self, call: &hfexport_aten::Call, out: &str) -> Result<usize> {
        let target = call.target;
        let k = kernel(target).ok_or_else(|| ProgramError {
            value: out.into(),
            target: target.into(),
            msg: "no ExecuTorch kernel is mapped for it".into(),
        })?;
        let mut args = vec![];
        for (name, lit) in k.args {
            args.push(match lit {
                Lit::Arg => match call.args.iter().find(|(n, _)| n == name) {
                    Some((_, x)) => self.arg(x, target)?,
                    None => self.push(Value::Null),
                },
                Lit::Int(i) => self.int(*i),
                Lit::Bool(x) => self.push(Value::Bool(*x)),
                Lit::Null => self.push(Value::Null),
            });
        }
        let meta = &self.a.tensors[out];
        Ok(self.out_call(k.name, k.overload, args, out, meta))
    }

    /// `x` viewed with the sizes of IntList `shape`: an `et_view` alias (no copy), or a
    /// `view_copy` when the view is returned (an output needs its own memory).
    fn view(&mut self, x: usize, shape: usize, out: &str, meta: &TensorMeta) -> usize {
        if self.returned.contains(out) {
            return self.out_call("aten::view_copy", "out", vec![x, shape], out, meta);
        }
        let o = self.tensor(out, meta, Data::Alias(x));
        let op = self.op("executorch_prim::et_view", "default");
        self.m.instrs.push(Instr { call: Call::Kernel(op), args: vec![x, shape, o] });
        o
    }

    /// `a` and `b` expanded (`expand_copy`) to the batch axes of their product `meta`, as
    /// matmul broadcasts them and `bmm` does not; both of the product's rank.
    fn broadcast_batches(&mut self, a: usize, b: usize, out: &str, meta: &TensorMeta) -> Result<(usize, usize)> {
        let rank = meta.sizes.len();
        let (ta, tb) = (self.m.tensor(a).expect("a tensor").clone(), self.m.tensor(b).expect("a tensor").clone());
        if rank < 3 || ta.sizes.len() != rank || tb.sizes.len() != rank {
            return Err(ProgramError {
                value: out.into(),
                target: "aten.matmul.default".into(),
                msg: format!(
                    "operands {:?} and {:?}: broadcast only between operands of equal rank",
                    ta.sizes, tb.sizes
                ),
            });
        }
        let batch: Vec<usize> = (0..rank - 2)
            .map(|i| if ta.sizes[i] == meta.sizes[i] { self.size_of(a, i) } else { self.size_of(b, i) })
            .collect();
        let mut expanded = |x: usize, t: &TensorValue, tag: &str| {
            if t.sizes[..rank - 2] == meta.sizes[..rank - 2] {
                return x;
            }
            let mut dims = batch.clone();
            dims.extend([self.size_of(x, rank - 2), self.size_of(x, rank - 1)]);
            let size = self.push(Value::IntList(dims));
            let implicit = self.push(Value::Bool(false));
            let sizes = [&meta.sizes[..rank - 2], &t.sizes[rank - 2..]].concat();
            let name = format!("{out}_{tag}_expanded");
            self.out_call(
                "aten::expand_copy",
                "out",
                vec![x, size, implicit],
                &name,
                &TensorMeta { dtype: t.dtype, sizes },
            )
        };
        Ok((expanded(a, &ta, "a"), expanded(b, &tb, "b")))
    }

    /// The product of SymInts (constants folded).
    fn product(&mut self, parts: &[usize]) -> usize {
        let mut constant = 1i64;
        let mut syms = vec![];
        for &p in parts {
            match self.m.values[p] {
                Value::Int(v) if self.ints.get(&v) == Some(&p) => constant *= v,
                _ => syms.push(p),
            }
        }
        let mut acc = self.int(constant);
        for s in syms {
            let out = self.push(Value::Int(0));
            let op = self.op("executorch_prim::mul", "Scalar");
            self.m.instrs.push(Instr { call: Call::Kernel(op), args: vec![acc, s, out] });
            acc = out;
        }
        acc
    }

    /// A SymInt of a tensor's axis: a constant when the axis is static.
    fn size_of(&mut self, t: usize, axis: usize) -> usize {
        let tv = self.m.tensor(t).expect("a tensor");
        if let Some(c) = tv.sizes[axis].as_const() {
            return self.int(c);
        }
        let dim = self.int(axis as i64);
        let out = self.push(Value::Int(0));
        let op = self.op("aten::sym_size", "int");
        self.m.instrs.push(Instr { call: Call::Kernel(op), args: vec![t, dim, out] });
        out
    }

    /// `matmul`: `mm` (rank 2), `bmm` (rank 3), or views to rank 3 around `bmm`; operands whose
    /// batch axes differ are first expanded to the product's ([`Builder::broadcast_batches`]).
    fn matmul(&mut self, a: usize, b: usize, out: &str, meta: &TensorMeta) -> Result<usize> {
        let rank = meta.sizes.len();
        let batch_of = |t: usize| self.m.tensor(t).map(|t| t.sizes[..t.sizes.len().saturating_sub(2)].to_vec());
        let (a, b) = match batch_of(a) == batch_of(b) {
            true => (a, b),
            false => self.broadcast_batches(a, b, out, meta)?,
        };
        match rank {
            2 => return Ok(self.out_call("aten::mm", "out", vec![a, b], out, meta)),
            3 => return Ok(self.out_call("aten::bmm", "out", vec![a, b], out, meta)),
            r if r < 2 => {
                return Err(ProgramError {
                    value: out.into(),
                    target: "aten.matmul.default".into(),
                    msg: format!("rank {r}"),
                })
            }
            _ => {}
        }
        let ta = self.m.tensor(a).expect("tensor").clone();
        let tb = self.m.tensor(b).expect("tensor").clone();
        let batch = meta.sizes[..rank - 2].iter().fold(Dim::konst(1), |x, d| x.mul(d));
        let (m, k, n) = (ta.sizes[rank - 2].clone(), ta.sizes[rank - 1].clone(), tb.sizes[rank - 1].clone());
        let (sm, sk, sn) = (self.size_of(a, rank - 2), self.size_of(a, rank - 1), self.size_of(b, rank - 1));
        let batch_sizes: Vec<usize> = (0..rank - 2).map(|i| self.size_of(a, i)).collect();
        let sb = self.product(&batch_sizes);
        let view = |b: &mut Self, x: usize, dims: Vec<usize>, sizes: Vec<Dim>, dtype: DType, name: &str| {
            let shape = b.push(Value::IntList(dims));
            b.view(x, shape, name, &TensorMeta { dtype, sizes })
        };
        let a3 =
            view(self, a, vec![sb, sm, sk], vec![batch.clone(), m.clone(), k.clone()], ta.dtype, &format!("{out}_a3"));
        let b3 = view(self, b, vec![sb, sk, sn], vec![batch.clone(), k, n.clone()], tb.dtype, &format!("{out}_b3"));
        let c3 = self.out_call(
            "aten::bmm",
            "out",
            vec![a3, b3],
            &format!("{out}_bmm"),
            &TensorMeta { dtype: meta.dtype, sizes: vec![batch, m, n] },
        );
        let mut dims = batch_sizes;
        dims.extend([sm, sn]);
        let shape = self.push(Value::IntList(dims));
        Ok(self.view(c3, shape, out, meta))
    }
}

/// Whether the method of `a` keeps its caches as mutable buffers of the program: a decode
/// called at `cache_position`, as ExecuTorch's LLM runners call `forward` (the caches are no
/// ports there).
fn keeps_caches(a: &AtenGraph) -> bool {
    a.user_inputs.iter().any(|(port, _)| port == cache_ports::CACHE_POSITION)
}

/// Builds the method of `a`. `caches` are the user inputs updated in place (from `a.mutations`);
/// `alloc` says which inputs and outputs the plan owns.
pub fn build(a: &AtenGraph, weights: &[Weight], scope: &SymbolScope, alloc: Alloc, backend: Backend) -> Result<Method> {
    let mut b = Builder {
        a,
        weights,
        scope,
        m: Method { name: "forward".into(), ..Default::default() },
        names: HashMap::new(),
        ints: HashMap::new(),
        ops: HashMap::new(),
        pending: HashMap::new(),
        returned: a.user_outputs.iter().chain(&a.mutations).map(|(_, v)| v.clone()).collect(),
    };
    let mutated: Vec<&str> = a.mutations.iter().map(|(port, _)| port.as_str()).collect();
    let in_program = keeps_caches(a);
    for (port, value) in &b.a.user_inputs {
        let cache = mutated.contains(&port.as_str());
        let planned = if cache { alloc.mutable_buffers || in_program } else { alloc.graph_input };
        let data = if planned { Data::Planned(None) } else { Data::Unplanned };
        let i = b.tensor(value, &a.tensors[value], data);
        match cache && in_program {
            true => b.m.buffers.push(i),
            false => b.m.inputs.push(i),
        }
        b.names.insert(value.clone(), i);
    }
    for (fqn, value, index) in &a.parameters {
        b.pending.insert(value.clone(), (fqn.clone(), ConstSource::Weight(*index)));
    }
    for (name, value, t) in &a.constants {
        b.pending.insert(value.clone(), (name.clone(), ConstSource::Tensor(t.clone())));
    }
    for call in &a.calls {
        let target = call.target;
        let out_name = match &call.outputs[..] {
            [Output::Tensor(n)] | [Output::SymInt(n)] => n.clone(),
            _ => return Err(ProgramError { value: "?".into(), target: target.into(), msg: "not one output".into() }),
        };
        let arg = |name: &str| call.args.iter().find(|(n, _)| *n == name).map(|(_, a)| a);
        let need = |name: &str| {
            arg(name).ok_or_else(|| ProgramError {
                value: out_name.clone(),
                target: target.into(),
                msg: format!("argument `{name}` is missing"),
            })
        };
        let v = match target {
            "aten.sym_size.int" | "_operator.mul" | "_operator.add" | "_operator.floordiv" => {
                let (op, ins) = match target {
                    "aten.sym_size.int" => (b.op("aten::sym_size", "int"), [need("self")?, need("dim")?]),
                    "_operator.mul" => (b.op("executorch_prim::mul", "Scalar"), [need("a")?, need("b")?]),
                    "_operator.floordiv" => (b.op("executorch_prim::floordiv", "Scalar"), [need("a")?, need("b")?]),
                    _ => (b.op("executorch_prim::add", "Scalar"), [need("a")?, need("b")?]),
                };
                let mut args = vec![b.arg(ins[0], target)?, b.arg(ins[1], target)?];
                let out = b.push(Value::Int(0));
                args.push(out);
                b.m.instrs.push(Instr { call: Call::Kernel(op), args });
                out
            }
            "aten.matmul.default" => {
                let (x, y) = (b.arg(need("self")?, target)?, b.arg(need("other")?, target)?);
                b.matmul(x, y, &out_name, &a.tensors[&out_name])?
            }
            "aten.index_copy.default" => {
                // in place into the cache: index_put_(cache, [None, None, index], source, false)
                let dim = match need("dim")? {
                    Arg::Int(d) => *d as usize,
                    other => {
                        return Err(ProgramError {
                            value: out_name,
                            target: target.into(),
                            msg: format!("dim {other:?} is not a constant"),
                        })
                    }
                };
                let cache = b.arg(need("self")?, target)?;
                let index = b.arg(need("index")?, target)?;
                let source = b.arg(need("source")?, target)?;
                let mut idx = vec![None; dim];
                idx.push(Some(index));
                let indices = b.push(Value::OptTensorList(idx));
                let accumulate = b.push(Value::Bool(false));
                let op = b.op("aten::index_put_", "");
                b.m.instrs
                    .push(Instr { call: Call::Kernel(op), args: vec![cache, indices, source, accumulate, cache] });
                cache
            }
            "aten.reshape.default" => {
                let (x, shape) = (b.arg(need("self")?, target)?, b.arg(need("shape")?, target)?);
                b.view(x, shape, &out_name, &a.tensors[&out_name])
            }
            "aten.linear.default" if backend == Backend::Xnnpack => match b.linear_delegate(call, &out_name)? {
                Some(o) => o,
                None => b.kernel_call(call, &out_name)?,
            },
            QUANT_LINEAR if backend == Backend::Xnnpack => b.quant_linear_delegate(call, &out_name)?,
            "aten.permute.default" if backend == Backend::Xnnpack => match b.permute_delegate(call, &out_name)? {
                Some(o) => o,
                None => b.kernel_call(call, &out_name)?,
            },
            _ => b.kernel_call(call, &out_name)?,
        };
        b.names.insert(out_name, v);
    }
    // [updated caches, user outputs, updated caches] (DESIGN.md); a cache kept in the program
    // is updated there and returned by no one
    let mut mutations: Vec<usize> = a.mutations.iter().map(|(port, v)| b.write_back(port, v)).collect::<Result<_>>()?;
    if in_program {
        mutations.clear();
    }
    b.m.outputs.extend(&mutations);
    for (_, v) in &a.user_outputs {
        let i = b.value(v, "output")?;
        if let (false, Value::Tensor(t)) = (alloc.graph_output, &mut b.m.values[i]) {
            t.data = Data::Unplanned;
        }
        b.m.outputs.push(i);
    }
    if !mutations.is_empty() {
        b.m.outputs.extend(&mutations);
    }
    Ok(b.m)
}
