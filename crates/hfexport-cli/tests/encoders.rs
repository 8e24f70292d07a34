//! Encoder checkpoints (BERT, RoBERTa, XLM-RoBERTa and their task heads) end to end through the
//! binary: `run` on the checkpoint (the reference evaluator) reproduces transformers' outputs at
//! 1e-4, and each format's export, checked with `--verify`, reproduces them at 1e-3 in its
//! runtime through `run` (ONNX Runtime, OpenVINO, libtorch, ExecuTorch), padded rows included.
//! sentence-transformers folders (`--task sentence-embedding`: pooling and normalisation in the
//! graph) reproduce `SentenceTransformer`'s own forward the same way, and raw-audio encoders
//! (wav2vec2, HuBERT) transformers' over clips of their own length; image-text dual encoders
//! (CLIP) reproduce `CLIPModel`'s zero-shot outputs and its towers' features. A task the
//! checkpoint cannot do is a clear error.

mod common;

use common::*;
use hfexport_core::{DType, Tensor};
use hfexport_models::safetensors::{read_all, write_safetensors};
use std::collections::BTreeMap;
use std::path::Path;

const INPUTS: [&str; 5] = ["input_ids", "attention_mask", "token_type_ids", "pixel_values", "input_values"];

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Row `r` of a `[batch, ...]` tensor, as a batch of one.
fn row(t: &Tensor, r: usize) -> Tensor {
    let shape = t.shape();
    let per: usize = shape[1..].iter().product();
    let mut one = shape.to_vec();
    one[0] = 1;
    match t.dtype() {
        DType::I64 => Tensor::int(DType::I64, one, t.as_i64().unwrap()[r * per..(r + 1) * per].to_vec()).unwrap(),
        _ => Tensor::float(DType::F32, one, t.as_f32().unwrap()[r * per..(r + 1) * per].to_vec()).unwrap(),
    }
}

/// `run PATH` on `inputs` (`--task TASK`, read for a checkpoint); the outputs by name.
fn run(tmp: &Path, tag: &str, path: &Path, task: &str, inputs: &BTreeMap<String, Tensor>) -> BTreeMap<String, Tensor> {
    let inp = tmp.join(format!("{tag}-in.safetensors"));
    let feeds: Vec<(&str, &Tensor)> = inputs.iter().map(|(k, v)| (k.as_str(), v)).collect();
    write_safetensors(&inp, &feeds, &BTreeMap::new()).unwrap();
    let out = tmp.join(format!("{tag}-out.safetensors"));
    let run = hfexport_here(&["run", s(path), "--task", task, "--inputs", s(&inp), "--outputs", s(&out)]);
    run.unwrap_or_else(|e| panic!("{tag}: run failed: {e}"));
    read_all(&out).unwrap()
}

/// Worst |ours - theirs| over the positions the mask keeps (outputs `[batch, seq, ...]`), or
/// everywhere (pooled outputs `[batch, ...]`, image encoders).
fn worst(ours: &Tensor, theirs: &Tensor, mask: Option<&Tensor>) -> f32 {
    assert_eq!(ours.shape(), theirs.shape());
    let (o, t) = (ours.as_f32().unwrap(), theirs.as_f32().unwrap());
    let m = mask.map_or(&[][..], |m| m.as_i64().unwrap());
    let per_token = mask.is_some_and(|mask| ours.shape().len() >= 2 && ours.shape()[..2] == mask.shape()[..]);
    let width = if per_token { o.len() / m.len() } else { o.len() };
    (0..o.len()).filter(|&i| !per_token || m[i / width] != 0).map(|i| (o[i] - t[i]).abs()).fold(0f32, |w, d| {
        assert!(d.is_finite(), "non-finite difference");
        w.max(d)
    })
}

/// Checks `outputs` of case `case` (rows `rows` of the golden batch) against the goldens.
fn check(
    what: &str,
    gold: &BTreeMap<String, Tensor>,
    case: &str,
    rows: Option<usize>,
    outputs: &BTreeMap<String, Tensor>,
    tol: f32,
) {
    let golden = |k: &str| {
        let t = &gold[&format!("{case}.{k}")];
        rows.map_or_else(|| t.clone(), |r| row(t, r))
    };
    let mask = gold.contains_key(&format!("{case}.attention_mask")).then(|| golden("attention_mask"));
    let names: Vec<&String> = gold.keys().filter(|k| k.starts_with(&format!("{case}."))).collect();
    let expected: Vec<&str> = names.iter().map(|k| &k[case.len() + 1..]).filter(|k| !INPUTS.contains(k)).collect();
    assert_eq!(
        outputs.keys().map(String::as_str).collect::<Vec<_>>(),
        {
            let mut e = expected.clone();
            e.sort();
            e
        },
        "{what}: outputs"
    );
    for k in expected {
        let d = worst(&outputs[k].cast(DType::F32), &golden(k), mask.as_ref());
        assert!(d <= tol, "{what} {case} {k}: worst |diff| {d:e} > {tol:e}");
    }
}

