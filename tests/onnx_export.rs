//! ONNX exports of every fixture, run by ONNX Runtime and by OpenVINO's ONNX reader from
//! Python (`tests/python/run_onnx.py`, after `onnx.checker` with `full_check`): logits equal
//! transformers' at every non-padded position, and the same file runs at a batch and length no
//! sample used (compared with the reference evaluator there). Also: opsets 17 and 23 (native
//! RMSNormalization / RotaryEmbedding / Attention), static and named dynamic shapes, and the
//! failures an export must survive without leaving a half-written folder.

mod common;

use common::{fixture, fixtures, python, worst_unpadded};
use hfexport::core::artifact::StagedDir;
use hfexport::core::metadata::ExportMetadata;
use hfexport::core::{TensorInfo, TensorSource};
use hfexport::{AutoExportConfig, AutoHfExporter, Checkpoint, DType, Evaluator, ExportRequest, Task, Tensor};
use hfexport_models::safetensors::{read_all, write_safetensors};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn try_export(name: &str, out: &Path, config: serde_json::Value, force: bool) -> hfexport::Result<ExportMetadata> {
    try_export_as(name, out, config, force, DType::F32)
}

fn try_export_as(
    name: &str,
    out: &Path,
    config: serde_json::Value,
    force: bool,
    dtype: DType,
) -> hfexport::Result<ExportMetadata> {
    let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(&config)?)?;
    let req = ExportRequest {
        model: fixture(name),
        output: out.to_path_buf(),
        task: Some(Task::CausalLm),
        dtype,
        force,
        generation: None,
    };
    exporter.export(&req, &mut |_| {})
}

fn export(name: &str, out: &Path, config: serde_json::Value) -> ExportMetadata {
    try_export(name, out, config, false).unwrap()
}

fn write_case(path: &Path, ids: &Tensor, mask: &Tensor) {
    write_safetensors(path, &[("input_ids", ids), ("attention_mask", mask)], &BTreeMap::new()).unwrap();
}

/// Runs the python runner on `cases`; returns `<i>.ort` (and `<i>.openvino`) logits.
fn run_python(model: &Path, cases: &[PathBuf], tmp: &Path, mode: Option<&str>) -> BTreeMap<String, Tensor> {
    let out = tmp.join("python-out.safetensors");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/run_onnx.py");
    let mut cmd = Command::new(python());
    cmd.arg(script);
    cmd.args(mode);
    let o = cmd.arg(model).arg(&out).args(cases).output().expect("start python");
    assert!(o.status.success(), "run_onnx.py failed:\n{}", String::from_utf8_lossy(&o.stderr));
    read_all(&out).unwrap()
}

/// Writes the golden single and batch inputs of `name` into `dir`.
fn golden_cases(name: &str, dir: &Path) -> (Vec<PathBuf>, Vec<(Tensor, Tensor)>) {
    let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
    let mut paths = vec![];
    let mut expected = vec![];
    for case in ["single", "batch"] {
        let p = dir.join(format!("{case}.safetensors"));
        let mask = gold[&format!("{case}.attention_mask")].clone();
        write_case(&p, &gold[&format!("{case}.input_ids")], &mask);
        paths.push(p);
        expected.push((gold[&format!("{case}.logits")].clone(), mask));
    }
    (paths, expected)
}

fn reference(name: &str, ids: &Tensor, mask: &Tensor) -> Tensor {
    let ckpt = Checkpoint::open(&fixture(name)).unwrap();
    let g = hfexport::build(&ckpt.config, &ckpt, Task::CausalLm, &Default::default()).unwrap();
    let inputs = BTreeMap::from([("input_ids".to_string(), ids.clone()), ("attention_mask".to_string(), mask.clone())]);
    Evaluator::new(&g, &ckpt).unwrap().run(&inputs).unwrap()["logits"].clone()
}

