//! The quantization pass: a recipe ([`QuantRecipe`], parsed from the export config by core)
//! applied to a built graph.
//!
//! It runs once per component, before `prepare` (so every backend sees the same quantized
//! graph and decides per op how to lower it), and rewrites:
//! - each `Linear` reading a weight inside the decoder layers into `QuantLinear` with the
//!   recipe's `weights` scheme;
//! - the output head (the node the builders name `lm_head`) with the `lm_head` scheme;
//! - the token embeddings (each row `Gather` of a weight by the `input_ids` input, or by ids a
//!   `Where` remapped from it: Gemma 4's and Gemma 3n's per-layer embeddings too) into
//!   `QuantGather` with the `embeddings` scheme;
//!
//! except modules the recipe's `exclude` names (by the weight's name without `.weight`, as
//! transformers names modules, or by node name). Gated MLPs are expanded into their three
//! `Linear`s first. The integer values, scales and zero points are
//! lazy weight expressions over the float weight ([`WeightExpr::Quantize`] with the
//! [`Rtn`] kernel): nothing is computed until a writer streams them, one tensor at a time. A tied head quantized with the
//! embeddings' scheme reads the same expressions, so each part is stored once. Mixture-of-
//! experts blocks keep float experts (their stacked weights are not `Linear`s).

use crate::rtn::Rtn;
use hfexport_core::decompose::{decompose, drop_unread_weights, rebuild};
use hfexport_core::graph::Producer;
use hfexport_core::{
    DType, Error, Graph, Op, QuantForm, QuantPart, QuantRecipe, QuantScheme, Result, ValueId, WeightExpr,
};
use std::collections::HashMap;

/// `g` with the recipe's linears and embedding quantized; an error naming the tensor when a
/// scheme does not fit it (a group size that does not divide the input dimension).
/// `form`: what the format needs of the scales (XNNPACK's: positive, bfloat16 in blocks).
pub fn quantize_graph(g: &Graph, recipe: &QuantRecipe, form: QuantForm) -> Result<Graph> {
    // a gated MLP's three projections become `Linear`s first (every backend decomposes it)
    let g = &decompose(g, &|op| matches!(op, Op::GatedMlp { .. }))?;
    let ids = token_ids(g);
    let mut done: HashMap<(ValueId, QuantScheme), Vec<ValueId>> = HashMap::new();
    let rewritten = rebuild(g, &mut |out, node, ins| {
        let slot = match node.op {
            Op::Linear => Some(1),
            Op::Gather { axis: 0 } if ids.contains(&node.inputs[1]) => Some(0),
            _ => None,
        };
        let weight = slot.and_then(|s| match out.producer(ins[s]) {
            Producer::Weight(w) => Some(out.weights()[w].clone()),
            _ => None,
        });
        let scheme = match (&node.op, slot, &weight) {
            (_, _, None) => None,
            (_, _, Some(w)) if recipe.excludes(w.name.strip_suffix(".weight").unwrap_or(&w.name)) => None,
            _ if recipe.excludes(&node.name) => None,
            (Op::Linear, _, _) if node.name == "lm_head" => recipe.lm_head,
            (Op::Linear, _, _) => Some(recipe.weights),
            _ => recipe.embeddings,
        }
        .map(|s| QuantScheme { positive_scales: form.positive_scales && s.symmetric, ..s });
        let (Some(scheme), Some(slot), Some(w)) = (scheme, slot, weight) else {
            return out.add_node(&node.name, node.op.clone(), ins);
        };
        let cols = out.info(ins[slot]).shape[1].as_const().unwrap_or(0) as usize;
        let group = scheme.group_len(&w.expr.to_string(), cols)?;
        let params = match done.get(&(ins[slot], scheme)) {
            Some(p) => p.clone(),
            None => {
                let p = quantized_params(out, ins[slot], &w.name, &w.expr, scheme, form.group_scales)?;
                done.insert((ins[slot], scheme), p.clone());
                p
            }
        };
        let (bits, zero_point) = (scheme.bits, !scheme.symmetric);
        match node.op {
            Op::Linear => {
                let all: Vec<ValueId> = [&ins[..1], &params[..], &ins[2..]].concat();
                out.add_node(&node.name, Op::QuantLinear { bits, group, zero_point }, &all)
            }
            _ => {
                let all: Vec<ValueId> = [&params[..], &ins[1..]].concat();
                out.add_node(&node.name, Op::QuantGather { bits, group, zero_point }, &all)
            }
        }
    })?;
    drop_unread_weights(&rewritten)
}

/// The `input_ids` input and the values a `Where` makes of it: ids remapped before a table
/// reads them (Gemma 4's media placeholders as the padding token, Gemma 3n's ids past its
/// per-layer table as 0) are still the tokens' ids, and the tables that read them embeddings.
fn token_ids(g: &Graph) -> std::collections::HashSet<ValueId> {
    let mut ids: std::collections::HashSet<ValueId> =
        g.inputs().iter().filter(|p| p.name == "input_ids").map(|p| p.value).collect();
    for node in g.nodes() {
        if matches!(node.op, Op::Where) && node.inputs[1..].iter().any(|v| ids.contains(v)) {
            ids.extend(&node.outputs);
        }
    }
    ids
}

/// Adds the lazy parts of `weight` quantized by `scheme`: values, scales (in the weight's
/// dtype; for a group-wise scheme rounded to `group_scales` first when given) and, for an
/// asymmetric scheme, zero points.
fn quantized_params(
    g: &mut Graph,
    weight: ValueId,
    name: &str,
    expr: &WeightExpr,
    scheme: QuantScheme,
    group_scales: Option<DType>,
) -> Result<Vec<ValueId>> {
    let info = g.info(weight).clone();
    let dims: Vec<usize> = info.shape.iter().map(|d| d.as_const().unwrap_or(0) as usize).collect();
    let [rows, cols] = dims[..] else {
        return Err(Error::Weight {
            tensor: expr.to_string(),
            msg: format!("only 2-D weights are quantized, got {dims:?}"),
        });
    };
    let groups = cols / scheme.group_len(&expr.to_string(), cols)?;
    let scale_dtype = match (scheme.group, group_scales) {
        (Some(_), Some(d)) => d,
        _ => info.dtype,
    };
    let part = |part| Rtn::part(expr, scheme, scale_dtype, part);
    let scales = match scale_dtype == info.dtype {
        true => part(QuantPart::Scales),
        false => WeightExpr::Cast(Box::new(part(QuantPart::Scales)), info.dtype),
    };
    // `<module>.weight_int4_g32_q`: a sibling of the weight, never a child (a `.pt2` module
    // cannot hold both a parameter `weight` and a submodule of that name)
    let stem = format!("{name}_{}", scheme.label().replace('/', "_"));
    let mut params = vec![
        g.add_weight(&format!("{stem}_q"), part(QuantPart::Values), scheme.value_dtype(), &[rows, cols]),
        g.add_weight(&format!("{stem}_scales"), scales, info.dtype, &[rows, groups]),
    ];
    if !scheme.symmetric {
        let z = part(QuantPart::ZeroPoints);
        params.push(g.add_weight(&format!("{stem}_zero_points"), z, DType::U8, &[rows, groups]));
    }
    Ok(params)
}
