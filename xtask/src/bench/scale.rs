//! `cargo xtask bench scale [--keep]`: the four formats' weight writers at 70B scale.
//!
//! A Llama-3-70B-shaped checkpoint cut to 2 layers keeps the real per-tensor sizes (embeddings
//! and head 128256 x 8192, MLP 28672 x 8192; 7.6 GB of bfloat16 in 3 shards), so that the
//! largest tensor, not the layer count, is what a writer must handle in flat memory. It is
//! generated once under `target/bench/llama3-70b-2l-bf16/`, streamed (never in memory).
//!
//! Each format is exported to float32 (15 GB), one after the other in the same run, then the
//! same with `--quantize int4`; each run starts with the checkpoint in the page cache and the
//! previous run's dirty pages flushed. The table gives wall time, the ratio to ONNX's, peak RSS
//! (the kernel's `ru_maxrss` of the child) and MB/s of output, against the goals: peak RSS
//! under 512 MB, every format within 1.5x of ONNX's wall time. Each export is removed after it
//! is measured (unless `--keep`), so the disk needs the checkpoint plus one export.

use super::*;

/// Llama-3-70B's shape (config.json of meta-llama/Meta-Llama-3-70B), 2 layers.
const HIDDEN: usize = 8192;
const INTERMEDIATE: usize = 28672;
const LAYERS: usize = 2;
const HEADS: usize = 64;
const KV_HEADS: usize = 8;
const HEAD_DIM: usize = 128;
const VOCAB: usize = 128256;
const SHARDS: usize = 3;

/// Goals of the issue: flat memory and every writer as fast as ONNX's.
const GOAL_RSS_BYTES: u64 = 512 << 20;
const GOAL_RATIO: f64 = 1.5;

const FORMATS: [&str; 4] = ["onnx", "openvino", "executorch", "dynamo"];

fn config() -> String {
    format!(
        r#"{{
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": {HIDDEN},
  "intermediate_size": {INTERMEDIATE},
  "num_hidden_layers": {LAYERS},
  "num_attention_heads": {HEADS},
  "num_key_value_heads": {KV_HEADS},
  "vocab_size": {VOCAB},
  "max_position_embeddings": 8192,
  "rms_norm_eps": 1e-5,
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "hidden_act": "silu",
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "torch_dtype": "bfloat16"
}}
"#
    )
}

/// Every tensor of the cut LlamaForCausalLM, in name order.
fn tensors() -> Vec<(String, Vec<usize>)> {
    decoder_tensors([VOCAB, HIDDEN, LAYERS], true, |p| {
        let mut t = layer_norms(p, HIDDEN).to_vec();
        t.extend([
            (format!("{p}self_attn.q_proj.weight"), vec![HEADS * HEAD_DIM, HIDDEN]),
            (format!("{p}self_attn.k_proj.weight"), vec![KV_HEADS * HEAD_DIM, HIDDEN]),
            (format!("{p}self_attn.v_proj.weight"), vec![KV_HEADS * HEAD_DIM, HIDDEN]),
            (format!("{p}self_attn.o_proj.weight"), vec![HIDDEN, HEADS * HEAD_DIM]),
        ]);
        t.extend(dense_mlp(&format!("{p}mlp."), HIDDEN, INTERMEDIATE));
        t
    })
}

/// One measured export.
struct Row {
    format: &'static str,
    m: Measured,
    out_bytes: u64,
}

pub(super) fn bench_scale(root: &Path, opts: &Opts) -> Result<()> {
    let steps = 2 + 2 * FORMATS.len();
    let bench_dir = target_dir(root).join("bench");
    let ckpt = bench_dir.join("llama3-70b-2l-bf16");
    println!("==> [1/{steps}] checkpoint {} (Llama-3-70B shape, {LAYERS} layers, {SHARDS} shards)", ckpt.display());
    let ckpt_bytes = ensure_sharded_checkpoint(&ckpt, &tensors(), &config(), SHARDS)?;
    let mut build = Command::new(cargo_bin());
    build.args(["build", "--release", "-p", "hfexport-cli"]);
    println!("==> [2/{steps}] {}", describe(&build));
    run(build.current_dir(root))?;
    let exe = target_dir(root).join("release").join(format!("hfexport{}", std::env::consts::EXE_SUFFIX));
    let mut step = 2;
    let mut tables = vec![];
    for quantize in [None, Some("int4")] {
        let mut rows = vec![];
        for format in FORMATS {
            step += 1;
            let tag = format!("{format}{}", quantize.map_or(String::new(), |q| format!("-{q}")));
            let out = bench_dir.join(format!("scale-{tag}"));
            let mut cmd = Command::new(&exe);
            cmd.arg("export").arg("--model").arg(&ckpt).args(["--format", format, "--force", "--quiet"]);
            if let Some(q) = quantize {
                cmd.args(["--quantize", q]);
            }
            cmd.arg("--output").arg(&out);
            println!("==> [{step}/{steps}] {}", describe(&cmd));
            prepare_run(&ckpt)?;
            let m = measure(&mut cmd, &bench_dir.join(format!("scale-{tag}.log")))?;
            if !m.status.success() {
                print_tail(&m.log, 30);
                bail!("`{}` failed ({})", describe(&cmd), m.status);
            }
            let out_bytes = dir_bytes(&out)?;
            println!("  exported {} in {:.1} s, peak RSS {}", gb(out_bytes), m.wall_s, rss(&m));
            if !opts.keep {
                remove_dir(&out)?;
            }
            rows.push(Row { format, m, out_bytes });
        }
        tables.push((quantize, rows));
    }
    println!(
        "\nscale: Llama-3-70B shape cut to {LAYERS} layers ({} of bfloat16 in {SHARDS} shards; largest tensor {} \
         MB), exported one format after the other",
        gb(ckpt_bytes),
        2 * VOCAB * HIDDEN / 1_000_000
    );
    let mut met = true;
    for (quantize, rows) in &tables {
        println!("\n  {}", quantize.map_or("float32".to_string(), |q| format!("--quantize {q}")));
        println!(
            "  {:<12}{:>10}{:>10}{:>12}{:>12}{:>10}{:>18}   goals: RSS < {} MB, wall <= {GOAL_RATIO}x onnx",
            "format",
            "wall",
            "vs onnx",
            "peak RSS",
            "output",
            "MB/s",
            "CPU user / sys",
            GOAL_RSS_BYTES >> 20
        );
        let onnx = rows[0].m.wall_s;
        for r in rows {
            let ratio = r.m.wall_s / onnx;
            let ok = r.m.peak_rss.is_some_and(|p| p < GOAL_RSS_BYTES) && ratio <= GOAL_RATIO;
            met &= ok;
            println!(
                "  {:<12}{:>10}{:>10}{:>12}{:>12}{:>10.0}{:>18}   {}",
                r.format,
                format!("{:.1} s", r.m.wall_s),
                format!("{ratio:.2}x"),
                rss(&r.m),
                gb(r.out_bytes),
                r.out_bytes as f64 / 1e6 / r.m.wall_s,
                r.m.cpu_s.map_or("n/a".into(), |(u, s)| format!("{u:.1} / {s:.1} s")),
                if ok { "met" } else { "MISSED" }
            );
        }
    }
    println!(
        "\n  goals {} (wall: spawn to exit; peak RSS: wait4 rusage of the child; checkpoint read from the page cache)",
        if met { "met" } else { "MISSED" }
    );
    Ok(())
}

/// Total size of the files in `dir`.
fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let meta = entry?.metadata()?;
        if meta.is_file() {
            total += meta.len();
        }
    }
    Ok(total)
}
