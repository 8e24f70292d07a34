//! libtorch's side of core's generation loop (cargo feature `tch`): the runtime calls of
//! [`GenerationLoop`] over the `decode` and `prefill` programs of a `.pt2` generation export's
//! `model.pt2`, loaded together so the weights they share are in memory once.
//!
//! A static cache is one libtorch tensor per `past_key_values.<name>`, zeros sized from export.json
//! (`cache_len` at its maximum), passed to every call: the program's `user_input_mutation`
//! outputs land in it in place (the `index_copy` runs as `index_copy_` into it, see
//! [`runner`](crate::runner)), so nothing is copied between calls. A growing cache takes each
//! call's `present.<name>` tensors as the next call's `past_key_values.<name>` (moved, not copied),
//! from an empty past.

use crate::runner::{kind_of_dtype, to_torch, Pt2Runner, RunError};
use hfexport_aten::lower::python_name;
use hfexport_core::cache_ports;
use hfexport_core::generation::{self, Call, GenerationExport, GenerationLoop};
use hfexport_core::metadata::Component;
use hfexport_core::plan::Role;
use hfexport_core::{DType, ExportFormat};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tch::{Device, Kind, Tensor};

fn err(path: &Path, msg: impl Into<String>) -> RunError {
    RunError::Input { path: path.to_path_buf(), msg: msg.into() }
}

/// One component: its program and how its inputs and outputs are named.
struct Part {
    runner: Pt2Runner,
    /// Non-aliased output names in return order (`logits`, `present.<name>`…).
    user_outputs: Vec<String>,
}

impl Part {
    /// The programs of `comps`, in order: each component is the program of its name in the
    /// `.pt2` it lists; programs of one archive are loaded together and share their weights.
    fn load_all(dir: &Path, comps: &[&Component]) -> Result<Vec<Part>, RunError> {
        let mut by_file: Vec<(&str, Vec<usize>)> = vec![];
        for (i, c) in comps.iter().enumerate() {
            let file = c
                .files
                .iter()
                .find(|f| f.ends_with(".pt2"))
                .ok_or_else(|| err(dir, format!("component `{}` lists no .pt2 file", c.name())))?;
            match by_file.iter_mut().find(|(f, _)| f == file) {
                Some((_, v)) => v.push(i),
                None => by_file.push((file, vec![i])),
            }
        }
        let mut parts: Vec<Option<Part>> = comps.iter().map(|_| None).collect();
        for (file, idx) in by_file {
            let names: Vec<&str> = idx.iter().map(|&i| comps[i].name()).collect();
            let runners = Pt2Runner::load_programs(dir.join(file), &names)?;
            for (i, runner) in idx.into_iter().zip(runners) {
                parts[i] = Some(Part::new(runner, comps[i])?);
            }
        }
        Ok(parts.into_iter().map(|p| p.expect("every component is in one file")).collect())
    }

    fn new(runner: Pt2Runner, c: &Component) -> Result<Part, RunError> {
        let aliased: Vec<&str> = c.aliases.iter().map(|a| a.output.as_str()).collect();
        let user_outputs: Vec<String> =
            c.outputs.iter().map(|p| p.name.clone()).filter(|n| !aliased.contains(&n.as_str())).collect();
        if user_outputs.len() != runner.num_user_outputs() {
            return Err(err(
                runner.path(),
                format!(
                    "export.json names {} outputs for component `{}`, the program returns {}",
                    user_outputs.len(),
                    c.name(),
                    runner.num_user_outputs()
                ),
            ));
        }
        Ok(Part { runner, user_outputs })
    }
}

/// Greedy generation with libtorch.
pub type Pt2Generator = GenerationLoop<Pt2Session>;

/// The programs of a `.pt2` generation export and the cache between calls — see the module
/// docs.
pub struct Pt2Session {
    dir: PathBuf,
    decode: Part,
    prefill: Option<Part>,
    /// The cache tensors by value name (`past_key_values_0_key`).
    caches: BTreeMap<String, Tensor>,
    /// Static caches as allocated (their storage never changes).
    static_caches: BTreeMap<String, Tensor>,
    /// A growing cache's empty past (batch 1, no positions), which the prompt's call takes.
    empty_past: BTreeMap<String, Tensor>,
    /// Inputs fed to every call by value name (an encoder-decoder's cross-attention keys and
    /// values).
    fixed: BTreeMap<String, Tensor>,
}

