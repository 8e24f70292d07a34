//! `hfexport inspect`: a checkpoint (sizes, stored dtypes, the graph) or an export folder
//! (what export.json says: components with their roles, I/O, patches, verification).

use crate::{forward_graphs, open_checkpoint, task_of};
use anyhow::Result;
use hfexport::core::dim::shape_to_string;
use hfexport::core::dump::{dump, op_histogram};
use hfexport::models::config::{
    AudioConfig, Backbone, ConvNetConfig, DualConfig, FeatureNorm, LayerMlp, LayerSpec, Mixer, Span, SwinVersion,
};
use hfexport::{BuildOptions, Checkpoint, Graph, Task};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

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
        println!("component    {} ({:?}, {})", c.name(), c.spec.role, c.files.join(", "));
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

/// A graph port as `inspect --json` writes it.
fn port_json(g: &hfexport::Graph, p: &hfexport::core::graph::Port) -> Value {
    let i = g.info(p.value);
    json!({"name": p.name, "dtype": i.dtype.to_string(), "shape": shape_to_string(&i.shape)})
}

/// `inspect --supported`: every class the family registry lists, as a table, one JSON array
/// (`json`) or the Markdown of docs/supported.md (`markdown`).
pub(crate) fn supported(json: bool, markdown: bool) -> Result<()> {
    let rows = hfexport::models::task::supported_tasks();
    if markdown {
        print!("{}", hfexport::models::task::supported_markdown());
    } else if json {
        let list: Vec<Value> =
            rows.iter().map(|(c, t)| json!({"class": c.class, "model_type": c.model_type, "task": t.name()})).collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        let width = rows.iter().map(|(c, _)| c.class.len()).max().unwrap_or(0);
        for (c, t) in &rows {
            println!("{:width$}  {:14}  {}", c.class, c.model_type, t.name());
        }
        println!("{} classes", rows.len());
    }
    Ok(())
}

/// `inspect --check`: every file of the export folder read back against export.json's sizes
/// and CRC-32s.
pub(crate) fn check(path: &Path) -> Result<()> {
    let (files, bytes) = check_export(path)?;
    println!("{}: whole ({files} files, {bytes} bytes, sizes and CRC-32s as export.json records)", path.display());
    Ok(())
}

/// Every file of the export folder `path` read back against export.json's sizes and CRC-32s:
/// the number of files and their bytes, or an error naming the first damaged file.
pub fn check_export(path: &Path) -> Result<(usize, u64)> {
    if !path.join(hfexport::core::metadata::FILE_NAME).is_file() {
        anyhow::bail!(
            "{}: --check takes an export folder (one with {})",
            path.display(),
            hfexport::core::metadata::FILE_NAME
        );
    }
    let m = hfexport::core::metadata::ExportMetadata::read(path)?;
    Ok(hfexport::core::integrity::check_files(path, &m)?)
}

/// What `inspect` says about a checkpoint, computed once for the text and the JSON.
struct Facts {
    graphs: Vec<(String, Graph)>,
    task: Task,
    /// The window and the layers that slide.
    sliding: Option<(usize, Vec<usize>)>,
    /// The chunk and the layers that attend within chunks.
    chunked: Option<(usize, Vec<usize>)>,
    total: u64,
    /// Parameters a token uses (experts not chosen left out), for a mixture of experts.
    active: Option<u64>,
    /// Stored tensors by dtype.
    dtypes: BTreeMap<String, usize>,
}

