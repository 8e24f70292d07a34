//! `cargo xtask bench export-onnx [--python] [--keep]`: times `hfexport export --format onnx` on a
//! Qwen3-0.6B-shaped checkpoint with random bfloat16 weights, and optionally
//! `transformers.exporters.OnnxExporter` on the same checkpoint, side by side.
//!
//! - The checkpoint (about 1.19 GB) is generated once under `target/bench/qwen3-0.6b-bf16/`,
//!   streamed tensor by tensor, and regenerated only when missing or of the wrong size.
//! - Each export runs as a child process, timed from spawn to exit (interpreter start and imports
//!   included for Python). Peak RSS and CPU time come from the kernel: the child is reaped with
//!   `wait4(2)` (declared here, from the C library std already links; no `libc` crate), whose
//!   `ru_maxrss` is the high-water mark of the child's resident set over its whole life, exactly,
//!   with no sampling. Outside 64-bit Linux the bench still times the exports but has no RSS.
//! - Before each timed run the bench runs `sync` (so the previous run's dirty pages are not
//!   written back during this one) and reads the checkpoint once, so both exporters start with it
//!   in the page cache.
//! - Every export is checked before its numbers are printed: ONNX Runtime (from `.venv`) loads it
//!   and runs a 4-token input, which must give finite `[1, 4, vocab]` logits; with `--python` the
//!   two exports' logits are also compared (same weights, both float32).

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

mod kv_sharing;
mod mla;
mod scale;
mod ssm;

use crate::python::Venv;
use crate::{cargo_bin, describe, run};

pub const USAGE: &str = "usage: cargo xtask bench export-onnx [--python] [--keep]\n       cargo xtask bench \
                         generate-onnx [--python] [--keep]\n       cargo xtask bench openvino [--python] [--keep]\n       \
                         cargo xtask bench executorch [--python] [--keep]\n       cargo xtask bench moe [--keep]\n       \
                         cargo xtask bench quant [--keep]\n       cargo xtask bench scale [--keep]\n       cargo xtask bench mla [--keep]\n       cargo xtask bench ssm [--keep]\n       cargo xtask bench deltanet [--keep]\n       cargo xtask bench kv-sharing [--keep]";

/// Goals of the ONNX export of a 0.6B model on a developer machine.
const GOAL_WALL_S: f64 = 10.0;
const GOAL_RSS_BYTES: f64 = 1.5e9;

/// Qwen3-0.6B's shape (config.json of Qwen/Qwen3-0.6B, sizes only).
const HIDDEN: usize = 1024;
const INTERMEDIATE: usize = 3072;
const LAYERS: usize = 28;
const HEADS: usize = 16;
const KV_HEADS: usize = 8;
const HEAD_DIM: usize = 128;
const VOCAB: usize = 151936;

const CONFIG_JSON: &str = r#"{
  "architectures": ["Qwen3ForCausalLM"],
  "model_type": "qwen3",
  "hidden_size": 1024,
  "intermediate_size": 3072,
  "num_hidden_layers": 28,
  "num_attention_heads": 16,
  "num_key_value_heads": 8,
  "head_dim": 128,
  "vocab_size": 151936,
  "max_position_embeddings": 40960,
  "rms_norm_eps": 1e-6,
  "rope_theta": 1000000,
  "tie_word_embeddings": true,
  "hidden_act": "silu",
  "dtype": "bfloat16"
}
"#;

/// Loads each ONNX model given after the vocabulary size with ONNX Runtime, runs a 4-token input
/// and checks the logits; with two models, also prints their largest logit difference.
const CHECK_PY: &str = r#"
import sys, time
import numpy as np
import onnxruntime as ort

vocab, paths = int(sys.argv[1]), sys.argv[2:]
ids = np.array([[17, 101, 5, 230]], dtype=np.int64)
feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
first = None
for path in paths:
    t = time.perf_counter()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    unknown = [n for n in names if n not in feeds]
    if unknown:
        sys.exit(f"{path}: unexpected inputs {unknown}")
    logits = session.run(None, {n: feeds[n] for n in names})[0]
    del session
    ok = logits.shape == (1, 4, vocab) and bool(np.isfinite(logits).all())
    print(f"CHECK onnxruntime {ort.__version__}: {path}: logits {logits.dtype} {list(logits.shape)}, "
          f"finite: {bool(np.isfinite(logits).all())}, |logits| max {float(np.abs(logits).max()):.4g} "
          f"({time.perf_counter() - t:.1f} s to load and run)", flush=True)
    if not ok:
        sys.exit(f"{path}: expected finite logits of shape [1, 4, {vocab}]")
    if first is None:
        first = logits
    else:
        print(f"CHECK max |logits difference| with the first model: {float(np.abs(logits - first).max()):.3g}")
"#;

struct Opts {
    python: bool,
    keep: bool,
}

