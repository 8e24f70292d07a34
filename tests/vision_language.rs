//! Vision-language models (`LlavaForConditionalGeneration`) as three components: the
//! `image_encoder` (pixel values in, the vision tower's selected hidden states out), the
//! `multi_modal_projector` (those features to image embeddings in the text width) and the
//! static-cache `decode` taking the image embeddings beside `input_ids` and putting them at the
//! image placeholders. Random checkpoints made by transformers at test time
//! (`tests/python/random_llava.py`: text families, tower sizes, feature layers and strategies,
//! projector activations and biases, both key layouts): in the reference evaluator the features
//! and embeddings equal transformers' at 1e-4 and a greedy loop over `decode` gives
//! transformers' 16 greedy tokens for a prompt with two images; every format's export passes
//! `--verify` for all three components in its runtime.

mod common;
use common::{export_and_verify, python, script};
use hfexport_core::cache_ports;
use hfexport_core::plan::Role;
use hfexport_core::{Evaluator, Graph, Tensor};
use hfexport_models::safetensors::read_all;
use hfexport_models::{build_generation, BuildOptions, Checkpoint, Task};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const CACHE: usize = 96;

fn worst(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.shape(), b.shape());
    a.as_f32().unwrap().iter().zip(b.as_f32().unwrap()).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max)
}

/// `tests/python/random_llava.py`'s checkpoints: (name, description, folder).
fn random_llava(out: &Path, count: usize) -> Vec<(String, String, PathBuf)> {
    random_cases("random_llava.py", out, count)
}

