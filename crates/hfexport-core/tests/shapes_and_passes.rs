//! Symbolic shape inference through graphs, the verifier, the pass manager and patch registry.

mod common;

use hfexport_core::config::ExportFormat;
use hfexport_core::dim::shape_to_string;
use hfexport_core::ops::{BinaryOp, ReduceKind};
use hfexport_core::passes::{compare_versions, Pass, PassManager, Patch, PatchRegistry, Stage, VersionRange};
use hfexport_core::{DType, Dim, Error, Graph, Op, Tensor};
use std::cmp::Ordering;
use std::collections::BTreeMap;

fn symbolic_graph() -> (Graph, Dim, Dim) {
    let mut g = Graph::new("g");
    let b = Dim::sym(&g.symbols.declare("batch", 1, 8).unwrap());
    let s = Dim::sym(&g.symbols.declare("seq", 1, 100).unwrap());
    g.add_input("x", DType::F32, vec![b.clone(), s.clone(), Dim::konst(64)]).unwrap();
    (g, b, s)
}

#[test]
fn symbolic_dims_flow_through_reshape_concat_and_matmul() {
    let (mut g, b, s) = symbolic_graph();
    let x = g.input("x").unwrap().value;
    let heads =
        g.op("split", Op::Reshape { shape: vec![b.clone(), s.clone(), Dim::konst(4), Dim::konst(16)] }, &[x]).unwrap();
    let t = g.op("t", Op::Transpose { perm: vec![0, 2, 1, 3] }, &[heads]).unwrap();
    let both = g.op("cat", Op::Concat { axis: 2 }, &[t, t]).unwrap();
    assert_eq!(shape_to_string(&g.info(both).shape), "[batch, 4, 2*seq, 16]");
    let kt = g.op("kt", Op::Transpose { perm: vec![0, 1, 3, 2] }, &[both]).unwrap();
    let sc = g.op("scores", Op::MatMul, &[t, kt]).unwrap();
    assert_eq!(shape_to_string(&g.info(sc).shape), "[batch, 4, seq, 2*seq]");
    let flat =
        g.op("flat", Op::Reshape { shape: vec![b.mul(&s).mul(&Dim::konst(4)), s.mul(&Dim::konst(2))] }, &[sc]).unwrap();
    let rows = &g.info(flat).shape[0];
    assert_eq!(rows.to_string(), "4*batch*seq");
    assert_eq!(rows.bounds(&g.symbols), (4, 3200), "ranges are kept through products");
    let tail = g.op("tail", Op::Slice { axis: 1, start: s.clone(), end: s.mul(&Dim::konst(2)) }, &[flat]).unwrap();
    assert_eq!(g.info(tail).shape[1], s, "2*seq - seq simplifies to seq");
    let red = g.op("sum", Op::Reduce { kind: ReduceKind::Sum, axes: vec![1], keep_dims: true }, &[tail]).unwrap();
    assert_eq!(shape_to_string(&g.info(red).shape), "[4*batch*seq, 1]");
}

#[test]
fn broadcasting_symbolic_shapes_and_errors_name_the_node() {
    let (mut g, b, s) = symbolic_graph();
    let x = g.input("x").unwrap().value;
    let w = g.op("w", Op::Constant(Tensor::f32(vec![64], vec![1.0; 64]).unwrap()), &[]).unwrap();
    let y = g.op("scale", Op::Binary(BinaryOp::Mul), &[x, w]).unwrap();
    assert_eq!(g.info(y).shape, vec![b.clone(), s.clone(), Dim::konst(64)]);
    let col =
        g.op("col", Op::Reshape { shape: vec![b.clone(), s.clone(), Dim::konst(64), Dim::konst(1)] }, &[x]).unwrap();
    let row =
        g.op("row", Op::Reshape { shape: vec![b.clone(), s.clone(), Dim::konst(1), Dim::konst(64)] }, &[x]).unwrap();
    let outer = g.op("outer", Op::Binary(BinaryOp::Add), &[col, row]).unwrap();
    assert_eq!(shape_to_string(&g.info(outer).shape), "[batch, seq, 64, 64]");
    // seq vs batch do not broadcast: the error names the node and both shapes
    let other = g.op("by_batch", Op::Reshape { shape: vec![s.clone(), b.clone(), Dim::konst(64)] }, &[x]).unwrap();
    let err = g.add_node("bad_add", Op::Binary(BinaryOp::Add), &[x, other]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Infer { .. }) && msg.contains("bad_add") && msg.contains("[batch, seq, 64]"), "{msg}");
    let err = g.add_node("bad_reshape", Op::Reshape { shape: vec![b.clone(), Dim::konst(63)] }, &[x]).unwrap_err();
    assert!(err.to_string().contains("bad_reshape") && err.to_string().contains("64*batch*seq"), "{err}");
}

