//! Quantized exports (`"quantizer"` / `--quantize`) against transformers run on the same
//! weights quantized by the documented recipe in torch (`tests/python/quantized_goldens.py`,
//! written independently of `hfexport-quant/src/rtn.rs`):
//!
//! - the reference evaluator of the quantized graph gives transformers' fake-quantized logits
//!   within 1e-4 (the arithmetic is the recipe's, bit for bit up to float summation order);
//! - every format's artifact, run in its own runtime (`tests/python/run_exports.py`, one
//!   process for all), gives them within the format's tolerance (`tolerance`): ONNX Runtime's
//!   `MatMulNBits` at accuracy level 4 quantizes activations to int8 per block, and so do
//!   XNNPACK's linears in a `.pte` (per token; compared with a golden in XNNPACK's form:
//!   torchao's positive scales, bfloat16 block scales); the others dequantize exactly. A
//!   recipe XNNPACK refuses (asymmetric) is exported to `.pte` with the portable backend;
//! - the files shrink: an int4 export is at most 0.35x of the float32 one;
//! - a recipe that does not fit the model is an error naming the tensor, and writes nothing.
//!
//! Cases: int4 symmetric in groups of 32 with int8 head and embeddings (untied Llama, and
//! GPT-2, whose tied head and embeddings share one quantized table), int8 per channel (Qwen3),
//! asymmetric int4 in groups of 64 with float head and embeddings (Llama), int8 head over
//! float embeddings of a tied model (they are quantized apart), asymmetric int8 around float
//! MoE experts (Mixtral).

mod common;

use hfexport::{AutoExportConfig, AutoHfExporter, DType, ExportFormat, ExportRequest, Task};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// (name, fixture, quantizer dict)
fn cases() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("llama-int4", "llama", json!("int4")),
        ("gpt2-int4-tied", "gpt2", json!("int4")),
        ("qwen3-int8", "qwen3", json!("int8")),
        (
            "llama-uint4-g64",
            "llama",
            json!({"weights": "int4", "group_size": 64, "symmetric": false, "lm_head": null, "embeddings": null}),
        ),
        (
            "tied-int8-head-only",
            "llama_linear_tied",
            json!({"weights": "int8", "group_size": "channel", "lm_head": "int8", "embeddings": null}),
        ),
        ("mixtral-uint8", "mixtral", json!({"weights": "int8", "group_size": "channel", "symmetric": false})),
    ]
}

/// How far a runtime's logits may be from transformers' fake-quantized ones.
fn tolerance(format: ExportFormat, recipe: Option<&Value>) -> f32 {
    match format {
        // int8 activations per block of the input dimension (accuracy level 4)
        ExportFormat::Onnx => 0.25,
        // XNNPACK's linears quantize activations to int8 per token
        ExportFormat::Executorch if recipe.is_some_and(xnnpack_holds) => 0.25,
        _ => 1e-4,
    }
}

/// Whether ExecuTorch's XNNPACK runs the recipe (symmetric linears); otherwise the `.pte` is
/// exported with the portable backend, which dequantizes anything.
fn xnnpack_holds(q: &Value) -> bool {
    let r = hfexport::core::QuantRecipe::from_json(q).unwrap();
    r.weights.symmetric && r.lm_head.is_none_or(|s| s.symmetric)
}

fn export(fixture: &Path, out: &Path, format: ExportFormat, quantizer: Option<&Value>) -> hfexport::Result<()> {
    let mut dict = json!({"export_format": format.as_str(), "dynamic": true});
    if let Some(q) = quantizer {
        dict["quantizer"] = q.clone();
        if format == ExportFormat::Executorch && !xnnpack_holds(q) {
            dict["backend"] = json!("portable");
        }
    }
    export_dict(fixture, out, &dict)
}

/// A forward export of `fixture` with the config dict `dict`.
fn export_dict(fixture: &Path, out: &Path, dict: &Value) -> hfexport::Result<()> {
    let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(dict)?)?;
    let req = ExportRequest {
        model: fixture.to_path_buf(),
        output: out.to_path_buf(),
        task: Some(Task::CausalLm),
        dtype: DType::F32,
        force: false,
        generation: None,
    };
    exporter.export(&req, &mut |_| {}).map(|_| ())
}

