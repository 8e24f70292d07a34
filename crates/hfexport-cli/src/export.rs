//! `hfexport export`: the export config from `--config` and flags, then the facade's one
//! pipeline.

use crate::ExportArgs;
use anyhow::{bail, Context, Result};
use hfexport::core::limits;
use hfexport::core::metadata::ExportMetadata;
use hfexport::{ExportProgress, ProgressLines, Task};
use indicatif::{HumanBytes, ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::Path;
use std::time::Instant;

/// Export progress on a terminal's stderr: a bar over the weights as they stream (count,
/// elapsed, time left, bytes written and their rate, the current tensor), then one per
/// component `--verify` runs, with notes printed above them.
#[derive(Default)]
struct Bar {
    bar: Option<ProgressBar>,
}

impl ExportProgress for Bar {
    fn note(&mut self, msg: &str) {
        match &self.bar {
            Some(bar) => bar.println(msg),
            None => eprintln!("{msg}"),
        }
    }

    fn weight(&mut self, done: usize, total: usize, name: &str, written: u64) {
        let bar = self.bar.get_or_insert_with(|| {
            let style =
                ProgressStyle::with_template("weights {bar:30} {pos}/{len} [{elapsed_precise}, {eta} left] {wide_msg}")
                    .expect("a valid template");
            ProgressBar::new(total as u64).with_style(style)
        });
        bar.set_position(done as u64);
        let rate = written as f64 / bar.elapsed().as_secs_f64().max(1e-3);
        bar.set_message(format!("{} written, {}/s  {name}", HumanBytes(written), HumanBytes(rate as u64)));
    }

    fn verify_case(&mut self, name: &str, done: usize, total: usize) {
        if done == total {
            if let Some(bar) = self.bar.take() {
                bar.finish_and_clear();
            }
            return;
        }
        let bar = self.bar.get_or_insert_with(|| {
            let style =
                ProgressStyle::with_template("verify {prefix} {bar:30} {pos}/{len} sample inputs [{elapsed_precise}]")
                    .expect("a valid template");
            ProgressBar::new(total as u64).with_style(style).with_prefix(format!("`{name}`"))
        });
        bar.set_position(done as u64);
    }

    fn weights_written(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
            eprintln!("weights: {} streamed in {:.2} s", bar.length().unwrap_or(0), bar.elapsed().as_secs_f64());
        }
    }
}

/// The JSON of an option that takes a file or the JSON inline: the file's when `arg` names one.
fn json_arg(option: &str, arg: &str) -> Result<serde_json::Value> {
    let path = Path::new(arg);
    if path.is_file() {
        let text = limits::read_text(path, limits::CONFIG_JSON).with_context(|| format!("cannot read {arg}"))?;
        return serde_json::from_str(&text).with_context(|| format!("{option} {arg} is not valid JSON"));
    }
    serde_json::from_str(arg).with_context(|| format!("{option} `{arg}` is neither a JSON file nor valid inline JSON"))
}

/// The export config: `--config` (a file or inline JSON), then flags on top.
fn export_config(a: &ExportArgs) -> Result<hfexport::ExportConfig> {
    let mut dict = match &a.config {
        Some(c) => json_arg("--config", c)?,
        None => serde_json::json!({}),
    };
    let obj = dict.as_object_mut().context("--config must hold a JSON object")?;
    if let Some(f) = &a.format {
        obj.insert("export_format".into(), f.clone().into());
    }
    if a.dynamic {
        obj.insert("dynamic".into(), true.into());
    }
    if let Some(ds) = &a.dynamic_shapes {
        obj.insert("dynamic_shapes".into(), json_arg("--dynamic-shapes", ds)?);
    }
    if let Some(q) = &a.quantize {
        match obj.get_mut("quantizer") {
            Some(serde_json::Value::Object(recipe)) => {
                recipe.insert("weights".into(), q.clone().into());
            }
            _ => {
                obj.insert("quantizer".into(), q.clone().into());
            }
        }
    }
    if let Some(form) = &a.latent_attention {
        obj.insert("latent_attention".into(), form.clone().into());
    }
    if let Some(hw) = a.image_size {
        obj.insert("image_size".into(), serde_json::json!(hw));
    }
    if a.genai {
        if obj.get("export_format").and_then(|f| f.as_str()) != Some("onnx") {
            bail!("--genai writes ONNX Runtime GenAI folders: it needs --format onnx");
        }
        obj.insert("genai".into(), true.into());
        // GenAI feeds prompts and steps of any length: the shapes are symbolic
        obj.insert("dynamic".into(), true.into());
    }
    if !obj.contains_key("export_format") {
        bail!("give --format or an `export_format` in --config (valid: dynamo, onnx, executorch, openvino)");
    }
    Ok(hfexport::AutoExportConfig::from_dict(&dict)?)
}

/// The export `a` asks for, reporting to `observer`: its metadata (what export.json holds).
pub(crate) fn run_export(a: &ExportArgs, observer: &mut dyn ExportProgress) -> Result<ExportMetadata> {
    let config = export_config(a)?;
    let dtype = hfexport::DType::from_user_name(&a.dtype)
        .with_context(|| format!("--dtype `{}` is not valid; valid: float32, float16, bfloat16", a.dtype))?;
    let task = a.task.as_deref().map(Task::parse).transpose().map_err(anyhow::Error::msg)?;
    let exporter = hfexport::AutoHfExporter::from_config(config)?.with_verify(a.verify);
    let generation = (a.for_generation || a.genai || a.static_cache.is_some() || a.multi_token_decode)
        .then_some(hfexport::Generation { static_cache: a.static_cache, multi_token_decode: a.multi_token_decode });
    let req = hfexport::ExportRequest {
        model: a.model.clone(),
        output: a.output.clone(),
        task,
        dtype,
        force: a.force,
        generation,
    };
    Ok(exporter.export_with(&req, observer)?)
}

/// `hfexport export`: the export, then what it wrote (and how it verified) on stdout.
pub(crate) fn export(a: &ExportArgs) -> Result<()> {
    let t0 = Instant::now();
    // a bar on a terminal, plain lines otherwise (a log, CI), nothing with --quiet
    let meta = match (a.quiet, std::io::stderr().is_terminal()) {
        (true, _) => run_export(a, &mut ProgressLines(&mut |_| {}))?,
        (false, true) => run_export(a, &mut Bar::default())?,
        (false, false) => run_export(a, &mut ProgressLines(&mut |msg| eprintln!("{msg}")))?,
    };
    let mut files: Vec<&str> = vec![];
    for f in meta.components.iter().flat_map(|c| c.files.iter().map(String::as_str)) {
        if !files.contains(&f) {
            files.push(f);
        }
    }
    println!(
        "exported {} to {} ({}) in {:.2} s",
        meta.source.architecture,
        a.output.display(),
        files.join(", "),
        t0.elapsed().as_secs_f64()
    );
    if let Some(v) = &meta.verification {
        println!(
            "verified in {}: max |diff| {:e} (atol {:e}) on {}",
            v.runtime,
            v.max_abs_diff,
            v.atol,
            v.inputs.join("; ")
        );
    }
    Ok(())
}
