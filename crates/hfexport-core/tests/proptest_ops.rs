//! Random shapes and values: ops of the reference evaluator against plain, obviously correct
//! loops (tract's "problem" style).

mod common;

use common::{max_abs_diff, one_node_graph, run};
use hfexport_core::ops::{BinaryOp, ReduceKind};
use hfexport_core::{Op, Tensor};
use proptest::prelude::*;

fn tensor(shape: Vec<usize>) -> impl Strategy<Value = Tensor> {
    let n: usize = shape.iter().product();
    prop::collection::vec(-4.0f32..4.0, n).prop_map(move |v| Tensor::f32(shape.clone(), v).unwrap())
}

/// Index of `idx` (a multi-index of `out`) in a tensor of `shape` broadcast to `out`.
fn bcast_offset(idx: &[usize], shape: &[usize], out: &[usize]) -> usize {
    let lead = out.len() - shape.len();
    let mut off = 0;
    for (i, &d) in shape.iter().enumerate() {
        let x = if d == 1 { 0 } else { idx[lead + i] };
        off = off * d + x;
    }
    off
}

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

/// Two shapes that broadcast: a random shape and a copy with some axes set to 1 or dropped.
fn broadcast_pair() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    prop::collection::vec(1usize..4, 1..4).prop_flat_map(|a| {
        let n = a.len();
        (Just(a), prop::collection::vec(any::<bool>(), n), 0..n).prop_map(|(a, ones, drop)| {
            let b: Vec<usize> = a.iter().zip(&ones).map(|(&d, &o)| if o { 1 } else { d }).collect();
            (a, b[drop..].to_vec())
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn broadcasting_binary_ops_match_loops(
        (sa, sb) in broadcast_pair(),
        seed in any::<u64>(),
        op in prop::sample::select(vec![BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Max]),
        swap in any::<bool>(),
    ) {
        let (sa, sb) = if swap { (sb, sa) } else { (sa, sb) };
        let mut r = common::Rng::new(seed);
        let a = r.tensor(&sa, 3.0);
        let b = r.tensor(&sb, 3.0);
        let got = &run(&one_node_graph(Op::Binary(op), &[("a", &a), ("b", &b)]), &[("a", &a), ("b", &b)])[0];
        let n = sa.len().max(sb.len());
        let pad = |s: &[usize]| [vec![1; n - s.len()], s.to_vec()].concat();
        let out: Vec<usize> = pad(&sa).iter().zip(pad(&sb)).map(|(x, y)| (*x).max(y)).collect();
        prop_assert_eq!(got.shape(), out.as_slice());
        let (av, bv) = (a.as_f32().unwrap(), b.as_f32().unwrap());
        for (i, g) in got.as_f32().unwrap().iter().enumerate() {
            let idx = unravel(i, &out);
            let (x, y) = (av[bcast_offset(&idx, &sa, &out)], bv[bcast_offset(&idx, &sb, &out)]);
            let want = match op { BinaryOp::Add => x + y, BinaryOp::Sub => x - y, BinaryOp::Mul => x * y, _ => x.max(y) };
            prop_assert_eq!(*g, want);
        }
    }

    #[test]
    fn batched_matmul_matches_triple_loop(
        (x, y) in (1usize..3, 1usize..6, 1usize..7, 1usize..6).prop_flat_map(|(b, m, k, n)| (tensor(vec![b, m, k]), tensor(vec![k, n]))),
    ) {
        let (bb, mm, kk) = (x.shape()[0], x.shape()[1], x.shape()[2]);
        let nn = y.shape()[1];
        let got = &run(&one_node_graph(Op::MatMul, &[("x", &x), ("y", &y)]), &[("x", &x), ("y", &y)])[0];
        let (xv, yv) = (x.as_f32().unwrap(), y.as_f32().unwrap());
        let mut want = vec![0f32; bb * mm * nn];
        for bi in 0..bb { for i in 0..mm { for j in 0..nn {
            want[(bi * mm + i) * nn + j] = (0..kk).map(|l| xv[(bi * mm + i) * kk + l] * yv[l * nn + j]).sum();
        }}}
        prop_assert!(max_abs_diff(got, &Tensor::f32(vec![bb, mm, nn], want).unwrap()) < 1e-4);
    }

    #[test]
    fn softmax_and_reduce_match_loops(x in (1usize..4, 1usize..5, 1usize..6).prop_flat_map(|(a, b, c)| tensor(vec![a, b, c])), axis in 0usize..3) {
        let s = x.shape().to_vec();
        let got = &run(&one_node_graph(Op::Softmax { axis }, &[("x", &x)]), &[("x", &x)])[0];
        let mean = &run(&one_node_graph(Op::Reduce { kind: ReduceKind::Mean, axes: vec![axis], keep_dims: false }, &[("x", &x)]), &[("x", &x)])[0];
        let v = x.as_f32().unwrap();
        for i in 0..v.len() {
            let idx = unravel(i, &s);
            let along: Vec<f32> = (0..s[axis]).map(|j| { let mut t = idx.clone(); t[axis] = j; v[(t[0] * s[1] + t[1]) * s[2] + t[2]] }).collect();
            let max = along.iter().copied().fold(f32::MIN, f32::max);
            let denom: f32 = along.iter().map(|a| (a - max).exp()).sum();
            prop_assert!((got.as_f32().unwrap()[i] - (v[i] - max).exp() / denom).abs() < 1e-6);
            let mut rest = idx.clone();
            rest.remove(axis);
            let out_shape: Vec<usize> = s.iter().enumerate().filter(|(d, _)| *d != axis).map(|(_, &n)| n).collect();
            let o = rest.iter().zip(&out_shape).fold(0, |acc, (i, n)| acc * n + i);
            let want = along.iter().sum::<f32>() / along.len() as f32;
            prop_assert!((mean.as_f32().unwrap()[o] - want).abs() < 1e-5);
        }
    }

    #[test]
    fn transpose_moves_every_element(x in (1usize..4, 1usize..4, 1usize..5).prop_flat_map(|(a, b, c)| tensor(vec![a, b, c])), perm in Just(vec![0usize, 1, 2]).prop_shuffle()) {
        let s = x.shape().to_vec();
        let got = &run(&one_node_graph(Op::Transpose { perm: perm.clone() }, &[("x", &x)]), &[("x", &x)])[0];
        let out: Vec<usize> = perm.iter().map(|&p| s[p]).collect();
        prop_assert_eq!(got.shape(), out.as_slice());
        for (i, g) in got.as_f32().unwrap().iter().enumerate() {
            let oi = unravel(i, &out);
            let mut src = [0; 3];
            for (d, &p) in perm.iter().enumerate() { src[p] = oi[d]; }
            prop_assert_eq!(*g, x.as_f32().unwrap()[(src[0] * s[1] + src[1]) * s[2] + src[2]]);
        }
    }
}