/// `ckpt` exported to every format under `dir/<name>-<format>`: the model file of each (a
/// failed export is recorded in `failures`).
fn export_every_format(
    ckpt: &Path,
    dir: &Path,
    name: &str,
    quantizer: Option<&Value>,
    failures: &mut Vec<String>,
) -> BTreeMap<&'static str, PathBuf> {
    let mut exports = BTreeMap::new();
    for format in ExportFormat::ALL {
        let out = dir.join(format!("{name}-{}", format.as_str()));
        match export(ckpt, &out, format, quantizer) {
            Ok(()) => {
                exports.insert(format.as_str(), common::component_file(&out));
            }
            Err(e) => failures.push(format!("{name} / {}: export: {e}", format.as_str())),
        }
    }
    exports
}

/// Runs `tests/python/run_exports.py` on `jobs` (one process for all): the worst logit
/// difference per "<golden> <format>".
fn run_in_runtimes(dir: &Path, jobs: &[Value]) -> BTreeMap<String, f32> {
    let (jobs_path, out_path) = (dir.join("run.json"), dir.join("worst.json"));
    std::fs::write(&jobs_path, serde_json::to_vec(jobs).unwrap()).unwrap();
    let o = Command::new(common::python())
        .arg(common::script("run_exports.py"))
        .arg(&jobs_path)
        .arg(&out_path)
        .output()
        .unwrap();
    assert!(o.status.success(), "run_exports.py failed:\n{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&std::fs::read(&out_path).unwrap()).unwrap()
}

/// The length of every file below `dir` (an ONNX export's graphs sit in `onnx/`).
fn folder_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            match e.file_type().unwrap().is_dir() {
                true => folder_bytes(&e.path()),
                false => e.metadata().unwrap().len(),
            }
        })
        .sum()
}

#[test]
fn quantized_logits_match_transformers_in_every_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = cases();
    let golden = |name: &str, xnnpack: bool| {
        tmp.path().join(format!("{name}{}.golden.safetensors", if xnnpack { ".xnnpack" } else { "" }))
    };
    // one golden per case, and one in XNNPACK's form (torchao's positive scales, bfloat16
    // block scales) for the `.pte` of a recipe XNNPACK runs
    let mut jobs = vec![];
    for (name, fixture, q) in &cases {
        let recipe = hfexport::core::QuantRecipe::from_json(q).unwrap().to_json();
        for xnnpack in [false, true].into_iter().filter(|&x| !x || xnnpack_holds(q)) {
            jobs.push(json!({"fixture": common::fixture(fixture), "recipe": recipe, "out": golden(name, xnnpack), "xnnpack": xnnpack}));
        }
    }
    let manifest = tmp.path().join("goldens.json");
    std::fs::write(&manifest, serde_json::to_vec(&jobs).unwrap()).unwrap();
    let o = Command::new(common::python()).arg(common::script("quantized_goldens.py")).arg(&manifest).output().unwrap();
    assert!(o.status.success(), "quantized_goldens.py failed:\n{}", String::from_utf8_lossy(&o.stderr));

    let mut failures = vec![];
    let mut run_jobs = vec![];
    // (case, export label, its golden, tolerance) of every export compared
    let mut compared: Vec<(&str, String, PathBuf, f32)> = vec![];
    for (name, fixture, q) in &cases {
        let fixture = common::fixture(fixture);
        reference_matches(name, &fixture, q, &golden(name, false), &mut failures);
        let mut exports = export_every_format(&fixture, tmp.path(), name, Some(q), &mut failures);
        let pte = ExportFormat::Executorch.as_str();
        let xnnpack_pte = if xnnpack_holds(q) { exports.remove(pte) } else { None };
        if let Some(path) = xnnpack_pte {
            run_jobs.push(json!({"golden": golden(name, true), "exports": {pte: path}}));
            compared.push((name, pte.into(), golden(name, true), tolerance(ExportFormat::Executorch, Some(q))));
        }
        for format in ExportFormat::ALL.into_iter().filter(|f| exports.contains_key(f.as_str())) {
            compared.push((name, format.as_str().into(), golden(name, false), tolerance(format, Some(q))));
        }
        // standard ONNX (`DequantizeLinear`), which ONNX Runtime fuses into `MatMulNBits`
        let out = tmp.path().join(format!("{name}-onnx-standard"));
        let dict = json!({"export_format": "onnx", "dynamic": true, "quantizer": q, "quant_ops": "standard"});
        match export_dict(&fixture, &out, &dict) {
            Ok(()) => {
                exports.insert(STANDARD, common::component_file(&out));
                compared.push((name, STANDARD.into(), golden(name, false), tolerance(ExportFormat::Onnx, Some(q))));
            }
            Err(e) => failures.push(format!("{name} / {STANDARD}: export: {e}")),
        }
        run_jobs.push(json!({"golden": golden(name, false), "exports": exports}));
    }
    let worst = run_in_runtimes(tmp.path(), &run_jobs);
    for (name, label, gold, tol) in &compared {
        let d = *worst.get(&format!("{} {label}", gold.display())).unwrap_or(&f32::INFINITY);
        eprintln!("{name} / {label}: max |logits - transformers| {d:e}");
        if d.is_nan() || d > *tol {
            failures.push(format!("{name} / {label}: logits differ by {d:e} (tolerance {tol:e})"));
        }
    }
    let labels = ExportFormat::ALL.len() + 1;
    assert_eq!(compared.len(), cases.len() * labels, "every case ran in every runtime: {failures:#?}");
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The label of the standard-ONNX export (`quant_ops: "standard"`).
const STANDARD: &str = "onnx-standard";

