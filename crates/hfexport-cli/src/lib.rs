//! `hfexport`: the command line (`export`, `inspect`, `run`, `generate`), used the way
//! `optimum-cli export` is. Every format goes through the facade's backend list: no command
//! matches on formats or runtimes.
//!
//! A library as well as the binary (`src/main.rs` calls [`main`]), so that the Python package
//! (`python/`) runs the same command line and the same option parsing in process: its
//! `hfexport` console script is [`main`], `hfexport.export(...)` is [`export`] and
//! `hfexport.inspect(...)` is [`inspect_json`] / [`check_export`].
//!
//! Rooms: this file (arguments and dispatch), `export`, `inspect`, `run`, `generate`.

mod export;
mod generate;
mod inspect;
mod run;

pub use inspect::{check_export, inspect_json};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use hfexport::core::metadata::ExportMetadata;
use hfexport::models::build_forward;
use hfexport::{BuildOptions, Checkpoint, Graph, Task};
use std::path::{Path, PathBuf};

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
        /// A checkpoint folder (config.json + *.safetensors), a hub repo id `org/name[@revision]`
        /// in the Hugging Face cache, or an export folder.
        #[arg(required_unless_present = "supported")]
        path: Option<PathBuf>,
        /// List every class this build exports (class, model_type, default task) instead, from
        /// the family registry; with --json one JSON array, with --markdown docs/supported.md.
        #[arg(long, conflicts_with_all = ["path", "task", "dump"])]
        supported: bool,
        /// With --supported: the Markdown table of docs/supported.md.
        #[arg(long, requires = "supported", conflicts_with = "json")]
        markdown: bool,
        /// Default: the task of the checkpoint's class (`architectures[0]`: `BertForMaskedLM`
        /// is fill-mask, `BertModel` feature-extraction, or sentence-embedding in a
        /// sentence-transformers folder)
        #[arg(long, value_parser = tasks())]
        task: Option<String>,
        /// Print the whole graph, one node per line.
        #[arg(long)]
        dump: bool,
        /// Print one JSON object instead (an export folder: its export.json).
        #[arg(long, conflicts_with = "dump")]
        json: bool,
        /// An export folder: read every file back and compare its size and CRC-32 with what
        /// export.json records; fails naming the first damaged file.
        #[arg(long, conflicts_with_all = ["dump", "json", "task"])]
        check: bool,
    },
    /// Runs a graph on inputs from a safetensors file (or a WAV) and writes its outputs to
    /// another.
    #[command(group(clap::ArgGroup::new("feed").required(true).args(["inputs", "audio"])))]
    Run {
        /// A checkpoint folder (its forward graph in the reference evaluator) or an export
        /// folder (with export.json: the artifact in its runtime).
        path: PathBuf,
        /// Safetensors file keyed by input name (`input_ids`, `attention_mask`).
        #[arg(long)]
        inputs: Option<PathBuf>,
        /// Speech for a raw-audio encoder (wav2vec2, HuBERT): a mono WAV at the feature
        /// extractor's rate, turned into `input_values` as `Wav2Vec2FeatureExtractor` does with
        /// the folder's preprocessor_config.json; a CTC model's transcript is printed.
        #[arg(long)]
        audio: Option<PathBuf>,
        /// Where to write the outputs (`logits`), as safetensors.
        #[arg(long)]
        outputs: PathBuf,
        /// The component to run (`model` for a single-graph export or checkpoint; an image-text
        /// dual encoder's `text_model` or `vision_model` for feature-extraction).
        #[arg(long, default_value = "model")]
        component: String,
        /// reference | onnxruntime | openvino | executorch | libtorch; default: `reference` for a
        /// checkpoint folder, the artifact's runtime for an export folder.
        #[arg(long)]
        runtime: Option<String>,
        /// Default: the task of the checkpoint's class (`architectures[0]`: `BertForMaskedLM`
        /// is fill-mask, `BertModel` feature-extraction, or sentence-embedding in a
        /// sentence-transformers folder)
        #[arg(long, value_parser = tasks())]
        task: Option<String>,
    },
    /// Greedy generation with a generation export (`export --dynamic --for-generation
    /// [--static-cache N [--multi-token-decode]]`) in its format's runtime: ONNX Runtime,
    /// OpenVINO, libtorch (.pt2) or ExecuTorch (.pte); static caches updated in place, growing
    /// caches fed back.
    Generate(GenerateArgs),
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).multiple(true).args(["prompt_ids", "prompt", "inputs", "audio"])))]
pub(crate) struct GenerateArgs {
    /// The export folder (export.json with a `decode` component).
    pub(crate) path: PathBuf,
    /// The prompt as token ids, separated by commas: `1,2,3`.
    #[arg(long)]
    pub(crate) prompt_ids: Option<String>,
    /// The prompt as text, encoded with the export folder's tokenizer.json.
    #[arg(long)]
    pub(crate) prompt: Option<String>,
    /// Stop after this many new tokens (or at an EOS token of generation_config.json).
    #[arg(long, default_value_t = 32)]
    pub(crate) max_new_tokens: usize,
    /// An encoder-decoder's encoder inputs by name (safetensors, e.g. `input_features`
    /// `[1, mel_bins, frames]` for Whisper); the prompt then defaults to
    /// `decoder_start_token_id`.
    #[arg(long, conflicts_with = "audio")]
    pub(crate) inputs: Option<PathBuf>,
    /// Speech for an encoder-decoder (Whisper): a 16 kHz mono WAV, turned into `input_features`
    /// as transformers' WhisperFeatureExtractor does with the export's preprocessor_config.json;
    /// for a raw-audio CTC export (wav2vec2, HuBERT), the WAV whose transcript is printed.
    #[arg(long)]
    pub(crate) audio: Option<PathBuf>,
    /// The token an encoder-decoder's decoder is forced to after its start token (a target
    /// language: NLLB's `eng_Latn`, an mBART-50 code), over generation_config.json's
    /// `forced_bos_token_id`.
    #[arg(long)]
    pub(crate) forced_bos_token_id: Option<i64>,
    /// An image for a vision-language export (LLaVA), PNG or JPEG, preprocessed as the image
    /// processor of the export's preprocessor_config.json does; repeat it for several images,
    /// one per image placeholder of the prompt, in order.
    #[arg(long)]
    pub(crate) image: Vec<PathBuf>,
    /// Print one JSON object on stdout (prompt, ids, text, stop, runtime, cache, timings)
    /// instead of the text lines and the summary on stderr.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(clap::Args)]
pub(crate) struct ExportArgs {
    /// The checkpoint folder (config.json + *.safetensors), or a hub repo id `org/name[@revision]`
    /// read offline from the Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub or
    /// ~/.cache/huggingface/hub); a local folder of that name wins.
    #[arg(long)]
    pub(crate) model: PathBuf,
    /// dynamo | onnx | executorch | openvino (overrides `export_format` of --config).
    #[arg(long)]
    pub(crate) format: Option<String>,
    /// The export folder (refused if not empty, unless --force).
    #[arg(long)]
    pub(crate) output: PathBuf,
    /// Default: the task of the checkpoint's class (`architectures[0]`; a bare encoder in a
    /// sentence-transformers folder, with `modules.json`: sentence-embedding)
    #[arg(long, value_parser = tasks())]
    pub(crate) task: Option<String>,
    /// float32 | float16 | bfloat16
    #[arg(long, default_value = "float32")]
    pub(crate) dtype: String,
    /// Make batch and sequence symbolic with the model's bounds.
    #[arg(long)]
    pub(crate) dynamic: bool,
    /// Per input and axis `{name, min, max}` or "auto": inline JSON or a JSON file.
    #[arg(long)]
    pub(crate) dynamic_shapes: Option<String>,
    /// An export config (the dict of `AutoExportConfig`): a JSON file, or the JSON object
    /// inline; flags override it.
    #[arg(long)]
    pub(crate) config: Option<String>,
    /// Replace a non-empty output folder.
    #[arg(long)]
    pub(crate) force: bool,
    /// Export the components of a generation loop (`export_for_generation`).
    #[arg(long)]
    pub(crate) for_generation: bool,
    /// With --for-generation: a static KV cache of this many slots.
    #[arg(long)]
    pub(crate) static_cache: Option<usize>,
    /// With --static-cache: one `decode` component that takes any number of tokens per call.
    #[arg(long)]
    pub(crate) multi_token_decode: bool,
    /// With --format onnx: a generation export (growing cache, symbolic shapes: implies
    /// --for-generation and --dynamic) plus genai_config.json, so that ONNX Runtime GenAI
    /// (`og.Model(dir)`) runs the folder as it is. Sets `genai` of --config.
    #[arg(long)]
    pub(crate) genai: bool,
    /// Quantize weights: int4 (decoder linears symmetric in groups of 32; head and embeddings
    /// int8 per channel) or int8 (per channel throughout). Overrides `quantizer.weights` of
    /// --config, whose other keys (group_size, symmetric, lm_head, embeddings, exclude) stay.
    #[arg(long, value_parser = ["int4", "int8"])]
    pub(crate) quantize: Option<String>,
    /// Multi-head latent attention (DeepSeek-V2/V3): auto (absorbed in the decode components of
    /// a generation export, expanded elsewhere), expanded, or absorbed. Sets
    /// `latent_attention` of --config.
    #[arg(long, value_parser = hfexport::LatentForm::NAMES)]
    pub(crate) latent_attention: Option<String>,
    /// The image size an image model's graph takes, `N` or `HEIGHT,WIDTH` (default: the
    /// config's `image_size`, 224 where it has none): any size for the convolutional families
    /// (ResNet, ConvNeXt, MobileNetV2), and for Swin one whose every stage sees at least a window
    /// of patches (without absolute positions); a multiple of the patch size for ViT, DeiT,
    /// DINOv2 and BEiT, whose position embeddings are then resampled as transformers'
    /// `interpolate_pos_encoding` does. Sets `image_size` of --config.
    #[arg(long, value_parser = parse_image_size)]
    pub(crate) image_size: Option<[usize; 2]>,
    /// Run the export in its runtime against the reference evaluator before the folder is
    /// committed; recorded in export.json, and a mismatch fails the export.
    #[arg(long)]
    pub(crate) verify: bool,
    /// No progress on stderr (a bar on a terminal, lines otherwise); errors are still printed.
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

/// Runs the command line `args` (the program name first, as `std::env::args_os` gives it) and
/// returns the process's exit code: 0, 1 after an error (printed on stderr), 2 for arguments
/// clap refuses; `--help` and `--version` print and return 0.
pub fn main<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // clap's own rendering (help on stdout, errors on stderr) and exit code
            let _ = e.print();
            return e.exit_code();
        }
    };
    match dispatch(cli.command) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {}", report(&e));
            1
        }
    }
}

