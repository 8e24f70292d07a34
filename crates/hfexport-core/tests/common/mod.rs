//! Helpers shared by core's integration tests: a seeded generator and one-node graphs.
#![allow(dead_code)]

use hfexport_core::{DType, Dim, Evaluator, Graph, MemorySource, Op, Tensor, ValueId};
use std::collections::BTreeMap;

/// xorshift64*: deterministic values without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    pub fn tensor(&mut self, shape: &[usize], scale: f32) -> Tensor {
        let n = shape.iter().product();
        Tensor::f32(shape.to_vec(), (0..n).map(|_| self.uniform() * scale).collect()).unwrap()
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A graph whose inputs are `inputs` (concrete shapes) and whose single node is `op`.
pub fn one_node_graph(op: Op, inputs: &[(&str, &Tensor)]) -> Graph {
    let mut g = Graph::new("test");
    let ids: Vec<ValueId> = inputs
        .iter()
        .map(|(n, t)| {
            let shape = t.shape().iter().map(|&d| Dim::from(d)).collect();
            g.add_input(n, t.dtype(), shape).unwrap()
        })
        .collect();
    let outs = g.add_node("node", op, &ids).unwrap();
    for (i, v) in outs.iter().enumerate() {
        g.add_output(&format!("out{i}"), *v).unwrap();
    }
    g
}

pub fn run(g: &Graph, inputs: &[(&str, &Tensor)]) -> Vec<Tensor> {
    let map: BTreeMap<String, Tensor> = inputs.iter().map(|(n, t)| (n.to_string(), (*t).clone())).collect();
    let out = Evaluator::new(g, &MemorySource::default()).unwrap().run(&map).unwrap();
    (0..g.outputs().len()).map(|i| out[&format!("out{i}")].clone()).collect()
}

pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.shape(), b.shape());
    let (x, y) = (a.cast(DType::F32), b.cast(DType::F32));
    x.as_f32().unwrap().iter().zip(y.as_f32().unwrap()).map(|(p, q)| (p - q).abs()).fold(0.0, f32::max)
}
