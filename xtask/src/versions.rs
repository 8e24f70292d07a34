//! `versions.toml`: the one file with every pin.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use toml_edit::{DocumentMut, Item, TableLike};

/// An exact Python package pin (`name==version`), or `name = { version, no_deps = true }`
/// for a wheel whose declared dependencies are far wider than what we use (installed with
/// `pip install --no-deps`; what it really needs is pinned beside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonPin {
    pub name: String,
    pub version: String,
    pub no_deps: bool,
}

/// A Rust crate that binds a runtime, and the PyPI wheel that provides the runtime.
#[derive(Debug, Clone)]
pub struct RuntimePin {
    pub krate: String,
    pub version: String,
    pub wheel: String,
}

#[derive(Debug)]
pub struct Versions {
    /// `[python.<group>]` tables, in file order.
    pub python: Vec<(String, Vec<PythonPin>)>,
    /// `[clients]`: the client libraries' own venv, `.venv/clients/` (every pin `no_deps`).
    pub clients: Vec<PythonPin>,
    pub rust_toolchain: String,
    /// The cargo-fuzz `cargo xtask fuzz` installs.
    pub cargo_fuzz: String,
    pub runtimes: Vec<RuntimePin>,
}

impl Versions {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self> {
        let doc: DocumentMut = text.parse()?;

        let mut python = Vec::new();
        for (group, item) in table(doc.as_item(), "python")?.iter() {
            let pins = item.as_table_like().ok_or_else(|| anyhow!("[python.{group}] must be a table"))?;
            python.push((group.to_string(), python_pins(pins, &format!("python.{group}"))?));
        }
        if python.is_empty() {
            bail!("no [python.<group>] table");
        }
        // the clients' venv has only what the test group's lacks: never their dependencies
        let clients = python_pins(table(doc.as_item(), "clients")?, "clients")?
            .into_iter()
            .map(|p| PythonPin { no_deps: true, ..p })
            .collect();

        let rust = table(doc.as_item(), "rust")?;
        let rust_toolchain =
            string(rust.get("toolchain").ok_or_else(|| anyhow!("[rust] has no `toolchain`"))?, "rust.toolchain")?;
        let cargo_fuzz =
            string(rust.get("cargo_fuzz").ok_or_else(|| anyhow!("[rust] has no `cargo_fuzz`"))?, "rust.cargo_fuzz")?;

        let mut runtimes = Vec::new();
        for (krate, item) in table(doc.as_item(), "runtimes")?.iter() {
            let key = format!("runtimes.{krate}");
            let t = item.as_table_like().ok_or_else(|| anyhow!("`{key}` must be a table {{ version, wheel }}"))?;
            let field = |f: &str| -> Result<String> {
                string(t.get(f).ok_or_else(|| anyhow!("`{key}` has no `{f}`"))?, &format!("{key}.{f}"))
            };
            runtimes.push(RuntimePin { krate: krate.to_string(), version: field("version")?, wheel: field("wheel")? });
        }

        Ok(Versions { python, clients, rust_toolchain, cargo_fuzz, runtimes })
    }

    pub fn group_names(&self) -> Vec<&str> {
        self.python.iter().map(|(g, _)| g.as_str()).collect()
    }

    /// The pins of one group, or of every group for `all` (a package pinned to two different
    /// versions in two groups is an error).
    pub fn pins(&self, group: &str) -> Result<Vec<PythonPin>> {
        if group != "all" {
            return self.python.iter().find(|(g, _)| g == group).map(|(_, pins)| pins.clone()).ok_or_else(|| {
                anyhow!("unknown group `{group}`; valid groups: {}, all", self.group_names().join(", "))
            });
        }
        let mut all: Vec<PythonPin> = Vec::new();
        for (group, pins) in &self.python {
            for pin in pins {
                match all.iter().find(|p| same_package(&p.name, &pin.name)) {
                    Some(p) if p.version != pin.version => bail!(
                        "`{}` is pinned to {} in one group and to {} in [python.{group}]",
                        pin.name,
                        p.version,
                        pin.version
                    ),
                    Some(_) => {}
                    None => all.push(pin.clone()),
                }
            }
        }
        Ok(all)
    }

    /// The groups that pin `name`.
    pub fn groups_of(&self, name: &str) -> Vec<&str> {
        self.python
            .iter()
            .filter(|(_, pins)| pins.iter().any(|p| same_package(&p.name, name)))
            .map(|(g, _)| g.as_str())
            .collect()
    }
}

