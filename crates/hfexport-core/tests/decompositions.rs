//! Each high-level op, evaluated directly, equals its decomposition into primitives.

mod common;

use common::{max_abs_diff, one_node_graph, run, Rng};
use hfexport_core::decompose::decompose;
use hfexport_core::verify::verify;
use hfexport_core::{Activation, DType, Op, RopeConfig, RopeScaling, Tensor, Window};

/// Evaluates `op` directly and through its decomposition; returns the worst difference.
fn compare(op: Op, inputs: &[(&str, &Tensor)]) -> f32 {
    let g = one_node_graph(op, inputs);
    let direct = run(&g, inputs);
    let d = decompose(&g, &|_| true).unwrap();
    verify(&d).unwrap();
    assert!(d.nodes().iter().all(|n| !n.op.is_high_level()), "decomposition left a high-level op");
    assert!(d.nodes().len() > 1, "decomposition did not expand anything");
    let decomposed = run(&d, inputs);
    direct.iter().zip(&decomposed).map(|(a, b)| max_abs_diff(a, b)).fold(0.0, f32::max)
}

#[test]
fn rms_norm_equals_decomposition() {
    let mut r = Rng::new(1);
    let x = r.tensor(&[2, 3, 16], 2.0);
    let w = r.tensor(&[16], 1.0);
    assert!(compare(Op::RmsNorm { eps: 1e-6 }, &[("x", &x), ("w", &w)]) < 1e-5);
    let xb = x.cast(DType::BF16);
    let wb = w.cast(DType::BF16);
    assert!(compare(Op::RmsNorm { eps: 1e-5 }, &[("x", &xb), ("w", &wb)]) < 2e-2);
}

#[test]
fn layer_norm_equals_decomposition() {
    let mut r = Rng::new(7);
    let x = r.tensor(&[2, 3, 16], 2.0);
    let (w, b) = (r.tensor(&[16], 1.0), r.tensor(&[16], 1.0));
    let op = Op::LayerNorm { eps: 1e-5 };
    assert!(compare(op.clone(), &[("x", &x), ("w", &w)]) < 1e-5);
    assert!(compare(op.clone(), &[("x", &x), ("w", &w), ("b", &b)]) < 1e-5);
    let [xb, wb, bb] = [&x, &w, &b].map(|t| t.cast(DType::BF16));
    assert!(compare(op, &[("x", &xb), ("w", &wb), ("b", &bb)]) < 2e-2);
}

const ACTIVATIONS: [Activation; 5] =
    [Activation::Silu, Activation::Gelu, Activation::GeluTanh, Activation::Relu, Activation::QuickGelu];

#[test]
fn every_activation_equals_decomposition() {
    let mut r = Rng::new(8);
    let x = r.tensor(&[2, 3, 16], 4.0);
    for act in ACTIVATIONS {
        let diff = compare(Op::Activate(act), &[("x", &x)]);
        assert!(diff < 1e-6, "{act:?}: {diff}");
    }
}

fn ropes(dim: usize) -> Vec<RopeConfig> {
    let r = |scaling| RopeConfig { theta: 10000.0, dim, scaling };
    vec![
        r(RopeScaling::Default),
        r(RopeScaling::Linear { factor: 2.0 }),
        r(RopeScaling::Dynamic { factor: 4.0, max_position_embeddings: 6 }),
        r(RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 16,
        }),
        r(RopeScaling::Yarn {
            factor: 4.0,
            original_max_position_embeddings: 16,
            beta_fast: 32.0,
            beta_slow: 1.0,
            mscale: None,
            mscale_all_dim: None,
            attention_factor: None,
            truncate: true,
        }),
        r(RopeScaling::Yarn {
            factor: 8.0,
            original_max_position_embeddings: 32,
            beta_fast: 16.0,
            beta_slow: 2.0,
            mscale: Some(1.0),
            mscale_all_dim: Some(0.5),
            attention_factor: None,
            truncate: false,
        }),
        // the long factors past 6 positions, the short ones within 64
        r(longrope(dim, 6)),
        r(longrope(dim, 64)),
    ]
}

