//! `hfexport generate` end to end: every fixture exported with
//! `--for-generation --static-cache 32 --multi-token-decode --dynamic` and generated greedily in
//! ONNX Runtime gives transformers' 16 tokens; the library's `Generator` updates the cache
//! buffers it bound in place (no copy between steps); bad input is a clear error (exit 1).
//!
//! ONNX Runtime is the `onnxruntime==1.32.0` wheel in the repository's `.venv/` (what
//! `cargo xtask test` installs); the binary and the library find it by searching upward from
//! the current folder and from the running executable. No Python is run.

mod common;

use common::*;
use hfexport::onnx::generate::{Generator, StopReason};
use hfexport_models::safetensors::read_all;
use std::path::Path;
use std::process::Output;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `hfexport export --format onnx` of a fixture into `out`, with `generation` flags (none: a
/// forward export).
fn export(name: &str, out: &Path, generation: &[&str]) {
    let model = fixture(name);
    let mut args = vec!["export", "--model", s(&model), "--format", "onnx", "--quiet", "--output", s(out)];
    args.extend_from_slice(generation);
    hfexport_here(&args).unwrap_or_else(|e| panic!("export {name}: {e}"));
}

const STATIC_MULTI: [&str; 5] = ["--dynamic", "--for-generation", "--static-cache", "32", "--multi-token-decode"];

/// `greedy.prompt_ids` [1, 5] and `greedy.tokens` [1, 16] of a fixture's goldens.
fn golden(name: &str) -> (Vec<i64>, Vec<i64>) {
    let g = read_all(fixture(name).join("golden.safetensors")).unwrap();
    (g["greedy.prompt_ids"].as_i64().unwrap().to_vec(), g["greedy.tokens"].as_i64().unwrap().to_vec())
}

/// `eos_token_id` of a fixture's generation_config.json (int, list or absent).
fn fixture_eos(name: &str) -> Vec<i64> {
    let text = std::fs::read_to_string(fixture(name).join("generation_config.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    match &v["eos_token_id"] {
        serde_json::Value::Null => vec![],
        serde_json::Value::Array(a) => a.iter().map(|x| x.as_i64().unwrap()).collect(),
        x => vec![x.as_i64().unwrap()],
    }
}

fn join(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// The ids on the `ids: ` line of `generate`'s output.
fn printed_ids(o: &Output) -> Vec<i64> {
    let out = stdout(o);
    let line = out.lines().find_map(|l| l.strip_prefix("ids: ")).unwrap_or_else(|| panic!("no `ids:` line in {out}"));
    line.split(',').filter(|t| !t.is_empty()).map(|t| t.parse().unwrap()).collect()
}

/// The three generation exports: static cache with multi-token decode (one `decode`), static
/// cache with `prefill` and a one-token `decode`, growing cache (`prefill` and `decode`).
const VARIANTS: [(&str, &[&str]); 3] = [
    ("static-multi", &STATIC_MULTI),
    ("static-prefill", &["--dynamic", "--for-generation", "--static-cache", "32"]),
    ("growing", &["--dynamic", "--for-generation"]),
];

#[test]
fn generate_prints_transformers_greedy_tokens_for_every_fixture_and_cache_variant() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    let first = fixtures()[0];
    for (name, (variant, flags)) in fixtures().iter().flat_map(|&n| VARIANTS.iter().map(move |&v| (n, v))) {
        let dir = tmp.path().join(format!("{name}-{variant}"));
        export(name, &dir, flags);
        let (prompt, want) = golden(name);
        assert_eq!((prompt.len(), want.len()), (5, 16), "{name}: goldens");
        // The EOS ids of generation_config.json (copied into the export) never occur in the
        // goldens, so all 16 tokens are generated.
        let eos = fixture_eos(name);
        assert!(want.iter().all(|t| !eos.contains(t)), "{name}: golden tokens contain an EOS id {eos:?}");
        // the command line for the first fixture, its generator in this process for the rest
        let got = match name == first {
            true => {
                let o = hfexport(&["generate", s(&dir), "--prompt-ids", &join(&prompt), "--max-new-tokens", "16"]);
                assert!(o.status.success(), "{name}: {}", stderr(&o));
                assert!(stdout(&o).contains(&format!("prompt: {}", join(&prompt))), "{name}: {}", stdout(&o));
                assert!(stderr(&o).contains("stopped after --max-new-tokens 16"), "{name}: {}", stderr(&o));
                printed_ids(&o)
            }
            false => generate_here(&dir, &prompt, 16).0,
        };
        if got != want {
            failures.push(format!("{name} ({variant}): {got:?} != transformers' {want:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn generation_stops_at_an_eos_id_of_generation_config() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("llama");
    export("llama", &dir, &STATIC_MULTI);
    let (prompt, want) = golden("llama");
    // Make the 7th golden token an EOS (as a list, which generation_config.json allows).
    let eos = want[6];
    assert!(want[..6].iter().all(|&t| t != eos));
    std::fs::write(dir.join("generation_config.json"), format!("{{\"eos_token_id\": [{eos}, 100000]}}")).unwrap();
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", &join(&prompt), "--max-new-tokens", "16"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(printed_ids(&o), want[..7]);
    assert!(stderr(&o).contains(&format!("stopped at EOS token {eos}")), "{}", stderr(&o));
    // Without generation_config.json there is no EOS: 20 new tokens (5 + 19 slots).
    std::fs::remove_file(dir.join("generation_config.json")).unwrap();
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", &join(&prompt), "--max-new-tokens", "20"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(printed_ids(&o)[..16], want[..]);
}

/// Sum of |x| over slot `slot` of a cache [1, heads, slots, head_dim].
fn slot_magnitude(t: &hfexport_core::Tensor, slot: usize) -> f32 {
    let [1, heads, slots, dim] = *t.shape() else { panic!("cache shape {:?}", t.shape()) };
    let x = t.as_f32().unwrap();
    (0..heads).flat_map(|h| x[(h * slots + slot) * dim..(h * slots + slot + 1) * dim].iter()).map(|v| v.abs()).sum()
}

#[test]
fn generator_updates_the_bound_cache_buffers_in_place() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    for name in ["qwen3", "mistral"] {
        let dir = tmp.path().join(name);
        export(name, &dir, &STATIC_MULTI);
        let (prompt, want) = golden(name);
        let mut g = Generator::load(&dir).unwrap();
        assert_eq!(g.cache_slots(), Some(32));
        assert_eq!(g.session().vocab_size(), Some(256));
        assert!(g.session().prefill_path().is_none(), "a multi-token decode export has no prefill");
        let names: Vec<String> = g.session().cache_names().iter().map(|n| n.to_string()).collect();
        assert_eq!(names.len(), 4, "{name}: two layers, keys and values: {names:?}");
        assert!(names.iter().any(|n| n == "0.key"), "{names:?}");
        let addresses: Vec<usize> = names.iter().map(|n| g.session().cache_address(n).unwrap()).collect();
        for n in &names {
            let c = g.session().cache(n).unwrap();
            assert_eq!(c.shape()[2], 32, "{name} {n}: the symbolic axis is the cache length");
            assert!(c.as_f32().unwrap().iter().all(|&v| v == 0.0), "{name} {n}: a new cache is zeros");
        }

        // Prefill: the bound buffers hold the prompt's keys/values at slots 0..5, zeros after.
        let logits = g.prefill(&prompt).unwrap();
        assert_eq!(g.position(), 5);
        assert_eq!(hfexport::onnx::generate::argmax(&logits) as i64, want[0]);
        for n in &names {
            let c = g.session().cache(n).unwrap();
            for slot in 0..32 {
                let m = slot_magnitude(&c, slot);
                assert_eq!(m > 0.0, slot < 5, "{name} {n} slot {slot} after the prompt: |sum| {m}");
            }
        }
        // One step: slot 5 is written in the same buffers, which were never copied back.
        let before: Vec<hfexport_core::Tensor> = names.iter().map(|n| g.session().cache(n).unwrap()).collect();
        let logits = g.step(want[0]).unwrap();
        assert_eq!(g.position(), 6);
        assert_eq!(hfexport::onnx::generate::argmax(&logits) as i64, want[1]);
        for (n, old) in names.iter().zip(&before) {
            let c = g.session().cache(n).unwrap();
            assert!(slot_magnitude(&c, 5) > 0.0, "{name} {n}: slot 5 was not written in place");
            assert!((6..32).all(|s| slot_magnitude(&c, s) == 0.0), "{name} {n}: slots past 5 were written");
            // The prompt's slots are left as they were.
            let (a, b) = (c.as_f32().unwrap(), old.as_f32().unwrap());
            let (heads, dim) = (c.shape()[1], c.shape()[3]);
            for h in 0..heads {
                let prompt_slots = |x: &[f32]| x[h * 32 * dim..(h * 32 + 5) * dim].to_vec();
                assert_eq!(prompt_slots(a), prompt_slots(b), "{name} {n}: head {h}, slots 0..5 changed by a step");
            }
        }
        let now: Vec<usize> = names.iter().map(|n| g.session().cache_address(n).unwrap()).collect();
        assert_eq!(now, addresses, "{name}: the cache buffers moved");

        // The whole loop, twice (the second reuses the dirty buffers: the mask hides stale slots).
        for _ in 0..2 {
            assert_eq!(g.generate(&prompt, 16, &[]).unwrap(), want, "{name}");
            assert_eq!(g.last_stop(), Some(StopReason::MaxNewTokens));
            assert_eq!(g.position(), 5 + 15);
        }
        let now: Vec<usize> = names.iter().map(|n| g.session().cache_address(n).unwrap()).collect();
        assert_eq!(now, addresses, "{name}: the cache buffers moved");
        // EOS ends the loop, the EOS token included.
        let k = (1..16).find(|&k| !want[..k].contains(&want[k])).unwrap();
        assert_eq!(g.generate(&prompt, 16, &[want[k]]).unwrap(), want[..=k]);
        assert_eq!(g.last_stop(), Some(StopReason::Eos(want[k])));
    }
}

#[test]
fn generator_errors_are_clear() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("llama");
    export("llama", &dir, &STATIC_MULTI);
    let mut g = Generator::load(&dir).unwrap();
    let e = g.generate(&[], 4, &[]).unwrap_err().to_string();
    assert!(e.contains("prompt is empty"), "{e}");
    let long: Vec<i64> = (0..40).collect();
    let e = g.generate(&long, 4, &[]).unwrap_err().to_string();
    assert!(e.contains("prompt of 40 tokens does not fit a static cache of 32 slots"), "{e}");
    // 30 prompt tokens + 3 new need slots 0..=31 for the prompt and two steps: 32 slots hold
    // 30 + 2, so the third step has no slot.
    let prompt: Vec<i64> = (1..=30).collect();
    assert_eq!(g.generate(&prompt, 3, &[]).unwrap().len(), 3);
    let e = g.generate(&prompt, 4, &[]).unwrap_err().to_string();
    assert!(e.contains("generation reached the end of the static cache of 32 slots after 3 new tokens"), "{e}");
    // A full prompt: exactly one new token fits.
    let full: Vec<i64> = (1..=32).collect();
    assert_eq!(g.generate(&full, 1, &[]).unwrap().len(), 1);
    let e = g.step(5).unwrap_err().to_string();
    assert!(e.contains("static cache of 32 slots is full"), "{e}");
    let e = g.generate(&[1, 256], 1, &[]).unwrap_err().to_string();
    assert!(e.contains("token id 256") && e.contains("vocabulary of 256"), "{e}");
    assert_eq!(g.generate(&[1, 2], 0, &[]).unwrap(), Vec::<i64>::new());
}

#[test]
fn bad_input_is_exit_1_with_a_clear_message() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("llama");
    export("llama", &dir, &STATIC_MULTI);

    // A prompt longer than the cache.
    let long: Vec<i64> = (1..=40).collect();
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", &join(&long)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("prompt of 40 tokens does not fit a static cache of 32 slots"), "{}", stderr(&o));

    // --prompt without tokenizer files.
    let o = hfexport(&["generate", s(&dir), "--prompt", "hello"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("no tokenizer files") && e.contains("--prompt-ids"), "{e}");

    // Not token ids.
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", "1,x,3"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("`x` is not a token id"), "{}", stderr(&o));

    // Generation running past the cache: an error (not a silent stop), with what was made.
    let prompt: Vec<i64> = (1..=30).collect();
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", &join(&prompt), "--max-new-tokens", "8"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("reached the end of the static cache of 32 slots"), "{}", stderr(&o));

    // A forward export (component `model` only).
    let fwd = tmp.path().join("forward");
    export("llama", &fwd, &[]);
    let o = hfexport(&["generate", s(&fwd), "--prompt-ids", "1,2,3"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("no `decode` component") && e.contains("components: model"), "{e}");
    assert!(e.contains("--static-cache"), "{e}");

    // A checkpoint folder, not an export.
    let o = hfexport(&["generate", s(&fixture("llama")), "--prompt-ids", "1,2,3"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("not an export folder"), "{}", stderr(&o));

    // Neither --prompt-ids nor --prompt: a usage error.
    let o = hfexport(&["generate", s(&dir)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--prompt-ids") && stderr(&o).contains("--prompt"), "{}", stderr(&o));
}

/// A word-level tokenizer.json whose token `t<i>` is id `i`, for the 256-token fixtures.
fn word_level_tokenizer() -> String {
    let vocab: serde_json::Map<String, serde_json::Value> =
        (0..256).map(|i| (format!("t{i}"), serde_json::Value::from(i))).collect();
    serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "t0"}
    })
    .to_string()
}

#[test]
fn prompt_text_goes_through_the_exports_tokenizer() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("qwen2");
    export("qwen2", &dir, &STATIC_MULTI);
    std::fs::write(dir.join("tokenizer.json"), word_level_tokenizer()).unwrap();
    let (prompt, want) = golden("qwen2");
    let text: Vec<String> = prompt.iter().map(|t| format!("t{t}")).collect();
    let o = hfexport(&["generate", s(&dir), "--prompt", &text.join(" "), "--max-new-tokens", "16"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(&format!("prompt: {}", join(&prompt))), "{}", stdout(&o));
    assert_eq!(printed_ids(&o), want);
    let words: Vec<String> = want.iter().map(|t| format!("t{t}")).collect();
    assert!(stdout(&o).contains(&format!("text: {}", words.join(" "))), "{}", stdout(&o));
    // With --prompt-ids the text is printed too.
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", &join(&prompt), "--max-new-tokens", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(&format!("text: {}", words[..2].join(" "))), "{}", stdout(&o));
    // --json: one object on stdout with the same ids and text, the stop and the timings
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", &join(&prompt), "--max-new-tokens", "16", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    let ids: Vec<i64> = v["ids"].as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).collect();
    assert_eq!((ids, v["text"].as_str()), (want.clone(), Some(words.join(" ").as_str())), "{v}");
    assert_eq!((v["stop"].as_str(), v["cache"]["static_slots"].as_u64()), (Some("max_new_tokens"), Some(32)), "{v}");
    assert!(v["runtime"].as_str().unwrap().starts_with("onnxruntime"), "{v}");
    assert!(v["timings"]["decode_ms_per_token"].as_f64().unwrap() > 0.0, "{v}");
    // A broken tokenizer.json is named.
    std::fs::write(dir.join("tokenizer.json"), "{").unwrap();
    let o = hfexport(&["generate", s(&dir), "--prompt", "t1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("tokenizer.json") && stderr(&o).contains("cannot load the tokenizer"),
        "{}",
        stderr(&o)
    );
}

/// The README's demo speaks: the demo checkpoint's tokenizer (a BPE of exactly its 256 ids)
/// encodes a prompt and decodes transformers' greedy tokens to text.
#[test]
fn the_demo_checkpoint_reads_and_prints_text() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    export("qwen3", &dir, &STATIC_MULTI);
    assert!(dir.join("tokenizer.json").is_file(), "the export carries the demo's tokenizer");
    let o = hfexport(&["generate", s(&dir), "--prompt", "Alice was beginning", "--max-new-tokens", "4", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    let prompt: Vec<i64> = v["prompt"].as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).collect();
    assert!(!prompt.is_empty() && prompt.iter().all(|&t| (0..256).contains(&t)), "{v}");
    let (prompt, want) = golden("qwen3");
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", &join(&prompt), "--max-new-tokens", "16", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    let ids: Vec<i64> = v["ids"].as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).collect();
    assert_eq!(ids, want);
    assert!(v["text"].as_str().is_some_and(|t| t.trim().len() >= 8), "{v}");
}

#[test]
fn other_static_cache_exports_generate_too() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let (prompt, want) = golden("qwen3");
    // Static cache without --multi-token-decode: the prompt goes through `prefill`, each new
    // token through a one-token `decode`, both bound to the same cache buffers.
    let dir = tmp.path().join("prefill-decode");
    export("qwen3", &dir, &["--dynamic", "--for-generation", "--static-cache", "32"]);
    let g = Generator::load(&dir).unwrap();
    assert!(g.session().prefill_path().is_some_and(|p| p.ends_with("prefill.onnx")));
    drop(g);
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", &join(&prompt), "--max-new-tokens", "16"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(printed_ids(&o), want);
    // float16 caches and logits.
    let dir = tmp.path().join("f16");
    let mut flags = STATIC_MULTI.to_vec();
    flags.extend(["--dtype", "float16"]);
    export("qwen3", &dir, &flags);
    let o = hfexport(&["generate", s(&dir), "--prompt-ids", &join(&prompt), "--max-new-tokens", "16"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let got = printed_ids(&o);
    assert_eq!((got.len(), got[0]), (16, want[0]), "{got:?} vs {want:?}");
}

/// ONNX Runtime is found where users install it. With the binary, the current folder and the
/// export all outside the repository (no `.venv/` above any of them), it is found in the
/// active virtual environment (`VIRTUAL_ENV`, here the repository's `.venv/`); without one
/// and with no python3 on `PATH`, the error lists every place searched and the pip command.
#[test]
fn onnxruntime_is_found_in_the_active_virtual_environment() {
    require_onnxruntime();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("growing");
    export("llama", &dir, &["--dynamic", "--for-generation"]);
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let exe = bin.join("hfexport");
    std::fs::hard_link(env!("CARGO_BIN_EXE_hfexport"), &exe)
        .or_else(|_| std::fs::copy(env!("CARGO_BIN_EXE_hfexport"), &exe).map(|_| ()))
        .unwrap();
    let run = |venv: Option<&Path>| {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["generate", s(&dir), "--prompt-ids", "1,2,3", "--max-new-tokens", "2"]);
        cmd.current_dir(tmp.path()).env("PATH", &bin).env_remove("ORT_DYLIB_PATH").env_remove("VIRTUAL_ENV");
        if let Some(v) = venv {
            cmd.env("VIRTUAL_ENV", v);
        }
        cmd.output().unwrap()
    };
    let o = run(Some(&repo().join(".venv")));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(printed_ids(&o).len(), 2);
    let o = run(None);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let e = stderr(&o);
    for needle in [
        format!("a .venv/ above {}", tmp.path().display()),
        "VIRTUAL_ENV is not set".into(),
        "python3 on PATH (no python3 answered)".into(),
        "pip install onnxruntime==1.32.0".into(),
    ] {
        assert!(e.contains(&needle), "missing `{needle}` in: {e}");
    }
}
