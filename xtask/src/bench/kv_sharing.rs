//! `cargo xtask bench kv-sharing [--keep]`: what Gemma 4's shared keys and values save. A
//! Gemma-4-shaped model (35 layers, four sliding layers of window 512 per full one, 8 query
//! heads over one KV head of 256 in the sliding layers and of 512 in the full ones, hidden
//! 1536, MLP 6144, per-layer embeddings of 256; the vocabulary cut to 16384, which no cache
//! depends on) is exported for generation to ONNX twice from one random bfloat16 checkpoint:
//! with its last 20 layers reusing the keys and values of the last earlier layer of their kind
//! (`num_kv_shared_layers`), and without. Each export's cache bytes at 4096 tokens (from its
//! `export.json`) are printed side by side, with their decode time per token after a 16-token
//! prompt (`bench_generate.py`, caches bound in place).

use super::ssm::{cache_bytes, export_for_generation, gib};
use super::*;

const HIDDEN: usize = 1536;
const INTERMEDIATE: usize = 6144;
const LAYERS: usize = 35;
const FULL_EVERY: usize = 5;
const HEADS: usize = 8;
const HEAD_DIM: usize = 256;
const GLOBAL_HEAD_DIM: usize = 512;
const SHARED: usize = 20;
const PER_LAYER: usize = 256;
const VOCAB: usize = 16384;
const CACHE_LEN: usize = 4096;
const PROMPT: usize = 16;
const STEPS: usize = 32;

pub(super) fn bench_kv_sharing(root: &Path, opts: &Opts) -> Result<()> {
    let steps = 7;
    let Prepared { bench_dir, venv, exe, .. } = prepare_build(root, steps, &[])?;
    let shared = bench_dir.join("gemma4-shapes-bf16");
    println!("==> [3/{steps}] checkpoint {}", shared.display());
    ensure_random_checkpoint(&shared, &tensors(), &config(SHARED))?;
    // the same weights under a config without sharing (the shared layers' own k/v projections
    // are in the file, unread by the model that shares)
    let unshared = bench_dir.join("gemma4-shapes-bf16-unshared");
    link_variant(&shared, &unshared, &config(0))?;
    let mut rows = vec![];
    for (i, (ckpt, label)) in [(&shared, "shared"), (&unshared, "unshared")].into_iter().enumerate() {
        let out = bench_dir.join(format!("kv-sharing-{label}-onnx"));
        println!("==> [{}/{steps}] {label}: onnx, static cache {CACHE_LEN} -> {}", 4 + 2 * i, out.display());
        export_for_generation(&exe, "onnx", ckpt, &out, CACHE_LEN, &bench_dir.join(format!("kv-sharing-{label}.log")))?;
        let cache = cache_bytes(&out, CACHE_LEN)?;
        println!("==> [{}/{steps}] {label}: prompt {PROMPT}, {STEPS} timed steps", 5 + 2 * i);
        let mut run = venv.command();
        run.arg(root.join("xtask").join("python").join("bench_generate.py")).arg("run").arg(label).arg(&out);
        run.args([PROMPT.to_string(), STEPS.to_string()]);
        let r = pairs(&mut run, &format!("GEN {label} "))?;
        let decode = r.iter().find(|(k, _)| k == "decode_ms_tok").and_then(|(_, v)| v.parse::<f64>().ok());
        rows.push((label, cache, decode));
        if !opts.keep {
            remove_dir(&out)?;
        }
    }
    println!(
        "\nkv-sharing: Gemma 4 shapes ({LAYERS} layers, every {FULL_EVERY}th full with KV heads of {GLOBAL_HEAD_DIM}, \
         the others sliding with {HEAD_DIM}; hidden {HIDDEN}), ONNX Runtime, float32, batch 1, static cache {CACHE_LEN}"
    );
    println!("  {:<10}{:>14}{:>10}{:>18}", "model", "cache", "tensors", "decode/token");
    for (label, cache, decode) in &rows {
        let ms = decode.map_or("n/a".to_string(), |v| format!("{v:.2} ms"));
        println!("  {label:<10}{:>14}{:>10}{ms:>18}", gib(cache.total), cache.tensors);
    }
    if let [(_, with, _), (_, without, _)] = rows.as_slice() {
        println!(
            "  the last {SHARED} layers sharing: {:.2}x less cache at {CACHE_LEN} tokens",
            without.total as f64 / with.total as f64
        );
    }
    Ok(())
}

