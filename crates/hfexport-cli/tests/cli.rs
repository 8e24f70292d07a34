//! The `hfexport` binary end to end: `run` reproduces transformers' logits through files any
//! tool can read, `inspect` describes a checkpoint, and bad input is a clear error, not a panic.

use hfexport_core::Tensor;
use hfexport_models::safetensors::{read_all, write_safetensors};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{fixture, fixtures};

fn hfexport(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hfexport")).args(args).output().expect("run hfexport")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes `case.input_ids` / `case.attention_mask` of a fixture's goldens as a run input file.
fn golden_inputs(name: &str, case: &str, dir: &Path) -> (PathBuf, BTreeMap<String, Tensor>) {
    let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
    let ids = &gold[&format!("{case}.input_ids")];
    let mask = &gold[&format!("{case}.attention_mask")];
    let path = dir.join(format!("{name}-{case}-in.safetensors"));
    write_safetensors(&path, &[("input_ids", ids), ("attention_mask", mask)], &BTreeMap::new()).unwrap();
    (path, gold)
}

#[test]
fn run_reproduces_transformers_logits() {
    let tmp = tempfile::tempdir().unwrap();
    for name in fixtures() {
        for case in ["single", "batch"] {
            let (inp, gold) = golden_inputs(name, case, tmp.path());
            let out = tmp.path().join(format!("{name}-{case}-out.safetensors"));
            let o = hfexport(&[
                "run",
                fixture(name).to_str().unwrap(),
                "--inputs",
                inp.to_str().unwrap(),
                "--outputs",
                out.to_str().unwrap(),
            ]);
            assert!(o.status.success(), "{name} {case}: {}", stderr(&o));
            let got = read_all(&out).unwrap();
            let (ours, theirs) = (got["logits"].as_f32().unwrap(), gold[&format!("{case}.logits")].as_f32().unwrap());
            let mask = gold[&format!("{case}.attention_mask")].as_i64().unwrap();
            let vocab = *got["logits"].shape().last().unwrap();
            let worst = (0..ours.len())
                .filter(|i| mask[i / vocab] != 0)
                .map(|i| (ours[i] - theirs[i]).abs())
                .fold(0f32, f32::max);
            assert!(worst <= 1e-4, "{name} {case}: worst |diff| {worst:e}");
        }
    }
}

/// The output file is plain safetensors: Python's `safetensors` reads it back.
#[test]
fn run_output_is_read_by_python_safetensors() {
    let python = std::env::var("HFEXPORT_PYTHON").unwrap_or_else(|_| {
        panic!("HFEXPORT_PYTHON is not set: run the suite with `cargo xtask test` (it creates .venv/ with the pinned safetensors and numpy)")
    });
    let tmp = tempfile::tempdir().unwrap();
    let (inp, _) = golden_inputs("llama", "batch", tmp.path());
    let out = tmp.path().join("out.safetensors");
    let o = hfexport(&[
        "run",
        fixture("llama").to_str().unwrap(),
        "--inputs",
        inp.to_str().unwrap(),
        "--outputs",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let script = "import sys; from safetensors.numpy import load_file; t = load_file(sys.argv[1])['logits']; print(t.dtype, t.shape, float(t[1, -1].max()))";
    let py = Command::new(&python).args(["-c", script, out.to_str().unwrap()]).output().expect("run python");
    assert!(py.status.success(), "python failed: {}", String::from_utf8_lossy(&py.stderr));
    let printed = String::from_utf8_lossy(&py.stdout);
    let ours = read_all(&out).unwrap();
    let l = ours["logits"].as_f32().unwrap();
    let row_max = l[(7 + 6) * 256..(7 + 7) * 256].iter().copied().fold(f32::MIN, f32::max);
    assert!(printed.starts_with("float32 (2, 7, 256)"), "{printed}");
    let theirs: f32 = printed.split_whitespace().last().unwrap().parse().unwrap();
    assert!((theirs - row_max).abs() < 1e-6, "python read {theirs}, we wrote {row_max}");
}

/// `hfexport inspect <fixture>` succeeds and prints every needle.
fn assert_inspect_prints(name: &str, needles: &[&str]) {
    let o = hfexport(&["inspect", fixture(name).to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = String::from_utf8_lossy(&o.stdout);
    for needle in needles {
        assert!(s.contains(needle), "missing `{needle}` in:\n{s}");
    }
}

#[test]
fn inspect_describes_the_checkpoint() {
    assert_inspect_prints(
        "qwen2",
        &[
            "Qwen2ForCausalLM",
            "head_dim 16",
            "rope         yarn",
            "window 3 on 2 of 3 layers",
            "tied",
            "input      input_ids: i64[batch, sequence]",
            "output     logits: f32[batch, sequence, 256]",
            "Attention x3",
        ],
    );
    // a mixture of experts: routing, sparse layers, and the parameters a token runs (all but
    // 4 idle experts of 3 x 24 x 64 weights in the one sparse layer)
    assert_inspect_prints(
        "qwen2_moe",
        &[
            "experts      6 (top-2, not renormalised), experts of 24, in layers 1 of 3, shared expert of 40",
            "parameters   143104 (0.14 M), 124672 (0.12 M) active per token",
            "Moe x1",
        ],
    );
    // what Gemma 3n varies by layer and around the layers
    assert_inspect_prints(
        "gemma3n_multimodal",
        &[
            "Gemma3nForConditionalGeneration",
            "keys and values reused (layer <- source): 3 <- 1",
            "gates sparsified in layers 0 (cut at mean + 1.645 std), 2 (cut at mean + 0.000 std)",
            "4 AltUp streams (layers compute on stream 0); LAuReL of rank 8",
            "ids 200..224 embedded by a table of 24 x 40; ids 224.. embedded by a table of 32 x 48",
        ],
    );
    // a raw-audio encoder: its feature convolutions, frame rate and norm placement; the audio's
    // length a floor of the samples'
    assert_inspect_prints(
        "wav2vec2_stable",
        &[
            "audio        4 convolutions (6, 10, 12, 12; layer norm after each), one frame per 36 samples from 52 on; \
             positional conv 5 in 2 groups; pre-norm layers",
            "symbol     samples in 52..=9600000",
            "input      input_values: f32[batch, samples]",
            "output     last_hidden_state: f32[batch, (samples + 20)//36 - 1, 32]",
        ],
    );
}

/// An image-text dual encoder: `inspect` names its image tower and shared space, and `run`
/// answers with each image's best text, the argmax of transformers' `logits_per_image`.
#[test]
fn dual_encoders_are_described_and_answer_with_the_best_text_per_image() {
    assert_inspect_prints(
        "siglip",
        &[
            "SiglipModel",
            "vision       layers 2, hidden 24, intermediate 30, heads 3; 12x12 images, 3 channels, 4x4 patches; \
             shared space: the towers' own heads",
            "input      pixel_values: f32[image_batch, 3, 12, 12]",
            "output     logits_per_image: f32[image_batch, batch]",
        ],
    );
    assert_inspect_prints("clip", &["shared space: projected to 16"]);
    let tmp = tempfile::tempdir().unwrap();
    let gold = read_all(fixture("clip").join("golden.safetensors")).unwrap();
    let names = ["input_ids", "attention_mask", "pixel_values"];
    let feeds: Vec<(&str, &Tensor)> = names.iter().map(|n| (*n, &gold[&format!("batch.{n}")])).collect();
    let (inp, out) = (tmp.path().join("in.safetensors"), tmp.path().join("out.safetensors"));
    write_safetensors(&inp, &feeds, &BTreeMap::new()).unwrap();
    let o = hfexport(&[
        "run",
        fixture("clip").to_str().unwrap(),
        "--inputs",
        inp.to_str().unwrap(),
        "--outputs",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let logits = &gold["batch.logits_per_image"];
    let (images, texts) = (logits.shape()[0], logits.shape()[1]);
    let x = logits.as_f32().unwrap();
    let best: Vec<usize> = (0..images)
        .map(|i| (0..texts).max_by(|&a, &b| x[i * texts + a].total_cmp(&x[i * texts + b])).unwrap())
        .collect();
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains(&format!("best text per image (argmax): {best:?}")), "{said}");
}

/// `inspect --json`: a checkpoint's facts as one object; an export folder's export.json.
#[test]
fn inspect_json_is_machine_readable() {
    let o = hfexport(&["inspect", fixture("qwen2_moe").to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["architecture"], "Qwen2MoeForCausalLM", "{v}");
    assert_eq!((v["sizes"]["layers"].as_u64(), v["sizes"]["vocab"].as_u64()), (Some(3), Some(256)), "{v}");
    assert_eq!(v["parameters"]["total"].as_u64(), Some(143104), "{v}");
    assert_eq!(v["parameters"]["active_per_token"].as_u64(), Some(124672), "{v}");
    assert_eq!(v["graph"]["ops"]["Moe"].as_u64(), Some(1), "{v}");
    assert_eq!(v["graph"]["inputs"][0]["name"], "input_ids", "{v}");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x");
    let o = hfexport(
        &["export", "--model", fixture("llama").to_str().unwrap(), "--format", "onnx", "--quiet"]
            .into_iter()
            .chain(["--output", out.to_str().unwrap()])
            .collect::<Vec<_>>(),
    );
    assert!(o.status.success() && stderr(&o).is_empty(), "--quiet printed: {}", stderr(&o));
    let o = hfexport(&["inspect", out.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let printed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("export.json")).unwrap()).unwrap();
    assert_eq!(printed, file);
}

/// `--genai` makes a growing-cache generation export with genai_config.json (ONNX Runtime GenAI
/// runs it in tests/onnx_generation.rs), and is refused with another format or a static cache.
#[test]
fn genai_flag_writes_an_onnxruntime_genai_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let model = fixture("llama");
    let out = tmp.path().join("g");
    let o = hfexport(
        &["export", "--model", model.to_str().unwrap(), "--format", "onnx", "--genai", "--output"]
            .into_iter()
            .chain([out.to_str().unwrap()])
            .collect::<Vec<_>>(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("genai_config.json")).unwrap()).unwrap();
    assert_eq!(config["model"]["decoder"]["filename"], "onnx/model.onnx", "{config}");
    assert_eq!(config["model"]["eos_token_id"], 2, "{config}");
    assert_eq!(config["model"]["type"], "llama", "{config}");
    for (extra, needle) in [
        (&["--format", "openvino"][..], "--format onnx"),
        (&["--format", "onnx", "--static-cache", "16"], "growing cache"),
    ] {
        let bad = tmp.path().join("bad");
        let mut args = vec!["export", "--model", model.to_str().unwrap(), "--genai", "--output", bad.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = hfexport(&args);
        assert_eq!(o.status.code(), Some(1), "{extra:?}");
        assert!(stderr(&o).contains(needle), "{extra:?}: {}", stderr(&o));
        assert!(!bad.exists(), "{extra:?}");
    }
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    // a folder without config.json
    let o = hfexport(&["inspect", tmp.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("config.json"), "{}", stderr(&o));
    // inputs with a wrong name, and a missing input file
    let bad = tmp.path().join("bad.safetensors");
    let t = Tensor::i64(vec![1, 3], vec![1, 2, 3]).unwrap();
    write_safetensors(&bad, &[("tokens", &t)], &BTreeMap::new()).unwrap();
    let out = tmp.path().join("o.safetensors");
    let fx = fixture("llama");
    let o =
        hfexport(&["run", fx.to_str().unwrap(), "--inputs", bad.to_str().unwrap(), "--outputs", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("`tokens`") && stderr(&o).contains("input_ids"), "{}", stderr(&o));
    assert!(!out.exists(), "no output file on failure");
    let o = hfexport(&[
        "run",
        fx.to_str().unwrap(),
        "--inputs",
        "/nonexistent/in.safetensors",
        "--outputs",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("/nonexistent/in.safetensors"), "{}", stderr(&o));
    // token ids outside the vocabulary
    let ids = Tensor::i64(vec![1, 2], vec![3, 999]).unwrap();
    let mask = Tensor::i64(vec![1, 2], vec![1, 1]).unwrap();
    write_safetensors(&bad, &[("input_ids", &ids), ("attention_mask", &mask)], &BTreeMap::new()).unwrap();
    let o =
        hfexport(&["run", fx.to_str().unwrap(), "--inputs", bad.to_str().unwrap(), "--outputs", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("999") && stderr(&o).contains("embed_tokens"), "{}", stderr(&o));
    // a sequence longer than the model accepts
    let n = 65;
    let ids = Tensor::i64(vec![1, n], vec![1; n]).unwrap();
    let mask = Tensor::i64(vec![1, n], vec![1; n]).unwrap();
    write_safetensors(&bad, &[("input_ids", &ids), ("attention_mask", &mask)], &BTreeMap::new()).unwrap();
    let o =
        hfexport(&["run", fx.to_str().unwrap(), "--inputs", bad.to_str().unwrap(), "--outputs", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("seq") && stderr(&o).contains("65"), "{}", stderr(&o));
}

/// `--config` carries the `AutoExportConfig` dict; flags override it; a bad key is named.
/// Hub configs of families we do not build (committed as the Hub has them, without weights):
/// `export` and `inspect` answer "not supported" naming the class and `model_type`, with the
/// nearest supported classes, and leave no output folder; never a missing key of another
/// family's schema.
#[test]
fn unsupported_architectures_are_said_so() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        ("jamba", "`JambaForCausalLM` (model_type `jamba`) is not supported"),
        ("codegen", "`CodeGenForCausalLM` (model_type `codegen`) is not supported"),
        ("rwkv", "`RwkvForCausalLM` (model_type `rwkv`) is not supported"),
    ];
    for (name, expected) in cases {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/unsupported").join(name);
        let out = tmp.path().join(name);
        for o in [
            hfexport(&[
                "export",
                "--model",
                dir.to_str().unwrap(),
                "--format",
                "onnx",
                "--output",
                out.to_str().unwrap(),
            ]),
            hfexport(&["inspect", dir.to_str().unwrap()]),
        ] {
            let err = stderr(&o);
            assert!(!o.status.success(), "{name}: {err}");
            assert!(err.contains(expected) && err.contains("nearest supported: "), "{name}: {err}");
            assert!(!err.contains("missing") && !err.contains("panicked"), "{name}: {err}");
        }
        assert!(!out.exists(), "{name}: no output folder");
    }
    let o = hfexport(&["inspect", "--supported", "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let classes: Vec<&str> = list.as_array().unwrap().iter().map(|c| c["class"].as_str().unwrap()).collect();
    assert!(classes.contains(&"LlamaForCausalLM") && classes.contains(&"WhisperForConditionalGeneration"));
    assert!(!classes.contains(&"JambaForCausalLM"));
    let md = hfexport(&["inspect", "--supported", "--markdown"]);
    assert_eq!(String::from_utf8_lossy(&md.stdout), hfexport_models::task::supported_markdown());
}

#[test]
fn export_driven_by_a_config_file() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("export.json");
    std::fs::write(&cfg, r#"{"export_format": "onnx", "dynamic": true, "opset_version": 18}"#).unwrap();
    let out = tmp.path().join("out");
    let fx = fixture("qwen3");
    let o = hfexport(&[
        "export",
        "--model",
        fx.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("export.json")).unwrap()).unwrap();
    assert_eq!(meta["config"]["opset_version"], 18);
    assert_eq!(meta["config"]["dynamic"], true);
    assert_eq!(meta["components"][0]["inputs"][0]["shape"], serde_json::json!(["batch", "sequence"]));
    // the same folder again: refused without --force, replaced with it
    let o =
        hfexport(&["export", "--model", fx.to_str().unwrap(), "--format", "onnx", "--output", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    let args =
        ["export", "--model", fx.to_str().unwrap(), "--format", "onnx", "--output", out.to_str().unwrap(), "--force"];
    assert!(hfexport(&args).status.success());
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("export.json")).unwrap()).unwrap();
    assert_eq!(meta["components"][0]["inputs"][0]["shape"], serde_json::json!(["1", "16"]), "static without --dynamic");
    let o = hfexport(&["inspect", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && text.contains("onnx format") && text.contains("input_ids: i64[1, 16]"), "{text}");
    // a bad key in the dict, and a format without an exporter yet
    std::fs::write(&cfg, r#"{"export_format": "onnx", "opset": 18}"#).unwrap();
    let bad = tmp.path().join("bad");
    let o = hfexport(&[
        "export",
        "--model",
        fx.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
        "--output",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("`opset`") && stderr(&o).contains("opset_version"), "{}", stderr(&o));
    let o =
        hfexport(&["export", "--model", fx.to_str().unwrap(), "--format", "tflite", "--output", bad.to_str().unwrap()]);
    assert!(stderr(&o).contains("tflite") && stderr(&o).contains("onnx"), "{}", stderr(&o));
    assert!(!bad.exists());
}

/// Two exports started at once to the same new folder: one wins, the other exits non-zero with
/// a clear error (the folder appeared while it ran, or was already there when it started); no
/// staging folder is left. An export removes the staging folder a killed export left beside
/// its output, and says so.
#[test]
fn racing_and_interrupted_exports_leave_nothing_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let fx = fixture("qwen3");
    let args = ["export", "--model", fx.to_str().unwrap(), "--format", "onnx", "--output", out.to_str().unwrap()];
    let spawn = || Command::new(env!("CARGO_BIN_EXE_hfexport")).args(args).output();
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(spawn);
        let b = s.spawn(spawn);
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    let wins = [&a, &b].iter().filter(|o| o.status.success()).count();
    assert_eq!(wins, 1, "exactly one export wins:\n{}\n{}", stderr(&a), stderr(&b));
    let loser = if a.status.success() { &b } else { &a };
    let why = stderr(loser);
    assert!(why.contains("appeared while this export was running") || why.contains("is not empty"), "{why}");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["out"], "no staging folder left");

    // a `kill -9`ed export's staging folder: its lock file unlocked, its pid gone
    let stale = tmp.path().join(".other.partial-4194305-0");
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join(".hfexport-staging.lock"), "").unwrap();
    std::fs::write(stale.join("model.onnx.data"), vec![0u8; 4096]).unwrap();
    let o = hfexport(&[&args[..], &["--force"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let said = format!("{}{}", stderr(&o), String::from_utf8_lossy(&o.stdout));
    assert!(
        said.contains("staging folder of an interrupted export") && said.contains(".other.partial-4194305-0"),
        "{said}"
    );
    assert!(!stale.exists());
}

/// `--model org/name[@revision]` reads the snapshot of a Hugging Face hub cache laid out as
/// `huggingface_hub` lays it out (refs, snapshots of symlinks into blobs), offline; export.json
/// records the repo and commit; what the cache lacks is one clear error and nothing is written.
#[test]
fn hub_repo_ids_resolve_offline_from_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("hub");
    let root = cache.join("models--tiny-org--tiny-qwen3");
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let snap = root.join("snapshots").join(sha);
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(root.join("blobs")).unwrap();
    for (i, entry) in std::fs::read_dir(fixture("qwen3")).unwrap().enumerate() {
        let entry = entry.unwrap();
        let blob = root.join("blobs").join(format!("blob{i}"));
        std::fs::copy(entry.path(), &blob).unwrap();
        std::os::unix::fs::symlink(format!("../../blobs/blob{i}"), snap.join(entry.file_name())).unwrap();
    }
    std::fs::create_dir_all(root.join("refs")).unwrap();
    std::fs::write(root.join("refs").join("main"), sha).unwrap();
    let run = |model: &str, out: &Path| {
        Command::new(env!("CARGO_BIN_EXE_hfexport"))
            .args(["export", "--model", model, "--format", "onnx", "--output", out.to_str().unwrap()])
            .env("HF_HUB_CACHE", &cache)
            .env("HF_HUB_OFFLINE", "1")
            .current_dir(tmp.path())
            .output()
            .unwrap()
    };
    for (i, model) in ["tiny-org/tiny-qwen3", &format!("tiny-org/tiny-qwen3@{sha}")].iter().enumerate() {
        let out = tmp.path().join(format!("out{i}"));
        let o = run(model, &out);
        assert!(o.status.success(), "{model}: {}", stderr(&o));
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("export.json")).unwrap()).unwrap();
        assert_eq!(meta["source"]["hub"], serde_json::json!({"repo": "tiny-org/tiny-qwen3", "sha": sha}), "{model}");
    }
    for (model, says) in [
        ("tiny-org/tiny-qwen3@v2", "has no revision `v2`"),
        ("tiny-org/absent", "`tiny-org/absent` is not in the hub cache"),
    ] {
        let out = tmp.path().join("never");
        let o = run(model, &out);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{model}");
        assert!(e.contains(says) && e.contains("hf download") && e.contains(cache.to_str().unwrap()), "{e}");
        assert!(!out.exists());
    }
    // a missing local folder: its cause said once
    let o = run("./no/such/folder", &tmp.path().join("never"));
    let e = stderr(&o);
    assert_eq!(e.matches("No such file or directory").count(), 1, "{e}");
}

/// Whole or refused: every container kind (ONNX external data, OpenVINO `.bin`, the `.pt2`
/// zip, the `.pte`), cut short by one byte, is refused by `inspect --check`, `run` and
/// `generate` naming the file; one flipped byte is found by `inspect --check`.
#[test]
fn truncated_or_changed_exports_are_refused_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (inputs, _) = golden_inputs("llama", "single", tmp.path());
    let formats = [
        ("onnx", "onnx/model.onnx.data"),
        ("openvino", "openvino_model.bin"),
        ("dynamo", "model.pt2"),
        ("executorch", "model.pte"),
    ];
    for (format, container) in formats {
        let good = tmp.path().join(format);
        let o = hfexport(&[
            "export",
            "--model",
            fixture("llama").to_str().unwrap(),
            "--output",
            good.to_str().unwrap(),
            "--format",
            format,
        ]);
        assert!(o.status.success(), "{format}: {}", stderr(&o));
        let o = hfexport(&["inspect", good.to_str().unwrap(), "--check"]);
        assert!(o.status.success(), "{format}: {}", stderr(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains("whole"), "{format}");

        let cut = tmp.path().join(format!("{format}-cut"));
        copy_dir(&good, &cut);
        let file = cut.join(container);
        let len = std::fs::metadata(&file).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(len - 1).unwrap();
        let want = format!("{container} has {} bytes, export.json records {len}", len - 1);
        let run = ["run", cut.to_str().unwrap(), "--inputs", inputs.to_str().unwrap(), "--outputs", "unused"];
        for args in [&["inspect", cut.to_str().unwrap(), "--check"][..], &run[..]] {
            let o = hfexport(args);
            assert!(!o.status.success() && stderr(&o).contains(&want), "{format} {args:?}: {}", stderr(&o));
        }

        let flipped = tmp.path().join(format!("{format}-flipped"));
        copy_dir(&good, &flipped);
        let mut bytes = std::fs::read(flipped.join(container)).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0x10;
        std::fs::write(flipped.join(container), bytes).unwrap();
        let o = hfexport(&["inspect", flipped.to_str().unwrap(), "--check"]);
        assert!(!o.status.success(), "{format}: a flipped byte passed the check");
        assert!(stderr(&o).contains(&format!("{container} has CRC-32")), "{format}: {}", stderr(&o));
    }

    // generation: the decode graph cut short
    let gen = tmp.path().join("generation");
    let o = hfexport(&[
        "export",
        "--model",
        fixture("llama").to_str().unwrap(),
        "--output",
        gen.to_str().unwrap(),
        "--format",
        "onnx",
        "--dynamic",
        "--for-generation",
        "--static-cache",
        "32",
        "--multi-token-decode",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let data = gen.join("onnx/model.onnx.data");
    let len = std::fs::metadata(&data).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&data).unwrap().set_len(len / 2).unwrap();
    let o = hfexport(&["generate", gen.to_str().unwrap(), "--prompt-ids", "1,2,3", "--max-new-tokens", "2"]);
    assert!(!o.status.success() && stderr(&o).contains("model.onnx.data has"), "{}", stderr(&o));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        match e.file_type().unwrap().is_dir() {
            true => copy_dir(&e.path(), &to.join(e.file_name())),
            false => drop(std::fs::copy(e.path(), to.join(e.file_name())).unwrap()),
        }
    }
}

/// A sentence-transformers folder (`modules.json`) of a bare encoder is exported for its
/// sentence embedding by default, saying so, as optimum's exporter reads such a folder; `--task
/// feature-extraction` still exports the token states alone. `inspect` shows the same default.
#[test]
fn sentence_transformers_folders_default_to_their_sentence_embedding() {
    let tmp = tempfile::tempdir().unwrap();
    let model = fixture("bert_st");
    let out = tmp.path().join("default");
    let o = hfexport(&[
        "export",
        "--model",
        model.to_str().unwrap(),
        "--format",
        "onnx",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(said.contains("a sentence-transformers folder (modules.json): exported for sentence-embedding"), "{said}");
    let meta = hfexport_core::metadata::ExportMetadata::read(&out).unwrap();
    let outputs: Vec<&str> = meta.components[0].outputs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!((meta.task.as_str(), outputs), ("sentence-embedding", vec!["last_hidden_state", "sentence_embedding"]));
    let plain = tmp.path().join("plain");
    let args = ["--format", "onnx", "--task", "feature-extraction", "--output", plain.to_str().unwrap()];
    let o = hfexport(&[&["export", "--model", model.to_str().unwrap()][..], &args[..]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let meta = hfexport_core::metadata::ExportMetadata::read(&plain).unwrap();
    assert_eq!(
        (meta.task.as_str(), meta.components[0].outputs[0].name.as_str()),
        ("feature-extraction", "last_hidden_state")
    );
    assert_inspect_prints("bert_st", &["task sentence-embedding"]);
}