/// The pins of one table (`key` names it in errors): `name = "version"` or
/// `name = { version, no_deps }`.
fn python_pins(pins: &dyn TableLike, key: &str) -> Result<Vec<PythonPin>> {
    pins.iter()
        .map(|(name, v)| {
            let key = format!("{key}.{name}");
            match v.as_table_like() {
                None => Ok(PythonPin { name: name.to_string(), version: string(v, &key)?, no_deps: false }),
                Some(t) => {
                    let version = string(
                        t.get("version").ok_or_else(|| anyhow!("`{key}` has no `version`"))?,
                        &format!("{key}.version"),
                    )?;
                    let no_deps = match t.get("no_deps") {
                        None => false,
                        Some(b) => b.as_bool().ok_or_else(|| anyhow!("`{key}.no_deps` must be true or false"))?,
                    };
                    Ok(PythonPin { name: name.to_string(), version, no_deps })
                }
            }
        })
        .collect()
}

fn table<'a>(item: &'a Item, key: &str) -> Result<&'a dyn TableLike> {
    item.get(key)
        .ok_or_else(|| anyhow!("missing [{key}]"))?
        .as_table_like()
        .ok_or_else(|| anyhow!("[{key}] must be a table"))
}

fn string(item: &Item, key: &str) -> Result<String> {
    item.as_str().map(str::to_string).ok_or_else(|| anyhow!("`{key}` must be a string"))
}

/// PEP 503 name normalisation: case-insensitive, runs of `-`, `_`, `.` are equal.
pub fn normalize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

pub fn same_package(a: &str, b: &str) -> bool {
    normalize_name(a) == normalize_name(b)
}

/// Whether an installed version satisfies the exact pin `==pin`. As in PEP 440, a local
/// version label does not matter (`2.13.0+cu130` satisfies `==2.13.0`).
pub fn satisfies(installed: &str, pin: &str) -> bool {
    installed.split('+').next() == Some(pin)
}

/// A registered patch against the pinned and installed versions of its upstream package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchStatus {
    pub name: &'static str,
    /// `backend onnx`, `build any`.
    pub scope: String,
    /// `onnxruntime >=1.32.0`, or `always` for a patch with no upstream range.
    pub range: String,
    /// (version, inside the range) of the pin in versions.toml, of the installed package.
    pub pinned: Option<(String, bool)>,
    pub installed: Option<(String, bool)>,
    pub issue: &'static str,
    /// Set when the pin leaves the range (the workaround is no longer applied to exports) or
    /// the package has no pin.
    pub warning: Option<String>,
}