fn longrope(dim: usize, original_max: usize) -> RopeScaling {
    let short = (0..dim / 2).map(|i| 1.0 + 0.1 * i as f64).collect();
    let long = (0..dim / 2).map(|i| 1.0 + 1.5 * i as f64).collect();
    RopeScaling::longrope(short, long, original_max, 4.0, None)
}

#[test]
fn rotary_cos_sin_equals_decomposition_for_every_rope_type() {
    // positions past max_position_embeddings exercise dynamic NTK's runtime base
    let pos = Tensor::i64(vec![2, 9], (0..18).map(|i| i % 9 + (i / 9) * 3).collect()).unwrap();
    for rope in ropes(16) {
        let diff = compare(Op::RotaryCosSin { rope: rope.clone() }, &[("pos", &pos)]);
        assert!(diff < 1e-5, "{}: {diff}", rope.rope_type());
    }
}

#[test]
fn apply_rotary_equals_decomposition() {
    let mut r = Rng::new(2);
    let x = r.tensor(&[2, 4, 5, 8], 1.0);
    let c = r.tensor(&[2, 5, 8], 1.0);
    let s = r.tensor(&[2, 5, 8], 1.0);
    assert!(compare(Op::ApplyRotary, &[("x", &x), ("c", &c), ("s", &s)]) < 1e-6);
    // cos/sin shared across the batch
    let c1 = r.tensor(&[1, 5, 8], 1.0);
    let s1 = r.tensor(&[1, 5, 8], 1.0);
    assert!(compare(Op::ApplyRotary, &[("x", &x), ("c", &c1), ("s", &s1)]) < 1e-6);
}

fn causal_padded_mask(b: usize, s: usize, t: usize, pads: &[usize]) -> Tensor {
    let mut m = Vec::new();
    for &pad in &pads[..b] {
        for i in 0..s {
            for j in 0..t {
                m.push(j <= i + (t - s) && j >= pad);
            }
        }
    }
    Tensor::bool(vec![b, 1, s, t], m).unwrap()
}

#[test]
fn attention_equals_decomposition() {
    let mut r = Rng::new(3);
    for (h, kvh, s, t, softcap) in [(4, 2, 5, 5, None), (4, 4, 3, 3, None), (6, 1, 2, 7, Some(5.0)), (4, 2, 1, 6, None)]
    {
        let q = r.tensor(&[2, h, s, 8], 1.0);
        let k = r.tensor(&[2, kvh, t, 8], 1.0);
        let v = r.tensor(&[2, kvh, t, 8], 1.0);
        let m = causal_padded_mask(2, s, t, &[2, 0]);
        let op = Op::Attention { scale: 0.35, softcap, sliding_window: None, sinks: false };
        let diff = compare(op, &[("q", &q), ("k", &k), ("v", &v), ("m", &m)]);
        assert!(diff < 1e-5, "h={h} kvh={kvh} s={s} t={t}: {diff}");
    }
}

