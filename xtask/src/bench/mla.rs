//! `cargo xtask bench mla [--keep]`: multi-head latent attention's two forms, decode time side
//! by side in ONNX Runtime and OpenVINO.
//!
//! A DeepSeek-V2-Lite-shaped checkpoint (its attention exactly: 16 heads, `kv_lora_rank` 512,
//! nope 128 + rope 64 query/key channels, values of 128, no query low-rank, its yarn rope;
//! 4 dense layers with a small MLP and a 32k vocabulary, so that attention is what differs)
//! is exported for generation with `--latent-attention absorbed` (what `auto` picks for a
//! decode component) and `expanded` (transformers' form), each to ONNX (static cache of
//! `CACHE_LEN` slots, multi-token decode, run with the caches bound in place by
//! `bench_generate.py`) and to OpenVINO IR (stateful, `bench_openvino.py`). Each loop
//! prefills a `PROMPT`-token prompt in one call and times `STEPS` single-token steps. The
//! table gives decode ms/token and prefill ms per form and format, the expanded/absorbed ratio,
//! and whether the two forms' greedy tokens agree.

use super::*;

/// DeepSeek-V2-Lite's attention (config.json of deepseek-ai/DeepSeek-V2-Lite).
const HIDDEN: usize = 2048;
const HEADS: usize = 16;
const KV_LORA_RANK: usize = 512;
const NOPE: usize = 128;
const ROPE: usize = 64;
const V_DIM: usize = 128;
/// Cut: few dense layers with a small MLP and vocabulary.
const LAYERS: usize = 4;
const INTERMEDIATE: usize = 1408;
const VOCAB: usize = 32000;

/// Static cache slots (ONNX), prompt tokens and timed decode steps.
const CACHE_LEN: usize = 2048;
const PROMPT: usize = 1024;
const STEPS: usize = 16;

const FORMS: [&str; 2] = ["absorbed", "expanded"];
/// (format, loop script, its output tag)
const FORMATS: [(&str, &str, &str); 2] =
    [("onnx", "bench_generate.py", "GEN"), ("openvino", "bench_openvino.py", "OV")];

fn config() -> String {
    format!(
        r#"{{
  "architectures": ["DeepseekV2ForCausalLM"],
  "model_type": "deepseek_v2",
  "hidden_size": {HIDDEN},
  "intermediate_size": {INTERMEDIATE},
  "moe_intermediate_size": {INTERMEDIATE},
  "num_hidden_layers": {LAYERS},
  "first_k_dense_replace": {LAYERS},
  "n_routed_experts": 64,
  "n_shared_experts": 2,
  "num_experts_per_tok": 6,
  "topk_method": "greedy",
  "n_group": 1,
  "topk_group": 1,
  "norm_topk_prob": false,
  "routed_scaling_factor": 1.0,
  "num_attention_heads": {HEADS},
  "num_key_value_heads": {HEADS},
  "q_lora_rank": null,
  "kv_lora_rank": {KV_LORA_RANK},
  "qk_nope_head_dim": {NOPE},
  "qk_rope_head_dim": {ROPE},
  "v_head_dim": {V_DIM},
  "vocab_size": {VOCAB},
  "max_position_embeddings": 163840,
  "rope_theta": 10000,
  "rope_scaling": {{"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
    "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707}},
  "rms_norm_eps": 1e-6,
  "tie_word_embeddings": false,
  "hidden_act": "silu",
  "attention_bias": false,
  "torch_dtype": "bfloat16"
}}
"#
    )
}

/// Every tensor of the cut checkpoint, in name order.
fn tensors() -> Vec<(String, Vec<usize>)> {
    decoder_tensors([VOCAB, HIDDEN, LAYERS], true, |p| {
        let mut t = layer_norms(p, HIDDEN).to_vec();
        t.extend([
            (format!("{p}self_attn.q_proj.weight"), vec![HEADS * (NOPE + ROPE), HIDDEN]),
            (format!("{p}self_attn.kv_a_proj_with_mqa.weight"), vec![KV_LORA_RANK + ROPE, HIDDEN]),
            (format!("{p}self_attn.kv_a_layernorm.weight"), vec![KV_LORA_RANK]),
            (format!("{p}self_attn.kv_b_proj.weight"), vec![HEADS * (NOPE + V_DIM), KV_LORA_RANK]),
            (format!("{p}self_attn.o_proj.weight"), vec![HIDDEN, HEADS * V_DIM]),
        ]);
        t.extend(dense_mlp(&format!("{p}mlp."), HIDDEN, INTERMEDIATE));
        t
    })
}

