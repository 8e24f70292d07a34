//! `insta` snapshots of the IR XML of one small graph per op family: a change in what the
//! lowering writes shows up as a readable XML diff. (That the files load and compute the right
//! values is checked in the workspace tests against OpenVINO itself.)

use hfexport_core::weights::WeightExpr;
use hfexport_core::{BinaryOp, DType, Dim, Graph, Op, ReduceKind, Tensor, UnaryOp};
use hfexport_openvino::lower::{lower, LowerOptions};

const PLAIN: LowerOptions = LowerOptions { stateful: false, compress_to_fp16: false };

fn xml(g: &Graph, opts: LowerOptions) -> String {
    lower(g, opts).unwrap().net.to_xml(&g.name)
}

#[test]
fn elementwise_and_reductions() {
    let mut g = Graph::new("elementwise");
    let b = Dim::sym(&g.symbols.declare("batch", 1, 8).unwrap());
    let x = g.add_input("x", DType::F32, vec![b, Dim::konst(4)]).unwrap();
    let two = g.op("two", Op::Constant(Tensor::scalar_float(DType::F32, 2.0)), &[]).unwrap();
    let sq = g.op("square", Op::Binary(BinaryOp::Pow), &[x, two]).unwrap();
    let mean = g.op("mean", Op::Reduce { kind: ReduceKind::Mean, axes: vec![1], keep_dims: true }, &[sq]).unwrap();
    let root = g.op("sqrt", Op::Unary(UnaryOp::Sqrt), &[mean]).unwrap();
    let inv = g.op("inv", Op::Unary(UnaryOp::Reciprocal), &[root]).unwrap();
    let y = g.op("scaled", Op::Binary(BinaryOp::Mul), &[x, inv]).unwrap();
    let pos = g.op("positive", Op::Binary(BinaryOp::Greater), &[y, two]).unwrap();
    let sel = g.op("select", Op::Where, &[pos, y, x]).unwrap();
    let h = g.op("half", Op::Cast(DType::F16), &[sel]).unwrap();
    g.add_output("y", h).unwrap();
    insta::assert_snapshot!(xml(&g, PLAIN));
}

#[test]
fn shapes_with_symbolic_dims() {
    let mut g = Graph::new("shapes");
    let b = Dim::sym(&g.symbols.declare("batch", 1, 8).unwrap());
    let s = Dim::sym(&g.symbols.declare("sequence", 1, 16).unwrap());
    let x = g.add_input("x", DType::F32, vec![b.clone(), s.clone(), Dim::konst(6)]).unwrap();
    let flat = g.op("flatten", Op::Reshape { shape: vec![b.mul(&s), Dim::konst(6)] }, &[x]).unwrap();
    let t = g.op("transpose", Op::Transpose { perm: vec![1, 0] }, &[flat]).unwrap();
    let head = g.op("slice", Op::Slice { axis: 0, start: Dim::konst(0), end: Dim::konst(3) }, &[t]).unwrap();
    let both = g.op("concat", Op::Concat { axis: 0 }, &[head, head]).unwrap();
    let idx = g.op("iota", Op::Iota { len: s }, &[]).unwrap();
    let picked = g.op("gather", Op::Gather { axis: 1 }, &[x, idx]).unwrap();
    g.add_output("both", both).unwrap();
    g.add_output("picked", picked).unwrap();
    insta::assert_snapshot!(xml(&g, PLAIN));
}

#[test]
fn linear_with_f16_compressed_weights() {
    let mut g = Graph::new("linear");
    let b = Dim::sym(&g.symbols.declare("batch", 1, 8).unwrap());
    let x = g.add_input("x", DType::F32, vec![b, Dim::konst(4)]).unwrap();
    let w = g.add_weight("proj.weight", WeightExpr::stored("proj.weight"), DType::F32, &[3, 4]);
    let bias = g.add_weight("proj.bias", WeightExpr::stored("proj.bias"), DType::F32, &[3]);
    let y = g.op("proj", Op::Linear, &[x, w, bias]).unwrap();
    g.add_output("y", y).unwrap();
    insta::assert_snapshot!(xml(&g, LowerOptions { stateful: false, compress_to_fp16: true }));
}

/// Attention with grouped KV heads and a sliding window, over a static cache updated at the
/// positions, stateful: the cache pair becomes a variable read, reordered by `beam_idx`,
/// updated and assigned.
#[test]
fn stateful_static_cache_attention() {
    let mut g = Graph::new("attention");
    let q = Dim::sym(&g.symbols.declare("sequence", 1, 8).unwrap());
    let len = Dim::sym(&g.symbols.declare("cache_len", 1, 8).unwrap());
    let one = Dim::konst(1);
    let query = g.add_input("query", DType::F32, vec![one.clone(), Dim::konst(4), q.clone(), Dim::konst(2)]).unwrap();
    let mask =
        g.add_input("attention_mask", DType::Bool, vec![one.clone(), one.clone(), q.clone(), len.clone()]).unwrap();
    let positions = g.add_input("position_ids", DType::I64, vec![one.clone(), q.clone()]).unwrap();
    let cache = g
        .add_input("past_key_values.keys", DType::F32, vec![one.clone(), Dim::konst(2), len.clone(), Dim::konst(2)])
        .unwrap();
    let new = g.op("new_keys", Op::Slice { axis: 1, start: Dim::konst(0), end: Dim::konst(2) }, &[query]).unwrap();
    let keys = g.op("update", Op::CacheUpdate, &[cache, new, positions]).unwrap();
    let slots = g.op("slots", Op::Iota { len }, &[]).unwrap();
    let slots = g
        .op("slots_row", Op::Reshape { shape: vec![one, Dim::sym(&g.symbols.get("cache_len").unwrap())] }, &[slots])
        .unwrap();
    let attn = Op::Attention { scale: 0.5, softcap: None, sliding_window: Some(3), sinks: false };
    let out = g.op("attention", attn, &[query, keys, keys, mask, positions, slots]).unwrap();
    g.add_output("out", out).unwrap();
    g.add_output("present.keys", keys).unwrap();
    g.add_alias("present.keys", "past_key_values.keys");
    // as the exporter does: the window goes into the mask before lowering
    let g = hfexport_core::decompose::fold_sliding_windows(&g).unwrap();
    insta::assert_snapshot!(xml(&g, LowerOptions { stateful: true, compress_to_fp16: false }));
}
