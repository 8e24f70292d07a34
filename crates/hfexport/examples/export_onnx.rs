//! Export a checkpoint to ONNX from a product that depends on hfexport with only the ONNX
//! writer (`hfexport = { version = "0.1", default-features = false, features = ["onnx"] }`):
//!
//! ```sh
//! cargo run -p hfexport --no-default-features --features onnx --example export_onnx -- tests/fixtures/qwen3 qwen3-onnx
//! ```
//!
//! Batch and sequence stay symbolic (`"dynamic": true`); the folder appears whole or not at all,
//! with `export.json` describing its inputs and outputs.

use hfexport::core::metadata::ExportMetadata;
use hfexport::{AutoExportConfig, AutoHfExporter, DType, ExportRequest};
use std::path::Path;

/// Exports the checkpoint in `model` to `output`, printing each stage on stderr.
fn export(model: &Path, output: &Path) -> hfexport::Result<ExportMetadata> {
    let config = AutoExportConfig::from_dict(&serde_json::json!({"export_format": "onnx", "dynamic": true}))?;
    let request = ExportRequest {
        model: model.to_path_buf(),
        output: output.to_path_buf(),
        task: None,
        dtype: DType::F32,
        force: true,
        generation: None,
    };
    AutoHfExporter::from_config(config)?.export(&request, &mut |line| eprintln!("{line}"))
}

#[cfg_attr(test, allow(dead_code))]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, output] = args.as_slice() else {
        return Err("usage: export_onnx CHECKPOINT_DIR OUTPUT_DIR".into());
    };
    let meta = export(Path::new(model), Path::new(output))?;
    for c in &meta.components {
        let inputs: Vec<String> = c.inputs.iter().map(|p| format!("{}[{}]", p.name, p.shape.join(", "))).collect();
        println!("{}: {} <- {}", c.name(), c.files.join(" + "), inputs.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo checkpoint exports to one dynamic graph with its weights beside it.
    #[test]
    fn exports_the_demo_checkpoint() {
        let tmp = tempfile::tempdir().unwrap();
        let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/qwen3");
        let meta = export(&model, &tmp.path().join("out")).unwrap();
        assert_eq!(meta.components[0].files, ["onnx/model.onnx", "onnx/model.onnx.data"]);
        assert_eq!(meta.components[0].inputs[0].shape, ["batch", "sequence"]);
        assert!(tmp.path().join("out/onnx/model.onnx").is_file());
    }
}
