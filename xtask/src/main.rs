//! `cargo xtask <command>`: project automation, pinned by `versions.toml`.

mod bench;
mod codegen;
mod fuzz;
mod parallel;
mod python;
mod versions;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus};

use anyhow::{anyhow, bail, Context, Result};

use python::Venv;
use versions::{satisfies, Versions};

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  setup [--group <group>|all]   create .venv/ and install the pinned Python packages of a
                                [python.<group>] table of versions.toml (default: test);
                                `clients` (and `all`): the [clients] pins into .venv/clients/,
                                a venv of their own over the test group's packages
  fixtures                      setup --group oracle, then regenerate tests/fixtures/ with
                                xtask/python/make_fixtures.py
  check-versions [--strict]     compare installed versions with versions.toml; drift (an
                                installed version other than the pin) is a warning, an
                                error with --strict; a package not installed is not drift;
                                then each registered patch with its upstream range, whether
                                the pinned and installed versions fall in it, and a warning
                                when a pin has left a patch's range
  check-publish                 every library crate packages (`cargo package --workspace
                                --no-verify`: metadata, versions of path dependencies,
                                readme and licence; needs the crates.io index) and the API
                                docs build without a warning (`cargo doc --workspace
                                --no-deps`, RUSTDOCFLAGS=-D warnings)
  test [ARGS...]                setup --group test and clients, then `cargo test --workspace --features
                                hfexport-cli/tch [ARGS...]` with HFEXPORT_PYTHON=<repo>/.venv/bin/python,
                                HFEXPORT_CLIENTS_PYTHON=<repo>/.venv/clients/bin/python
                                and LIBTORCH=<the venv's torch> (the libtorch runner links it);
                                without ARGS the test binaries run HFEXPORT_TEST_JOBS (2)
                                at a time, then a table of times (no doc tests: the code
                                examples are crates/hfexport/examples/, run as tests)
  codegen [onnx|executorch] [--check]
                                regenerate crates/hfexport-onnx/src/generated/onnx.rs from the
                                vendored crates/hfexport-onnx/proto/onnx.proto (needs protoc:
                                `apt-get install protobuf-compiler`) and the flatbuffer code of
                                crates/hfexport-executorch/src/generated/ from its schema/ (the
                                flatc of the executorch wheel in .venv/); --check fails if a
                                committed file differs from a fresh generation
  bench export-onnx [--python] [--keep]
                                time `hfexport export --format onnx` (release build) on a
                                Qwen3-0.6B-shaped checkpoint of random bf16 weights, generated
                                once into target/bench/; wall time, peak RSS, onnxruntime check;
                                --python: transformers' OnnxExporter side by side (.venv);
                                --keep: keep the exports in target/bench/out-*
  bench generate-onnx [--python] [--keep]
                                export that checkpoint for generation (static cache 512,
                                multi-token decode) and time a greedy onnxruntime loop with the
                                caches bound in place (xtask/python/bench_generate.py): prefill
                                tokens/s (128-token prompt), decode ms/token (64 steps);
                                --python: transformers' export_for_generation side by side
  bench openvino [--python] [--keep]
                                export that checkpoint to OpenVINO IR for generation (stateful,
                                static cache 512, multi-token decode; wall time, peak RSS) and
                                time a greedy OpenVINO CPU loop (xtask/python/bench_openvino.py):
                                prefill tokens/s, decode ms/token, fused layers;
                                --python: transformers' OpenVINO export side by side
  bench executorch [--python] [--keep]
                                export that checkpoint to .pte for generation (XNNPACK, static
                                cache 512; planned and zero-copy; wall time, peak RSS), time the
                                Python ExecuTorch loop (xtask/python/bench_executorch.py) and the
                                Rust zero-copy loop (`hfexport generate`): decode ms/token;
                                --python: transformers' ExecutorchExporter export, same loop
  bench moe [--keep]            a 64-expert top-4 Qwen3-MoE checkpoint of random weights and its
                                4-expert twin, exported for generation (static cache 512) to ONNX
                                and OpenVINO; greedy decode ms/token of each in its runtime and
                                the 64-vs-4 ratio (goal: within 1.5x)
  bench genai [--keep]          `hfexport export --genai` vs ONNX Runtime GenAI's model builder,
                                float32 and int4, both folders run by ONNX Runtime GenAI's
                                runtime (xtask/python/bench_genai.py): export wall, peak RSS,
                                decode ms/token (goal: ours at least as fast)
  bench scale [--keep]          a Llama-3-70B-shaped checkpoint cut to 2 layers (7.6 GB bf16 in 3
                                shards, generated once, streamed) exported to each format, float32
                                then --quantize int4, in one run: wall, ratio to ONNX, peak RSS,
                                MB/s (goals: RSS < 512 MB, every format within 1.5x of ONNX)
  fuzz [--seconds N] [TARGET...]
                                every fuzz target of fuzz/ (or those named) for N seconds each
                                (default 600) under libFuzzer with AddressSanitizer: cargo-fuzz
                                pinned in versions.toml is installed into target/fuzz-tools/ and
                                run on the pinned toolchain with RUSTC_BOOTSTRAP=1; seeds from
                                fuzz/seeds/, findings kept in target/fuzz-corpus/ and
                                target/fuzz-artifacts/; prints runs, exec/s and coverage";

