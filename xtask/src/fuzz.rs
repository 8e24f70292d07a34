//! `cargo xtask fuzz [--seconds N] [TARGET...]`: every fuzz target of `fuzz/` for a bounded time.
//!
//! libFuzzer needs `-Z` sanitizer flags, which only a nightly rustc accepts; the pinned stable
//! toolchain accepts them with `RUSTC_BOOTSTRAP=1`, set here and nowhere else (the normal build
//! and `.ci/run` never see it). The pinned cargo-fuzz is installed into `target/fuzz-tools/`.
//! Each run starts from the committed seeds (`fuzz/seeds/<target>/`) plus what earlier runs
//! found (`target/fuzz-corpus/<target>/`), and stops at the first crash (kept in
//! `target/fuzz-artifacts/<target>/`), hang longer than [`TIMEOUT_S`] or allocation beyond
//! [`RSS_LIMIT_MB`]. The table at the end is what the README reports.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::versions::Versions;

/// The targets (`fuzz/Cargo.toml`'s bins), each a reader of data hfexport did not write.
pub const TARGETS: [&str; 7] =
    ["safetensors", "shard_index", "config", "generation_config", "export_json", "pt2", "pte"];
/// One input taking longer than this is a hang.
const TIMEOUT_S: u32 = 10;
/// The memory bound of every reader on hostile input (documented in ARCHITECTURE.md): the
/// `.pt2` reader inflates a compressed program of up to 1 GiB, the largest allocation a file
/// can ask for; everything else is bounded by the input's own size.
const RSS_LIMIT_MB: u32 = 2048;

struct Stats {
    target: String,
    runs: u64,
    exec_per_s: u64,
    cov: u64,
    features: u64,
    corpus: u64,
    outcome: String,
}

pub fn fuzz(root: &Path, args: &[String]) -> Result<()> {
    let mut seconds = 600u32;
    let mut chosen = vec![];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => {
                seconds = it.next().context("--seconds needs a number")?.parse().context("--seconds needs a number")?
            }
            t if TARGETS.contains(&t) => chosen.push(t),
            other => bail!("unknown fuzz argument `{other}`; targets: {}", TARGETS.join(", ")),
        }
    }
    if chosen.is_empty() {
        chosen = TARGETS.to_vec();
    }
    let cargo_fuzz = install_cargo_fuzz(root)?;
    println!("==> building the fuzz targets (cargo fuzz build -O, RUSTC_BOOTSTRAP=1)");
    let status = fuzz_command(root, &cargo_fuzz).args(["build", "-O"]).status().context("running cargo fuzz build")?;
    if !status.success() {
        bail!("cargo fuzz build failed ({status})");
    }
    let bin_dir = root.join("fuzz/target").join(host_triple()?).join("release");
    let mut table = vec![];
    for t in chosen {
        println!("==> {t}: {seconds} s");
        table.push(run_target(root, &bin_dir, t, seconds)?);
    }
    println!(
        "\n{:<18} {:>10} {:>8} {:>8} {:>9} {:>7}  outcome",
        "target", "runs", "exec/s", "cov", "features", "corpus"
    );
    for s in &table {
        println!(
            "{:<18} {:>10} {:>8} {:>8} {:>9} {:>7}  {}",
            s.target, s.runs, s.exec_per_s, s.cov, s.features, s.corpus, s.outcome
        );
    }
    match table.iter().filter(|s| s.outcome != "clean").count() {
        0 => Ok(()),
        n => bail!("{n} target(s) found a problem; the inputs are in target/fuzz-artifacts/"),
    }
}

