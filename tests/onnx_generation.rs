//! Generation exports of every fixture in the three cache variants (static cache with
//! multi-token decode, static cache with prefill + one-token decode, growing cache), run by a
//! plain Python onnxruntime greedy loop (`tests/python/generate_onnx.py`) that sizes each cache
//! buffer from the graph's input metadata: feeding `present.<name>` back as `past_key_values.<name>`, and
//! for static caches also binding each pair to one OrtValue so the cache is updated in place
//! (the script checks the bound buffer after each step). All give transformers' 16 greedy tokens.

mod common;
use common::{causal_lm_request, fixture, fixtures, python};

use hfexport::core::metadata::ExportMetadata;
use hfexport::{AutoExportConfig, AutoHfExporter, Generation};
use hfexport_models::safetensors::read_all;
use hfexport_models::{Checkpoint, GenerationConfig};
use std::path::{Path, PathBuf};
use std::process::Command;

fn export_decode(name: &str, out: &Path, generation: Generation, dynamic: bool) -> hfexport::Result<ExportMetadata> {
    export_decode_with(name, out, generation, serde_json::json!({"export_format": "onnx", "dynamic": dynamic}))
}

fn export_decode_with(
    name: &str,
    out: &Path,
    generation: Generation,
    config: serde_json::Value,
) -> hfexport::Result<ExportMetadata> {
    export_model_with(&fixture(name), out, generation, config)
}

fn export_model_with(
    model: &Path,
    out: &Path,
    generation: Generation,
    config: serde_json::Value,
) -> hfexport::Result<ExportMetadata> {
    let config = AutoExportConfig::from_dict(&config).unwrap();
    let req = causal_lm_request(model, out, Some(generation));
    AutoHfExporter::from_config(config)?.export(&req, &mut |_| {})
}

const STATIC_MULTI: Generation = Generation { static_cache: Some(32), multi_token_decode: true };

/// Runs the Python loop on every fixture's export of `generation`; returns the mismatches.
fn python_loops(generation: Generation, modes: &[&str], components: &[&str]) -> Vec<String> {
    let config = serde_json::json!({"export_format": "onnx", "dynamic": true});
    python_loops_on(&fixtures(), &config, generation, modes, components)
}