#[test]
fn evaluator_binds_symbols_and_checks_ranges() {
    let (mut g, _, _) = symbolic_graph();
    let x = g.input("x").unwrap().value;
    let y = g.op("neg", Op::Unary(hfexport_core::UnaryOp::Neg), &[x]).unwrap();
    g.add_output("y", y).unwrap();
    let ev = hfexport_core::Evaluator::new(&g, &hfexport_core::MemorySource::default()).unwrap();
    let ok = BTreeMap::from([("x".to_string(), Tensor::f32(vec![2, 3, 64], vec![1.0; 384]).unwrap())]);
    assert_eq!(ev.run(&ok).unwrap()["y"].shape(), &[2, 3, 64]);
    let too_long = BTreeMap::from([("x".to_string(), Tensor::f32(vec![1, 101, 64], vec![0.0; 101 * 64]).unwrap())]);
    let e = ev.run(&too_long).unwrap_err().to_string();
    assert!(e.contains("seq") && e.contains("101") && e.contains("1..=100"), "{e}");
    let wrong = BTreeMap::from([("x".to_string(), Tensor::f32(vec![1, 2, 32], vec![0.0; 64]).unwrap())]);
    let e = ev.run(&wrong).unwrap_err().to_string();
    assert!(e.contains("`x`") && e.contains("64"), "{e}");
    let missing = BTreeMap::new();
    assert!(ev.run(&missing).unwrap_err().to_string().contains("missing"));
}

/// A test patch: doubles the graph's output `y`.
fn double_output(g: &Graph) -> hfexport_core::Result<Option<Graph>> {
    let mut g = g.clone();
    let out = g.output("y").expect("y").value;
    let two = g.op("two", Op::Constant(Tensor::scalar_float(DType::F32, 2.0)), &[])?;
    let doubled = g.op("doubled", Op::Binary(BinaryOp::Mul), &[out, two])?;
    g.replace_output("y", doubled)?;
    Ok(Some(g))
}

fn neg_graph() -> Graph {
    let mut g = Graph::new("g");
    let x = g.add_input("x", DType::F32, vec![Dim::konst(3)]).unwrap();
    let y = g.op("neg", Op::Unary(hfexport_core::UnaryOp::Neg), &[x]).unwrap();
    g.add_output("y", y).unwrap();
    g
}

fn patch(range: Option<VersionRange>) -> Patch {
    Patch {
        name: "double-output",
        stage: Stage::Backend,
        formats: &[ExportFormat::Onnx],
        upstream: range,
        issue: "none: a test patch",
        reason: "test: stands in for a runtime workaround",
        rewrite: double_output,
    }
}

#[test]
fn patches_apply_by_stage_format_and_version() {
    let range = VersionRange { package: "onnxruntime", min: Some("1.30"), below: Some("1.33") };
    let mut reg = PatchRegistry::default();
    reg.register(patch(Some(range))).unwrap();
    assert!(reg.register(patch(None)).is_err(), "duplicate names are refused");
    let versions = |v: &str| BTreeMap::from([("onnxruntime".to_string(), v.to_string())]);
    let run = |format, v: &str| {
        let mut pm = PassManager::new(reg.clone(), versions(v));
        pm.add(Pass::Patches { stage: Stage::Backend, format: Some(format) });
        pm.run(neg_graph()).unwrap()
    };
    let (g, report) = run(ExportFormat::Onnx, "1.32.0");
    assert_eq!(report.patches_applied, vec!["double-output"]);
    assert_eq!(g.nodes().len(), 3);
    assert!(run(ExportFormat::Onnx, "1.33.0").1.patches_applied.is_empty(), "fixed upstream: not applied");
    assert!(run(ExportFormat::Openvino, "1.32.0").1.patches_applied.is_empty(), "other format: not applied");
}

