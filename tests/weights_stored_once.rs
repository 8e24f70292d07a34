//! Weights stored once across components, in every format: a generation export with `prefill`
//! and one-token `decode` (static cache, and the growing cache) totals at most 1.15x the bytes
//! of the forward export of the same checkpoint. The checkpoint is a fixture widened to a
//! vocabulary of 8192 so that weights dominate as in real models (on the 64-wide fixtures an
//! OpenVINO XML alone is a third of the weights). That the components still run in their upstream
//! runtimes with transformers' greedy tokens is checked by each format's generation test.

mod common;
use common::{causal_lm_request, widened};

use hfexport::core::metadata::ExportMetadata;
use hfexport::{AutoExportConfig, AutoHfExporter, Generation};
use std::collections::BTreeSet;
use std::path::Path;

fn export(model: &Path, config: serde_json::Value, out: &Path, generation: Option<Generation>) -> ExportMetadata {
    // generation needs symbolic lengths; the forward export is static (the reference: every
    // weight in the smallest program)
    let mut config = config;
    config["dynamic"] = generation.is_some().into();
    let req = causal_lm_request(model, out, generation);
    let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(&config).unwrap()).unwrap();
    exporter.export(&req, &mut |_| {}).unwrap_or_else(|e| panic!("{config}: {e}"))
}

/// Bytes of every file the components list, each file counted once.
fn component_bytes(dir: &Path, meta: &ExportMetadata) -> u64 {
    let files: BTreeSet<&str> = meta.components.iter().flat_map(|c| c.files.iter().map(String::as_str)).collect();
    files.iter().map(|f| std::fs::metadata(dir.join(f)).unwrap().len()).sum()
}

#[test]
fn prefill_and_decode_store_each_weight_once_in_every_format() {
    let tmp = tempfile::tempdir().unwrap();
    let model = widened("llama", 8192, &tmp.path().join("llama-wide"));
    let formats = [
        serde_json::json!({"export_format": "onnx"}),
        serde_json::json!({"export_format": "openvino", "stateful": false}),
        serde_json::json!({"export_format": "dynamo"}),
        serde_json::json!({"export_format": "executorch", "stateful": false}),
    ];
    let variants = [
        ("static", Generation { static_cache: Some(32), multi_token_decode: false }),
        ("growing", Generation { static_cache: None, multi_token_decode: false }),
    ];
    let mut report = vec![];
    for config in formats {
        let format = config["export_format"].as_str().unwrap().to_string();
        let forward_dir = tmp.path().join(format!("{format}-forward"));
        let forward = component_bytes(&forward_dir, &export(&model, config.clone(), &forward_dir, None));
        for (variant, generation) in variants {
            // ExecuTorch plans every tensor at a fixed bound: it exports static caches only
            if format == "executorch" && generation.static_cache.is_none() {
                continue;
            }
            let dir = tmp.path().join(format!("{format}-{variant}"));
            let meta = export(&model, config.clone(), &dir, Some(generation));
            let roles: Vec<_> = meta.components.iter().map(|c| c.spec.role).collect();
            // a growing cache's decode serves the prompt too
            let expected = if generation.static_cache.is_some() { 2 } else { 1 };
            assert_eq!(roles.len(), expected, "{format} {variant}: {roles:?}");
            let ratio = component_bytes(&dir, &meta) as f64 / forward as f64;
            report.push(format!("{format} {variant}: {ratio:.3}x"));
            assert!(ratio <= 1.15, "{format} {variant}: prefill + decode are {ratio:.3}x the forward export");
        }
    }
    eprintln!("{}", report.join("\n"));
}
