//! Encoder-decoders (`WhisperForConditionalGeneration`, `T5ForConditionalGeneration`, the BART
//! line: `BartForConditionalGeneration`, `MBartForConditionalGeneration`, `MarianMTModel`,
//! `PegasusForConditionalGeneration`, `M2M100ForConditionalGeneration`) as two
//! components: the `encoder` (log-mel features or tokens in; the encoder states and every
//! decoder layer's cross-attention keys and values out) and the static-cache `decode` taking
//! them. In the reference evaluator the encoder states equal transformers' at 1e-4 (single and
//! batched inputs, the text models' padded) and a greedy loop over `decode` (the start token in an empty
//! cache, then one token a step) gives transformers' 16 plain greedy tokens; each format's
//! export passes `--verify` for both components in its runtime. Random unseen configurations
//! of each family do the same.

mod common;
use common::{export_and_verify, fixture, python, script, seq2seq_fixtures};
use hfexport_core::cache_ports;
use hfexport_core::plan::Role;
use hfexport_core::{Evaluator, Graph, Tensor};
use hfexport_models::safetensors::read_all;
use hfexport_models::{build_generation, BuildOptions, Checkpoint, Task};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const CACHE: usize = 24;

fn worst(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.shape(), b.shape());
    a.as_f32().unwrap().iter().zip(b.as_f32().unwrap()).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max)
}

/// Greedy tokens from the evaluator: `decode` over a static cache of `slots` slots, fed the
/// encoder's cross-attention outputs on every call.
fn greedy(ckpt: &Checkpoint, decode: &Graph, slots: usize, cross: &BTreeMap<String, Tensor>, n: usize) -> Vec<i64> {
    let c = &ckpt.config;
    let ev = Evaluator::new(decode, ckpt).unwrap();
    let shape = vec![1, c.num_key_value_heads, slots, c.head_dim];
    let zeros = Tensor::f32(shape.clone(), vec![0.0; shape.iter().product()]).unwrap();
    let mut caches: BTreeMap<String, Tensor> = (0..c.num_hidden_layers)
        .flat_map(|i| ["key", "value"].map(|k| (cache_ports::layer_cache(i, k), zeros.clone())))
        .collect();
    let mut token = c.seq2seq.as_ref().unwrap().decoder_start_token_id;
    let mut got = vec![];
    for pos in 0..n {
        let mut inputs = BTreeMap::from([
            ("input_ids".to_string(), Tensor::i64(vec![1, 1], vec![token]).unwrap()),
            (
                "attention_mask".to_string(),
                Tensor::bool(vec![1, 1, 1, slots], (0..slots).map(|j| j <= pos).collect()).unwrap(),
            ),
            ("position_ids".to_string(), Tensor::i64(vec![1, 1], vec![pos as i64]).unwrap()),
        ]);
        inputs.extend(caches.iter().map(|(k, v)| (cache_ports::past(k), v.clone())));
        inputs.extend(cross.iter().map(|(k, v)| (k.clone(), v.clone())));
        let mut out = ev.run(&inputs).unwrap();
        for (k, v) in caches.iter_mut() {
            *v = out.remove(&cache_ports::present(k)).unwrap();
        }
        let logits = out["logits"].as_f32().unwrap();
        token = (0..c.vocab_size).max_by(|&a, &b| logits[a].total_cmp(&logits[b]).then(b.cmp(&a))).unwrap() as i64;
        got.push(token);
    }
    got
}

/// The encoder inputs of golden case `case` (every `<case>.<name>` but the outputs).
fn encoder_inputs(gold: &BTreeMap<String, Tensor>, case: &str) -> BTreeMap<String, Tensor> {
    let prefix = format!("{case}.");
    gold.iter()
        .filter_map(|(k, v)| k.strip_prefix(&prefix).map(|n| (n.to_string(), v.clone())))
        .filter(|(n, _)| !["encoder_hidden_states", "tokens"].contains(&n.as_str()))
        .collect()
}