#[test]
fn pass_manager_decomposes_and_verifies() {
    let mut g = Graph::new("g");
    let x = g.add_input("x", DType::F32, vec![Dim::konst(2), Dim::konst(8)]).unwrap();
    let w = g.op("w", Op::Constant(Tensor::f32(vec![8], vec![1.0; 8]).unwrap()), &[]).unwrap();
    let n = g.op("norm", Op::RmsNorm { eps: 1e-6 }, &[x, w]).unwrap();
    g.add_output("y", n).unwrap();
    let mut pm = PassManager::new(PatchRegistry::builtin(), BTreeMap::new());
    pm.add(Pass::Decompose { name: "all", select: std::sync::Arc::new(|_: &Op| true) }).add(Pass::Verify);
    let (out, report) = pm.run(g).unwrap();
    assert_eq!(report.passes, vec!["decompose:all", "verify"]);
    assert!(out.nodes().iter().all(|n| !n.op.is_high_level()));
    assert!(hfexport_core::verify::unused_values(&out).is_empty());
}

#[test]
fn versions_compare_numerically() {
    assert_eq!(compare_versions("1.10.0", "1.9.2"), Ordering::Greater);
    assert_eq!(compare_versions("2026.4.1", "2026.4"), Ordering::Greater);
    assert_eq!(compare_versions("1.32", "1.32.0"), Ordering::Equal);
    let r = VersionRange { package: "p", min: None, below: Some("2.0") };
    assert!(r.contains("1.99.9") && !r.contains("2.0.0"));
}

/// The workarounds of upstream runtime behaviour are registered patches: each names its
/// package, its range and the upstream issue. The OpenVINO one is needed at the pin; the ONNX
/// Runtime one was not reproduced with any release, so its range leaves the pin out.
#[test]
fn builtin_patches_name_their_upstream_ranges() {
    let reg = PatchRegistry::builtin();
    let names: Vec<&str> = reg.patches().iter().map(|p| p.name).collect();
    assert_eq!(names, ["onnxruntime-attention-additive-mask", "openvino-static-query-cache-scatter"]);
    let pins =
        [("onnxruntime", "1.32.0", ExportFormat::Onnx, false), ("openvino", "2026.4.1", ExportFormat::Openvino, true)];
    for (p, (package, pin, format, needed)) in reg.patches().iter().zip(pins) {
        let range = p.upstream.as_ref().expect("an upstream range");
        assert_eq!(range.package, package);
        assert_eq!(range.contains(pin), needed, "{}: {range} and the pin {pin}", p.name);
        assert!(p.issue.len() > 80, "{}: the issue says what and where", p.name);
        assert_eq!((p.formats, p.stage), (&[format][..], Stage::Backend));
        let versions = BTreeMap::from([(package.to_string(), pin.to_string())]);
        assert_eq!(p.wanted(Stage::Backend, Some(format), &versions), needed);
        assert!(!p.wanted(Stage::Build, None, &versions));
    }
    assert_eq!(reg.patches()[0].upstream.as_ref().unwrap().to_string(), "onnxruntime <1.23.0");
    assert_eq!(reg.patches()[1].upstream.as_ref().unwrap().to_string(), "openvino >=2026.4.1");
    let r = VersionRange { package: "p", min: Some("1"), below: Some("2") };
    assert_eq!(r.to_string(), "p >=1,<2");
}