/// An additive float mask (what the ONNX Runtime patch makes of a bool one): the direct
/// evaluation equals the decomposition, and both equal the bool form; in float32 also on fully
/// masked rows (the lowest value absorbs the score: uniform over the keys), in float16 on rows
/// with a key to attend (a fully masked row keeps its scores' differences there, finite either way).
#[test]
fn additive_mask_attention_equals_decomposition_and_bool_form() {
    let mut r = Rng::new(13);
    // batch row 0 padded on 3 positions: its first query sees no key
    for (dtype, tol, pad) in [(DType::F32, 1e-5, 3), (DType::F16, 2e-3, 1)] {
        let q = r.tensor(&[2, 4, 3, 8], 1.0).cast(dtype);
        let k = r.tensor(&[2, 2, 5, 8], 1.0).cast(dtype);
        let v = r.tensor(&[2, 2, 5, 8], 1.0).cast(dtype);
        let m = causal_padded_mask(2, 3, 5, &[pad, 0]);
        let low = dtype.min_finite();
        let add: Vec<f32> = m.as_bool().unwrap().iter().map(|&k| if k { 0.0 } else { low }).collect();
        let add = Tensor::float(dtype, m.shape().to_vec(), add).unwrap();
        let op = Op::Attention { scale: 0.35, softcap: None, sliding_window: None, sinks: false };
        let additive = [("q", &q), ("k", &k), ("v", &v), ("m", &add)];
        assert!(compare(op.clone(), &additive) < tol, "{dtype}");
        let with_bool = run(
            &one_node_graph(op.clone(), &[("q", &q), ("k", &k), ("v", &v), ("m", &m)]),
            &additive[..3].iter().copied().chain([("m", &m)]).collect::<Vec<_>>(),
        );
        let with_add = run(&one_node_graph(op, &additive), &additive);
        assert!(max_abs_diff(&with_bool[0], &with_add[0]) < tol, "{dtype}");
    }
    // a window needs the bool mask
    let q = r.tensor(&[1, 2, 3, 8], 1.0);
    let add = r.tensor(&[1, 1, 3, 3], 1.0);
    let pos = Tensor::i64(vec![1, 3], vec![0, 1, 2]).unwrap();
    let mut g = hfexport_core::Graph::new("g");
    let ins: Vec<_> = [("q", &q), ("k", &q), ("v", &q), ("m", &add), ("qp", &pos), ("kp", &pos)]
        .iter()
        .map(|(n, t)| {
            g.add_input(n, t.dtype(), t.shape().iter().map(|&d| hfexport_core::Dim::from(d)).collect()).unwrap()
        })
        .collect();
    let windowed = Op::Attention { scale: 0.35, softcap: None, sliding_window: Some(2), sinks: false };
    assert!(g.add_node("attn", windowed, &ins).unwrap_err().to_string().contains("bool mask"));
}

#[test]
fn sliding_window_attention_equals_decomposition() {
    let mut r = Rng::new(4);
    let q = r.tensor(&[1, 4, 7, 8], 1.0);
    let k = r.tensor(&[1, 2, 7, 8], 1.0);
    let v = r.tensor(&[1, 2, 7, 8], 1.0);
    let m = causal_padded_mask(1, 7, 7, &[0]);
    let pos = Tensor::i64(vec![1, 7], (0..7).collect()).unwrap();
    let op = Op::Attention { scale: 0.35, softcap: None, sliding_window: Some(3), sinks: false };
    let inputs = [("q", &q), ("k", &k), ("v", &v), ("m", &m), ("qp", &pos), ("kp", &pos)];
    assert!(compare(op.clone(), &inputs) < 1e-5);
    // the window changes the result: the last query no longer sees the first keys
    let full = run(
        &one_node_graph(Op::Attention { scale: 0.35, softcap: None, sliding_window: None, sinks: false }, &inputs[..4]),
        &inputs[..4],
    );
    let graph = one_node_graph(op, &inputs);
    let windowed = run(&graph, &inputs);
    assert!(max_abs_diff(&full[0], &windowed[0]) > 1e-3);
    // folding the window into the mask (what backends with a native attention do) is exact, and
    // leaves no windowed attention behind
    let folded = hfexport_core::decompose::fold_sliding_windows(&graph).unwrap();
    assert!(folded.nodes().iter().all(|n| !matches!(n.op, Op::Attention { sliding_window: Some(_), .. })));
    assert_eq!(max_abs_diff(&run(&folded, &inputs)[0], &windowed[0]), 0.0);
}

