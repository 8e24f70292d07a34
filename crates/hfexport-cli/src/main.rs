//! `hfexport`: the command line of DESIGN.md. Subcommands arrive with the capabilities behind
//! them; today `export` (ONNX, `--verify` in ONNX Runtime), `inspect`, `run` (reference evaluator on a
//! checkpoint folder, ONNX Runtime on an ONNX export folder) and `generate` (greedy generation over a
//! static-cache ONNX export, cache bound in place).

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use hfexport::core::dim::shape_to_string;
use hfexport::core::dump::{dump, op_histogram};
use hfexport::models::safetensors::{read_all, write_safetensors};
use hfexport::{build, BuildOptions, Checkpoint, Evaluator, Graph, Task, Tensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser)]
#[command(name = "hfexport", version, about = "Export Hugging Face checkpoints without Python")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Exports a checkpoint to a deployment format.
    Export(ExportArgs),
    /// Architecture, sizes, parameter count, stored dtypes and the graph of a checkpoint.
    Inspect {
        /// A checkpoint folder (config.json + *.safetensors).
        path: PathBuf,
        #[arg(long, default_value = "causal-lm")]
        task: String,
        /// Print the whole graph, one node per line.
        #[arg(long)]
        dump: bool,
    },
    /// Runs a graph on inputs from a safetensors file and writes its outputs to another.
    Run {
        /// A checkpoint folder (its forward graph in the reference evaluator) or an export
        /// folder (with export.json: the artifact in its runtime).
        path: PathBuf,
        /// Safetensors file keyed by input name (`input_ids`, `attention_mask`).
        #[arg(long)]
        inputs: PathBuf,
        /// Where to write the outputs (`logits`), as safetensors.
        #[arg(long)]
        outputs: PathBuf,
        /// The component to run (`model` for a single-graph export).
        #[arg(long, default_value = "model")]
        component: String,
        /// reference | onnxruntime | openvino | executorch | libtorch; default: `reference` for a
        /// checkpoint folder, the artifact's runtime for an export folder.
        #[arg(long)]
        runtime: Option<String>,
        #[arg(long, default_value = "causal-lm")]
        task: String,
    },
    /// Greedy generation with a static-cache export (`export --for-generation --static-cache N
    /// --multi-token-decode --dynamic`) in ONNX Runtime, the KV cache updated in place.
    Generate(GenerateArgs),
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["prompt_ids", "prompt"])))]
struct GenerateArgs {
    /// The export folder (export.json with a `decode` component).
    path: PathBuf,
    /// The prompt as token ids, separated by commas: `1,2,3`.
    #[arg(long)]
    prompt_ids: Option<String>,
    /// The prompt as text, encoded with the export folder's tokenizer.json.
    #[arg(long)]
    prompt: Option<String>,
    /// Stop after this many new tokens (or at an EOS token of generation_config.json).
    #[arg(long, default_value_t = 32)]
    max_new_tokens: usize,
}

#[derive(clap::Args)]
struct ExportArgs {
    /// The checkpoint folder (config.json + *.safetensors).
    #[arg(long)]
    model: PathBuf,
    /// dynamo | onnx | executorch | openvino (overrides `export_format` of --config).
    #[arg(long)]
    format: Option<String>,
    /// The export folder (refused if not empty, unless --force).
    #[arg(long)]
    output: PathBuf,
    #[arg(long, default_value = "causal-lm")]
    task: String,
    /// float32 | float16 | bfloat16
    #[arg(long, default_value = "float32")]
    dtype: String,
    /// Make batch and sequence symbolic with the model's bounds.
    #[arg(long)]
    dynamic: bool,
    /// Per input and axis `{name, min, max}` or "auto": inline JSON or a JSON file.
    #[arg(long)]
    dynamic_shapes: Option<String>,
    /// An export config JSON file (the dict of `AutoExportConfig`); flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Replace a non-empty output folder.
    #[arg(long)]
    force: bool,
    /// Export the components of a generation loop (`export_for_generation`).
    #[arg(long)]
    for_generation: bool,
    /// With --for-generation: a static KV cache of this many slots.
    #[arg(long)]
    static_cache: Option<usize>,
    /// With --static-cache: one `decode` component that takes any number of tokens per call.
    #[arg(long)]
    multi_token_decode: bool,
    /// Run the export in its runtime against the reference evaluator before the folder is
    /// committed; recorded in export.json, and a mismatch fails the export.
    #[arg(long)]
    verify: bool,
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    match Cli::parse().command {
        Command::Export(args) => export(&args),
        Command::Inspect { path, task, dump: full } => inspect(&path, &task, full),
        Command::Generate(args) => generate(&args),
        Command::Run { path, inputs, outputs, component, runtime, task } => {
            if path.join(hfexport::core::metadata::FILE_NAME).is_file() {
                run_export(&path, &inputs, &outputs, &component, runtime.as_deref())
            } else {
                run(&path, &inputs, &outputs, &component, runtime.as_deref().unwrap_or("reference"), &task)
            }
        }
    }
}

