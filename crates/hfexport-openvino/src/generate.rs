//! Greedy generation over an OpenVINO generation export (cargo feature `runtime`).
//!
//! Stateful exports (`stateful=true`, export.json lists the component's `states`): one
//! `decode` model whose caches live in the infer request as variables; a new request starts
//! from zeros, so each prompt gets one, and nothing is passed between calls but the tokens,
//! the mask, the positions and `beam_idx` = [0]. Stateless exports keep the ONNX-style
//! `input.<name>`/`output.<name>` pairs: each call's outputs are fed back as the next call's
//! inputs (a static cache starts as zeros sized from the model's inputs, one dynamic axis set
//! to the cache length; a growing one comes from `prefill`). The prompt goes through one call
//! (of `prefill` when stateless and present), or token by token when the graph fixes the
//! query length at 1; the loop itself is core's [`greedy`].

use crate::runtime::OvRunner;
use crate::{OvError, Result};
use hfexport_core::generation::{greedy, prompt_calls, static_mask, Steps, StopReason};
use hfexport_core::metadata::ExportMetadata;
use hfexport_core::plan::Role;
use hfexport_core::{DType, Tensor};
use openvino::InferRequest;
use std::collections::BTreeMap;
use std::path::Path;

fn err(msg: impl Into<String>) -> OvError {
    OvError::Runtime(msg.into())
}

/// A greedy generation loop over an OpenVINO export folder — see the module docs.
pub struct OvGenerator {
    decode: OvRunner,
    prefill: Option<OvRunner>,
    stateful: bool,
    /// Static cache slots (`cache_len`'s maximum), `None` for a growing cache.
    slots: Option<usize>,
    /// Whether `decode` takes one token per call.
    one_token: bool,
    request: Option<InferRequest>,
    /// Stateless: the latest `output.<name>` per cache name.
    caches: BTreeMap<String, Tensor>,
    /// Inputs fed to every call (an encoder-decoder's cross-attention keys and values).
    fixed: BTreeMap<String, Tensor>,
    pos: usize,
    last_stop: Option<StopReason>,
}

impl OvGenerator {
    /// Loads the generation components of an OpenVINO export folder; errors name the folder
    /// and what is missing.
    pub fn load(dir: impl AsRef<Path>) -> Result<OvGenerator> {
        let dir = dir.as_ref();
        let meta = ExportMetadata::read(dir)?;
        if meta.format != "openvino" {
            return Err(err(format!(
                "{}: this is a {} export; generation in OpenVINO needs an OpenVINO export (--format openvino)",
                dir.display(),
                meta.format
            )));
        }
        let names: Vec<&str> = meta.components.iter().map(|c| c.name()).collect();
        let Some(comp) = meta.by_role(Role::Decode) else {
            return Err(err(format!(
                "{}: this export has no `decode` component (components: {}); generation needs an export made with \
                 --for-generation",
                dir.display(),
                names.join(", ")
            )));
        };
        let stateful = !comp.states.is_empty();
        let decode = OvRunner::load_component(dir, comp)?;
        let prefill = match meta.by_role(Role::Prefill) {
            Some(c) if !stateful => Some(OvRunner::load_component(dir, c)?),
            _ => None,
        };
        let slots = comp.static_slots();
        let ids = decode
            .inputs()
            .iter()
            .find(|p| p.name == "input_ids")
            .ok_or_else(|| err(format!("{}: the model has no input `input_ids`", decode.path().display())))?;
        let one_token = ids.dims.get(1) == Some(&1);
        if !stateful && slots.is_none() && prefill.is_none() {
            return Err(err(format!(
                "{}: a stateless growing-cache export needs its `prefill` component (components: {})",
                dir.display(),
                names.join(", ")
            )));
        }
        Ok(OvGenerator {
            decode,
            prefill,
            stateful,
            slots,
            one_token,
            request: None,
            caches: BTreeMap::new(),
            fixed: BTreeMap::new(),
            pos: 0,
            last_stop: None,
        })
    }

    pub fn model_path(&self) -> &Path {
        self.decode.path()
    }

    pub fn is_stateful(&self) -> bool {
        self.stateful
    }

    pub fn cache_slots(&self) -> Option<usize> {
        self.slots
    }

    pub fn last_stop(&self) -> Option<StopReason> {
        self.last_stop
    }

    /// Feeds `inputs` unchanged to every later call (an encoder-decoder's cross-attention keys
    /// and values, from its `encoder` component).
    pub fn set_fixed_inputs(&mut self, inputs: &BTreeMap<String, Tensor>) -> Result<()> {
        for name in inputs.keys() {
            if !self.decode.inputs().iter().any(|p| &p.name == name) {
                return Err(err(format!("{}: the model has no input `{name}`", self.decode.path().display())));
            }
        }
        self.fixed = inputs.clone();
        Ok(())
    }