#[test]
fn encoder_decoders_match_transformers_in_the_evaluator() {
    let names = seq2seq_fixtures();
    assert!(names.len() >= 3, "the manifest lists the encoder-decoder fixtures: {names:?}");
    for name in names {
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let plan = build_generation(&ckpt.config, &ckpt, &BuildOptions::default(), Some(CACHE), true).unwrap();
        let roles: Vec<Role> = plan.iter().map(|p| p.spec.role).collect();
        assert_eq!(roles, [Role::Encoder, Role::Decode], "{name}");
        let (encoder, decode) = (&plan[0].graph, &plan[1].graph);
        let ev = Evaluator::new(encoder, &ckpt).unwrap();
        let mut cross = BTreeMap::new();
        for case in ["single", "batch"] {
            let out = ev.run(&encoder_inputs(&gold, case)).unwrap();
            let d = worst(&out["encoder_hidden_states"], &gold[&format!("{case}.encoder_hidden_states")]);
            assert!(d <= 1e-4, "{name} {case}: encoder states differ by {d}");
            if case == "single" {
                cross = out.into_iter().filter(|(k, _)| k.starts_with("cross.")).collect();
            }
        }
        assert_eq!(cross.len(), 2 * ckpt.config.num_hidden_layers, "{name}: a key and value output per layer");
        let want = gold["single.tokens"].as_i64().unwrap().to_vec();
        let got = greedy(&ckpt, decode, CACHE, &cross, want.len());
        assert_eq!(got, want, "{name}: greedy tokens differ from transformers'");
    }
}

/// [`export_and_verify`] of an encoder-decoder: its two components, its tasks (`slots` of a
/// static cache, or the growing cache's merged decode).
fn export_seq2seq(model: &Path, slots: Option<usize>, out: &Path) -> Vec<String> {
    let tasks = [Task::SpeechRecognition.name(), Task::Text2TextGeneration.name()];
    export_and_verify(model, slots, out, &tasks, &["encoder", "decode"])
}

#[test]
fn encoder_decoder_exports_verify_in_every_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    for name in seq2seq_fixtures() {
        for (slots, kind) in [(Some(CACHE), "static"), (None, "growing")] {
            let failures = export_seq2seq(&fixture(name), slots, &tmp.path().join(format!("{name}-{kind}")));
            assert!(failures.is_empty(), "{name} {kind} cache:\n{}", failures.join("\n"));
        }
    }
}

