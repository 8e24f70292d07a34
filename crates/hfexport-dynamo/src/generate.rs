//! Greedy generation over a `.pt2` generation export with libtorch (cargo feature `tch`): the
//! `decode` and `prefill` programs of its `model.pt2`, loaded together so the weights they
//! share are in memory once.
//!
//! A static cache is one libtorch tensor per `input.<name>`, zeros sized from export.json
//! (`cache_len` at its maximum), passed to every call: the program's `user_input_mutation`
//! outputs land in it in place (the `index_copy` runs as `index_copy_` into it, see
//! [`runner`](crate::runner)), so nothing is copied between calls. A growing cache takes each
//! call's `output.<name>` tensors as the next call's `input.<name>` (moved, not copied), the
//! first ones from `prefill`. The prompt goes through `prefill` when the export has one, else
//! through `decode` (token by token when it takes one token per call); the loop is core's
//! [`greedy`].

use crate::runner::{kind_of_dtype, to_torch, Pt2Runner, RunError};
use hfexport_aten::lower::python_name;
use hfexport_core::generation::{greedy, prompt_calls, static_mask, Steps, StopReason};
use hfexport_core::metadata::{Component, ExportMetadata};
use hfexport_core::plan::Role;
use hfexport_core::DType;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tch::{Device, Kind, Tensor};

fn err(path: &Path, msg: impl Into<String>) -> RunError {
    RunError::Input { path: path.to_path_buf(), msg: msg.into() }
}

/// One component: its program and how its inputs and outputs are named.
struct Part {
    runner: Pt2Runner,
    /// Non-aliased output names in return order (`logits`, `output.<name>`…).
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

/// A greedy generation loop over a `.pt2` export folder — see the module docs.
pub struct Pt2Generator {
    dir: PathBuf,
    decode: Part,
    prefill: Option<Part>,
    /// Static cache slots (`cache_len`'s maximum), `None` for a growing cache.
    slots: Option<usize>,
    /// Whether `decode` takes one token per call.
    one_token: bool,
    /// The cache tensors by value name (`input_cache_layers_0_keys`).
    caches: BTreeMap<String, Tensor>,
    /// Static caches as allocated (their storage never changes).
    static_caches: BTreeMap<String, Tensor>,
    /// Inputs fed to every call by value name (an encoder-decoder's cross-attention keys and
    /// values).
    fixed: BTreeMap<String, Tensor>,
    pos: usize,
    last_stop: Option<StopReason>,
}

impl Pt2Generator {
    /// Loads the generation components of a `.pt2` export folder; errors name the folder and
    /// what is missing.
    pub fn load(dir: impl AsRef<Path>) -> Result<Pt2Generator, RunError> {
        let dir = dir.as_ref();
        let meta = ExportMetadata::read(dir).map_err(|e| err(dir, e.to_string()))?;
        if meta.format != "dynamo" {
            return Err(err(
                dir,
                format!(
                    "this is a {} export; generation with libtorch needs a .pt2 export (--format dynamo)",
                    meta.format
                ),
            ));
        }
        let names: Vec<&str> = meta.components.iter().map(|c| c.name()).collect();
        let comp = meta.by_role(Role::Decode).ok_or_else(|| {
            err(
                dir,
                format!(
                    "this export has no `decode` component (components: {}); generation needs an export made with \
                     --for-generation",
                    names.join(", ")
                ),
            )
        })?;
        let mut wanted = vec![comp];
        wanted.extend(meta.by_role(Role::Prefill));
        let mut parts = Part::load_all(dir, &wanted)?.into_iter();
        let decode = parts.next().expect("decode was asked for");
        let prefill = parts.next();
        let slots = comp.static_slots();
        let one_token =
            comp.inputs.iter().any(|p| p.name == "input_ids" && p.shape.get(1).map(String::as_str) == Some("1"));
        if slots.is_none() && prefill.is_none() {
            return Err(err(
                dir,
                format!("a growing-cache export needs its `prefill` component (components: {})", names.join(", ")),
            ));
        }
        let mut static_caches = BTreeMap::new();
        if let Some(slots) = slots {
            for p in comp.inputs.iter().filter(|p| p.name.starts_with("input.")) {
                let shape = p
                    .shape
                    .iter()
                    .map(|d| if d == "cache_len" { Ok(slots as i64) } else { d.parse::<i64>() })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| {
                        err(
                            dir,
                            format!(
                                "export.json: cache `{}` has shape {:?}; expected constants and cache_len",
                                p.name, p.shape
                            ),
                        )
                    })?;
                let kind = DType::from_user_name(&p.dtype)
                    .map(kind_of_dtype)
                    .ok_or_else(|| err(dir, format!("export.json: cache `{}` has dtype {}", p.name, p.dtype)))?;
                let t = Tensor::f_zeros(&shape, (kind, Device::Cpu)).map_err(|e| err(dir, e.to_string()))?;
                static_caches.insert(python_name(&p.name), t);
            }
        }
        Ok(Pt2Generator {
            dir: dir.to_path_buf(),
            decode,
            prefill,
            slots,
            one_token,
            caches: BTreeMap::new(),
            static_caches,
            fixed: BTreeMap::new(),
            pos: 0,
            last_stop: None,
        })
    }