impl Pt2Session {
    /// Loads the programs of the generation components, and allocates a static cache.
    fn load(export: &GenerationExport) -> Result<Pt2Session, RunError> {
        let (dir, comp) = (export.dir.as_path(), export.decode());
        let mut wanted = vec![comp];
        wanted.extend(export.prefill());
        let mut parts = Part::load_all(dir, &wanted)?.into_iter();
        let decode = parts.next().expect("decode was asked for");
        let prefill = parts.next();
        let (mut static_caches, mut empty_past) = (BTreeMap::new(), BTreeMap::new());
        for p in comp.inputs.iter().filter(|p| cache_ports::is_past(&p.name)) {
            let dims: Vec<Option<usize>> = p.shape.iter().map(|d| d.parse().ok()).collect();
            let shape = match export.slots() {
                Some(slots) => p
                    .shape
                    .iter()
                    .zip(&dims)
                    .map(|(name, d)| d.or((name == "cache_len").then_some(slots)))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        err(
                            dir,
                            format!(
                                "export.json: cache `{}` has shape {:?}; expected constants and cache_len",
                                p.name, p.shape
                            ),
                        )
                    })?,
                None => generation::empty_past(&dims),
            };
            let shape: Vec<i64> = shape.into_iter().map(|d| d as i64).collect();
            let kind = DType::from_user_name(&p.dtype)
                .map(kind_of_dtype)
                .ok_or_else(|| err(dir, format!("export.json: cache `{}` has dtype {}", p.name, p.dtype)))?;
            let t = Tensor::f_zeros(&shape, (kind, Device::Cpu)).map_err(|e| err(dir, e.to_string()))?;
            match export.slots() {
                Some(_) => static_caches.insert(python_name(&p.name), t),
                None => empty_past.insert(python_name(&p.name), t),
            };
        }
        Ok(Pt2Session {
            dir: dir.to_path_buf(),
            decode,
            prefill,
            caches: BTreeMap::new(),
            static_caches,
            empty_past,
            fixed: BTreeMap::new(),
        })
    }

    /// The static cache tensor of a cache input (`past_key_values.0.key`): the storage
    /// every call writes into.
    pub fn static_cache(&self, input: &str) -> Option<&Tensor> {
        self.static_caches.get(&python_name(input))
    }

    fn bind_fixed(&mut self, inputs: &BTreeMap<String, hfexport_core::Tensor>) -> Result<(), RunError> {
        self.fixed.clear();
        for (name, t) in inputs {
            let key = python_name(name);
            if !self.decode.runner.inputs().iter().any(|i| i.name == key) {
                return Err(err(self.decode.runner.path(), format!("the program has no input `{name}`")));
            }
            let value = to_torch(t).map_err(|e| err(&self.dir, format!("input `{name}`: {e}")))?;
            self.fixed.insert(key, value);
        }
        Ok(())
    }

    /// One call of `prefill` (for the prompt, when present) or `decode`; the last row of the
    /// logits.
    fn call(&mut self, call: &Call) -> Result<Vec<f32>, RunError> {
        let t = |e: tch::TchError| err(&self.dir, e.to_string());
        let part = match (&self.prefill, call.role) {
            (Some(p), Role::Prefill) => p,
            _ => &self.decode,
        };
        let inputs = call.inputs().map_err(|e| err(&self.dir, e.to_string()))?;
        let per_call = inputs
            .iter()
            .map(|(name, v)| Ok((name.as_str(), to_torch(v).map_err(t)?)))
            .collect::<Result<BTreeMap<_, _>, RunError>>()?;
        let mut args = vec![];
        for info in part.runner.inputs() {
            let name = info.name.as_str();
            let given = per_call
                .get(name)
                .or_else(|| self.static_caches.get(name))
                .or_else(|| self.caches.get(name))
                .or_else(|| self.empty_past.get(name));
            match given.or(self.fixed.get(name)) {
                Some(c) => args.push(c.shallow_clone()),
                None => return Err(err(part.runner.path(), format!("nothing to feed input `{name}`"))),
            }
        }
        let outs = part.runner.call(&mut args)?;
        let mut logits = None;
        for (name, out) in part.user_outputs.iter().zip(outs) {
            if name == "logits" {
                logits = Some(out);
            } else if let Some(cache) = cache_ports::cache_of_present(name) {
                self.caches.insert(python_name(&cache_ports::past(cache)), out);
            }
        }
        let logits = logits.ok_or_else(|| err(part.runner.path(), "the program returns no `logits`"))?;
        let last = logits.f_select(1, -1).and_then(|x| x.f_to_dtype(Kind::Float, false, true)).map_err(t)?;
        let last = last.f_flatten(0, -1).map_err(t)?;
        Vec::<f32>::try_from(&last).map_err(t)
    }
}

impl generation::Session for Pt2Session {
    const FORMAT: ExportFormat = ExportFormat::Dynamo;

    fn open(export: &GenerationExport) -> hfexport_core::Result<Pt2Session> {
        Ok(Pt2Session::load(export)?)
    }

    fn runtime(&self) -> String {
        crate::runner::runtime_label()
    }

    /// A growing cache is dropped; a static one is zeroed in place (its storage stays).
    fn reset(&mut self) -> hfexport_core::Result<()> {
        self.caches.clear();
        for c in self.static_caches.values_mut() {
            let _alias = c.f_zero_().map_err(|e| err(&self.dir, e.to_string()))?;
        }
        Ok(())
    }

    fn run(&mut self, call: &Call) -> hfexport_core::Result<Vec<f32>> {
        Ok(self.call(call)?)
    }

    fn set_fixed_inputs(&mut self, inputs: &BTreeMap<String, hfexport_core::Tensor>) -> hfexport_core::Result<()> {
        Ok(self.bind_fixed(inputs)?)
    }
}
