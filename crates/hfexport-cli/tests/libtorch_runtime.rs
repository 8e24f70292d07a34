//! The libtorch runner end to end: `export --format dynamo --verify` checks every fixture in
//! libtorch before the folder appears, `run` on the `.pt2` reproduces transformers' logits (and
//! the evaluator's at a shape no sample used), `generate` gives transformers' 16 greedy tokens
//! for every fixture in every cache variant, and the static cache is written in place: the
//! caller's tensors, never a copy.
//!
//! libtorch is the torch==2.13.0 wheel in `.venv/`, linked at build time (`cargo xtask test`
//! builds with the feature `tch`); no Python is run.

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

fn export(name: &str, out: &Path, extra: &[&str]) {
    let model = fixture(name);
    let mut args = vec!["export", "--model", s(&model), "--format", "dynamo", "--quiet", "--output", s(out)];
    args.extend_from_slice(extra);
    hfexport_here(&args).unwrap_or_else(|e| panic!("{name} {extra:?}: export failed: {e}"));
}

/// `hfexport run` of `path` (an export folder or a checkpoint) on `feeds`; its outputs.
fn run(tmp: &Path, tag: &str, path: &Path, feeds: &[(&str, &Tensor)]) -> BTreeMap<String, Tensor> {
    let inp = tmp.join(format!("{tag}-in.safetensors"));
    write_safetensors(&inp, feeds, &BTreeMap::new()).unwrap();
    let res = tmp.join(format!("{tag}-out.safetensors"));
    let run = hfexport_here(&["run", s(path), "--inputs", s(&inp), "--outputs", s(&res)]);
    run.unwrap_or_else(|e| panic!("{tag}: run failed: {e}"));
    read_all(&res).unwrap()
}