impl Facts {
    fn of(ckpt: &Checkpoint, task: Option<&str>) -> Result<Facts> {
        let c = &ckpt.config;
        let task = task_of(ckpt, task)?;
        let graphs = graphs_of(ckpt, task)?;
        let sliding = c.sliding_window().map(|w| {
            let slides = |l: &LayerSpec| l.attention().is_some_and(|a| matches!(a.span, Span::Sliding(_)));
            let layers: Vec<usize> = (c.layers.iter().enumerate()).filter(|(_, l)| slides(l)).map(|(i, _)| i).collect();
            (w, layers)
        });
        let total = parameter_count(&graphs);
        let active = c.moe.as_ref().map(|m| total - idle_expert_parameters(c, m));
        let mut dtypes: BTreeMap<String, usize> = BTreeMap::new();
        for name in ckpt.tensor_names() {
            if let Some(info) = ckpt.tensor_info(name) {
                *dtypes.entry(info.dtype.to_string()).or_default() += 1;
            }
        }
        Ok(Facts { graphs, task, sliding, chunked: chunked_layers(c), total, active, dtypes })
    }

    /// `inspect --json` of a checkpoint.
    fn json(&self, path: &Path, ckpt: &Checkpoint) -> Value {
        let c = &ckpt.config;
        let mut v = json!({
            "checkpoint": path.display().to_string(),
            "architecture": c.architecture,
            "model_type": c.model_type,
            "sizes": {
                "layers": c.num_hidden_layers, "hidden": c.hidden_size, "intermediate": c.intermediate_size,
                "heads": c.num_attention_heads, "kv_heads": c.num_key_value_heads, "head_dim": c.head_dim,
                "vocab": c.vocab_size, "max_positions": c.max_position_embeddings,
            },
            "rope": rope_summary(c),
            "backbone": c.convnet.as_ref().map(backbone_summary),
            "vision": c.dual.as_deref().map(dual_summary),
            "audio": c.encoder.as_ref().and_then(|e| e.audio.as_ref()).map(|a| audio_summary(a, c.post_residual_norms)),
            "sliding_window": self.sliding.as_ref().map(|(w, layers)| json!({"window": w, "layers": layers})),
            "chunked_attention": self.chunked.as_ref().map(|(n, layers)| json!({"chunk": n, "layers": layers})),
            "experts": c.moe.as_ref().map(|m| experts_summary(c, m)),
            "tied_embeddings": c.tie_word_embeddings,
            "parameters": {"total": self.total, "active_per_token": self.active.unwrap_or(self.total)},
            "stored": {"tensors": ckpt.tensor_names().count(), "dtypes": self.dtypes},
            "graph": graph_json(self.task, &self.graphs[0].1),
        });
        if self.graphs.len() > 1 {
            v["components"] =
                self.graphs.iter().map(|(name, g)| json!({"name": name, "graph": graph_json(self.task, g)})).collect();
        }
        v
    }
}

/// A raw-audio encoder's front in a line: its convolutions, the samples per frame, the
/// positional convolution and where the layers' norms sit (after the residual adds: `post_norm`).
fn audio_summary(a: &AudioConfig, post_norm: bool) -> String {
    let widths: Vec<String> = a.convs.iter().map(|c| c.channels.to_string()).collect();
    let hop: usize = a.convs.iter().map(|c| c.stride).product();
    let norm = match a.norm {
        FeatureNorm::Group => "group norm after the first",
        FeatureNorm::Layer => "layer norm after each",
    };
    format!(
        "{} convolutions ({}; {norm}), one frame per {hop} samples from {} on; positional conv {} in {} groups; {} layers",
        a.convs.len(),
        widths.join(", "),
        a.receptive_field(),
        a.pos_kernel,
        a.pos_groups,
        if post_norm { "post-norm" } else { "pre-norm" }
    )
}

/// An image-text dual encoder's image tower and shared space in a line (the text tower is the
/// `sizes` line).
fn dual_summary(d: &DualConfig) -> String {
    let v = &d.vision;
    let image = v.encoder.as_ref().and_then(|e| e.image.as_ref()).map_or(String::new(), |i| {
        format!("; {}x{} images, {} channels, {}x{} patches", i.size[0], i.size[1], i.channels, i.patch[0], i.patch[1])
    });
    let space = d.projection_dim.map_or("the towers' own heads".to_string(), |p| format!("projected to {p}"));
    format!(
        "layers {}, hidden {}, intermediate {}, heads {}{image}; shared space: {space}",
        v.num_hidden_layers, v.hidden_size, v.intermediate_size, v.num_attention_heads
    )
}

