//! The static-cache `decode` graph (export_for_generation with a static cache and multi-token
//! decode), run by the reference evaluator as a generation loop: the whole prompt in one call,
//! then one token a step, reproduces transformers' 16 greedy tokens for every fixture; and
//! three tokens in one call equal three single-token calls.

mod common;
use common::{fixture, fixtures, recurrent_fixtures};
use hfexport_core::cache_ports;
use hfexport_core::{Evaluator, Tensor};
use hfexport_models::config::Mixer;
use hfexport_models::safetensors::read_all;
use hfexport_models::{build_generation, BuildOptions, Checkpoint, LatentForm};
use std::collections::BTreeMap;

const CACHE: usize = 32;

/// One decode session over a graph: caches held between calls as the graph's outputs.
struct Session<'g> {
    ev: Evaluator<'g>,
    caches: BTreeMap<String, Tensor>,
    next_pos: usize,
}

impl<'g> Session<'g> {
    fn new(ev: Evaluator<'g>, ckpt: &Checkpoint) -> Session<'g> {
        // each layer's caches as its spec says (a latent-attention layer's differ in width)
        let mut caches = BTreeMap::new();
        for (i, layer) in ckpt.config.layers.iter().enumerate() {
            for (kind, dims) in layer.cache(&hfexport_core::Dim::from(CACHE)) {
                let shape: Vec<usize> = dims.iter().map(|d| d.as_const().unwrap() as usize).collect();
                let n: usize = shape.iter().product();
                caches.insert(cache_ports::layer_cache(i, kind), Tensor::f32(shape, vec![0.0; n]).unwrap());
            }
        }
        Session { ev, caches, next_pos: 0 }
    }

    /// Feeds `tokens` at the next positions; returns logits `[1, q, vocab]`.
    fn step(&mut self, tokens: &[i64]) -> Tensor {
        let q = tokens.len();
        let p0 = self.next_pos;
        let mut mask = Vec::with_capacity(q * CACHE);
        for i in 0..q {
            mask.extend((0..CACHE).map(|j| j <= p0 + i));
        }
        let mut inputs = BTreeMap::from([
            ("input_ids".to_string(), Tensor::i64(vec![1, q], tokens.to_vec()).unwrap()),
            ("attention_mask".to_string(), Tensor::bool(vec![1, 1, q, CACHE], mask).unwrap()),
            ("position_ids".to_string(), Tensor::i64(vec![1, q], (p0 as i64..(p0 + q) as i64).collect()).unwrap()),
        ]);
        for (k, v) in &self.caches {
            inputs.insert(cache_ports::past(k), v.clone());
        }
        let mut out = self.ev.run(&inputs).unwrap();
        for (k, v) in self.caches.iter_mut() {
            *v = out.remove(&cache_ports::present(k)).unwrap();
        }
        self.next_pos += q;
        out.remove("logits").unwrap()
    }
}

fn argmax_last(logits: &Tensor) -> i64 {
    let v = *logits.shape().last().unwrap();
    let x = logits.as_f32().unwrap();
    let row = &x[x.len() - v..];
    (0..v).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap() as i64
}

#[test]
fn greedy_generation_matches_transformers() {
    for name in fixtures() {
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        let g =
            build_generation(&ckpt.config, &ckpt, &BuildOptions::default(), Some(CACHE), true).unwrap().remove(0).graph;
        let states: usize = ckpt.config.layers.iter().map(|l| l.cache_names().len()).sum();
        assert_eq!(g.aliases().len(), states, "every cache tensor updated in place");
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let prompt = gold["greedy.prompt_ids"].as_i64().unwrap().to_vec();
        let want = gold["greedy.tokens"].as_i64().unwrap().to_vec();
        let mut s = Session::new(Evaluator::new(&g, &ckpt).unwrap(), &ckpt);
        let mut got = vec![argmax_last(&s.step(&prompt))];
        while got.len() < want.len() {
            let next = *got.last().unwrap();
            got.push(argmax_last(&s.step(&[next])));
        }
        assert_eq!(got, want, "{name}: greedy tokens differ from transformers'");
    }
}

/// A recurrent model's generation export is one `decode` (of one token per call, whatever
/// `multi_token_decode` says, when the model scans), whose caches are each layer's state (and a
/// hybrid's attention layers' keys and values): fed the golden's sequence
/// token by token it gives transformers' forward logits at every position (within 1e-4), and
/// fed the prompt so, transformers' 16 greedy tokens.
#[test]
fn recurrent_states_step_through_the_prompt() {
    for name in recurrent_fixtures() {
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        let planned = build_generation(&ckpt.config, &ckpt, &BuildOptions::default(), Some(CACHE), true).unwrap();
        assert_eq!(planned.len(), 1, "{name}: one decode component");
        let g = &planned[0].graph;
        // a scan without a loop lowering takes one token per call; a convolution takes any number
        let one_token = g.info(g.input("input_ids").unwrap().value).shape[1].as_const() == Some(1);
        assert_eq!(one_token, ckpt.config.scans(), "{name}");
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let ids = gold["single.input_ids"].as_i64().unwrap().to_vec();
        let want = gold["single.logits"].as_f32().unwrap().to_vec();
        let vocab = ckpt.config.vocab_size;
        let mut s = Session::new(Evaluator::new(g, &ckpt).unwrap(), &ckpt);
        for (p, &t) in ids.iter().enumerate() {
            let got = s.step(&[t]);
            let worst = got.as_f32().unwrap().iter().zip(&want[p * vocab..][..vocab]).map(|(a, b)| (a - b).abs());
            let worst = worst.fold(0f32, f32::max);
            assert!(worst <= 1e-4, "{name}: position {p}: |diff| {worst:e} from transformers' forward logits");
        }
        let prompt = gold["greedy.prompt_ids"].as_i64().unwrap().to_vec();
        let tokens = gold["greedy.tokens"].as_i64().unwrap().to_vec();
        let mut s = Session::new(Evaluator::new(g, &ckpt).unwrap(), &ckpt);
        let mut logits = None;
        for &t in &prompt {
            logits = Some(s.step(&[t]));
        }
        let mut got = vec![argmax_last(&logits.unwrap())];
        while got.len() < tokens.len() {
            let next = *got.last().unwrap();
            got.push(argmax_last(&s.step(&[next])));
        }
        assert_eq!(got, tokens, "{name}: greedy tokens differ from transformers'");
    }
}

/// Not for dynamic-NTK rope (the qwen3 fixture): there the frequencies of a call depend on its
/// longest position, in transformers as here, so three tokens in one call are rotated with the
/// frequencies of the third position, and one at a time each with its own.
#[test]
fn three_tokens_at_once_equal_three_steps() {
    for name in fixtures() {
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        if ckpt.config.rope.dynamic_base_exponent().is_some() {
            assert_eq!(name, "qwen3", "only the qwen3 fixture uses dynamic rope");
            continue;
        }
        let g =
            build_generation(&ckpt.config, &ckpt, &BuildOptions::default(), Some(CACHE), true).unwrap().remove(0).graph;
        let prompt = [3i64, 17, 42, 9, 100];
        let more = [7i64, 64, 21];
        let mut one = Session::new(Evaluator::new(&g, &ckpt).unwrap(), &ckpt);
        let mut three = Session::new(Evaluator::new(&g, &ckpt).unwrap(), &ckpt);
        one.step(&prompt);
        three.step(&prompt);
        let singles: Vec<Tensor> = more.iter().map(|t| one.step(&[*t])).collect();
        let together = three.step(&more);
        let v = ckpt.config.vocab_size;
        let t = together.as_f32().unwrap();
        for (i, s) in singles.iter().enumerate() {
            let d =
                s.as_f32().unwrap().iter().zip(&t[i * v..(i + 1) * v]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(d < 1e-4, "{name}: token {i} logits differ by {d}");
        }
        for (k, c) in &one.caches {
            let d = c
                .as_f32()
                .unwrap()
                .iter()
                .zip(three.caches[k].as_f32().unwrap())
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(d < 1e-5, "{name}: cache {k} differs by {d}");
        }
    }
}

/// Multi-head latent attention's absorbed form (the decode default) gives the expanded form's
/// logits and caches, step by step, on every fixture with latent layers.
#[test]
fn absorbed_latent_attention_equals_expanded() {
    let latent = |c: &Checkpoint| c.config.layers.iter().any(|l| matches!(l.mixer, Mixer::LatentAttention(_)));
    let mut seen = 0;
    for name in fixtures() {
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        if !latent(&ckpt) {
            continue;
        }
        seen += 1;
        let graph = |form: LatentForm| {
            let opts = BuildOptions { latent: form, ..BuildOptions::default() };
            let g = build_generation(&ckpt.config, &ckpt, &opts, Some(CACHE), true).unwrap().remove(0).graph;
            let absorbs = g.nodes().iter().any(|n| n.name.ends_with(".q_latent"));
            assert_eq!(absorbs, form == LatentForm::Absorbed, "{name}: {form:?} graph");
            g
        };
        let (expanded, absorbed) = (graph(LatentForm::Expanded), graph(LatentForm::Absorbed));
        let mut e = Session::new(Evaluator::new(&expanded, &ckpt).unwrap(), &ckpt);
        let mut a = Session::new(Evaluator::new(&absorbed, &ckpt).unwrap(), &ckpt);
        let max_diff = |x: &Tensor, y: &Tensor| {
            x.as_f32().unwrap().iter().zip(y.as_f32().unwrap()).map(|(p, q)| (p - q).abs()).fold(0f32, f32::max)
        };
        for tokens in [&[3i64, 17, 42, 9, 100][..], &[7], &[64], &[21, 5]] {
            let d = max_diff(&e.step(tokens), &a.step(tokens));
            assert!(d < 1e-4, "{name}: logits after {tokens:?} differ by {d}");
        }
        for (k, c) in &e.caches {
            let d = max_diff(c, &a.caches[k]);
            assert!(d < 1e-5, "{name}: cache {k} differs by {d}");
        }
    }
    assert!(seen > 0 || std::env::var("HFEXPORT_FIXTURES").is_ok(), "no fixture has latent attention");
}

/// A position beyond the static cache is an error naming it, not a panic or a silent wrap.
#[test]
fn a_position_beyond_the_cache_is_an_error() {
    let ckpt = Checkpoint::open(&fixture("llama")).unwrap();
    let g = build_generation(&ckpt.config, &ckpt, &BuildOptions::default(), Some(CACHE), true).unwrap().remove(0).graph;
    let mut s = Session::new(Evaluator::new(&g, &ckpt).unwrap(), &ckpt);
    s.next_pos = CACHE;
    let mut inputs = BTreeMap::from([
        ("input_ids".to_string(), Tensor::i64(vec![1, 1], vec![5]).unwrap()),
        ("attention_mask".to_string(), Tensor::bool(vec![1, 1, 1, CACHE], vec![true; CACHE]).unwrap()),
        ("position_ids".to_string(), Tensor::i64(vec![1, 1], vec![CACHE as i64]).unwrap()),
    ]);
    for (k, v) in &s.caches {
        inputs.insert(cache_ports::past(k), v.clone());
    }
    let e = s.ev.run(&inputs).unwrap_err().to_string();
    assert!(e.contains("position 32") && e.contains("32 slots") && e.contains("cache_keys"), "{e}");
}
