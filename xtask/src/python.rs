//! The project's Python environment, `.venv/` at the repository root.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::versions::{normalize_name, satisfies, PythonPin};
use crate::{output, run};

/// The interpreter used to create `.venv/`.
const BOOTSTRAP_PYTHON: &str = "python3";

/// Prints `name<TAB>version` for every distribution installed in the interpreter's environment.
const LIST_INSTALLED: &str = "import importlib.metadata as m
for d in m.distributions():
    print(d.metadata['Name'], d.version, sep='\\t')";

pub struct Venv {
    pub dir: PathBuf,
}

/// The file in the clients' venv that puts `.venv/`'s site-packages on its path, after its own.
const SHARED_PTH: &str = "hfexport_test_venv.pth";

impl Venv {
    pub fn new(root: &Path) -> Self {
        Venv { dir: root.join(".venv") }
    }

    /// The client libraries' venv, `.venv/clients/` (versions.toml `[clients]`).
    pub fn clients(root: &Path) -> Self {
        Venv { dir: root.join(".venv").join("clients") }
    }

    /// The venv's `lib/python3.X/site-packages`.
    pub fn site_packages(&self) -> Option<PathBuf> {
        let lib = std::fs::read_dir(self.dir.join("lib")).ok()?;
        lib.flatten().map(|e| e.path().join("site-packages")).find(|p| p.is_dir())
    }

    /// Installs `pins` into this venv (the clients') with `base`'s packages behind them: pip
    /// runs without the `.pth` that adds `base`'s site-packages (so it neither sees nor
    /// touches them), which is written afterwards.
    pub fn sync_over(&self, base: &Venv, pins: &[PythonPin]) -> Result<()> {
        let shared = base.site_packages().with_context(|| format!("no site-packages in {}", base.dir.display()))?;
        let own = self.site_packages().with_context(|| format!("no site-packages in {}", self.dir.display()))?;
        let pth = own.join(SHARED_PTH);
        if pth.exists() {
            std::fs::remove_file(&pth).with_context(|| format!("removing {}", pth.display()))?;
        }
        self.sync(pins)?;
        std::fs::write(&pth, format!("{}\n", shared.display())).with_context(|| format!("writing {}", pth.display()))
    }

    pub fn python(&self) -> PathBuf {
        self.dir.join("bin").join("python")
    }

    pub fn exists(&self) -> bool {
        self.python().is_file()
    }

    /// The torch package folder of the venv (`.venv/lib/python3.X/site-packages/torch`): what
    /// torch-sys links as `LIBTORCH`.
    pub fn torch_dir(&self) -> Option<PathBuf> {
        self.package_dir("torch", "lib/libtorch_cpu.so")
    }

    /// The folder of an installed package that holds `file`.
    pub fn package_dir(&self, package: &str, file: &str) -> Option<PathBuf> {
        let lib = std::fs::read_dir(self.dir.join("lib")).ok()?;
        lib.flatten().map(|e| e.path().join("site-packages").join(package)).find(|p| p.join(file).is_file())
    }

    /// A command running the venv's interpreter, with no stdin and pip never prompting.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(self.python());
        cmd.stdin(std::process::Stdio::null())
            .env("PIP_NO_INPUT", "1")
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
            .env("PIP_ROOT_USER_ACTION", "ignore");
        cmd
    }

    /// Creates the venv if it does not exist yet.
    pub fn ensure(&self) -> Result<()> {
        if self.exists() {
            println!("  {} exists", self.dir.display());
            return Ok(());
        }
        println!("  creating {} with `{BOOTSTRAP_PYTHON} -m venv`", self.dir.display());
        let mut venv = Command::new(BOOTSTRAP_PYTHON);
        venv.args(["-m", "venv"]).arg(&self.dir);
        if let Err(err) = run(&mut venv) {
            // Debian's python3 without python3-venv has no ensurepip: make the venv without
            // pip and let the system pip install pip into it.
            println!("  {err:#}; retrying with --without-pip and the system pip");
            run(Command::new(BOOTSTRAP_PYTHON).args(["-m", "venv", "--without-pip"]).arg(&self.dir))?;
            run(Command::new(BOOTSTRAP_PYTHON)
                .args(["-m", "pip", "--python"])
                .arg(self.python())
                .args(["install", "--disable-pip-version-check", "--no-input", "pip"])
                .env("PIP_ROOT_USER_ACTION", "ignore"))
            .context("bootstrapping pip into the venv")?;
        }
        Ok(())
    }

    /// Installed distributions, by normalised name.
    pub fn installed(&self) -> Result<BTreeMap<String, String>> {
        if !self.exists() {
            return Ok(BTreeMap::new());
        }
        let text = output(self.command().args(["-c", LIST_INSTALLED]))?;
        // the first of a name on the path is the one imported (the clients' venv sees the test
        // venv's packages after its own)
        let mut found = BTreeMap::new();
        for (name, version) in text.lines().filter_map(|line| line.split_once('\t')) {
            found.entry(normalize_name(name)).or_insert_with(|| version.trim().to_string());
        }
        Ok(found)
    }

    /// Installs the pins that are missing or differ; installs nothing when all match.
    pub fn sync(&self, pins: &[PythonPin]) -> Result<()> {
        let installed = self.installed()?;
        let mut wanted = Vec::new();
        for pin in pins {
            match installed.get(&normalize_name(&pin.name)) {
                Some(v) if satisfies(v, &pin.version) => {
                    println!("  {:<14} {:<10} ok", pin.name, v)
                }
                Some(v) => {
                    println!("  {:<14} {:<10} -> {}", pin.name, v, pin.version);
                    wanted.push(pin);
                }
                None => {
                    println!("  {:<14} {:<10} -> {}", pin.name, "-", pin.version);
                    wanted.push(pin);
                }
            }
        }
        if wanted.is_empty() {
            println!("  nothing to install");
            return Ok(());
        }
        println!("  installing {} package(s)", wanted.len());
        // pins with their dependencies first, then the --no-deps ones beside them
        for no_deps in [false, true] {
            let batch: Vec<String> =
                wanted.iter().filter(|p| p.no_deps == no_deps).map(|p| format!("{}=={}", p.name, p.version)).collect();
            if batch.is_empty() {
                continue;
            }
            let mut pip = self.command();
            pip.args(["-m", "pip", "install", "--disable-pip-version-check", "--no-input"]);
            if no_deps {
                pip.arg("--no-deps");
            }
            run(pip.args(&batch))?;
        }

        let installed = self.installed()?;
        for pin in pins {
            match installed.get(&normalize_name(&pin.name)) {
                Some(v) if satisfies(v, &pin.version) => {}
                other => bail!(
                    "after pip install, {} is {} instead of {}",
                    pin.name,
                    other.map_or("not installed", |v| v.as_str()),
                    pin.version
                ),
            }
        }
        Ok(())
    }
}