fn config(shared: usize) -> String {
    let types: Vec<String> = (0..LAYERS)
        .map(|i| {
            if (i + 1).is_multiple_of(FULL_EVERY) { "\"full_attention\"" } else { "\"sliding_attention\"" }.to_string()
        })
        .collect();
    format!(
        r#"{{
  "architectures": ["Gemma4ForCausalLM"],
  "model_type": "gemma4_text",
  "hidden_size": {HIDDEN},
  "intermediate_size": {INTERMEDIATE},
  "num_hidden_layers": {LAYERS},
  "num_attention_heads": {HEADS},
  "num_key_value_heads": 1,
  "head_dim": {HEAD_DIM},
  "global_head_dim": {GLOBAL_HEAD_DIM},
  "sliding_window": 512,
  "layer_types": [{}],
  "num_kv_shared_layers": {shared},
  "use_double_wide_mlp": false,
  "hidden_size_per_layer_input": {PER_LAYER},
  "vocab_size_per_layer_input": {VOCAB},
  "vocab_size": {VOCAB},
  "max_position_embeddings": 131072,
  "final_logit_softcapping": 30.0,
  "tie_word_embeddings": true,
  "hidden_activation": "gelu_pytorch_tanh",
  "dtype": "bfloat16"
}}
"#,
        types.join(", ")
    )
}

/// Every layer's tensors, keys and values included (the model without sharing reads them all).
fn tensors() -> Vec<(String, Vec<usize>)> {
    let mut t = decoder_tensors([VOCAB, HIDDEN, LAYERS], false, |p| {
        let i: usize = p.trim_end_matches('.').rsplit('.').next().and_then(|i| i.parse().ok()).unwrap_or(0);
        let d = if (i + 1).is_multiple_of(FULL_EVERY) { GLOBAL_HEAD_DIM } else { HEAD_DIM };
        let mut t = layer_norms(p, HIDDEN).to_vec();
        t.extend(dense_mlp(&format!("{p}mlp."), HIDDEN, INTERMEDIATE));
        let a = format!("{p}self_attn.");
        t.extend([
            (format!("{p}pre_feedforward_layernorm.weight"), vec![HIDDEN]),
            (format!("{p}post_feedforward_layernorm.weight"), vec![HIDDEN]),
            (format!("{a}q_proj.weight"), vec![HEADS * d, HIDDEN]),
            (format!("{a}k_proj.weight"), vec![d, HIDDEN]),
            (format!("{a}v_proj.weight"), vec![d, HIDDEN]),
            (format!("{a}o_proj.weight"), vec![HIDDEN, HEADS * d]),
            (format!("{a}q_norm.weight"), vec![d]),
            (format!("{a}k_norm.weight"), vec![d]),
            (format!("{p}per_layer_input_gate.weight"), vec![PER_LAYER, HIDDEN]),
            (format!("{p}per_layer_projection.weight"), vec![HIDDEN, PER_LAYER]),
            (format!("{p}post_per_layer_input_norm.weight"), vec![HIDDEN]),
            (format!("{p}layer_scalar"), vec![1]),
        ]);
        t
    });
    t.extend([
        ("model.embed_tokens_per_layer.weight".to_string(), vec![VOCAB, LAYERS * PER_LAYER]),
        ("model.per_layer_model_projection.weight".to_string(), vec![LAYERS * PER_LAYER, HIDDEN]),
        ("model.per_layer_projection_norm.weight".to_string(), vec![PER_LAYER]),
    ]);
    t.sort();
    t
}

/// `dir` as `base`'s weights (linked) under another `config.json`.
fn link_variant(base: &Path, dir: &Path, config: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let weights = dir.join("model.safetensors");
    if !weights.exists() {
        std::os::unix::fs::symlink(base.join("model.safetensors"), &weights)
            .with_context(|| format!("linking {}", weights.display()))?;
    }
    std::fs::write(dir.join("config.json"), config).with_context(|| format!("writing {}", dir.display()))
}