/// A backbone built at one image size in a line: its kind, stages and the images it is built for.
fn backbone_summary(net: &ConvNetConfig) -> String {
    let kind = match &net.backbone {
        Backbone::ResNet(r) => format!(
            "ResNet, {} layers: widths {:?}, depths {:?}, stem {}",
            if r.bottleneck { "bottleneck" } else { "basic" },
            r.hidden_sizes,
            r.depths,
            r.embedding_size
        ),
        Backbone::ConvNext(c) => format!(
            "ConvNeXt {}: widths {:?}, depths {:?}, {}x{} patches",
            if c.grn { "V2" } else { "V1" },
            c.hidden_sizes,
            c.depths,
            c.patch[0],
            c.patch[1]
        ),
        Backbone::MobileNetV2(m) => format!(
            "MobileNetV2: depth multiplier {}, expansion {}, output stride {}{}",
            m.depth_multiplier,
            m.expand_ratio,
            m.output_stride,
            if m.tf_padding { ", TensorFlow padding" } else { "" }
        ),
        Backbone::Swin(s) => format!(
            "Swin{}: widths from {}, depths {:?}, heads {:?}, {}x{} windows, {}x{} patches",
            if s.version == SwinVersion::V1 { "" } else { "v2" },
            s.embed_dim,
            s.depths,
            s.heads,
            s.window,
            s.window,
            s.patch[0],
            s.patch[1]
        ),
    };
    format!("{kind}; images {}x{}, {} channels", net.image[0], net.image[1], net.channels)
}

/// `inspect --json` as a value: an export folder's export.json, else the checkpoint's facts
/// (sizes, rope, windows, experts, parameters, stored dtypes, graph ports) for `task`.
pub fn inspect_json(path: &Path, task: Option<&str>) -> Result<Value> {
    if path.join(hfexport::core::metadata::FILE_NAME).is_file() {
        return Ok(serde_json::to_value(hfexport::core::metadata::ExportMetadata::read(path)?)?);
    }
    let ckpt = open_checkpoint(path)?;
    Ok(Facts::of(&ckpt, task)?.json(path, &ckpt))
}