/// `q, k, v, mask` of a GQA attention, causal, batch row 0 left-padded by `pad` (its first
/// `pad` queries see no key at all).
fn attention_graph(dtype: DType, pad: usize) -> (Graph, Vec<(&'static str, Tensor)>) {
    let mut r = common::Rng::new(11);
    let (b, s) = (2, 4);
    let q = r.tensor(&[b, 4, s, 8], 1.0).cast(dtype);
    let k = r.tensor(&[b, 2, s, 8], 1.0).cast(dtype);
    let v = r.tensor(&[b, 2, s, 8], 1.0).cast(dtype);
    let m: Vec<bool> = (0..b * s * s).map(|i| (i / (s * s) == 1 || i % s >= pad) && i % s <= (i / s) % s).collect();
    let m = Tensor::bool(vec![b, 1, s, s], m).unwrap();
    let inputs = vec![("q", q), ("k", k), ("v", v), ("m", m)];
    let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (*n, t)).collect();
    let op = Op::Attention { scale: 0.35, softcap: None, sliding_window: None, sinks: false };
    (common::one_node_graph(op, &refs), inputs)
}

/// The additive mask gives the bool mask's result: exactly in float32, fully masked rows
/// included (uniform over the keys in both forms); in float16 on rows with a key to attend.
#[test]
fn additive_mask_patch_keeps_the_scores() {
    use hfexport_core::passes::additive_attention_masks;
    for (dtype, pad) in [(DType::F32, 2), (DType::F16, 0)] {
        let (g, inputs) = attention_graph(dtype, pad);
        let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (*n, t)).collect();
        let patched = additive_attention_masks(&g).unwrap().expect("a bool mask to rewrite");
        hfexport_core::verify::verify(&patched).unwrap();
        let attn = patched.nodes().iter().find(|n| n.op.name() == "Attention").unwrap();
        assert_eq!(patched.info(attn.inputs[3]).dtype, dtype, "the mask is additive in the query dtype");
        assert!(additive_attention_masks(&patched).unwrap().is_none(), "nothing left to patch");
        let (a, b) = (common::run(&g, &refs), common::run(&patched, &refs));
        let diff = common::max_abs_diff(&a[0], &b[0]);
        assert!(b[0].cast(DType::F32).as_f32().unwrap().iter().all(|x| x.is_finite()));
        assert!(diff <= if dtype == DType::F32 { 0.0 } else { 1e-3 }, "{dtype}: {diff}");
    }
}

#[test]
fn scatter_patch_rewrites_fixed_length_cache_updates_only() {
    use hfexport_core::passes::scatter_static_cache_updates;
    let build = |multi_token: bool| {
        let mut g = Graph::new("g");
        let len = Dim::sym(&g.symbols.declare("cache_len", 1, 8).unwrap());
        let q = if multi_token { Dim::sym(&g.symbols.declare("sequence", 1, 8).unwrap()) } else { Dim::konst(1) };
        let cache =
            g.add_input("past_key_values.keys", DType::F32, vec![Dim::konst(1), Dim::konst(2), len, Dim::konst(4)]);
        let new = g.add_input("new", DType::F32, vec![Dim::konst(1), Dim::konst(2), q.clone(), Dim::konst(4)]);
        let slots = g.add_input("slots", DType::I64, vec![Dim::konst(1), q]).unwrap();
        let out = g.op("update", Op::CacheUpdate, &[cache.unwrap(), new.unwrap(), slots]).unwrap();
        g.add_output("present.keys", out).unwrap();
        g.add_alias("present.keys", "past_key_values.keys");
        g
    };
    let one = build(false);
    let patched = scatter_static_cache_updates(&one).unwrap().expect("a one-token update to rewrite");
    assert_eq!(patched.nodes()[0].op, Op::ScatterSlots);
    assert_eq!(patched.aliases(), one.aliases());
    let mut r = common::Rng::new(3);
    let (cache, new) = (r.tensor(&[1, 2, 6, 4], 1.0), r.tensor(&[1, 2, 1, 4], 1.0));
    let slots = Tensor::i64(vec![1, 1], vec![4]).unwrap();
    let feed: BTreeMap<String, Tensor> = [("past_key_values.keys", &cache), ("new", &new), ("slots", &slots)]
        .map(|(n, t)| (n.to_string(), t.clone()))
        .into();
    let eval = |g: &Graph| {
        hfexport_core::Evaluator::new(g, &hfexport_core::MemorySource::default()).unwrap().run(&feed).unwrap()
    };
    assert_eq!(eval(&one), eval(&patched));
    // a multi-token update keeps its licence to grow a state
    assert!(scatter_static_cache_updates(&build(true)).unwrap().is_none());
}
