//! The verifier: structural invariants every pass must keep. It re-runs shape inference on
//! every node, so a pass that rewires values without updating infos is caught at once.

use crate::error::{Error, Result};
use crate::graph::{Graph, Producer, ValueId};

pub fn verify(g: &Graph) -> Result<()> {
    let bad = |msg: String| Error::Verify { graph: g.name.clone(), msg };
    let mut defined = vec![false; g.num_values()];
    for p in g.inputs() {
        defined[p.value.0] = true;
    }
    for w in g.weights() {
        if g.info(w.value).shape.iter().any(|d| d.as_const().is_none()) {
            return Err(bad(format!("weight `{}` has a symbolic shape", w.name)));
        }
        defined[w.value.0] = true;
    }
    for (i, n) in g.nodes().iter().enumerate() {
        for v in &n.inputs {
            if v.0 >= g.num_values() || !defined[v.0] {
                return Err(bad(format!("node `{}` reads %{} before it is defined", n.name, v.0)));
            }
        }
        let infos: Vec<_> = n.inputs.iter().map(|v| g.info(*v)).collect();
        let inferred = n.op.infer(&infos).map_err(|msg| Error::Infer {
            node: n.name.clone(),
            op: n.op.name().to_string(),
            msg,
        })?;
        if inferred.len() != n.outputs.len() {
            return Err(bad(format!(
                "node `{}` has {} outputs, its op makes {}",
                n.name,
                n.outputs.len(),
                inferred.len()
            )));
        }
        for (slot, (v, info)) in n.outputs.iter().zip(&inferred).enumerate() {
            if g.producer(*v) != (Producer::Node { node: i, slot }) || g.info(*v) != info {
                return Err(bad(format!(
                    "output {slot} of node `{}` is stale: recorded {:?}, inferred {:?}",
                    n.name,
                    g.info(*v),
                    info
                )));
            }
            defined[v.0] = true;
        }
    }
    for p in g.outputs() {
        if !defined.get(p.value.0).copied().unwrap_or(false) {
            return Err(bad(format!("output `{}` is not defined", p.name)));
        }
    }
    for s in g.inputs().iter().flat_map(|p| g.info(p.value).shape.iter()).flat_map(|d| d.symbols()) {
        if g.symbols.get(s.name()).is_none() {
            return Err(bad(format!("symbol `{}` is used by an input but not declared", s.name())));
        }
    }
    for a in g.aliases() {
        let (o, i) = (g.output(&a.output), g.input(&a.input));
        let (Some(o), Some(i)) = (o, i) else {
            return Err(bad(format!("alias {} -> {} names a missing port", a.output, a.input)));
        };
        if g.info(o.value) != g.info(i.value) {
            return Err(bad(format!(
                "alias {} -> {}: {:?} vs {:?}",
                a.output,
                a.input,
                g.info(o.value),
                g.info(i.value)
            )));
        }
    }
    Ok(())
}

/// Values read by no node and no output (dead code a pass left behind).
pub fn unused_values(g: &Graph) -> Vec<ValueId> {
    let mut used = vec![false; g.num_values()];
    g.nodes().iter().flat_map(|n| &n.inputs).for_each(|v| used[v.0] = true);
    g.outputs().iter().for_each(|p| used[p.value.0] = true);
    g.nodes().iter().flat_map(|n| &n.outputs).copied().filter(|v| !used[v.0]).collect()
}