/// `inspect` of a checkpoint folder or an export folder; `json`: one JSON object on stdout.
pub(crate) fn inspect(path: &Path, task: Option<&str>, full: bool, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&inspect_json(path, task)?)?);
        return Ok(());
    }
    if path.join(hfexport::core::metadata::FILE_NAME).is_file() {
        return inspect_export(path);
    }
    let ckpt = open_checkpoint(path)?;
    let c = &ckpt.config;
    let Facts { graphs, task, sliding, chunked, total, active, dtypes } = Facts::of(&ckpt, task)?;
    println!("checkpoint   {}", path.display());
    println!("architecture {} ({})", c.architecture, c.model_type.as_deref().unwrap_or("?"));
    let vocab = match c.vocab_size {
        0 => String::new(),
        v => format!(", vocab {v}"),
    };
    let attends = c.layers.iter().any(|l| !matches!(l.mixer, Mixer::Mamba(_) | Mixer::Mamba2(_) | Mixer::ShortConv(_)));
    match (&c.convnet, attends) {
        // a convolutional backbone has no layers, heads or positions
        (Some(net), _) => println!("backbone     {}", backbone_summary(net)),
        (None, true) => println!(
            "sizes        layers {}, hidden {}, intermediate {}, heads {} (kv {}), head_dim {}{vocab}",
            c.num_hidden_layers,
            c.hidden_size,
            c.intermediate_size,
            c.num_attention_heads,
            c.num_key_value_heads,
            c.head_dim,
        ),
        // a pure state-space model has no heads, and its MLP is none
        (None, false) => println!("sizes        layers {}, hidden {}{vocab}", c.num_hidden_layers, c.hidden_size),
    }
    match c.encoder.as_ref().and_then(|e| e.image.as_ref()) {
        _ if c.convnet.is_some() => {}
        Some(img) => println!(
            "image        {}x{}, {} channels, {}x{} patches ({} per image)",
            img.size[0],
            img.size[1],
            img.channels,
            img.patch[0],
            img.patch[1],
            img.patches()
        ),
        None => println!("rope         {}, max positions {}", rope_summary(c), c.max_position_embeddings),
    }
    if let Some(Mixer::LatentAttention(l)) = c.layers.first().map(|l| &l.mixer) {
        let q = l.q_lora_rank.map_or("one q_proj".to_string(), |r| format!("q_lora_rank {r}"));
        println!(
            "latent       {q}, kv_lora_rank {}, {} + {} query/key and {} value channels per head; cache {} per token",
            l.kv_lora_rank,
            l.nope_dim,
            l.rope_dim,
            l.v_dim,
            l.kv_lora_rank + l.rope_dim
        );
    }
    if let Some(line) = recurrent_summary(c) {
        println!("recurrent    {line}");
    }
    match (&c.encoder, c.dual.as_deref()) {
        (Some(_), Some(d)) => println!("vision       {}", dual_summary(d)),
        (Some(e), None) => {
            println!("encoder      task {}, {} labels, {} token types", task.name(), e.num_labels, e.type_vocab_size);
            if let Some(a) = &e.audio {
                println!("audio        {}", audio_summary(a, c.post_residual_norms));
            }
        }
        (None, _) => {}
    }
    if let Some(s) = &c.seq2seq {
        let input = match (s.mel_bins, s.source_positions) {
            (Some(mel), Some(n)) => format!("{mel} mel bins x {} frames", 2 * n),
            _ => "tokens".to_string(),
        };
        println!(
            "encoder      layers {}, heads {} of {}, intermediate {}; reads {input}; decoder starts at {}",
            s.encoder_layers, s.encoder_heads, s.encoder_head_dim, s.encoder_ffn, s.decoder_start_token_id
        );
    }
    if let Some(v) = &c.vision {
        let t = &v.tower;
        let reads = match (&v.merge, t.encoder.as_ref().and_then(|e| e.image.as_ref())) {
            (Some(m), _) => format!(
                "patches of {p}x{p} pixels x {} frames, {}x{} merged into one row, M-RoPE sections {:?}",
                m.temporal_patch_size,
                m.spatial_merge_size,
                m.spatial_merge_size,
                v.mrope_section,
                p = m.patch_size
            ),
            (None, Some(i)) => format!(
                "{}x{} images in {}x{} patches, {} rows per image (feature layers {:?})",
                i.size[0],
                i.size[1],
                i.patch[0],
                i.patch[1],
                hfexport::models::vision::image_rows(v),
                v.feature_layers
            ),
            (None, None) => String::new(),
        };
        println!(
            "vision       layers {}, hidden {}, heads {}; {reads}; image token {}",
            t.num_hidden_layers, t.hidden_size, t.num_attention_heads, v.image_token_id
        );
    }
    if let Some(r) = &c.relative_attention {
        println!("positions    relative, {} buckets up to distance {}", r.num_buckets, r.max_distance);
    }
    if let Some((n, layers)) = &chunked {
        println!("chunked      chunks of {n} on {} of {} layers", layers.len(), c.num_hidden_layers);
    }
    if let Some(line) = per_layer_summary(c) {
        println!("per layer    {line}");
    }
    if let Some((w, layers)) = &sliding {
        println!("sliding      window {w} on {} of {} layers", layers.len(), c.num_hidden_layers);
    }
    if let Some(m) = &c.moe {
        println!("experts      {}", experts_summary(c, m));
    }
    if c.vocab_size > 0 {
        println!("embeddings   {}", if c.tie_word_embeddings { "tied" } else { "untied" });
    }
    match active {
        Some(active) => println!(
            "parameters   {total} ({:.2} M), {active} ({:.2} M) active per token",
            total as f64 / 1e6,
            active as f64 / 1e6
        ),
        None => println!("parameters   {total} ({:.2} M)", total as f64 / 1e6),
    }
    let dt: Vec<String> = dtypes.iter().map(|(d, n)| format!("{d} x{n}")).collect();
    println!("stored       {} tensors: {}", ckpt.tensor_names().count(), dt.join(", "));
    for (name, g) in &graphs {
        let which = if graphs.len() > 1 { format!("{name}: ") } else { String::new() };
        println!("graph        {which}{} nodes, {} weights", g.nodes().len(), g.weights().len());
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
        let ops: Vec<String> = op_histogram(g).iter().map(|(o, n)| format!("{o} x{n}")).collect();
        println!("  ops        {}", ops.join(", "));
        if full {
            print!("{}", dump(g));
        }
    }
    Ok(())
}