fn main() -> ExitCode {
    match dispatch(std::env::args().skip(1).collect()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("xtask: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(args: Vec<String>) -> Result<ExitCode> {
    let root = repo_root();
    let (command, rest) = match args.split_first() {
        Some((c, rest)) => (c.as_str(), rest),
        None => {
            eprintln!("{USAGE}");
            return Ok(ExitCode::from(2));
        }
    };
    match command {
        "setup" => {
            let group = match rest {
                [] => "test",
                [flag, g] if flag == "--group" => g.as_str(),
                [flag] if flag.starts_with("--group=") => &flag["--group=".len()..],
                _ => bail!("usage: cargo xtask setup [--group <group>|all]"),
            };
            setup(&root, group)?;
            Ok(ExitCode::SUCCESS)
        }
        "fixtures" => {
            no_args(command, rest)?;
            fixtures(&root)?;
            Ok(ExitCode::SUCCESS)
        }
        "check-versions" => {
            let strict = match rest {
                [] => false,
                [flag] if flag == "--strict" => true,
                _ => bail!("usage: cargo xtask check-versions [--strict]"),
            };
            check_versions(&root, strict)?;
            Ok(ExitCode::SUCCESS)
        }
        "check-publish" => {
            no_args(command, rest)?;
            check_publish(&root)?;
            Ok(ExitCode::SUCCESS)
        }
        "test" => test(&root, rest),
        "codegen" => {
            let (mut which, mut check) = (codegen::Which::All, false);
            for arg in rest {
                match arg.as_str() {
                    "--check" => check = true,
                    "onnx" => which = codegen::Which::Onnx,
                    "executorch" => which = codegen::Which::Executorch,
                    _ => bail!("usage: cargo xtask codegen [onnx|executorch] [--check]"),
                }
            }
            codegen::codegen(&root, which, check)?;
            Ok(ExitCode::SUCCESS)
        }
        "bench" => bench::bench(&root, rest),
        "fuzz" => fuzz::fuzz(&root, rest).map(|()| ExitCode::SUCCESS),
        "help" | "-h" | "--help" => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        other => bail!("unknown command `{other}`\n{USAGE}"),
    }
}

/// `check-publish`: what publishing the crates needs, checked without publishing.
fn check_publish(root: &Path) -> Result<()> {
    let mut package = Command::new(cargo_bin());
    package.args(["package", "--workspace", "--no-verify", "--allow-dirty", "--exclude", "xtask"]);
    package.args(["--exclude", "hfexport-workspace-tests", "--exclude", "hfexport-python"]);
    run(package.current_dir(root))?;
    let mut doc = Command::new(cargo_bin());
    doc.args(["doc", "--workspace", "--no-deps", "--exclude", "xtask"]).env("RUSTDOCFLAGS", "-D warnings");
    run(doc.current_dir(root))
}

fn no_args(command: &str, rest: &[String]) -> Result<()> {
    if !rest.is_empty() {
        bail!("`{command}` takes no arguments, got {rest:?}");
    }
    Ok(())
}

/// The workspace root (xtask/ lives directly under it).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask has a parent directory").to_path_buf()
}

fn versions(root: &Path) -> Result<Versions> {
    Versions::load(&root.join("versions.toml"))
}

fn setup(root: &Path, group: &str) -> Result<()> {
    let versions = versions(root)?;
    if group == CLIENTS {
        return setup_clients(root, &versions);
    }
    let pins = versions.pins(group)?;
    println!("xtask setup: Python group `{group}` into .venv/");
    let venv = Venv::new(root);
    venv.ensure()?;
    venv.sync(&pins).with_context(|| format!("setting up Python group `{group}`"))?;
    match group {
        "all" => setup_clients(root, &versions),
        _ => Ok(()),
    }
}

/// The group name of versions.toml's `[clients]`, set up in a venv of its own.
const CLIENTS: &str = "clients";

/// `.venv/clients/`: the `[clients]` pins over the test group's venv (which must exist).
fn setup_clients(root: &Path, versions: &Versions) -> Result<()> {
    let (base, clients) = (Venv::new(root), Venv::clients(root));
    if !base.exists() {
        bail!("the clients' venv builds on {}: run `cargo xtask setup --group test` first", base.dir.display());
    }
    println!("xtask setup: the client libraries ([clients]) into {}", clients.dir.display());
    clients.ensure()?;
    clients.sync_over(&base, &versions.clients).context("setting up the client libraries' venv")?;
    setup_node_clients(&root.join("tests").join("js"))
}

/// The version of transformers.js that `tests/js/package.json` pins.
fn node_pin(dir: &Path) -> Result<String> {
    let path = dir.join("package.json");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path)?).with_context(|| format!("{} is not JSON", path.display()))?;
    json["dependencies"]["@huggingface/transformers"]
        .as_str()
        .map(str::to_string)
        .with_context(|| format!("{} pins no @huggingface/transformers", path.display()))
}

