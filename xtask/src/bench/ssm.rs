//! `cargo xtask bench ssm [--keep]` and `cargo xtask bench deltanet [--keep]`: models whose
//! layers keep a fixed-size recurrent state, in ONNX Runtime and OpenVINO: decode time per token
//! early and late in a sequence (the state does not grow, so they should be close), and a long
//! prompt in one call (ONNX's `Scan`, OpenVINO's `TensorIterator`) against as many decode steps.
//!
//! - `ssm`: a Mamba2 of state-spaces/mamba2-130m's shapes (24 layers, hidden 768, 24 heads of
//!   64, state 128, one group, conv of 4, tied 50288-token head).
//! - `deltanet`: a Qwen3.5 of Qwen3.5-0.8B's shapes (24 layers, every 4th full attention with 8
//!   heads of 256 over 2 KV heads and a quarter rotary, the others gated DeltaNet with 16 key and
//!   16 value heads of 128 and a conv of 4; hidden 1024, MLP 3584, tied 248320-token head):
//!   only the 6 full-attention layers' caches grow. Its cache bytes at 4096 tokens (from the
//!   export's `export.json`) are printed beside those of a dense Qwen3 of the same width (the
//!   Qwen3-0.6B shapes of the other benches: 28 layers of 8 KV heads of 128).
//!
//! Each checkpoint has random bfloat16 weights; it is exported for generation to ONNX and to
//! OpenVINO (float32, static cache, multi-token decode; OpenVINO stateful) and run once per
//! prompt length by `bench_generate.py` (onnxruntime, caches bound in place) and
//! `bench_openvino.py` (the states in the runtime): the prompt in one call, then `STEPS` timed
//! single-token steps.

use super::*;

/// Timed single-token steps after each prompt.
const STEPS: usize = 32;

/// Each runtime's export format, its timing script and the prefix of the script's lines.
const RUNTIMES: [(&str, &str, &str); 2] =
    [("onnx", "bench_generate.py", "GEN"), ("openvino", "bench_openvino.py", "OV")];

/// The progress lines' step count: the setup, the build, the checkpoint, then per runtime its export and
/// one run per prompt, and `extra` more.
fn step_count(model: &Recurrent, extra: usize) -> usize {
    3 + RUNTIMES.len() * (1 + model.prompts.len()) + extra
}

/// One recurrent model to time.
struct Recurrent {
    /// The bench's name, its runs' label and the folder of its export.
    name: &'static str,
    /// The table's header.
    what: String,
    /// The checkpoint's folder under target/bench/.
    checkpoint: &'static str,
    config: String,
    tensors: Vec<(String, Vec<usize>)>,
    cache_len: usize,
    prompts: [usize; 3],
}

/// One timed loop.
struct Timed {
    runtime: &'static str,
    prompt: usize,
    decode_ms: Option<f64>,
    prefill_ms: Option<f64>,
}

pub(super) fn bench_ssm(root: &Path, opts: &Opts) -> Result<()> {
    let model = mamba2();
    let (results, _) = bench_recurrent(root, opts, &model, 0)?;
    print_table(&model, &results);
    Ok(())
}

pub(super) fn bench_deltanet(root: &Path, opts: &Opts) -> Result<()> {
    let model = qwen3_5();
    let (results, cache) = bench_recurrent(root, opts, &model, 1)?;
    // the dense model of the same width: its export only, for its cache description
    let steps = step_count(&model, 1);
    let dense_ckpt = target_dir(root).join("bench").join("qwen3-0.6b-bf16");
    println!(
        "==> [{steps}/{steps}] dense Qwen3 {}: onnx, static cache {} (its cache only)",
        dense_ckpt.display(),
        model.cache_len
    );
    ensure_checkpoint(&dense_ckpt)?;
    let dense = cache_bytes_of_export(root, &dense_ckpt, "deltanet-dense-onnx", model.cache_len)?;
    print_table(&model, &results);
    println!(
        "  cache at {} tokens: {} ({}) vs dense Qwen3 of the same width: {} ({:.1}x less)",
        model.cache_len,
        gib(cache.total),
        cache.describe(),
        gib(dense.total),
        dense.total as f64 / cache.total as f64
    );
    Ok(())
}

