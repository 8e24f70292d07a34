//! The reference evaluator on graphs built from the committed fixtures reproduces the logits
//! transformers computed for the same checkpoints (`cargo xtask fixtures`), at every
//! non-padded position, for one sequence and for a left-padded batch of two; and the same
//! graph runs at a batch and length no golden used.

mod common;

use common::{causal_lm_request, fixtures, recurrent_fixtures, worst_unpadded};
use hfexport_core::decompose::decompose;
use hfexport_core::{Dim, Evaluator, Op, Tensor};
use hfexport_models::safetensors::read_all;
use hfexport_models::{build, BuildOptions, Checkpoint, Task};
use std::collections::BTreeMap;
use std::path::PathBuf;

const ATOL: f32 = 1e-4;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn goldens(name: &str) -> BTreeMap<String, Tensor> {
    read_all(fixture(name).join("golden.safetensors")).expect("golden.safetensors")
}

fn run_case(name: &str, case: &str) {
    run_case_on(name, case, false);
    run_case_on(name, case, true);
}

/// `decomposed`: every high-level op expanded into primitives first, as a backend that lowers
/// none of them natively would see the graph.
fn run_case_on(name: &str, case: &str, decomposed: bool) {
    let ckpt = Checkpoint::open(&fixture(name)).unwrap();
    let mut g = build(&ckpt.config, &ckpt, Task::CausalLm, &BuildOptions::default()).unwrap();
    let gold = goldens(name);
    if decomposed {
        // a recurrence unrolls over a static sequence only (a backend without a loop sees
        // the export's fixed length): the golden's
        if g.nodes().iter().any(|n| matches!(n.op, Op::SelectiveScan | Op::DeltaScan)) {
            let len = gold[&format!("{case}.input_ids")].shape()[1];
            g.substitute_symbol("sequence", &Dim::from(len)).unwrap();
        }
        g = decompose(&g, &|_| true).unwrap();
        assert!(g.nodes().iter().all(|n| !n.op.is_high_level()));
    }
    let ev = Evaluator::new(&g, &ckpt).unwrap();
    let inputs: BTreeMap<String, Tensor> =
        ["input_ids", "attention_mask"].iter().map(|k| (k.to_string(), gold[&format!("{case}.{k}")].clone())).collect();
    let out = ev.run(&inputs).unwrap();
    let (d, at) = worst_unpadded(&out["logits"], &gold[&format!("{case}.logits")], &inputs["attention_mask"]).unwrap();
    assert!(d <= ATOL, "{name} {case} (decomposed: {decomposed}): worst |diff| {d:e} at {at:?} exceeds {ATOL:e}");
}

/// Every causal LM: the attention models and the recurrent ones.
fn causal_lms() -> Vec<&'static str> {
    fixtures().into_iter().chain(recurrent_fixtures()).collect()
}

#[test]
fn single_sequence_matches_transformers() {
    for name in causal_lms() {
        run_case(name, "single");
    }
}

#[test]
fn left_padded_batch_matches_transformers() {
    for name in causal_lms() {
        run_case(name, "batch");
    }
}

