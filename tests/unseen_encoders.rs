//! Encoders the fixtures do not cover: random BERT / RoBERTa / XLM-RoBERTa / CamemBERT / XLM-RoBERTa-XL /
//! DistilBERT / ELECTRA / ALBERT / MPNet / DeBERTa-v2 / ModernBERT / ViT / DeiT / DINOv2 / ResNet / ConvNeXt / MobileNetV2 / CLIP / SigLIP /
//! wav2vec2 / HuBERT / WavLM / Data2VecAudio / BEiT / Data2VecVision checkpoints of every head, configured across the space transformers accepts
//! (`tests/python/random_encoders.py`: head counts and dims, layers, activations, epsilons, token
//! types, label counts, tied or untied decoders, padding ids, sequence lengths, embedding widths, ALBERT's layer groups, ModernBERT's
//! windows, layer kinds, rope thetas, biases and poolings, ResNet's, ConvNeXt's and MobileNetV2's stages, layer types, patches, strides, paddings and image sizes;
//! wav2vec2's feature convolutions, norms, positional kernels, layer norm placement and clip lengths, WavLM's buckets;
//! BEiT's relative biases (per layer, shared), absolute positions, layer scales, poolings and grids; sentence-transformers folders with random
//! Pooling modes and Normalize; convolutional nets fed images of another size than their config's, which
//! their exports are then asked for), generated with their goldens by transformers (and
//! sentence-transformers) at test time. Each must match transformers at 1e-4 in the reference evaluator,
//! padded rows included, and export to every format with `--verify` (its runtime against the
//! evaluator, on padded samples), and every other one also with int8 weights (`--quantize int8`:
//! the runtime against the evaluator of the quantized graph).

mod common;

use common::{python, script};
use hfexport::{AutoExportConfig, AutoHfExporter, DType, ExportRequest};
use hfexport_core::{Evaluator, Tensor};
use hfexport_models::safetensors::read_all;
use hfexport_models::{build, BuildOptions, Checkpoint, Task};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const SEED: u64 = 20_261_202;
/// Each of the 92 dealt classes (10 of them sentence-transformers folders, 10 convolutional, 9 CLIP
/// and SigLIP models and towers, 12 wav2vec2, HuBERT, WavLM and Data2VecAudio, 4 BEiT and
/// Data2VecVision, 5 Swin and Swinv2) once.
const COUNT: usize = 92;

struct Case {
    name: String,
    dir: std::path::PathBuf,
    task: Task,
    description: String,
    /// The image size a convolutional net's goldens were computed at where not its config's.
    image_size: Option<[usize; 2]>,
}

fn generate(out: &Path) -> Vec<Case> {
    let o = Command::new(python())
        .arg(script("random_encoders.py"))
        .arg(out)
        .args(["--seed", &SEED.to_string(), "--count", &COUNT.to_string()])
        .output()
        .expect("start python");
    assert!(o.status.success(), "random_encoders.py failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
    index["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap().to_string(),
            dir: out.join(c["dir"].as_str().unwrap()),
            task: Task::parse(c["task"].as_str().unwrap()).unwrap(),
            description: c["description"].as_str().unwrap().to_string(),
            image_size: c.get("image_size").map(|hw| {
                let side = |i: usize| hw[i].as_u64().unwrap() as usize;
                [side(0), side(1)]
            }),
        })
        .collect()
}

/// The worst difference of every output of both cases, or what failed.
fn check_reference(case: &Case) -> Result<f32, String> {
    let ckpt = Checkpoint::open(&case.dir).map_err(|e| e.to_string())?;
    let opts = BuildOptions { image_size: case.image_size, ..BuildOptions::default() };
    let g = build(&ckpt.config, &ckpt, case.task, &opts).map_err(|e| e.to_string())?;
    let ev = Evaluator::new(&g, &ckpt).map_err(|e| e.to_string())?;
    let gold = read_all(case.dir.join("golden.safetensors")).map_err(|e| e.to_string())?;
    let mut worst = 0f32;
    for c in ["single", "batch"] {
        let inputs: BTreeMap<String, Tensor> =
            ["input_ids", "attention_mask", "token_type_ids", "pixel_values", "input_values"]
                .iter()
                .filter_map(|k| gold.get(&format!("{c}.{k}")).map(|t| (k.to_string(), t.clone())))
                .collect();
        let out = ev.run(&inputs).map_err(|e| e.to_string())?;
        let mask = inputs.get("attention_mask").map_or(&[][..], |m| m.as_i64().unwrap());
        let expected =
            gold.keys().filter(|k| k.starts_with(&format!("{c}.")) && !inputs.contains_key(&k[c.len() + 1..]));
        for key in expected {
            let name = &key[c.len() + 1..];
            let ours = out.get(name).ok_or_else(|| format!("no output `{name}`"))?;
            let (o, t) = (ours.as_f32().unwrap(), gold[key].as_f32().unwrap());
            if o.len() != t.len() {
                return Err(format!("{name}: {:?} vs {:?}", ours.shape(), gold[key].shape()));
            }
            // per-token outputs compare unpadded positions only
            let per_token = inputs
                .get("attention_mask")
                .is_some_and(|m| ours.shape().len() >= 2 && ours.shape()[..2] == m.shape()[..]);
            let width = if per_token { o.len() / mask.len() } else { o.len() };
            let d = (0..o.len()).filter(|&i| !per_token || mask[i / width] != 0).map(|i| (o[i] - t[i]).abs());
            worst = d.fold(worst, f32::max);
        }
    }
    Ok(worst)
}

#[test]
fn random_encoders_match_transformers_and_verify_in_every_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = generate(&tmp.path().join("ckpt"));
    assert_eq!(cases.len(), COUNT);
    let mut failures = vec![];
    for (i, case) in cases.iter().enumerate() {
        match check_reference(case) {
            Ok(d) if d <= 1e-4 => {}
            Ok(d) => {
                failures.push(format!("{}: reference worst |diff| {d:e} > 1e-4\n    {}", case.name, case.description))
            }
            Err(e) => failures.push(format!("{}: {e}\n    {}", case.name, case.description)),
        }
        // every other case also with int8 weights
        let quantizers: &[Option<&str>] = if i % 2 == 1 { &[None, Some("int8")] } else { &[None] };
        let formats = ["onnx", "openvino", "dynamo", "executorch"];
        for (format, &quantizer) in formats.into_iter().flat_map(|f| quantizers.iter().map(move |q| (f, q))) {
            let mut config =
                serde_json::json!({"export_format": format, "dynamic": true, "image_size": case.image_size});
            if let Some(q) = quantizer {
                config["quantizer"] = q.into();
            }
            let exporter =
                AutoHfExporter::from_config(AutoExportConfig::from_dict(&config).unwrap()).unwrap().with_verify(true);
            let tag = format!("{format}{}", quantizer.map_or(String::new(), |q| format!("-{q}")));
            let req = ExportRequest {
                model: case.dir.clone(),
                output: tmp.path().join("exports").join(&case.name).join(&tag),
                task: Some(case.task),
                dtype: DType::F32,
                force: false,
                generation: None,
            };
            if let Err(e) = exporter.export(&req, &mut |_| {}) {
                failures.push(format!("{} {tag}: {e}\n    {}", case.name, case.description));
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} random encoders failed:\n{}", failures.len(), COUNT, failures.join("\n"));
}