/// Exports `model` once per runtime (ONNX, OpenVINO) and times each at each prompt length;
/// `extra` more steps follow (counted in the step numbers). Also the ONNX export's cache at
/// `cache_len` tokens.
fn bench_recurrent(root: &Path, opts: &Opts, model: &Recurrent, extra: usize) -> Result<(Vec<Timed>, CacheBytes)> {
    let steps = step_count(model, extra);
    let Prepared { bench_dir, venv, exe, .. } = prepare_build(root, steps, &[])?;
    let ckpt = bench_dir.join(model.checkpoint);
    let mut step = 3;
    println!("==> [{step}/{steps}] checkpoint {}", ckpt.display());
    ensure_random_checkpoint(&ckpt, &model.tensors, &model.config)?;
    let (mut results, mut cache) = (vec![], None);
    for (format, script, prefix) in RUNTIMES {
        step += 1;
        let out = bench_dir.join(format!("{}-{format}", model.name));
        println!(
            "==> [{step}/{steps}] {format}, static cache {}, multi-token decode -> {}",
            model.cache_len,
            out.display()
        );
        let log = bench_dir.join(format!("{}-{format}.log", model.name));
        export_for_generation(&exe, format, &ckpt, &out, model.cache_len, &log)?;
        if cache.is_none() {
            cache = Some(cache_bytes(&out, model.cache_len)?);
        }
        for prompt in model.prompts {
            step += 1;
            println!("==> [{step}/{steps}] {format}: prompt {prompt} in one call, {STEPS} timed steps");
            let mut run = venv.command();
            run.arg(root.join("xtask").join("python").join(script)).arg("run").arg(model.name).arg(&out);
            run.args([prompt.to_string(), STEPS.to_string()]);
            let r = pairs(&mut run, &format!("{prefix} {} ", model.name))?;
            let number = |k: &str| r.iter().find(|(key, _)| key == k).and_then(|(_, v)| v.parse::<f64>().ok());
            let (decode_ms, prefill_ms) = (number("decode_ms_tok"), number("prefill_ms"));
            results.push(Timed { runtime: format, prompt, decode_ms, prefill_ms });
        }
        if !opts.keep {
            remove_dir(&out)?;
        }
    }
    Ok((results, cache.expect("one export at least")))
}

/// `hfexport export --format <format> --for-generation` with a static cache of `cache_len` slots
/// and multi-token decode (the prompt in one call).
pub(super) fn export_for_generation(
    exe: &Path,
    format: &str,
    ckpt: &Path,
    out: &Path,
    cache_len: usize,
    log: &Path,
) -> Result<()> {
    prepare_run(ckpt)?;
    let mut cmd = Command::new(exe);
    cmd.arg("export").arg("--model").arg(ckpt).args(["--format", format, "--dynamic", "--for-generation"]);
    cmd.args(["--static-cache", &cache_len.to_string(), "--multi-token-decode", "--force", "--output"]).arg(out);
    let m = measure(&mut cmd, log)?;
    if !m.status.success() {
        print_tail(&m.log, 30);
        bail!("`{}` failed ({})", describe(&cmd), m.status);
    }
    println!("  exported in {:.1} s, peak RSS {}", m.wall_s, rss(&m));
    Ok(())
}

/// The cache of a generation export of `ckpt` (exported to `bench_dir/<name>`, then removed).
fn cache_bytes_of_export(root: &Path, ckpt: &Path, name: &str, cache_len: usize) -> Result<CacheBytes> {
    let bench_dir = target_dir(root).join("bench");
    let exe = target_dir(root).join("release").join(format!("hfexport{}", std::env::consts::EXE_SUFFIX));
    let out = bench_dir.join(name);
    export_for_generation(&exe, "onnx", ckpt, &out, cache_len, &bench_dir.join(format!("{name}.log")))?;
    let bytes = cache_bytes(&out, cache_len)?;
    remove_dir(&out)?;
    Ok(bytes)
}

/// A generation export's cache inputs (`past_key_values.*` of its `decode` component) in bytes, the
/// `cache_len` axis at `len`, the batch at 1: in all, and those that grow with the sequence.
pub(super) struct CacheBytes {
    pub(super) total: u64,
    growing: u64,
    pub(super) tensors: usize,
}

impl CacheBytes {
    fn describe(&self) -> String {
        format!("{} tensors, {} of it in caches that grow with the sequence", self.tensors, gib(self.growing))
    }
}