#[test]
fn verified_pt2_exports_run_in_libtorch_like_transformers() {
    require_libtorch();
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    // a batch and length no sample (of --verify or the goldens) uses, one row left-padded
    let (batch, len) = (3usize, 11usize);
    let ids = Tensor::i64(
        vec![batch, len],
        (0..(batch * len) as i64).map(|i| (i * 37 + 5) % 200 /* below every fixture's vocab */).collect(),
    )
    .unwrap();
    let mask =
        Tensor::i64(vec![batch, len], (0..batch * len).map(|i| i64::from(i >= len || i % len >= 4)).collect()).unwrap();
    for name in fixtures() {
        let out = tmp.path().join(name);
        export(name, &out, &["--dynamic", "--verify"]);
        let v = ExportMetadata::read(&out).unwrap().verification.unwrap();
        assert!(v.runtime.starts_with("libtorch 2.13.0"), "{name}: {v:?}");
        assert!(v.max_abs_diff <= 1e-4 && v.inputs.len() == 2, "{name}: {v:?}");

        let gold = read_all(fixture(name).join("golden.safetensors")).unwrap();
        for case in ["single", "batch"] {
            let mask = &gold[&format!("{case}.attention_mask")];
            let feeds = [("input_ids", &gold[&format!("{case}.input_ids")]), ("attention_mask", mask)];
            let got = run(tmp.path(), &format!("{name}-{case}"), &out, &feeds);
            let d = worst_unpadded(&got["logits"], &gold[&format!("{case}.logits")], mask);
            if d > 1e-4 {
                failures.push(format!("{name} {case}: worst |diff| {d:e} against transformers"));
            }
        }
        let feeds = [("input_ids", &ids), ("attention_mask", &mask)];
        let got = run(tmp.path(), &format!("{name}-unseen"), &out, &feeds);
        let want = run(tmp.path(), &format!("{name}-unseen-ref"), &fixture(name), &feeds);
        assert_eq!(got["logits"].shape()[..2], [batch, len], "{name}");
        let d = worst_unpadded(&got["logits"], &want["logits"], &mask);
        if d > 1e-4 {
            failures.push(format!("{name} [{batch}, {len}]: worst |diff| {d:e} against the reference evaluator"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn libtorch_generate_gives_transformers_tokens_for_every_variant() {
    require_libtorch();
    let tmp = tempfile::tempdir().unwrap();
    let variants: [(&str, &[&str]); 3] = [
        ("static-multi", &["--static-cache", "32", "--multi-token-decode"]),
        ("static-prefill", &["--static-cache", "32"]),
        ("growing", &[]),
    ];
    let mut failures = vec![];
    for (i, name) in fixtures().into_iter().enumerate() {
        let g = read_all(fixture(name).join("golden.safetensors")).unwrap();
        let join = |t: &Tensor| t.as_i64().unwrap().iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        let (prompt, want) = (join(&g["greedy.prompt_ids"]), join(&g["greedy.tokens"]));
        for (variant, flags) in variants {
            let out = tmp.path().join(format!("{name}-{variant}"));
            let mut args = vec!["--dynamic", "--for-generation", "--verify"];
            args.extend_from_slice(flags);
            export(name, &out, &args);
            // the command line for the first fixture, its generator in this process for the rest
            let got = if i == 0 {
                let o = hfexport(&["generate", s(&out), "--prompt-ids", &prompt, "--max-new-tokens", "16"]);
                assert!(o.status.success(), "{name} {variant}: {}", stderr(&o));
                assert!(stderr(&o).contains("libtorch 2.13.0"), "{}", stderr(&o));
                stdout(&o).lines().find_map(|l| l.strip_prefix("ids: ")).unwrap_or_default().to_string()
            } else {
                let (tokens, _) = generate_here(&out, g["greedy.prompt_ids"].as_i64().unwrap(), 16);
                tokens.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
            };
            if got != want {
                failures.push(format!("{name} {variant}: {got} != transformers' {want}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[cfg(feature = "tch")]
mod in_place {
    use super::*;
    use hfexport::dynamo::generate::Pt2Generator;
    use hfexport::dynamo::runner::tch::{Device, Kind, Tensor as TchTensor};
    use hfexport::dynamo::runner::Pt2Runner;

    /// The generator's static cache is one set of tensors that every call writes into: same
    /// storage before and after, the prompt's and generated tokens' slots filled, the rest
    /// still zero; and `Pt2Runner::call` writes a step's slots into the caller's own tensors.
    #[test]
    fn the_static_cache_is_written_in_place_into_the_callers_tensors() {
        require_libtorch();
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("qwen3");
        export("qwen3", &out, &["--dynamic", "--for-generation", "--static-cache", "32", "--multi-token-decode"]);
        let g = read_all(fixture("qwen3").join("golden.safetensors")).unwrap();
        let prompt = g["greedy.prompt_ids"].as_i64().unwrap().to_vec();
        let want = g["greedy.tokens"].as_i64().unwrap().to_vec();

        let mut gen = Pt2Generator::load(&out).unwrap();
        let key = "past_key_values.0.key";
        let before = gen.session().static_cache(key).unwrap().data_ptr();
        let tokens = gen.generate(&prompt, 16, &[]).unwrap();
        assert_eq!(tokens, want);
        let cache = gen.session().static_cache(key).unwrap();
        assert_eq!(cache.data_ptr(), before, "the static cache was reallocated");
        // prompt + 15 fed-back tokens are cached; the last generated token never was
        let filled = prompt.len() + tokens.len() - 1;
        let per_slot = |t: &TchTensor| -> Vec<f64> {
            let a = t.f_abs().unwrap().f_sum_dim_intlist(&[0i64, 1, 3][..], false, None::<Kind>).unwrap();
            Vec::<f64>::try_from(&a.f_to_dtype(Kind::Double, false, true).unwrap()).unwrap()
        };
        let slots = per_slot(cache);
        assert!(slots[..filled].iter().all(|&x| x > 0.0), "unfilled slot below {filled}: {slots:?}");
        assert!(slots[filled..].iter().all(|&x| x == 0.0), "a slot past {filled} was written: {slots:?}");

        // one decode call on caller-owned tensors
        let runner = Pt2Runner::load(out.join("model.pt2"), "decode").unwrap();
        let mut args: Vec<TchTensor> = vec![];
        let mut caches = vec![];
        for info in runner.inputs() {
            args.push(match info.name.as_str() {
                "input_ids" => TchTensor::f_from_slice(&[5i64, 7]).unwrap().f_reshape([1, 2]).unwrap(),
                "position_ids" => TchTensor::f_from_slice(&[0i64, 1]).unwrap().f_reshape([1, 2]).unwrap(),
                "attention_mask" => {
                    let m: Vec<u8> = (0..2 * 32).map(|i| u8::from(i % 32 <= i / 32)).collect();
                    TchTensor::f_from_data_size(&m, &[1, 1, 2, 32], Kind::Bool).unwrap()
                }
                _ => {
                    let t =
                        TchTensor::f_zeros(gen.session().static_cache(key).unwrap().size(), (Kind::Float, Device::Cpu))
                            .unwrap();
                    caches.push((t.data_ptr(), t.shallow_clone()));
                    t
                }
            });
        }
        let outs = runner.call(&mut args).unwrap();
        assert_eq!(outs.len(), 1, "decode returns only the logits; the caches are mutated inputs");
        for (ptr, t) in &caches {
            assert_eq!(t.data_ptr(), *ptr);
            let slots = per_slot(t);
            assert!(slots[0] > 0.0 && slots[1] > 0.0 && slots[2..].iter().all(|&x| x == 0.0), "{slots:?}");
        }
    }
}

#[cfg(not(feature = "tch"))]
#[test]
fn the_static_cache_is_written_in_place_into_the_callers_tensors() {
    require_libtorch();
}
