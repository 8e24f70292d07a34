//! A graph of ATen operator calls, the form both PyTorch-family formats serialize: user
//! inputs, parameters (the checkpoint's weights, by index), lifted tensor constants, calls to
//! `torch.ops.aten.*` overloads (and `_operator.*` on SymInts), user outputs and in-place
//! mutations of user inputs.

use hfexport_core::{DType, Dim, Tensor};
use std::collections::BTreeMap;

/// One element of a SymInt list: a constant or a SymInt value.
#[derive(Debug, Clone, PartialEq)]
pub enum SymIntArg {
    Int(i64),
    Sym(String),
}

/// An argument of a call, typed as the operator schema declares it.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    Tensor(String),
    Tensors(Vec<String>),
    /// `Tensor?[]` (advanced indexing): `None` keeps an axis whole.
    OptTensors(Vec<Option<String>>),
    Int(i64),
    Ints(Vec<i64>),
    SymInt(SymIntArg),
    SymInts(Vec<SymIntArg>),
    Float(f64),
    Bool(bool),
    ScalarType(DType),
    None,
}

/// What a call produces.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Tensor(String),
    SymInt(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// `aten.add.Tensor`, `aten.sym_size.int`, `_operator.mul`.
    pub target: &'static str,
    /// Arguments by schema name, in schema order.
    pub args: Vec<(&'static str, Arg)>,
    pub outputs: Vec<Output>,
}

/// dtype and sizes of a tensor value.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorMeta {
    pub dtype: DType,
    pub sizes: Vec<Dim>,
}

#[derive(Debug, Clone, Default)]
pub struct AtenGraph {
    /// (port name, value name), in call order.
    pub user_inputs: Vec<(String, String)>,
    /// (checkpoint name, value name, graph weight index).
    pub parameters: Vec<(String, String, usize)>,
    /// (constant name, value name, tensor).
    pub constants: Vec<(String, String, Tensor)>,
    pub calls: Vec<Call>,
    pub tensors: BTreeMap<String, TensorMeta>,
    /// The expression of each SymInt value.
    pub sym_ints: BTreeMap<String, Dim>,
    /// (port name, value name), in return order.
    pub user_outputs: Vec<(String, String)>,
    /// (user input port, value holding its new contents), returned before the user outputs.
    pub mutations: Vec<(String, String)>,
}