fn golden_inputs(gold: &BTreeMap<String, Tensor>, case: &str) -> BTreeMap<String, Tensor> {
    INPUTS.iter().filter_map(|k| gold.get(&format!("{case}.{k}")).map(|t| (k.to_string(), t.clone()))).collect()
}

#[test]
fn encoders_match_transformers_in_the_evaluator_and_every_runtime() {
    require_onnxruntime();
    require_openvino();
    require_libtorch();
    require_executorch();
    let tmp = tempfile::tempdir().unwrap();
    let encoders = encoder_fixtures();
    assert!(encoders.len() >= 17, "the manifest lists the encoder fixtures: {encoders:?}");
    for (name, task) in encoders {
        let fx = fixture(name);
        let gold = read_all(fx.join("golden.safetensors")).unwrap();
        for case in ["single", "batch"] {
            let out = run(tmp.path(), &format!("{name}-{case}-ref"), &fx, task, &golden_inputs(&gold, case));
            check(&format!("{name} reference"), &gold, case, None, &out, 1e-4);
        }
        for format in ["onnx", "openvino", "dynamo", "executorch"] {
            let dir = tmp.path().join(format!("{name}-{format}"));
            let args = ["export", "--model", s(&fx), "--format", format, "--task", task, "--dynamic", "--verify"];
            let exported = hfexport_here(&[&args[..], &["--quiet", "--output", s(&dir)]].concat());
            exported.unwrap_or_else(|e| panic!("{name} {format}: {e}"));
            let meta = std::fs::read_to_string(dir.join("export.json")).unwrap();
            assert!(meta.contains(&format!("\"task\": \"{task}\"")), "{name} {format}: export.json task");
            for case in ["single", "batch"] {
                let inputs = golden_inputs(&gold, case);
                // ExecuTorch's default batch bound is 1: its rows go one at a time
                let batch = inputs.values().next().unwrap().shape()[0];
                match format {
                    "executorch" => {
                        for r in 0..batch {
                            let one: BTreeMap<_, _> = inputs.iter().map(|(k, v)| (k.clone(), row(v, r))).collect();
                            let out = run(tmp.path(), &format!("{name}-{format}-{case}-{r}"), &dir, task, &one);
                            check(&format!("{name} {format} row {r}"), &gold, case, Some(r), &out, 1e-3);
                        }
                    }
                    _ => {
                        let out = run(tmp.path(), &format!("{name}-{format}-{case}"), &dir, task, &inputs);
                        check(&format!("{name} {format}"), &gold, case, None, &out, 1e-3);
                    }
                }
            }
        }
    }
}

/// `run PATH --component COMPONENT` (`--task TASK` for a checkpoint) on `inputs`.
fn run_component(
    tmp: &Path,
    tag: &str,
    path: &Path,
    (task, component): (&str, &str),
    inputs: &BTreeMap<String, Tensor>,
) -> BTreeMap<String, Tensor> {
    let inp = tmp.join(format!("{tag}-in.safetensors"));
    let feeds: Vec<(&str, &Tensor)> = inputs.iter().map(|(k, v)| (k.as_str(), v)).collect();
    write_safetensors(&inp, &feeds, &BTreeMap::new()).unwrap();
    let out = tmp.join(format!("{tag}-out.safetensors"));
    let mut args = vec!["run", s(path), "--component", component, "--inputs", s(&inp), "--outputs", s(&out)];
    if !path.join("export.json").exists() {
        args.extend(["--task", task]);
    }
    hfexport_here(&args).unwrap_or_else(|e| panic!("{tag}: run failed: {e}"));
    read_all(&out).unwrap()
}

/// What a dual encoder's component reads of the goldens' inputs, and the prefix of its golden
/// outputs (`text_model.`): the zero-shot `model`, then the towers.
const DUAL_COMPONENTS: [(&str, &str, &[&str], &str); 3] = [
    ("zero-shot-image-classification", "model", &["input_ids", "attention_mask", "pixel_values"], ""),
    ("feature-extraction", "text_model", &["input_ids", "attention_mask"], "text_model."),
    ("feature-extraction", "vision_model", &["pixel_values"], "vision_model."),
];

