//! Verification in the artifact's runtime (`hfexport export --verify`, [`crate::verify_export`]).
//!
//! Each component runs in its real runtime (the backend's [`Runner`]) and the graph it was
//! written from runs in the reference evaluator, on sample inputs fitted to the component's
//! spec; every output the runtime returns must agree within the runner's tolerance at
//! non-padded positions. Nothing here names a format.

use crate::samples::{cases_for, SampleCase, SAMPLE_PAST};
use crate::{Error, ExportProgress, Result};
use hfexport_core::backend::Runner;
use hfexport_core::metadata::{Component, QuantQuality, Verification};
use hfexport_core::plan::Planned;
use hfexport_core::{DType, Evaluator, Tensor, TensorSource};
use hfexport_quant::LogitComparison;
use std::collections::BTreeMap;

/// Verifies one written component in `runner` against `planned` in the reference evaluator.
pub fn verify_component(
    runner: &mut dyn Runner,
    planned: &Planned,
    src: &dyn TensorSource,
    vocab: usize,
    dtype: DType,
    progress: &mut dyn ExportProgress,
) -> Result<Verification> {
    let runtime = runner.runtime();
    let past = if runner.stateful() { 0 } else { SAMPLE_PAST };
    let cases = cases_for(planned, vocab, past)?;
    let quantized = planned.graph.nodes().iter().any(|n| matches!(n.op, hfexport_core::Op::QuantLinear { .. }));
    let rounding = runner.activation_rounding().filter(|_| quantized);
    progress.note(&format!(
        "verifying `{}` in {runtime} against the reference evaluator ({} sample inputs)",
        planned.spec.name,
        cases.len()
    ));
    let ev = Evaluator::new(&planned.graph, src)?;
    let (mut exact, mut alike, mut moved) = (None, None, None);
    for (i, case) in cases.iter().enumerate() {
        progress.verify_case(&planned.spec.name, i, cases.len());
        if progress.cancelled() {
            return Err(Error::Cancelled);
        }
        let got = runner.run(&case.inputs)?;
        let mut want = ev.run(&case.inputs)?;
        want.retain(|name, _| runner.compares(name));
        compare_outputs(&runtime, case, &got, &want, &mut exact)?;
        if let Some(r) = rounding {
            let mut rounded = ev.run_with(&case.inputs, Some(r))?;
            rounded.retain(|name, _| want.contains_key(name));
            compare_outputs(&runtime, case, &got, &rounded, &mut alike)?;
            compare_outputs(&runtime, case, &rounded, &want, &mut moved)?;
        }
    }
    let base = runner.atol(dtype);
    let moved = rounding.map(|_| moved.as_ref().map_or(0.0, |w| w.4));
    // A runtime that rounds activations is compared with the reference rounding them alike,
    // unless its kernels computed in float after all (then the exact reference within `base`).
    // The two rarely agree exactly: where a value lands within float rounding of a rounding
    // boundary, one side rounds it up and the other down, and every later token carries the
    // step. On the fixtures 53 of 60 quantized verifications matched within 1.5e-5, the others
    // by 6-37% of how far rounding moves the reference, which is the tolerance added.
    let (worst, atol) = match moved {
        Some(m) if exact.as_ref().is_some_and(|w| w.4 > base) => {
            let alike = alike.map(|mut w| {
                w.0 = format!("{} (the reference with the runtime's int8 activations)", w.0);
                w
            });
            (alike, base + m)
        }
        _ => (exact, base),
    };
    let max_abs_diff = worst.as_ref().map_or(0.0, |w| w.4);
    if let Some((tensor, index, got, expected, diff)) = worst.filter(|w| w.4 > atol) {
        return Err(Error::VerificationMismatch { runtime, tensor, index, got, expected, diff, atol });
    }
    progress.verify_case(&planned.spec.name, cases.len(), cases.len());
    let rounded = moved.map_or(String::new(), |m| format!("; int8 activations move the reference by {m:e}"));
    progress.note(&format!("verified: max |diff| {max_abs_diff:e} (atol {atol:e}{rounded})"));
    Ok(Verification {
        runtime,
        reference: format!("hfexport {} reference evaluator", env!("CARGO_PKG_VERSION")),
        max_abs_diff,
        atol,
        inputs: cases.into_iter().map(|c| c.name).collect(),
        activation_rounding: moved,
        against_float: None,
    })
}

