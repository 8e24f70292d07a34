//! `hfexport run`: a checkpoint's forward graph in the reference evaluator, or a component of an
//! export folder in its format's runtime.

use crate::{forward_graphs, open_checkpoint, task_of};
use anyhow::{bail, Context, Result};
use hfexport::core::metadata::ExportMetadata;
use hfexport::models::safetensors::{read_all, write_safetensors};
use hfexport::{AutoExportConfig, Evaluator, ExportFormat, Task, Tensor};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

pub(crate) fn run(
    path: &Path,
    inputs: &Path,
    outputs: &Path,
    component: &str,
    runtime: &str,
    task: Option<&str>,
) -> Result<()> {
    if runtime != "reference" {
        bail!("runtime `{runtime}` is not available in this build; valid: reference");
    }
    let ckpt = open_checkpoint(path)?;
    let task = task_of(&ckpt, task)?;
    let mut graphs = forward_graphs(&ckpt, task)?;
    let Some(at) = graphs.iter().position(|(name, _)| name == component) else {
        let names: Vec<String> = graphs.iter().map(|(n, _)| format!("`{n}`")).collect();
        bail!("the checkpoint's components for `{}` are {}; got `{component}`", task.name(), names.join(", "));
    };
    let (_, g) = graphs.swap_remove(at);
    let feed = read_all(inputs).with_context(|| format!("cannot read inputs {}", inputs.display()))?;
    let t0 = Instant::now();
    eprintln!("loading {} weights ({:.1} M parameters)…", g.weights().len(), g.parameter_count() as f64 / 1e6);
    let ev = Evaluator::new(&g, &ckpt)?;
    let t1 = Instant::now();
    let out = ev.run(&feed).with_context(|| format!("running {} on {}", path.display(), inputs.display()))?;
    let t2 = Instant::now();
    let refs: Vec<(&str, &Tensor)> = out.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let meta =
        BTreeMap::from([("producer".to_string(), format!("hfexport {} (reference)", env!("CARGO_PKG_VERSION")))]);
    write_safetensors(outputs, &refs, &meta).with_context(|| format!("cannot write outputs {}", outputs.display()))?;
    for (name, t) in &out {
        println!("{name}: {}{:?}", t.dtype(), t.shape());
    }
    report_argmax(task, &out)?;
    eprintln!(
        "weights {:.2} s, forward {:.2} s; wrote {}",
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        outputs.display()
    );
    Ok(())
}

/// The argmax a task's logits answer with: a causal LM's next tokens, a classifier's labels, a
/// zero-shot model's best text for each image.
fn report_argmax(task: Task, out: &BTreeMap<String, Tensor>) -> Result<()> {
    if let Some(per_image) = out.get("logits_per_image") {
        if let &[images, texts] = per_image.shape() {
            let rows: Vec<usize> = (0..images).map(|i| i * texts).collect();
            let best = argmax_rows(&per_image.cast(hfexport::DType::F32), &rows, texts)?;
            println!("best text per image (argmax): {best:?}");
        }
        return Ok(());
    }
    let Some(logits) = out.get("logits") else { return Ok(()) };
    let logits = logits.cast(hfexport::DType::F32);
    match (task, logits.shape()) {
        (Task::CausalLm, &[b, s, v]) => {
            let rows: Vec<usize> = (0..b).map(|bi| (bi * s + s - 1) * v).collect();
            println!("next tokens (argmax at the last position): {:?}", argmax_rows(&logits, &rows, v)?);
        }
        (Task::SequenceClassification, &[b, labels]) => {
            let rows: Vec<usize> = (0..b).map(|bi| bi * labels).collect();
            println!("labels (argmax): {:?}", argmax_rows(&logits, &rows, labels)?);
        }
        _ => {}
    }
    Ok(())
}

/// The argmax of each `width`-wide row of `logits` starting at `starts`.
fn argmax_rows(logits: &Tensor, starts: &[usize], width: usize) -> Result<Vec<usize>> {
    let x = logits.as_f32()?;
    Ok(starts.iter().map(|&at| (0..width).max_by(|&i, &j| x[at + i].total_cmp(&x[at + j])).unwrap_or(0)).collect())
}

/// The runtime names `--runtime` accepts.
const RUNTIMES: [&str; 5] = ["reference", "onnxruntime", "openvino", "executorch", "libtorch"];

/// `run` on an export folder: the component in its format's runtime (the backend's runner).
pub(crate) fn run_export(
    dir: &Path,
    inputs: &Path,
    outputs: &Path,
    component: &str,
    runtime: Option<&str>,
) -> Result<()> {
    let meta = ExportMetadata::read(dir)?;
    hfexport::core::integrity::check_component_sizes(dir, &meta)?;
    let comp = meta.component(component)?;
    let format = ExportFormat::parse(&meta.format)?;
    let backend = hfexport::backend(format)?;
    let natural = backend.runtime_name();
    match runtime.unwrap_or(natural) {
        r if r == natural => {}
        "reference" => bail!(
            "{} is an export folder; the reference evaluator runs checkpoints: run `hfexport run {}` (the checkpoint \
             it was exported from) instead, or drop --runtime to use {natural}",
            dir.display(),
            meta.source.checkpoint,
        ),
        r if RUNTIMES.contains(&r) => {
            bail!("runtime `{r}` cannot run this {} export in this build; it runs in {natural}", meta.format)
        }
        other => bail!("runtime `{other}` is not valid; valid: {}", RUNTIMES.join(", ")),
    }
    let config = AutoExportConfig::from_dict(&meta.config)?;
    let feed = read_all(inputs).with_context(|| format!("cannot read inputs {}", inputs.display()))?;
    let t0 = Instant::now();
    let mut runner = backend.runtime()?.open_runner(dir, comp, &config)?;
    let version = runner.runtime();
    let t1 = Instant::now();
    let out = runner.run(&feed).with_context(|| format!("running on {}", inputs.display()))?;
    let t2 = Instant::now();
    let refs: Vec<(&str, &Tensor)> = out.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let producer =
        BTreeMap::from([("producer".to_string(), format!("hfexport {} ({version})", env!("CARGO_PKG_VERSION")))]);
    write_safetensors(outputs, &refs, &producer)
        .with_context(|| format!("cannot write outputs {}", outputs.display()))?;
    for (name, t) in &out {
        println!("{name}: {}{:?}", t.dtype(), t.shape());
    }
    report_argmax(Task::parse(&meta.task).map_err(anyhow::Error::msg)?, &out)?;
    eprintln!(
        "{version}: load {:.2} s, run {:.2} s; wrote {}",
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        outputs.display()
    );
    Ok(())
}