/// The graphs `inspect` describes: the forward graph of `task`, or the components of a
/// generation-only model (an encoder-decoder's `encoder`, a vision-language model's
/// `image_encoder` and `multi_modal_projector`; then `decode` over a static cache of the
/// decoder's positions).
fn graphs_of(ckpt: &Checkpoint, task: Task) -> Result<Vec<(String, Graph)>> {
    if task == Task::CausalLm || !task.generates(&ckpt.config.family()?) {
        return forward_graphs(ckpt, task);
    }
    let slots = Some(ckpt.config.max_position_embeddings);
    let plan = hfexport::models::build_generation(&ckpt.config, ckpt, &BuildOptions::default(), slots, true)?;
    Ok(plan.into_iter().map(|p| (p.spec.name, p.graph)).collect())
}

/// Parameters of the distinct weights of `graphs` (components share weights by name).
fn parameter_count(graphs: &[(String, Graph)]) -> u64 {
    let mut seen = std::collections::BTreeSet::new();
    let mut total = 0;
    for (_, g) in graphs {
        for w in g.weights().iter().filter(|w| seen.insert(w.name.clone())) {
            total += g.info(w.value).shape.iter().map(|d| d.as_const().unwrap_or(0) as u64).product::<u64>();
        }
    }
    total
}