/// Folding a key head's query heads along its query axis gives the same attention, leaves no
/// attention with more query heads than key heads, and keeps a per-head (ALiBi) mask per head.
#[test]
fn query_groups_fold_into_the_query_axis() {
    let mut r = Rng::new(5);
    for (h, kvh, s, t, per_head) in [(4, 2, 3, 5, false), (6, 1, 1, 7, false), (8, 2, 2, 2, true), (4, 4, 3, 3, false)]
    {
        let q = r.tensor(&[2, h, s, 8], 1.0);
        let k = r.tensor(&[2, kvh, t, 8], 1.0);
        let v = r.tensor(&[2, kvh, t, 6], 1.0);
        let m = match per_head {
            true => r.tensor(&[2, h, s, t], 1.0),
            false => causal_padded_mask(2, s, t, &[1, 0]),
        };
        let op = Op::Attention { scale: 0.35, softcap: Some(4.0), sliding_window: None, sinks: false };
        let inputs = [("q", &q), ("k", &k), ("v", &v), ("m", &m)];
        let graph = one_node_graph(op, &inputs);
        let folded = hfexport_core::decompose::fold_query_groups(&graph, &|_, _| false).unwrap();
        verify(&folded).unwrap();
        for n in folded.nodes().iter().filter(|n| matches!(n.op, Op::Attention { .. })) {
            assert_eq!(folded.info(n.inputs[0]).shape[1], folded.info(n.inputs[1]).shape[1], "h={h} kvh={kvh}");
        }
        assert_eq!(folded.nodes().len() > 1, h > kvh, "h={h} kvh={kvh}: folded only when grouped");
        let diff = max_abs_diff(&run(&folded, &inputs)[0], &run(&graph, &inputs)[0]);
        assert!(diff < 1e-6, "h={h} kvh={kvh} per_head={per_head}: {diff}");
    }
}

#[test]
fn linear_and_gated_mlp_equal_decomposition() {
    let mut r = Rng::new(5);
    let x = r.tensor(&[2, 3, 16], 1.0);
    let w = r.tensor(&[24, 16], 0.3);
    let b = r.tensor(&[24], 0.3);
    assert!(compare(Op::Linear, &[("x", &x), ("w", &w)]) < 1e-5);
    assert!(compare(Op::Linear, &[("x", &x), ("w", &w), ("b", &b)]) < 1e-5);
    let wg = r.tensor(&[32, 16], 0.3);
    let wu = r.tensor(&[32, 16], 0.3);
    let wd = r.tensor(&[16, 32], 0.3);
    for act in ACTIVATIONS {
        let diff = compare(Op::GatedMlp { act }, &[("x", &x), ("g", &wg), ("u", &wu), ("d", &wd)]);
        assert!(diff < 1e-5, "{act:?}: {diff}");
    }
    let (bg, bu, bd) = (r.tensor(&[32], 0.3), r.tensor(&[32], 0.3), r.tensor(&[16], 0.3));
    let inputs = [("x", &x), ("g", &wg), ("u", &wu), ("d", &wd), ("bg", &bg), ("bu", &bu), ("bd", &bd)];
    assert!(compare(Op::GatedMlp { act: Activation::Silu }, &inputs) < 1e-5);
}

#[test]
fn cache_update_equals_decomposition() {
    let mut r = Rng::new(6);
    let cache = r.tensor(&[2, 3, 8, 4], 1.0);
    let new = r.tensor(&[2, 3, 3, 4], 1.0);
    for slots in
        [Tensor::i64(vec![1, 3], vec![5, 6, 7]).unwrap(), Tensor::i64(vec![2, 3], vec![0, 1, 2, 4, 2, 7]).unwrap()]
    {
        let inputs = [("cache", &cache), ("new", &new), ("slots", &slots)];
        assert_eq!(compare(Op::CacheUpdate, &inputs), 0.0);
        assert_eq!(compare(Op::ScatterSlots, &inputs), 0.0);
        let direct = |op| run(&one_node_graph(op, &inputs), &inputs);
        assert_eq!(direct(Op::CacheUpdate), direct(Op::ScatterSlots));
        // the written rows hold the new values, the others the old ones
        let out = &run(&one_node_graph(Op::CacheUpdate, &inputs), &inputs)[0];
        let (o, c, n) = (out.as_f32().unwrap(), cache.as_f32().unwrap(), new.as_f32().unwrap());
        let s = slots.as_i64().unwrap();
        let sb = slots.shape()[0];
        for b in 0..2 {
            for h in 0..3 {
                for l in 0..8 {
                    let j = (0..3).find(|&j| s[(if sb == 1 { 0 } else { b }) * 3 + j] == l as i64);
                    let want = match j {
                        Some(j) => &n[((b * 3 + h) * 3 + j) * 4..][..4],
                        None => &c[((b * 3 + h) * 8 + l) * 4..][..4],
                    };
                    assert_eq!(&o[((b * 3 + h) * 8 + l) * 4..][..4], want);
                }
            }
        }
    }
}

