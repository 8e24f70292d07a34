//! Checkpoints quantized on the hub (GPTQ, AWQ) imported as they are stored: each linear
//! over a quantized module reads the module's own 4-bit parts, never a float copy.
//!
//! `hfexport-models` (`prequantized.rs`) reads the checkpoint's int32 words and answers for a
//! module's parts as virtual tensors (`P.qweight:values`, `:scales`, `:zeros`) and its
//! dequantized `P.weight`, so builders plan an ordinary linear; [`load_prequantized`] then puts
//! the parts back in the graph as the same `QuantLinear` a recipe's asymmetric int4 weight gives,
//! and every format lowers it the same way.

use hfexport_core::decompose::{decompose, drop_unread_weights, rebuild};
use hfexport_core::graph::Producer;
use hfexport_core::{Graph, Op, Result, TensorInfo, ValueId, WeightExpr};

/// `g` with each `Linear` whose weight is a GPTQ/AWQ module's dequantized virtual tensor
/// (`P.weight`, see `hfexport_models::prequantized`) reading the module's own parts instead:
/// `QuantLinear { bits: 4, group, zero_point: true }` over `P.qweight:values` (u8),
/// `P.qweight:scales` (cast to the export dtype) and `P.qweight:zeros`. `info` answers for the
/// checkpoint's tensors (virtual ones included).
pub fn load_prequantized(g: &Graph, info: &dyn Fn(&str) -> Option<TensorInfo>) -> Result<Graph> {
    let quantized_module = |e: &WeightExpr| {
        stored_name(e)
            .and_then(|n| n.strip_suffix(".weight"))
            .is_some_and(|p| info(&format!("{p}.qweight:values")).is_some())
    };
    if !g.weights().iter().any(|w| quantized_module(&w.expr)) {
        return Ok(g.clone());
    }
    let g = &decompose(g, &|op| matches!(op, Op::GatedMlp { .. }))?;
    let rewritten = rebuild(g, &mut |out, node, ins| {
        let prefix = match (&node.op, ins.get(1).map(|&v| out.producer(v))) {
            (Op::Linear, Some(Producer::Weight(w))) => {
                stored_name(&out.weights()[w].expr).and_then(|n| n.strip_suffix(".weight")).map(str::to_string)
            }
            _ => None,
        };
        let parts = prefix.as_ref().and_then(|p| {
            let part = |s: &str| info(&format!("{p}.qweight{s}")).map(|i| (format!("{p}.qweight{s}"), i));
            Some((part(":values")?, part(":scales")?, part(":zeros")?))
        });
        let (Some(prefix), Some(((vn, vi), (sn, si), (zn, zi)))) = (prefix, parts) else {
            return out.add_node(&node.name, node.op.clone(), ins);
        };
        let dtype = out.info(ins[1]).dtype;
        let scales = match si.dtype == dtype {
            true => WeightExpr::stored(&sn),
            false => WeightExpr::Cast(Box::new(WeightExpr::stored(&sn)), dtype),
        };
        let q = out.add_weight(&format!("{prefix}.weight_q"), WeightExpr::stored(&vn), vi.dtype, &vi.shape);
        let s = out.add_weight(&format!("{prefix}.weight_scales"), scales, dtype, &si.shape);
        let z = out.add_weight(&format!("{prefix}.weight_zero_points"), WeightExpr::stored(&zn), zi.dtype, &zi.shape);
        let group = vi.shape[1] / si.shape[1].max(1);
        let all: Vec<ValueId> = [&[ins[0], q, s, z][..], &ins[2..]].concat();
        out.add_node(&node.name, Op::QuantLinear { bits: 4, group, zero_point: true }, &all)
    })?;
    drop_unread_weights(&rewritten)
}

/// The stored tensor a float weight reads, possibly through a cast.
fn stored_name(e: &WeightExpr) -> Option<&str> {
    match e {
        WeightExpr::Stored(n) => Some(n),
        WeightExpr::Cast(inner, _) => stored_name(inner),
        _ => None,
    }
}
