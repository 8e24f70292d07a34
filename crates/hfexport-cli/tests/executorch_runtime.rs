//! The ExecuTorch runner end to end (the executorch 1.5.1 wheel's C++ runtime, linked through
//! the `cxx` bridge, `shim/et_bridge.cpp`): `export --format executorch --verify` checks every fixture with both
//! backends before the folder appears, `run` on the `.pte` reproduces transformers' logits (and
//! the evaluator's at a shape no sample used), `generate` gives transformers' 16 greedy tokens
//! for every fixture, over the default LLM-runner layout (the cache in the program) and the
//! explicit-cache one, copying and zero-copy, and the zero-copy loop writes into the generator's
//! own cache buffers. A corrupt `.pte` given to `run` is a clear error. No Python is run.

mod common;

use common::*;
use hfexport_core::metadata::ExportMetadata;
use hfexport_core::Tensor;
use hfexport_models::safetensors::{read_all, write_safetensors};
use std::collections::BTreeMap;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The explicit-cache layout (`stateful` false) with `alloc_*` false: nothing planned, every
/// input and output is the caller's memory.
const ZERO_COPY: &str =
    r#""stateful": false, "alloc_graph_input": false, "alloc_graph_output": false, "alloc_mutable_buffers": false"#;

fn export(name: &str, out: &Path, config: &str, extra: &[&str]) {
    let cfg = out.with_extension("json");
    std::fs::write(&cfg, format!("{{\"export_format\": \"executorch\", {config}}}")).unwrap();
    let model = fixture(name);
    let mut args = vec!["export", "--model", s(&model), "--config", s(&cfg), "--quiet", "--output", s(out)];
    args.extend_from_slice(extra);
    hfexport_here(&args).unwrap_or_else(|e| panic!("{name} {config} {extra:?}: export failed: {e}"));
}

fn run(tmp: &Path, tag: &str, path: &Path, feeds: &[(&str, &Tensor)]) -> BTreeMap<String, Tensor> {
    let inp = tmp.join(format!("{tag}-in.safetensors"));
    write_safetensors(&inp, feeds, &BTreeMap::new()).unwrap();
    let res = tmp.join(format!("{tag}-out.safetensors"));
    let run = hfexport_here(&["run", s(path), "--inputs", s(&inp), "--outputs", s(&res)]);
    run.unwrap_or_else(|e| panic!("{tag}: run failed: {e}"));
    read_all(&res).unwrap()
}

const BOUNDS: &str = "--dynamic-shapes";
const SHAPES: &str = r#"{"input_ids": {"0": {"name": "batch", "max": 4}, "1": {"name": "sequence", "max": 16}},
    "attention_mask": {"0": {"name": "batch"}, "1": {"name": "sequence"}}}"#;

