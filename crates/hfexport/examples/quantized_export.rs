//! A quantized export from a recipe, checked in its runtime (`features = ["onnx-runtime"]`):
//! int4 layers in groups of 32, the head and the embeddings int8 per channel, one module kept
//! in float.
//!
//! ```sh
//! cargo run -p hfexport --features onnx-runtime --example quantized_export -- tests/fixtures/qwen3 qwen3-int4
//! ```
//!
//! `--verify` runs the export in ONNX Runtime against the reference evaluator on the same
//! quantized weights, and records how far quantization moved the logits from the float model.

use hfexport::core::metadata::ExportMetadata;
use hfexport::{AutoExportConfig, AutoHfExporter, DType, ExportRequest};
use std::path::Path;

/// The recipe as an export config spells it (`docs/quantization.md`).
fn recipe() -> serde_json::Value {
    serde_json::json!({
        "weights": "int4",
        "group_size": 32,
        "lm_head": "int8",
        "embeddings": "int8",
        "exclude": ["model.layers.0.mlp.down_proj"],
    })
}

/// Exports `model` quantized to `output` and verifies it in ONNX Runtime.
fn export(model: &Path, output: &Path) -> hfexport::Result<ExportMetadata> {
    let config = serde_json::json!({"export_format": "onnx", "dynamic": true, "quantizer": recipe()});
    let request = ExportRequest {
        model: model.to_path_buf(),
        output: output.to_path_buf(),
        task: None,
        dtype: DType::F32,
        force: true,
        generation: None,
    };
    let exporter = AutoHfExporter::from_config(AutoExportConfig::from_dict(&config)?)?.with_verify(true);
    exporter.export(&request, &mut |line| eprintln!("{line}"))
}

#[cfg_attr(test, allow(dead_code))]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, output] = args.as_slice() else {
        return Err("usage: quantized_export CHECKPOINT_DIR OUTPUT_DIR".into());
    };
    let meta = export(Path::new(model), Path::new(output))?;
    let v = meta.verification.ok_or("no verification recorded")?;
    println!("{}: max |diff| {:e} (atol {:e})", v.runtime, v.max_abs_diff, v.atol);
    if let Some(q) = v.against_float {
        println!(
            "against float: top-1 agreement {:.3}, max relative logit error {:.3}",
            q.top1_agreement, q.max_rel_logit_error
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo checkpoint quantizes, verifies in ONNX Runtime and keeps the excluded module
    /// in float.
    #[test]
    fn quantizes_and_verifies_the_demo_checkpoint() {
        let tmp = tempfile::tempdir().unwrap();
        let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/qwen3");
        let meta = export(&model, &tmp.path().join("out")).unwrap();
        let v = meta.verification.unwrap();
        assert!(v.max_abs_diff <= v.atol && v.activation_rounding.is_some(), "{v:?}");
        assert!(v.against_float.unwrap().top1_agreement > 0.5);
        let onnx = std::fs::read(tmp.path().join("out/onnx/model_q4.onnx")).unwrap();
        let has = |s: &str| onnx.windows(s.len()).any(|w| w == s.as_bytes());
        assert!(has("MatMulNBits") && has("model.layers.1.mlp.down_proj.weight_int4_g32"));
        assert!(has("model.layers.0.mlp.down_proj.weight") && !has("model.layers.0.mlp.down_proj.weight_int4"));
    }
}