/// The export config: `--config` file, then flags on top.
fn export_config(a: &ExportArgs) -> Result<hfexport::ExportConfig> {
    let mut dict = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
            serde_json::from_str::<serde_json::Value>(&text)
                .with_context(|| format!("{} is not valid JSON", p.display()))?
        }
        None => serde_json::json!({}),
    };
    let obj = dict.as_object_mut().context("the --config file must hold a JSON object")?;
    if let Some(f) = &a.format {
        obj.insert("export_format".into(), f.clone().into());
    }
    if a.dynamic {
        obj.insert("dynamic".into(), true.into());
    }
    if let Some(ds) = &a.dynamic_shapes {
        let text = if Path::new(ds).is_file() { std::fs::read_to_string(ds)? } else { ds.clone() };
        let v: serde_json::Value =
            serde_json::from_str(&text).context("--dynamic-shapes is neither a JSON object nor a JSON file")?;
        obj.insert("dynamic_shapes".into(), v);
    }
    if !obj.contains_key("export_format") {
        bail!("give --format or an `export_format` in --config (valid: dynamo, onnx, executorch, openvino)");
    }
    Ok(hfexport::AutoExportConfig::from_dict(&dict)?)
}

fn export(a: &ExportArgs) -> Result<()> {
    let config = export_config(a)?;
    let dtype = hfexport::DType::from_user_name(&a.dtype)
        .with_context(|| format!("--dtype `{}` is not valid; valid: float32, float16, bfloat16", a.dtype))?;
    let task = Task::parse(&a.task).map_err(anyhow::Error::msg)?;
    let exporter = hfexport::AutoHfExporter::from_config(config)?.with_verify(a.verify);
    let generation = (a.for_generation || a.static_cache.is_some() || a.multi_token_decode)
        .then_some(hfexport::Generation { static_cache: a.static_cache, multi_token_decode: a.multi_token_decode });
    let req = hfexport::ExportRequest {
        model: a.model.clone(),
        output: a.output.clone(),
        task,
        dtype,
        force: a.force,
        generation,
    };
    let t0 = Instant::now();
    let meta = exporter.export(&req, &mut |msg| eprintln!("{msg}"))?;
    let files: Vec<&str> = meta.components.iter().flat_map(|c| c.files.iter().map(String::as_str)).collect();
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

fn open_checkpoint(path: &Path) -> Result<Checkpoint> {
    Checkpoint::open(path).with_context(|| format!("cannot open checkpoint {}", path.display()))
}

fn forward_graph(ckpt: &Checkpoint, task: &str) -> Result<Graph> {
    let task = Task::parse(task).map_err(anyhow::Error::msg)?;
    Ok(build(&ckpt.config, ckpt, task, &BuildOptions::default())?)
}

/// What `export.json` says about an export folder.
fn inspect_export(path: &Path) -> Result<()> {
    let m = hfexport::core::metadata::ExportMetadata::read(path)?;
    println!("export       {} ({} format, {}, task {})", path.display(), m.format, m.dtype, m.task);
    println!(
        "source       {} ({}) from {}",
        m.source.architecture,
        m.source.model_type.as_deref().unwrap_or("?"),
        m.source.checkpoint
    );
    for (s, r) in &m.symbols {
        println!("  symbol     {s} in {}..={}", r.min, r.max);
    }
    for c in &m.components {
        println!("component    {} ({})", c.name, c.files.join(", "));
        for p in c.inputs.iter().map(|p| ("input ", p)).chain(c.outputs.iter().map(|p| ("output", p))) {
            println!("  {}     {}: {}[{}]", p.0, p.1.name, p.1.dtype, p.1.shape.join(", "));
        }
        for a in &c.aliases {
            println!("  alias      {} updates {} in place", a.output, a.input);
        }
        if !c.states.is_empty() {
            let (first, n) = (&c.states[0], c.states.len());
            println!("  states     {n} cache variables kept by the runtime ({first}, …), reordered by beam_idx");
        }
    }
    let pins: Vec<String> = m.runtime_pins.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!("runtimes     {}", pins.join(", "));
    println!(
        "patches      {}",
        if m.patches_applied.is_empty() { "none".to_string() } else { m.patches_applied.join(", ") }
    );
    match &m.verification {
        Some(v) => println!(
            "verified     {} vs {}: max |diff| {:e} (atol {:e})",
            v.runtime, v.reference, v.max_abs_diff, v.atol
        ),
        None => println!("verified     no (export with --verify)"),
    }
    Ok(())
}

fn inspect(path: &Path, task: &str, full: bool) -> Result<()> {
    if path.join(hfexport::core::metadata::FILE_NAME).is_file() {
        return inspect_export(path);
    }
    let ckpt = open_checkpoint(path)?;
    let c = &ckpt.config;
    let g = forward_graph(&ckpt, task)?;
    println!("checkpoint   {}", path.display());
    println!("architecture {} ({})", c.architecture, c.model_type.as_deref().unwrap_or("?"));
    println!(
        "sizes        layers {}, hidden {}, intermediate {}, heads {} (kv {}), head_dim {}, vocab {}",
        c.num_hidden_layers,
        c.hidden_size,
        c.intermediate_size,
        c.num_attention_heads,
        c.num_key_value_heads,
        c.head_dim,
        c.vocab_size
    );
    println!(
        "rope         {} (theta {}), max positions {}",
        c.rope.rope_type(),
        c.rope.theta,
        c.max_position_embeddings
    );
    if let Some(w) = c.sliding_window {
        let n =
            c.layer_types.iter().filter(|t| matches!(t, hfexport::models::config::LayerType::SlidingAttention)).count();
        println!("sliding      window {w} on {n} of {} layers", c.num_hidden_layers);
    }
    println!("embeddings   {}", if c.tie_word_embeddings { "tied" } else { "untied" });
    println!("parameters   {} ({:.2} M)", g.parameter_count(), g.parameter_count() as f64 / 1e6);
    let mut dtypes: BTreeMap<String, usize> = BTreeMap::new();
    for name in ckpt.tensor_names() {
        if let Some(info) = ckpt.tensor_info(name) {
            *dtypes.entry(info.dtype.to_string()).or_default() += 1;
        }
    }
    let dt: Vec<String> = dtypes.iter().map(|(d, n)| format!("{d} x{n}")).collect();
    println!("stored       {} tensors: {}", ckpt.tensor_names().count(), dt.join(", "));
    println!("graph        {} nodes, {} weights", g.nodes().len(), g.weights().len());
    for (s, r) in g.symbols.iter() {
        println!("  symbol     {} in {}..={}", s.name(), r.min, r.max);
    }
    for p in g.inputs() {
        let i = g.info(p.value);
        println!("  input      {}: {}{}", p.name, i.dtype, shape_to_string(&i.shape));
    }
    for p in g.outputs() {
        let i = g.info(p.value);
        println!("  output     {}: {}{}", p.name, i.dtype, shape_to_string(&i.shape));
    }
    let ops: Vec<String> = op_histogram(&g).iter().map(|(o, n)| format!("{o} x{n}")).collect();
    println!("  ops        {}", ops.join(", "));
    if full {
        print!("{}", dump(&g));
    }
    Ok(())
}

fn run(path: &Path, inputs: &Path, outputs: &Path, component: &str, runtime: &str, task: &str) -> Result<()> {
    if runtime != "reference" {
        bail!("runtime `{runtime}` is not available in this build; valid: reference");
    }
    if component != "model" {
        bail!("a checkpoint folder has one component, `model`; got `{component}`");
    }
    let ckpt = open_checkpoint(path)?;
    let g = forward_graph(&ckpt, task)?;
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
    if let Some(l) = out.get("logits") {
        println!("next tokens (argmax at the last position): {:?}", last_argmax(l)?);
    }
    eprintln!(
        "weights {:.2} s, forward {:.2} s; wrote {}",
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        outputs.display()
    );
    Ok(())
}

/// Argmax over the vocabulary at the last position of each row of `[batch, seq, vocab]`.
fn last_argmax(logits: &Tensor) -> Result<Vec<usize>> {
    let [b, s, v] = *logits.shape() else { bail!("logits are not rank 3: {:?}", logits.shape()) };
    let x = logits.as_f32()?;
    Ok((0..b)
        .map(|bi| {
            let row = &x[(bi * s + s - 1) * v..(bi * s + s) * v];
            (0..v).max_by(|&i, &j| row[i].total_cmp(&row[j])).unwrap_or(0)
        })
        .collect())
}

// ---------------------------------------------------------------------------------------------
// `run` on an export folder: the artifact in its runtime (ONNX Runtime for ONNX exports).
// ---------------------------------------------------------------------------------------------

/// The runtime an export runs in by default.
fn natural_runtime(format: &str) -> &'static str {
    match format {
        "onnx" => "onnxruntime",
        "openvino" => "openvino",
        "executorch" => "executorch",
        "dynamo" => "libtorch",
        _ => "reference",
    }
}

