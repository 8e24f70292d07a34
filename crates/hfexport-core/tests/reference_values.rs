//! The reference evaluator against values torch 2.13 and transformers 5.23 computed (in a Python
//! session, copied here): the formulas no committed fixture model runs through — erf, each
//! activation (`transformers.activations.ACT2FN`), `layer_norm`, and longrope's cos/sin
//! (`Phi3RotaryEmbedding` with `dynamic_rope_update`) below and past the original context.

mod common;

use common::{one_node_graph, run};
use hfexport_core::{Activation, DType, Op, RopeConfig, RopeScaling, Tensor, UnaryOp};

const X: [f32; 10] = [-4.0, -2.5, -1.0, -0.3, 0.0, 0.2, 0.7, 1.5, 3.0, 5.0];

/// The worst `|got - want| / (1 + |want|)`.
fn worst(got: &Tensor, want: &[f32]) -> f32 {
    let got = got.cast(DType::F32);
    let got = got.as_f32().unwrap();
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).map(|(g, w)| (g - w).abs() / (1.0 + w.abs())).fold(0.0, f32::max)
}

fn run_one(op: Op, inputs: &[(&str, &Tensor)]) -> Tensor {
    run(&one_node_graph(op, inputs), inputs).remove(0)
}

#[test]
fn erf_equals_torch() {
    let x = Tensor::f32(vec![10], X.to_vec()).unwrap();
    // torch.erf(x)
    let want = [-1.0, -0.999593, -0.8427008, -0.32862678, 0.0, 0.2227026, 0.6778012, 0.96610516, 0.9999779, 1.0];
    let d = worst(&run_one(Op::Unary(UnaryOp::Erf), &[("x", &x)]), &want);
    assert!(d < 2e-7, "{d}");
}

#[test]
fn activations_equal_transformers() {
    let x = Tensor::f32(vec![10], X.to_vec()).unwrap();
    // ACT2FN[name](x) for each name mapping to the activation
    let cases: [(&str, [f32; 10]); 6] = [
        (
            "gelu",
            [
                -0.00012671947,
                -0.015524179,
                -0.15865529,
                -0.11462659,
                0.0,
                0.11585195,
                0.53062546,
                1.3997891,
                2.9959502,
                4.9999986,
            ],
        ),
        (
            "gelu_pytorch_tanh",
            [
                -7.021427e-5,
                -0.015084296,
                -0.158808,
                -0.11462908,
                0.0,
                0.115851425,
                0.53057015,
                1.3995715,
                2.9963627,
                4.9999995,
            ],
        ),
        (
            "gelu_new",
            [
                -7.021427e-5,
                -0.015084296,
                -0.158808,
                -0.11462908,
                0.0,
                0.115851425,
                0.53057015,
                1.3995715,
                2.9963627,
                4.9999995,
            ],
        ),
        (
            "silu",
            [
                -0.07194484,
                -0.18964545,
                -0.26894143,
                -0.12766725,
                0.0,
                0.1099668,
                0.46773142,
                1.2263616,
                2.8577225,
                4.9665356,
            ],
        ),
        ("relu", [0.0, 0.0, 0.0, 0.0, 0.0, 0.2, 0.7, 1.5, 3.0, 5.0]),
        (
            "quick_gelu",
            [
                -0.0044147237,
                -0.03498616,
                -0.15420423,
                -0.11251587,
                0.0,
                0.11685754,
                0.53689396,
                1.3916622,
                2.9819288,
                4.998993,
            ],
        ),
    ];
    for (name, want) in cases {
        let act = Activation::from_hf(name).unwrap();
        let d = worst(&run_one(Op::Activate(act), &[("x", &x)]), &want);
        assert!(d < 1e-6, "{name}: {d}");
    }
    assert_eq!(Activation::from_hf("swish"), Some(Activation::Silu));
    assert!(Activation::NAMES.iter().all(|n| Activation::from_hf(n).is_some()));
    assert_eq!(Activation::from_hf("gelu_fast"), None, "an approximation of its own");
}

#[test]
fn layer_norm_equals_torch() {
    let x = Tensor::f32(vec![2, 4], vec![0.5, -1.0, 2.0, 0.25, 3.0, 3.5, -2.0, 0.0]).unwrap();
    let w = Tensor::f32(vec![4], vec![1.0, 0.5, -2.0, 1.5]).unwrap();
    let b = Tensor::f32(vec![4], vec![0.1, -0.2, 0.0, 0.3]).unwrap();
    let op = Op::LayerNorm { eps: 1e-5 };
    // torch.nn.functional.layer_norm(x, (4,), w, b, 1e-5), without b, and all in float16
    let with_bias = [0.15862077, -0.87413895, -2.9310389, 0.03620652, 0.9346215, 0.3285936, 2.7820716, -0.45115933];
    let without = [0.058620777, -0.67413896, -2.9310389, -0.2637935, 0.8346215, 0.5285936, 2.7820716, -0.7511593];
    let f16 = [0.15856934, -0.87402344, -2.9316406, 0.036254883, 0.9345703, 0.32861328, 2.78125, -0.45117188];
    let d = worst(&run_one(op.clone(), &[("x", &x), ("w", &w), ("b", &b)]), &with_bias);
    assert!(d < 1e-6, "{d}");
    let d = worst(&run_one(op.clone(), &[("x", &x), ("w", &w)]), &without);
    assert!(d < 1e-6, "{d}");
    let [xh, wh, bh] = [&x, &w, &b].map(|t| t.cast(DType::F16));
    let got = run_one(op, &[("x", &xh), ("w", &wh), ("b", &bh)]);
    assert_eq!(got.dtype(), DType::F16);
    assert_eq!(worst(&got, &f16), 0.0, "computed in f32, rounded once, as torch");
}

