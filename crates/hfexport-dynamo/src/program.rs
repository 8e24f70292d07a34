//! The serialized ExportedProgram (`models/model.json`) of an [`AtenGraph`], in the schema of
//! torch 2.13 (`torch/_export/serde/schema.py`, version 8.20): the graph (placeholders, nodes
//! with schema-named arguments, a TensorMeta for every tensor value and an expression for every
//! SymInt), the signature (parameters, lifted constants, user inputs; in-place mutations of user
//! inputs before the user outputs), the root module's call specs and the symbols' ranges.
//!
//! Symbols are renamed `s0`, `s1`, … (torch's own spelling; names like `sequence` would parse
//! as sympy functions). Every program is in the functional ATEN dialect: a cache update is an
//! `index_copy` whose result is a `user_input_mutation` output, which `ep.module()` copies
//! back into the caller's tensor.

use hfexport_aten::{Arg, AtenGraph, Output, SymIntArg, TensorMeta};
use hfexport_core::{DType, Dim, Factor, Graph, Symbol};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// How the program is called: keywords (`module()(input_ids=…, attention_mask=…)`, the forward
/// graph) or positionally (`module()(input_ids, attention_mask, position_ids, *cache)`, the
/// generation components), as DESIGN.md fixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStyle {
    Keywords,
    Positional,
}

/// ScalarType numbers of the schema.
pub fn scalar_type(d: DType) -> i64 {
    match d {
        DType::U8 => 1,
        DType::I8 => 2,
        DType::I32 => 4,
        DType::I64 => 5,
        DType::F16 => 6,
        DType::F32 => 7,
        DType::Bool => 12,
        DType::BF16 => 13,
    }
}

/// Symbol names and example sizes (hints) of a graph.
pub struct Symbols {
    names: BTreeMap<Symbol, (String, i64)>,
}

impl Symbols {
    /// `s0`, `s1`, … in the graph's declaration order, each hinted at a small in-range size.
    pub fn of(g: &Graph) -> Symbols {
        let names = g
            .symbols
            .iter()
            .enumerate()
            .map(|(i, (s, r))| (s.clone(), (format!("s{i}"), 4i64.clamp(r.min, r.max.max(r.min)))))
            .collect();
        Symbols { names }
    }

    /// The sympy text of a dim (`2*s0*s1 + 1`, a floor as torch's `FloorDiv(s0 + 3, 5)`) and
    /// its value at the hints.
    fn expr(&self, d: &Dim) -> (String, i64) {
        let mut parts = vec![];
        let mut hint = 0i64;
        for (monomial, coeff) in d.terms() {
            let mut factors: Vec<String> = vec![];
            let mut v = coeff;
            if coeff != 1 || monomial.is_empty() {
                factors.push(coeff.to_string());
            }
            for f in monomial {
                let (text, h) = match f {
                    Factor::Sym(s) => self.names[s].clone(),
                    Factor::FloorDiv(inner, by) => {
                        let (text, h) = self.expr(inner);
                        (format!("FloorDiv({text}, {by})"), h.div_euclid(*by))
                    }
                };
                factors.push(text);
                v *= h;
            }
            hint += v;
            parts.push(factors.join("*"));
        }
        if parts.is_empty() {
            return ("0".into(), 0);
        }
        (parts.join(" + "), hint)
    }

    fn sym_int(&self, d: &Dim) -> Value {
        match d.as_const() {
            Some(c) => json!({"as_int": c}),
            None => {
                let (e, h) = self.expr(d);
                json!({"as_expr": {"expr_str": e, "hint": {"as_int": h}}})
            }
        }
    }

    /// `range_constraints`: every symbol with its range.
    pub fn ranges(&self, g: &Graph) -> Value {
        let mut m = serde_json::Map::new();
        for (s, (name, _)) in &self.names {
            let r = g.symbols.range(s);
            m.insert(name.clone(), json!({"min_val": r.min, "max_val": r.max}));
        }
        Value::Object(m)
    }