fn run_export(dir: &Path, inputs: &Path, outputs: &Path, component: &str, runtime: Option<&str>) -> Result<()> {
    let meta = hfexport::core::metadata::ExportMetadata::read(dir)?;
    let comp = meta.component(component)?;
    let runtime = runtime.unwrap_or(natural_runtime(&meta.format));
    match runtime {
        "onnxruntime" if meta.format == "onnx" => {}
        "openvino" if meta.format == "openvino" => {}
        "reference" => bail!(
            "{} is an export folder; the reference evaluator runs checkpoints: run `hfexport run {}` (the checkpoint \
             it was exported from) instead, or drop --runtime to use {}",
            dir.display(),
            meta.source.checkpoint,
            natural_runtime(&meta.format)
        ),
        "libtorch" if meta.format == "dynamo" => {
            // the archive is checked (zip-slip, sizes, CRC of the program) before anything else
            for f in comp.files.iter().filter(|f| f.ends_with(".pt2")) {
                hfexport::dynamo::archive::Pt2Archive::open(dir.join(f))?;
            }
        }
        "executorch" if meta.format == "executorch" => {
            // the program is checked (identifier, header, segment bounds, flatbuffer) first
            for f in comp.files.iter().filter(|f| f.ends_with(".pte")) {
                hfexport::executorch::dump::PteFile::open(dir.join(f))?.program()?;
            }
        }
        "onnxruntime" | "openvino" | "executorch" | "libtorch" => bail!(
            "runtime `{runtime}` cannot run this {} export in this build; it runs in {}",
            meta.format,
            natural_runtime(&meta.format)
        ),
        other => bail!("runtime `{other}` is not valid; valid: reference, onnxruntime, openvino, executorch, libtorch"),
    }
    let ext = match runtime {
        "openvino" => ".xml",
        "libtorch" => ".pt2",
        "executorch" => ".pte",
        _ => ".onnx",
    };
    let file = comp
        .files
        .iter()
        .find(|f| f.ends_with(ext))
        .with_context(|| format!("{}: component `{component}` lists no {ext} file", dir.display()))?;
    let model = dir.join(file);
    let feed = read_all(inputs).with_context(|| format!("cannot read inputs {}", inputs.display()))?;
    let t0 = Instant::now();
    let (out, version, t1) = if runtime == "executorch" {
        run_executorch(&model, comp, &feed).with_context(|| format!("running on {}", inputs.display()))?
    } else if runtime == "libtorch" {
        run_libtorch(&model, comp, &feed).with_context(|| format!("running on {}", inputs.display()))?
    } else if runtime == "openvino" {
        let runner = hfexport::openvino::runtime::OvRunner::load(&model)?;
        let version =
            format!("openvino {}", hfexport::openvino::runtime::loaded_version().unwrap_or_else(|| "?".into()));
        let t1 = Instant::now();
        (runner.run(&feed).with_context(|| format!("running on {}", inputs.display()))?, version, t1)
    } else {
        let runner = hfexport::onnx::runtime::OnnxRunner::load(&model)?;
        let version =
            format!("onnxruntime {}", hfexport::onnx::runtime::loaded_version().unwrap_or_else(|| "?".into()));
        let t1 = Instant::now();
        (runner.run(&feed).with_context(|| format!("running on {}", inputs.display()))?, version, t1)
    };
    let t2 = Instant::now();
    let refs: Vec<(&str, &Tensor)> = out.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let meta =
        BTreeMap::from([("producer".to_string(), format!("hfexport {} ({version})", env!("CARGO_PKG_VERSION")))]);
    write_safetensors(outputs, &refs, &meta).with_context(|| format!("cannot write outputs {}", outputs.display()))?;
    for (name, t) in &out {
        println!("{name}: {}{:?}", t.dtype(), t.shape());
    }
    if let Some(l) = out.get("logits") {
        println!("next tokens (argmax at the last position): {:?}", last_argmax(&l.cast(hfexport::DType::F32))?);
    }
    eprintln!(
        "{version}: load {:.2} s, run {:.2} s; wrote {}",
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        outputs.display()
    );
    Ok(())
}