/// Learned sinks (GPT-OSS): the decomposition (scores with one more column, softmax, the column
/// dropped) equals the evaluator, with and without a window folded into the mask; the sinks
/// take probability mass (the result differs from attention without them).
#[test]
fn attention_with_sinks_equals_decomposition() {
    let mut r = Rng::new(31);
    let q = r.tensor(&[2, 4, 5, 8], 1.0);
    let k = r.tensor(&[2, 2, 5, 8], 1.0);
    let v = r.tensor(&[2, 2, 5, 8], 1.0);
    let m = causal_padded_mask(2, 5, 5, &[2, 0]);
    let sinks = r.tensor(&[4], 2.0);
    let pos = Tensor::i64(vec![2, 5], (0..10).map(|i| i % 5).collect()).unwrap();
    let op = |window, sinks| Op::Attention { scale: 0.35, softcap: None, sliding_window: window, sinks };
    let plain = [("q", &q), ("k", &k), ("v", &v), ("m", &m)];
    let with_sinks = [("q", &q), ("k", &k), ("v", &v), ("m", &m), ("s", &sinks)];
    assert!(compare(op(None, true), &with_sinks) < 1e-5);
    let windowed = [("q", &q), ("k", &k), ("v", &v), ("m", &m), ("qp", &pos), ("kp", &pos), ("s", &sinks)];
    assert!(compare(op(Some(2), true), &windowed) < 1e-5);
    let graph = one_node_graph(op(Some(2), true), &windowed);
    let folded = hfexport_core::decompose::fold_sliding_windows(&graph).unwrap();
    assert_eq!(max_abs_diff(&run(&folded, &windowed)[0], &run(&graph, &windowed)[0]), 0.0);
    let without = run(&one_node_graph(op(None, false), &plain), &plain);
    assert!(max_abs_diff(&without[0], &run(&one_node_graph(op(None, true), &with_sinks), &with_sinks)[0]) > 1e-2);
}

/// Every routing (softmax, DeepSeek-V2's grouped softmax, V3's corrected sigmoid, Llama 4's
/// sigmoid weighing the experts' input) with both strategies: the decomposition equals the
/// evaluator, the grouped routings choose otherwise than a plain softmax top-k would, and
/// weighing the input differs from weighing the output.
#[test]
fn moe_routings_equal_decomposition() {
    use hfexport_core::{Glu, RouterScore, Routing};
    let mut r = Rng::new(41);
    let x = r.tensor(&[2, 5, 8], 1.0);
    let router = r.tensor(&[6, 8], 1.0);
    let (g, u, d) = (r.tensor(&[6, 4, 8], 0.5), r.tensor(&[6, 4, 8], 0.5), r.tensor(&[6, 8, 4], 0.5));
    let correction = r.tensor(&[6], 0.3);
    let silu = Glu::Gated(hfexport_core::Activation::Silu);
    let sigmoid =
        Routing::Grouped { score: RouterScore::Sigmoid, groups: 1, top_groups: 1, normalize: false, scale: 1.0 };
    let routings = [
        (Routing::Softmax { normalize: true }, false),
        (
            Routing::Grouped { score: RouterScore::Softmax, groups: 3, top_groups: 1, normalize: false, scale: 1.5 },
            false,
        ),
        (
            Routing::Grouped {
                score: RouterScore::SigmoidCorrected,
                groups: 3,
                top_groups: 2,
                normalize: true,
                scale: 2.5,
            },
            false,
        ),
        (sigmoid, false),
        (sigmoid, true),
    ];
    // Gemma 4's: the experts chosen from another input than the one they read, each weighed by
    // a factor of its own
    let router_x = Tensor::f32(x.shape().to_vec(), x.as_f32().unwrap().iter().map(|v| 1.0 - v * v).collect()).unwrap();
    let expert_scale = r.tensor(&[6], 1.0);
    let mut outs = vec![];
    let cases =
        routings.iter().map(|&(r, w)| (r, w, false)).chain([(Routing::Softmax { normalize: true }, false, true)]);
    for (routing, weigh_input, own_router) in cases {
        for few_tokens in [false, true] {
            let op = Op::Moe { top_k: 2, routing, glu: silu, biased: false, few_tokens, weigh_input, own_router };
            let mut ins = vec![("x", &x), ("r", &router), ("g", &g), ("u", &u), ("d", &d)];
            if routing.corrected() {
                ins.push(("c", &correction));
            }
            if own_router {
                ins.extend([("router_x", &router_x), ("expert_scale", &expert_scale)]);
            }
            let what = format!("{routing:?} few_tokens={few_tokens} weigh_input={weigh_input} own_router={own_router}");
            assert!(compare(op.clone(), &ins) < 1e-5, "{what}");
            outs.push(run(&one_node_graph(op, &ins), &ins).remove(0));
        }
    }
    assert!(max_abs_diff(&outs[0], &outs[2]) > 1e-3 && max_abs_diff(&outs[0], &outs[4]) > 1e-3);
    assert!(max_abs_diff(&outs[6], &outs[8]) > 1e-3, "weighing the input changes the output");
    assert!(max_abs_diff(&outs[0], &outs[10]) > 1e-3, "a router of its own changes the output");
}