    /// A TensorMeta: contiguous strides, CPU, strided layout.
    pub fn tensor_meta(&self, m: &TensorMeta, requires_grad: bool) -> Value {
        let mut strides = vec![Dim::konst(1); m.sizes.len()];
        for i in (0..m.sizes.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1].mul(&m.sizes[i + 1]);
        }
        json!({
            "dtype": scalar_type(m.dtype),
            "sizes": m.sizes.iter().map(|d| self.sym_int(d)).collect::<Vec<_>>(),
            "requires_grad": requires_grad,
            "device": {"type": "cpu", "index": null},
            "strides": strides.iter().map(|d| self.sym_int(d)).collect::<Vec<_>>(),
            "storage_offset": {"as_int": 0},
            "layout": 7,
        })
    }
}

fn tensor(name: &str) -> Value {
    json!({"as_tensor": {"name": name}})
}

fn sym_arg(a: &SymIntArg) -> Value {
    match a {
        SymIntArg::Int(i) => json!({"as_int": i}),
        SymIntArg::Sym(n) => json!({"as_name": n}),
    }
}

fn argument(a: &Arg) -> Value {
    match a {
        Arg::Tensor(n) => tensor(n),
        Arg::Tensors(ns) => json!({"as_tensors": ns.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}),
        Arg::OptTensors(ns) => json!({"as_optional_tensors": ns
            .iter()
            .map(|n| match n {
                Some(n) => tensor(n),
                None => json!({"as_none": true}),
            })
            .collect::<Vec<_>>()}),
        Arg::Int(i) => json!({"as_int": i}),
        Arg::Ints(v) => json!({"as_ints": v}),
        Arg::SymInt(SymIntArg::Int(i)) => json!({"as_int": i}),
        Arg::SymInt(SymIntArg::Sym(n)) => json!({"as_sym_int": {"as_name": n}}),
        Arg::SymInts(v) => match v
            .iter()
            .map(|a| if let SymIntArg::Int(i) = a { Some(*i) } else { None })
            .collect::<Option<Vec<i64>>>()
        {
            Some(ints) => json!({"as_ints": ints}),
            None => json!({"as_sym_ints": v.iter().map(sym_arg).collect::<Vec<_>>()}),
        },
        Arg::Float(f) => json!({"as_float": f}),
        Arg::Bool(b) => json!({"as_bool": b}),
        Arg::ScalarType(d) => json!({"as_scalar_type": scalar_type(*d)}),
        Arg::None => json!({"as_none": true}),
    }
}

/// Keyword-only arguments of the operators the lowering emits (schema `*`).
fn keyword_only(target: &str, arg: &str) -> bool {
    matches!(
        (target, arg),
        ("aten._to_copy.default", "dtype")
            | ("aten.arange.start_step", "dtype")
            | ("aten.scaled_dot_product_attention.default", "scale" | "enable_gqa")
            | ("aten.expand.default", "implicit")
    )
}

/// The treespec string (`torch.utils._pytree.treespec_dumps`, protocol 1) of a call.
fn in_spec(style: CallStyle, names: &[String]) -> String {
    let leaf = json!({"type": null, "context": null, "children_spec": []});
    let tuple = |children: Vec<Value>| json!({"type": "builtins.tuple", "context": "null", "children_spec": children});
    let dict = |keys: &[String], children: Vec<Value>| json!({"type": "builtins.dict", "context": serde_json::to_string(keys).expect("strings"), "children_spec": children});
    let spec = match style {
        CallStyle::Positional => tuple(vec![tuple(vec![leaf; names.len()]), dict(&[], vec![])]),
        CallStyle::Keywords => tuple(vec![tuple(vec![]), dict(names, vec![leaf; names.len()])]),
    };
    serde_json::to_string(&json!([1, spec])).expect("json")
}

fn out_spec(n: usize) -> String {
    let leaf = json!({"type": null, "context": null, "children_spec": []});
    let spec = if n == 1 {
        leaf
    } else {
        json!({"type": "builtins.tuple", "context": "null", "children_spec": vec![leaf; n]})
    };
    serde_json::to_string(&json!([1, spec])).expect("json")
}