/// Runs a `.pt2` with libtorch; outputs named after export.json (a static cache's output is
/// its input updated in place).
#[cfg(feature = "tch")]
fn run_libtorch(
    model: &Path,
    comp: &hfexport::core::metadata::Component,
    feed: &BTreeMap<String, Tensor>,
) -> Result<(BTreeMap<String, Tensor>, String, Instant)> {
    use hfexport::dynamo::runner::{linked_version, Pt2Runner};
    let runner = Pt2Runner::load(model)?;
    let t1 = Instant::now();
    let outputs: Vec<String> = comp.outputs.iter().map(|p| p.name.clone()).collect();
    let aliases = comp.aliases.iter().map(|a| (a.output.clone(), a.input.clone())).collect();
    let out = runner.run(feed, &outputs, &aliases)?;
    Ok((out, format!("libtorch {}", linked_version()), t1))
}

#[cfg(not(feature = "tch"))]
fn run_libtorch(
    model: &Path,
    _: &hfexport::core::metadata::Component,
    _: &BTreeMap<String, Tensor>,
) -> Result<(BTreeMap<String, Tensor>, String, Instant)> {
    bail!(
        "{}: running a .pt2 needs the libtorch runner, which is not in this build: build hfexport-cli with \
         `--features tch` and LIBTORCH=<site-packages>/torch (the torch==2.13.0 wheel; `cargo xtask setup --group \
         test` installs it into .venv/), or run it in Python: \
         torch.export.load(\"{}\").module()(input_ids=..., attention_mask=...)",
        model.display(),
        model.display()
    )
}

