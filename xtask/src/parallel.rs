//! `cargo xtask test` without arguments: the workspace's test binaries two at a time.
//!
//! `cargo test` runs one test binary after another, and most of the suite's time is a binary
//! waiting on one Python runtime process (torch, OpenVINO, ONNX Runtime, ExecuTorch) that keeps
//! one core busy while the other idles. Here cargo builds every test binary (`--no-run`,
//! reading the executables from its JSON messages), then a pool of `HFEXPORT_TEST_JOBS`
//! workers (default 2) runs them, the slowest known binaries first so the tail stays short.
//! Each binary runs as cargo would run it (from its package's directory, with its libtest
//! arguments), its output is printed whole when it ends, and a table of durations closes the
//! run. There are no doc tests to run: the workspace's code examples are programs
//! (`crates/hfexport/examples/`, run as tests), which saves `cargo test --doc`'s rustdoc build of
//! every library (about 5 minutes of a clean clone's pool). A failed binary fails the run; every
//! binary still runs (`--no-fail-fast`, as CI wants every failure at once).

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Binaries known to take minutes, started first (longest processing time first).
const SLOW_FIRST: &[&str] = &[
    "dynamo_export",
    // builds the wheel (cargo on both cores, unoptimised: about a minute) while the other
    // worker waits on torch
    "python_package",
    "unseen_checkpoints",
    "openvino_runtime",
    "onnx_export",
    "executorch_runtime",
    "libtorch_runtime",
    "state_space",
    "generate",
    "encoders",
    "vision_language",
    "openvino_export",
    "onnx_runtime",
    "onnx_generation",
];

/// Environment changes of the cargo command, applied to each binary.
type Envs = Vec<(OsString, Option<OsString>)>;

/// One test binary cargo built.
struct Binary {
    name: String,
    /// The package's directory name (`main` for the workspace tests).
    package: String,
    executable: PathBuf,
    /// The package's directory, where cargo runs its tests.
    dir: PathBuf,
}

/// How one binary ended.
struct Outcome {
    name: String,
    passed: bool,
    took: Duration,
}

/// Builds the test binaries with `cargo_test()` (a `cargo test` with the features and
/// environment set) and runs them `jobs` at a time; the exit code is a failure if any binary
/// failed.
pub fn run(cargo_test: impl Fn() -> Command, jobs: usize) -> Result<ExitCode> {
    let started = Instant::now();
    let mut cargo = cargo_test();
    let binaries = build(&mut cargo)?;
    println!("==> {} test binaries, {jobs} at a time (HFEXPORT_TEST_JOBS)", binaries.len());
    // what the cargo command sets for its tests (HFEXPORT_PYTHON, LIBTORCH, LD_LIBRARY_PATH, ...)
    let envs: Envs = cargo.get_envs().map(|(k, v)| (k.to_owned(), v.map(OsStr::to_owned))).collect();
    let outcomes = run_pool(binaries.into_iter().collect(), jobs, Arc::new(envs));
    report(&outcomes, started.elapsed());
    let failed: Vec<&str> = outcomes.iter().filter(|o| !o.passed).map(|o| o.name.as_str()).collect();
    if !failed.is_empty() {
        println!("FAILED: {}", failed.join(", "));
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// `cargo test --no-run --message-format=json-render-diagnostics`: the test executables, slow
/// ones first.
fn build(cargo: &mut Command) -> Result<Vec<Binary>> {
    let mut child = cargo
        .args(["--no-run", "--message-format=json-render-diagnostics"])
        .stdout(Stdio::piped())
        .spawn()
        .context("could not start cargo test --no-run")?;
    let mut binaries = vec![];
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let msg: serde_json::Value = match serde_json::from_str(&line?) {
            Ok(v) => v,
            Err(_) => continue,
        };
        if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
            continue;
        }
        let (Some(exe), Some(manifest), Some(name)) =
            (msg["executable"].as_str(), msg["manifest_path"].as_str(), msg["target"]["name"].as_str())
        else {
            continue;
        };
        let dir = Path::new(manifest).parent().context("a manifest path has a directory")?.to_path_buf();
        // the package too: two packages have a `vision_language` test
        let package = dir.file_name().map(|d| d.to_string_lossy().into_owned()).unwrap_or_default();
        binaries.push(Binary { name: name.to_string(), package, executable: exe.into(), dir });
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("building the tests failed ({status})");
    }
    let rank = |b: &Binary| SLOW_FIRST.iter().position(|s| *s == b.name).unwrap_or(SLOW_FIRST.len());
    binaries.sort_by_key(rank);
    Ok(binaries)
}

/// Runs every binary on `jobs` worker threads; each prints its output whole when it ends.
fn run_pool(queue: VecDeque<Binary>, jobs: usize, envs: Arc<Envs>) -> Vec<Outcome> {
    let queue = Arc::new(Mutex::new(queue));
    let outcomes = Arc::new(Mutex::new(vec![]));
    let workers: Vec<_> = (0..jobs.max(1))
        .map(|_| {
            let (queue, outcomes, envs) = (Arc::clone(&queue), Arc::clone(&outcomes), Arc::clone(&envs));
            std::thread::spawn(move || loop {
                let Some(binary) = queue.lock().expect("queue").pop_front() else { break };
                let outcome = run_binary(&binary, &envs);
                outcomes.lock().expect("outcomes").push(outcome);
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a test worker panicked");
    }
    Arc::try_unwrap(outcomes).map(|m| m.into_inner().expect("outcomes")).unwrap_or_default()
}

/// One binary as cargo runs it (from its package's directory, with `envs`), its output
/// captured and printed at the end.
fn run_binary(b: &Binary, envs: &Envs) -> Outcome {
    let started = Instant::now();
    let mut cmd = Command::new(&b.executable);
    cmd.current_dir(&b.dir).stdin(Stdio::null());
    for (k, v) in envs {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    finish(format!("{}/{}", b.package, b.name), started, cmd.output())
}

/// The outcome of job `name` started at `started`, its output printed whole.
fn finish(name: String, started: Instant, output: std::io::Result<std::process::Output>) -> Outcome {
    let took = started.elapsed();
    let passed = match &output {
        Ok(o) => {
            let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&o.stderr));
            println!("==> {name} ({:.0} s, {})\n{text}", took.as_secs_f64(), o.status);
            o.status.success()
        }
        Err(e) => {
            println!("==> {name}: could not start: {e}");
            false
        }
    };
    Outcome { name, passed, took }
}

/// Each binary's time, slowest first, and the run's.
fn report(outcomes: &[Outcome], total: Duration) {
    let mut sorted: Vec<&Outcome> = outcomes.iter().collect();
    sorted.sort_by_key(|o| std::cmp::Reverse(o.took));
    println!("==> test binaries by time ({:.0} s in all, with the build)", total.as_secs_f64());
    for o in sorted {
        println!("  {:>6.0} s  {}{}", o.took.as_secs_f64(), o.name, if o.passed { "" } else { "  FAILED" });
    }
}
