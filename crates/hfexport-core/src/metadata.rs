//! `export.json`: what an export folder holds, so a runner (or a person) can use it without
//! the checkpoint: source, config, symbolic dims, per-component I/O, in-place aliases, patches
//! applied, runtime pins, and how the export was verified.

use crate::cache_ports;
use crate::dim::shape_to_string;
use crate::graph::{Alias, Graph};
use crate::plan::{CacheMode, ComponentSpec, Planned, Role};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub const SCHEMA_VERSION: u32 = 2;
pub const FILE_NAME: &str = "export.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportMetadata {
    pub schema_version: u32,
    pub hfexport_version: String,
    pub source: Source,
    pub format: String,
    pub task: String,
    /// Float dtype of weights and activations (`float32`, `float16`, `bfloat16`).
    pub dtype: String,
    /// The export config as `AutoExportConfig::from_dict` reads it.
    pub config: serde_json::Value,
    /// Symbolic dims and their ranges, e.g. `batch: 1..=4096`.
    pub symbols: BTreeMap<String, Range>,
    pub components: Vec<Component>,
    pub patches_applied: Vec<String>,
    /// Runtime checks emitted for user ranges kept with
    /// `prefer_deferred_runtime_asserts_over_guards`.
    pub runtime_checks: Vec<String>,
    /// Upstream runtime versions the export was built and checked for.
    pub runtime_pins: BTreeMap<String, String>,
    pub verification: Option<Verification>,
    /// Every file of the folder but this one, with its size and CRC-32 (`integrity.rs`).
    #[serde(default)]
    pub files: Vec<crate::integrity::FileRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub architecture: String,
    pub model_type: Option<String>,
    pub checkpoint: String,
    /// The hub repo and commit when the checkpoint is a snapshot of a Hugging Face cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<HubSource>,
}