pub fn bench(root: &Path, args: &[String]) -> Result<ExitCode> {
    let Some((what, flags)) = args.split_first() else { bail!("{USAGE}") };
    if ![
        "export-onnx",
        "generate-onnx",
        "openvino",
        "executorch",
        "moe",
        "quant",
        "genai",
        "scale",
        "mla",
        "ssm",
        "deltanet",
        "kv-sharing",
    ]
    .contains(&what.as_str())
    {
        bail!("unknown benchmark `{what}`\n{USAGE}");
    }
    let mut opts = Opts { python: false, keep: false };
    for flag in flags {
        match flag.as_str() {
            "--python" => opts.python = true,
            "--keep" => opts.keep = true,
            other => bail!("unknown flag `{other}`\n{USAGE}"),
        }
    }
    match what.as_str() {
        "generate-onnx" => generate_onnx(root, &opts)?,
        "openvino" => bench_openvino(root, &opts)?,
        "executorch" => bench_executorch(root, &opts)?,
        "moe" => bench_moe(root, &opts)?,
        "quant" => bench_quant(root, &opts)?,
        "genai" => bench_genai(root, &opts)?,
        "scale" => scale::bench_scale(root, &opts)?,
        "mla" => mla::bench_mla(root, &opts)?,
        "ssm" => ssm::bench_ssm(root, &opts)?,
        "deltanet" => ssm::bench_deltanet(root, &opts)?,
        "kv-sharing" => kv_sharing::bench_kv_sharing(root, &opts)?,
        _ => export_onnx(root, &opts)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"))
}

fn export_onnx(root: &Path, opts: &Opts) -> Result<()> {
    let steps = if opts.python { 6 } else { 4 };
    let bench_dir = target_dir(root).join("bench");
    let ckpt = bench_dir.join("qwen3-0.6b-bf16");
    let venv = Venv::new(root);
    if !venv.exists() {
        bail!(
            "{} does not exist: run `cargo xtask setup` first (the bench checks exports with onnxruntime)",
            venv.dir.display()
        );
    }

    println!("==> [1/{steps}] checkpoint {}", ckpt.display());
    let ckpt_bytes = ensure_checkpoint(&ckpt)?;

    println!("==> [2/{steps}] cargo build --release -p hfexport-cli");
    run(Command::new(cargo_bin()).args(["build", "--release", "-p", "hfexport-cli"]).current_dir(root))?;
    let exe = target_dir(root).join("release").join(format!("hfexport{}", std::env::consts::EXE_SUFFIX));

    let ours_out = bench_dir.join("out-hfexport");
    println!("==> [3/{steps}] hfexport export --dynamic --dtype float32 -> {}", ours_out.display());
    prepare_run(&ckpt)?;
    let mut cmd = Command::new(&exe);
    cmd.arg("export").arg("--model").arg(&ckpt).args(["--format", "onnx", "--output"]).arg(&ours_out).args([
        "--dynamic",
        "--force",
        "--dtype",
        "float32",
    ]);
    let ours = measure(&mut cmd, &bench_dir.join("hfexport.log"))?;
    if !ours.status.success() {
        print_tail(&ours.log, 30);
        bail!("`{}` failed ({})", describe(&cmd), ours.status);
    }
    for line in log_lines(&ours.log)?.iter().filter(|l| l.starts_with("exported ")) {
        println!("  {line}");
    }
    let ours_bytes = onnx_bytes(&ours_out)?;

    println!("==> [4/{steps}] onnxruntime check of {}", onnx_model(&ours_out).display());
    check_with_onnxruntime(&venv, &[onnx_model(&ours_out)])?;

    let mut theirs: Option<(Measured, u64)> = None;
    let theirs_out = bench_dir.join("out-transformers");
    if opts.python {
        println!(
            "==> [5/{steps}] xtask/python/bench_transformers_onnx.py (transformers.exporters.OnnxExporter) -> {}",
            theirs_out.display()
        );
        remove_dir(&theirs_out)?;
        prepare_run(&ckpt)?;
        let script = root.join("xtask").join("python").join("bench_transformers_onnx.py");
        let mut cmd = venv.command();
        cmd.arg(&script).arg(&ckpt).arg(&theirs_out);
        let m = measure(&mut cmd, &bench_dir.join("transformers.log"))?;
        if m.status.success() {
            let phases: Vec<String> =
                log_lines(&m.log)?.iter().filter_map(|l| l.strip_prefix("BENCH ")).map(|p| format!("{p} s")).collect();
            println!("  phases: {}", phases.join(", "));
            println!(
                "==> [6/{steps}] onnxruntime check of {} (and logits vs hfexport's)",
                onnx_model(&theirs_out).display()
            );
            match check_with_onnxruntime(&venv, &[onnx_model(&ours_out), onnx_model(&theirs_out)]) {
                Ok(()) => theirs = Some((m, onnx_bytes(&theirs_out)?)),
                Err(err) => {
                    println!("  the transformers export does not pass the check, its numbers are left out: {err:#}")
                }
            }
        } else {
            println!("  the transformers export failed ({}); the end of {}:", m.status, m.log.display());
            print_tail(&m.log, 25);
        }
    }

    print_table(ckpt_bytes, (&ours, ours_bytes), theirs.as_ref().map(|(m, b)| (m, *b)));

    if opts.keep {
        println!(
            "\nkept {}{}",
            ours_out.display(),
            if opts.python { format!(" and {}", theirs_out.display()) } else { String::new() }
        );
    } else {
        remove_dir(&ours_out)?;
        remove_dir(&theirs_out)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// generate-onnx

/// What the generation benches (`generate-onnx`, `openvino`, `executorch`) start from.
struct Prepared {
    bench_dir: PathBuf,
    ckpt: PathBuf,
    venv: Venv,
    /// Their script in xtask/python/.
    script: PathBuf,
    /// The release `hfexport`.
    exe: PathBuf,
}

/// Steps 1 and 2 of a generation bench: the checkpoint, and a release build of the CLI with
/// `features`; `.venv/` must exist.
fn prepare(root: &Path, script: &str, steps: usize, features: &[&str]) -> Result<Prepared> {
    let ckpt = target_dir(root).join("bench").join("qwen3-0.6b-bf16");
    println!("==> [1/{steps}] checkpoint {}", ckpt.display());
    ensure_checkpoint(&ckpt)?;
    let p = prepare_build(root, steps, features)?;
    Ok(Prepared { script: root.join("xtask").join("python").join(script), ckpt, ..p })
}

/// Step 2 of a bench: `.venv/` checked and the release CLI built with `features` (`ckpt` and
/// `script` left empty).
fn prepare_build(root: &Path, steps: usize, features: &[&str]) -> Result<Prepared> {
    let bench_dir = target_dir(root).join("bench");
    let venv = Venv::new(root);
    if !venv.exists() {
        bail!("{} does not exist: run `cargo xtask setup` first", venv.dir.display());
    }
    let mut build = Command::new(cargo_bin());
    build.args(["build", "--release", "-p", "hfexport-cli"]);
    if !features.is_empty() {
        build.args(["--features", &features.join(",")]);
    }
    println!("==> [2/{steps}] {}", describe(&build));
    run(build.current_dir(root))?;
    let exe = target_dir(root).join("release").join(format!("hfexport{}", std::env::consts::EXE_SUFFIX));
    Ok(Prepared { script: PathBuf::new(), bench_dir, ckpt: PathBuf::new(), venv, exe })
}

/// Static cache length, prompt length and timed decode steps of `generate-onnx`.
const GEN_CACHE_LEN: usize = 512;
const GEN_PROMPT: usize = 128;
const GEN_STEPS: usize = 64;
/// Cap on the transformers export for generation.
const GEN_PYTHON_TIMEOUT_S: u64 = 600;

/// `cargo xtask bench generate-onnx`: exports the bench checkpoint for generation (static cache of
/// 512, multi-token decode) and times a greedy onnxruntime loop over it with the caches bound in
/// place (`xtask/python/bench_generate.py run`): prefill tokens/s of a 128-token prompt in one
/// call, decode ms/token over 64 single-token steps after 2 warm-up steps. With `--python`, the
/// same for `transformers.exporters`' static-cache multi-token `decode` export of the checkpoint.
fn generate_onnx(root: &Path, opts: &Opts) -> Result<()> {
    let steps = if opts.python { 6 } else { 4 };
    let Prepared { bench_dir, ckpt, venv, script, exe } = prepare(root, "bench_generate.py", steps, &[])?;

    let ours_out = bench_dir.join("gen-hfexport");
    let cache = GEN_CACHE_LEN.to_string();
    println!(
        "==> [3/{steps}] hfexport export --dynamic --for-generation --static-cache {cache} --multi-token-decode -> {}",
        ours_out.display()
    );
    prepare_run(&ckpt)?;
    let mut cmd = Command::new(&exe);
    cmd.arg("export").arg("--model").arg(&ckpt).args(["--format", "onnx", "--dynamic", "--for-generation"]);
    cmd.args(["--static-cache", &cache, "--multi-token-decode", "--force", "--output"]).arg(&ours_out);
    let m = measure(&mut cmd, &bench_dir.join("gen-hfexport.log"))?;
    if !m.status.success() {
        print_tail(&m.log, 30);
        bail!("`{}` failed ({})", describe(&cmd), m.status);
    }
    println!(
        "  exported in {:.2} s, peak RSS {}",
        m.wall_s,
        m.peak_rss.map_or("n/a".into(), |r| format!("{:.0} MB", r as f64 / 1e6))
    );

    println!("==> [4/{steps}] greedy loop (onnxruntime CPU, caches bound in place) over {}", ours_out.display());
    let ours = run_generate(&venv, &script, "GEN", "hfexport", &ours_out)?;

    let mut theirs: Option<Vec<(String, String)>> = None;
    let theirs_out = bench_dir.join("gen-transformers");
    if opts.python {
        println!(
            "==> [5/{steps}] bench_generate.py export-transformers (static cache {cache}, multi-token decode) -> {} (cap {GEN_PYTHON_TIMEOUT_S} s)",
            theirs_out.display()
        );
        remove_dir(&theirs_out)?;
        prepare_run(&ckpt)?;
        let log = bench_dir.join("gen-transformers.log");
        let mut cmd = venv.command();
        cmd.arg(&script).arg("export-transformers").arg(&ckpt).arg(&theirs_out).arg(&cache);
        match run_capped(&mut cmd, &log, GEN_PYTHON_TIMEOUT_S)? {
            Some((status, wall)) if status.success() => {
                let phases: Vec<String> =
                    log_lines(&log)?.iter().filter_map(|l| l.strip_prefix("BENCH ")).map(|p| p.to_string()).collect();
                println!("  exported in {wall:.1} s: {}", phases.join(", "));
                println!("==> [6/{steps}] the same loop over {}", theirs_out.display());
                match run_generate(&venv, &script, "GEN", "transformers", &theirs_out) {
                    Ok(r) => theirs = Some(r),
                    Err(err) => println!("  the loop failed on the transformers export: {err:#}"),
                }
            }
            Some((status, _)) => {
                println!("  the transformers export failed ({status}); the end of {}:", log.display());
                print_tail(&log, 25);
            }
            None => {
                println!(
                    "  the transformers export did not finish in {GEN_PYTHON_TIMEOUT_S} s (killed); the end of {}:",
                    log.display()
                );
                print_tail(&log, 25);
            }
        }
    }

    let get = |r: &[(String, String)], k: &str| {
        r.iter().find(|(key, _)| key == k).map_or("n/a".to_string(), |(_, v)| v.clone())
    };
    println!(
        "\ngenerate-onnx: Qwen3-0.6B shape, float32, static cache {GEN_CACHE_LEN}, batch 1, greedy, onnxruntime CPU"
    );
    let mut header = format!("  {:<34}{:>16}", "", "hfexport");
    if theirs.is_some() {
        header += &format!("{:>16}", "transformers");
    }
    println!("{header}");
    for (label, key, unit) in [
        ("session load", "load_s", " s"),
        (&*format!("prefill, {GEN_PROMPT} tokens in one call"), "prefill_ms", " ms"),
        ("prefill tokens/s", "prefill_tok_s", ""),
        (&*format!("decode ms/token ({GEN_STEPS} steps)"), "decode_ms_tok", " ms"),
        ("cache written in place", "inplace", ""),
    ] {
        let mut line = format!("  {label:<34}{:>16}", format!("{}{unit}", get(&ours, key)));
        if let Some(t) = &theirs {
            line += &format!("{:>16}", format!("{}{unit}", get(t, key)));
        }
        println!("{line}");
    }
    println!("  first tokens: hfexport {}", get(&ours, "tokens"));
    if let Some(t) = &theirs {
        println!("                transformers {}", get(t, "tokens"));
    }

    if opts.keep {
        println!("\nkept {}", ours_out.display());
    } else {
        remove_dir(&ours_out)?;
        remove_dir(&theirs_out)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// openvino

/// `cargo xtask bench openvino`: exports the bench checkpoint to OpenVINO IR for generation
/// (stateful, static cache of 512, multi-token decode; and a growing cache), timed with peak RSS, and times a
/// greedy OpenVINO CPU loop over it (`xtask/python/bench_openvino.py run`, f32 precision):
/// prefill tokens/s of a 128-token prompt, decode ms/token over 64 steps after 2 warm-up steps,
/// and which CPU-plugin fusions the compiled model got. With `--python`, the same for
/// `transformers.exporters`' OpenVINO export of the checkpoint.
fn bench_openvino(root: &Path, opts: &Opts) -> Result<()> {
    let steps = if opts.python { 6 } else { 4 };
    let Prepared { bench_dir, ckpt, venv, script, exe } = prepare(root, "bench_openvino.py", steps, &[])?;

    // Ours twice: the static cache the issue asks for, and a growing cache (what transformers'
    // OpenVINO export falls back to when its static cache is wrong), so both compare like for like.
    let cache = GEN_CACHE_LEN.to_string();
    let mut ours = vec![];
    for (label, flags) in
        [("hfexport", vec!["--static-cache", cache.as_str(), "--multi-token-decode"]), ("hfexport-growing", vec![])]
    {
        let out = bench_dir.join(format!("ov-{label}"));
        println!(
            "==> [3/{steps}] hfexport export --format openvino (stateful) --dynamic --for-generation {} -> {}",
            flags.join(" "),
            out.display()
        );
        prepare_run(&ckpt)?;
        let mut cmd = Command::new(&exe);
        cmd.arg("export").arg("--model").arg(&ckpt).args(["--format", "openvino", "--dynamic", "--for-generation"]);
        cmd.args(&flags).args(["--force", "--output"]).arg(&out);
        let m = measure(&mut cmd, &bench_dir.join(format!("ov-{label}.log")))?;
        if !m.status.success() {
            print_tail(&m.log, 30);
            bail!("`{}` failed ({})", describe(&cmd), m.status);
        }
        println!("  exported in {:.2} s, peak RSS {}", m.wall_s, rss(&m));
        println!("==> [4/{steps}] greedy loop (OpenVINO CPU, f32) over {}", out.display());
        let r = run_generate(&venv, &script, "OV", label, &out)?;
        ours.push((m, r, out));
    }

    let mut theirs: Option<(Measured, Vec<(String, String)>)> = None;
    let theirs_out = bench_dir.join("ov-transformers");
    if opts.python {
        println!(
            "==> [5/{steps}] bench_openvino.py export-transformers (static cache {cache}) -> {}",
            theirs_out.display()
        );
        remove_dir(&theirs_out)?;
        prepare_run(&ckpt)?;
        let mut cmd = venv.command();
        cmd.arg(&script).arg("export-transformers").arg(&ckpt).arg(&theirs_out).arg(&cache);
        let m = measure(&mut cmd, &bench_dir.join("ov-transformers.log"))?;
        for line in log_lines(&m.log)?.iter().filter(|l| l.starts_with("OV ")) {
            println!("  {line}");
        }
        if m.status.success() {
            println!("  exported in {:.1} s, peak RSS {}", m.wall_s, rss(&m));
            println!("==> [6/{steps}] the same loop over {}", theirs_out.display());
            match run_generate(&venv, &script, "OV", "transformers", &theirs_out) {
                Ok(r) => theirs = Some((m, r)),
                Err(err) => println!("  the loop failed on the transformers export: {err:#}"),
            }
        } else {
            println!("  the transformers export failed ({}); the end of {}:", m.status, m.log.display());
            print_tail(&m.log, 25);
        }
    }

    let get = |r: &[(String, String)], k: &str| {
        r.iter().find(|(key, _)| key == k).map_or("n/a".to_string(), |(_, v)| v.clone())
    };
    println!(
        "\nopenvino: Qwen3-0.6B shape, float32, stateful, batch 1, greedy, OpenVINO CPU (static cache: {GEN_CACHE_LEN} \
         slots)"
    );
    let mut header = format!("  {:<34}{:>16}{:>18}", "", "hfexport static", "hfexport growing");
    if theirs.is_some() {
        header += &format!("{:>16}", "transformers");
    }
    println!("{header}");
    let row = |label: &str, ours: [String; 2], theirs: Option<String>| {
        let mut line = format!("  {label:<34}{:>16}{:>18}", ours[0], ours[1]);
        if let Some(t) = theirs {
            line += &format!("{t:>16}");
        }
        println!("{line}");
    };
    let both = |f: &Cell<'_>| [f(&ours[0].0, &ours[0].1), f(&ours[1].0, &ours[1].1)];
    row(
        "export wall time",
        both(&|m, _| format!("{:.1} s", m.wall_s)),
        theirs.as_ref().map(|(m, _)| format!("{:.1} s", m.wall_s)),
    );
    row("export peak RSS", both(&|m, _| rss(m)), theirs.as_ref().map(|(m, _)| rss(m)));
    for (label, key, unit) in [
        ("model load + compile", "load_s", " s"),
        (&*format!("prefill, {GEN_PROMPT} tokens"), "prefill_ms", " ms"),
        ("prefill tokens/s", "prefill_tok_s", ""),
        (&*format!("decode ms/token ({GEN_STEPS} steps)"), "decode_ms_tok", " ms"),
        ("fused RMS layers", "layer_RMS", ""),
        ("fused RoPE layers", "layer_RoPE", ""),
        ("fused SDPA layers", "layer_ScaledDotProductAttention", ""),
    ] {
        row(
            label,
            both(&|_, r| format!("{}{unit}", get(r, key))),
            theirs.as_ref().map(|(_, t)| format!("{}{unit}", get(t, key))),
        );
    }
    println!("  first tokens: hfexport {}", get(&ours[0].1, "tokens"));
    println!("       hfexport growing {}", get(&ours[1].1, "tokens"));
    if let Some((m, t)) = &theirs {
        let mode = log_lines(&m.log)?.iter().find_map(|l| l.strip_prefix("OV mode ").map(str::to_string));
        println!("  transformers cache: {}", mode.unwrap_or_else(|| "?".into()));
        println!("                transformers {}", get(t, "tokens"));
    }
    if opts.keep {
        println!("\nkept {} and {}", ours[0].2.display(), ours[1].2.display());
    } else {
        for (_, _, out) in &ours {
            remove_dir(out)?;
        }
        remove_dir(&theirs_out)?;
    }
    Ok(())
}

/// Prompt tokens of the ExecuTorch loops (fed token by token through `decode`, as transformers'
/// one-token program needs).
const ET_PROMPT: usize = 16;
const ET_STEPS: usize = 32;

/// `bench executorch`: our `.pte` exports of the Qwen3-0.6B-shaped checkpoint (XNNPACK, float32,
/// static cache 512: planned, and zero-copy), the same Python ExecuTorch loop over our `decode`
/// and (with `--python`) transformers' `ExecutorchExporter` export, and our Rust zero-copy loop.
fn bench_executorch(root: &Path, opts: &Opts) -> Result<()> {
    let steps = if opts.python { 7 } else { 5 };
    let Prepared { bench_dir, ckpt, venv, script, exe } =
        prepare(root, "bench_executorch.py", steps, &["executorch-runtime"])?;
    let cache = GEN_CACHE_LEN.to_string();
    let mut ours = vec![];
    for (label, config) in [
        // the explicit-cache layout, whose `decode` the Python loop feeds its caches
        ("hfexport", r#"{"export_format": "executorch", "stateful": false}"#),
        (
            "hfexport-zero-copy",
            r#"{"export_format": "executorch", "stateful": false, "alloc_graph_input": false,
                "alloc_graph_output": false, "alloc_mutable_buffers": false}"#,
        ),
    ] {
        let out = bench_dir.join(format!("et-{label}"));
        let cfg = bench_dir.join(format!("et-{label}.json"));
        std::fs::write(&cfg, config).with_context(|| format!("writing {}", cfg.display()))?;
        println!("==> [3/{steps}] hfexport export {config} --dynamic --for-generation --static-cache {cache}");
        prepare_run(&ckpt)?;
        let mut cmd = Command::new(&exe);
        cmd.arg("export").arg("--model").arg(&ckpt).arg("--config").arg(&cfg);
        cmd.args(["--dynamic", "--for-generation", "--static-cache", &cache, "--force", "--output"]).arg(&out);
        let m = measure(&mut cmd, &bench_dir.join(format!("et-{label}.log")))?;
        if !m.status.success() {
            print_tail(&m.log, 30);
            bail!("`{}` failed ({})", describe(&cmd), m.status);
        }
        println!("  exported in {:.2} s, peak RSS {}", m.wall_s, rss(&m));
        ours.push((m, out));
    }
    println!("==> [4/{steps}] Python ExecuTorch loop over {}", ours[0].1.display());
    let py = |label: &str, pte: &Path| -> Result<Vec<(String, String)>> {
        let mut cmd = venv.command();
        cmd.arg(&script).arg("run").arg(label).arg(pte).arg(ET_PROMPT.to_string()).arg(ET_STEPS.to_string());
        pairs(&mut cmd, &format!("ET {label} "))
    };
    let ours_py = py("hfexport", &ours[0].1.join("model.pte"))?;
    println!("==> [5/{steps}] hfexport generate (Rust, zero-copy) over {}", ours[1].1.display());
    let prompt: Vec<String> = (0..ET_PROMPT).map(|i| ((i * 37 + 11) % 200).to_string()).collect();
    let mut cmd = Command::new(&exe);
    cmd.arg("generate").arg(&ours[1].1).args(["--prompt-ids", &prompt.join(","), "--max-new-tokens"]);
    cmd.arg((ET_STEPS + 1).to_string());
    let out = cmd.output().with_context(|| format!("could not start `{}`", describe(&cmd)))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary = stderr.lines().find(|l| l.starts_with("executorch ")).unwrap_or("").to_string();
    println!("  {summary}");
    if !out.status.success() {
        bail!("`{}` failed: {stderr}", describe(&cmd));
    }
    let rust_decode = summary.split("decode ").nth(1).and_then(|r| r.split(' ').next()).unwrap_or("n/a").to_string();
    let rust_prefill = summary.split("prefill ").nth(1).and_then(|r| r.split(' ').next()).unwrap_or("n/a").to_string();

    let mut theirs: Option<(Measured, Vec<(String, String)>)> = None;
    let theirs_out = bench_dir.join("et-transformers");
    if opts.python {
        println!("==> [6/{steps}] setup --group bench; bench_executorch.py export-transformers (static cache {cache})");
        crate::setup(root, "bench")?;
        remove_dir(&theirs_out)?;
        prepare_run(&ckpt)?;
        let mut cmd = venv.command();
        cmd.arg(&script).arg("export-transformers").arg(&ckpt).arg(&theirs_out).arg(&cache);
        let m = measure(&mut cmd, &bench_dir.join("et-transformers.log"))?;
        for line in log_lines(&m.log)?.iter().filter(|l| l.starts_with("ET ")) {
            println!("  {line}");
        }
        if m.status.success() {
            println!("  exported in {:.1} s, peak RSS {}", m.wall_s, rss(&m));
            println!("==> [7/{steps}] the same Python loop over {}", theirs_out.display());
            match py("transformers", &theirs_out.join("decode.pte")) {
                Ok(r) => theirs = Some((m, r)),
                Err(err) => println!("  the loop failed on the transformers export: {err:#}"),
            }
        } else {
            println!("  the transformers export failed ({}); the end of {}:", m.status, m.log.display());
            print_tail(&m.log, 25);
        }
    }

    let get = |r: &[(String, String)], k: &str| {
        r.iter().find(|(key, _)| key == k).map_or("n/a".to_string(), |(_, v)| v.clone())
    };
    println!(
        "\nexecutorch: Qwen3-0.6B shape, float32, XNNPACK, static cache {GEN_CACHE_LEN}, batch 1, greedy; prompt of \
         {ET_PROMPT} fed token by token, {ET_STEPS} timed steps"
    );
    let mut header = format!("  {:<40}{:>16}{:>18}", "", "hfexport", "hfexport 0-copy");
    if theirs.is_some() {
        header += &format!("{:>16}", "transformers");
    }
    println!("{header}");
    let row = |label: &str, a: String, b: String, t: Option<String>| {
        let mut line = format!("  {label:<40}{a:>16}{b:>18}");
        if let Some(t) = t {
            line += &format!("{t:>16}");
        }
        println!("{line}");
    };
    row(
        "export wall time",
        format!("{:.1} s", ours[0].0.wall_s),
        format!("{:.1} s", ours[1].0.wall_s),
        theirs.as_ref().map(|(m, _)| format!("{:.1} s", m.wall_s)),
    );
    row("export peak RSS", rss(&ours[0].0), rss(&ours[1].0), theirs.as_ref().map(|(m, _)| rss(m)));
    row(
        "decode ms/token, Python loop",
        format!("{} ms", get(&ours_py, "decode_ms_tok")),
        "-".into(),
        theirs.as_ref().map(|(_, t)| format!("{} ms", get(t, "decode_ms_tok"))),
    );
    row("decode ms/token, Rust loop (hfexport generate)", "-".into(), format!("{rust_decode} ms"), None);
    row(
        "prompt ms",
        format!("{} ms (Python)", get(&ours_py, "prefill_ms")),
        format!("{rust_prefill} ms (Rust)"),
        theirs.as_ref().map(|(_, t)| format!("{} ms", get(t, "prefill_ms"))),
    );
    println!("  first tokens: hfexport {}", get(&ours_py, "tokens"));
    if let Some((_, t)) = &theirs {
        println!("           transformers {}", get(t, "tokens"));
    }
    if !opts.keep {
        for (_, out) in &ours {
            remove_dir(out)?;
        }
        remove_dir(&theirs_out)?;
    }
    Ok(())
}

/// Runs `cmd`, echoing its stdout; the `<prefix><key> <value>` pairs of it.
fn pairs(cmd: &mut Command, prefix: &str) -> Result<Vec<(String, String)>> {
    let out = cmd.output().with_context(|| format!("could not start `{}`", describe(cmd)))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut pairs = Vec::new();
    for line in stdout.lines() {
        println!("  {line}");
        if let Some((k, v)) = line.strip_prefix(prefix).and_then(|r| r.split_once(' ')) {
            pairs.push((k.to_string(), v.to_string()));
        }
    }
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        bail!(
            "`{}` failed ({}):\n{}",
            describe(cmd),
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(pairs)
}

/// One cell of the openvino table from an export's measurement and its loop's pairs.
type Cell<'a> = dyn Fn(&Measured, &[(String, String)]) -> String + 'a;

fn rss(m: &Measured) -> String {
    m.peak_rss.map_or("n/a".into(), |r| format!("{:.0} MB", r as f64 / 1e6))
}

/// Runs the greedy loop of a bench script (`<script> run <label> <export> <prompt> <steps>`)
/// over an export; returns its `<tag> <label> <key> <value>` pairs.
fn run_generate(venv: &Venv, script: &Path, tag: &str, label: &str, export: &Path) -> Result<Vec<(String, String)>> {
    run_generate_from(venv, script, tag, label, export, GEN_PROMPT)
}

/// [`run_generate`] with a prompt of `prompt` tokens (1: an export whose decode step takes one
/// token, fed the prompt by itself).
fn run_generate_from(
    venv: &Venv,
    script: &Path,
    tag: &str,
    label: &str,
    export: &Path,
    prompt: usize,
) -> Result<Vec<(String, String)>> {
    let mut cmd = venv.command();
    cmd.arg(script).arg("run").arg(label).arg(export).arg(prompt.to_string()).arg(GEN_STEPS.to_string());
    cmd.env("BENCH_CACHE_LEN", GEN_CACHE_LEN.to_string());
    pairs(&mut cmd, &format!("{tag} {label} "))
}

/// Runs `cmd` with its output in `log`; kills it after `cap_s` seconds (then `None`).
fn run_capped(cmd: &mut Command, log: &Path, cap_s: u64) -> Result<Option<(ExitStatus, f64)>> {
    let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    cmd.stdin(Stdio::null()).stdout(file.try_clone()?).stderr(file);
    let t0 = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("could not start `{}`", describe(cmd)))?;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some((status, t0.elapsed().as_secs_f64())));
        }
        if t0.elapsed().as_secs() >= cap_s {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

// ---------------------------------------------------------------------------------------------
// moe

/// The MoE bench's Qwen3-MoE shape: Qwen3-0.6B's attention and embeddings, experts of
/// `MOE_INTER` with `MOE_TOP_K` active; `MOE_LAYERS` layers (0.34B active parameters, 2.0B in
/// all with 64 experts: a 4 GB bfloat16 checkpoint, 8 GB exported in float32).
const MOE_LAYERS: usize = 12;
const MOE_INTER: usize = 768;
const MOE_TOP_K: usize = 4;
/// Expert counts compared: the sparse model and its twin that runs every expert it has.
const MOE_EXPERTS: [usize; 2] = [64, 4];
/// The exports timed: (column, format, loop script, its output tag); `onnx-ort-cpu` is
/// `{"optimize": true, "ort_fusions": "cpu"}` (ONNX Runtime's `com.microsoft.MoE`).
const MOE_COLUMNS: [(&str, &str, &str, &str); 3] = [
    ("onnx", "onnx", "bench_generate.py", "GEN"),
    ("onnx-ort-cpu", "onnx", "bench_generate.py", "GEN"),
    ("openvino", "openvino", "bench_openvino.py", "OV"),
];
/// Goal: the sparse model decodes within this factor of its twin.
const MOE_GOAL_RATIO: f64 = 1.5;

fn moe_tensors(experts: usize) -> Vec<(String, Vec<usize>)> {
    decoder_tensors([VOCAB, HIDDEN, MOE_LAYERS], false, |p| {
        let mut t = qwen3_layer_norms_and_attention(p);
        t.push((format!("{p}mlp.gate.weight"), vec![experts, HIDDEN]));
        for e in 0..experts {
            t.extend(dense_mlp(&format!("{p}mlp.experts.{e}."), HIDDEN, MOE_INTER));
        }
        t
    })
}

fn moe_config(experts: usize) -> String {
    format!(
        r#"{{
  "architectures": ["Qwen3MoeForCausalLM"],
  "model_type": "qwen3_moe",
  "hidden_size": {HIDDEN},
  "intermediate_size": 3072,
  "moe_intermediate_size": {MOE_INTER},
  "num_experts": {experts},
  "num_experts_per_tok": {MOE_TOP_K},
  "norm_topk_prob": true,
  "num_hidden_layers": {MOE_LAYERS},
  "num_attention_heads": {HEADS},
  "num_key_value_heads": {KV_HEADS},
  "head_dim": {HEAD_DIM},
  "vocab_size": {VOCAB},
  "max_position_embeddings": 40960,
  "rms_norm_eps": 1e-6,
  "rope_theta": 1000000,
  "tie_word_embeddings": true,
  "hidden_act": "silu",
  "dtype": "bfloat16"
}}
"#
    )
}

/// `cargo xtask bench moe`: a 64-expert top-4 Qwen3-MoE checkpoint of random weights and its
/// 4-expert twin (same shapes otherwise), each exported for generation (static cache, one-token
/// decode) to ONNX (standard ops, and with ONNX Runtime's contrib MoE) and to OpenVINO IR
/// (stateful), and timed by the greedy loops of
/// `bench_generate.py` / `bench_openvino.py`: decode ms/token of each, and the ratio the issue
/// sets a goal for (the 64-expert model within 1.5x of its twin: a decode step computes only
/// the selected experts).
fn bench_moe(root: &Path, opts: &Opts) -> Result<()> {
    let steps = 2 + (1 + MOE_COLUMNS.len()) * MOE_EXPERTS.len();
    let Prepared { bench_dir, venv, exe, .. } = prepare_build(root, steps, &[])?;
    let mut rows = vec![];
    let mut step = 2;
    for experts in MOE_EXPERTS {
        step += 1;
        let ckpt = bench_dir.join(format!("qwen3-moe-{experts}x-bf16"));
        println!("==> [{step}/{steps}] checkpoint {} ({experts} experts, top-{MOE_TOP_K})", ckpt.display());
        ensure_random_checkpoint(&ckpt, &moe_tensors(experts), &moe_config(experts))?;
        let mut cells = vec![];
        for (column, format, script, tag) in MOE_COLUMNS {
            step += 1;
            let out = bench_dir.join(format!("moe-{experts}x-{column}"));
            println!(
                "==> [{step}/{steps}] hfexport export --format {format} --dynamic --for-generation -> {}",
                out.display()
            );
            prepare_run(&ckpt)?;
            let mut cmd = Command::new(&exe);
            cmd.arg("export").arg("--model").arg(&ckpt).args(["--format", format, "--dynamic", "--for-generation"]);
            cmd.args(["--static-cache", &GEN_CACHE_LEN.to_string(), "--force", "--output"]).arg(&out);
            if column == "onnx-ort-cpu" {
                let config = bench_dir.join("ort-fusions-cpu.json");
                std::fs::write(&config, r#"{"optimize": true, "ort_fusions": "cpu"}"#)?;
                cmd.arg("--config").arg(config);
            }
            let m = measure(&mut cmd, &bench_dir.join(format!("moe-{experts}x-{column}.log")))?;
            if !m.status.success() {
                print_tail(&m.log, 30);
                bail!("`{}` failed ({})", describe(&cmd), m.status);
            }
            println!("  exported in {:.1} s, peak RSS {}", m.wall_s, rss(&m));
            let script = root.join("xtask").join("python").join(script);
            // one-token decode steps (the gathered-experts strategy); the 1-token prompt goes
            // through the decode component too
            let r = run_generate_from(&venv, &script, tag, &format!("moe{experts}"), &out, 1)?;
            let decode = r.iter().find(|(k, _)| k == "decode_ms_tok").and_then(|(_, v)| v.parse::<f64>().ok());
            cells.push(decode);
            if !opts.keep {
                remove_dir(&out)?;
            }
        }
        rows.push((experts, cells));
    }
    println!(
        "
moe: Qwen3-MoE shape ({MOE_LAYERS} layers, hidden {HIDDEN}, experts of {MOE_INTER}, top-{MOE_TOP_K}), float32, \
         static cache {GEN_CACHE_LEN}, batch 1, greedy decode ms/token ({GEN_STEPS} steps)"
    );
    let row = |label: &str, cells: Vec<String>| {
        println!("  {label:<24}{}", cells.iter().map(|c| format!("{c:>20}")).collect::<String>());
    };
    row("", MOE_COLUMNS.iter().map(|c| c.0.to_string()).collect());
    for (experts, cells) in &rows {
        row(
            &format!("{experts} experts"),
            cells.iter().map(|c| c.map_or("n/a".into(), |v| format!("{v:.1} ms"))).collect(),
        );
    }
    let ratios: Vec<Option<f64>> = (0..MOE_COLUMNS.len())
        .map(|i| match (rows[0].1[i], rows[1].1[i]) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        })
        .collect();
    row(
        &format!("{} vs {} experts", MOE_EXPERTS[0], MOE_EXPERTS[1]),
        ratios.iter().map(|r| r.map_or("n/a".into(), |r| format!("{r:.2}x"))).collect(),
    );
    // the goal is on the standard exports; the contrib column is ONNX Runtime's own kernel
    let goal: Vec<Option<f64>> =
        MOE_COLUMNS.iter().zip(&ratios).filter(|(c, _)| c.0 != "onnx-ort-cpu").map(|(_, r)| *r).collect();
    let met = goal.iter().all(|r| r.is_some_and(|r| r <= MOE_GOAL_RATIO));
    println!("  goal (onnx, openvino): within {MOE_GOAL_RATIO}x -> {}", if met { "met" } else { "MISSED" });
    Ok(())
}

/// Goals of `bench quant`: our int4 export at least this many times faster than the ONNX
/// Runtime GenAI builder's, under this peak RSS, and its decode no slower than theirs.
const QUANT_GOAL_SPEEDUP: f64 = 10.0;
const QUANT_GOAL_RSS_BYTES: f64 = 1.5e9;

/// The smallest tokenizer the GenAI builder accepts (it saves the checkpoint's tokenizer next to
/// the model and needs an EOS id; the bench checkpoint has neither and the loops feed token ids).
const BENCH_TOKENIZER_JSON: &str = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
"normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
"model": {"type": "WordLevel", "vocab": {"<unk>": 0, "a": 1}, "unk_token": "<unk>"}}"#;

/// `cargo xtask bench quant`: on the Qwen3-0.6B-shaped checkpoint, in one run, `--quantize
/// int4 --for-generation --static-cache 512 --multi-token-decode` exported to ONNX (timed, peak
/// RSS) and run in ONNX Runtime with the caches bound in place (`bench_generate.py`), the same
/// float32 export for reference, the int4 OpenVINO export in its stateful loop
/// (`bench_openvino.py`), the int4 `.pte` (XNNPACK 8da4w) in ExecuTorch's Python runtime
/// (`bench_executorch.py`), and ONNX Runtime GenAI's builder (`-p int4 -e cpu`, timed, peak RSS)
/// with its own runtime (`bench_genai.py`); installs the `genai` Python group first.
fn bench_quant(root: &Path, opts: &Opts) -> Result<()> {
    let steps = 8;
    let Prepared { bench_dir, ckpt, venv, script, exe } = prepare(root, "bench_generate.py", steps, &[])?;
    crate::setup(root, "genai")?;
    let python = root.join("xtask").join("python");
    let cache = GEN_CACHE_LEN.to_string();
    // (label, its export's measurement, its loop's pairs)
    type Column = (String, Option<Measured>, Vec<(String, String)>);
    let mut columns: Vec<Column> = vec![];
    for (step, (label, format, quantize, script, tag)) in [
        ("hfexport int4 onnx", "onnx", Some("int4"), &script, "GEN"),
        ("hfexport f32 onnx", "onnx", None, &script, "GEN"),
        ("hfexport int4 openvino", "openvino", Some("int4"), &python.join("bench_openvino.py"), "OV"),
        ("hfexport 8da4w executorch", "executorch", Some("int4"), &python.join("bench_executorch.py"), "ET"),
    ]
    .into_iter()
    .enumerate()
    {
        let out = bench_dir.join(format!("quant-{}", label.replace(' ', "-")));
        println!("==> [{}/{steps}] {label}: hfexport export -> {}", step + 3, out.display());
        prepare_run(&ckpt)?;
        let mut cmd = Command::new(&exe);
        cmd.arg("export").arg("--model").arg(&ckpt).args(["--format", format, "--dynamic", "--for-generation"]);
        cmd.args(["--static-cache", &cache, "--multi-token-decode", "--force", "--output"]).arg(&out);
        if let Some(q) = quantize {
            cmd.args(["--quantize", q]);
        }
        let m = measure(&mut cmd, &bench_dir.join(format!("quant-{}.log", label.replace(' ', "-"))))?;
        if !m.status.success() {
            print_tail(&m.log, 30);
            bail!("`{}` failed ({})", describe(&cmd), m.status);
        }
        println!("  exported in {:.2} s, peak RSS {}", m.wall_s, rss(&m));
        // the ExecuTorch loop takes the program file
        let program = if format == "executorch" { out.join("model.pte") } else { out.clone() };
        let r = run_generate(&venv, script, tag, "q", &program)?;
        columns.push((label.to_string(), Some(m), r));
        if !opts.keep {
            remove_dir(&out)?;
        }
    }

    let theirs = bench_dir.join("quant-genai-int4");
    println!("==> [7/{steps}] onnxruntime_genai.models.builder -p int4 -e cpu -> {}", theirs.display());
    let m = genai_builder(&venv, &ckpt, "int4", &theirs, &bench_dir)?;
    println!("==> [8/{steps}] greedy loop in onnxruntime-genai over {}", theirs.display());
    let r = run_generate(&venv, &python.join("bench_genai.py"), "GENAI", "q", &theirs)?;
    columns.push(("genai builder int4".into(), Some(m), r));
    if !opts.keep {
        remove_dir(&theirs)?;
    }

    println!(
        "\nquant: Qwen3-0.6B shape, static cache {GEN_CACHE_LEN}, batch 1, greedy, CPU; decode over {GEN_STEPS} steps \
         after a {GEN_PROMPT}-token prompt"
    );
    let row = |label: &str, cells: Vec<String>| {
        println!("  {label:<26}{}", cells.iter().map(|c| format!("{c:>24}")).collect::<String>());
    };
    row("", columns.iter().map(|c| c.0.clone()).collect());
    let get = |r: &[(String, String)], k: &str| r.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    row(
        "export wall",
        columns.iter().map(|c| c.1.as_ref().map_or("n/a".into(), |m| format!("{:.2} s", m.wall_s))).collect(),
    );
    row("export peak RSS", columns.iter().map(|c| c.1.as_ref().map_or("n/a".into(), rss)).collect());
    for (label, key, unit) in [
        ("prefill tokens/s", "prefill_tok_s", ""),
        ("decode ms/token", "decode_ms_tok", " ms"),
        ("session load", "load_s", " s"),
    ] {
        row(label, columns.iter().map(|c| get(&c.2, key).map_or("n/a".into(), |v| format!("{v}{unit}"))).collect());
    }
    let decode = |i: usize| get(&columns[i].2, "decode_ms_tok").and_then(|v| v.parse::<f64>().ok());
    let wall = |i: usize| columns[i].1.as_ref().map(|m| m.wall_s);
    let ours_rss = columns[0].1.as_ref().and_then(|m| m.peak_rss).map(|r| r as f64);
    let (g, o) = (columns.len() - 1, 0);
    let speedup = wall(g).zip(wall(o)).map(|(t, u)| t / u);
    let faster = decode(o).zip(decode(g)).map(|(u, t)| t / u);
    println!(
        "  goals: export >= {QUANT_GOAL_SPEEDUP}x faster than the builder -> {}; peak RSS < {:.1} GB -> {}; \
         int4 decode at least as fast as onnxruntime-genai's -> {}",
        speedup
            .map_or("n/a".into(), |s| format!("{s:.1}x, {}", if s >= QUANT_GOAL_SPEEDUP { "met" } else { "MISSED" })),
        QUANT_GOAL_RSS_BYTES / 1e9,
        ours_rss.map_or("n/a", |r| if r < QUANT_GOAL_RSS_BYTES { "met" } else { "MISSED" }),
        faster.map_or("n/a".into(), |f| format!("{f:.2}x theirs, {}", if f >= 1.0 { "met" } else { "MISSED" })),
    );
    Ok(())
}

/// ONNX Runtime GenAI's model builder (`-p <precision> -e cpu`) over the bench checkpoint into
/// `out`, timed with its peak RSS. The checkpoint gets the small tokenizer the builder insists on
/// (it reads the EOS id from config.json or the tokenizer, not generation_config.json).
fn genai_builder(venv: &Venv, ckpt: &Path, precision: &str, out: &Path, bench_dir: &Path) -> Result<Measured> {
    for (name, text) in [
        ("tokenizer.json", BENCH_TOKENIZER_JSON),
        (
            "tokenizer_config.json",
            r#"{"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "a", "bos_token": "a"}"#,
        ),
    ] {
        std::fs::write(ckpt.join(name), text)?;
    }
    remove_dir(out)?;
    prepare_run(ckpt)?;
    let mut cmd = venv.command();
    cmd.args(["-m", "onnxruntime_genai.models.builder", "-p", precision, "-e", "cpu", "-i"]).arg(ckpt);
    cmd.arg("-o").arg(out).arg("-c").arg(bench_dir.join("genai-cache"));
    let m = measure(&mut cmd, &bench_dir.join(format!("genai-builder-{precision}.log")))?;
    if !m.status.success() {
        print_tail(&m.log, 30);
        bail!("`{}` failed ({})", describe(&cmd), m.status);
    }
    println!("  exported in {:.2} s, peak RSS {}", m.wall_s, rss(&m));
    Ok(m)
}

/// `cargo xtask bench genai`: on the Qwen3-0.6B-shaped checkpoint, in one run, our `--genai`
/// folder and ONNX Runtime GenAI's builder's (`-p fp32` / `-p int4`, `-e cpu`), float32 and
/// int4, each exported (timed, peak RSS) and run by the same greedy loop in ONNX Runtime GenAI's
/// runtime (`bench_genai.py`): decode ms/token side by side. Goal: ours at least as fast.
fn bench_genai(root: &Path, opts: &Opts) -> Result<()> {
    let steps = 10;
    let Prepared { bench_dir, ckpt, venv, exe, script } = prepare(root, "bench_genai.py", steps, &[])?;
    crate::setup(root, "genai")?;
    let mut rows = vec![];
    for (i, precision) in ["fp32", "int4"].into_iter().enumerate() {
        let ours = bench_dir.join(format!("genai-hfexport-{precision}"));
        println!("==> [{}/{steps}] hfexport export --genai ({precision}) -> {}", 3 + 4 * i, ours.display());
        prepare_run(&ckpt)?;
        let mut cmd = Command::new(&exe);
        cmd.arg("export").arg("--model").arg(&ckpt).args(["--format", "onnx", "--genai", "--quiet", "--force"]);
        cmd.arg("--output").arg(&ours);
        if precision == "int4" {
            cmd.args(["--quantize", "int4"]);
        }
        let m_ours = measure(&mut cmd, &bench_dir.join(format!("genai-hfexport-{precision}.log")))?;
        if !m_ours.status.success() {
            print_tail(&m_ours.log, 30);
            bail!("`{}` failed ({})", describe(&cmd), m_ours.status);
        }
        println!("  exported in {:.2} s, peak RSS {}", m_ours.wall_s, rss(&m_ours));
        println!("==> [{}/{steps}] greedy loop in onnxruntime-genai over {}", 4 + 4 * i, ours.display());
        let r_ours = run_generate(&venv, &script, "GENAI", "g", &ours)?;
        let theirs = bench_dir.join(format!("genai-builder-{precision}"));
        println!("==> [{}/{steps}] onnxruntime_genai.models.builder -p {precision} -> {}", 5 + 4 * i, theirs.display());
        let m_theirs = genai_builder(&venv, &ckpt, precision, &theirs, &bench_dir)?;
        println!("==> [{}/{steps}] greedy loop in onnxruntime-genai over {}", 6 + 4 * i, theirs.display());
        let r_theirs = run_generate(&venv, &script, "GENAI", "g", &theirs)?;
        if !opts.keep {
            remove_dir(&ours)?;
            remove_dir(&theirs)?;
        }
        rows.push((precision, (m_ours, r_ours), (m_theirs, r_theirs)));
    }
    println!(
        "\ngenai: Qwen3-0.6B shape, ONNX Runtime GenAI 0.18 runtime on both folders, batch 1, greedy, CPU; decode \
         over {GEN_STEPS} steps after a {GEN_PROMPT}-token prompt"
    );
    let get = |r: &[(String, String)], k: &str| r.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    let ms = |r: &[(String, String)]| get(r, "decode_ms_tok").and_then(|v| v.parse::<f64>().ok());
    println!(
        "  {:<10}{:>22}{:>22}{:>22}{:>22}",
        "", "export wall", "export peak RSS", "decode ms/token", "prefill tokens/s"
    );
    for (precision, ours, theirs) in &rows {
        for (who, (m, r)) in [("hfexport", ours), ("builder", theirs)] {
            println!(
                "  {:<10}{:>22}{:>22}{:>22}{:>22}",
                format!("{who} {precision}"),
                format!("{:.2} s", m.wall_s),
                rss(m),
                get(r, "decode_ms_tok").map_or("n/a".into(), |v| format!("{v} ms")),
                get(r, "prefill_tok_s").unwrap_or_else(|| "n/a".into()),
            );
        }
        let ratio = ms(&theirs.1).zip(ms(&ours.1)).map(|(t, o)| t / o);
        println!(
            "  goal ({precision}): decode at least as fast as the builder's -> {}",
            ratio.map_or("n/a".into(), |f| format!("{f:.2}x theirs, {}", if f >= 1.0 { "met" } else { "MISSED" }))
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The checkpoint

/// The norms and attention tensors of decoder layer `p` (`model.layers.<i>.`) in Qwen3's shape,
/// shared by the dense and the MoE bench checkpoints.
fn qwen3_layer_norms_and_attention(p: &str) -> Vec<(String, Vec<usize>)> {
    let mut t = layer_norms(p, HIDDEN).to_vec();
    t.extend([
        (format!("{p}self_attn.q_proj.weight"), vec![HEADS * HEAD_DIM, HIDDEN]),
        (format!("{p}self_attn.k_proj.weight"), vec![KV_HEADS * HEAD_DIM, HIDDEN]),
        (format!("{p}self_attn.v_proj.weight"), vec![KV_HEADS * HEAD_DIM, HIDDEN]),
        (format!("{p}self_attn.o_proj.weight"), vec![HIDDEN, HEADS * HEAD_DIM]),
        (format!("{p}self_attn.q_norm.weight"), vec![HEAD_DIM]),
        (format!("{p}self_attn.k_norm.weight"), vec![HEAD_DIM]),
    ]);
    t
}

/// Every tensor of HF's Qwen3ForCausalLM with tied embeddings: (name, shape), in name order as
/// the safetensors Python writer stores them.
fn qwen3_tensors() -> Vec<(String, Vec<usize>)> {
    decoder_tensors([VOCAB, HIDDEN, LAYERS], false, |p| {
        [qwen3_layer_norms_and_attention(p), dense_mlp(&format!("{p}mlp."), HIDDEN, INTERMEDIATE).to_vec()].concat()
    })
}

/// A Llama-style decoder checkpoint's tensors in name order: `lm_head` (when `untied`), the
/// embeddings and the final norm of `[vocab, hidden, layers]`, and `layer(prefix)` for each layer
/// (`model.layers.<i>.`).
fn decoder_tensors(
    [vocab, hidden, layers]: [usize; 3],
    untied: bool,
    layer: impl Fn(&str) -> Vec<(String, Vec<usize>)>,
) -> Vec<(String, Vec<usize>)> {
    let mut t = vec![
        ("model.embed_tokens.weight".to_string(), vec![vocab, hidden]),
        ("model.norm.weight".to_string(), vec![hidden]),
    ];
    if untied {
        t.push(("lm_head.weight".to_string(), vec![vocab, hidden]));
    }
    for i in 0..layers {
        t.extend(layer(&format!("model.layers.{i}.")));
    }
    t.sort();
    t
}

/// A layer's two norms (`input_layernorm`, `post_attention_layernorm`) under `p`.
fn layer_norms(p: &str, hidden: usize) -> [(String, Vec<usize>); 2] {
    [
        (format!("{p}input_layernorm.weight"), vec![hidden]),
        (format!("{p}post_attention_layernorm.weight"), vec![hidden]),
    ]
}

/// A gated MLP's `gate_proj`, `up_proj` and `down_proj` under `mlp` (`model.layers.<i>.mlp.`, or
/// an expert's `....mlp.experts.<e>.`).
fn dense_mlp(mlp: &str, hidden: usize, intermediate: usize) -> [(String, Vec<usize>); 3] {
    [
        (format!("{mlp}gate_proj.weight"), vec![intermediate, hidden]),
        (format!("{mlp}up_proj.weight"), vec![intermediate, hidden]),
        (format!("{mlp}down_proj.weight"), vec![hidden, intermediate]),
    ]
}

/// The safetensors header (length prefix included) and the size of the data after it.
fn safetensors_header(tensors: &[(String, Vec<usize>)]) -> (Vec<u8>, u64) {
    let mut json = String::from(r#"{"__metadata__":{"format":"pt"}"#);
    let mut offset = 0u64;
    for (name, shape) in tensors {
        let bytes = 2 * shape.iter().product::<usize>() as u64;
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        json += &format!(
            r#","{name}":{{"dtype":"BF16","shape":[{}],"data_offsets":[{offset},{}]}}"#,
            dims.join(","),
            offset + bytes
        );
        offset += bytes;
    }
    json.push('}');
    while json.len() % 8 != 0 {
        json.push(' ');
    }
    let mut header = (json.len() as u64).to_le_bytes().to_vec();
    header.extend_from_slice(json.as_bytes());
    (header, offset)
}

/// Makes the checkpoint unless it is there with the expected size; returns its weight file's size.
fn ensure_checkpoint(dir: &Path) -> Result<u64> {
    ensure_random_checkpoint(dir, &qwen3_tensors(), CONFIG_JSON)
}

/// Makes a checkpoint of random bfloat16 `tensors` with `config_json` unless it is there with
/// the expected size and config; returns its weight file's size.
fn ensure_random_checkpoint(dir: &Path, tensors: &[(String, Vec<usize>)], config_json: &str) -> Result<u64> {
    ensure_sharded_checkpoint(dir, tensors, config_json, 1)
}

/// The weight files of a checkpoint of `shards` files: `model.safetensors`, or
/// `model-0000k-of-0000n.safetensors` as `save_pretrained` names shards.
fn shard_names(shards: usize) -> Vec<String> {
    match shards {
        1 => vec!["model.safetensors".into()],
        n => (1..=n).map(|k| format!("model-{k:05}-of-{n:05}.safetensors")).collect(),
    }
}

/// [`ensure_random_checkpoint`] in `shards` files (consecutive tensors, a new file once one
/// passes its share of the bytes), with the
/// `model.safetensors.index.json` that maps each tensor to its file. Every file is streamed
/// (a chunk of values at a time), so a checkpoint far larger than memory is made in constant
/// memory. Returns the size of the weight files.
fn ensure_sharded_checkpoint(
    dir: &Path,
    tensors: &[(String, Vec<usize>)],
    config_json: &str,
    shards: usize,
) -> Result<u64> {
    let bytes = |t: &(String, Vec<usize>)| 2 * t.1.iter().product::<usize>() as u64;
    let all: u64 = tensors.iter().map(bytes).sum();
    // consecutive tensors, a new file each time one passes its share
    let mut groups: Vec<Vec<(String, Vec<usize>)>> = vec![vec![]];
    let mut filled = 0u64;
    for t in tensors {
        if filled >= all.div_ceil(shards as u64) * groups.len() as u64 && groups.len() < shards {
            groups.push(vec![]);
        }
        filled += bytes(t);
        groups.last_mut().expect("one group").push(t.clone());
    }
    let names = shard_names(groups.len());
    let headers: Vec<(Vec<u8>, u64)> = groups.iter().map(|g| safetensors_header(g)).collect();
    let total: u64 = headers.iter().map(|(h, d)| h.len() as u64 + d).sum();
    let config = dir.join("config.json");
    let present = names
        .iter()
        .zip(&headers)
        .all(|(n, (h, d))| std::fs::metadata(dir.join(n)).map(|m| m.len() == h.len() as u64 + d).unwrap_or(false));
    if present && std::fs::read_to_string(&config).map(|c| c == config_json).unwrap_or(false) {
        println!("  cached: {} in {} file(s) ({})", dir.display(), names.len(), gb(total));
        return Ok(total);
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    println!(
        "  generating {} tensors of random bfloat16 weights in {} file(s) ({}), once",
        tensors.len(),
        names.len(),
        gb(total)
    );
    let t0 = Instant::now();
    let mut rng = SplitMix64(0x5eed_0006_0000_0000);
    for ((name, group), (header, _)) in names.iter().zip(&groups).zip(&headers) {
        write_random_safetensors(&dir.join(name), group, header, &mut rng)?;
    }
    if names.len() > 1 {
        let map: serde_json::Map<String, serde_json::Value> = names
            .iter()
            .zip(&groups)
            .flat_map(|(n, g)| g.iter().map(move |(t, _)| (t.clone(), serde_json::Value::from(n.as_str()))))
            .collect();
        let index = serde_json::json!({"metadata": {"total_size": all}, "weight_map": map});
        let path = dir.join("model.safetensors.index.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&index)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    std::fs::write(&config, config_json).with_context(|| format!("writing {}", config.display()))?;
    println!("  wrote {} in {:.1} s", dir.display(), t0.elapsed().as_secs_f64());
    Ok(total)
}

/// Writes one safetensors file (`header` then random values for `tensors`), through a
/// `.partial` file renamed once complete.
fn write_random_safetensors(
    path: &Path,
    tensors: &[(String, Vec<usize>)],
    header: &[u8],
    rng: &mut SplitMix64,
) -> Result<()> {
    let partial = path.with_extension("safetensors.partial");
    let file = File::create(&partial).with_context(|| format!("creating {}", partial.display()))?;
    let mut out = BufWriter::with_capacity(8 << 20, file);
    out.write_all(header)?;
    let normal = value_table(0.0, 0.02);
    let norm = value_table(1.0, 0.05);
    let mut chunk = Vec::with_capacity(1 << 20);
    for (name, shape) in tensors {
        let table = if shape.len() == 1 { &norm } else { &normal };
        let mut left = shape.iter().product::<usize>();
        while left > 0 {
            // Two values per 64 random bits, each the sum of four random bytes (nearly normal).
            let n = left.min(1 << 19);
            chunk.clear();
            for _ in 0..n.div_ceil(2) {
                let r = rng.next();
                chunk.extend_from_slice(&table[byte_sum(r as u32)].to_le_bytes());
                chunk.extend_from_slice(&table[byte_sum((r >> 32) as u32)].to_le_bytes());
            }
            out.write_all(&chunk[..2 * n]).with_context(|| format!("writing {name} into {}", partial.display()))?;
            left -= n;
        }
    }
    out.into_inner()
        .map_err(|e| e.into_error())
        .and_then(|f| f.sync_all())
        .with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("renaming {}", partial.display()))
}

/// Sum of the four bytes of `x`: 0..=1020, mean 510, standard deviation about 147.8.
fn byte_sum(x: u32) -> usize {
    ((x & 0xff) + ((x >> 8) & 0xff) + ((x >> 16) & 0xff) + (x >> 24)) as usize
}

/// bfloat16 bits of `mean + std * z` for each byte sum, `z` its standardised value.
fn value_table(mean: f32, std: f32) -> Vec<u16> {
    let sd = (4.0f32 * (256.0 * 256.0 - 1.0) / 12.0).sqrt();
    (0..=1020).map(|s| bf16_bits(mean + std * (s as f32 - 510.0) / sd)).collect()
}

/// Round to nearest even (no NaNs here).
fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

// ---------------------------------------------------------------------------------------------
// Runs and measurements

struct Measured {
    status: ExitStatus,
    wall_s: f64,
    /// Kernel's high-water mark of the child's resident set, in bytes.
    peak_rss: Option<u64>,
    /// User and system CPU seconds of the child.
    cpu_s: Option<(f64, f64)>,
    /// stdout and stderr of the child.
    log: PathBuf,
}

/// Flushes dirty pages left by earlier runs and puts the checkpoint in the page cache, so that
/// every timed run starts from the same state.
fn prepare_run(ckpt: &Path) -> Result<()> {
    let _ = Command::new("sync").status();
    let mut buf = vec![0u8; 8 << 20];
    for entry in std::fs::read_dir(ckpt).with_context(|| format!("listing {}", ckpt.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "safetensors") {
            let mut file = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
            while file.read(&mut buf).with_context(|| format!("reading {}", path.display()))? > 0 {}
        }
    }
    Ok(())
}

/// Runs `cmd` with its output in `log`, timing it from spawn to exit.
fn measure(cmd: &mut Command, log: &Path) -> Result<Measured> {
    let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    cmd.stdin(Stdio::null()).stdout(file.try_clone()?).stderr(file);
    let t0 = Instant::now();
    let child = cmd.spawn().with_context(|| format!("could not start `{}`", describe(cmd)))?;
    let usage = wait_with_usage(child).with_context(|| format!("waiting for `{}`", describe(cmd)))?;
    let wall_s = t0.elapsed().as_secs_f64();
    Ok(Measured { status: usage.status, wall_s, peak_rss: usage.peak_rss, cpu_s: usage.cpu_s, log: log.to_path_buf() })
}

/// What the kernel reports of a child when it is reaped.
struct Usage {
    status: ExitStatus,
    peak_rss: Option<u64>,
    cpu_s: Option<(f64, f64)>,
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn wait_with_usage(child: std::process::Child) -> std::io::Result<Usage> {
    use std::os::unix::process::ExitStatusExt;

    /// `struct timeval` and `struct rusage` of 64-bit Linux (glibc and musl alike).
    #[repr(C)]
    struct Timeval {
        sec: i64,
        usec: i64,
    }
    #[repr(C)]
    struct Rusage {
        utime: Timeval,
        stime: Timeval,
        /// Kilobytes.
        maxrss: i64,
        /// ixrss .. nivcsw
        _rest: [i64; 13],
    }
    extern "C" {
        fn wait4(pid: i32, status: *mut i32, options: i32, rusage: *mut Rusage) -> i32;
    }

    let pid = i32::try_from(child.id()).expect("pids fit in i32");
    let mut status = 0i32;
    let mut usage =
        Rusage { utime: Timeval { sec: 0, usec: 0 }, stime: Timeval { sec: 0, usec: 0 }, maxrss: 0, _rest: [0; 13] };
    loop {
        // SAFETY: both pointers are to live, properly laid out locals; `pid` is our own child,
        // which nothing else waits for (`child` is dropped, never waited, below).
        let r = unsafe { wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    drop(child);
    let secs = |t: &Timeval| t.sec as f64 + t.usec as f64 * 1e-6;
    Ok(Usage {
        status: ExitStatus::from_raw(status),
        peak_rss: Some(usage.maxrss as u64 * 1024),
        cpu_s: Some((secs(&usage.utime), secs(&usage.stime))),
    })
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn wait_with_usage(mut child: std::process::Child) -> std::io::Result<Usage> {
    Ok(Usage { status: child.wait()?, peak_rss: None, cpu_s: None })
}

fn check_with_onnxruntime(venv: &Venv, models: &[PathBuf]) -> Result<()> {
    let mut cmd = venv.command();
    cmd.arg("-c").arg(CHECK_PY).arg(VOCAB.to_string()).args(models);
    let out = cmd.output().with_context(|| format!("could not start {}", venv.python().display()))?;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        println!("  {}", line.strip_prefix("CHECK ").unwrap_or(line));
    }
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        bail!(
            "the onnxruntime check failed ({}):\n{}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(())
}

fn log_lines(log: &Path) -> Result<Vec<String>> {
    let bytes = std::fs::read(log).with_context(|| format!("reading {}", log.display()))?;
    // Progress bars rewrite their line with carriage returns: keep the last state of each.
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| l.rsplit('\r').find(|s| !s.trim().is_empty()).unwrap_or("").to_string())
        .collect())
}

fn print_tail(log: &Path, n: usize) {
    match log_lines(log) {
        Ok(lines) => {
            for line in &lines[lines.len().saturating_sub(n)..] {
                println!("  | {line}");
            }
        }
        Err(err) => println!("  ({err:#})"),
    }
}

/// The graph of a one-graph ONNX export: hfexport's `onnx/model.onnx`, transformers' root
/// `model.onnx`.
fn onnx_model(dir: &Path) -> PathBuf {
    let ours = dir.join("onnx").join("model.onnx");
    if ours.exists() {
        ours
    } else {
        dir.join("model.onnx")
    }
}

/// Size of `model.onnx` + `model.onnx.data` in an export folder.
fn onnx_bytes(dir: &Path) -> Result<u64> {
    let model = onnx_model(dir);
    let mut total = 0;
    for path in [model.clone(), model.with_extension("onnx.data")] {
        total += std::fs::metadata(&path).with_context(|| format!("{} is missing", path.display()))?.len();
    }
    Ok(total)
}

fn remove_dir(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", dir.display())),
    }
}

// ---------------------------------------------------------------------------------------------
// Report

fn gb(bytes: u64) -> String {
    format!("{:.2} GB", bytes as f64 / 1e9)
}

fn print_table(ckpt_bytes: u64, ours: (&Measured, u64), theirs: Option<(&Measured, u64)>) {
    let runs: Vec<(&Measured, u64)> = std::iter::once(ours).chain(theirs).collect();
    let row = |label: &str, cells: Vec<String>, goal: &str| {
        let mut line = format!("  {label:<24}");
        for c in cells {
            line += &format!("{c:>16}");
        }
        if !goal.is_empty() {
            line += &format!("   {goal}");
        }
        println!("{}", line.trim_end());
    };
    let mb = |b: u64| format!("{:.0} MB", b as f64 / 1e6);
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };

    println!("\nexport-onnx: Qwen3-0.6B shape, random bfloat16 weights -> float32 ONNX, dynamic batch and sequence");
    let mut header = vec!["hfexport".to_string()];
    if theirs.is_some() {
        header.push("transformers".to_string());
    }
    row("", header, "");
    row("checkpoint (safetensors)", runs.iter().map(|_| gb(ckpt_bytes)).collect(), "");
    row("output (onnx + data)", runs.iter().map(|(_, b)| gb(*b)).collect(), "");
    row(
        "wall",
        runs.iter().map(|(m, _)| format!("{:.2} s", m.wall_s)).collect(),
        &format!("goal < {GOAL_WALL_S:.0} s: {}", verdict(ours.0.wall_s < GOAL_WALL_S)),
    );
    row("MB/s (output / wall)", runs.iter().map(|(m, b)| format!("{:.0}", *b as f64 / 1e6 / m.wall_s)).collect(), "");
    row(
        "CPU user / sys",
        runs.iter().map(|(m, _)| m.cpu_s.map_or("n/a".into(), |(u, s)| format!("{u:.1} / {s:.1} s"))).collect(),
        "",
    );
    let rss_goal = match ours.0.peak_rss {
        Some(r) => format!("goal < {:.1} GB: {}", GOAL_RSS_BYTES / 1e9, verdict((r as f64) < GOAL_RSS_BYTES)),
        None => String::new(),
    };
    row("peak RSS", runs.iter().map(|(m, _)| m.peak_rss.map_or("n/a".into(), mb)).collect(), &rss_goal);
    if let Some((m, _)) = theirs {
        println!(
            "  hfexport is {:.1}x faster and peaks at {} of transformers' RSS",
            m.wall_s / ours.0.wall_s,
            match (ours.0.peak_rss, m.peak_rss) {
                (Some(a), Some(b)) => format!("{:.0}%", 100.0 * a as f64 / b as f64),
                _ => "n/a".to_string(),
            }
        );
    }
    println!(
        "  (wall: spawn to exit; peak RSS and CPU: wait4 rusage of the child; checkpoint read from the page cache)"
    );
}