    /// Greedy decoding (see [`greedy`]).
    pub fn generate(&mut self, prompt: &[i64], max_new_tokens: usize, eos: &[i64]) -> Result<Vec<i64>> {
        self.last_stop = None;
        let (tokens, stop) = greedy(self, prompt, max_new_tokens, eos)?;
        self.last_stop = Some(stop);
        Ok(tokens)
    }

    /// The inputs of a call on `tokens` at positions `pos..`.
    fn feeds(&self, tokens: &[i64]) -> Result<BTreeMap<String, Tensor>> {
        let (q, pos) = (tokens.len(), self.pos);
        let mask = match self.slots {
            Some(slots) => {
                if pos + q > slots {
                    return Err(err(format!(
                        "position {} is beyond the static cache of {slots} slots ({}); re-export with a larger \
                         --static-cache",
                        pos + q - 1,
                        self.decode.path().display()
                    )));
                }
                Tensor::bool(vec![1, 1, q, slots], static_mask(q, pos, slots))?
            }
            None => Tensor::i64(vec![1, pos + q], vec![1; pos + q])?,
        };
        let mut f = BTreeMap::from([
            ("input_ids".to_string(), Tensor::i64(vec![1, q], tokens.to_vec())?),
            ("attention_mask".to_string(), mask),
            ("position_ids".to_string(), Tensor::i64(vec![1, q], (pos..pos + q).map(|p| p as i64).collect())?),
        ]);
        if self.stateful {
            f.insert("beam_idx".into(), Tensor::int(DType::I32, vec![1], vec![0])?);
        }
        Ok(f)
    }

    /// One call on `tokens`; the last row of the logits.
    fn call(&mut self, tokens: &[i64], use_prefill: bool) -> Result<Vec<f32>> {
        let mut feeds = self.feeds(tokens)?;
        let runner = match (&self.prefill, use_prefill) {
            (Some(p), true) => p,
            _ => &self.decode,
        };
        feeds.retain(|k, _| runner.inputs().iter().any(|p| &p.name == k));
        for spec in runner.inputs() {
            let Some(n) = spec.name.strip_prefix("input.") else { continue };
            let t = match self.caches.get(n) {
                Some(t) => t.clone(),
                None => {
                    let len = self.slots.unwrap_or(0);
                    let shape = spec.dims.iter().map(|&d| if d < 0 { len } else { d as usize }).collect::<Vec<_>>();
                    Tensor::float(DType::F32, shape.clone(), vec![0.0; shape.iter().product()])?.cast(spec.dtype)
                }
            };
            feeds.insert(spec.name.clone(), t);
        }
        let logits = if self.stateful {
            let req = self.request.as_mut().expect("a stateful call follows prefill, which creates the request");
            runner.set_inputs(req, &[&feeds, &self.fixed])?;
            runner.infer(req)?;
            runner.output(req, "logits")?
        } else {
            let mut req = runner.request()?;
            runner.set_inputs(&mut req, &[&feeds, &self.fixed])?;
            runner.infer(&mut req)?;
            let out = runner.outputs_of(&req)?;
            for (k, v) in &out {
                if let Some(n) = k.strip_prefix("output.") {
                    self.caches.insert(n.to_string(), v.clone());
                }
            }
            out.get("logits").cloned().ok_or_else(|| err(format!("{}: no output `logits`", runner.path().display())))?
        };
        self.pos += tokens.len();
        let vocab = *logits.shape().last().unwrap_or(&0);
        let all = logits.cast(DType::F32);
        let v = all.as_f32()?;
        Ok(v[v.len().saturating_sub(vocab)..].to_vec())
    }
}

impl Steps for OvGenerator {
    type Error = OvError;

    fn prefill(&mut self, prompt: &[i64]) -> Result<Vec<f32>> {
        if let Some(slots) = self.slots.filter(|&s| prompt.len() > s) {
            return Err(err(format!(
                "prompt of {} tokens does not fit a static cache of {slots} slots ({}); re-export with a larger \
                 --static-cache",
                prompt.len(),
                self.decode.path().display()
            )));
        }
        self.pos = 0;
        self.caches.clear();
        if self.stateful {
            self.request = Some(self.decode.request()?);
        }
        let use_prefill = self.prefill.is_some();
        let mut logits = vec![];
        for c in prompt_calls(prompt, self.one_token && !use_prefill) {
            logits = self.call(c, use_prefill)?;
        }
        Ok(logits)
    }

    fn step(&mut self, token: i64) -> Result<Vec<f32>> {
        self.call(&[token], false)
    }

    fn position(&self) -> usize {
        self.pos
    }

    fn capacity(&self) -> Option<usize> {
        self.slots
    }

    fn error(msg: String) -> OvError {
        err(msg)
    }
}