pub(super) fn cache_bytes(export: &Path, len: usize) -> Result<CacheBytes> {
    let path = export.join("export.json");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?)
            .with_context(|| format!("parsing {}", path.display()))?;
    let decode = meta["components"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "decode"))
        .with_context(|| format!("{}: no decode component", path.display()))?;
    let mut bytes = CacheBytes { total: 0, growing: 0, tensors: 0 };
    for port in decode["inputs"].as_array().into_iter().flatten() {
        if !port["name"].as_str().is_some_and(|n| n.starts_with("past_key_values.")) {
            continue;
        }
        let width: u64 = match port["dtype"].as_str() {
            Some("f32" | "i32") => 4,
            Some("f16" | "bf16") => 2,
            other => bail!("{}: cache dtype {other:?}", path.display()),
        };
        let (mut n, mut grows) = (width, false);
        for d in port["shape"].as_array().into_iter().flatten() {
            let d = d.as_str().unwrap_or_default();
            n *= match d.parse::<u64>() {
                Ok(v) => v,
                Err(_) if d == "cache_len" => {
                    grows = true;
                    len as u64
                }
                Err(_) => 1, // the batch
            };
        }
        bytes.total += n;
        bytes.growing += if grows { n } else { 0 };
        bytes.tensors += 1;
    }
    Ok(bytes)
}

pub(super) fn gib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

fn print_table(model: &Recurrent, results: &[Timed]) {
    println!(
        "\n{}: {}, float32, batch 1, static cache {}; each prompt in one call, {STEPS} timed steps after it",
        model.name, model.what, model.cache_len
    );
    let ms = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.2} ms"));
    println!("  {:<10}{:<10}{:>18}{:>16}", "runtime", "prompt", "decode/token", "prefill");
    for t in results {
        println!("  {:<10}{:<10}{:>18}{:>16}", t.runtime, t.prompt, ms(t.decode_ms), ms(t.prefill_ms));
    }
    let [first, middle, last] = model.prompts;
    let mut runtimes: Vec<&str> = results.iter().map(|t| t.runtime).collect();
    runtimes.dedup();
    for runtime in runtimes {
        let at = |p: usize| results.iter().find(|t| t.runtime == runtime && t.prompt == p);
        if let (Some(Timed { decode_ms: Some(e), .. }), Some(Timed { decode_ms: Some(l), .. })) = (at(first), at(last))
        {
            println!("  {runtime}: decode at {last} vs {first}: {:.2}x", l / e);
        }
        if let Some(Timed { prefill_ms: Some(p), decode_ms: Some(d), .. }) = at(middle) {
            let steps = middle as f64 * d;
            println!(
                "  {runtime}: {middle}-token prompt in one call: {p:.0} ms; {middle} decode steps: {steps:.0} ms ({:.1}x)",
                steps / p
            );
        }
    }
}

// ---- the models ---------------------------------------------------------------------------