/// The command line `args` (the program name first) run in this process as [`main`] runs it,
/// with its error returned instead of printed ([`report`] gives `main`'s text; `--help` is an
/// error here): for a caller that runs many commands and would otherwise start a process for
/// each, such as a test suite (the runtimes' libraries take about 0.4 s to initialise a process).
pub fn run_command<I, T>(args: I) -> Result<()>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(args).map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim()))?;
    dispatch(cli.command)
}

/// `hfexport export ARGS` in process: `args` are the flags after `export` (`--model DIR
/// --format onnx --output OUT ...`, parsed as the command line parses them), the progress goes
/// to `progress`, nothing is printed. Returns the export's metadata (what export.json holds).
pub fn export<I, T>(args: I, progress: &mut dyn hfexport::ExportProgress) -> Result<ExportMetadata>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let argv = std::iter::once(std::ffi::OsString::from("hfexport export")).chain(args.into_iter().map(Into::into));
    let parsed =
        ExportCommand::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim()))?;
    export::run_export(&parsed.args, progress)
}

/// The flags of `hfexport export` alone, for [`export`].
#[derive(Parser)]
#[command(name = "hfexport export")]
struct ExportCommand {
    #[command(flatten)]
    args: ExportArgs,
}

/// The error and its causes, each said once: a cause whose text its context already quotes
/// (`path: No such file or directory` above an io error) is not repeated.
pub fn report(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg
}