/// The quantized component's logits against the float one's, both in the reference
/// evaluator on the component's sample inputs, measured by `hfexport_quant`'s quality report
/// ([`LogitComparison`]: top-1 agreement and the largest error relative to the largest float
/// logit, over non-padded positions).
pub fn compare_with_float(
    quant: &Planned,
    float: &Planned,
    src: &dyn TensorSource,
    vocab: usize,
) -> Result<QuantQuality> {
    let (eq, ef) = (Evaluator::new(&quant.graph, src)?, Evaluator::new(&float.graph, src)?);
    let mut report = LogitComparison::default();
    for case in cases_for(quant, vocab, SAMPLE_PAST)? {
        let (q, f) = (eq.run(&case.inputs)?, ef.run(&case.inputs)?);
        let (Some(q), Some(f)) = (q.get("logits"), f.get("logits")) else { continue };
        let (q, f) = (q.cast(DType::F32), f.cast(DType::F32));
        let v = *f.shape().last().unwrap_or(&1);
        let mask = case.inputs.get("attention_mask").filter(|m| m.numel() * v == f.numel()).map(|m| m.cast(DType::F32));
        let mask = mask.as_ref().map(|m| m.as_f32()).transpose()?;
        report.add(q.as_f32()?, f.as_f32()?, v, mask);
    }
    Ok(report.finish())
}

/// Merges per-component results: the worst difference of all, each sample named after its
/// component when there are several.
pub fn merge(results: Vec<(&Component, Verification)>) -> Result<Verification> {
    let several = results.len() > 1;
    let mut merged: Option<Verification> = None;
    for (c, mut v) in results {
        if several {
            v.inputs = v.inputs.iter().map(|i| format!("{}: {i}", c.name())).collect();
        }
        merged = Some(match merged {
            None => v,
            Some(mut m) => {
                m.max_abs_diff = m.max_abs_diff.max(v.max_abs_diff);
                m.atol = m.atol.max(v.atol);
                m.inputs.extend(v.inputs);
                m
            }
        });
    }
    merged.ok_or_else(|| Error::Unsupported("nothing to verify: the export has no components".into()))
}

/// The worst difference seen so far: (tensor, index, runtime value, reference value, |diff|).
#[cfg_attr(
    not(any(feature = "onnx-runtime", feature = "openvino-runtime", feature = "dynamo-runtime")),
    allow(dead_code)
)]
type Worst = (String, Vec<usize>, f32, f32, f32);