/// Each linear of a standard-ONNX export (int4 layers, int8 head) becomes `MatMulNBits` in the
/// model ONNX Runtime optimizes at load (its `DQMatMulToMatMulNBits` fusion): the optimized
/// graph, saved by the session, has one per linear and no `DequantizeLinear` left feeding a
/// `MatMul`.
#[test]
fn standard_onnx_fuses_in_onnxruntime() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("std");
    let dict = json!({"export_format": "onnx", "dynamic": true, "quantizer": "int4", "quant_ops": "standard"});
    export_dict(&common::fixture("llama"), &out, &dict).unwrap();
    let optimized = tmp.path().join("optimized.onnx");
    let script = "import sys, collections, onnx, onnxruntime as ort\n\
        o = ort.SessionOptions(); o.optimized_model_filepath = sys.argv[2]\n\
        ort.InferenceSession(sys.argv[1], o, providers=['CPUExecutionProvider'])\n\
        g = onnx.load(sys.argv[2], load_external_data=False).graph\n\
        made = {o for n in g.node if n.op_type == 'DequantizeLinear' for o in n.output}\n\
        print(sum(n.op_type == 'MatMulNBits' for n in g.node), sum(n.op_type == 'MatMul' and any(i in made for i in n.input) for n in g.node))";
    let o = Command::new(common::python())
        .args(["-c", script])
        .arg(common::component_file(&out))
        .arg(&optimized)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let counts: Vec<usize> =
        String::from_utf8_lossy(&o.stdout).split_whitespace().map(|c| c.parse().unwrap()).collect();
    // 2 layers x (q, k, v, o, gate, up, down) in int4, and the int8 per-channel head
    assert_eq!(counts, [15, 0], "MatMulNBits fused, DequantizeLinear -> MatMul left");
}

/// The reference evaluator of the quantized forward graph against the golden.
fn reference_matches(name: &str, fixture: &Path, q: &Value, golden: &Path, failures: &mut Vec<String>) {
    let cfg = AutoExportConfig::from_dict(&json!({"export_format": "onnx", "dynamic": true, "quantizer": q})).unwrap();
    // (a null quantizer: a checkpoint quantized on the hub, read as it is)
    let exporter = AutoHfExporter::from_config(cfg).unwrap();
    let ckpt = hfexport::Checkpoint::open(fixture).unwrap();
    let req = ExportRequest {
        model: fixture.to_path_buf(),
        output: PathBuf::new(),
        task: Some(Task::CausalLm),
        dtype: DType::F32,
        force: false,
        generation: None,
    };
    let plan = exporter.plan(&req, &ckpt).unwrap();
    let graph = &plan.components[0].graph;
    assert!(
        graph.nodes().iter().any(|n| matches!(n.op, hfexport::core::Op::QuantLinear { .. })),
        "{name}: the plan has no QuantLinear"
    );
    let gold = hfexport::models::safetensors::SafetensorsFile::open(golden).unwrap();
    let ev = hfexport::Evaluator::new(graph, &ckpt).unwrap();
    for case in ["single", "batch"] {
        let load = |k: &str| gold.load(&format!("{case}.{k}")).unwrap();
        let inputs = BTreeMap::from([
            ("input_ids".to_string(), load("input_ids")),
            ("attention_mask".to_string(), load("attention_mask")),
        ]);
        let got = ev.run(&inputs).unwrap();
        match common::worst_unpadded(&got["logits"], &load("logits"), &load("attention_mask")) {
            Ok((d, _)) if d <= 1e-4 => {}
            Ok((d, at)) => failures.push(format!("{name}: reference evaluator ({case}) differs by {d:e} at {at:?}")),
            Err(e) => failures.push(format!("{name}: reference evaluator ({case}): {e}")),
        }
    }
}