/// Encoder-decoders the fixtures do not cover (`tests/python/random_seq2seq.py`; Whisper:
/// widths, head counts on each side, layers, FFN widths, mel bins including 80 and 128, source
/// and target lengths, activations, tied or untied `proj_out`, start tokens; T5: head sizes
/// apart from the width, encoder and decoder depths, relu or gated MLPs, bucket counts and
/// distances, tied-and-scaled or stored heads; the BART line, two of each of BART, mBART,
/// Marian, Pegasus and M2M100: odd widths under the sinusoids, head counts on each side, depths,
/// position tables, activations, `scale_embedding`, tied or stored heads, a nonzero
/// `final_logits_bias`, Marian's own encoder and decoder tables, Pegasus with and without its
/// stored sinusoids, M2M100 with any padding id), made by transformers at test time: encoder states at 1e-4 and 8 greedy
/// tokens in the evaluator (the static cache's decode and the growing cache's merged one), and
/// `--verify` in every format.
#[test]
fn random_encoder_decoders_match_transformers_and_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ckpt");
    let o = Command::new(python())
        .arg(script("random_seq2seq.py"))
        .arg(&out)
        .args(["--seed", "20261202", "--count", "14"])
        .output()
        .expect("start python");
    assert!(o.status.success(), "random_seq2seq.py failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
    let mut failures = vec![];
    for case in index["cases"].as_array().unwrap() {
        let (name, desc) = (case["name"].as_str().unwrap(), case["description"].as_str().unwrap());
        let dir = out.join(case["dir"].as_str().unwrap());
        let ckpt = Checkpoint::open(&dir).unwrap();
        let gold = read_all(dir.join("golden.safetensors")).unwrap();
        let slots = 12;
        let plan = build_generation(&ckpt.config, &ckpt, &BuildOptions::default(), Some(slots), true).unwrap();
        let ev = Evaluator::new(&plan[0].graph, &ckpt).unwrap();
        let inputs: BTreeMap<String, Tensor> = gold
            .iter()
            .filter(|(k, _)| !["encoder_hidden_states", "tokens"].contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let out = ev.run(&inputs).unwrap();
        let d = worst(&out["encoder_hidden_states"], &gold["encoder_hidden_states"]);
        if d > 1e-4 {
            failures.push(format!("{name}: encoder states differ by {d}\n    {desc}"));
        }
        let cross: BTreeMap<String, Tensor> = out.into_iter().filter(|(k, _)| k.starts_with("cross.")).collect();
        let want = gold["tokens"].as_i64().unwrap().to_vec();
        let got = greedy(&ckpt, &plan[1].graph, slots, &cross, want.len());
        if got != want {
            failures.push(format!("{name}: tokens {got:?}, transformers {want:?}\n    {desc}"));
        }
        let growing = build_generation(&ckpt.config, &ckpt, &BuildOptions::default(), None, false).unwrap();
        let (_, got) = greedy_growing(&ckpt, &growing, &inputs, want.len());
        if got != want {
            failures.push(format!("{name}: the merged decode's tokens {got:?}, transformers {want:?}\n    {desc}"));
        }
        let exported = export_seq2seq(&dir, Some(slots), &tmp.path().join(name));
        failures.extend(exported.into_iter().map(|f| format!("{name} {f}")));
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// Greedy tokens from the evaluator over a growing-cache export's two components: the
/// `encoder` on `inputs`, then `decode` from empty pasts, the start token first, fed the
/// encoder's states (and a text encoder's mask) on every call, as optimum and transformers.js
/// drive the merged decoder.
fn greedy_growing(
    ckpt: &Checkpoint,
    plan: &[hfexport_core::plan::Planned],
    inputs: &BTreeMap<String, Tensor>,
    n: usize,
) -> (Tensor, Vec<i64>) {
    let (encoder, decode) = (&plan[0].graph, &plan[1].graph);
    let states = Evaluator::new(encoder, ckpt).unwrap().run(inputs).unwrap();
    let hidden = states[cache_ports::ENCODER_OUTPUT].clone();
    let takes: Vec<&str> = decode.inputs().iter().map(|p| p.name.as_str()).collect();
    let fixed = cache_ports::encoder_feeds(&takes, inputs, states);
    let mut caches: BTreeMap<String, Tensor> = decode
        .inputs()
        .iter()
        .filter_map(|p| cache_ports::cache_of_past(&p.name).map(|c| (c.to_string(), decode.info(p.value))))
        .map(|(c, info)| {
            let dims: Vec<Option<usize>> = info.shape.iter().map(|d| d.as_const().map(|v| v as usize)).collect();
            (c, Tensor::f32(hfexport_core::generation::empty_past(&dims), vec![]).unwrap())
        })
        .collect();
    let ev = Evaluator::new(decode, ckpt).unwrap();
    let mut token = ckpt.config.seq2seq.as_ref().unwrap().decoder_start_token_id;
    let mut got = vec![];
    for _ in 0..n {
        let mut feed = BTreeMap::from([("input_ids".to_string(), Tensor::i64(vec![1, 1], vec![token]).unwrap())]);
        feed.extend(fixed.clone());
        feed.extend(caches.iter().map(|(k, v)| (cache_ports::past(k), v.clone())));
        let mut out = ev.run(&feed).unwrap();
        for (k, v) in caches.iter_mut() {
            *v = out.remove(&cache_ports::present(k)).unwrap();
        }
        let logits = out["logits"].as_f32().unwrap();
        token = hfexport_core::generation::argmax(logits) as i64;
        got.push(token);
    }
    (hidden, got)
}

/// Without a static cache an encoder-decoder exports as the clients' encoder and merged decoder
/// (`last_hidden_state` out; `encoder_hidden_states` and the caches `<i>.decoder.*`,
/// `<i>.encoder.*` in): the evaluator gives transformers' encoder states and greedy tokens on
/// every fixture.
#[test]
fn encoder_decoders_without_a_static_cache_take_the_clients_layout() {
    for name in seq2seq_fixtures() {
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let plan = build_generation(&ckpt.config, &ckpt, &BuildOptions::default(), None, false).unwrap();
        let roles: Vec<Role> = plan.iter().map(|p| p.spec.role).collect();
        assert_eq!(roles, [Role::Encoder, Role::Decode], "{name}");
        let outputs: Vec<&str> = plan[0].graph.outputs().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(outputs, [cache_ports::ENCODER_OUTPUT], "{name}");
        let past: Vec<&str> =
            plan[1].graph.inputs().iter().map(|p| p.name.as_str()).filter(|n| cache_ports::is_past(n)).collect();
        assert_eq!(
            past[..4],
            [
                "past_key_values.0.decoder.key",
                "past_key_values.0.decoder.value",
                "past_key_values.0.encoder.key",
                "past_key_values.0.encoder.value"
            ],
            "{name}"
        );
        let want = gold["single.tokens"].as_i64().unwrap().to_vec();
        let (states, got) = greedy_growing(&ckpt, &plan, &encoder_inputs(&gold, "single"), want.len());
        let d = worst(&states, &gold["single.encoder_hidden_states"]);
        assert!(d <= 1e-4, "{name}: encoder states differ by {d}");
        assert_eq!(got, want, "{name}: greedy tokens differ from transformers'");
    }
    let ckpt = Checkpoint::open(&fixture("whisper")).unwrap();
    let e = hfexport_models::build(&ckpt.config, &ckpt, Task::SpeechRecognition, &BuildOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("--for-generation"), "{e}");
}