/// Compares every reference output with the runtime's at the positions the mask keeps (an
/// output whose leading dims are the mask's `[batch, seq]`; any other output everywhere).
#[cfg_attr(
    not(any(feature = "onnx-runtime", feature = "openvino-runtime", feature = "dynamo-runtime")),
    allow(dead_code)
)]
pub(crate) fn compare_outputs(
    runtime: &str,
    case: &SampleCase,
    got: &BTreeMap<String, Tensor>,
    want: &BTreeMap<String, Tensor>,
    worst: &mut Option<Worst>,
) -> Result<()> {
    let failed = |msg: String| Error::VerificationFailed { runtime: runtime.to_string(), msg };
    let mask = case.inputs.get("attention_mask").map(|m| m.cast(DType::F32));
    for (name, w) in want {
        let g = got.get(name).ok_or_else(|| failed(format!("output `{name}` is missing (case {})", case.name)))?;
        if g.shape() != w.shape() {
            return Err(failed(format!(
                "output `{name}` has shape {:?}, the reference evaluator {:?} (case {})",
                g.shape(),
                w.shape(),
                case.name
            )));
        }
        let (gf, wf) = (g.cast(DType::F32), w.cast(DType::F32));
        let (gv, wv) = (gf.as_f32()?, wf.as_f32()?);
        let keep: Option<(&[f32], usize)> = match &mask {
            Some(m) if w.shape().len() >= 2 && w.shape()[..2] == *m.shape() => {
                Some((m.as_f32()?, w.numel() / m.numel().max(1)))
            }
            _ => None,
        };
        for (i, (&a, &b)) in gv.iter().zip(wv).enumerate() {
            if let Some((m, inner)) = keep {
                if m[i / inner.max(1)] == 0.0 {
                    continue;
                }
            }
            let d = if a == b { 0.0 } else { (a - b).abs() };
            let d = if d.is_nan() { f32::INFINITY } else { d };
            if worst.as_ref().is_none_or(|w| d > w.4) {
                let mut index = vec![0; w.shape().len()];
                let mut r = i;
                for (k, &n) in w.shape().iter().enumerate().rev() {
                    index[k] = r % n.max(1);
                    r /= n.max(1);
                }
                *worst = Some((format!("{name} (case {})", case.name), index, a, b, d));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::sample_cases;
    use crate::{build, AutoExportConfig, AutoHfExporter, BuildOptions, Checkpoint, Task};
    use hfexport_core::Graph;
    use std::path::Path;

    fn fixture_graph(dynamic: bool) -> Graph {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/llama");
        let ckpt = Checkpoint::open(&dir).unwrap();
        let mut g = build(&ckpt.config, &ckpt, Task::CausalLm, &BuildOptions::default()).unwrap();
        let cfg =
            AutoExportConfig::from_dict(&serde_json::json!({"export_format": "onnx", "dynamic": dynamic})).unwrap();
        hfexport_core::dynamic::apply(&mut g, cfg.common(), &crate::sample_sizes()).unwrap();
        g
    }

    #[test]
    fn sample_cases_fit_static_and_dynamic_graphs() {
        let shapes = |g: &Graph| -> Vec<(Vec<usize>, i64)> {
            sample_cases(g, 256)
                .unwrap()
                .iter()
                .map(|c| {
                    let m = &c.inputs["attention_mask"];
                    (m.shape().to_vec(), m.as_i64().unwrap().iter().filter(|&&x| x == 0).count() as i64)
                })
                .collect()
        };
        assert_eq!(shapes(&fixture_graph(true)), [(vec![2, 7], 3), (vec![1, 5], 0)]);
        assert_eq!(shapes(&fixture_graph(false)), [(vec![1, 16], 3), (vec![1, 16], 0)]);
        let case = &sample_cases(&fixture_graph(true), 256).unwrap()[0];
        assert!(case.inputs["input_ids"].as_i64().unwrap().iter().all(|&t| (0..256).contains(&t)));
    }

    #[test]
    fn comparison_skips_padding_and_names_the_worst_element() {
        let mask = Tensor::i64(vec![1, 2], vec![0, 1]).unwrap();
        let case = SampleCase { name: "c".into(), inputs: BTreeMap::from([("attention_mask".to_string(), mask)]) };
        let want = BTreeMap::from([("logits".to_string(), Tensor::f32(vec![1, 2, 2], vec![0.0; 4]).unwrap())]);
        // position 0 is padding: its huge difference does not count
        let got =
            BTreeMap::from([("logits".to_string(), Tensor::f32(vec![1, 2, 2], vec![9.0, 9.0, 0.5, -2.0]).unwrap())]);
        let mut worst = None;
        compare_outputs("rt", &case, &got, &want, &mut worst).unwrap();
        let (tensor, index, g, e, d) = worst.unwrap();
        assert_eq!((tensor.as_str(), index, g, e, d), ("logits (case c)", vec![0, 1, 1], -2.0, 0.0, 2.0));
        // NaN is the worst possible difference; a shape mismatch is an error
        let got = BTreeMap::from([(
            "logits".to_string(),
            Tensor::f32(vec![1, 2, 2], vec![0.0, 0.0, f32::NAN, 0.0]).unwrap(),
        )]);
        let mut worst = None;
        compare_outputs("rt", &case, &got, &want, &mut worst).unwrap();
        assert_eq!(worst.unwrap().4, f32::INFINITY);
        let got = BTreeMap::from([("logits".to_string(), Tensor::f32(vec![1, 4], vec![0.0; 4]).unwrap())]);
        let e = compare_outputs("rt", &case, &got, &want, &mut None).unwrap_err().to_string();
        assert!(e.contains("logits") && e.contains("[1, 4]"), "{e}");
    }

    #[test]
    fn verify_without_the_runtime_feature_says_which_feature() {
        let cfg = AutoExportConfig::from_dict(&serde_json::json!({"export_format": "onnx"})).unwrap();
        let r = AutoHfExporter::from_config(cfg).unwrap().with_verify(true).check_verify_available();
        if cfg!(feature = "onnx-runtime") {
            r.unwrap();
        } else {
            assert!(r.unwrap_err().to_string().contains("`onnx-runtime`"));
        }
    }
}