/// Runs a `.pte` in the ExecuTorch runtime; outputs named after export.json.
#[cfg(feature = "executorch-runtime")]
fn run_executorch(
    model: &Path,
    comp: &hfexport::core::metadata::Component,
    feed: &BTreeMap<String, Tensor>,
) -> Result<(BTreeMap<String, Tensor>, String, Instant)> {
    use hfexport::executorch::runtime::{linked_version, output_names, EtRunner};
    let mut runner = EtRunner::load(model)?;
    let t1 = Instant::now();
    let inputs: Vec<String> = comp.inputs.iter().map(|p| p.name.clone()).collect();
    let outputs: Vec<String> = comp.outputs.iter().map(|p| p.name.clone()).collect();
    let aliased: Vec<String> = comp.aliases.iter().map(|a| a.output.clone()).collect();
    let out = runner.run_named(feed, &inputs, &output_names(&outputs, &aliased))?;
    Ok((out, format!("executorch {}", linked_version()), t1))
}

#[cfg(not(feature = "executorch-runtime"))]
fn run_executorch(
    model: &Path,
    _: &hfexport::core::metadata::Component,
    _: &BTreeMap<String, Tensor>,
) -> Result<(BTreeMap<String, Tensor>, String, Instant)> {
    bail!(
        "{}: running a .pte needs the ExecuTorch runner, which is not in this build: build hfexport-cli with \
         `--features executorch-runtime` (against the executorch==1.5.1 wheel that `cargo xtask setup` installs into \
         .venv/), or run it in Python: executorch.runtime.Runtime.get().load_program(\"{}\").load_method(\"forward\")",
        model.display(),
        model.display()
    )
}

/// What one generation run gives `hfexport generate` to print.
struct Generated {
    tokens: Vec<i64>,
    stop: hfexport::core::generation::StopReason,
    runtime: String,
    /// `stateful, ` / `zero-copy, ` or empty.
    kind: &'static str,
    slots: Option<usize>,
    /// When loading ended.
    loaded: Instant,
    prefill: std::time::Duration,
    step_ms: Option<f64>,
}