/// Checks a dual encoder component's `outputs` against the goldens under `prefix`: the same
/// names, each within `tol` (text states where the mask keeps them). `pick` maps an output to
/// the golden rows it covers (a text row, an image row) when a run fed only some of them.
fn check_dual(
    what: &str,
    gold: &BTreeMap<String, Tensor>,
    (case, prefix): (&str, &str),
    outputs: &BTreeMap<String, Tensor>,
    pick: &dyn Fn(&str, &Tensor) -> Tensor,
    tol: f32,
) {
    let lead = format!("{case}.{prefix}");
    let want: Vec<&str> =
        gold.keys().filter_map(|k| k.strip_prefix(&lead)).filter(|k| !k.contains('.') && !INPUTS.contains(k)).collect();
    assert_eq!(outputs.keys().map(String::as_str).collect::<Vec<_>>(), want, "{what}: outputs");
    for (k, got) in outputs {
        let golden = pick(k, &gold[&format!("{lead}{k}")]);
        let mask = (prefix == "text_model.").then(|| pick("attention_mask", &gold[&format!("{case}.attention_mask")]));
        let d = worst(&got.cast(DType::F32), &golden, mask.as_ref());
        assert!(d <= tol, "{what} {case} {k}: worst |diff| {d:e} > {tol:e}");
    }
}

/// Element `[r, c]` of a 2-D tensor as `[1, 1]`.
fn element(t: &Tensor, r: usize, c: usize) -> Tensor {
    let cols = t.shape()[1];
    Tensor::float(DType::F32, vec![1, 1], vec![t.as_f32().unwrap()[r * cols + c]]).unwrap()
}

/// CLIP end to end: `run` on the checkpoint reproduces `CLIPModel`'s zero-shot outputs (2 texts
/// against 3 images) and each tower's features (`--task feature-extraction`: the components
/// `text_model` and `vision_model`) at 1e-4; each format's export of both tasks, checked with
/// `--verify`, reproduces them at 1e-3 in its runtime. ExecuTorch bounds the text batch to 1 by
/// default: there each text meets each image in a run of its own.
#[test]
fn dual_encoders_match_transformers_in_the_evaluator_and_every_runtime() {
    require_onnxruntime();
    require_openvino();
    require_libtorch();
    require_executorch();
    let tmp = tempfile::tempdir().unwrap();
    let duals = dual_fixtures();
    assert!(duals.len() >= 2, "the manifest lists the dual encoder fixtures: {duals:?}");
    let all = |_: &str, t: &Tensor| t.clone();
    for name in duals {
        let fx = fixture(name);
        let gold = read_all(fx.join("golden.safetensors")).unwrap();
        let inputs = |case: &str, names: &[&str]| -> BTreeMap<String, Tensor> {
            names.iter().map(|k| (k.to_string(), gold[&format!("{case}.{k}")].clone())).collect()
        };
        for case in ["single", "batch"] {
            for (task, component, names, prefix) in DUAL_COMPONENTS {
                let tag = format!("{name}-{component}-{case}-ref");
                let out = run_component(tmp.path(), &tag, &fx, (task, component), &inputs(case, names));
                check_dual(&format!("{name} reference"), &gold, (case, prefix), &out, &all, 1e-4);
            }
        }
        for format in ["onnx", "openvino", "dynamo", "executorch"] {
            for task in ["zero-shot-image-classification", "feature-extraction"] {
                let dir = tmp.path().join(format!("{name}-{format}-{task}"));
                let args = ["export", "--model", s(&fx), "--format", format, "--task", task];
                let exported =
                    hfexport_here(&[&args[..], &["--dynamic", "--verify", "--quiet", "--output", s(&dir)]].concat());
                exported.unwrap_or_else(|e| panic!("{name} {format} {task}: {e}"));
            }
            for case in ["single", "batch"] {
                for (task, component, names, prefix) in DUAL_COMPONENTS {
                    let dir = tmp.path().join(format!("{name}-{format}-{task}"));
                    let what = format!("{name} {format} {component}");
                    let tag = format!("{name}-{format}-{component}-{case}");
                    if format != "executorch" {
                        let out = run_component(tmp.path(), &tag, &dir, (task, component), &inputs(case, names));
                        check_dual(&what, &gold, (case, prefix), &out, &all, 1e-3);
                        continue;
                    }
                    let (texts, images) = (
                        gold[&format!("{case}.input_ids")].shape()[0],
                        gold[&format!("{case}.pixel_values")].shape()[0],
                    );
                    let pairs: Vec<(usize, usize)> = match component {
                        "model" => (0..texts).flat_map(|r| (0..images).map(move |j| (r, j))).collect(),
                        "text_model" => (0..texts).map(|r| (r, 0)).collect(),
                        _ => (0..images).map(|j| (0, j)).collect(),
                    };
                    for (r, j) in pairs {
                        let fed: BTreeMap<String, Tensor> = inputs(case, names)
                            .into_iter()
                            .map(|(k, v)| {
                                let at = if k == "pixel_values" { j } else { r };
                                (k, row(&v, at))
                            })
                            .collect();
                        let out = run_component(tmp.path(), &format!("{tag}-{r}-{j}"), &dir, (task, component), &fed);
                        let pick = |k: &str, t: &Tensor| match k {
                            "logits_per_text" => element(t, r, j),
                            "logits_per_image" => element(t, j, r),
                            "image_embeds" => row(t, j),
                            "last_hidden_state" if component == "vision_model" => row(t, j),
                            _ => row(t, r),
                        };
                        check_dual(&format!("{what} text {r} image {j}"), &gold, (case, prefix), &out, &pick, 1e-3);
                    }
                }
            }
        }
    }
}