/// The Llama fixture with every dimension but the vocabulary 4x wider and random weights: the
/// decoder layers' linears dominate the file, as in real models (the tiny fixture's tensors are
/// smaller than the writers' 4 KiB alignment).
fn layer_dominated(dir: &Path) -> PathBuf {
    use hfexport::models::safetensors::{read_all, write_safetensors};
    std::fs::create_dir_all(dir).unwrap();
    let src = common::fixture("llama");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    let vocab = config["vocab_size"].as_u64().unwrap() as usize;
    for key in ["hidden_size", "intermediate_size", "head_dim"] {
        if let Some(v) = config[key].as_u64() {
            config[key] = (v * 4).into();
        }
    }
    std::fs::write(dir.join("config.json"), serde_json::to_string(&config).unwrap()).unwrap();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let tensors: Vec<(String, hfexport::Tensor)> = read_all(src.join("model.safetensors"))
        .unwrap()
        .into_iter()
        .map(|(k, t)| {
            let shape: Vec<usize> = t.shape().iter().map(|&d| if d == vocab { d } else { d * 4 }).collect();
            let vals = (0..shape.iter().product::<usize>())
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed >> 40) as f32 / (1u64 << 24) as f32 * 0.2 - 0.1
                })
                .collect();
            (k, hfexport::Tensor::f32(shape, vals).unwrap())
        })
        .collect();
    let refs: Vec<(&str, &hfexport::Tensor)> = tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    write_safetensors(dir.join("model.safetensors"), &refs, &Default::default()).unwrap();
    dir.to_path_buf()
}

#[test]
fn int4_exports_shrink() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = layer_dominated(&tmp.path().join("wide"));
    for format in ExportFormat::ALL {
        let (float, quant) =
            (tmp.path().join(format!("f-{}", format.as_str())), tmp.path().join(format!("q-{}", format.as_str())));
        export(&fixture, &float, format, None).unwrap();
        export(&fixture, &quant, format, Some(&json!("int4"))).unwrap();
        let ratio = folder_bytes(&quant) as f64 / folder_bytes(&float) as f64;
        eprintln!("{}: int4 / float32 = {ratio:.3}", format.as_str());
        assert!(ratio <= 0.35, "{}: the int4 export is {ratio:.3}x of the float32 one", format.as_str());
    }
}

/// The CPU plugin's compiled model of an int4 OpenVINO export: every FullyConnected reads
/// 4-bit (layers) or 8-bit (head) weights, and the embedding Gather 8-bit rows, i.e. the
/// weights stay compressed in memory instead of being folded to float at compile time.
const OV_RUNTIME_PRECISIONS: &str = r#"
import json, sys, openvino as ov
c = ov.Core().compile_model(sys.argv[1], "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
layers = []
for op in c.get_runtime_model().get_ordered_ops():
    kind = op.get_rt_info()["layerType"].astype(str)
    if kind in ("FullyConnected", "Gather") and op.get_input_size() > 1:
        layers.append([op.get_friendly_name(), kind, [op.input(i).get_element_type().get_type_name() for i in range(op.get_input_size())]])
print(json.dumps(layers))
"#;

#[test]
fn openvino_keeps_weights_compressed() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = layer_dominated(&tmp.path().join("wide"));
    let out = tmp.path().join("ov");
    export(&fixture, &out, ExportFormat::Openvino, Some(&json!("int4"))).unwrap();
    let o = Command::new(common::python())
        .args(["-c", OV_RUNTIME_PRECISIONS])
        .arg(common::component_file(&out))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let layers: Vec<(String, String, Vec<String>)> = serde_json::from_slice(&o.stdout).unwrap();
    let fcs: Vec<_> = layers.iter().filter(|l| l.1 == "FullyConnected").collect();
    assert_eq!(fcs.len(), 15, "7 linears per layer and the head: {layers:?}");
    for (name, _, types) in &fcs {
        let want = if name.starts_with("lm_head") { "i8" } else { "i4" };
        assert_eq!(types[1], want, "{name} runs on {} weights: {types:?}", types[1]);
    }
    let embed = layers.iter().find(|l| l.0 == "model.embed_tokens").expect("the embedding gather");
    assert_eq!(embed.2[0], "i8", "the embedding rows stay int8: {embed:?}");
}