fn python_loops_on(
    names: &[&str],
    config: &serde_json::Value,
    generation: Generation,
    modes: &[&str],
    components: &[&str],
) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/generate_onnx.py");
    let mut failures = vec![];
    for &name in names {
        let dir = tmp.path().join(name);
        let meta = export_decode_with(name, &dir, generation, config.clone()).unwrap();
        let names: Vec<&str> = meta.components.iter().map(|c| c.name()).collect();
        assert_eq!(names, components, "{name}");
        let want: Vec<i64> =
            read_all(fixture(name).join("golden.safetensors")).unwrap()["greedy.tokens"].as_i64().unwrap().to_vec();
        for mode in modes {
            let out = dir.join(format!("{mode}.json"));
            let o = Command::new(python())
                .arg(&script)
                .arg(&dir)
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
    failures
}

#[test]
fn static_cache_multi_token_decode() {
    let failures = python_loops(STATIC_MULTI, &["feed", "iobinding"], &["decode"]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let tmp = tempfile::tempdir().unwrap();
    let meta = export_decode("qwen2", tmp.path(), STATIC_MULTI, true).unwrap();
    let c = meta.component("decode").unwrap();
    assert_eq!(c.aliases.len(), c.inputs.len() - 3, "every cache output aliases its input");
    assert_eq!(c.inputs[1].shape, ["1", "1", "sequence", "cache_len"]);
}

/// Three tokens in one call give the logits and caches of three single-token calls (not for
/// dynamic-NTK rope, whose frequencies depend on a call's longest position, as in transformers).
#[test]
fn three_tokens_at_once_equal_three_single_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/generate_onnx.py");
    for name in fixtures().into_iter().filter(|n| *n != "qwen3") {
        let dir = tmp.path().join(name);
        export_decode(name, &dir, STATIC_MULTI, true).unwrap();
        let o = Command::new(python())
            .arg(&script)
            .arg(&dir)
            .arg(fixture(name).join("golden.safetensors"))
            .arg("multitoken")
            .arg(dir.join("multi.json"))
            .output()
            .expect("start python");
        assert!(o.status.success(), "{name}: {}", String::from_utf8_lossy(&o.stderr));
    }
}

#[test]
fn static_cache_prefill_and_single_token_decode() {
    let generation = Generation { static_cache: Some(32), multi_token_decode: false };
    let failures = python_loops(generation, &["feed", "iobinding"], &["prefill", "decode"]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// With `ort_fusions: "cpu"` the mixture-of-experts fixtures' blocks are ONNX Runtime's
/// `com.microsoft.MoE` in both components, and still give transformers' tokens.
#[test]
fn ort_contrib_moe_prefill_and_decode() {
    let moe: Vec<&str> = fixtures()
        .into_iter()
        .filter(|n| hfexport_models::ModelConfig::from_dir(&fixture(n)).unwrap().moe.is_some())
        .collect();
    let config = serde_json::json!({"export_format": "onnx", "dynamic": true, "optimize": true, "ort_fusions": "cpu"});
    let generation = Generation { static_cache: Some(32), multi_token_decode: false };
    let failures = python_loops_on(&moe, &config, generation, &["iobinding"], &["prefill", "decode"]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A one-token decode step gathers each token's own experts (`…/gate_picked`); the prefill
/// runs every expert as wide matmuls weighted by the dense routing matrix.
#[test]
fn moe_decode_steps_gather_only_the_selected_experts() {
    let tmp = tempfile::tempdir().unwrap();
    let generation = Generation { static_cache: Some(32), multi_token_decode: false };
    export_decode("qwen3_moe", tmp.path(), generation, true).unwrap();
    let has = |file: &str, s: &str| {
        let b = std::fs::read(tmp.path().join("onnx").join(file)).unwrap();
        b.windows(s.len()).any(|w| w == s.as_bytes())
    };
    assert!(has("decode.onnx", "gate_picked") && !has("decode.onnx", "routing_dense"));
    assert!(has("prefill.onnx", "routing_dense") && !has("prefill.onnx", "gate_picked"));
}

/// One `decode` over a growing cache serves the prompt (over an empty past) and every step.
#[test]
fn growing_cache_decode_takes_the_prompt_and_the_steps() {
    let generation = Generation { static_cache: None, multi_token_decode: false };
    let failures = python_loops(generation, &["feed"], &["decode"]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The growing-cache `decode` over a left-padded batch of two prompts in onnxruntime gives
/// transformers' greedy tokens (`tests/python/batched_generation.py --onnx`): learned and rotary
/// positions, sliding windows, Llama 4's chunks.
#[test]
fn growing_cache_decode_takes_a_left_padded_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/batched_generation.py");
    let generation = Generation { static_cache: None, multi_token_decode: false };
    let mut failures = vec![];
    for name in ["llama", "gpt2", "gemma2", "llama4"] {
        let out = tmp.path().join(name);
        export_decode(name, &out, generation, true).unwrap();
        let o = Command::new(python()).arg(&script).arg("--onnx").arg(&out).arg(fixture(name)).output().unwrap();
        if !o.status.success() {
            failures.push(format!("{name}: {}", String::from_utf8_lossy(&o.stderr)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn generation_exports_need_dynamic_shapes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x");
    let e = export_decode("llama", &out, STATIC_MULTI, false).unwrap_err();
    assert!(e.to_string().contains("--dynamic"), "{e}");
    assert!(!out.exists());
}

/// `verify_export` on a folder made earlier: the plan is rebuilt from export.json (roles and
/// cache modes say which generation export it was) and every component runs in ONNX Runtime
/// against the reference evaluator.
#[test]
fn an_existing_generation_export_verifies_every_component() {
    let tmp = tempfile::tempdir().unwrap();
    let variants = [
        Generation { static_cache: Some(32), multi_token_decode: false },
        STATIC_MULTI,
        Generation { static_cache: None, multi_token_decode: false },
    ];
    for (i, generation) in variants.into_iter().enumerate() {
        let dir = tmp.path().join(format!("v{i}"));
        let meta = export_decode("qwen3", &dir, generation, true).unwrap();
        let v = hfexport::verify_export(&dir, &fixture("qwen3")).unwrap();
        assert!(v.runtime.starts_with("onnxruntime"), "{v:?}");
        assert!(v.max_abs_diff <= v.atol, "{v:?}");
        for c in &meta.components {
            let named = |i: &String| meta.components.len() == 1 || i.starts_with(&format!("{}: ", c.name()));
            assert!(v.inputs.iter().any(named), "component `{}` was not verified: {:?}", c.name(), v.inputs);
        }
    }
}

const GROWING: Generation = Generation { static_cache: None, multi_token_decode: false };

/// The EOS ids a `genai_config.json` names (an id or a list).
fn genai_eos(dir: &Path) -> Vec<i64> {
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("genai_config.json")).unwrap()).unwrap();
    match &config["model"]["eos_token_id"] {
        serde_json::Value::Array(ids) => ids.iter().map(|t| t.as_i64().unwrap()).collect(),
        id => id.as_i64().into_iter().collect(),
    }
}

/// `tokens` before the first of `eos`, where ONNX Runtime GenAI stops (its sequence leaves that
/// EOS out).
fn until_eos(tokens: &[i64], eos: &[i64]) -> Vec<i64> {
    let end = tokens.iter().position(|t| eos.contains(t)).unwrap_or(tokens.len());
    tokens[..end].to_vec()
}

/// `"genai": true` folders of every fixture, loaded by ONNX Runtime GenAI itself (`og.Model`
/// on the folder, tests/python/generate_genai.py, one process for all) give transformers'
/// greedy tokens, up to the first EOS token of the config, where GenAI stops (an EOS named only
/// by config.json counts, a class default does not, and a checkpoint naming none is refused, as
/// GenAI would stop at token 0 where transformers goes on); an int4 folder gives the tokens of a
/// plain onnxruntime loop over the same `decode.onnx`.
#[test]
fn genai_folders_give_transformers_tokens_in_onnxruntime_genai() {
    let tmp = tempfile::tempdir().unwrap();
    let genai = serde_json::json!({"export_format": "onnx", "dynamic": true, "genai": true});
    let (mut jobs, mut want) = (vec![], std::collections::BTreeMap::new());
    let mut job = |dir: &Path, golden: &Path, tokens: Vec<i64>| {
        let gold = read_all(golden).unwrap();
        let prompt = gold["greedy.prompt_ids"].as_i64().unwrap().to_vec();
        jobs.push(serde_json::json!([dir, prompt, tokens.len()]));
        want.insert(dir.display().to_string(), until_eos(&tokens, &genai_eos(dir)));
    };
    for name in fixtures() {
        let dir = tmp.path().join(name);
        let layers = Checkpoint::open(&fixture(name)).unwrap().config.layers;
        let attention: Vec<_> = layers.iter().filter_map(|l| l.attention()).collect();
        // GenAI's cache has one head size and one entry per layer: a latent-attention export,
        // one with per-layer heads or with layers reusing others' keys is refused, writing nothing
        let refusal = match () {
            _ if attention.len() < layers.len() => Some("latent-attention cache"),
            _ if attention.iter().any(|a| a.kv_source.is_some()) => Some("reuse an earlier layer's keys"),
            _ if attention
                .iter()
                .any(|a| (a.kv_heads, a.head_dim) != (attention[0].kv_heads, attention[0].head_dim)) =>
            {
                Some("per-layer heads")
            }
            _ => None,
        };
        if let Some(why) = refusal {
            let e = export_decode_with(name, &dir, GROWING, genai.clone()).unwrap_err().to_string();
            assert!(e.contains("genai") && e.contains(why), "{name}: {e}");
            assert!(!dir.exists(), "{name}: a refused export writes nothing");
            continue;
        }
        let golden = fixture(name).join("golden.safetensors");
        let tokens = read_all(&golden).unwrap()["greedy.tokens"].as_i64().unwrap().to_vec();
        let mut model = fixture(name);
        if GenerationConfig::stop_token_ids(&model).unwrap().is_empty() {
            // naming no EOS, it is refused (GenAI would stop at token 0); the same weights with
            // an EOS the greedy tokens never reach run
            let e = export_decode_with(name, &dir, GROWING, genai.clone()).unwrap_err().to_string();
            assert!(e.contains("names no eos_token_id"), "{name}: {e}");
            assert!(!dir.exists(), "{name}: a refused export writes nothing");
            let unreached = (0..).find(|t| !tokens.contains(t)).unwrap();
            model = copy_with_eos(tmp.path(), name, "generation_config.json", Some(unreached));
        }
        let meta = export_model_with(&model, &dir, GROWING, genai.clone()).unwrap();
        let names: Vec<&str> = meta.components.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["decode"], "{name}");
        job(&dir, &golden, tokens);
    }
    // an EOS named only by config.json (no generation_config.json) is where transformers stops:
    // a greedy token after the first two here, not LlamaConfig's default 2
    let golden = fixture("llama").join("golden.safetensors");
    let tokens = read_all(&golden).unwrap()["greedy.tokens"].as_i64().unwrap().to_vec();
    let stop = (2..tokens.len()).map(|i| tokens[i]).find(|t| !tokens[..2].contains(t)).unwrap();
    let eos_in_config = copy_with_eos(tmp.path(), "llama", "config.json", Some(stop));
    let dir = tmp.path().join("llama-eos-in-config-genai");
    export_model_with(&eos_in_config, &dir, GROWING, genai.clone()).unwrap();
    assert_eq!(genai_eos(&dir), [stop]);
    job(&dir, &golden, tokens);
    // none named: transformers stops nowhere, which GenAI cannot say (it would stop at token 0)
    let no_eos = copy_with_eos(tmp.path(), "llama", "config.json", None);
    let dir = tmp.path().join("llama-no-eos-genai");
    let e = export_model_with(&no_eos, &dir, GROWING, genai.clone()).unwrap_err().to_string();
    assert!(e.contains("genai") && e.contains("names no eos_token_id"), "{e}");
    assert!(!dir.exists(), "a refused export writes nothing");
    // int4: the reference is onnxruntime's own greedy loop over the folder's decode graph
    let dir = tmp.path().join("llama-int4");
    let mut quantized = genai.clone();
    quantized["quantizer"] = "int4".into();
    export_decode_with("llama", &dir, GROWING, quantized).unwrap();
    let golden = fixture("llama").join("golden.safetensors");
    let o = Command::new(python())
        .arg(common::script("generate_onnx.py"))
        .args([dir.as_os_str(), golden.as_os_str(), "feed".as_ref(), dir.join("ort.json").as_os_str()])
        .output()
        .expect("start python");
    assert!(o.status.success(), "int4 onnxruntime loop: {}", String::from_utf8_lossy(&o.stderr));
    let ort: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("ort.json")).unwrap()).unwrap();
    job(&dir, &golden, ort["tokens"].as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).collect());

    let (jobs_path, out) = (tmp.path().join("jobs.json"), tmp.path().join("tokens.json"));
    std::fs::write(&jobs_path, serde_json::to_string(&jobs).unwrap()).unwrap();
    let o = Command::new(python()).arg(common::script("generate_genai.py")).args([&jobs_path, &out]).output().unwrap();
    assert!(
        o.status.success(),
        "onnxruntime-genai (pinned in versions.toml [python.test]; `cargo xtask setup` installs it): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let got: std::collections::BTreeMap<String, Vec<i64>> =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let failures: Vec<String> = want
        .iter()
        .filter(|(d, w)| got.get(*d) != Some(w))
        .map(|(d, w)| format!("{d}: GenAI {:?} != {w:?}", got.get(d)))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A copy of fixture `name` whose special tokens are `eos` alone, named in `file` (the other of
/// config.json and generation_config.json names none; generation_config.json is left out when
/// `file` is config.json): `<tmp>/<name>-eos-<eos>-in-<file>`.
fn copy_with_eos(tmp: &Path, name: &str, file: &str, eos: Option<i64>) -> PathBuf {
    let dir = tmp.join(format!("{name}-eos-{}-in-{file}", eos.map_or("none".to_string(), |e| e.to_string())));
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    if file == "config.json" {
        std::fs::remove_file(dir.join("generation_config.json")).ok();
    }
    for f in ["config.json", "generation_config.json"].iter().filter(|f| dir.join(f).exists()) {
        let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join(f)).unwrap()).unwrap();
        let obj = json.as_object_mut().unwrap();
        for key in ["bos_token_id", "eos_token_id", "pad_token_id"] {
            obj.remove(key);
        }
        if let (true, Some(eos)) = (*f == file, eos) {
            obj.insert("eos_token_id".into(), eos.into());
        }
        std::fs::write(dir.join(f), serde_json::to_string(&json).unwrap()).unwrap();
    }
    dir
}

/// GenAI drives a growing cache: a static-cache export with `genai` is refused before anything
/// is written.
#[test]
fn genai_with_a_static_cache_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x");
    let config = serde_json::json!({"export_format": "onnx", "dynamic": true, "genai": true});
    let e = export_decode_with("llama", &out, STATIC_MULTI, config).unwrap_err();
    assert!(e.to_string().contains("growing cache") && e.to_string().contains("--static-cache"), "{e}");
    assert!(!out.exists());
}