/// A checkpoint's origin on the hub.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HubSource {
    pub repo: String,
    pub sha: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Range {
    pub min: i64,
    pub max: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Port {
    pub name: String,
    pub dtype: String,
    /// Dims as text: a number or a symbolic expression (`batch`, `seq + past`).
    pub shape: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Component {
    /// Name, role, entry, exit, positions and cache mode (the typed plan).
    #[serde(flatten)]
    pub spec: ComponentSpec,
    pub files: Vec<String>,
    /// This component's symbolic dims and their ranges.
    pub symbols: BTreeMap<String, Range>,
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
    /// Outputs that update an input in place.
    pub aliases: Vec<AliasPair>,
    /// Cache pairs folded into runtime state (OpenVINO `stateful=true`): one variable per former
    /// `past_key_values.<name>`/`present.<name>` pair, named `<name>`; those ports are then absent from
    /// `inputs`/`outputs`, and `beam_idx` (int32 `[batch]`) reorders the states.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AliasPair {
    pub output: String,
    pub input: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    pub runtime: String,
    pub reference: String,
    pub max_abs_diff: f32,
    pub atol: f32,
    pub inputs: Vec<String>,
    /// For a runtime that rounds the inputs of quantized linears to int8: the largest change
    /// that rounding makes to the reference's outputs on these samples. The runtime is compared
    /// with the reference rounding alike, within the usual tolerance plus this (or, where its
    /// kernels computed in float, with the exact reference within the usual tolerance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation_rounding: Option<f32>,
    /// A quantized export's reference logits against the float model's, on the same samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against_float: Option<QuantQuality>,
}

/// How far quantization moved the logits (reference evaluator, quantized vs float graph).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuantQuality {
    /// Fraction of non-padded positions whose argmax token is the float model's.
    pub top1_agreement: f32,
    /// `max |q - f| / max |f|` over the non-padded logits.
    pub max_rel_logit_error: f32,
    /// Positions compared.
    pub positions: usize,
}

fn ports(g: &Graph, ps: &[crate::graph::Port]) -> Vec<Port> {
    ps.iter()
        .map(|p| {
            let i = g.info(p.value);
            let shape = shape_to_string(&i.shape);
            let dims =
                shape.trim_matches(['[', ']']).split(", ").filter(|s| !s.is_empty()).map(str::to_string).collect();
            Port { name: p.name.clone(), dtype: i.dtype.name().to_string(), shape: dims }
        })
        .collect()
}

impl Component {
    /// I/O, aliases and symbols of a planned component, stored as the files `files`.
    pub fn from_planned(p: &Planned, files: Vec<String>) -> Component {
        let g = &p.graph;
        Component {
            spec: p.spec.clone(),
            files,
            symbols: symbols_of(g),
            inputs: ports(g, g.inputs()),
            outputs: ports(g, g.outputs()),
            aliases: g
                .aliases()
                .iter()
                .map(|Alias { output, input }| AliasPair { output: output.clone(), input: input.clone() })
                .collect(),
            states: vec![],
        }
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Slots of a static cache (`cache_len`'s maximum); `None` for any other cache mode.
    pub fn static_slots(&self) -> Option<usize> {
        match self.spec.cache {
            CacheMode::StaticInPlace => self.symbols.get("cache_len").map(|r| r.max.max(1) as usize),
            _ => None,
        }
    }

    /// The first file of the component whose name ends with `ext`.
    pub fn file(&self, ext: &str) -> crate::Result<&str> {
        self.files
            .iter()
            .map(String::as_str)
            .find(|f| f.ends_with(ext))
            .ok_or_else(|| crate::Error::Artifact(format!("component `{}` lists no {ext} file", self.spec.name)))
    }

    /// The component of a stateful export: every cache pair `past_key_values.<n>` /
    /// `present.<n>` (a static cache's in-place pair or a growing cache's past and present)
    /// becomes the state `<n>`, and those ports leave `inputs`/`outputs` (and the aliases go).
    pub fn fold_cache_pairs_into_states(mut self) -> Component {
        let states: Vec<String> = self
            .inputs
            .iter()
            .filter_map(|p| cache_ports::cache_of_past(&p.name))
            .filter(|n| self.outputs.iter().any(|o| o.name == cache_ports::present(n)))
            .map(str::to_string)
            .collect();
        if states.is_empty() {
            return self;
        }
        self.inputs.retain(|p| !states.iter().any(|n| p.name == cache_ports::past(n)));
        self.outputs.retain(|p| !states.iter().any(|n| p.name == cache_ports::present(n)));
        self.aliases.clear();
        self.states = states;
        self
    }

    /// A component with states gets `beam_idx` int32 `[batch]` as its last input (OpenVINO's
    /// stateful decode: the rows of the states each call keeps).
    pub fn with_beam_idx(mut self) -> Component {
        if self.states.is_empty() {
            return self;
        }
        let batch = self.inputs.first().and_then(|p| p.shape.first().cloned()).unwrap_or_else(|| "batch".into());
        self.inputs.push(Port { name: "beam_idx".into(), dtype: "i32".into(), shape: vec![batch] });
        self
    }
}

/// Symbol ranges of `g`.
pub fn symbols_of(g: &Graph) -> BTreeMap<String, Range> {
    g.symbols.iter().map(|(s, r)| (s.name().to_string(), Range { min: r.min, max: r.max })).collect()
}

impl ExportMetadata {
    pub fn write(&self, dir: &Path) -> crate::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(|e| crate::Error::Artifact(e.to_string()))?;
        let path = dir.join(FILE_NAME);
        std::fs::write(&path, text + "\n").map_err(|e| crate::Error::Artifact(format!("{}: {e}", path.display())))
    }

    pub fn read(dir: &Path) -> crate::Result<ExportMetadata> {
        let path = dir.join(FILE_NAME);
        let text = crate::limits::read_text(&path, crate::limits::EXPORT_JSON)
            .map_err(|e| crate::Error::Artifact(format!("{}: {e}", path.display())))?;
        let m: ExportMetadata =
            serde_json::from_str(&text).map_err(|e| crate::Error::Artifact(format!("{}: {e}", path.display())))?;
        if m.schema_version != SCHEMA_VERSION {
            return Err(crate::Error::Artifact(format!(
                "{}: schema_version {} is not {SCHEMA_VERSION}; re-export with this hfexport",
                path.display(),
                m.schema_version
            )));
        }
        Ok(m)
    }

    /// The first component of `role`, if any.
    pub fn by_role(&self, role: Role) -> Option<&Component> {
        self.components.iter().find(|c| c.spec.role == role)
    }

    pub fn component(&self, name: &str) -> crate::Result<&Component> {
        self.components.iter().find(|c| c.spec.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.components.iter().map(|c| c.spec.name.as_str()).collect();
            crate::Error::Artifact(format!("no component `{name}` in this export (components: {})", names.join(", ")))
        })
    }
}