/// Core's greedy loop over a runtime's generator, timed.
fn timed_greedy<S: hfexport::core::generation::Steps>(
    gen: &mut S,
    prompt: &[i64],
    max_new_tokens: usize,
    eos: &[i64],
    runtime: String,
    kind: &'static str,
) -> Result<Generated>
where
    S::Error: std::error::Error + Send + Sync + 'static,
{
    let loaded = Instant::now();
    let slots = gen.capacity();
    let mut timed = hfexport::core::generation::Timed::new(gen);
    let (tokens, stop) = hfexport::core::generation::greedy(&mut timed, prompt, max_new_tokens, eos)?;
    Ok(Generated { tokens, stop, runtime, kind, slots, loaded, prefill: timed.prefill, step_ms: timed.step_ms() })
}

/// Greedy generation over a `.pte` export with the ExecuTorch runner.
#[cfg(feature = "executorch-runtime")]
fn generate_executorch(dir: &Path, prompt: &[i64], max_new_tokens: usize, eos: &[i64]) -> Result<Generated> {
    use hfexport::executorch::runtime::linked_version;
    let mut gen = hfexport::executorch::generate::EtGenerator::load(dir)?;
    let kind = if gen.zero_copy() { "zero-copy, " } else { "" };
    timed_greedy(&mut gen, prompt, max_new_tokens, eos, format!("executorch {}", linked_version()), kind)
}

#[cfg(not(feature = "executorch-runtime"))]
fn generate_executorch(dir: &Path, _: &[i64], _: usize, _: &[i64]) -> Result<Generated> {
    bail!(
        "{}: generation over a .pte needs the ExecuTorch runner, which is not in this build: build hfexport-cli \
         with `--features executorch-runtime`",
        dir.display()
    )
}

/// Greedy generation over a `.pt2` export with libtorch (static caches updated in place).
#[cfg(feature = "tch")]
fn generate_libtorch(dir: &Path, prompt: &[i64], max_new_tokens: usize, eos: &[i64]) -> Result<Generated> {
    use hfexport::dynamo::runner::linked_version;
    let mut gen = hfexport::dynamo::generate::Pt2Generator::load(dir)?;
    timed_greedy(&mut gen, prompt, max_new_tokens, eos, format!("libtorch {}", linked_version()), "")
}

#[cfg(not(feature = "tch"))]
fn generate_libtorch(dir: &Path, _: &[i64], _: usize, _: &[i64]) -> Result<Generated> {
    bail!(
        "{}: generation over a .pt2 needs the libtorch runner, which is not in this build: build hfexport-cli with \
         `--features tch` and LIBTORCH=<site-packages>/torch (the torch==2.13.0 wheel)",
        dir.display()
    )
}

// ---------------------------------------------------------------------------------------------
// `generate`: greedy generation over a static-cache export in ONNX Runtime.
// ---------------------------------------------------------------------------------------------

/// `--prompt-ids 1,2,3` (spaces around the commas are allowed).
fn parse_prompt_ids(text: &str) -> Result<Vec<i64>> {
    let ids = text
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<i64>().with_context(|| format!("--prompt-ids: `{t}` is not a token id (expected e.g. 1,2,3)"))
        })
        .collect::<Result<Vec<_>>>()?;
    if ids.is_empty() {
        bail!("--prompt-ids is empty: give at least one token id, e.g. --prompt-ids 1,2,3");
    }
    Ok(ids)
}

/// EOS ids of `generation_config.json` in the export folder (`eos_token_id`: an int or a
/// list); none when the file or the key is absent.
fn eos_ids(dir: &Path) -> Result<Vec<i64>> {
    let path = dir.join("generation_config.json");
    if !path.is_file() {
        return Ok(vec![]);
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))?;
    let bad = || anyhow::anyhow!("{}: `eos_token_id` must be a token id or a list of them", path.display());
    match v.get("eos_token_id") {
        None | Some(serde_json::Value::Null) => Ok(vec![]),
        Some(serde_json::Value::Array(a)) => a.iter().map(|x| x.as_i64().ok_or_else(bad)).collect(),
        Some(x) => Ok(vec![x.as_i64().ok_or_else(bad)?]),
    }
}

/// The export folder's tokenizer.json, when there is one.
fn load_tokenizer(dir: &Path) -> Result<Option<tokenizers::Tokenizer>> {
    let path = dir.join("tokenizer.json");
    if !path.is_file() {
        return Ok(None);
    }
    let tok = tokenizers::Tokenizer::from_file(&path)
        .map_err(|e| anyhow::anyhow!("{}: cannot load the tokenizer: {e}", path.display()))?;
    Ok(Some(tok))
}