fn mamba2() -> Recurrent {
    const HIDDEN: usize = 768;
    const LAYERS: usize = 24;
    const HEADS: usize = 24;
    const HEAD_DIM: usize = 64;
    const STATE: usize = 128;
    const GROUPS: usize = 1;
    const CONV: usize = 4;
    const VOCAB: usize = 50288;
    let config = format!(
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
    );
    let inner = HEADS * HEAD_DIM;
    let conv = inner + 2 * GROUPS * STATE;
    let mut tensors = vec![
        ("backbone.embeddings.weight".to_string(), vec![VOCAB, HIDDEN]),
        ("backbone.norm_f.weight".to_string(), vec![HIDDEN]),
    ];
    for i in 0..LAYERS {
        let p = format!("backbone.layers.{i}.");
        tensors.extend([
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
    tensors.sort();
    Recurrent {
        name: "ssm",
        what: format!(
            "Mamba2 shapes of mamba2-130m ({LAYERS} layers, hidden {HIDDEN}, {HEADS} heads x {HEAD_DIM}, state {STATE})"
        ),
        checkpoint: "mamba2-130m-shapes-bf16",
        config,
        tensors,
        cache_len: 2100,
        prompts: [16, 512, 2000],
    }
}

fn qwen3_5() -> Recurrent {
    const HIDDEN: usize = 1024;
    const INTERMEDIATE: usize = 3584;
    const LAYERS: usize = 24;
    const FULL_EVERY: usize = 4;
    const HEADS: usize = 8;
    const KV_HEADS: usize = 2;
    const HEAD_DIM: usize = 256;
    const KEY_HEADS: usize = 16;
    const VALUE_HEADS: usize = 16;
    const KEY_DIM: usize = 128;
    const VALUE_DIM: usize = 128;
    const CONV: usize = 4;
    const VOCAB: usize = 248320;
    let config = format!(
        r#"{{
  "architectures": ["Qwen3_5ForCausalLM"],
  "model_type": "qwen3_5_text",
  "hidden_size": {HIDDEN},
  "intermediate_size": {INTERMEDIATE},
  "num_hidden_layers": {LAYERS},
  "full_attention_interval": {FULL_EVERY},
  "num_attention_heads": {HEADS},
  "num_key_value_heads": {KV_HEADS},
  "head_dim": {HEAD_DIM},
  "linear_num_key_heads": {KEY_HEADS},
  "linear_num_value_heads": {VALUE_HEADS},
  "linear_key_head_dim": {KEY_DIM},
  "linear_value_head_dim": {VALUE_DIM},
  "linear_conv_kernel_dim": {CONV},
  "vocab_size": {VOCAB},
  "max_position_embeddings": 262144,
  "rms_norm_eps": 1e-6,
  "rope_parameters": {{"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25}},
  "tie_word_embeddings": true,
  "hidden_act": "silu",
  "dtype": "bfloat16"
}}
"#
    );
    let (key, value) = (KEY_HEADS * KEY_DIM, VALUE_HEADS * VALUE_DIM);
    let tensors = decoder_tensors([VOCAB, HIDDEN, LAYERS], false, |p| {
        let i: usize = p.trim_end_matches('.').rsplit('.').next().and_then(|i| i.parse().ok()).unwrap_or(0);
        let mut t = layer_norms(p, HIDDEN).to_vec();
        t.extend(dense_mlp(&format!("{p}mlp."), HIDDEN, INTERMEDIATE));
        if (i + 1).is_multiple_of(FULL_EVERY) {
            t.extend([
                (format!("{p}self_attn.q_proj.weight"), vec![2 * HEADS * HEAD_DIM, HIDDEN]),
                (format!("{p}self_attn.k_proj.weight"), vec![KV_HEADS * HEAD_DIM, HIDDEN]),
                (format!("{p}self_attn.v_proj.weight"), vec![KV_HEADS * HEAD_DIM, HIDDEN]),
                (format!("{p}self_attn.o_proj.weight"), vec![HIDDEN, HEADS * HEAD_DIM]),
                (format!("{p}self_attn.q_norm.weight"), vec![HEAD_DIM]),
                (format!("{p}self_attn.k_norm.weight"), vec![HEAD_DIM]),
            ]);
        } else {
            let a = format!("{p}linear_attn.");
            t.extend([
                (format!("{a}in_proj_qkv.weight"), vec![2 * key + value, HIDDEN]),
                (format!("{a}in_proj_z.weight"), vec![value, HIDDEN]),
                (format!("{a}in_proj_b.weight"), vec![VALUE_HEADS, HIDDEN]),
                (format!("{a}in_proj_a.weight"), vec![VALUE_HEADS, HIDDEN]),
                (format!("{a}conv1d.weight"), vec![2 * key + value, 1, CONV]),
                (format!("{a}dt_bias"), vec![VALUE_HEADS]),
                (format!("{a}A_log"), vec![VALUE_HEADS]),
                (format!("{a}norm.weight"), vec![VALUE_DIM]),
                (format!("{a}out_proj.weight"), vec![HIDDEN, value]),
            ]);
        }
        t
    });
    Recurrent {
        name: "deltanet",
        what: format!(
            "Qwen3.5 shapes of Qwen3.5-0.8B ({LAYERS} layers, every {FULL_EVERY}th full attention of {HEADS} heads x \
             {HEAD_DIM}, the others gated DeltaNet of {KEY_HEADS}/{VALUE_HEADS} heads x {KEY_DIM}, hidden {HIDDEN})"
        ),
        checkpoint: "qwen3.5-0.8b-shapes-bf16",
        config,
        tensors,
        cache_len: 4096,
        prompts: [16, 512, 2000],
    }
}