/// A batch of 3 with 11 tokens (no golden used either): the shapes follow, the values are
/// finite, and each row equals that row run alone (the batch dim is truly independent).
#[test]
fn unseen_batch_and_length_run() {
    for name in causal_lms() {
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        let g = build(&ckpt.config, &ckpt, Task::CausalLm, &BuildOptions::default()).unwrap();
        let ev = Evaluator::new(&g, &ckpt).unwrap();
        let vocab = ckpt.config.vocab_size as i64;
        let ids: Vec<i64> = (0..33).map(|i| (i * 37 + 5) % vocab).collect();
        let mut inputs = BTreeMap::new();
        inputs.insert("input_ids".to_string(), Tensor::i64(vec![3, 11], ids.clone()).unwrap());
        inputs.insert("attention_mask".to_string(), Tensor::i64(vec![3, 11], vec![1; 33]).unwrap());
        let out = ev.run(&inputs).unwrap();
        let logits = &out["logits"];
        assert_eq!(logits.shape(), &[3, 11, ckpt.config.vocab_size], "{name}");
        assert!(logits.as_f32().unwrap().iter().all(|x| x.is_finite()), "{name}");
        let mut row = BTreeMap::new();
        row.insert("input_ids".to_string(), Tensor::i64(vec![1, 11], ids[22..].to_vec()).unwrap());
        row.insert("attention_mask".to_string(), Tensor::i64(vec![1, 11], vec![1; 11]).unwrap());
        let alone = ev.run(&row).unwrap();
        let per_row = 11 * ckpt.config.vocab_size;
        let d = logits.as_f32().unwrap()[2 * per_row..]
            .iter()
            .zip(alone["logits"].as_f32().unwrap())
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(d < 1e-5, "{name}: row 2 of the batch differs from running it alone by {d}");
    }
}

/// The causal-LM graph of `ckpt` in the evaluator gives fixture `name`'s golden logits (single
/// and left-padded batch) within [`ATOL`]; `label` names the checkpoint in a failure.
fn assert_goldens(ckpt: &Checkpoint, name: &str, label: &str) {
    let g = build(&ckpt.config, ckpt, Task::CausalLm, &BuildOptions::default()).unwrap();
    let ev = Evaluator::new(&g, ckpt).unwrap();
    let gold = goldens(name);
    for case in ["single", "batch"] {
        let inputs: BTreeMap<String, Tensor> = ["input_ids", "attention_mask"]
            .iter()
            .map(|k| (k.to_string(), gold[&format!("{case}.{k}")].clone()))
            .collect();
        let out = ev.run(&inputs).unwrap();
        let (d, at) =
            worst_unpadded(&out["logits"], &gold[&format!("{case}.logits")], &inputs["attention_mask"]).unwrap();
        assert!(d <= ATOL, "{label} {case}: worst |diff| {d:e} at {at:?}");
    }
}