fn compare(
    label: &str,
    got: &BTreeMap<String, Tensor>,
    expected: &[(Tensor, Tensor)],
    runtimes: &[&str],
) -> Vec<String> {
    compare_within(label, got, expected, runtimes, 1e-4)
}

fn compare_within(
    label: &str,
    got: &BTreeMap<String, Tensor>,
    expected: &[(Tensor, Tensor)],
    runtimes: &[&str],
    atol: f32,
) -> Vec<String> {
    let mut failures = vec![];
    for (i, (want, mask)) in expected.iter().enumerate() {
        for runtime in runtimes {
            let (d, at) = worst_unpadded(&got[&format!("{i}.{runtime}")], want, mask).unwrap();
            if d > atol {
                failures.push(format!("{label} case {i} {runtime}: worst |diff| {d:e} at {at:?}"));
            }
        }
    }
    failures
}

#[test]
fn dynamic_exports_match_transformers_in_onnxruntime_and_openvino() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    for name in fixtures() {
        let dir = tmp.path().join(name);
        let meta = export(name, &dir.join("export"), serde_json::json!({"export_format": "onnx", "dynamic": true}));
        let m = meta.component("model").unwrap();
        assert_eq!(m.files, ["onnx/model.onnx", "onnx/model.onnx.data"]);
        assert_eq!(m.inputs[0].shape, ["batch", "sequence"], "{name}: symbolic dims are named");
        assert!(dir.join("export/config.json").is_file() && dir.join("export/generation_config.json").is_file());
        let (mut cases, mut expected) = golden_cases(name, &dir);
        // batch 3, 11 tokens, the first row left-padded: no golden has this shape
        let vocab = expected[0].0.shape()[2] as i64;
        let ids = Tensor::i64(vec![3, 11], (0..33).map(|i| (i * 31 + 7) % vocab).collect()).unwrap();
        let mask = Tensor::i64(vec![3, 11], (0..33).map(|i| i64::from(i >= 4)).collect()).unwrap();
        let p = dir.join("unseen.safetensors");
        write_case(&p, &ids, &mask);
        cases.push(p);
        expected.push((reference(name, &ids, &mask), mask));
        let got = run_python(&dir.join("export/onnx/model.onnx"), &cases, &dir, None);
        failures.extend(compare(name, &got, &expected, &["ort", "openvino"]));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `optimize` with `ort_fusions: "cpu"`: each SwiGLU mixture-of-experts block becomes ONNX
/// Runtime's `com.microsoft.MoE` (selected experts only), which gives transformers' logits in
/// ONNX Runtime; a model without them (GPT-OSS's experts among them) exports as it would
/// without the option.
#[test]
fn ort_cpu_fusions_lower_moe_blocks_to_the_contrib_op() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    for name in fixtures() {
        let ckpt = Checkpoint::open(&fixture(name)).unwrap();
        let dir = tmp.path().join(name);
        let config =
            serde_json::json!({"export_format": "onnx", "dynamic": true, "optimize": true, "ort_fusions": "cpu"});
        export(name, &dir.join("export"), config);
        let model = std::fs::read(dir.join("export/onnx/model.onnx")).unwrap();
        let has = |op: &str| model.windows(op.len()).any(|w| w == op.as_bytes());
        // a plain SwiGLU routed by softmax: GPT-OSS's biased experts with their clamped SwiGLU and
        // DeepSeek's grouped routings are decomposed
        let swiglu = |m: &hfexport_models::config::MoeConfig| {
            m.clamped_swiglu.is_none() && !m.biased && matches!(m.routing, hfexport::core::Routing::Softmax { .. })
        };
        let moe = ckpt.config.moe.as_ref().is_some_and(swiglu) && ckpt.config.hidden_act == "silu";
        assert_eq!(has("com.microsoft"), moe, "{name}: the contrib domain only for MoE blocks");
        if !moe {
            continue;
        }
        // gate and up are stored once, interleaved: no bigger than the standard export
        export(name, &dir.join("standard"), serde_json::json!({"export_format": "onnx", "dynamic": true}));
        let size = |d: &str| std::fs::metadata(dir.join(d).join("onnx/model.onnx.data")).unwrap().len();
        assert!(size("export") <= size("standard"), "{name}: {} > {}", size("export"), size("standard"));
        let (cases, expected) = golden_cases(name, &dir);
        let got = run_python(&dir.join("export/onnx/model.onnx"), &cases, &dir, Some("--ort-only"));
        failures.extend(compare(&format!("{name} ort_fusions cpu"), &got, &expected, &["ort"]));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Opset 17 (reductions with attribute axes), 23 (native RMSNormalization, RotaryEmbedding
/// and Attention) and 24 (the newest accepted) give the same logits.
#[test]
fn opsets_17_and_23_match_transformers_in_onnxruntime() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    for opset in [17, 23, 24] {
        for name in fixtures() {
            let dir = tmp.path().join(format!("{name}-{opset}"));
            let config = serde_json::json!({"export_format": "onnx", "dynamic": true, "opset_version": opset});
            export(name, &dir.join("export"), config);
            let model = std::fs::read(dir.join("export/onnx/model.onnx")).unwrap();
            let has = |op: &str| model.windows(op.len()).any(|w| w == op.as_bytes());
            // the native LLM ops appear from opset 23 on, for the models that have such blocks
            let ckpt = Checkpoint::open(&fixture(name)).unwrap();
            let graph = hfexport_models::build(&ckpt.config, &ckpt, Task::CausalLm, &Default::default()).unwrap();
            let uses = |op: &str| graph.nodes().iter().any(|n| n.op.name() == op);
            for (ours, onnx) in [("RmsNorm", "RMSNormalization"), ("ApplyRotary", "RotaryEmbedding")] {
                assert_eq!(has(onnx), opset >= 23 && uses(ours), "{name} at opset {opset}: {onnx}");
            }
            let (cases, expected) = golden_cases(name, &dir);
            let got = run_python(&dir.join("export/onnx/model.onnx"), &cases, &dir, Some("--ort-only"));
            failures.extend(compare(&format!("{name} opset {opset}"), &got, &expected, &["ort"]));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// float16 weights and activations run in ONNX Runtime near the float32 goldens; bfloat16
/// exports are valid ONNX (ONNX Runtime's CPU provider has no bfloat16 kernels to run them).
#[test]
fn half_precision_exports() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = || serde_json::json!({"export_format": "onnx", "dynamic": true});
    let mut failures = vec![];
    for name in fixtures() {
        let dir = tmp.path().join(name);
        let meta = try_export_as(name, &dir.join("f16"), cfg(), false, DType::F16).unwrap();
        assert_eq!(
            (meta.dtype.as_str(), meta.component("model").unwrap().outputs[0].dtype.as_str()),
            ("float16", "f16")
        );
        let (cases, expected) = golden_cases(name, &dir);
        let got = run_python(&dir.join("f16/onnx/model_fp16.onnx"), &cases, &dir, Some("--ort-only"));
        failures.extend(compare_within(&format!("{name} float16"), &got, &expected, &["ort"], 5e-2));
        try_export_as(name, &dir.join("bf16"), cfg(), false, DType::BF16).unwrap();
        run_python(&dir.join("bf16/onnx/model.onnx"), &[], &dir, Some("--check-only"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn static_and_named_dynamic_shapes() {
    let tmp = tempfile::tempdir().unwrap();
    // not dynamic: the sample shape [1, 16], and it runs there
    let meta = export("qwen2", &tmp.path().join("static"), serde_json::json!({"export_format": "onnx"}));
    assert_eq!(meta.component("model").unwrap().inputs[0].shape, ["1", "16"]);
    let ids = Tensor::i64(vec![1, 16], (0..16).map(|i| (i * 13 + 1) % 256).collect()).unwrap();
    let mask = Tensor::i64(vec![1, 16], vec![1; 16]).unwrap();
    let case = tmp.path().join("static-case.safetensors");
    write_case(&case, &ids, &mask);
    let got = run_python(&tmp.path().join("static/onnx/model.onnx"), &[case], tmp.path(), Some("--ort-only"));
    assert!(compare("static", &got, &[(reference("qwen2", &ids, &mask), mask)], &["ort"]).is_empty());
    // explicit names and ranges
    let ds = serde_json::json!({
        "input_ids": {"0": {"name": "b", "max": 8}, "1": {"name": "tokens", "min": 2, "max": 32}},
        "attention_mask": {"0": {"name": "b"}, "1": {"name": "tokens"}},
    });
    let meta =
        export("llama", &tmp.path().join("named"), serde_json::json!({"export_format": "onnx", "dynamic_shapes": ds}));
    assert_eq!(meta.component("model").unwrap().inputs[1].shape, ["b", "tokens"]);
    assert_eq!((meta.symbols["tokens"].min, meta.symbols["tokens"].max), (2, 32));
    let (cases, expected) = golden_cases("llama", tmp.path());
    let got = run_python(&tmp.path().join("named/onnx/model.onnx"), &cases, tmp.path(), Some("--ort-only"));
    assert!(compare("named", &got, &expected, &["ort"]).is_empty());
}

#[test]
fn refused_exports_leave_the_output_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = || serde_json::json!({"export_format": "onnx", "dynamic": true});
    // a non-empty output without force
    let out = tmp.path().join("busy");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("keep.txt"), "mine").unwrap();
    let e = try_export("llama", &out, cfg(), false).unwrap_err().to_string();
    assert!(e.contains("not empty") && e.contains("--force"), "{e}");
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
    // with force it is replaced
    try_export("llama", &out, cfg(), true).unwrap();
    assert!(!out.join("keep.txt").exists() && out.join("onnx/model.onnx").exists());
    // an output whose parent is a file: cannot be created
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let e = try_export("llama", &file.join("out"), cfg(), false).unwrap_err().to_string();
    assert!(e.contains("a-file"), "{e}");
    // explicit dims outside the model's range
    let ds = serde_json::json!({"input_ids": {"1": {"name": "sequence", "max": 100000}}});
    let bad = tmp.path().join("too-long");
    let e = try_export(
        "llama",
        &bad,
        serde_json::json!({"export_format": "onnx", "dynamic": true, "dynamic_shapes": ds}),
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("dynamic_shapes.input_ids.1") && e.contains("1..=64"), "{e}");
    assert!(!bad.exists());
    let names: Vec<String> =
        std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    assert!(names.iter().all(|n| !n.contains("partial")), "staging folders left behind: {names:?}");
}

/// A source whose bytes fail after a few weights, as a disk or a read would midway.
struct FailingSource<'a> {
    inner: &'a Checkpoint,
    left: std::sync::atomic::AtomicUsize,
}

impl TensorSource for FailingSource<'_> {
    fn info(&self, name: &str) -> hfexport::core::Result<TensorInfo> {
        self.inner.info(name)
    }
    fn load(&self, name: &str) -> hfexport::core::Result<Tensor> {
        if self.left.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            return Err(hfexport::core::Error::Weight { tensor: name.into(), msg: "simulated I/O failure".into() });
        }
        self.inner.load(name)
    }
}

#[test]
fn an_export_failing_midway_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let ckpt = Checkpoint::open(&fixture("mistral")).unwrap();
    let g = hfexport::build(&ckpt.config, &ckpt, Task::CausalLm, &Default::default()).unwrap();
    let src = FailingSource { inner: &ckpt, left: 3.into() };
    let dest = tmp.path().join("out");
    let staged = StagedDir::create(&dest, false).unwrap();
    let planned = [hfexport::core::plan::Planned { spec: hfexport::core::plan::ComponentSpec::forward(), graph: g }];
    let cfg = AutoExportConfig::from_dict(&serde_json::json!({"export_format": "onnx"})).unwrap();
    let backend = hfexport::backend(cfg.format()).unwrap();
    let (prepared, _) = hfexport::core::backend::prepare(backend, &cfg, &planned).unwrap();
    let e = backend
        .write(&prepared, &src, &Default::default(), staged.path(), &cfg, &mut |_, _, _| Ok(()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("simulated I/O failure"), "{e}");
    assert!(staged.path().join("onnx/model.onnx.data").exists(), "the failure happened midway");
    drop(staged);
    assert!(!dest.exists());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "the staging folder is removed");
}

/// Every tokenizer file of the checkpoint is copied byte for byte (the slow tokenizers' too:
/// Marian's `source.spm` / `target.spm`, T5's `spiece.model`, BERT's `vocab.txt`, …) and listed
/// in export.json's `files`; other files of the checkpoint folder are not.
#[test]
fn tokenizer_files_of_every_kind_are_carried_over() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("checkpoint");
    std::fs::create_dir_all(&model).unwrap();
    for entry in std::fs::read_dir(fixture("llama")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, model.join(path.file_name().unwrap())).unwrap();
    }
    // the slow tokenizers' files (opaque to the export; the JSON ones it may read stay the
    // fixture's)
    let slow = ["vocab.txt", "spiece.model", "sentencepiece.bpe.model", "spm.model", "source.spm", "target.spm"];
    for (i, name) in slow.iter().chain(["normalizer.json"].iter()).enumerate() {
        std::fs::write(model.join(name), format!("{name} {i}")).unwrap();
    }
    std::fs::write(model.join("notes.txt"), "not a tokenizer").unwrap();
    let config = serde_json::json!({"export_format": "onnx"});
    let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(&config).unwrap()).unwrap();
    let out = tmp.path().join("export");
    let req = ExportRequest {
        model: model.clone(),
        output: out.clone(),
        task: Some(Task::CausalLm),
        dtype: DType::F32,
        force: false,
        generation: None,
    };
    let meta = exporter.export(&req, &mut |_| {}).unwrap();
    for name in hfexport::COPIED_FILES {
        let (src, dst) = (model.join(name), out.join(name));
        if src.exists() {
            assert_eq!(std::fs::read(&src).unwrap(), std::fs::read(&dst).unwrap(), "{name}");
            assert!(meta.files.iter().any(|f| f.path == name), "{name} is listed in export.json");
        }
    }
    let missing: Vec<_> = slow.iter().filter(|name| !out.join(name).is_file()).collect();
    assert!(missing.is_empty(), "not carried over: {missing:?}");
    assert!(!out.join("notes.txt").exists(), "a file no tokenizer reads stays behind");
}