fn dispatch(command: Command) -> Result<()> {
    match command {
        Command::Export(args) => export::export(&args),
        Command::Inspect { supported: true, json, markdown, .. } => inspect::supported(json, markdown),
        Command::Inspect { path, check: true, .. } => {
            inspect::check(&path.context("inspect --check needs an export folder")?)
        }
        Command::Inspect { path, task, dump: full, json, .. } => {
            let path = path.context("inspect needs a checkpoint or export folder (or --supported)")?;
            inspect::inspect(&path, task.as_deref(), full, json)
        }
        Command::Generate(args) => generate::generate(&args),
        Command::Run { path, inputs, audio, outputs, component, runtime, task } => {
            let feed = match (inputs, audio) {
                (Some(inputs), _) => run::Feed::Inputs(inputs),
                (None, Some(wav)) => run::Feed::Audio(wav),
                (None, None) => unreachable!("clap requires --inputs or --audio"),
            };
            if path.join(hfexport::core::metadata::FILE_NAME).is_file() {
                run::run_export(&path, &feed, &outputs, &component, runtime.as_deref())
            } else {
                run::run(&path, &feed, &outputs, &component, runtime.as_deref().unwrap_or("reference"), task.as_deref())
            }
        }
    }
}

/// The checkpoint at `path`, or the hub cache's snapshot of a repo id (`org/name[@rev]`).
pub(crate) fn open_checkpoint(path: &Path) -> Result<Checkpoint> {
    Checkpoint::open(path).with_context(|| format!("cannot open checkpoint {}", path.display()))
}

