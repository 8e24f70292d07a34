//! Static-cache generation exports (`--for-generation --static-cache 32 --multi-token-decode`)
//! of every fixture, run by a plain Python onnxruntime greedy loop
//! (`tests/python/generate_onnx.py`) that sizes each cache buffer from the graph's input
//! metadata: once feeding `output.<name>` back as `input.<name>`, once binding each pair to one
//! OrtValue so the cache is updated in place (the script checks the bound buffer after each
//! step). Both give transformers' 16 greedy tokens.

use hfexport::core::metadata::ExportMetadata;
use hfexport::{AutoExportConfig, AutoHfExporter, DType, ExportRequest, Generation, Task};
use hfexport_models::safetensors::read_all;
use std::path::{Path, PathBuf};
use std::process::Command;

const FIXTURES: [&str; 5] = ["llama", "mistral", "qwen2", "qwen3", "llama_linear_tied"];

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn python() -> String {
    std::env::var("HFEXPORT_PYTHON").unwrap_or_else(|_| {
        panic!("HFEXPORT_PYTHON is not set: run `cargo xtask test` (it installs onnxruntime into .venv/)")
    })
}

fn export_decode(name: &str, out: &Path, generation: Generation, dynamic: bool) -> hfexport::Result<ExportMetadata> {
    let config =
        AutoExportConfig::from_dict(&serde_json::json!({"export_format": "onnx", "dynamic": dynamic})).unwrap();
    let req = ExportRequest {
        model: fixture(name),
        output: out.to_path_buf(),
        task: Task::CausalLm,
        dtype: DType::F32,
        force: false,
        generation: Some(generation),
    };
    AutoHfExporter::from_config(config)?.export(&req, &mut |_| {})
}

const STATIC_MULTI: Generation = Generation { static_cache: Some(32), multi_token_decode: true };

#[test]
fn greedy_tokens_match_transformers_feeding_back_and_bound_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/generate_onnx.py");
    let mut failures = vec![];
    for name in FIXTURES {
        let dir = tmp.path().join(name);
        let meta = export_decode(name, &dir, STATIC_MULTI, true).unwrap();
        let c = meta.component("decode").unwrap();
        assert_eq!(c.files, ["decode.onnx", "decode.onnx.data"]);
        assert_eq!(c.aliases.len(), c.inputs.len() - 3, "{name}: every cache output aliases its input");
        let want: Vec<i64> =
            read_all(fixture(name).join("golden.safetensors")).unwrap()["greedy.tokens"].as_i64().unwrap().to_vec();
        for mode in ["feed", "iobinding"] {
            let out = dir.join(format!("{mode}.json"));
            let o = Command::new(python())
                .arg(&script)
                .arg(dir.join("decode.onnx"))
                .arg(fixture(name).join("golden.safetensors"))
                .arg(mode)
                .arg(&out)
                .output()
                .expect("start python");
            assert!(o.status.success(), "{name} {mode}: {}", String::from_utf8_lossy(&o.stderr));
            let got: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
            let got: Vec<i64> = got["tokens"].as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).collect();
            if got != want {
                failures.push(format!("{name} {mode}: {got:?} != transformers' {want:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn unbuilt_generation_variants_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x");
    let e =
        export_decode("llama", &out, Generation { static_cache: None, multi_token_decode: false }, true).unwrap_err();
    assert!(e.to_string().contains("--static-cache N --multi-token-decode"), "{e}");
    let e = export_decode("llama", &out, STATIC_MULTI, false).unwrap_err();
    assert!(e.to_string().contains("--dynamic"), "{e}");
    assert!(!out.exists());
}
