//! The OpenVINO runner end to end, through the binary: `export --format openvino --verify`
//! checks every fixture in OpenVINO before the folder appears, `run` on the export folder
//! reproduces transformers' logits, `generate` gives transformers' 16 greedy tokens for every
//! fixture in every cache variant stateful, and in the static multi-token and growing variants
//! stateless (each export verified too), and
//! broken artifacts are clear errors.
//!
//! OpenVINO is the `openvino==2026.4.1` wheel in the repository's `.venv/` (what `cargo xtask
//! test` installs); the binary finds its C library by searching upward. No Python is run.

mod common;

use common::*;
use hfexport_core::metadata::ExportMetadata;
use hfexport_core::plan::Role;
use hfexport_core::Tensor;
use hfexport_models::safetensors::{read_all, write_safetensors};
use std::collections::BTreeMap;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `hfexport export` of a fixture with `config` and `extra` flags, in this process.
fn export(name: &str, out: &Path, config: &Path, extra: &[&str]) {
    let model = fixture(name);
    let mut args = vec!["export", "--model", s(&model), "--config", s(config), "--quiet", "--output", s(out)];
    args.extend_from_slice(extra);
    hfexport_here(&args).unwrap_or_else(|e| panic!("{name} {extra:?}: export failed: {e}"));
}

fn config(dir: &Path, stateful: bool) -> std::path::PathBuf {
    let p = dir.join(format!("openvino-stateful-{stateful}.json"));
    std::fs::write(&p, format!("{{\"export_format\": \"openvino\", \"stateful\": {stateful}}}")).unwrap();
    p
}