#[test]
fn verified_pte_exports_run_in_executorch_like_transformers() {
    require_executorch();
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    let (batch, len) = (3usize, 11usize);
    let ids = Tensor::i64(vec![batch, len], (0..(batch * len) as i64).map(|i| (i * 37 + 5) % 200).collect()).unwrap();
    let mask =
        Tensor::i64(vec![batch, len], (0..batch * len).map(|i| i64::from(i >= len || i % len >= 4)).collect()).unwrap();
    for (backend, atol) in [("xnnpack", 1e-3f32), ("portable", 1e-4)] {
        for name in fixtures() {
            let out = tmp.path().join(format!("{name}-{backend}"));
            export(name, &out, &format!("\"backend\": \"{backend}\""), &[BOUNDS, SHAPES, "--verify"]);
            let v = ExportMetadata::read(&out).unwrap().verification.unwrap();
            assert!(v.runtime.starts_with("executorch 1.5.1"), "{name}: {v:?}");
            assert!(v.max_abs_diff <= atol && v.inputs.len() == 2, "{name} {backend}: {v:?}");
            let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
            for case in ["single", "batch"] {
                let mask = &gold[&format!("{case}.attention_mask")];
                let feeds = [("input_ids", &gold[&format!("{case}.input_ids")]), ("attention_mask", mask)];
                let got = run(tmp.path(), &format!("{name}-{backend}-{case}"), &out, &feeds);
                let d = worst_unpadded(&got["logits"], &gold[&format!("{case}.logits")], mask);
                if d > atol {
                    failures.push(format!("{name} {backend} {case}: worst |diff| {d:e} against transformers"));
                }
            }
            let feeds = [("input_ids", &ids), ("attention_mask", &mask)];
            let got = run(tmp.path(), &format!("{name}-{backend}-unseen"), &out, &feeds);
            let want = run(tmp.path(), &format!("{name}-{backend}-unseen-ref"), &fixture(name), &feeds);
            let d = worst_unpadded(&got["logits"], &want["logits"], &mask);
            if d > atol {
                failures.push(format!("{name} {backend} [{batch}, {len}]: worst |diff| {d:e} against the evaluator"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn executorch_generate_gives_transformers_tokens_copying_and_zero_copy() {
    require_executorch();
    let tmp = tempfile::tempdir().unwrap();
    let zero_copy_xnnpack = format!("\"backend\": \"xnnpack\", {ZERO_COPY}");
    let zero_copy_portable = format!("\"backend\": \"portable\", {ZERO_COPY}");
    let variants: [(&str, &str, &[&str]); 3] = [
        // the default: ExecuTorch's LLM-runner layout, the cache in the program
        ("xnnpack-stateful", "\"backend\": \"xnnpack\"", &[]),
        ("xnnpack-zero-copy-multi", &zero_copy_xnnpack, &["--static-cache", "32", "--multi-token-decode"]),
        ("portable-zero-copy-prefill", &zero_copy_portable, &["--static-cache", "32"]),
    ];
    let mut failures = vec![];
    for (i, name) in fixtures().into_iter().enumerate() {
        let g = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let join = |t: &Tensor| t.as_i64().unwrap().iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        let (prompt, want) = (join(&g["greedy.prompt_ids"]), join(&g["greedy.tokens"]));
        for (variant, config, flags) in variants {
            let out = tmp.path().join(format!("{name}-{variant}"));
            let mut args = vec!["--dynamic", "--for-generation", "--verify"];
            args.extend_from_slice(flags);
            export(name, &out, config, &args);
            // the command line for the first fixture, its generator in this process for the rest
            let (got, kind) = if i == 0 {
                let o = hfexport(&["generate", s(&out), "--prompt-ids", &prompt, "--max-new-tokens", "16"]);
                assert!(o.status.success(), "{name} {variant}: {}", stderr(&o));
                assert!(stderr(&o).contains("executorch 1.5.1"), "{}", stderr(&o));
                let kind = ["zero-copy", "stateful"].into_iter().find(|k| stderr(&o).contains(k)).unwrap_or("");
                (stdout(&o).lines().find_map(|l| l.strip_prefix("ids: ")).unwrap_or_default().to_string(), kind)
            } else {
                let (tokens, kind) = generate_here(&out, g["greedy.prompt_ids"].as_i64().unwrap(), 16);
                (tokens.iter().map(i64::to_string).collect::<Vec<_>>().join(","), kind)
            };
            assert_eq!(kind == "zero-copy", variant.contains("zero-copy"), "{name} {variant}: {kind}");
            assert_eq!(kind == "stateful", variant.contains("stateful"), "{name} {variant}: {kind}");
            if got != want {
                failures.push(format!("{name} {variant}: {got} != transformers' {want}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn corrupt_pte_files_are_clear_errors() {
    require_executorch();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("llama");
    export("llama", &out, "\"backend\": \"xnnpack\"", &[]);
    let ids = Tensor::i64(vec![1, 16], (0..16).collect()).unwrap();
    let mask = Tensor::i64(vec![1, 16], vec![1; 16]).unwrap();
    let got = run(tmp.path(), "ok", &out, &[("input_ids", &ids), ("attention_mask", &mask)]);
    assert_eq!(got["logits"].shape(), &[1, 16, 256]);
    let pte = out.join("model.pte");
    let good = std::fs::read(&pte).unwrap();
    forget_file_records(&out);
    let inp = tmp.path().join("in.safetensors");
    write_safetensors(&inp, &[("input_ids", &ids), ("attention_mask", &mask)], &BTreeMap::new()).unwrap();
    let res = tmp.path().join("out.safetensors");
    let expect = |bytes: &[u8], want: &str| {
        std::fs::write(&pte, bytes).unwrap();
        let o = hfexport(&["run", s(&out), "--inputs", s(&inp), "--outputs", s(&res)]);
        assert_eq!(o.status.code(), Some(1), "{want}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("model.pte") && e.contains(want) && !e.contains("panicked"), "{want}: {e}");
    };
    expect(&good[..good.len() / 2], "truncated");
    expect(b"definitely not a program", "ET12");
    let mut bad = good.clone();
    bad[40..48].copy_from_slice(&[0xff; 8]);
    expect(&bad, "does not verify");
    // a length past the program's bound is refused before it reaches a kernel
    std::fs::write(&pte, &good).unwrap();
    let long = Tensor::i64(vec![1, 17], (0..17).collect()).unwrap();
    let long_mask = Tensor::i64(vec![1, 17], vec![1; 17]).unwrap();
    write_safetensors(&inp, &[("input_ids", &long), ("attention_mask", &long_mask)], &BTreeMap::new()).unwrap();
    let o = hfexport(&["run", s(&out), "--inputs", s(&inp), "--outputs", s(&res)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("past the program's bound"), "{}", stderr(&o));
}

#[cfg(feature = "executorch-runtime")]
mod zero_copy {
    use super::*;
    use hfexport::executorch::generate::EtGenerator;

    /// With nothing planned, the decode method's updated-cache output is the generator's own
    /// buffer: same address, the prompt's and generated tokens' slots written, the rest zero.
    /// With planned caches, the output is the arena's copy instead.
    #[test]
    fn the_zero_copy_loop_writes_into_the_generators_cache_buffers() {
        require_executorch();
        let tmp = tempfile::tempdir().unwrap();
        let g = read_all(fixture("qwen3").join("golden.safetensors")).unwrap();
        let prompt = g["greedy.prompt_ids"].as_i64().unwrap().to_vec();
        let want = g["greedy.tokens"].as_i64().unwrap().to_vec();
        for (variant, config) in
            [("zero-copy", ZERO_COPY), ("planned", "\"backend\": \"xnnpack\", \"stateful\": false")]
        {
            let out = tmp.path().join(variant);
            export("qwen3", &out, config, &["--dynamic", "--for-generation", "--static-cache", "32"]);
            let mut gen = EtGenerator::load(&out).unwrap();
            assert_eq!(gen.session().zero_copy(), variant == "zero-copy");
            assert_eq!(gen.generate(&prompt, 16, &[]).unwrap(), want, "{variant}");
            let same = gen.session().decode_cache_output(0).unwrap() == gen.session().cache(0).as_ptr();
            assert_eq!(same, variant == "zero-copy", "{variant}: the cache output is the generator's buffer");
            // keys [1, kv_heads, 32, head_dim] f32: slot s of every head
            let cache: Vec<f32> =
                gen.session().cache(0).chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
            let cfg = hfexport_models::Checkpoint::open(&fixture("qwen3")).unwrap().config;
            let head_dim = cfg.head_dim;
            let heads = cfg.num_key_value_heads;
            let slot = |s: usize| {
                (0..heads)
                    .map(|h| (0..head_dim).map(|d| cache[(h * 32 + s) * head_dim + d].abs()).sum::<f32>())
                    .sum::<f32>()
            };
            let filled = prompt.len() + want.len() - 1;
            assert!((0..filled).all(|s| slot(s) > 0.0), "{variant}: an unwritten slot below {filled}");
            assert!((filled..32).all(|s| slot(s) == 0.0), "{variant}: a slot past {filled} was written");
        }
    }
}

#[cfg(not(feature = "executorch-runtime"))]
#[test]
fn the_zero_copy_loop_writes_into_the_generators_cache_buffers() {
    require_executorch();
}
