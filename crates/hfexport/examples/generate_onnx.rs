//! Export a checkpoint for generation and generate with it in the same process, in ONNX Runtime
//! (`features = ["onnx-runtime"]`: the runtime library of the `onnxruntime` wheel is loaded at run
//! time, `ORT_DYLIB_PATH` or `.venv/`):
//!
//! ```sh
//! cargo run -p hfexport --features onnx-runtime --example generate_onnx -- tests/fixtures/qwen3 qwen3-gen 1,2,3
//! ```
//!
//! The export is a static cache of 64 positions updated in place, and one multi-token decode
//! graph that also takes the prompt; greedy decoding stops after 16 tokens.

use hfexport::core::generation::Generated;
use hfexport::{AutoExportConfig, AutoHfExporter, DType, ExportFormat, ExportRequest, Generation};
use std::path::Path;

/// Exports `model` to `output` for generation, then generates `max_new` tokens after `prompt`.
fn export_and_generate(model: &Path, output: &Path, prompt: &[i64], max_new: usize) -> hfexport::Result<Generated> {
    let config = AutoExportConfig::from_dict(&serde_json::json!({"export_format": "onnx", "dynamic": true}))?;
    let request = ExportRequest {
        model: model.to_path_buf(),
        output: output.to_path_buf(),
        task: None,
        dtype: DType::F32,
        force: true,
        generation: Some(Generation { static_cache: Some(64), multi_token_decode: true }),
    };
    AutoHfExporter::from_config(config)?.export(&request, &mut |line| eprintln!("{line}"))?;
    let mut generator = hfexport::backend(ExportFormat::Onnx)?.runtime()?.open_generator(output)?;
    Ok(generator.generate(prompt, max_new, &[])?)
}

#[cfg_attr(test, allow(dead_code))]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, output, prompt] = args.as_slice() else {
        return Err("usage: generate_onnx CHECKPOINT_DIR OUTPUT_DIR PROMPT_IDS (comma separated)".into());
    };
    let prompt = prompt.split(',').map(|t| t.trim().parse::<i64>()).collect::<Result<Vec<_>, _>>()?;
    let out = export_and_generate(Path::new(model), Path::new(output), &prompt, 16)?;
    println!("{:?}", out.tokens);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hfexport::models::safetensors::read_all;

    /// The demo checkpoint's greedy tokens are transformers' (its fixture's golden).
    #[test]
    fn generates_transformers_tokens() {
        let tmp = tempfile::tempdir().unwrap();
        let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/qwen3");
        let gold = read_all(model.join("golden.safetensors")).unwrap();
        let (prompt, want) = (gold["greedy.prompt_ids"].as_i64().unwrap(), gold["greedy.tokens"].as_i64().unwrap());
        let out = export_and_generate(&model, &tmp.path().join("out"), prompt, want.len()).unwrap();
        assert_eq!(out.tokens, want);
    }
}
