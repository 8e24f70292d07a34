//! `hfexport run`: a checkpoint's forward graph in the reference evaluator, or a component of an
//! export folder in its format's runtime.

use crate::{forward_graphs, open_checkpoint, task_of};
use anyhow::{bail, Context, Result};
use hfexport::core::metadata::ExportMetadata;
use hfexport::models::safetensors::{read_all, write_safetensors};
use hfexport::{AutoExportConfig, Evaluator, ExportFormat, Task, Tensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What `run` feeds the graph.
pub(crate) enum Feed {
    /// `--inputs`: tensors by input name.
    Inputs(PathBuf),
    /// `--audio`: a WAV as a raw-audio encoder's `input_values`.
    Audio(PathBuf),
}

impl Feed {
    /// The inputs by name; the WAV through the feature extractor of `dir` (the checkpoint or
    /// export folder), with an all-ones `attention_mask` where the graph takes one (`takes`
    /// names its inputs).
    fn read(&self, dir: &Path, takes: &dyn Fn(&str) -> bool) -> Result<BTreeMap<String, Tensor>> {
        match self {
            Feed::Inputs(path) => read_all(path).with_context(|| format!("cannot read inputs {}", path.display())),
            Feed::Audio(wav) => {
                let fe = hfexport::audio::RawAudio::from_dir(dir)?;
                let samples = hfexport::audio::read_wav(wav, fe.sampling_rate)?;
                let mut feed = BTreeMap::from([("input_values".to_string(), fe.extract(&samples)?)]);
                if takes("attention_mask") {
                    let n = samples.len();
                    feed.insert("attention_mask".to_string(), Tensor::i64(vec![1, n], vec![1; n])?);
                }
                Ok(feed)
            }
        }
    }

    fn path(&self) -> &Path {
        match self {
            Feed::Inputs(p) | Feed::Audio(p) => p,
        }
    }
}

pub(crate) fn run(
    path: &Path,
    feed: &Feed,
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
    let inputs = feed.read(path, &|name| g.input(name).is_some())?;
    let t0 = Instant::now();
    eprintln!("loading {} weights ({:.1} M parameters)…", g.weights().len(), g.parameter_count() as f64 / 1e6);
    let ev = Evaluator::new(&g, &ckpt)?;
    let t1 = Instant::now();
    let out = ev.run(&inputs).with_context(|| format!("running {} on {}", path.display(), feed.path().display()))?;
    let t2 = Instant::now();
    let refs: Vec<(&str, &Tensor)> = out.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let meta =
        BTreeMap::from([("producer".to_string(), format!("hfexport {} (reference)", env!("CARGO_PKG_VERSION")))]);
    write_safetensors(outputs, &refs, &meta).with_context(|| format!("cannot write outputs {}", outputs.display()))?;
    for (name, t) in &out {
        println!("{name}: {}{:?}", t.dtype(), t.shape());
    }
    report_argmax(task, &out, path)?;
    eprintln!(
        "weights {:.2} s, forward {:.2} s; wrote {}",
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        outputs.display()
    );
    Ok(())
}

/// The argmax a task's logits answer with: a causal LM's next tokens, a classifier's labels, a
/// zero-shot model's best text for each image, a CTC model's transcript (ids, and text with the
/// tokenizer's `vocab.json` in `dir`).
fn report_argmax(task: Task, out: &BTreeMap<String, Tensor>, dir: &Path) -> Result<()> {
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
        (Task::SpeechRecognition, &[_, _, _]) => {
            let vocab = hfexport::ctc::CtcVocab::from_dir(dir)?;
            for (row, ids) in hfexport::ctc::greedy_ids(&logits, ctc_blank(dir)?)?.iter().enumerate() {
                println!("transcript ids, row {row} (CTC greedy): {ids:?}");
                if let Some(v) = &vocab {
                    println!("transcript, row {row}: {:?}", v.text(ids));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The CTC blank: the config's `pad_token_id` (0 where it has none, as `Wav2Vec2Config`).
fn ctc_blank(dir: &Path) -> Result<i64> {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{}", path.display()))?;
    Ok(v.get("pad_token_id").and_then(serde_json::Value::as_i64).unwrap_or(0))
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
    feed: &Feed,
    outputs: &Path,
    component: &str,
    runtime: Option<&str>,
) -> Result<()> {
    let ran = run_component(dir, feed, component, runtime)?;
    let refs: Vec<(&str, &Tensor)> = ran.outputs.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let producer =
        BTreeMap::from([("producer".to_string(), format!("hfexport {} ({})", env!("CARGO_PKG_VERSION"), ran.runtime))]);
    write_safetensors(outputs, &refs, &producer)
        .with_context(|| format!("cannot write outputs {}", outputs.display()))?;
    for (name, t) in &ran.outputs {
        println!("{name}: {}{:?}", t.dtype(), t.shape());
    }
    report_argmax(ran.task, &ran.outputs, dir)?;
    eprintln!("{}; wrote {}", ran.timings, outputs.display());
    Ok(())
}

/// `generate --audio` on a raw-audio CTC export (one forward graph, nothing to generate): the
/// transcript of the WAV, as `run --audio` prints it.
pub(crate) fn transcribe(dir: &Path, wav: &Path, component: &str) -> Result<()> {
    let ran = run_component(dir, &Feed::Audio(wav.to_path_buf()), component, None)?;
    if ran.task != Task::SpeechRecognition {
        bail!("{}: --audio transcribes a CTC export; this one is exported for `{}`", dir.display(), ran.task.name());
    }
    report_argmax(ran.task, &ran.outputs, dir)?;
    eprintln!("{}", ran.timings);
    Ok(())
}

/// What a component of an export folder gave.
struct Ran {
    task: Task,
    outputs: BTreeMap<String, Tensor>,
    /// The runtime's name and version.
    runtime: String,
    /// `<runtime>: load … s, run … s`.
    timings: String,
}

/// A component of an export folder on `feed`, in its format's runtime (`runtime`, when given,
/// must be that one).
fn run_component(dir: &Path, feed: &Feed, component: &str, runtime: Option<&str>) -> Result<Ran> {
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
    let inputs = feed.read(dir, &|name| comp.inputs.iter().any(|p| p.name == name))?;
    let t0 = Instant::now();
    let mut runner = backend.runtime()?.open_runner(dir, comp, &config)?;
    let version = runner.runtime();
    let t1 = Instant::now();
    let outputs = runner.run(&inputs).with_context(|| format!("running on {}", feed.path().display()))?;
    let t2 = Instant::now();
    Ok(Ran {
        task: Task::parse(&meta.task).map_err(anyhow::Error::msg)?,
        outputs,
        timings: format!("{version}: load {:.2} s, run {:.2} s", (t1 - t0).as_secs_f64(), (t2 - t1).as_secs_f64()),
        runtime: version.to_string(),
    })
}
