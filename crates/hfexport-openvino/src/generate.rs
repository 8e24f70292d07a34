//! OpenVINO's side of core's generation loop (cargo feature `runtime`): the runtime calls of
//! [`GenerationLoop`] over an OpenVINO generation export.
//!
//! Stateful exports (`stateful=true`, export.json lists the component's `states`): one
//! `decode` model whose caches live in the infer request as variables; a new request starts
//! from zeros, so each prompt gets one, and nothing is passed between calls but the tokens,
//! the mask, the positions and `beam_idx` = `[0]`. Stateless exports keep the ONNX-style
//! `past_key_values.<name>`/`present.<name>` pairs: each call's outputs are fed back as the next call's
//! inputs (a static cache starts as zeros sized from the model's inputs, one dynamic axis set
//! to the cache length; a growing one starts empty).

use crate::runtime::OvRunner;
use crate::{OvError, Result};
use hfexport_core::cache_ports;
use hfexport_core::generation::{self, Call, GenerationExport, GenerationLoop};
use hfexport_core::plan::Role;
use hfexport_core::{DType, ExportFormat, Tensor};
use openvino::InferRequest;
use std::collections::BTreeMap;

fn err(msg: impl Into<String>) -> OvError {
    OvError::Runtime(msg.into())
}

/// Greedy generation in OpenVINO.
pub type OvGenerator = GenerationLoop<OvSession>;

/// The compiled models of a generation export and the cache between calls — see the module
/// docs.
pub struct OvSession {
    decode: OvRunner,
    prefill: Option<OvRunner>,
    stateful: bool,
    request: Option<InferRequest>,
    /// Stateless: the latest `present.<name>` per cache name.
    caches: BTreeMap<String, Tensor>,
    /// Inputs fed to every call (an encoder-decoder's cross-attention keys and values).
    fixed: BTreeMap<String, Tensor>,
}

impl OvSession {
    fn load(export: &GenerationExport) -> Result<OvSession> {
        let comp = export.decode();
        let decode = OvRunner::load_component(&export.dir, comp)?;
        let prefill = export.prefill().map(|c| OvRunner::load_component(&export.dir, c)).transpose()?;
        if !decode.inputs().iter().any(|p| p.name == "input_ids") {
            return Err(err(format!("{}: the model has no input `input_ids`", decode.path().display())));
        }
        Ok(OvSession {
            decode,
            prefill,
            stateful: !comp.states.is_empty(),
            request: None,
            caches: BTreeMap::new(),
            fixed: BTreeMap::new(),
        })
    }

    /// One call; the last row of the logits.
    fn call(&mut self, call: &Call) -> Result<Vec<f32>> {
        let mut feeds = call.inputs()?;
        if self.stateful {
            feeds.insert(crate::lower::BEAM_IDX.into(), Tensor::int(DType::I32, vec![1], vec![0])?);
        }
        let runner = match (&self.prefill, call.role) {
            (Some(p), Role::Prefill) => p,
            _ => &self.decode,
        };
        feeds.retain(|k, _| runner.inputs().iter().any(|p| &p.name == k));
        for spec in runner.inputs() {
            let Some(n) = cache_ports::cache_of_past(&spec.name) else { continue };
            let t = match self.caches.get(n) {
                Some(t) => t.clone(),
                None => {
                    let dims: Vec<_> = spec.dims.iter().map(|&d| usize::try_from(d).ok()).collect();
                    let shape: Vec<usize> = match call.slots {
                        Some(len) => dims.iter().map(|d| d.unwrap_or(len)).collect(),
                        None => generation::empty_past(&dims),
                    };
                    Tensor::float(DType::F32, shape.clone(), vec![0.0; shape.iter().product()])?.cast(spec.dtype)
                }
            };
            feeds.insert(spec.name.clone(), t);
        }
        let logits = if self.stateful {
            let req = self.request.as_mut().expect("a stateful call follows a reset, which creates the request");
            runner.set_inputs(req, &[&feeds, &self.fixed])?;
            runner.infer(req)?;
            runner.output(req, "logits")?
        } else {
            let mut req = runner.request()?;
            runner.set_inputs(&mut req, &[&feeds, &self.fixed])?;
            runner.infer(&mut req)?;
            let out = runner.outputs_of(&req)?;
            for (k, v) in &out {
                if let Some(n) = cache_ports::cache_of_present(k) {
                    self.caches.insert(n.to_string(), v.clone());
                }
            }
            out.get("logits").cloned().ok_or_else(|| err(format!("{}: no output `logits`", runner.path().display())))?
        };
        let vocab = *logits.shape().last().unwrap_or(&0);
        let all = logits.cast(DType::F32);
        let v = all.as_f32()?;
        Ok(v[v.len().saturating_sub(vocab)..].to_vec())
    }
}

impl generation::Session for OvSession {
    const FORMAT: ExportFormat = ExportFormat::Openvino;

    fn open(export: &GenerationExport) -> hfexport_core::Result<OvSession> {
        Ok(OvSession::load(export)?)
    }

    fn runtime(&self) -> String {
        crate::runtime::runtime_label()
    }

    fn kind(&self) -> &'static str {
        match self.stateful {
            true => "stateful",
            false => "",
        }
    }

    /// A stateless cache is dropped; a stateful one gets a new request (its variables start
    /// from zeros).
    fn reset(&mut self) -> hfexport_core::Result<()> {
        self.caches.clear();
        if self.stateful {
            self.request = Some(self.decode.request()?);
        }
        Ok(())
    }

    fn run(&mut self, call: &Call) -> hfexport_core::Result<Vec<f32>> {
        Ok(self.call(call)?)
    }

    fn set_fixed_inputs(&mut self, inputs: &BTreeMap<String, Tensor>) -> hfexport_core::Result<()> {
        for name in inputs.keys() {
            if !self.decode.inputs().iter().any(|p| &p.name == name) {
                return Err(err(format!("{}: the model has no input `{name}`", self.decode.path().display())).into());
            }
        }
        self.fixed = inputs.clone();
        Ok(())
    }
}
