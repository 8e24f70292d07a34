//! The pass manager and the patch registry.
//!
//! A pass turns a graph into a graph; the manager verifies after each one and reports what
//! ran. A patch is a named rewrite that works around an upstream runtime or exporter
//! behaviour: it says at which stage it runs, for which formats, for which upstream versions
//! it is needed, and why. Patches applied to an export are listed in its `export.json`, and
//! `cargo xtask check-versions` lists the patches whose version range no longer matches what
//! is installed.

use crate::config::ExportFormat;
use crate::decompose::{decompose, fold_sliding_windows};
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::ops::Op;
use crate::verify::verify;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// When a patch runs: right after the builder, or once a backend is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Build,
    Backend,
}

/// Versions `[min, below)` of an upstream package for which a patch is needed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VersionRange {
    pub package: &'static str,
    pub min: Option<&'static str>,
    pub below: Option<&'static str>,
}

/// Compares dotted versions numerically (`1.10.0 > 1.9.2`); non-numeric parts compare as text.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    let parts = |s: &str| s.split(['.', '-', '+']).map(str::to_string).collect::<Vec<_>>();
    let (pa, pb) = (parts(a), parts(b));
    for i in 0..pa.len().max(pb.len()) {
        let (x, y) = (pa.get(i).map_or("0", |s| s.as_str()), pb.get(i).map_or("0", |s| s.as_str()));
        let o = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => x.cmp(y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

impl VersionRange {
    pub fn contains(&self, version: &str) -> bool {
        self.min.is_none_or(|m| compare_versions(version, m) != Ordering::Less)
            && self.below.is_none_or(|b| compare_versions(version, b) == Ordering::Less)
    }
}

/// A named graph rewrite working around an upstream behaviour.
#[derive(Debug, Clone)]
pub struct Patch {
    pub name: &'static str,
    pub stage: Stage,
    /// Formats it applies to; empty means every format.
    pub formats: &'static [ExportFormat],
    pub upstream: Option<VersionRange>,
    pub reason: &'static str,
    /// Returns the rewritten graph, or `None` when the graph has nothing to patch.
    pub rewrite: fn(&Graph) -> Result<Option<Graph>>,
}

impl Patch {
    /// Whether this patch is wanted for `format` at `stage`, given the versions in use
    /// (a patch whose package version is unknown is applied).
    pub fn wanted(&self, stage: Stage, format: Option<ExportFormat>, versions: &BTreeMap<String, String>) -> bool {
        let format_ok = match format {
            Some(f) => self.formats.is_empty() || self.formats.contains(&f),
            None => self.formats.is_empty(),
        };
        let version_ok = self.upstream.as_ref().is_none_or(|r| versions.get(r.package).is_none_or(|v| r.contains(v)));
        self.stage == stage && format_ok && version_ok
    }
}

/// Every patch hfexport knows.
#[derive(Debug, Clone, Default)]
pub struct PatchRegistry {
    patches: Vec<Patch>,
}

impl PatchRegistry {
    /// The patches shipped with hfexport. None is needed yet: the writers that need
    /// workarounds (ONNX Runtime, OpenVINO, ExecuTorch, torch) register theirs here.
    pub fn builtin() -> PatchRegistry {
        PatchRegistry::default()
    }

    pub fn register(&mut self, p: Patch) -> Result<()> {
        if self.patches.iter().any(|q| q.name == p.name) {
            return Err(Error::Config(format!("patch `{}` is registered twice", p.name)));
        }
        self.patches.push(p);
        Ok(())
    }

    pub fn patches(&self) -> &[Patch] {
        &self.patches
    }
}

/// One step of a pipeline.
#[derive(Clone)]
pub enum Pass {
    Verify,
    /// Expand the high-level ops `select` picks (a backend's "decompose what I can't lower").
    Decompose {
        name: &'static str,
        select: fn(&Op) -> bool,
    },
    /// Fold attention sliding windows into the masks (`decompose::fold_sliding_windows`).
    FoldSlidingWindows,
    /// Apply the registry's patches for a stage and format.
    Patches {
        stage: Stage,
        format: Option<ExportFormat>,
    },
}

impl Pass {
    pub fn name(&self) -> String {
        match self {
            Pass::Verify => "verify".into(),
            Pass::Decompose { name, .. } => format!("decompose:{name}"),
            Pass::FoldSlidingWindows => "fold-sliding-windows".into(),
            Pass::Patches { stage, format } => {
                format!("patches:{stage:?}:{}", format.map_or("any", |f| f.as_str())).to_lowercase()
            }
        }
    }
}

/// What a pipeline did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassReport {
    pub passes: Vec<String>,
    pub patches_applied: Vec<String>,
}

pub struct PassManager {
    registry: PatchRegistry,
    versions: BTreeMap<String, String>,
    passes: Vec<Pass>,
}

impl PassManager {
    /// `versions`: upstream package -> version in use (from the runtime pins).
    pub fn new(registry: PatchRegistry, versions: BTreeMap<String, String>) -> PassManager {
        PassManager { registry, versions, passes: vec![] }
    }

    pub fn add(&mut self, p: Pass) -> &mut Self {
        self.passes.push(p);
        self
    }

    /// Runs every pass in order, verifying the graph before the first and after each one.
    pub fn run(&self, graph: Graph) -> Result<(Graph, PassReport)> {
        verify(&graph).map_err(|e| Error::Pass { pass: "input".into(), source: Box::new(e) })?;
        let mut g = graph;
        let mut report = PassReport::default();
        for p in &self.passes {
            let wrap = |e: Error| Error::Pass { pass: p.name(), source: Box::new(e) };
            match p {
                Pass::Verify => {}
                Pass::Decompose { select, .. } => g = decompose(&g, select).map_err(wrap)?,
                Pass::FoldSlidingWindows => g = fold_sliding_windows(&g).map_err(wrap)?,
                Pass::Patches { stage, format } => {
                    for patch in self.registry.patches().iter().filter(|x| x.wanted(*stage, *format, &self.versions)) {
                        let pass = format!("patch:{}", patch.name);
                        if let Some(next) =
                            (patch.rewrite)(&g).map_err(|e| Error::Pass { pass: pass.clone(), source: Box::new(e) })?
                        {
                            g = next;
                            report.patches_applied.push(patch.name.to_string());
                        }
                    }
                }
            }
            verify(&g).map_err(wrap)?;
            report.passes.push(p.name());
        }
        Ok((g, report))
    }
}
