//! A stable text dump of a graph: for snapshot tests and `hfexport inspect`.
//!
//! One line per item, values numbered by id, nodes in order, names after `#`. The format only
//! changes when the graph does, so a snapshot diff reads as a graph diff.

use crate::dim::shape_to_string;
use crate::graph::{Graph, ValueId};
use crate::ops::Op;
use crate::tensor::TensorData;
use std::fmt::Write;

fn ty(g: &Graph, v: ValueId) -> String {
    let i = g.info(v);
    format!("{}{}", i.dtype, shape_to_string(&i.shape))
}

fn constant_text(op: &Op) -> Option<String> {
    let Op::Constant(t) = op else { return None };
    if t.numel() > 8 {
        return None;
    }
    let vals: Vec<String> = match t.data() {
        TensorData::Float(v) => v.iter().map(|x| format!("{x:e}")).collect(),
        TensorData::Int(v) => v.iter().map(|x| x.to_string()).collect(),
        TensorData::Bool(v) => v.iter().map(|x| x.to_string()).collect(),
    };
    Some(format!("{{{}{:?} = [{}]}}", t.dtype(), t.shape(), vals.join(", ")))
}

pub fn dump(g: &Graph) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "graph {}", g.name);
    for (sym, r) in g.symbols.iter() {
        let _ = writeln!(s, "  symbol {}: {}..={}", sym.name(), r.min, r.max);
    }
    for p in g.inputs() {
        let _ = writeln!(s, "  input %{} {}: {}", p.value.0, p.name, ty(g, p.value));
    }
    for w in g.weights() {
        // the source is shown only when it is more than the stored tensor of the same name
        let src = if w.expr == crate::weights::WeightExpr::stored(&w.name) {
            String::new()
        } else {
            format!(" = {}", w.expr)
        };
        let _ = writeln!(s, "  weight %{} {}: {}{src}", w.value.0, w.name, ty(g, w.value));
    }
    for n in g.nodes() {
        let outs: Vec<String> = n.outputs.iter().map(|v| format!("%{}", v.0)).collect();
        let ins: Vec<String> = n.inputs.iter().map(|v| format!("%{}", v.0)).collect();
        let tys: Vec<String> = n.outputs.iter().map(|v| ty(g, *v)).collect();
        let attrs = constant_text(&n.op).unwrap_or_else(|| n.op.attrs());
        let _ = writeln!(
            s,
            "  {} = {}{}({}) : {}  # {}",
            outs.join(", "),
            n.op.name(),
            attrs,
            ins.join(", "),
            tys.join(", "),
            n.name
        );
    }
    for p in g.outputs() {
        let _ = writeln!(s, "  output {} = %{}: {}", p.name, p.value.0, ty(g, p.value));
    }
    for a in g.aliases() {
        let _ = writeln!(s, "  alias {} updates {} in place", a.output, a.input);
    }
    s
}

/// Op counts, for `hfexport inspect`: `Linear x14, RmsNorm x5, …` sorted by name.
pub fn op_histogram(g: &Graph) -> Vec<(&'static str, usize)> {
    let mut m = std::collections::BTreeMap::new();
    for n in g.nodes() {
        *m.entry(n.op.name()).or_insert(0) += 1;
    }
    m.into_iter().collect()
}