fn graph_json(task: Task, g: &Graph) -> serde_json::Value {
    json!({
        "task": task.name(),
        "nodes": g.nodes().len(),
        "weights": g.weights().len(),
        "symbols": g.symbols.iter().map(|(s, r)| (s.name().to_string(), json!({"min": r.min, "max": r.max}))).collect::<serde_json::Map<_, _>>(),
        "inputs": g.inputs().iter().map(|p| port_json(g, p)).collect::<Vec<_>>(),
        "outputs": g.outputs().iter().map(|p| port_json(g, p)).collect::<Vec<_>>(),
        "ops": op_histogram(g).iter().map(|(o, n)| (o.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
    })
}

/// `8 (top-2, renormalised), experts of 32, in layers 0, 2 of 3, shared expert of 40`.
fn experts_summary(c: &hfexport::models::ModelConfig, m: &hfexport::models::config::MoeConfig) -> String {
    let sparse: Vec<String> =
        c.layers.iter().enumerate().filter(|(_, l)| l.mlp.has_experts()).map(|(i, _)| i.to_string()).collect();
    let mut norm = if m.normalize() { "renormalised" } else { "not renormalised" }.to_string();
    if let hfexport::core::Routing::Grouped { score, groups, top_groups, scale, .. } = m.routing {
        let by = match score {
            hfexport::core::RouterScore::Softmax | hfexport::core::RouterScore::SoftmaxTwoBest => "softmax",
            hfexport::core::RouterScore::Sigmoid => "sigmoid",
            hfexport::core::RouterScore::SigmoidCorrected => "corrected sigmoid",
            hfexport::core::RouterScore::SoftmaxCorrected => "corrected softmax",
        };
        norm += &format!(", by {by} within the best {top_groups} of {groups} groups, times {scale}");
    }
    if m.weigh_input {
        norm += ", weighing the experts' input";
    }
    if c.layers.iter().any(|l| matches!(l.mlp, LayerMlp::DenseAndSparse)) {
        norm += ", beside the dense MLP";
    }
    let layers = match sparse.len() == c.num_hidden_layers {
        true => format!("in every layer ({})", c.num_hidden_layers),
        false => format!("in layers {} of {}", sparse.join(", "), c.num_hidden_layers),
    };
    let mut s = format!("{} (top-{}, {norm}), experts of {}, {layers}", m.num_experts, m.top_k, m.intermediate_size);
    if let Some(shared) = m.shared_expert_intermediate_size {
        s += &format!(", shared expert of {shared}");
    }
    s
}

/// Weights of the experts a token does not run: `experts - top_k` of them in each sparse layer.
fn idle_expert_parameters(c: &hfexport::models::ModelConfig, m: &hfexport::models::config::MoeConfig) -> u64 {
    let per_expert = 3 * m.intermediate_size * c.hidden_size;
    let sparse = c.layers.iter().filter(|l| l.mlp.has_experts()).count();
    (sparse * (m.num_experts - m.top_k) * per_expert) as u64
}

/// What differs by layer beyond the kinds above (Gemma 4, Gemma 3n): other head sizes, layers
/// reusing an earlier layer's keys and values, per-layer embeddings, MLP widths and sparse gates,
/// AltUp's streams, LAuReL, media-token tables; `None` when nothing does.
fn per_layer_summary(c: &hfexport::models::ModelConfig) -> Option<String> {
    let mut parts = vec![];
    let heads = |a: &hfexport::models::config::AttentionSpec| (a.head_dim, a.kv_heads);
    let odd: Vec<String> = (c.layers.iter().enumerate())
        .filter_map(|(i, l)| l.attention().filter(|a| heads(a) != (c.head_dim, c.num_key_value_heads)).map(|a| (i, a)))
        .map(|(i, a)| format!("{i}: head_dim {} (kv {})", a.head_dim, a.kv_heads))
        .collect();
    if !odd.is_empty() {
        parts.push(format!("layers {}", odd.join(", ")));
    }
    let shared: Vec<String> = (c.layers.iter().enumerate())
        .filter_map(|(i, l)| l.attention().and_then(|a| a.kv_source).map(|s| format!("{i} <- {s}")))
        .collect();
    if !shared.is_empty() {
        parts.push(format!("keys and values reused (layer <- source): {}", shared.join(", ")));
    }
    if c.layers.iter().filter_map(|l| l.attention()).any(|a| a.values_from_keys) {
        parts.push("full layers' values from the key projection".to_string());
    }
    if let Some(p) = c.per_layer_input {
        parts.push(format!("per-layer embeddings of {} (vocab {})", p.size, p.vocab));
    }
    let widths: Vec<usize> = c.layers.iter().map(|l| l.dense.width).collect();
    if widths.iter().any(|&w| w != c.intermediate_size) {
        parts.push(format!("MLP widths {widths:?}"));
    }
    let sparse: Vec<String> = (c.layers.iter().enumerate())
        .filter_map(|(i, l)| l.dense.gate_cutoff.map(|q| format!("{i} (cut at mean + {q:.3} std)")))
        .collect();
    if !sparse.is_empty() {
        parts.push(format!("gates sparsified in layers {}", sparse.join(", ")));
    }
    if let Some(a) = c.altup {
        parts.push(format!("{} AltUp streams (layers compute on stream {})", a.streams, a.active));
    }
    if let Some(rank) = c.laurel_rank {
        parts.push(format!("LAuReL of rank {rank}"));
    }
    for m in &c.media_tokens {
        let end = m.end.map_or("..".to_string(), |e| format!("..{e}"));
        parts.push(format!("ids {}{end} embedded by a table of {} x {}", m.start, m.vocab, m.hidden));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The chunk size of the chunked-attention layers (Llama 4's) and their indices, if any.
fn chunked_layers(c: &hfexport::models::ModelConfig) -> Option<(usize, Vec<usize>)> {
    let chunk = |l: &LayerSpec| match l.attention().map(|a| a.span) {
        Some(Span::Chunked(n)) => Some(n),
        _ => None,
    };
    let n = c.layers.iter().find_map(chunk)?;
    Some((n, c.layers.iter().enumerate().filter(|(_, l)| chunk(l).is_some()).map(|(i, _)| i).collect()))
}

/// The rotary embedding(s) of a config: type, base and rotated channels, the sliding layers'
/// own, and the layers without any.
fn rope_summary(c: &hfexport::models::ModelConfig) -> String {
    let rotary = c.layers.iter().filter(|l| l.rope().is_some()).count();
    if rotary == 0 {
        return "none".to_string();
    }
    let one = |r: &hfexport::core::RopeConfig| {
        let partial = match r.scaling {
            // Gemma 4's: over the whole head (of its layer kind), a fraction of the pairs turning
            hfexport::core::RopeScaling::Proportional { factor, partial_rotary_factor } => {
                format!(", {partial_rotary_factor} of {} channels turning, frequencies / {factor}", r.dim)
            }
            _ if r.dim < c.head_dim => format!(", {} of {} channels", r.dim, c.head_dim),
            _ => String::new(),
        };
        format!("{} (theta {}{partial})", r.rope_type(), r.theta)
    };
    let mut s = one(&c.rope);
    if let Some(local) = &c.sliding_rope {
        s += &format!("; sliding layers {}", one(local));
    }
    if rotary < c.num_hidden_layers {
        s += &format!("; {} of {} layers without", c.num_hidden_layers - rotary, c.num_hidden_layers);
    }
    s
}

/// A Mamba2 mixer's shape and what it keeps.
fn mamba2_summary(m: &hfexport::models::config::Mamba2Spec) -> String {
    format!(
        "Mamba2 ({} heads of {} in {} groups, state {}, conv {}; keeps [{}, {}] + [{}, {}, {}])",
        m.heads,
        m.head_dim,
        m.groups,
        m.state,
        m.conv_kernel,
        m.conv_channels(),
        m.conv_kernel - 1,
        m.heads,
        m.head_dim,
        m.state
    )
}

/// The state-space layers of a model, their shape and what each keeps; `None` without any.
fn recurrent_summary(c: &hfexport::ModelConfig) -> Option<String> {
    let mut kinds: Vec<(String, usize)> = vec![];
    for layer in &c.layers {
        let kind = match &layer.mixer {
            Mixer::Mamba(m) => format!(
                "Mamba ({} channels, state {}, conv {}, dt rank {}; keeps [{}, {}] + [{}, {}])",
                m.inner,
                m.state,
                m.conv_kernel,
                m.dt_rank,
                m.inner,
                m.conv_kernel - 1,
                m.inner,
                m.state
            ),
            Mixer::Mamba2(m) => mamba2_summary(m),
            Mixer::AttentionAndMamba2(_, m) => format!("attention beside {}", mamba2_summary(m)),
            Mixer::ShortConv(s) => {
                format!(
                    "short conv ({} channels, {} taps; keeps [{}, {}])",
                    s.channels,
                    s.kernel,
                    s.channels,
                    s.kernel - 1
                )
            }
            Mixer::GatedDeltaNet(d) => format!(
                "gated DeltaNet ({} key heads, {} value heads, key {} / value {}, conv {}; keeps [{}, {}] + [{}, {}, {}])",
                d.key_heads,
                d.value_heads,
                d.key_dim,
                d.value_dim,
                d.conv_kernel,
                d.conv_channels(),
                d.conv_kernel - 1,
                d.value_heads,
                d.key_dim,
                d.value_dim
            ),
            Mixer::Attention(_) | Mixer::LatentAttention(_) => "attention".to_string(),
        };
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((kind, 1)),
        }
    }
    c.recurrent().then(|| kinds.iter().map(|(k, n)| format!("{n} x {k}")).collect::<Vec<_>>().join(", "))
}