/// The version of transformers.js in `tests/js/node_modules/`, if installed.
fn node_installed(dir: &Path) -> Option<String> {
    let path = dir.join("node_modules").join("@huggingface").join("transformers").join("package.json");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    json["version"].as_str().map(str::to_string)
}

/// transformers.js into `tests/js/node_modules/`, as `tests/js/package-lock.json` pins it
/// (`npm ci`, skipped when that lock file was installed already). Install scripts stay off:
/// onnxruntime-node ships its CPU library in the package, and its script would download GPU
/// ones from GitHub.
fn setup_node_clients(dir: &Path) -> Result<()> {
    let lock = std::fs::read(dir.join("package-lock.json")).with_context(|| format!("reading {}", dir.display()))?;
    let stamp = dir.join("node_modules").join(".hfexport-installed-lock");
    if std::fs::read(&stamp).is_ok_and(|installed| installed == lock) {
        return Ok(());
    }
    println!("xtask setup: transformers.js (npm ci) into {}", dir.join("node_modules").display());
    let mut npm = Command::new("npm");
    npm.args(["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]).current_dir(dir);
    let status = npm.status().with_context(|| {
        "could not start `npm`: the transformers.js client test needs Node.js 20+ and npm (Debian: apt install nodejs npm)"
    })?;
    if !status.success() {
        bail!("`npm ci` in {} failed ({status})", dir.display());
    }
    std::fs::write(&stamp, lock).with_context(|| format!("writing {}", stamp.display()))
}

fn fixtures(root: &Path) -> Result<()> {
    println!("==> [1/2] setup --group oracle");
    setup(root, "oracle")?;
    let out = root.join("tests").join("fixtures");
    println!("==> [2/2] xtask/python/make_fixtures.py {}", out.display());
    let venv = Venv::new(root);
    run(venv.command().arg(root.join("xtask").join("python").join("make_fixtures.py")).arg(&out).current_dir(root))
}

fn test(root: &Path, cargo_args: &[String]) -> Result<ExitCode> {
    println!("==> [1/2] setup --group test, then the clients' venv");
    setup(root, "test")?;
    setup(root, CLIENTS)?;
    let venv = Venv::new(root);
    let python = venv.python();
    let torch = venv.torch_dir().with_context(|| {
        format!("no torch package with libtorch in {} after setup; the libtorch runner needs it", venv.dir.display())
    })?;
    let executorch = venv.package_dir("executorch", "lib/libexecutorch.so").with_context(|| {
        format!("no executorch package in {} after setup; the ExecuTorch runner needs it", venv.dir.display())
    })?;
    println!(
        "==> [2/2] cargo test --workspace --features {TEST_FEATURES} {}(HFEXPORT_PYTHON={}, LIBTORCH={})",
        cargo_args.iter().map(|a| format!("{a} ")).collect::<String>(),
        python.display(),
        torch.display()
    );
    let cargo_test = || {
        let mut cargo = Command::new(cargo_bin());
        cargo
            .args(["test", "--workspace", "--features", TEST_FEATURES])
            .env("HFEXPORT_PYTHON", &python)
            .env("HFEXPORT_CLIENTS_PYTHON", Venv::clients(root).python())
            .env("LIBTORCH", &torch)
            .env("LIBTORCH_CXX11_ABI", "1")
            .env("HFEXPORT_EXECUTORCH", &executorch)
            // the test binaries of crates without an rpath to libtorch and executorch (the
            // facade, the workspace tests)
            .env("LD_LIBRARY_PATH", ld_library_path(&[torch.join("lib"), executorch.join("lib")]))
            .current_dir(root);
        cargo
    };
    if cargo_args.is_empty() {
        // the whole suite: binaries side by side (parallel.rs says why)
        let jobs = std::env::var("HFEXPORT_TEST_JOBS").ok().and_then(|j| j.parse().ok()).unwrap_or(2);
        return parallel::run(cargo_test, jobs);
    }
    let mut cargo = cargo_test();
    cargo.args(cargo_args);
    let status = cargo.status().with_context(|| format!("could not start `{}`", describe(&cargo)))?;
    Ok(exit_code(status))
}

/// `dirs` ahead of the caller's LD_LIBRARY_PATH.
fn ld_library_path(dirs: &[PathBuf]) -> std::ffi::OsString {
    let mut paths = dirs.to_vec();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        paths.extend(std::env::split_paths(&old));
    }
    std::env::join_paths(paths).unwrap_or_default()
}

/// The features the test suite builds: every runner, including libtorch's (not default, as it
/// links the torch wheel).
const TEST_FEATURES: &str =
    "hfexport-workspace-tests/tch,hfexport-workspace-tests/executorch-runtime,hfexport-cli/tch,hfexport-dynamo/tch,\
     hfexport-cli/executorch-runtime,hfexport-executorch/runtime";

fn check_versions(root: &Path, strict: bool) -> Result<()> {
    let versions = versions(root)?;
    let venv = Venv::new(root);
    let installed = venv.installed()?;
    let mut drift = 0usize;
    let mut status = |ok: bool| {
        if ok {
            "ok"
        } else {
            drift += 1;
            "DRIFT"
        }
    };

    println!(
        "Python packages (versions.toml [python.*] vs {}{})",
        venv.python().display(),
        if venv.exists() { "" } else { ": no venv yet" }
    );
    println!("  {:<14} {:<12} {:<10} {:<16} status", "package", "groups", "pin", "installed");
    let mut missing = 0usize;
    // A package that is not installed is not drift: its group may not be set up here.
    let mut state_of = |have: Option<&String>, pin: &versions::PythonPin| match have {
        Some(v) => status(satisfies(v, &pin.version)),
        None => {
            missing += 1;
            "-"
        }
    };
    for pin in versions.pins("all")? {
        let have = installed.get(&versions::normalize_name(&pin.name));
        let state = state_of(have, &pin);
        println!(
            "  {:<14} {:<12} {:<10} {:<16} {state}",
            pin.name,
            versions.groups_of(&pin.name).join(","),
            pin.version,
            have.map_or("not installed", |v| v.as_str()),
        );
    }

    let clients = Venv::clients(root);
    let have_clients = clients.installed()?;
    println!(
        "\nClient libraries (versions.toml [clients] vs {}{})",
        clients.python().display(),
        if clients.exists() { "" } else { ": no venv yet" }
    );
    for pin in &versions.clients {
        let have = have_clients.get(&versions::normalize_name(&pin.name));
        let state = state_of(have, pin);
        let installed = have.map_or("not installed", |v| v.as_str());
        println!("  {:<21} {:<10} {:<16} {state}", pin.name, pin.version, installed);
    }
    let js = root.join("tests").join("js");
    let (pin, have) = (node_pin(&js)?, node_installed(&js));
    let state = match &have {
        Some(v) => status(satisfies(v, &pin)),
        None => "-",
    };
    let js_installed = have.as_deref().unwrap_or("not installed");
    println!("  {:<21} {:<10} {:<16} {state}  (npm, tests/js/package.json)", "transformers.js", pin, js_installed);

    println!("\nRust toolchain (versions.toml [rust])");
    let rustc = output(Command::new("rustc").arg("--version").current_dir(root))?;
    let rustc = rustc.trim();
    let rustc_version = rustc.split_whitespace().nth(1).unwrap_or("");
    println!(
        "  {:<28} {:<10} {:<34} {}",
        "rustc --version",
        versions.rust_toolchain,
        rustc,
        status(rustc_version == versions.rust_toolchain)
    );
    let channel = toolchain_channel(root)?;
    println!(
        "  {:<28} {:<10} {:<34} {}",
        "rust-toolchain.toml channel",
        versions.rust_toolchain,
        channel,
        status(channel == versions.rust_toolchain)
    );
    let fuzz_bin = root.join("target/fuzz-tools/bin/cargo-fuzz");
    let fuzz_have = output(Command::new(&fuzz_bin).arg("--version")).ok();
    let fuzz_have = fuzz_have.as_deref().map(|v| v.trim().trim_start_matches("cargo-fuzz ").to_string());
    println!(
        "  {:<28} {:<10} {:<34} {}",
        "cargo-fuzz (xtask fuzz)",
        versions.cargo_fuzz,
        fuzz_have.as_deref().unwrap_or("not installed (cargo xtask fuzz installs it)"),
        match &fuzz_have {
            Some(v) => status(v == &versions.cargo_fuzz),
            None => "-",
        }
    );

    println!("\nRuntime crates (versions.toml [runtimes] vs Cargo.lock)");
    println!("  {:<14} {:<14} {:<24} {:<8} wheel (pin)", "crate", "pin", "Cargo.lock", "status");
    let locked = locked_versions(root)?;
    for rt in &versions.runtimes {
        let lock: Vec<&String> = locked.iter().filter(|(name, _)| name == &rt.krate).map(|(_, v)| v).collect();
        let exact = rt.version.trim_start_matches('=');
        let (lock_text, state) = if lock.is_empty() {
            ("not a dependency yet".to_string(), "-")
        } else {
            let text = lock.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ");
            (text, status(lock.iter().all(|v| v.as_str() == exact)))
        };
        let wheel_pin = versions
            .pins("all")?
            .into_iter()
            .find(|p| versions::same_package(&p.name, &rt.wheel))
            .map_or("not pinned yet".to_string(), |p| format!("=={}", p.version));
        println!("  {:<14} {:<14} {:<24} {:<8} {} ({})", rt.krate, rt.version, lock_text, state, rt.wheel, wheel_pin);
    }

    let patch_warnings = list_patches(&versions, &installed)?;

    println!();
    if patch_warnings > 0 {
        println!("warning: {patch_warnings} patch(es) whose range the pins have left (see above)");
    }
    if missing > 0 {
        println!(
            "{missing} pinned Python package(s) not installed (`cargo xtask setup --group all` installs every group)"
        );
    }
    if drift == 0 {
        println!("no drift");
    } else if strict {
        bail!("{drift} pin(s) drifted (--strict)");
    } else {
        println!(
            "warning: {drift} pin(s) drifted (`cargo xtask setup --group <group>` reinstalls a Python group's pins)"
        );
    }
    Ok(())
}

/// `channel` from rust-toolchain.toml.
fn toolchain_channel(root: &Path) -> Result<String> {
    let path = root.join("rust-toolchain.toml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let doc: toml_edit::DocumentMut = text.parse().with_context(|| format!("parsing {}", path.display()))?;
    doc.get("toolchain")
        .and_then(|t| t.get("channel"))
        .and_then(|c| c.as_str())
        .map(str::to_string)
        .ok_or_else(|| anyhow!("{} has no toolchain.channel", path.display()))
}

/// (name, version) of every package in Cargo.lock (none when there is no lock file yet).
fn locked_versions(root: &Path) -> Result<Vec<(String, String)>> {
    let path = root.join("Cargo.lock");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(Vec::new());
    };
    let doc: toml_edit::DocumentMut = text.parse().with_context(|| format!("parsing {}", path.display()))?;
    let Some(packages) = doc.get("package").and_then(|p| p.as_array_of_tables()) else {
        return Ok(Vec::new());
    };
    Ok(packages
        .iter()
        .filter_map(|p| {
            let name = p.get("name")?.as_str()?;
            let version = p.get("version")?.as_str()?;
            Some((name.to_string(), version.to_string()))
        })
        .collect())
}

fn cargo_bin() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// The command line, for messages.
fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs a command with inherited stdout/stderr; a non-zero exit is an error naming it.
fn run(cmd: &mut Command) -> Result<()> {
    let desc = describe(cmd);
    let status = cmd.status().with_context(|| format!("could not start `{desc}`"))?;
    if !status.success() {
        bail!("`{desc}` failed ({status})");
    }
    Ok(())
}

/// Runs a command and returns its stdout; a non-zero exit is an error naming it.
fn output(cmd: &mut Command) -> Result<String> {
    let desc = describe(cmd);
    let out = cmd.output().with_context(|| format!("could not start `{desc}`"))?;
    if !out.status.success() {
        bail!("`{desc}` failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{desc}` printed non-UTF-8 output"))
}

/// The exit code to pass on: the child's, or 128 + signal when it was killed.
fn exit_code(status: ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match status.code() {
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::from(128 + status.signal().unwrap_or(0).clamp(0, 127) as u8),
    }
}

/// The patch registry against the pins and what is installed: each patch's upstream range,
/// whether the pinned and the installed versions fall in it, and a warning when the pin has
/// left it (exports no longer get the workaround: drop it, or fix its range). Returns the
/// number of warnings.
fn list_patches(versions: &Versions, installed: &std::collections::BTreeMap<String, String>) -> Result<usize> {
    let registry = hfexport_core::passes::PatchRegistry::builtin();
    let pinned = versions.pins("all")?.into_iter().map(|p| (versions::normalize_name(&p.name), p.version)).collect();
    let statuses = versions::patch_statuses(&registry, &pinned, installed);
    let at = |v: &Option<(String, bool)>| match v {
        None => "-".to_string(),
        Some((v, true)) => format!("{v} (in range)"),
        Some((v, false)) => format!("{v} (OUTSIDE)"),
    };
    println!("\nPatches (crates/hfexport-core/src/passes.rs: upstream versions each workaround is needed for)");
    println!("  {:<38} {:<18} {:<26} {:<22} installed", "patch", "applies to", "range", "pinned");
    let mut warnings = 0;
    for s in &statuses {
        println!("  {:<38} {:<18} {:<26} {:<22} {}", s.name, s.scope, s.range, at(&s.pinned), at(&s.installed));
        println!("      issue: {}", s.issue);
        if let Some(w) = &s.warning {
            warnings += 1;
            println!("      warning: {w}");
        }
    }
    Ok(warnings)
}