    pub fn cache_slots(&self) -> Option<usize> {
        self.slots
    }

    pub fn last_stop(&self) -> Option<StopReason> {
        self.last_stop
    }

    /// The static cache tensor of a cache input (`input.cache.layers.0.keys`): the storage
    /// every call writes into.
    pub fn static_cache(&self, input: &str) -> Option<&Tensor> {
        self.static_caches.get(&python_name(input))
    }

    /// Feeds `inputs` unchanged to every later call (an encoder-decoder's cross-attention keys
    /// and values, from its `encoder` component).
    pub fn set_fixed_inputs(&mut self, inputs: &BTreeMap<String, hfexport_core::Tensor>) -> Result<(), RunError> {
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

    /// Greedy decoding (see [`greedy`]).
    pub fn generate(&mut self, prompt: &[i64], max_new_tokens: usize, eos: &[i64]) -> Result<Vec<i64>, RunError> {
        self.last_stop = None;
        let (tokens, stop) = greedy(self, prompt, max_new_tokens, eos)?;
        self.last_stop = Some(stop);
        Ok(tokens)
    }

    /// One call on `tokens` at the current position; the last row of the logits.
    fn call(&mut self, tokens: &[i64], use_prefill: bool) -> Result<Vec<f32>, RunError> {
        let (q, pos) = (tokens.len(), self.pos);
        let t = |e: tch::TchError| err(&self.dir, e.to_string());
        let part = match (&self.prefill, use_prefill) {
            (Some(p), true) => p,
            _ => &self.decode,
        };
        let mask = match self.slots {
            Some(slots) => {
                if pos + q > slots {
                    return Err(err(
                        &self.dir,
                        format!("position {} is beyond the static cache of {slots} slots; re-export with a larger --static-cache", pos + q - 1),
                    ));
                }
                let m: Vec<u8> = static_mask(q, pos, slots).into_iter().map(u8::from).collect();
                Tensor::f_from_data_size(&m, &[1, 1, q as i64, slots as i64], Kind::Bool).map_err(t)?
            }
            None => Tensor::f_ones([1, (pos + q) as i64], (Kind::Int64, Device::Cpu)).map_err(t)?,
        };
        let ids = Tensor::f_from_slice(tokens).and_then(|x| x.f_reshape([1, q as i64])).map_err(t)?;
        let positions: Vec<i64> = (pos..pos + q).map(|p| p as i64).collect();
        let positions = Tensor::f_from_slice(&positions).and_then(|x| x.f_reshape([1, q as i64])).map_err(t)?;
        let mut args = vec![];
        for info in part.runner.inputs() {
            args.push(match info.name.as_str() {
                "input_ids" => ids.shallow_clone(),
                "attention_mask" => mask.shallow_clone(),
                "position_ids" => positions.shallow_clone(),
                other => {
                    match self.static_caches.get(other).or_else(|| self.caches.get(other)).or(self.fixed.get(other)) {
                        Some(c) => c.shallow_clone(),
                        None => return Err(err(part.runner.path(), format!("nothing to feed input `{other}`"))),
                    }
                }
            });
        }
        let outs = part.runner.call(&mut args)?;
        let mut logits = None;
        for (name, out) in part.user_outputs.iter().zip(outs) {
            if name == "logits" {
                logits = Some(out);
            } else if let Some(cache) = name.strip_prefix("output.") {
                self.caches.insert(python_name(&format!("input.{cache}")), out);
            }
        }
        let logits = logits.ok_or_else(|| err(part.runner.path(), "the program returns no `logits`"))?;
        self.pos += q;
        let last = logits.f_select(1, -1).and_then(|x| x.f_to_dtype(Kind::Float, false, true)).map_err(t)?;
        let last = last.f_flatten(0, -1).map_err(t)?;
        Vec::<f32>::try_from(&last).map_err(t)
    }
}

impl Steps for Pt2Generator {
    type Error = RunError;

    fn prefill(&mut self, prompt: &[i64]) -> Result<Vec<f32>, RunError> {
        if let Some(slots) = self.slots.filter(|&s| prompt.len() > s) {
            return Err(err(
                &self.dir,
                format!(
                    "prompt of {} tokens does not fit a static cache of {slots} slots; re-export with a larger \
                     --static-cache",
                    prompt.len()
                ),
            ));
        }
        self.pos = 0;
        self.caches.clear();
        for c in self.static_caches.values_mut() {
            let _alias = c.f_zero_().map_err(|e| err(&self.dir, e.to_string()))?;
        }
        let use_prefill = self.prefill.is_some();
        let mut logits = vec![];
        for c in prompt_calls(prompt, self.one_token && !use_prefill) {
            logits = self.call(c, use_prefill)?;
        }
        Ok(logits)
    }

    fn step(&mut self, token: i64) -> Result<Vec<f32>, RunError> {
        self.call(&[token], false)
    }

    fn position(&self) -> usize {
        self.pos
    }

    fn capacity(&self) -> Option<usize> {
        self.slots
    }

    fn error(msg: String) -> RunError {
        RunError::Input { path: PathBuf::from("(generation)"), msg }
    }
}