/// The checkpoints of a random-case script: (name, description, folder).
fn random_cases(script_name: &str, out: &Path, count: usize) -> Vec<(String, String, PathBuf)> {
    let o = Command::new(python())
        .arg(script(script_name))
        .arg(out)
        .args(["--seed", "20261202", "--count", &count.to_string()])
        .output()
        .expect("start python");
    assert!(o.status.success(), "{script_name} failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
    let cases = index["cases"].as_array().unwrap();
    cases
        .iter()
        .map(|c| {
            let dir = out.join(c["dir"].as_str().unwrap());
            (c["name"].as_str().unwrap().to_string(), c["description"].as_str().unwrap().to_string(), dir)
        })
        .collect()
}

/// Greedy tokens from the evaluator: the prompt in one call of `decode` into an empty static
/// cache, then a token a step, `image_embeds` fed on every call.
fn greedy(ckpt: &Checkpoint, decode: &Graph, prompt: &[i64], fixed: &BTreeMap<String, Tensor>, n: usize) -> Vec<i64> {
    let c = &ckpt.config;
    let ev = Evaluator::new(decode, ckpt).unwrap();
    let shape = vec![1, c.num_key_value_heads, CACHE, c.head_dim];
    let zeros = Tensor::f32(shape.clone(), vec![0.0; shape.iter().product()]).unwrap();
    let mut caches: BTreeMap<String, Tensor> = (0..c.num_hidden_layers)
        .flat_map(|i| ["key", "value"].map(|k| (cache_ports::layer_cache(i, k), zeros.clone())))
        .collect();
    let (mut feed, mut pos, mut got) = (prompt.to_vec(), 0, vec![]);
    while got.len() < n {
        let q = feed.len();
        let mask = (0..q).flat_map(|i| (0..CACHE).map(move |j| j <= pos + i)).collect();
        let mut inputs = BTreeMap::from([
            ("input_ids".to_string(), Tensor::i64(vec![1, q], feed.clone()).unwrap()),
            ("attention_mask".to_string(), Tensor::bool(vec![1, 1, q, CACHE], mask).unwrap()),
            ("position_ids".to_string(), Tensor::i64(vec![1, q], (pos..pos + q).map(|p| p as i64).collect()).unwrap()),
        ]);
        inputs.extend(fixed.iter().map(|(k, v)| (k.clone(), v.clone())));
        inputs.extend(caches.iter().map(|(k, v)| (cache_ports::past(k), v.clone())));
        let mut out = ev.run(&inputs).unwrap();
        for (k, v) in caches.iter_mut() {
            *v = out.remove(&cache_ports::present(k)).unwrap();
        }
        let logits = out["logits"].as_f32().unwrap();
        let last = &logits[(q - 1) * c.vocab_size..];
        let token = (0..c.vocab_size).max_by(|&a, &b| last[a].total_cmp(&last[b]).then(b.cmp(&a))).unwrap() as i64;
        got.push(token);
        pos += q;
        feed = vec![token];
    }
    got
}

/// The image rows of both images as one `[rows, hidden]` tensor (the decode's `image_embeds`).
fn rows(embeds: &Tensor) -> Tensor {
    let s = embeds.shape();
    Tensor::f32(vec![s[0] * s[1], s[2]], embeds.as_f32().unwrap().to_vec()).unwrap()
}

/// Both images' pixel values as one batch.
fn pixels(gold: &BTreeMap<String, Tensor>) -> Tensor {
    let (a, b) = (&gold["pixel_values.exact"], &gold["pixel_values.wide"]);
    let mut shape = a.shape().to_vec();
    shape[0] = 2;
    Tensor::f32(shape, [a.as_f32().unwrap(), b.as_f32().unwrap()].concat()).unwrap()
}

fn check_in_evaluator(name: &str, dir: &Path) -> Vec<String> {
    let mut failures = vec![];
    let ckpt = Checkpoint::open(dir).unwrap();
    let gold = read_all(dir.join("golden.safetensors")).unwrap();
    let plan = build_generation(&ckpt.config, &ckpt, &BuildOptions::default(), Some(CACHE), true).unwrap();
    let roles: Vec<Role> = plan.iter().map(|p| p.spec.role).collect();
    assert_eq!(roles, [Role::ImageEncoder, Role::Projector, Role::Decode], "{name}");
    let features = Evaluator::new(&plan[0].graph, &ckpt)
        .unwrap()
        .run(&BTreeMap::from([("pixel_values".to_string(), pixels(&gold))]));
    let features = features.unwrap().remove("image_features").unwrap();
    let d = worst(&features, &gold["image_features"]);
    if d > 1e-4 {
        failures.push(format!("{name}: image features differ by {d}"));
    }
    let embeds = Evaluator::new(&plan[1].graph, &ckpt)
        .unwrap()
        .run(&BTreeMap::from([("image_features".to_string(), gold["image_features"].clone())]))
        .unwrap()
        .remove("image_embeds")
        .unwrap();
    let d = worst(&embeds, &gold["image_embeds"]);
    if d > 1e-4 {
        failures.push(format!("{name}: image embeddings differ by {d}"));
    }
    let want = gold["tokens"].as_i64().unwrap().to_vec();
    let fixed = BTreeMap::from([("image_embeds".to_string(), rows(&embeds))]);
    let got = greedy(&ckpt, &plan[2].graph, gold["expanded"].as_i64().unwrap(), &fixed, want.len());
    if got != want {
        failures.push(format!("{name}: tokens {got:?}, transformers {want:?}"));
    }
    failures
}

/// Every random case of `script_name`: `check` in the evaluator, then [`export_and_verify`]
/// with `components`; the failures, each with its case's description.
fn check_cases(script_name: &str, count: usize, check: fn(&str, &Path) -> Vec<String>, components: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    for (name, desc, dir) in random_cases(script_name, &tmp.path().join("ckpt"), count) {
        let mut f = check(&name, &dir);
        let exported =
            export_and_verify(&dir, Some(CACHE), &tmp.path().join(&name), &[Task::ImageTextToText.name()], components);
        f.extend(exported.into_iter().map(|e| format!("{name} {e}")));
        if !f.is_empty() {
            failures.push(format!("{}\n    {desc}", f.join("\n")));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn random_llava_checkpoints_match_transformers_and_verify() {
    check_cases("random_llava.py", 6, check_in_evaluator, &["image_encoder", "multi_modal_projector", "decode"]);
}

#[test]
fn llava_exports_for_generation_only_with_a_static_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, _, dir) = random_llava(&tmp.path().join("ckpt"), 1).remove(0);
    let ckpt = Checkpoint::open(&dir).unwrap();
    let e = build_generation(&ckpt.config, &ckpt, &BuildOptions::default(), None, false).unwrap_err().to_string();
    assert!(e.contains("--static-cache"), "{e}");
    let e = hfexport_models::build(&ckpt.config, &ckpt, Task::ImageTextToText, &BuildOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("--for-generation") && e.contains("image_encoder"), "{e}");
}

/// Our CLIP preprocessing against transformers' image processor (PIL backend) on every random
/// case's processor config: bit-exact on the PNGs (one at the crop size that no resize touches,
/// one resized on its shortest edge and cropped); a JPEG within the decoders' disagreement.
#[test]
fn pixel_values_equal_the_clip_image_processor() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    for (name, desc, dir) in random_llava(&tmp.path().join("ckpt"), 6) {
        let gold = read_all(dir.join("golden.safetensors")).unwrap();
        let processor = hfexport::image::ImageProcessor::from_dir(&dir).unwrap();
        for (file, atol) in [("exact.png", 1e-5), ("wide.png", 1e-5), ("photo.jpg", JPEG_ATOL)] {
            let ours = processor.pixel_values(&dir.join(file)).unwrap().values;
            let theirs = &gold[&format!("pixel_values.{}", file.split('.').next().unwrap())];
            if ours.shape() != theirs.shape() {
                failures.push(format!("{name} {file}: shape {:?}, transformers {:?}", ours.shape(), theirs.shape()));
                continue;
            }
            let d = worst(&ours, theirs);
            if d > atol {
                failures.push(format!("{name} {file}: pixel values differ by {d} (allowed {atol})\n    {desc}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The `image` crate's JPEG decoder against libjpeg's (Pillow's): measured up to two 8-bit
/// levels (0.030 after normalising by CLIP's std of about 0.27); the PNGs are bit-exact.
const JPEG_ATOL: f32 = 0.05;

/// Qwen2-VL in the evaluator: the tower with its merger (`patch_positions` and `frame_ids` from
/// the image grids), `get_rope_index`'s positions from [`mrope_positions`], and 16 greedy tokens
/// over the M-RoPE `decode`.
fn check_qwen2vl(name: &str, dir: &Path) -> Vec<String> {
    use hfexport_models::vision::{mrope_positions, patch_inputs};
    let mut failures = vec![];
    let ckpt = Checkpoint::open(dir).unwrap();
    let v = ckpt.config.vision.as_deref().unwrap();
    let merge = v.merge.as_ref().unwrap().spatial_merge_size;
    let gold = read_all(dir.join("golden.safetensors")).unwrap();
    let plan = build_generation(&ckpt.config, &ckpt, &BuildOptions::default(), Some(CACHE), true).unwrap();
    let roles: Vec<Role> = plan.iter().map(|p| p.spec.role).collect();
    assert_eq!(roles, [Role::ImageEncoder, Role::Decode], "{name}");
    let grids: Vec<[usize; 3]> = gold["image_grid_thw"]
        .as_i64()
        .unwrap()
        .chunks(3)
        .map(|g| [g[0] as usize, g[1] as usize, g[2] as usize])
        .collect();
    let (positions, frames) = patch_inputs(&grids, merge);
    let (g, n) = (merge * merge, frames.len());
    let pixels = gold["pixel_values"].clone();
    let width = pixels.shape()[1];
    let inputs = BTreeMap::from([
        ("pixel_values".to_string(), pixels.reshaped(vec![n / g, g, width]).unwrap()),
        ("patch_positions".to_string(), Tensor::i64(vec![n / g, g, 2], positions).unwrap()),
        ("frame_ids".to_string(), Tensor::i64(vec![n / g, g], frames).unwrap()),
    ]);
    let embeds = Evaluator::new(&plan[0].graph, &ckpt).unwrap().run(&inputs).unwrap().remove("image_embeds").unwrap();
    let d = worst(&embeds, &gold["image_embeds"]);
    if d > 1e-4 {
        failures.push(format!("{name}: image embeddings differ by {d}"));
    }
    let expanded = gold["expanded"].as_i64().unwrap();
    let rope = mrope_positions(expanded, v.image_token_id, &grids, merge, CACHE).unwrap();
    let want_rope = gold["rope_positions"].as_i64().unwrap();
    let len = expanded.len();
    let ours: Vec<i64> = (0..3).flat_map(|r| rope[r * CACHE..r * CACHE + len].to_vec()).collect();
    if ours != want_rope {
        failures.push(format!("{name}: rope positions {ours:?}, get_rope_index {want_rope:?}"));
    }
    let fixed = BTreeMap::from([
        ("image_embeds".to_string(), embeds),
        ("rope_positions".to_string(), Tensor::i64(vec![3, CACHE], rope).unwrap()),
    ]);
    let want = gold["tokens"].as_i64().unwrap().to_vec();
    let got = greedy(&ckpt, &plan[1].graph, expanded, &fixed, want.len());
    if got != want {
        failures.push(format!("{name}: tokens {got:?}, transformers {want:?}"));
    }
    failures
}

#[test]
fn random_qwen2vl_checkpoints_match_transformers_and_verify() {
    check_cases("random_qwen2vl.py", 4, check_qwen2vl, &["image_encoder", "decode"]);
}

/// Our Qwen2-VL preprocessing against transformers' image processor (PIL backend): a 3x2 image
/// `smart_resize` scales up to `min_pixels` and a 37x17 one it resizes to multiples of patch x
/// merge within `max_pixels`, on every random case's processor and tower config: the grids
/// equal, the patch rows bit-exact.
#[test]
fn patch_rows_equal_the_qwen2vl_image_processor() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = vec![];
    for (name, desc, dir) in random_cases("random_qwen2vl.py", &tmp.path().join("ckpt"), 4) {
        let gold = read_all(dir.join("golden.safetensors")).unwrap();
        let processor = hfexport::image::ImageProcessor::from_dir(&dir).unwrap();
        let (mut rows, mut grids) = (vec![], vec![]);
        for file in ["small.png", "wide.png"] {
            let p = processor.pixel_values(&dir.join(file)).unwrap();
            grids.extend(p.grid.unwrap().map(|x| x as i64));
            rows.extend_from_slice(p.values.as_f32().unwrap());
        }
        if grids != gold["image_grid_thw"].as_i64().unwrap() {
            failures.push(format!(
                "{name}: grids {grids:?}, transformers {:?}\n    {desc}",
                gold["image_grid_thw"].as_i64()
            ));
            continue;
        }
        let theirs = gold["pixel_values"].as_f32().unwrap();
        let d = rows.iter().zip(theirs).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        if rows.len() != theirs.len() || d > 1e-5 {
            failures.push(format!(
                "{name}: {} values differ by {d} from transformers' {}\n    {desc}",
                rows.len(),
                theirs.len()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
