//! The client libraries users already run, over hfexport's folders as they are (README,
//! "Client libraries"): sentence-transformers' onnx and openvino backends and fastembed over
//! exported sentence-transformers folders (random ones the client's own sentence-transformers
//! makes: encoders, pooling modes, Dense modules, Normalize; and the committed `bert_st`),
//! optimum's ONNX Runtime and OpenVINO model classes over exported fixtures of each task, and
//! the causal-LM `generate` of optimum-intel's `OVModelForCausalLM` (stateful), optimum's
//! `ORTModelForCausalLM` and transformers.js (node, `tests/js/`) over growing-cache generation
//! exports (transformers' greedy tokens for one prompt, a left-padded batch of two and, but in
//! transformers.js, two beams, `tests/python/batched_generation.py` in the oracle's venv), and
//! the encoder-decoder `generate` of optimum's `ORTModelForSeq2SeqLM` /
//! `ORTModelForSpeechSeq2Seq`, optimum-intel's `OVModelForSeq2SeqLM` / `OVModelForSpeechSeq2Seq`
//! (stateful) and transformers.js over growing-cache encoder-decoder exports
//! (transformers' tokens of the same call, `batched_generation.py --seq2seq` in the oracle's
//! venv), and optimum-executorch's `ExecuTorchModelForCausalLM` and ExecuTorch's own LLM runner
//! (`TextLLMRunner`) over default `.pte` generation exports (the LLM-runner layout).
//! Every check compares with the client's own reference: `SentenceTransformer(checkpoint)`,
//! or transformers' goldens of the fixtures.
//!
//! The clients live in their own venv (`HFEXPORT_CLIENTS_PYTHON`, `.venv/clients/`):
//! optimum-onnx 0.1.0 requires transformers < 4.58, sentence-transformers 6 requires 5. The
//! ExecuTorch clients run in the test venv (optimum-executorch needs transformers 5).

mod common;

use common::{clients_python, fixture, python, script, seq2seq_fixtures};
use hfexport::{AutoExportConfig, AutoHfExporter, DType, ExportRequest, Generation};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

/// The widest difference a client's output may have from its reference (float32 everywhere;
/// OpenVINO asked for f32 inference).
const TOLERANCE: f64 = 1e-4;

/// Fixtures optimum's model classes load, with the task of their goldens.
const OPTIMUM_FIXTURES: [(&str, &str); 3] =
    [("bert", "feature-extraction"), ("roberta_cls", "sequence-classification"), ("vit_cls", "image-classification")];

/// Decoder fixtures optimum-intel's `OVModelForCausalLM` generates with, over a stateful
/// growing-cache export: rotary and learned positions (GPT-2, OPT), sliding windows (Gemma 2,
/// Mistral), Llama 4's chunks and NoPE layers, GPT-NeoX's partial rotary.
const GENERATION_FIXTURES: [&str; 9] =
    ["llama", "qwen3", "gemma2", "phi3", "gpt2", "opt", "mistral", "llama4", "gpt_neox"];

/// The generation fixtures whose empty past optimum-onnx 0.1.0's `ORTModelForCausalLM` sizes
/// right: it takes the head size as `hidden_size / num_attention_heads` except for a few model
/// types, and the KV heads from `num_key_value_heads` only for a listed few, so it feeds the
/// first call a past of the wrong shape for the others (Qwen3's `head_dim` 24, Gemma 2's and
/// Phi-3's grouped heads), whatever exported the graph.
const ORT_CAUSAL_LM_FIXTURES: [&str; 4] = ["llama", "gpt2", "opt", "gpt_neox"];

/// The generation fixtures OpenVINO GenAI's `LLMPipeline` runs: all but the one naming no EOS,
/// which GenAI refuses (the `qwen3` fixture: "stop_token_ids must be non-negative"). Its
/// PagedAttention conversion finds Mistral's window of 4 from the mask's form (the lowering's
/// `paged_window_mask`).
const GENAI_FIXTURES: [&str; 8] = ["llama", "gemma2", "phi3", "gpt2", "opt", "mistral", "llama4", "gpt_neox"];

/// Encoder-decoder fixtures transformers.js generates with (the model types it maps: not
/// Pegasus), over the growing-cache layout (`encoder_model.onnx`, `decoder_model_merged.onnx`);
/// it sizes their empty pasts from the graph's own inputs, so head counts that differ between
/// the sides (as in these fixtures) are no obstacle.
const SEQ2SEQ_JS_FIXTURES: [&str; 7] = ["t5", "t5_gated", "bart", "mbart", "marian", "m2m100", "whisper"];

/// The encoder-decoder fixtures optimum-onnx 0.1.0's seq2seq classes size right: it makes the
/// first call's empty pasts `[batch, num_attention_heads, 0, hidden_size / num_attention_heads]`
/// from config.json, the encoder's head count for both sides (the other fixtures have fewer
/// decoder heads; `clients.py make` adds Whisper and BART with equal ones) and the width's share
/// for T5's `d_kv` (`t5_gated`'s is not). optimum-intel's classes run every encoder-decoder
/// fixture: a stateful decode starts from its own empty states.
const SEQ2SEQ_OPTIMUM_FIXTURES: [&str; 1] = ["t5"];

