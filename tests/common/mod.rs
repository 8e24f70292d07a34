//! Helpers shared by the workspace-level tests.
#![allow(dead_code)]

use hfexport_core::Tensor;
use std::path::PathBuf;

#[path = "manifest.rs"]
mod manifest;
/// The committed tiny checkpoints with transformers' goldens (tests/fixtures/manifest.json).
#[allow(unused_imports)]
pub use manifest::{fixtures, recurrent_fixtures, seq2seq_fixtures, speech_fixtures};

/// The manifest, relative to this package.
const MANIFEST: &str = "tests/fixtures/manifest.json";
/// The repository, relative to this package.
const REPO: &str = ".";

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// The model file of a one-component export (`onnx/model.onnx`, `openvino_model.xml`,
/// `model.pt2`, …), as its `export.json` lists it.
#[allow(dead_code)]
pub fn component_file(dir: &std::path::Path) -> PathBuf {
    let meta = hfexport::core::metadata::ExportMetadata::read(dir).unwrap();
    assert_eq!(meta.components.len(), 1, "{}: one component expected", dir.display());
    dir.join(&meta.components[0].files[0])
}

mod python;
#[allow(unused_imports)]
pub use python::{clients_python, python, script};

/// Worst |a - b| over positions whose mask is 1, with its (batch, position, vocab) index.
pub fn worst_unpadded(ours: &Tensor, theirs: &Tensor, mask: &Tensor) -> Result<(f32, [usize; 3]), String> {
    if ours.shape() != theirs.shape() {
        return Err(format!("logits shape {:?}, transformers {:?}", ours.shape(), theirs.shape()));
    }
    let [b, s, v] = *ours.shape() else {
        return Err(format!("logits must be rank 3, got {:?}", ours.shape()));
    };
    let o = ours.as_f32().map_err(|e| e.to_string())?;
    let t = theirs.as_f32().map_err(|e| e.to_string())?;
    let m = mask.as_i64().map_err(|e| e.to_string())?;
    let mut worst = (0f32, [0; 3]);
    for bi in 0..b {
        for si in (0..s).filter(|si| m[bi * s + si] != 0) {
            for vi in 0..v {
                let i = (bi * s + si) * v + vi;
                let d = (o[i] - t[i]).abs();
                if !d.is_finite() {
                    return Err(format!(
                        "non-finite logit at {:?}: ours {}, transformers {}",
                        [bi, si, vi],
                        o[i],
                        t[i]
                    ));
                }
                if d > worst.0 {
                    worst = (d, [bi, si, vi]);
                }
            }
        }
    }
    Ok(worst)
}

/// A copy of fixture `name` in `dir` with its vocabulary widened to `vocab` rows (embedding and
/// head rows repeated): weights then dominate the export as in real models, where the graph
/// itself is a rounding error.
pub fn widened(name: &str, vocab: usize, dir: &std::path::Path) -> PathBuf {
    use hfexport_models::safetensors::{read_all, write_safetensors};
    std::fs::create_dir_all(dir).unwrap();
    let src = fixture(name);
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    config["vocab_size"] = vocab.into();
    std::fs::write(dir.join("config.json"), serde_json::to_string(&config).unwrap()).unwrap();
    let mut tensors = read_all(src.join("model.safetensors")).unwrap();
    for (k, t) in tensors.iter_mut() {
        if k.ends_with("embed_tokens.weight") || k.ends_with("lm_head.weight") {
            let mut shape = t.shape().to_vec();
            let row = t.to_le_bytes().len() / shape[0];
            let bytes: Vec<u8> = t.to_le_bytes().iter().copied().cycle().take(vocab * row).collect();
            shape[0] = vocab;
            *t = Tensor::from_le_bytes(t.dtype(), shape, &bytes).unwrap();
        }
    }
    let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    write_safetensors(dir.join("model.safetensors"), &refs, &Default::default()).unwrap();
    dir.to_path_buf()
}

/// A float32 causal-LM export of `model` into `out` (not forced over an existing folder), for
/// generation when `generation` says so.
pub fn causal_lm_request(
    model: &std::path::Path,
    out: &std::path::Path,
    generation: Option<hfexport::Generation>,
) -> hfexport::ExportRequest {
    hfexport::ExportRequest {
        model: model.to_path_buf(),
        output: out.to_path_buf(),
        task: Some(hfexport::Task::CausalLm),
        dtype: hfexport::DType::F32,
        force: false,
        generation,
    }
}

/// Exports `model` for generation with a static cache of `slots` (multi-token decode) in every
/// format with `--verify`; the failures, including a task outside `tasks` or components other
/// than `components`.
pub fn export_and_verify(
    model: &std::path::Path,
    slots: Option<usize>,
    out: &std::path::Path,
    tasks: &[&str],
    components: &[&str],
) -> Vec<String> {
    use hfexport::{AutoExportConfig, AutoHfExporter, DType, ExportRequest, Generation};
    let mut failures = vec![];
    for format in ["onnx", "openvino", "dynamo", "executorch"] {
        let config = serde_json::json!({"export_format": format, "dynamic": true});
        let exporter =
            AutoHfExporter::from_config(AutoExportConfig::from_dict(&config).unwrap()).unwrap().with_verify(true);
        let req = ExportRequest {
            model: model.to_path_buf(),
            output: out.join(format),
            task: None,
            dtype: DType::F32,
            force: false,
            generation: Some(Generation { static_cache: slots, multi_token_decode: true }),
        };
        match exporter.export(&req, &mut |_| {}) {
            Err(e) => failures.push(format!("{format}: {e}")),
            Ok(meta) => {
                let names: Vec<&str> = meta.components.iter().map(|c| c.name()).collect();
                let verified = meta.verification.as_ref().is_some_and(|v| v.max_abs_diff <= v.atol);
                if !tasks.contains(&meta.task.as_str()) || names != components || !verified {
                    failures
                        .push(format!("{format}: task {}, components {names:?}, {:?}", meta.task, meta.verification));
                }
            }
        }
    }
    failures
}