/// Where each registered patch stands: `pinned` and `installed` map normalised package names
/// to versions.
pub fn patch_statuses(
    registry: &hfexport_core::passes::PatchRegistry,
    pinned: &std::collections::BTreeMap<String, String>,
    installed: &std::collections::BTreeMap<String, String>,
) -> Vec<PatchStatus> {
    registry
        .patches()
        .iter()
        .map(|p| {
            let formats: Vec<&str> = p.formats.iter().map(|f| f.as_str()).collect();
            let scope = format!(
                "{} {}",
                format!("{:?}", p.stage).to_lowercase(),
                if formats.is_empty() { "any format".to_string() } else { formats.join(",") }
            );
            let Some(r) = &p.upstream else {
                return PatchStatus {
                    name: p.name,
                    scope,
                    range: "always".into(),
                    pinned: None,
                    installed: None,
                    issue: p.issue,
                    warning: None,
                };
            };
            let at = |versions: &std::collections::BTreeMap<String, String>| {
                versions.get(&normalize_name(r.package)).map(|v| (v.clone(), r.contains(v)))
            };
            let (pin, have) = (at(pinned), at(installed));
            let warning = match &pin {
                None => {
                    Some(format!("{} has no pin in versions.toml: the patch is applied to every export", r.package))
                }
                Some((v, false)) => Some(format!(
                    "the pinned {} {v} is outside {r}: exports no longer get this patch; drop it, or fix its range",
                    r.package
                )),
                Some((_, true)) => None,
            };
            PatchStatus {
                name: p.name,
                scope,
                range: r.to_string(),
                pinned: pin,
                installed: have,
                issue: p.issue,
                warning,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hfexport_core::passes::{Patch, PatchRegistry, Stage, VersionRange};
    use std::collections::BTreeMap;

    fn keep(_: &hfexport_core::Graph) -> hfexport_core::Result<Option<hfexport_core::Graph>> {
        Ok(None)
    }

    #[test]
    fn patch_statuses_flag_a_pin_outside_the_range() {
        let mut reg = PatchRegistry::default();
        let patch = |name, range| Patch {
            name,
            stage: Stage::Backend,
            formats: &[hfexport_core::ExportFormat::Onnx],
            upstream: range,
            issue: "https://example.invalid/issue/1",
            reason: "test",
            rewrite: keep,
        };
        reg.register(patch("needed", Some(VersionRange { package: "onnxruntime", min: Some("1.30"), below: None })))
            .unwrap();
        reg.register(patch("fixed", Some(VersionRange { package: "onnxruntime", min: None, below: Some("1.32") })))
            .unwrap();
        reg.register(patch("unpinned", Some(VersionRange { package: "Open_VINO", min: None, below: None }))).unwrap();
        reg.register(patch("always", None)).unwrap();
        let pinned = BTreeMap::from([("onnxruntime".to_string(), "1.32.0".to_string())]);
        let installed = BTreeMap::from([("onnxruntime".to_string(), "1.31.1".to_string())]);
        let s = patch_statuses(&reg, &pinned, &installed);
        assert_eq!(s[0].range, "onnxruntime >=1.30");
        assert_eq!(s[0].scope, "backend onnx");
        assert_eq!(
            (s[0].pinned.clone(), s[0].installed.clone()),
            (Some(("1.32.0".into(), true)), Some(("1.31.1".into(), true)))
        );
        assert_eq!(s[0].warning, None);
        assert_eq!(s[1].pinned, Some(("1.32.0".into(), false)));
        assert_eq!(s[1].installed, Some(("1.31.1".into(), true)));
        let w = s[1].warning.as_deref().unwrap();
        assert!(w.contains("1.32.0") && w.contains("onnxruntime <1.32"), "{w}");
        assert!(s[2].warning.as_deref().unwrap().contains("no pin"));
        assert_eq!((s[3].range.as_str(), &s[3].warning), ("always", &None));
    }

    /// The shipped registry against versions.toml: the OpenVINO workaround holds the pin, the
    /// ONNX Runtime one (not reproduced with any release) is flagged.
    #[test]
    fn builtin_patches_against_the_repo_pins() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("versions.toml");
        let v = Versions::load(&path).unwrap();
        let pinned = v.pins("all").unwrap().into_iter().map(|p| (normalize_name(&p.name), p.version)).collect();
        let s = patch_statuses(&PatchRegistry::builtin(), &pinned, &BTreeMap::new());
        let by = |n: &str| s.iter().find(|p| p.name == n).unwrap().clone();
        let ov = by("openvino-static-query-cache-scatter");
        assert_eq!((ov.pinned, ov.warning), (Some(("2026.4.1".into(), true)), None));
        let ort = by("onnxruntime-attention-additive-mask");
        assert_eq!(ort.pinned, Some(("1.32.0".into(), false)));
        assert!(ort.warning.is_some());
    }

    #[test]
    fn repo_versions_toml_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("versions.toml");
        let v = Versions::load(&path).unwrap();
        assert!(v.group_names().contains(&"test"));
        assert!(v.group_names().contains(&"oracle"));
        assert!(v.pins("all").is_ok());
        assert!(v.pins("nope").is_err());
        assert!(!v.runtimes.is_empty());
    }

    #[test]
    fn names_and_versions() {
        assert_eq!(normalize_name("Foo_Bar.baz"), "foo-bar-baz");
        assert!(satisfies("2.13.0+cu130", "2.13.0"));
        assert!(satisfies("2.13.0", "2.13.0"));
        assert!(!satisfies("2.13.01", "2.13.0"));
    }

    #[test]
    fn conflicting_pins_are_an_error() {
        let v =
            Versions::parse("[python.a]\nx = \"1\"\n[python.b]\nx = \"2\"\n[clients]\n[rust]\ntoolchain = \"1\"\ncargo_fuzz = \"0.1\"\n[runtimes]\n")
                .unwrap();
        assert!(v.pins("all").is_err());
    }
}