/// A sentence-transformers folder's configs and module folders (a Dense module's weights too)
/// are carried over, each recorded in export.json, and the token states keep transformers' name.
#[test]
fn sentence_transformers_modules_are_carried_over() {
    let tmp = tempfile::tempdir().unwrap();
    let model = fixture("roberta_st");
    let config = serde_json::json!({"export_format": "onnx", "dynamic": true});
    let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(&config).unwrap()).unwrap();
    let out = tmp.path().join("export");
    let req = ExportRequest {
        model: model.clone(),
        output: out.clone(),
        task: None,
        dtype: DType::F32,
        force: false,
        generation: None,
    };
    let meta = exporter.export(&req, &mut |_| {}).unwrap();
    let carried = [
        "modules.json",
        "sentence_bert_config.json",
        "1_Pooling/config.json",
        "2_Dense/config.json",
        "2_Dense/model.safetensors",
        "3_Dense/model.safetensors",
        "4_Dense/config.json",
    ];
    for name in carried {
        assert_eq!(std::fs::read(model.join(name)).unwrap(), std::fs::read(out.join(name)).unwrap(), "{name}");
        assert!(meta.files.iter().any(|f| f.path == name), "{name} is listed in export.json");
    }
    let outputs: Vec<&str> = meta.components[0].outputs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(outputs, ["last_hidden_state", "sentence_embedding"]);
}
