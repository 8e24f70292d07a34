//! `insta` snapshot of the ExportedProgram JSON of one small graph covering the argument kinds
//! the lowering writes: a static cache updated in place (a `user_input_mutation`), attention
//! with grouped KV heads and a sliding window (lifted scalar constants, keyword-only arguments),
//! a reshape over symbolic sizes (`sym_size` and `_operator.mul`), and a linear with a
//! parameter. That the archives load and compute the right values is checked in the workspace
//! tests against torch itself.

use hfexport_core::weights::WeightExpr;
use hfexport_core::{DType, Dim, Graph, Op};
use hfexport_dynamo::program::{exported_program, CallStyle};

#[test]
fn cache_attention_and_symbolic_reshape() {
    let mut g = Graph::new("decode");
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
    let slots = g.op("slots", Op::Iota { len: len.clone() }, &[]).unwrap();
    let slots = g.op("slots_row", Op::Reshape { shape: vec![one.clone(), len] }, &[slots]).unwrap();
    let attn = Op::Attention { scale: 0.5, softcap: None, sliding_window: Some(3), sinks: false };
    let out = g.op("attention", attn, &[query, keys, keys, mask, positions, slots]).unwrap();
    let flat = g.op("flatten", Op::Reshape { shape: vec![Dim::konst(4).mul(&q), Dim::konst(2)] }, &[out]).unwrap();
    let w = g.add_weight("proj.weight", WeightExpr::stored("proj.weight"), DType::F32, &[3, 2]);
    let y = g.op("proj", Op::Linear, &[flat, w]).unwrap();
    g.add_output("logits", y).unwrap();
    g.add_output("present.keys", keys).unwrap();
    g.add_alias("present.keys", "past_key_values.keys");
    // as the exporter does: the window goes into the mask before lowering
    let g = hfexport_core::decompose::fold_sliding_windows(&g).unwrap();
    let aten = hfexport_aten::lower(&g).unwrap();
    let json = exported_program(&g, &aten, CallStyle::Positional);
    insta::assert_snapshot!(serde_json::to_string_pretty(&json).unwrap());
}