#[test]
fn selective_scan_equals_its_unrolled_steps() {
    let positive = |t: Tensor, f: fn(f32) -> f32| {
        Tensor::f32(t.shape().to_vec(), t.as_f32().unwrap().iter().map(|&v| f(v)).collect()).unwrap()
    };
    // one group (Mamba) and three (Mamba2's n_groups) over 6 channels
    for (g, seed) in [(1, 34), (3, 35)] {
        let mut r = Rng::new(seed);
        let (b, d, len, n) = (2, 6, 7, 3);
        let x = r.tensor(&[b, d, len], 1.0);
        // softplus outputs: positive steps; A = -exp(A_log): negative
        let dt = positive(r.tensor(&[b, d, len], 1.0), |v| v.abs() + 0.01);
        let a = positive(r.tensor(&[d, n], 1.0), |v| -v.exp());
        let (bm, cm, h0) = (r.tensor(&[b, len, g, n], 1.0), r.tensor(&[b, len, g, n], 1.0), r.tensor(&[b, d, n], 1.0));
        let ins = [("x", &x), ("dt", &dt), ("a", &a), ("b", &bm), ("c", &cm), ("h0", &h0)];
        assert!(compare(Op::SelectiveScan, &ins) < 1e-5, "{g} groups");
        // the last channel's first output: h = exp(dt A) h0 + dt B x, y = h · C, over its group
        let out = run(&one_node_graph(Op::SelectiveScan, &ins), &ins);
        let f = |t: &Tensor| t.as_f32().unwrap().to_vec();
        let (xs, dts, av, bv, cv, hv) = (f(&x), f(&dt), f(&a), f(&bm), f(&cm), f(&h0));
        let (c, group) = (d - 1, g - 1);
        let y: f32 = (0..n)
            .map(|j| {
                let (step, at) = (dts[c * len], group * n + j);
                ((step * av[c * n + j]).exp() * hv[c * n + j] + step * bv[at] * xs[c * len]) * cv[at]
            })
            .sum();
        assert!((out[0].as_f32().unwrap()[c * len] - y).abs() < 1e-5, "{g} groups");
    }
}

/// Convolution windows people's checkpoints use: ResNet's 7x7 stride-2 stem and 1x1 shortcuts,
/// ConvNeXt's depthwise 7x7, MobileNet's asymmetric "SAME" padding, a dilated 3x3, and the 1-D
/// ones of wav2vec2's feature encoder and grouped positional convolution.
fn conv_cases() -> Vec<(Vec<usize>, Window, usize, usize, usize)> {
    let w = |k: &[usize], s: &[usize], p: &[usize]| Window::new(k, s, p);
    let same = Window { pads_begin: vec![0, 0], pads_end: vec![1, 1], ..w(&[3, 3], &[2, 2], &[0, 0]) };
    let dilated = Window { dilation: vec![2, 1], ..w(&[3, 3], &[1, 1], &[2, 1]) };
    vec![
        // (x shape, window, groups, cin, cout)
        (vec![2, 3, 11, 9], w(&[7, 7], &[2, 2], &[3, 3]), 1, 3, 4),
        (vec![2, 4, 5, 6], w(&[1, 1], &[2, 2], &[0, 0]), 1, 4, 6),
        (vec![1, 6, 8, 8], w(&[7, 7], &[1, 1], &[3, 3]), 6, 6, 6),
        (vec![2, 4, 7, 8], same, 2, 4, 6),
        (vec![1, 2, 6, 7], dilated, 1, 2, 3),
        (vec![2, 1, 23], w(&[10], &[5], &[0]), 1, 1, 4),
        (vec![2, 8, 9], w(&[4], &[1], &[2]), 4, 8, 8),
    ]
}