/// The `models/model.json` document.
pub fn exported_program(g: &Graph, a: &AtenGraph, style: CallStyle) -> Value {
    let syms = Symbols::of(g);
    let mut inputs = vec![];
    let mut input_specs = vec![];
    // float weights are parameters; integer ones (quantized values) persistent buffers, which
    // torch's loader does not ask to require gradients; parameters come first, as torch orders
    // its placeholders
    let is_param = |value: &String| a.tensors[value].dtype.is_float();
    for (fqn, value, _) in a.parameters.iter().filter(|p| is_param(&p.1)) {
        inputs.push(tensor(value));
        input_specs.push(json!({"parameter": {"arg": {"name": value}, "parameter_name": fqn}}));
    }
    for (fqn, value, _) in a.parameters.iter().filter(|p| !is_param(&p.1)) {
        inputs.push(tensor(value));
        input_specs.push(json!({"buffer": {"arg": {"name": value}, "buffer_name": fqn, "persistent": true}}));
    }
    for (name, value, _) in &a.constants {
        inputs.push(tensor(value));
        input_specs.push(json!({"tensor_constant": {"arg": {"name": value}, "tensor_constant_name": name}}));
    }
    for (_, value) in &a.user_inputs {
        inputs.push(tensor(value));
        input_specs.push(json!({"user_input": {"arg": tensor(value)}}));
    }
    let mut outputs = vec![];
    let mut output_specs = vec![];
    for (port, value) in &a.mutations {
        let input = &a.user_inputs.iter().find(|(p, _)| p == port).expect("a mutation names a user input").1;
        outputs.push(tensor(value));
        output_specs.push(json!({"user_input_mutation": {"arg": {"name": value}, "user_input_name": input}}));
    }
    for (_, value) in &a.user_outputs {
        outputs.push(tensor(value));
        output_specs.push(json!({"user_output": {"arg": tensor(value)}}));
    }
    let nodes: Vec<Value> = a
        .calls
        .iter()
        .map(|c| {
            let target =
                if c.target.starts_with("aten.") { format!("torch.ops.{}", c.target) } else { c.target.to_string() };
            let outs: Vec<Value> = c
                .outputs
                .iter()
                .map(|o| match o {
                    Output::Tensor(n) => tensor(n),
                    Output::SymInt(n) => json!({"as_sym_int": {"as_name": n}}),
                })
                .collect();
            let name = match &c.outputs[0] {
                Output::Tensor(n) | Output::SymInt(n) => n.clone(),
            };
            json!({
                "target": target,
                "inputs": c.args.iter().map(|(n, v)| json!({
                    "name": n, "arg": argument(v), "kind": if keyword_only(c.target, n) { 2 } else { 1 }
                })).collect::<Vec<_>>(),
                "outputs": outs,
                "metadata": {},
                "is_hop_single_tensor_return": null,
                "name": name,
            })
        })
        .collect();
    let params: std::collections::HashSet<&str> = a.parameters.iter().map(|(_, v, _)| v.as_str()).collect();
    let tensor_values: serde_json::Map<String, Value> = a
        .tensors
        .iter()
        .map(|(n, m)| (n.clone(), syms.tensor_meta(m, params.contains(n.as_str()) && m.dtype.is_float())))
        .collect();
    let sym_int_values: serde_json::Map<String, Value> =
        a.sym_ints.iter().map(|(n, d)| (n.clone(), syms.sym_int(d))).collect();
    let names: Vec<String> = a.user_inputs.iter().map(|(_, v)| v.clone()).collect();
    json!({
        "graph_module": {
            "graph": {
                "inputs": inputs,
                "outputs": outputs,
                "nodes": nodes,
                "tensor_values": tensor_values,
                "sym_int_values": sym_int_values,
                "sym_bool_values": {},
                "is_single_tensor_return": false,
                "custom_obj_values": {},
                "sym_float_values": {},
            },
            "signature": {"input_specs": input_specs, "output_specs": output_specs},
            "module_call_graph": [{"fqn": "", "signature": {
                "inputs": [], "outputs": [],
                "in_spec": in_spec(style, &names),
                "out_spec": out_spec(a.user_outputs.len()),
                "forward_arg_names": names,
            }}],
            "metadata": {},
            "treespec_namedtuple_fields": {},
        },
        "opset_version": {"aten": 10},
        "range_constraints": syms.ranges(g),
        "schema_version": {"major": 8, "minor": 20},
        "verifiers": ["ATEN"],
        "torch_version": "2.13.0",
        "guards_code": [],
    })
}

/// A payload config entry (`data/weights/model_weights_config.json` and the constants').
pub fn payload_entry(syms: &Symbols, path_name: &str, meta: &TensorMeta, is_param: bool) -> Value {
    json!({"path_name": path_name, "is_param": is_param, "use_pickle": false, "tensor_meta": syms.tensor_meta(meta, is_param)})
}