/// The pinned cargo-fuzz, installed once into `target/fuzz-tools/`.
fn install_cargo_fuzz(root: &Path) -> Result<std::path::PathBuf> {
    let pin = Versions::load(&root.join("versions.toml"))?.cargo_fuzz;
    let tools = root.join("target/fuzz-tools");
    let bin = tools.join("bin/cargo-fuzz");
    let installed =
        Command::new(&bin).arg("--version").output().ok().map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    if installed.as_deref().map(str::trim) != Some(&format!("cargo-fuzz {pin}")) {
        println!("==> cargo install cargo-fuzz@{pin} --locked --root {}", tools.display());
        let status = Command::new("cargo")
            .args(["install", &format!("cargo-fuzz@{pin}"), "--locked", "--root"])
            .arg(&tools)
            .status()
            .context("running cargo install")?;
        if !status.success() {
            bail!("cargo install cargo-fuzz@{pin} failed ({status})");
        }
    }
    Ok(bin)
}

fn fuzz_command(root: &Path, cargo_fuzz: &Path) -> Command {
    let mut cmd = Command::new(cargo_fuzz);
    cmd.arg("fuzz").current_dir(root).env("RUSTC_BOOTSTRAP", "1").stdin(Stdio::null());
    cmd
}

/// The host's target triple, under which cargo-fuzz builds (`rustc -vV`).
fn host_triple() -> Result<String> {
    let out = crate::output(Command::new("rustc").arg("-vV"))?;
    out.lines().find_map(|l| l.strip_prefix("host: ")).map(str::to_string).context("`rustc -vV` printed no host triple")
}

/// Runs the target's binary built before (not `cargo fuzz run`, which would rebuild it from a
/// source tree that may have changed since).
fn run_target(root: &Path, bin_dir: &Path, target: &str, seconds: u32) -> Result<Stats> {
    let corpus = root.join("target/fuzz-corpus").join(target);
    let artifacts = root.join("target/fuzz-artifacts").join(target);
    std::fs::create_dir_all(&corpus)?;
    std::fs::create_dir_all(&artifacts)?;
    let out = Command::new(bin_dir.join(target))
        .current_dir(root)
        .stdin(Stdio::null())
        .arg(&corpus)
        .arg(root.join("fuzz/seeds").join(target))
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-timeout={TIMEOUT_S}"))
        .arg(format!("-rss_limit_mb={RSS_LIMIT_MB}"))
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg("-print_final_stats=1")
        .output()
        .with_context(|| format!("running {}", bin_dir.join(target).display()))?;
    let log = String::from_utf8_lossy(&out.stderr);
    std::fs::write(artifacts.join("last-run.log"), log.as_bytes())?;
    let outcome = match (out.status.success(), crash_kind(&log)) {
        (true, _) => "clean".to_string(),
        (false, Some(kind)) => kind,
        (false, None) => format!("failed ({}), see {}/last-run.log", out.status, artifacts.display()),
    };
    Ok(parse_stats(target, &log, outcome))
}

/// libFuzzer's word for what stopped it.
fn crash_kind(log: &str) -> Option<String> {
    ["deadly signal", "timeout", "out-of-memory", "malloc(", "panicked", "AddressSanitizer"]
        .iter()
        .find(|k| log.contains(*k))
        .map(|k| format!("FOUND: {k}"))
}

/// Runs, exec/s and peak from `-print_final_stats`; coverage, features and corpus size from
/// the last status line (`#N ... cov: C ft: F corp: K/...`).
fn parse_stats(target: &str, log: &str, outcome: String) -> Stats {
    let stat =
        |key: &str| log.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    let status = log.lines().rev().find(|l| l.starts_with('#') && l.contains(" cov: ")).unwrap_or("");
    let after = |key: &str| -> u64 {
        status
            .split_whitespace()
            .skip_while(|w| *w != key)
            .nth(1)
            .and_then(|v| v.split('/').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Stats {
        target: target.to_string(),
        runs: stat("stat::number_of_executed_units:"),
        exec_per_s: stat("stat::average_exec_per_sec:"),
        cov: after("cov:"),
        features: after("ft:"),
        corpus: after("corp:"),
        outcome,
    }
}