fn export(model: &Path, format: &str, out: &Path, generation: Option<Generation>) {
    export_with(model, json!({"export_format": format, "dynamic": true}), out, generation)
}

fn export_with(model: &Path, config: Value, out: &Path, generation: Option<Generation>) {
    let format = config["export_format"].clone();
    let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(&config).unwrap()).unwrap();
    let req = ExportRequest {
        model: model.to_path_buf(),
        output: out.to_path_buf(),
        task: None,
        dtype: DType::F32,
        force: false,
        generation,
    };
    if let Err(e) = exporter.export(&req, &mut |_| {}) {
        panic!("exporting {} to {format}: {e}", model.display());
    }
}

fn run_clients(args: &[&std::ffi::OsStr]) -> String {
    let o = Command::new(clients_python()).arg(script("clients.py")).args(args).output().expect("start python");
    assert!(o.status.success(), "clients.py {args:?} failed:\n{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn client_libraries_give_their_own_outputs_over_our_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let made = tmp.path().join("checkpoints");
    run_clients(&["make".as_ref(), made.as_os_str()]);
    let index: Value = serde_json::from_slice(&std::fs::read(made.join("index.json")).unwrap()).unwrap();
    let mut folders: Vec<Value> = index["cases"].as_array().unwrap().clone();
    // fastembed refuses the committed bert_st's tokenizer itself (its `model_max_length` is
    // transformers' 1e30 for "none", which fastembed takes for no limit at all), checkpoint or export
    folders.push(json!({"name": "bert_st", "dir": fixture("bert_st"), "pooling": ["mean"], "dense": 0,
                        "normalize": true, "dim": 32, "description": "the committed bert_st", "fastembed": false}));

    let mut plan = vec![];
    for case in &folders {
        let name = case["name"].as_str().unwrap();
        let checkpoint = Path::new(case["dir"].as_str().unwrap());
        for format in ["onnx", "openvino"] {
            let out = tmp.path().join("exports").join(format!("{name}-{format}"));
            export(checkpoint, format, &out, None);
            let mut check = case.clone();
            check["checkpoint"] = json!(checkpoint);
            check["export"] = json!(out);
            check["format"] = json!(format);
            check["client"] = json!("sentence-transformers");
            check["name"] = json!(format!("{name} {format}"));
            plan.push(check.clone());
            if format == "onnx" && case["fastembed"] != json!(false) {
                check["client"] = json!("fastembed");
                plan.push(check);
            }
        }
    }
    for (name, task) in OPTIMUM_FIXTURES {
        for format in ["onnx", "openvino"] {
            let out = tmp.path().join("exports").join(format!("{name}-{format}"));
            export(&fixture(name), format, &out, None);
            plan.push(json!({"name": format!("{name} {format}"), "client": "optimum", "checkpoint": fixture(name),
                             "export": out, "format": format, "task": task, "description": task}));
        }
    }
    // transformers' own generate over a left-padded batch and with beams, in the oracle's venv
    let reference = tmp.path().join("batched_generation.json");
    let mut oracle = Command::new(python());
    oracle.arg(script("batched_generation.py")).arg(&reference);
    let o = oracle.args(GENERATION_FIXTURES.map(fixture)).output().expect("start python");
    assert!(o.status.success(), "batched_generation.py failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let growing = Some(Generation { static_cache: None, multi_token_decode: false });
    let greedy = "greedy tokens: 16 of one prompt, 8 of a left-padded batch of two, 8 with two beams";
    for name in GENERATION_FIXTURES {
        for format in ["openvino", "onnx"] {
            let out = tmp.path().join("exports").join(format!("{name}-{format}-generation"));
            export(&fixture(name), format, &out, growing);
            let case = json!({"name": format!("{name} {format} generation"), "checkpoint": fixture(name),
                              "export": out, "format": format, "reference": reference});
            let mut with = |client: &str, description: &str| {
                let mut check = case.clone();
                check["client"] = json!(client);
                check["description"] = json!(description);
                plan.push(check);
            };
            match format {
                "onnx" => {
                    with("transformers.js", "greedy tokens: 16 of one prompt, 8 of a left-padded batch of two");
                    if ORT_CAUSAL_LM_FIXTURES.contains(&name) {
                        with("optimum-generate", greedy);
                    }
                }
                _ => {
                    with("optimum-generate", greedy);
                    if GENAI_FIXTURES.contains(&name) {
                        with("openvino-genai", "greedy tokens: 16 of one prompt, 8 of a left-padded batch of two");
                    }
                }
            }
        }
    }
    // encoder-decoders: the clients' encoder and merged decoder, from our growing-cache exports
    let made = index["seq2seq"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), Path::new(c["dir"].as_str().unwrap()).to_path_buf()));
    let committed = seq2seq_fixtures().into_iter().map(|n| (n.to_string(), fixture(n)));
    let seq2seq: Vec<_> = made.chain(committed).collect();
    // transformers' generate of each, in the oracle's venv
    let reference = tmp.path().join("seq2seq_generation.json");
    let mut oracle = Command::new(python());
    oracle.arg(script("batched_generation.py")).arg("--seq2seq").arg(&reference);
    let o = oracle.args(seq2seq.iter().map(|(_, dir)| dir)).output().expect("start python");
    assert!(o.status.success(), "batched_generation.py --seq2seq failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let description =
        "transformers' generate: a padded batch of two texts (and two beams in optimum) or a speech clip, \
                       8 new tokens";
    for (name, checkpoint) in seq2seq {
        let fixture_name = name.as_str();
        let committed = !name.ends_with("_same_heads");
        for format in ["onnx", "openvino"] {
            let out = tmp.path().join("exports").join(format!("{name}-{format}-seq2seq"));
            export(&checkpoint, format, &out, growing);
            let clients: Vec<&str> = match format {
                "onnx" => [
                    ("transformers.js-seq2seq", !committed || SEQ2SEQ_JS_FIXTURES.contains(&fixture_name)),
                    ("optimum-seq2seq", !committed || SEQ2SEQ_OPTIMUM_FIXTURES.contains(&fixture_name)),
                ]
                .into_iter()
                .filter_map(|(c, runs)| runs.then_some(c))
                .collect(),
                _ => vec!["optimum-seq2seq"],
            };
            for client in clients {
                plan.push(json!({"name": format!("{name} {format} generation"), "checkpoint": checkpoint,
                                 "export": out, "format": format, "reference": reference, "client": client,
                                 "description": description}));
            }
        }
    }
    // an int4 graph is `onnx/model_q4.onnx`, transformers.js's `dtype: "q4"`
    for name in ["llama", "qwen3"] {
        let out = tmp.path().join("exports").join(format!("{name}-onnx-q4"));
        export_with(
            &fixture(name),
            json!({"export_format": "onnx", "dynamic": true, "quantizer": "int4"}),
            &out,
            growing,
        );
        plan.push(json!({"name": format!("{name} onnx int4 generation"), "client": "transformers.js", "dtype": "q4",
                         "checkpoint": fixture(name), "export": out, "format": "onnx",
                         "description": "16 greedy tokens of one prompt, as onnxruntime's own loop over the file"}));
    }
    // ExecuTorch's LLM-runner layout, the default `.pte` generation export: optimum-executorch
    // (transformers 5, so in the test venv) and ExecuTorch's own runner
    let mut executorch = vec![];
    for name in GENERATION_FIXTURES {
        let out = tmp.path().join("exports").join(format!("{name}-executorch-generation"));
        export(&fixture(name), "executorch", &out, growing);
        executorch.push(json!({"name": format!("{name} executorch generation"), "client": "optimum-executorch",
                               "checkpoint": fixture(name), "export": out, "format": "executorch",
                               "description": "greedy tokens of one prompt: 16, or up to the EOS optimum stops at"}));
    }
    let byte_level = Path::new(index["byte_level"]["dir"].as_str().unwrap());
    let out = tmp.path().join("exports").join("llama_byte_level-executorch-generation");
    export(byte_level, "executorch", &out, growing);
    executorch.push(json!({"name": "llama_byte_level executorch generation", "client": "executorch-runner",
                           "checkpoint": byte_level, "export": out, "format": "executorch",
                           "description": "greedy pieces of a text prompt up to the EOS, with the tokenizer.json \
                                           the export carries"}));
    let plan_file = tmp.path().join("plan.json");
    std::fs::write(&plan_file, serde_json::to_vec_pretty(&plan).unwrap()).unwrap();
    let mut failures = results(&plan, &run_clients(&["check".as_ref(), plan_file.as_os_str()]));
    let plan_file = tmp.path().join("executorch-plan.json");
    std::fs::write(&plan_file, serde_json::to_vec_pretty(&executorch).unwrap()).unwrap();
    let o =
        Command::new(python()).arg(script("clients.py")).arg("check").arg(&plan_file).output().expect("start python");
    assert!(o.status.success(), "clients.py check (test venv) failed:\n{}", String::from_utf8_lossy(&o.stderr));
    failures.extend(results(&executorch, &String::from_utf8(o.stdout).unwrap()));
    let total = plan.len() + executorch.len();
    assert!(failures.is_empty(), "{} of {total} client checks failed:\n{}", failures.len(), failures.join("\n"));
}

/// The failures among `plan`'s checks, from what `clients.py check` printed (one line each).
fn results(plan: &[Value], stdout: &str) -> Vec<String> {
    let lines: Vec<Value> = stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(lines.len(), plan.len(), "one result per check expected; clients.py printed:\n{stdout}");
    let mut failures = vec![];
    for (check, line) in plan.iter().zip(&lines) {
        let what = format!("{} in {} ({})", check["name"], check["client"], check["description"]);
        match (line["worst"].as_f64(), line["error"].as_str()) {
            (Some(w), _) if w <= TOLERANCE => println!("{what}: worst {w:.2e}"),
            (Some(w), _) => failures.push(format!("{what}: worst difference {w:.2e} > {TOLERANCE:.0e}")),
            (None, e) => failures.push(format!("{what} failed:\n{}", e.unwrap_or("no result"))),
        }
    }
    failures
}
