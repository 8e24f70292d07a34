//! `cargo xtask bench ssm [--keep]`: a Mamba2 of about 130M parameters in ONNX Runtime: decode
//! time per token early and late in a sequence (the state does not grow, so they should be
//! within 1.1x), and a 512-token prompt in one call (ONNX's `Scan`) against 512 decode steps.
//!
//! The checkpoint has state-spaces/mamba2-130m's shapes (24 layers, hidden 768, 24 heads of 64,
//! state 128, one group, conv of 4, tied 50288-token head) with random bfloat16 weights; it is
//! exported for generation to ONNX (float32, static cache of `CACHE_LEN` slots, multi-token
//! decode) and run by `bench_generate.py` (caches bound in place) three times: prompts of
//! `PROMPTS` tokens in one call, then `STEPS` timed single-token steps each.

use super::*;

const HIDDEN: usize = 768;
const LAYERS: usize = 24;
const HEADS: usize = 24;
const HEAD_DIM: usize = 64;
const STATE: usize = 128;
const GROUPS: usize = 1;
const CONV: usize = 4;
const VOCAB: usize = 50288;

/// Static cache slots (positions the loop may reach), prompt lengths and timed steps.
const CACHE_LEN: usize = 2100;
const PROMPTS: [usize; 3] = [16, 512, 2000];
const STEPS: usize = 32;

fn config() -> String {
    format!(
        r#"{{
  "architectures": ["Mamba2ForCausalLM"],
  "model_type": "mamba2",
  "hidden_size": {HIDDEN},
  "num_hidden_layers": {LAYERS},
  "num_heads": {HEADS},
  "head_dim": {HEAD_DIM},
  "state_size": {STATE},
  "n_groups": {GROUPS},
  "conv_kernel": {CONV},
  "expand": 2,
  "vocab_size": {VOCAB},
  "layer_norm_epsilon": 1e-5,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16"
}}
"#
    )
}

/// Every tensor of the checkpoint, in name order.
fn tensors() -> Vec<(String, Vec<usize>)> {
    let inner = HEADS * HEAD_DIM;
    let conv = inner + 2 * GROUPS * STATE;
    let mut t = vec![
        ("backbone.embeddings.weight".to_string(), vec![VOCAB, HIDDEN]),
        ("backbone.norm_f.weight".to_string(), vec![HIDDEN]),
    ];
    for i in 0..LAYERS {
        let p = format!("backbone.layers.{i}.");
        t.extend([
            (format!("{p}norm.weight"), vec![HIDDEN]),
            (format!("{p}mixer.in_proj.weight"), vec![inner + conv + HEADS, HIDDEN]),
            (format!("{p}mixer.conv1d.weight"), vec![conv, 1, CONV]),
            (format!("{p}mixer.conv1d.bias"), vec![conv]),
            (format!("{p}mixer.dt_bias"), vec![HEADS]),
            (format!("{p}mixer.A_log"), vec![HEADS]),
            (format!("{p}mixer.D"), vec![HEADS]),
            (format!("{p}mixer.norm.weight"), vec![inner]),
            (format!("{p}mixer.out_proj.weight"), vec![HIDDEN, inner]),
        ]);
    }
    t.sort();
    t
}

/// One timed loop.
struct Timed {
    prompt: usize,
    decode_ms: Option<f64>,
    prefill_ms: Option<f64>,
}

pub(super) fn bench_ssm(root: &Path, opts: &Opts) -> Result<()> {
    let steps = 4 + PROMPTS.len();
    let Prepared { bench_dir, venv, exe, .. } = prepare_build(root, steps, &[])?;
    let ckpt = bench_dir.join("mamba2-130m-shapes-bf16");
    println!("==> [3/{steps}] checkpoint {}", ckpt.display());
    ensure_random_checkpoint(&ckpt, &tensors(), &config())?;
    let out = bench_dir.join("ssm-onnx");
    println!("==> [4/{steps}] onnx, static cache {CACHE_LEN}, multi-token decode -> {}", out.display());
    prepare_run(&ckpt)?;
    let mut cmd = Command::new(&exe);
    cmd.arg("export").arg("--model").arg(&ckpt).args(["--format", "onnx", "--dynamic", "--for-generation"]);
    cmd.args(["--static-cache", &CACHE_LEN.to_string(), "--multi-token-decode", "--force", "--output"]).arg(&out);
    let m = measure(&mut cmd, &bench_dir.join("ssm-onnx.log"))?;
    if !m.status.success() {
        print_tail(&m.log, 30);
        bail!("`{}` failed ({})", describe(&cmd), m.status);
    }
    println!("  exported in {:.1} s, peak RSS {}", m.wall_s, rss(&m));
    let mut results = vec![];
    for (i, prompt) in PROMPTS.into_iter().enumerate() {
        println!("==> [{}/{steps}] prompt {prompt} in one call, {STEPS} timed steps", 5 + i);
        let mut run = venv.command();
        run.arg(root.join("xtask").join("python").join("bench_generate.py")).arg("run").arg("ssm").arg(&out);
        run.args([prompt.to_string(), STEPS.to_string()]);
        let r = pairs(&mut run, "GEN ssm ")?;
        let number = |k: &str| r.iter().find(|(key, _)| key == k).and_then(|(_, v)| v.parse::<f64>().ok());
        results.push(Timed { prompt, decode_ms: number("decode_ms_tok"), prefill_ms: number("prefill_ms") });
    }
    if !opts.keep {
        remove_dir(&out)?;
    }
    print_table(&results);
    Ok(())
}

fn print_table(results: &[Timed]) {
    println!(
        "\nssm: Mamba2 shapes of mamba2-130m ({LAYERS} layers, hidden {HIDDEN}, {HEADS} heads x {HEAD_DIM}, state \
         {STATE}), ONNX Runtime, float32, batch 1, static cache {CACHE_LEN}; each prompt in one call, {STEPS} timed \
         steps after it"
    );
    let ms = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.2} ms"));
    println!("  {:<10}{:>18}{:>16}", "prompt", "decode/token", "prefill");
    for t in results {
        println!("  {:<10}{:>18}{:>16}", t.prompt, ms(t.decode_ms), ms(t.prefill_ms));
    }
    let at = |p: usize| results.iter().find(|t| t.prompt == p);
    if let (Some(early), Some(late)) = (at(PROMPTS[0]), at(PROMPTS[2])) {
        if let (Some(e), Some(l)) = (early.decode_ms, late.decode_ms) {
            println!("  decode at {} vs {}: {:.2}x", PROMPTS[2], PROMPTS[0], l / e);
        }
    }
    if let Some(t) = at(512) {
        if let (Some(p), Some(d)) = (t.prefill_ms, t.decode_ms) {
            println!(
                "  512-token prompt in one call: {p:.0} ms; 512 decode steps: {:.0} ms ({:.1}x)",
                512.0 * d,
                512.0 * d / p
            );
        }
    }
}