/// `Phi3Config(hidden_size=32, num_attention_heads=4, max_position_embeddings=64,
/// original_max_position_embeddings=16, rope_parameters={"rope_type": "longrope", "short_factor":
/// [1.0, 1.1, 1.5, 2.0], "long_factor": [1.2, 2.5, 4.0, 8.0], "rope_theta": 10000.0})`: factor
/// 64 / 16 = 4, attention factor sqrt(1 + ln 4 / ln 16) = sqrt(1.5). `Phi3RotaryEmbedding`'s cos
/// and sin (first half of the last axis; the second repeats it) for a batch whose longest
/// position is 16 (short factors) and one whose longest is 21 (long factors, for every row).
#[test]
fn longrope_cos_sin_equal_transformers() {
    let scaling = RopeScaling::longrope(vec![1.0, 1.1, 1.5, 2.0], vec![1.2, 2.5, 4.0, 8.0], 16, 64.0 / 16.0, None);
    let rope = RopeConfig { theta: 10000.0, dim: 8, scaling };
    assert_eq!(rope.rope_type(), "longrope");
    assert_eq!(rope.attention_scaling(), 1.5f64.sqrt() as f32);
    let short = (
        [[0, 1, 2, 5], [3, 4, 7, 15]],
        [
            1.2247449, 1.2247449, 1.2247449, 1.2247449, 0.66173255, 1.2196875, 1.2247177, 1.2247448, -0.5096737,
            1.204557, 1.2246361, 1.2247443, 0.34741384, 1.1003852, 1.2240646, 1.2247411, -1.2124883, 1.1794782, 1.2245,
            1.2247435, -0.8005467, 1.1446584, 1.2243094, 1.2247425, 0.92333794, 0.98501587, 1.2234116, 1.2247374,
            -0.9304239, 0.25190726, 1.2186263, 1.2247105,
        ],
        [
            0.0,
            0.0,
            0.0,
            0.0,
            1.0305873,
            0.11118715,
            0.008164906,
            0.0006123725,
            1.1136574,
            0.22145605,
            0.016329449,
            0.0012247448,
            -1.1744376,
            0.53772914,
            0.040817272,
            0.0030618594,
            0.172836,
            0.32989594,
            0.024493264,
            0.0018371167,
            -0.92689,
            0.43561134,
            0.032655995,
            0.0024494883,
            0.804641,
            0.727835,
            0.05713402,
            0.0042865984,
            0.7964368,
            1.1985586,
            0.12227047,
            0.009185501,
        ],
    );
    let long = (
        [[0, 3, 17, 20], [1, 2, 3, 4]],
        [
            1.2247449,
            1.2247449,
            1.2247449,
            1.2247449,
            -0.9811965,
            1.2159374,
            1.2247105,
            1.2247448,
            -0.03612362,
            0.9523282,
            1.223639,
            1.2247422,
            -0.70371664,
            0.853288,
            1.2232143,
            1.2247411,
            0.82353354,
            1.2237653,
            1.2247411,
            1.2247449,
            -0.11723688,
            1.2208278,
            1.2247295,
            1.2247449,
            -0.9811965,
            1.2159374,
            1.2247105,
            1.2247448,
            -1.2023003,
            1.2091016,
            1.2246836,
            1.2247448,
        ],
        [
            0.0,
            0.0,
            0.0,
            0.0,
            0.73297566,
            0.1466169,
            0.0091855,
            0.00045927934,
            1.224212,
            0.770111,
            0.05203599,
            0.0026025812,
            -1.0023886,
            0.8785781,
            0.061211728,
            0.0030618594,
            0.9065278,
            0.048976734,
            0.0030618592,
            0.00015309312,
            1.2191209,
            0.09787511,
            0.006123699,
            0.00030618624,
            0.73297566,
            0.1466169,
            0.0091855,
            0.00045927934,
            -0.23339704,
            0.19512416,
            0.012247245,
            0.0006123725,
        ],
    );
    for (name, (pos, cos, sin)) in [("short", short), ("long", long)] {
        let pos = Tensor::i64(vec![2, 4], pos.concat()).unwrap();
        let out = run(&one_node_graph(Op::RotaryCosSin { rope: rope.clone() }, &[("pos", &pos)]), &[("pos", &pos)]);
        for (table, want) in [(&out[0], cos), (&out[1], sin)] {
            let v = table.as_f32().unwrap();
            let (first, second): (Vec<f32>, Vec<f32>) =
                v.chunks(8).flat_map(|row| row[..4].iter().zip(&row[4..]).map(|(a, b)| (*a, *b))).unzip();
            assert_eq!(first, second, "{name}: the halves repeat");
            let got = Tensor::f32(vec![32], first).unwrap();
            let d = worst(&got, &want);
            assert!(d < 1e-6, "{name}: {d}");
        }
    }
}