/// One timed loop: decode ms/token, prefill ms and the greedy tokens.
struct Timed {
    decode_ms: Option<f64>,
    prefill_ms: Option<f64>,
    tokens: String,
}

pub(super) fn bench_mla(root: &Path, opts: &Opts) -> Result<()> {
    let steps = 3 + FORMS.len() * FORMATS.len();
    let Prepared { bench_dir, venv, exe, .. } = prepare_build(root, steps, &[])?;
    let ckpt = bench_dir.join("deepseek-v2-lite-attention-bf16");
    println!("==> [3/{steps}] checkpoint {}", ckpt.display());
    ensure_random_checkpoint(&ckpt, &tensors(), &config())?;
    let mut step = 3;
    let mut results: Vec<(&str, &str, Timed)> = vec![];
    for (format, script, tag) in FORMATS {
        for form in FORMS {
            step += 1;
            let out = bench_dir.join(format!("mla-{format}-{form}"));
            println!("==> [{step}/{steps}] {format}, --latent-attention {form} -> {}", out.display());
            prepare_run(&ckpt)?;
            let mut cmd = Command::new(&exe);
            cmd.arg("export").arg("--model").arg(&ckpt).args(["--format", format, "--dynamic", "--for-generation"]);
            cmd.args(["--static-cache", &CACHE_LEN.to_string(), "--multi-token-decode", "--latent-attention", form]);
            cmd.arg("--force").arg("--output").arg(&out);
            let m = measure(&mut cmd, &bench_dir.join(format!("mla-{format}-{form}.log")))?;
            if !m.status.success() {
                print_tail(&m.log, 30);
                bail!("`{}` failed ({})", describe(&cmd), m.status);
            }
            println!("  exported in {:.1} s, peak RSS {}", m.wall_s, rss(&m));
            let mut run = venv.command();
            run.arg(root.join("xtask").join("python").join(script)).arg("run").arg(form).arg(&out);
            run.args([PROMPT.to_string(), STEPS.to_string()]).env("BENCH_CACHE_LEN", CACHE_LEN.to_string());
            let r = pairs(&mut run, &format!("{tag} {form} "))?;
            let get = |k: &str| r.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
            let number = |k: &str| get(k).and_then(|v| v.parse::<f64>().ok());
            let timed = Timed {
                decode_ms: number("decode_ms_tok"),
                prefill_ms: number("prefill_ms"),
                tokens: get("tokens").unwrap_or_default(),
            };
            results.push((format, form, timed));
            if !opts.keep {
                remove_dir(&out)?;
            }
        }
    }
    print_table(&results);
    Ok(())
}

fn print_table(results: &[(&str, &str, Timed)]) {
    println!(
        "\nmla: DeepSeek-V2-Lite attention ({HEADS} heads, kv_lora_rank {KV_LORA_RANK}, rope {ROPE}, nope {NOPE}, \
         v {V_DIM}), {LAYERS} dense layers, float32, batch 1; prompt {PROMPT} in one call, {STEPS} timed steps; \
         ONNX static cache {CACHE_LEN}, OpenVINO stateful"
    );
    let ms = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.1} ms"));
    println!("  {:<10}{:<10}{:>16}{:>16}", "format", "form", "decode/token", "prefill");
    for (format, form, t) in results {
        println!("  {format:<10}{form:<10}{:>16}{:>16}", ms(t.decode_ms), ms(t.prefill_ms));
    }
    for (format, ..) in FORMATS {
        let of = |form: &str| results.iter().find(|r| r.0 == format && r.1 == form).map(|r| &r.2);
        if let (Some(a), Some(e)) = (of("absorbed"), of("expanded")) {
            let ratio = match (e.decode_ms, a.decode_ms) {
                (Some(e), Some(a)) if a > 0.0 => format!("{:.1}x", e / a),
                _ => "n/a".into(),
            };
            let same = if a.tokens == e.tokens { "same greedy tokens" } else { "greedy tokens DIFFER" };
            println!("  {format}: expanded / absorbed decode time {ratio}; {same}");
        }
    }
}