#[test]
fn conv_equals_decomposition_and_its_definition() {
    let mut r = Rng::new(91);
    for (shape, window, groups, cin, cout) in conv_cases() {
        let kernel_shape: Vec<usize> = [cout, cin / groups].into_iter().chain(window.kernel.clone()).collect();
        let (x, w, b) = (r.tensor(&shape, 1.0), r.tensor(&kernel_shape, 1.0), r.tensor(&[cout], 1.0));
        let op = Op::Conv { window: window.clone(), groups };
        assert!(compare(op.clone(), &[("x", &x), ("w", &w)]) < 1e-5, "{window:?}");
        let ins = [("x", &x), ("w", &w), ("b", &b)];
        assert!(compare(op.clone(), &ins) < 1e-5, "{window:?} with a bias");
        // the last output of the last channel, summed by hand over its window
        let y = run(&one_node_graph(op, &ins), &ins).remove(0);
        let (xs, ws) = (x.as_f32().unwrap(), w.as_f32().unwrap());
        let spatial = &shape[2..];
        let out = &y.shape()[2..];
        let o = cout - 1;
        let (cg, group) = (cin / groups, (cout - 1) / (cout / groups));
        let taps: usize = window.kernel.iter().product();
        let mut want = b.as_f32().unwrap()[o];
        for c in 0..cg {
            for k in 0..taps {
                // the tap's offset on each axis, last axis fastest
                let mut rest = k;
                let mut at = Some(0usize);
                for a in (0..window.rank()).rev() {
                    let kk = rest % window.kernel[a];
                    rest /= window.kernel[a];
                    let i = ((out[a] - 1) * window.stride[a] + kk * window.dilation[a]) as i64
                        - window.pads_begin[a] as i64;
                    let stride: usize = spatial[a + 1..].iter().product();
                    at = at.filter(|_| (0..spatial[a] as i64).contains(&i)).map(|v| v + i as usize * stride);
                }
                let Some(at) = at else { continue };
                let plane: usize = spatial.iter().product();
                let xi = ((shape[0] - 1) * cin + group * cg + c) * plane + at;
                want += xs[xi] * ws[(o * cg + c) * taps + k];
            }
        }
        let got = *y.as_f32().unwrap().last().unwrap();
        assert!((got - want).abs() < 1e-5, "{window:?}: {got} vs {want}");
    }
}

#[test]
fn max_pool_equals_decomposition_and_ignores_its_padding() {
    let mut r = Rng::new(92);
    let stem = Window::new(&[3, 3], &[2, 2], &[1, 1]);
    for (shape, window) in [(vec![2, 3, 9, 8], stem.clone()), (vec![1, 2, 7], Window::new(&[2], &[2], &[0]))] {
        let x = r.tensor(&shape, 1.0);
        assert!(compare(Op::MaxPool { window: window.clone() }, &[("x", &x)]) < 1e-6, "{window:?}");
    }
    // every input below zero: the one window covers them all and its padding, whose zeros never win
    let x = Tensor::f32(vec![1, 1, 2, 2], vec![-4.0, -3.0, -2.0, -1.0]).unwrap();
    let y = run(&one_node_graph(Op::MaxPool { window: stem }, &[("x", &x)]), &[("x", &x)]).remove(0);
    assert_eq!(y.as_f32().unwrap(), &[-1.0]);
}