/// A task the checkpoint's family or weights cannot do, or a generation export of an encoder:
/// errors naming what is wrong, and nothing written.
#[test]
fn tasks_an_encoder_cannot_do_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let export = |model: &str, extra: &[&str]| {
        let fx = fixture(model);
        let mut args = vec!["export", "--model", s(&fx), "--format", "onnx", "--output", s(&out)];
        args.extend_from_slice(extra);
        hfexport(&args)
    };
    let o = export("bert", &["--task", "causal-lm"]);
    assert!(
        stderr(&o).contains("BertModel cannot do the task `causal-lm`") && stderr(&o).contains("fill-mask"),
        "{}",
        stderr(&o)
    );
    // sentence embeddings need sentence-transformers' modules.json, and a token input
    let o = export("bert", &["--task", "sentence-embedding"]);
    assert!(stderr(&o).contains("modules.json") && stderr(&o).contains("sentence-transformers"), "{}", stderr(&o));
    let o = export("vit", &["--task", "sentence-embedding"]);
    assert!(stderr(&o).contains("ViTModel cannot do the task `sentence-embedding`"), "{}", stderr(&o));
    let o = export("bert_cls", &["--task", "question-answering"]);
    assert!(stderr(&o).contains("qa_outputs.weight"), "{}", stderr(&o));
    let o = export("qwen3", &["--task", "fill-mask"]);
    assert!(
        stderr(&o).contains("Qwen3ForCausalLM cannot do the task `fill-mask`") && stderr(&o).contains("causal-lm"),
        "{}",
        stderr(&o)
    );
    let o = export("clip", &["--task", "fill-mask"]);
    let said = stderr(&o);
    assert!(
        said.contains(
            "CLIPModel cannot do the task `fill-mask`; valid: feature-extraction, zero-shot-image-classification"
        ),
        "{said}"
    );
    // a dual encoder's towers are components of their own
    let ids = Tensor::i64(vec![1, 3], vec![5, 6, 98]).unwrap();
    let o = {
        let inp = tmp.path().join("ids.safetensors");
        write_safetensors(&inp, &[("input_ids", &ids)], &BTreeMap::new()).unwrap();
        let res = tmp.path().join("res.safetensors");
        hfexport(&[
            "run",
            s(&fixture("clip")),
            "--task",
            "feature-extraction",
            "--inputs",
            s(&inp),
            "--outputs",
            s(&res),
        ])
    };
    let said = stderr(&o);
    assert!(
        said.contains("components for `feature-extraction` are `text_model`, `vision_model`; got `model`"),
        "{said}"
    );
    // a raw-audio encoder: its own tasks, the CTC head only where stored, one forward graph
    let o = export("wav2vec2_ctc", &["--task", "fill-mask"]);
    let said = stderr(&o);
    assert!(
        said.contains(
            "Wav2Vec2ForCTC cannot do the task `fill-mask`; valid: feature-extraction, sequence-classification, \
             automatic-speech-recognition"
        ),
        "{said}"
    );
    let o = export("wav2vec2_stable", &["--task", "automatic-speech-recognition"]);
    assert!(stderr(&o).contains("tensor `lm_head.weight` not found"), "{}", stderr(&o));
    let o = export("wav2vec2_ctc", &["--for-generation", "--dynamic"]);
    assert!(stderr(&o).contains("the task here is `automatic-speech-recognition`"), "{}", stderr(&o));
    let o = export("vit_cls", &["--task", "fill-mask"]);
    let said = stderr(&o);
    assert!(said.contains("cannot do the task `fill-mask`; valid: feature-extraction, image-classification"), "{said}");
    // an unknown task is refused listing every task (`--help` lists the same)
    let o = export("bert_mlm", &["--task", "summarization"]);
    let said = stderr(&o);
    assert!(said.contains("invalid value 'summarization' for '--task <TASK>'"), "{said}");
    for task in hfexport::Task::ALL {
        assert!(said.contains(task.name()), "{said}");
    }
    let help = String::from_utf8_lossy(&hfexport(&["export", "--help"]).stdout).into_owned();
    assert!(hfexport::Task::ALL.iter().all(|t| help.contains(t.name())), "{help}");
    let o = export("bert_mlm", &["--for-generation", "--dynamic"]);
    assert!(stderr(&o).contains("the task here is `fill-mask`"), "{}", stderr(&o));
    assert!(!out.exists());
    // a bare encoder checkpoint exports feature extraction; the MLM checkpoint's encoder too
    let o = export("bert_mlm", &["--task", "feature-extraction"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let meta = std::fs::read_to_string(out.join("export.json")).unwrap();
    assert!(
        meta.contains("last_hidden_state") && !meta.contains("pooler_output"),
        "no pooler in a masked-LM checkpoint"
    );
}

/// A CTC model (wav2vec2) over a WAV: `run --audio` on the checkpoint and on every format's
/// export, and `generate --audio` on the exports, print transformers' greedy transcript (the ids
/// and the text `processor.batch_decode` gives, from `tests/python/ctc_audio.py`); a WAV of
/// another rate is an error naming it.
#[test]
fn ctc_models_transcribe_a_wav_like_transformers_in_every_runtime() {
    require_onnxruntime();
    require_openvino();
    require_libtorch();
    require_executorch();
    let tmp = tempfile::tempdir().unwrap();
    let audio = tmp.path().join("audio");
    let fx = fixture("wav2vec2_ctc");
    let o = std::process::Command::new(python())
        .arg(script("ctc_audio.py"))
        .arg(&audio)
        .arg(&fx)
        .output()
        .expect("start python");
    assert!(o.status.success(), "ctc_audio.py failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(audio.join("transcript.json")).unwrap()).unwrap();
    let ids: Vec<i64> = golden["ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    let text = golden["text"].as_str().unwrap();
    assert!(ids.len() > 10 && !text.is_empty(), "a transcript worth comparing: {golden}");
    let expected = [format!("transcript ids, row 0 (CTC greedy): {ids:?}"), format!("transcript, row 0: {text:?}")];
    let wav = audio.join("speech.wav");
    let said = |what: &str, o: &std::process::Output| {
        assert!(o.status.success(), "{what}: {}", stderr(o));
        let out = stdout(o);
        for line in &expected {
            assert!(out.lines().any(|l| l == line), "{what}: no line `{line}` in:\n{out}");
        }
    };
    let res = tmp.path().join("out.safetensors");
    said("reference", &hfexport(&["run", s(&fx), "--audio", s(&wav), "--outputs", s(&res)]));
    for format in ["onnx", "openvino", "dynamo", "executorch"] {
        let dir = tmp.path().join(format);
        let o = hfexport(&["export", "--model", s(&fx), "--format", format, "--dynamic", "--output", s(&dir)]);
        assert!(o.status.success(), "{format}: {}", stderr(&o));
        said(&format!("{format} run"), &hfexport(&["run", s(&dir), "--audio", s(&wav), "--outputs", s(&res)]));
        said(&format!("{format} generate"), &hfexport(&["generate", s(&dir), "--audio", s(&wav)]));
    }
    let o = hfexport(&["run", s(&fx), "--audio", s(&audio.join("rate8k.wav")), "--outputs", s(&res)]);
    assert!(!o.status.success() && stderr(&o).contains("rate8k.wav: the audio is 8000 Hz"), "{}", stderr(&o));
    let o = hfexport(&["generate", s(&tmp.path().join("onnx")), "--prompt", "hi"]);
    assert!(stderr(&o).contains("this export transcribes speech: give it with --audio"), "{}", stderr(&o));
}