/// `--task`'s values, listed by `--help`: every task's name, and its aliases.
fn tasks() -> clap::builder::PossibleValuesParser {
    Task::ALL.map(|t| clap::builder::PossibleValue::new(t.name()).aliases(t.aliases())).into()
}

/// `--task`, else the checkpoint's default task (its class's; a sentence-transformers folder's
/// sentence embedding).
pub(crate) fn task_of(ckpt: &Checkpoint, task: Option<&str>) -> Result<Task> {
    match task {
        Some(t) => Task::parse(t).map_err(anyhow::Error::msg),
        None => Ok(Task::of_model(&ckpt.config)),
    }
}

/// The forward components of `task` (one `model`, or an image-text dual encoder's towers), by
/// name.
pub(crate) fn forward_graphs(ckpt: &Checkpoint, task: Task) -> Result<Vec<(String, Graph)>> {
    let planned = build_forward(&ckpt.config, ckpt, task, &BuildOptions::default())?;
    Ok(planned.into_iter().map(|p| (p.spec.name, p.graph)).collect())
}

/// `--image-size`: `N` (square) or `HEIGHT,WIDTH`, positive.
fn parse_image_size(s: &str) -> Result<[usize; 2], String> {
    let sides: Vec<usize> = s
        .split(',')
        .map(|p| p.trim().parse::<usize>().ok().filter(|&n| n > 0))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("`{s}` is not N or HEIGHT,WIDTH (positive integers)"))?;
    match sides[..] {
        [n] => Ok([n, n]),
        [h, w] => Ok([h, w]),
        _ => Err(format!("`{s}` is not N or HEIGHT,WIDTH")),
    }
}
