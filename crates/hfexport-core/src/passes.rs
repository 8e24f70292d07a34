//! The pass manager and the patch registry.
//!
//! A pass turns a graph into a graph; the manager verifies after each one and reports what
//! ran. A patch is a named rewrite that works around an upstream runtime or exporter
//! behaviour: it says at which stage it runs, for which formats, for which upstream versions
//! it is needed, the upstream issue, and why. Workarounds live here, not in the lowerings: a
//! lowering takes what the patch produces. Patches applied to an export are listed in its
//! `export.json`, and `cargo xtask check-versions` prints each patch's range with whether the
//! pinned and installed versions fall in it, and warns when a pin has left it.

use crate::config::ExportFormat;
use crate::decompose::{choose_moe_strategies, decompose, fold_query_groups, fold_sliding_windows, rebuild};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::{Graph, Producer};
use crate::ops::Op;
use crate::tensor::Tensor;
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

/// `onnxruntime >=1.32.0`, `openvino >=2026.4.1,<2027`, `torch (any version)`.
impl std::fmt::Display for VersionRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.min, self.below) {
            (None, None) => write!(f, "{} (any version)", self.package),
            (Some(m), None) => write!(f, "{} >={m}", self.package),
            (None, Some(b)) => write!(f, "{} <{b}", self.package),
            (Some(m), Some(b)) => write!(f, "{} >={m},<{b}", self.package),
        }
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
    /// The upstream issue it works around: a URL, or a precise description when none is known.
    pub issue: &'static str,
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
    /// The patches shipped with hfexport: every workaround of an upstream runtime behaviour
    /// lives here (not in a lowering), so `export.json` lists the ones an export needed and
    /// `cargo xtask check-versions` flags those whose upstream range the pins have left.
    pub fn builtin() -> PatchRegistry {
        let mut r = PatchRegistry::default();
        for p in [ORT_ATTENTION_ADDITIVE_MASK, OPENVINO_STATIC_QUERY_CACHE_SCATTER] {
            r.register(p).expect("builtin patch names are unique");
        }
        r
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

/// The additive attention mask the ONNX lowering used to hard-code, believed to avoid NaN from
/// ONNX Runtime's `Attention` on fully masked rows of a bool mask. Not reproduced with any
/// release (see `issue`): the range holds none of the releases that have the opset-23 CPU
/// kernel (1.23.0 on), so it is not applied, and `cargo xtask check-versions` reports the pin
/// outside it, a workaround to drop once the team agrees.
pub const ORT_ATTENTION_ADDITIVE_MASK: Patch = Patch {
    name: "onnxruntime-attention-additive-mask",
    stage: Stage::Backend,
    formats: &[ExportFormat::Onnx],
    upstream: Some(VersionRange { package: "onnxruntime", min: None, below: Some("1.23.0") }),
    issue: "believed: ONNX Runtime's CPU Attention (opset 23) returns NaN for a query row whose bool attn_mask \
            is all false (a left-padded position). Not reproduced: a GQA Attention with fully masked rows and \
            the fixtures' opset-23 exports (float32 and float16, bool mask) give finite rows with 1.23.0, \
            1.24.1, 1.27.0 (uniform over the keys) and 1.30.0, 1.31.0, 1.31.1, 1.32.0 (zeros, the ONNX errata \
            https://github.com/onnx/onnx/pull/8068 implemented for https://github.com/microsoft/onnxruntime/issues/28904)",
    reason: "a native Attention gets an additive float mask (0 where a key may be attended, the dtype's lowest \
             value elsewhere) instead of the bool one",
    rewrite: additive_attention_masks,
};

/// OpenVINO's CPU plugin fails to compile a one-token decode whose KV state grows.
pub const OPENVINO_STATIC_QUERY_CACHE_SCATTER: Patch = Patch {
    name: "openvino-static-query-cache-scatter",
    stage: Stage::Backend,
    formats: &[ExportFormat::Openvino],
    upstream: Some(VersionRange { package: "openvino", min: Some("2026.4.1"), below: None }),
    issue: "OpenVINO's CPU plugin fails compile_model with \"Loop detected during topological sort starting \
            from 'model.layers.0.self_attn.attention' node\" on a stateful model whose decode takes a fixed \
            number of tokens (one) and grows each KV state by Concat (ReadValue -> Gather(beam_idx) -> Concat \
            -> Assign, the mask sliced to the keys); reproduced with 2026.4.1 (without this patch the stateful \
            static-cache generation exports of tests/openvino_export.rs fail to compile), earlier releases not \
            tried. No upstream issue found (searched openvinotoolkit/openvino issues for the message)",
    reason: "a CacheUpdate writing a fixed number of rows into a graph input becomes a ScatterSlots, which the \
             stateful lowering writes in place with ScatterUpdate instead of growing the state (a stateless \
             export lowers both to the same ScatterUpdate)",
    rewrite: scatter_static_cache_updates,
};

/// Every `Attention` whose mask is bool gets the additive mask `where(mask, 0, lowest)` in its
/// query dtype instead (the same scores: see `Op::Attention`). `None` when no attention has a
/// bool mask.
pub fn additive_attention_masks(src: &Graph) -> Result<Option<Graph>> {
    let bool_mask = |n: &crate::graph::Node| {
        matches!(n.op, Op::Attention { sliding_window: None, .. }) && src.info(n.inputs[3]).dtype == DType::Bool
    };
    if !src.nodes().iter().any(bool_mask) {
        return Ok(None);
    }
    let g = rebuild(src, &mut |g, node, ins| {
        if !bool_mask(node) {
            return g.add_node(&node.name, node.op.clone(), ins);
        }
        let dtype = g.info(ins[0]).dtype;
        let zero = g.op(&format!("{}/mask_keep", node.name), Op::Constant(Tensor::scalar_float(dtype, 0.0)), &[])?;
        let low = Tensor::scalar_float(dtype, dtype.min_finite());
        let low = g.op(&format!("{}/mask_lowest", node.name), Op::Constant(low), &[])?;
        let mask = g.op(&format!("{}/additive_mask", node.name), Op::Where, &[ins[3], zero, low])?;
        let mut ins = ins.to_vec();
        ins[3] = mask;
        g.add_node(&node.name, node.op.clone(), &ins)
    })?;
    Ok(Some(g))
}

/// Every `CacheUpdate` of a graph input by a fixed number of new rows (a one-token decode)
/// becomes a `ScatterSlots`. `None` when there is none.
pub fn scatter_static_cache_updates(src: &Graph) -> Result<Option<Graph>> {
    let fixed = |n: &crate::graph::Node| {
        n.op == Op::CacheUpdate
            && matches!(src.producer(n.inputs[0]), Producer::Input(_))
            && src.info(n.inputs[1]).shape.get(2).is_some_and(|q| q.as_const().is_some())
    };
    if !src.nodes().iter().any(fixed) {
        return Ok(None);
    }
    let g = rebuild(src, &mut |g, node, ins| {
        let op = if fixed(node) { Op::ScatterSlots } else { node.op.clone() };
        g.add_node(&node.name, op, ins)
    })?;
    Ok(Some(g))
}

/// One step of a pipeline.
#[derive(Clone)]
pub enum Pass {
    Verify,
    /// Expand the high-level ops `select` picks (a backend's "decompose what I can't lower").
    Decompose {
        name: &'static str,
        select: std::sync::Arc<dyn Fn(&Op) -> bool + Send + Sync>,
    },
    /// Fold attention sliding windows into the masks (`decompose::fold_sliding_windows`).
    FoldSlidingWindows,
    /// Put each key head's group of query heads along its query axis
    /// (`decompose::fold_query_groups`), except in the attention nodes `keep` picks.
    FoldQueryGroups {
        keep: std::sync::Arc<KeepAttention>,
    },
    /// Set each `Moe`'s `few_tokens` from its shapes (`decompose::choose_moe_strategies`).
    ChooseMoeStrategies,
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
            Pass::FoldQueryGroups { .. } => "fold-query-groups".into(),
            Pass::ChooseMoeStrategies => "choose-moe-strategies".into(),
            Pass::Patches { stage, format } => {
                format!("patches:{stage:?}:{}", format.map_or("any", |f| f.as_str())).to_lowercase()
            }
        }
    }
}

/// Picks the attention nodes of a graph whose query heads stay as they are.
pub type KeepAttention = dyn Fn(&Graph, &crate::graph::Node) -> bool + Send + Sync;

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
                Pass::Decompose { select, .. } => g = decompose(&g, &**select).map_err(wrap)?,
                Pass::FoldSlidingWindows => g = fold_sliding_windows(&g).map_err(wrap)?,
                Pass::FoldQueryGroups { keep } => g = fold_query_groups(&g, &**keep).map_err(wrap)?,
                Pass::ChooseMoeStrategies => g = choose_moe_strategies(&g).map_err(wrap)?,
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