fn generate(a: &GenerateArgs) -> Result<()> {
    let dir = &a.path;
    if !dir.join(hfexport::core::metadata::FILE_NAME).is_file() {
        bail!(
            "{} is not an export folder (no {}); export one with `hfexport export --model <CHECKPOINT> --format onnx \
             --dynamic --for-generation --static-cache N --multi-token-decode --output <DIR>`",
            dir.display(),
            hfexport::core::metadata::FILE_NAME
        );
    }
    let tokenizer = load_tokenizer(dir)?;
    let prompt = match (&a.prompt_ids, &a.prompt) {
        (Some(ids), _) => parse_prompt_ids(ids)?,
        (None, Some(text)) => {
            let Some(tok) = &tokenizer else {
                bail!(
                    "{}: this export has no tokenizer files (no tokenizer.json), so --prompt cannot be encoded; give \
                     the prompt as token ids with --prompt-ids 1,2,3 (or export from a checkpoint folder that has a \
                     tokenizer.json)",
                    dir.display()
                );
            };
            let enc = tok.encode(text.as_str(), true).map_err(|e| anyhow::anyhow!("cannot encode --prompt: {e}"))?;
            let ids: Vec<i64> = enc.get_ids().iter().map(|&i| i as i64).collect();
            if ids.is_empty() {
                bail!("--prompt encodes to no tokens: give a longer prompt or --prompt-ids");
            }
            ids
        }
        (None, None) => bail!("give --prompt-ids 1,2,3 or --prompt \"text\""),
    };
    let eos = eos_ids(dir)?;
    let format = hfexport::core::metadata::ExportMetadata::read(dir)?.format;
    let t0 = Instant::now();
    let g = if format == "executorch" {
        generate_executorch(dir, &prompt, a.max_new_tokens, &eos)?
    } else if format == "dynamo" {
        generate_libtorch(dir, &prompt, a.max_new_tokens, &eos)?
    } else if format == "openvino" {
        let mut gen = hfexport::openvino::generate::OvGenerator::load(dir)?;
        let version =
            format!("openvino {}", hfexport::openvino::runtime::loaded_version().unwrap_or_else(|| "?".into()));
        let kind = if gen.is_stateful() { "stateful, " } else { "" };
        timed_greedy(&mut gen, &prompt, a.max_new_tokens, &eos, version, kind)?
    } else {
        let mut gen = hfexport::onnx::generate::Generator::load(dir)?;
        let version =
            format!("onnxruntime {}", hfexport::onnx::runtime::loaded_version().unwrap_or_else(|| "?".into()));
        timed_greedy(&mut gen, &prompt, a.max_new_tokens, &eos, version, "")?
    };
    let t2 = Instant::now();
    let join = |ids: &[i64]| ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    println!("prompt: {}", join(&prompt));
    println!("ids: {}", join(&g.tokens));
    if let Some(tok) = &tokenizer {
        let ids: Vec<u32> = g.tokens.iter().map(|&t| t as u32).collect();
        let text = tok.decode(&ids, true).map_err(|e| anyhow::anyhow!("cannot decode the generated ids: {e}"))?;
        println!("text: {text}");
    }
    let stop = match g.stop {
        hfexport::core::generation::StopReason::Eos(t) => format!("stopped at EOS token {t}"),
        _ => format!("stopped after --max-new-tokens {}", a.max_new_tokens),
    };
    let secs = (t2 - g.loaded).as_secs_f64();
    let decode = g.step_ms.map_or(String::new(), |ms| format!(", decode {ms:.2} ms/token"));
    eprintln!(
        "{}: load {:.2} s; {} prompt + {} new tokens in {:.2} s ({:.1} tokens/s; prefill {:.1} ms{decode}), {}{}; {stop}",
        g.runtime,
        (g.loaded - t0).as_secs_f64(),
        prompt.len(),
        g.tokens.len(),
        secs,
        g.tokens.len() as f64 / secs.max(1e-9),
        g.prefill.as_secs_f64() * 1e3,
        g.kind,
        match g.slots {
            Some(n) => format!("static cache of {n} slots"),
            None => "growing cache".into(),
        }
    );
    Ok(())
}
