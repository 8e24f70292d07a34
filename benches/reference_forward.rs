//! The reference evaluator's forward pass on a Qwen3-0.6B-shaped model with random weights
//! made here (never downloaded): throughput is printed as tokens/s (criterion's `thrpt`).
//!
//! `cargo bench --bench reference_forward`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hfexport_core::{DType, Evaluator, Tensor, TensorInfo, TensorSource};
use hfexport_models::{build, BuildOptions, ModelConfig, Task, Weights};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

const QWEN3_0_6B: &str = r#"{
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
  "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
  "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
  "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6,
  "rope_theta": 1000000, "tie_word_embeddings": true, "hidden_act": "silu", "torch_dtype": "bfloat16"
}"#;

/// bf16 weights of whatever shape the builder asks for, generated on demand from the name.
#[derive(Default)]
struct RandomWeights {
    shapes: Mutex<BTreeMap<String, Vec<usize>>>,
}

impl Weights for RandomWeights {
    fn expect(&self, name: &str, shape: &[usize]) -> hfexport_models::Result<TensorInfo> {
        self.shapes.lock().expect("lock").insert(name.to_string(), shape.to_vec());
        Ok(TensorInfo { dtype: DType::BF16, shape: shape.to_vec() })
    }
    /// The optional tensors of a Qwen3 checkpoint: norms are there; a tied model has no
    /// `lm_head.weight` and Qwen3 no attention biases.
    fn has(&self, name: &str) -> bool {
        !name.starts_with("lm_head.") && !name.ends_with(".bias")
    }
}

impl TensorSource for RandomWeights {
    fn info(&self, name: &str) -> hfexport_core::Result<TensorInfo> {
        let shape = self.shapes.lock().expect("lock").get(name).cloned().expect("asked by the builder");
        Ok(TensorInfo { dtype: DType::BF16, shape })
    }
    fn load(&self, name: &str) -> hfexport_core::Result<Tensor> {
        let shape = TensorSource::info(self, name)?.shape;
        let n: usize = shape.iter().product();
        let mut s =
            name.bytes().fold(0x9E37_79B9_7F4A_7C15u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01B3)) | 1;
        let norm = name.ends_with("norm.weight");
        let data = (0..n)
            .map(|_| {
                s ^= s >> 12;
                s ^= s << 25;
                s ^= s >> 27;
                let u = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                if norm {
                    1.0 + 0.1 * u
                } else {
                    0.04 * u
                }
            })
            .collect();
        Tensor::float(DType::BF16, shape, data)
    }
}

fn forward(c: &mut Criterion) {
    let cfg = ModelConfig::from_json_str(QWEN3_0_6B, Path::new("qwen3-0.6b/config.json")).expect("config");
    let weights = RandomWeights::default();
    let graph = build(&cfg, &weights, Task::CausalLm, &BuildOptions::default()).expect("graph");
    let t0 = Instant::now();
    let ev = Evaluator::new(&graph, &weights).expect("weights");
    eprintln!(
        "qwen3-0.6b shape: {:.0} M parameters, weights generated and materialised as f32 in {:.1} s",
        graph.parameter_count() as f64 / 1e6,
        t0.elapsed().as_secs_f64()
    );
    let mut group = c.benchmark_group("reference_forward_qwen3_0.6b");
    group.sample_size(10);
    for tokens in [1usize, 8, 32] {
        let ids: Vec<i64> = (0..tokens as i64).map(|i| (i * 7919) % 151936).collect();
        let inputs = BTreeMap::from([
            ("input_ids".to_string(), Tensor::i64(vec![1, tokens], ids).expect("ids")),
            ("attention_mask".to_string(), Tensor::i64(vec![1, tokens], vec![1; tokens]).expect("mask")),
        ]);
        group.throughput(Throughput::Elements(tokens as u64));
        group.bench_function(format!("{tokens}_tokens"), |b| b.iter(|| ev.run(&inputs).expect("forward")));
    }
    group.finish();
}

criterion_group!(benches, forward);
criterion_main!(benches);