/// A multimodal checkpoint made from a text fixture: the fixture, the class, the text config's
/// `model_type`, the top-level config, the text roots to store it under, tensors beside it.
type MultimodalCase =
    (&'static str, &'static str, &'static str, serde_json::Value, &'static [&'static str], &'static [&'static str]);

/// The text model inside a multimodal checkpoint (config in `text_config`, tensors under its
/// text roots, a vision tower beside them) is the text fixture's model: the same logits.
/// Gemma 3 (`Gemma3ForConditionalGeneration`: `language_model.model.` or
/// `model.language_model.`) and Qwen3.5 and Qwen3.5-MoE (`Qwen3_5ForConditionalGeneration`,
/// `Qwen3_5MoeForConditionalGeneration`: `model.language_model.`, with the multi-token-prediction
/// head `mtp.` beside it), Llama 4 (`Llama4ForConditionalGeneration`: `language_model.model.`
/// and `language_model.lm_head`) and Gemma 4 (`Gemma4ForConditionalGeneration`:
/// `model.language_model.`, vision and audio towers beside it, whose media placeholder tokens
/// are embedded as the padding token).
#[test]
fn the_text_model_of_a_multimodal_checkpoint_matches_transformers() {
    let cases: [MultimodalCase; 5] = [
        (
            "gemma3",
            "Gemma3ForConditionalGeneration",
            "gemma3_text",
            serde_json::json!({"model_type": "gemma3", "tie_word_embeddings": true,
                "vision_config": {"model_type": "siglip_vision_model"}}),
            &["language_model.model.", "model.language_model."],
            &["vision_tower.vision_model.embeddings.patch_embedding.weight"],
        ),
        (
            "qwen3_5",
            "Qwen3_5ForConditionalGeneration",
            "qwen3_5_text",
            serde_json::json!({"model_type": "qwen3_5", "tie_word_embeddings": false,
                "vision_config": {"model_type": "qwen3_5_vision"}}),
            &["model.language_model."],
            &["model.visual.patch_embed.proj.weight", "mtp.fc.weight"],
        ),
        (
            "qwen3_5_moe",
            "Qwen3_5MoeForConditionalGeneration",
            "qwen3_5_moe_text",
            serde_json::json!({"model_type": "qwen3_5_moe", "tie_word_embeddings": false,
                "vision_config": {"model_type": "qwen3_5_moe_vision"}}),
            &["model.language_model."],
            &["model.visual.patch_embed.proj.weight", "mtp.fc.weight"],
        ),
        (
            "llama4",
            "Llama4ForConditionalGeneration",
            "llama4_text",
            serde_json::json!({"model_type": "llama4", "vision_config": {"model_type": "llama4_vision_model"}}),
            &["language_model.model."],
            &["vision_model.patch_embedding.linear.weight", "multi_modal_projector.linear_1.weight"],
        ),
        (
            "gemma4",
            "Gemma4ForConditionalGeneration",
            "gemma4_text",
            serde_json::json!({"model_type": "gemma4", "image_token_id": 300, "audio_token_id": 301,
                "vision_config": {"model_type": "gemma4_vision"}, "audio_config": {"model_type": "gemma4_audio"}}),
            &["model.language_model."],
            &["model.vision_tower.patch_embedder.input_proj.weight", "model.embed_audio.embedding_projection.weight"],
        ),
    ];
    for (name, class, text_type, top, prefixes, extra) in cases {
        let src = fixture(name);
        let mut text: serde_json::Value =
            serde_json::from_slice(&std::fs::read(src.join("config.json")).unwrap()).unwrap();
        text.as_object_mut().unwrap().remove("architectures");
        text["model_type"] = text_type.into();
        let mut config = top.clone();
        config["architectures"] = serde_json::json!([class]);
        config["text_config"] = text;
        let tensors = read_all(src.join("model.safetensors")).unwrap();
        for prefix in prefixes {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
            // a causal LM inside the image-text model: its head beside its `model.`
            let head = if *prefix == "language_model.model." { "language_model.lm_head." } else { "lm_head." };
            let rename = |k: &str| k.replacen("model.", prefix, 1).replacen("lm_head.", head, 1);
            let renamed: Vec<(String, &Tensor)> = tensors.iter().map(|(k, t)| (rename(k), t)).collect();
            let other = Tensor::f32(vec![2, 2], vec![1.0; 4]).unwrap();
            let mut list: Vec<(&str, &Tensor)> = renamed.iter().map(|(k, t)| (k.as_str(), *t)).collect();
            list.extend(extra.iter().map(|k| (*k, &other)));
            hfexport_models::safetensors::write_safetensors(
                dir.path().join("model.safetensors"),
                &list,
                &BTreeMap::new(),
            )
            .unwrap();
            let ckpt = Checkpoint::open(dir.path()).unwrap();
            assert_eq!(ckpt.config.architecture, class);
            // an export says the vision tower is left out
            let exporter = hfexport::AutoHfExporter::from_config(
                hfexport::AutoExportConfig::from_dict(&serde_json::json!({"export_format": "onnx"})).unwrap(),
            )
            .unwrap();
            let req = causal_lm_request(dir.path(), &dir.path().join("out"), None);
            let notes = exporter.plan(&req, &ckpt).unwrap().notes;
            assert!(notes.iter().any(|n| n.contains("only its text model is exported")), "{class}: {notes:?}");
            assert_goldens(&ckpt, name, &format!("{class} {prefix}"));
            if !ckpt.config.placeholder_ids.is_empty() {
                assert_placeholders_embed_as_padding(&ckpt, class);
            }
        }
    }
}

/// A media placeholder without its media gives the logits of the padding token in its place
/// (the placeholders are past the vocabulary here: looked up as themselves, they would fail).
fn assert_placeholders_embed_as_padding(ckpt: &Checkpoint, class: &str) {
    let g = build(&ckpt.config, ckpt, Task::CausalLm, &BuildOptions::default()).unwrap();
    let ev = Evaluator::new(&g, ckpt).unwrap();
    let pad = ckpt.config.pad_token_id.unwrap_or(0);
    let logits = |ids: Vec<i64>| {
        let n = ids.len();
        let inputs = BTreeMap::from([
            ("input_ids".to_string(), Tensor::i64(vec![1, n], ids).unwrap()),
            ("attention_mask".to_string(), Tensor::i64(vec![1, n], vec![1; n]).unwrap()),
        ]);
        ev.run(&inputs).unwrap().remove("logits").unwrap()
    };
    let (p, q) = (ckpt.config.placeholder_ids[0], ckpt.config.placeholder_ids[1]);
    let with = logits(vec![3, p, 11, q, 5]);
    assert_eq!(with, logits(vec![3, pad, 11, pad, 5]), "{class}: placeholders embed as padding");
    assert_ne!(with, logits(vec![3, 4, 11, 4, 5]), "{class}: the check can fail");
}

/// Qwen3.5-MoE's experts as transformers 5 holds them in memory (and some checkpoints store
/// them): per layer `mlp.experts.gate_up_proj` `[E, 2 * inter, hidden]` (gate rows first) and
/// `mlp.experts.down_proj` `[E, hidden, inter]`, made here from the per-expert fixture: the
/// same logits.
#[test]
fn fused_experts_of_qwen3_5_moe_match_transformers() {
    let src = fixture("qwen3_5_moe");
    let tensors = read_all(src.join("model.safetensors")).unwrap();
    let expert =
        |layer: &str, e: usize, leaf: &str| tensors.get(&format!("{layer}.experts.{e}.{leaf}.weight")).cloned();
    let mut out: Vec<(String, Tensor)> = vec![];
    for (name, t) in &tensors {
        if name.contains(".experts.") {
            continue;
        }
        out.push((name.clone(), t.clone()));
    }
    let layers: std::collections::BTreeSet<String> =
        tensors.keys().filter_map(|k| k.split_once(".experts.").map(|(layer, _)| layer.to_string())).collect();
    assert!(!layers.is_empty(), "the fixture stores experts one by one");
    for layer in layers {
        let (mut gate_up, mut down, mut shape) = (vec![], vec![], (0, 0, 0));
        let mut e = 0;
        while let (Some(g), Some(u), Some(d)) =
            (expert(&layer, e, "gate_proj"), expert(&layer, e, "up_proj"), expert(&layer, e, "down_proj"))
        {
            let (inter, hidden) = (g.shape()[0], g.shape()[1]);
            shape = (e + 1, inter, hidden);
            gate_up.extend_from_slice(g.as_f32().unwrap());
            gate_up.extend_from_slice(u.as_f32().unwrap());
            down.extend_from_slice(d.as_f32().unwrap());
            e += 1;
        }
        let (n, inter, hidden) = shape;
        out.push((format!("{layer}.experts.gate_up_proj"), Tensor::f32(vec![n, 2 * inter, hidden], gate_up).unwrap()));
        out.push((format!("{layer}.experts.down_proj"), Tensor::f32(vec![n, hidden, inter], down).unwrap()));
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(src.join("config.json"), dir.path().join("config.json")).unwrap();
    let list: Vec<(&str, &Tensor)> = out.iter().map(|(k, t)| (k.as_str(), t)).collect();
    hfexport_models::safetensors::write_safetensors(dir.path().join("model.safetensors"), &list, &BTreeMap::new())
        .unwrap();
    assert_goldens(&Checkpoint::open(dir.path()).unwrap(), "qwen3_5_moe", "fused experts");
}