/// GPTQ (symmetric `gptq` format, asymmetric `gptq_v2`) and AWQ (GEMM) checkpoints written in
/// their real packing by `tests/python/prequantized_checkpoints.py`: the plan reads the
/// modules' own parts into `QuantLinear`s (no float copy), and the reference evaluator and every
/// format's runtime give transformers' logits on the dequantized weights.
#[test]
fn gptq_and_awq_checkpoints_export_as_they_are() {
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(common::python())
        .arg(common::script("prequantized_checkpoints.py"))
        .arg(common::fixture("llama"))
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "prequantized_checkpoints.py failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let (mut failures, mut run_jobs) = (vec![], vec![]);
    for kind in ["gptq", "gptq_v2", "awq"] {
        let ckpt = tmp.path().join(kind);
        let golden = ckpt.join("golden.safetensors");
        let exporter = AutoHfExporter::from_config(
            AutoExportConfig::from_dict(&json!({"export_format": "onnx", "dynamic": true})).unwrap(),
        )
        .unwrap();
        let opened = hfexport::Checkpoint::open(&ckpt).unwrap();
        let req = ExportRequest {
            model: ckpt.clone(),
            output: PathBuf::new(),
            task: Some(Task::CausalLm),
            dtype: DType::F32,
            force: false,
            generation: None,
        };
        let plan = exporter.plan(&req, &opened).unwrap();
        let graph = &plan.components[0].graph;
        let quantized = graph.nodes().iter().filter(|n| matches!(n.op, hfexport::core::Op::QuantLinear { .. })).count();
        assert_eq!(quantized, 14, "{kind}: the 7 linears of each layer read their packed parts");
        assert!(
            graph.weights().iter().all(|w| !w.name.ends_with("proj.weight")),
            "{kind}: no float copy of a layer weight"
        );
        reference_matches(kind, &ckpt, &Value::Null, &golden, &mut failures);
        let exports = export_every_format(&ckpt, tmp.path(), kind, None, &mut failures);
        run_jobs.push(json!({"golden": golden, "exports": exports}));
    }
    let worst = run_in_runtimes(tmp.path(), &run_jobs);
    assert_eq!(worst.len(), 3 * ExportFormat::ALL.len(), "every checkpoint ran in every runtime: {failures:#?}");
    for (key, d) in &worst {
        let format = ExportFormat::ALL.into_iter().find(|f| key.ends_with(&format!(" {}", f.as_str()))).unwrap();
        eprintln!("{key}: max |logits - transformers| {d:e}");
        if d.is_nan() || *d > tolerance(format, None) {
            failures.push(format!("{key}: logits differ by {d:e} (tolerance {:e})", tolerance(format, None)));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // layouts that are not read: clear errors naming the key
    for (kind, key, value, says) in [
        ("gptq", "desc_act", json!(true), "quantization_config.desc_act"),
        ("gptq", "bits", json!(8), "quantization_config.bits"),
        ("awq", "version", json!("gemv"), "quantization_config.version"),
    ] {
        let path = tmp.path().join(kind).join("config.json");
        let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let saved = config.clone();
        config["quantization_config"][key] = value;
        std::fs::write(&path, config.to_string()).unwrap();
        let e = hfexport::Checkpoint::open(&tmp.path().join(kind)).unwrap_err().to_string();
        assert!(e.contains(says), "{kind} with {key}: {e}");
        std::fs::write(&path, saved.to_string()).unwrap();
    }
}

#[test]
fn bad_recipes_are_clear_errors_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    // hidden size 48: groups of 32 do not divide it
    let e = export(&common::fixture("llama_linear_tied"), &out, ExportFormat::Onnx, Some(&json!("int4"))).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("group size 32 does not divide") && msg.contains("q_proj"), "{msg}");
    assert!(!out.exists(), "a failed export leaves no output folder");
    for (bad, says) in [
        (json!({"weights": "int3"}), "quantizer.weights"),
        (json!({"weights": "int4", "group_size": 48}), "group_size"),
        (json!({"weights": "int4", "bits": 4}), "quantizer.bits"),
    ] {
        let e = export(&common::fixture("llama"), &out, ExportFormat::Onnx, Some(&bad)).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
        assert!(!out.exists());
    }
    // what XNNPACK cannot run is refused for the `.pte` (the portable backend takes it)
    for (bad, says) in [
        (json!({"weights": "int4", "symmetric": false}), "XNNPACK's quantized linears have no zero points"),
        (json!({"weights": "int8", "group_size": 32}), "XNNPACK's int8 linears are per channel"),
    ] {
        let dict = json!({"export_format": "executorch", "dynamic": true, "quantizer": bad});
        let e = export_dict(&common::fixture("llama"), &out, &dict).unwrap_err().to_string();
        assert!(e.contains(says) && e.contains("portable"), "{bad}: {e}");
        assert!(!out.exists());
    }
}