#[test]
fn verified_exports_run_in_openvino_like_transformers() {
    require_openvino();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path(), true);
    let mut failures = vec![];
    for name in fixtures() {
        let out = tmp.path().join(name);
        export(name, &out, &cfg, &["--dynamic", "--verify"]);
        let v = ExportMetadata::read(&out).unwrap().verification.unwrap();
        assert!(v.runtime.starts_with("openvino 2026.4.1"), "{name}: {v:?}");
        assert!(v.max_abs_diff <= 1e-4 && v.inputs.len() == 2, "{name}: {v:?}");

        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        for case in ["single", "batch"] {
            let inp = tmp.path().join(format!("{name}-{case}-in.safetensors"));
            let mask = &gold[&format!("{case}.attention_mask")];
            let feeds = [("input_ids", &gold[&format!("{case}.input_ids")]), ("attention_mask", mask)];
            write_safetensors(&inp, &feeds, &BTreeMap::new()).unwrap();
            let res = tmp.path().join(format!("{name}-{case}-out.safetensors"));
            let run = hfexport_here(&["run", s(&out), "--inputs", s(&inp), "--outputs", s(&res)]);
            run.unwrap_or_else(|e| panic!("{name} {case}: run failed: {e}"));
            let d = worst_unpadded(&read_all(&res).unwrap()["logits"], &gold[&format!("{case}.logits")], mask);
            if d > 1e-4 {
                failures.push(format!("{name} {case}: worst |diff| {d:e} against transformers"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn generate_gives_transformers_tokens_in_every_variant_stateful_and_two_stateless() {
    require_openvino();
    let tmp = tempfile::tempdir().unwrap();
    let variants: [(&str, &[&str]); 3] = [
        ("static-multi", &["--static-cache", "32", "--multi-token-decode"]),
        ("static-prefill", &["--static-cache", "32"]),
        ("growing", &[]),
    ];
    let mut failures = vec![];
    for stateful in [true, false] {
        let cfg = config(tmp.path(), stateful);
        // stateless, a static cache with one-token prefill is the multi-token decode's graph
        // without its prefill: the stateful run covers it
        let variants = match stateful {
            true => &variants[..],
            false => &[variants[0], variants[2]][..],
        };
        for (i, name) in fixtures().into_iter().enumerate() {
            let g = read_all(fixture(name).join("golden.safetensors")).unwrap();
            let join = |t: &Tensor| t.as_i64().unwrap().iter().map(i64::to_string).collect::<Vec<_>>().join(",");
            let (prompt, want) = (join(&g["greedy.prompt_ids"]), join(&g["greedy.tokens"]));
            for &(variant, flags) in variants {
                let out = tmp.path().join(format!("{name}-{variant}-{stateful}"));
                // the stateful runs (the lowering that folds caches into states) also verify their
                // components' logits; the stateless graphs are checked by their tokens, here and
                // in tests/openvino_export.rs's Python loop
                let mut args = vec!["--dynamic", "--for-generation"];
                args.extend(stateful.then_some("--verify"));
                args.extend_from_slice(flags);
                export(name, &out, &cfg, &args);
                // the command line for the first fixture, its generator in this process for the rest
                let got = if i == 0 {
                    let i = hfexport(&["inspect", s(&out)]);
                    let kept = stdout(&i).contains("cache variables kept by the runtime");
                    assert_eq!(kept, stateful, "{}", stdout(&i));
                    let o = hfexport(&["generate", s(&out), "--prompt-ids", &prompt, "--max-new-tokens", "16"]);
                    assert!(o.status.success(), "{name} {variant} stateful={stateful}: {}", stderr(&o));
                    assert_eq!(stderr(&o).contains("stateful"), stateful, "{}", stderr(&o));
                    stdout(&o).lines().find_map(|l| l.strip_prefix("ids: ")).unwrap_or_default().to_string()
                } else {
                    let decode = ExportMetadata::read(&out).unwrap().by_role(Role::Decode).unwrap().clone();
                    assert_eq!(!decode.states.is_empty(), stateful, "{name} {variant}: {:?}", decode.states);
                    let ids: Vec<i64> = g["greedy.prompt_ids"].as_i64().unwrap().to_vec();
                    let (tokens, kind) = generate_here(&out, &ids, 16);
                    assert_eq!(kind == "stateful", stateful, "{name} {variant}: {kind}");
                    tokens.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
                };
                if got != want {
                    failures.push(format!("{name} {variant} stateful={stateful}: {got} != transformers' {want}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn broken_openvino_exports_are_clear_errors() {
    require_openvino();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("llama");
    export("llama", &out, &config(tmp.path(), true), &["--dynamic"]);
    let inp = tmp.path().join("in.safetensors");
    let ids = Tensor::i64(vec![1, 3], vec![1, 2, 3]).unwrap();
    let mask = Tensor::i64(vec![1, 3], vec![1, 1, 1]).unwrap();
    write_safetensors(&inp, &[("input_ids", &ids), ("attention_mask", &mask)], &BTreeMap::new()).unwrap();
    let res = tmp.path().join("out.safetensors");
    let run = || hfexport(&["run", s(&out), "--inputs", s(&inp), "--outputs", s(&res)]);

    // An input the model does not have is named.
    let bad = tmp.path().join("bad.safetensors");
    write_safetensors(&bad, &[("input_ids", &ids), ("attention_mask", &mask), ("extra", &mask)], &BTreeMap::new())
        .unwrap();
    let o = hfexport(&["run", s(&out), "--inputs", s(&bad), "--outputs", s(&res)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no input `extra`"), "{}", stderr(&o));
    // A truncated .bin: OpenVINO refuses the weights, the message names the file (export.json's
    // size records would refuse it first: cleared, as in a folder of an earlier writer)
    forget_file_records(&out);
    let bin = out.join("openvino_model.bin");
    let len = std::fs::metadata(&bin).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&bin).unwrap().set_len(len / 2).unwrap();
    let o = run();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("openvino_model.xml") && stderr(&o).contains("cannot"), "{}", stderr(&o));
    // Corrupt XML.
    std::fs::write(out.join("openvino_model.xml"), "<net><broken").unwrap();
    let o = run();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("OpenVINO cannot read this model"), "{}", stderr(&o));
    // A missing .bin.
    std::fs::remove_file(&bin).unwrap();
    let o = run();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("openvino_model.bin is missing"), "{}", stderr(&o));
    // generate on a forward export: no decode component.
    let o = hfexport(&["generate", s(&out), "--prompt-ids", "1,2"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no `decode` component"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
}

#[test]
fn compressed_weights_halve_the_bin_and_stay_within_float16_tolerance() {
    require_openvino();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("fp16.json");
    std::fs::write(&cfg, r#"{"export_format": "openvino", "compress_to_fp16": true}"#).unwrap();
    let (full, half) = (tmp.path().join("full"), tmp.path().join("half"));
    export("qwen3", &full, &config(tmp.path(), true), &["--dynamic"]);
    export("qwen3", &half, &cfg, &["--dynamic", "--verify"]);
    let v = ExportMetadata::read(&half).unwrap().verification.unwrap();
    assert_eq!(v.atol, 5e-2, "{v:?}");
    let size = |d: &Path| std::fs::metadata(d.join("openvino_model.bin")).unwrap().len() as f64;
    let ratio = size(&half) / size(&full);
    assert!((0.45..0.6).contains(&ratio), "the f16 .bin is {ratio:.2} of the f32 one");
    // and the decompression Converts are marked so the CPU plugin keeps the weights in f16
    let xml = std::fs::read_to_string(half.join("openvino_model.xml")).unwrap();
    assert!(xml.contains("<attribute name=\"decompression\""), "no decompression rt_info");
    let gold = read_all(fixture("qwen3").join("golden.safetensors")).unwrap();
    let inp = tmp.path().join("in.safetensors");
    let mask = &gold["batch.attention_mask"];
    write_safetensors(&inp, &[("input_ids", &gold["batch.input_ids"]), ("attention_mask", mask)], &BTreeMap::new())
        .unwrap();
    let res = tmp.path().join("out.safetensors");
    let o = hfexport(&["run", s(&half), "--inputs", s(&inp), "--outputs", s(&res)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let d = worst_unpadded(&read_all(&res).unwrap()["logits"], &gold["batch.logits"], mask);
    assert!(d > 0.0 && d < 5e-2, "f16 weights: worst |diff| {d:e} against transformers");
}
