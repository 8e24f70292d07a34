//! `hfexport generate`: greedy generation over a generation export in its format's runtime, the
//! prompt given as ids or as text for the export's tokenizer; an encoder-decoder's encoder run
//! first on `--inputs`, `--audio` or the text, a vision-language model's image encoder and
//! projector on each `--image`.

use crate::GenerateArgs;
use anyhow::{bail, Context, Result};
use hfexport::core::generation::StopReason;
use hfexport::core::limits;
use hfexport::core::metadata::ExportMetadata;
use hfexport::core::plan::{Entry, Role};
use hfexport::{AutoExportConfig, ExportFormat, Tensor};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

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

/// The export folder's tokenizer.json, when there is one.
fn load_tokenizer(dir: &Path) -> Result<Option<tokenizers::Tokenizer>> {
    let path = dir.join("tokenizer.json");
    if !path.is_file() {
        return Ok(None);
    }
    let text =
        limits::read_text(&path, limits::TOKENIZER_JSON).with_context(|| format!("cannot read {}", path.display()))?;
    let tok = text
        .parse::<tokenizers::Tokenizer>()
        .map_err(|e| anyhow::anyhow!("{}: cannot load the tokenizer: {e}", path.display()))?;
    Ok(Some(tok))
}

/// Runs the export's `encoder` component on `--inputs`, `--audio` or (a text encoder) the
/// tokens of `--prompt`; the outputs the decode graphs take.
fn encode(
    dir: &Path,
    meta: &ExportMetadata,
    a: &GenerateArgs,
    tokenizer: Option<&tokenizers::Tokenizer>,
) -> Result<BTreeMap<String, Tensor>> {
    let comp = meta.by_role(Role::Encoder).expect("the caller found the encoder");
    let text_encoder = comp.spec.entry == Entry::TokenIds;
    let (source, mut feed) = match (&a.inputs, &a.audio, &a.prompt) {
        (Some(path), _, _) => {
            let feed = hfexport::models::safetensors::read_all(path)
                .with_context(|| format!("cannot read --inputs {}", path.display()))?;
            (path.display().to_string(), feed)
        }
        (None, Some(wav), _) => {
            let fe = hfexport::audio::WhisperFeatures::from_dir(dir)?;
            let samples = hfexport::audio::read_wav(wav, fe.sampling_rate)?;
            (wav.display().to_string(), BTreeMap::from([("input_features".to_string(), fe.extract(&samples)?)]))
        }
        (None, None, Some(text)) if text_encoder => {
            let ids = encode_text(dir, tokenizer, text)?;
            let n = ids.len();
            let feed = BTreeMap::from([
                ("input_ids".to_string(), Tensor::i64(vec![1, n], ids)?),
                ("attention_mask".to_string(), Tensor::i64(vec![1, n], vec![1; n])?),
            ]);
            ("--prompt".to_string(), feed)
        }
        _ => {
            let names: Vec<&str> = comp.inputs.iter().map(|p| p.name.as_str()).collect();
            let other = if text_encoder { "text with --prompt" } else { "speech with --audio FILE.wav" };
            bail!(
                "{}: this is an encoder-decoder export; give the encoder's inputs ({}) with --inputs \
                 FILE.safetensors, or {other}",
                dir.display(),
                names.join(", ")
            );
        }
    };
    // an absent attention_mask means all ones; a static cache's decode attends to every
    // encoder position, so a mask can only be all ones (the merged decode takes any)
    let takes: Vec<&str> =
        meta.by_role(Role::Decode).map_or(vec![], |d| d.inputs.iter().map(|p| p.name.as_str()).collect());
    let masks = takes.contains(&hfexport::core::cache_ports::ENCODER_MASK);
    match feed.get("attention_mask").map(|m| !masks && m.as_i64().map_or(true, |v| v.iter().any(|&x| x != 1))) {
        Some(true) => bail!(
            "{source}: `attention_mask` masks positions, but the decoder attends to every encoder position; give \
             the inputs without padding"
        ),
        Some(false) if !comp.inputs.iter().any(|p| p.name == "attention_mask") => {
            feed.remove("attention_mask");
        }
        None if comp.inputs.iter().any(|p| p.name == "attention_mask") => {
            let ids = feed.get("input_ids").with_context(|| format!("{source}: no tensor `input_ids`"))?;
            let ones = Tensor::i64(ids.shape().to_vec(), vec![1; ids.shape().iter().product()])?;
            feed.insert("attention_mask".to_string(), ones);
        }
        _ => {}
    }
    for p in &comp.inputs {
        let t = feed.get(&p.name).with_context(|| format!("{source}: no tensor `{}`", p.name))?;
        let got: Vec<String> = t.shape().iter().map(usize::to_string).collect();
        // the batch is 1, a constant size as exported, a symbolic length anything
        let want: Vec<String> = (p.shape.iter().zip(&got))
            .map(|(d, g)| match d.as_str() {
                "batch" => "1".into(),
                d if d.parse::<usize>().is_ok() => d.into(),
                _ => g.clone(),
            })
            .collect();
        if want != got || p.shape.len() != got.len() {
            bail!(
                "{source}: `{}` has shape [{}]; this export takes [{}] (one input at a time)",
                p.name,
                got.join(", "),
                p.shape.iter().map(|d| if d == "batch" { "1" } else { d.as_str() }).collect::<Vec<_>>().join(", ")
            );
        }
    }
    let backend = hfexport::backend(ExportFormat::parse(&meta.format)?)?;
    let config = AutoExportConfig::from_dict(&meta.config)?;
    let mut runner = backend.runtime()?.open_runner(dir, comp, &config)?;
    let out = runner.run(&feed).with_context(|| format!("running `{}` on {source}", comp.name()))?;
    // what the decode graphs take of it: the cross-attention keys and values, or the states
    // and the encoder's mask
    Ok(hfexport::core::cache_ports::encoder_feeds(&takes, &feed, out))
}

/// The ids of `--prompt` `text` by the export folder's tokenizer.
fn encode_text(dir: &Path, tokenizer: Option<&tokenizers::Tokenizer>, text: &str) -> Result<Vec<i64>> {
    let Some(tok) = tokenizer else {
        bail!(
            "{}: this export has no tokenizer files (no tokenizer.json), so --prompt cannot be encoded; give the \
             prompt as token ids with --prompt-ids 1,2,3 or --inputs (or export from a checkpoint folder that has a \
             tokenizer.json)",
            dir.display()
        );
    };
    let enc = tok.encode(text, true).map_err(|e| anyhow::anyhow!("cannot encode --prompt: {e}"))?;
    let ids: Vec<i64> = enc.get_ids().iter().map(|&i| i as i64).collect();
    if ids.is_empty() {
        bail!("--prompt encodes to no tokens: give a longer prompt or --prompt-ids");
    }
    Ok(ids)
}

/// A vision-language export's image inputs of the decode loop and the prompt with each image
/// placeholder expanded to its image's rows, as the processor expands it: each image
/// preprocessed as the folder's `preprocessor_config.json` says and run through the
/// `image_encoder` (and LLaVA's `multi_modal_projector`), one image a call (every runtime's
/// export takes a batch of 1: ExecuTorch's default bound). The decode takes the rows as
/// `image_embeds` (one unused row without images), and Qwen2-VL's also every cache slot's
/// multimodal positions (`rope_positions`, `get_rope_index` of the expanded prompt).
fn images(
    dir: &Path,
    meta: &ExportMetadata,
    a: &GenerateArgs,
    prompt: &[i64],
) -> Result<(BTreeMap<String, Tensor>, Vec<i64>)> {
    use hfexport::models::vision::{mrope_positions, patch_inputs, IMAGE_EMBEDS, ROPE_POSITIONS};
    let cfg = hfexport::ModelConfig::from_dir(dir)?;
    let v = cfg.vision.as_deref().with_context(|| format!("{}: config.json has no vision config", dir.display()))?;
    let placeholders = prompt.iter().filter(|&&t| t == v.image_token_id).count();
    if placeholders != a.image.len() {
        bail!(
            "the prompt has {placeholders} image placeholder{} (token id {}) and {} --image {} given: give one --image \
             per placeholder, in order",
            if placeholders == 1 { "" } else { "s" },
            v.image_token_id,
            a.image.len(),
            if a.image.len() == 1 { "was" } else { "were" }
        );
    }
    let decode = meta.by_role(Role::Decode).context("the export has no `decode` component")?;
    let port = decode.inputs.iter().find(|p| p.name == IMAGE_EMBEDS);
    let dtype = port.and_then(|p| hfexport::DType::from_user_name(&p.dtype)).unwrap_or(hfexport::DType::F32);
    let backend = hfexport::backend(ExportFormat::parse(&meta.format)?)?;
    let config = AutoExportConfig::from_dict(&meta.config)?;
    let open = |role: Role| -> Result<Option<(String, Box<dyn hfexport::core::backend::Runner>)>> {
        match meta.by_role(role) {
            Some(comp) => Ok(Some((comp.name().to_string(), backend.runtime()?.open_runner(dir, comp, &config)?))),
            None => Ok(None),
        }
    };
    let run = |(name, runner): &mut (String, Box<dyn hfexport::core::backend::Runner>),
               feed: BTreeMap<String, Tensor>,
               output: &str|
     -> Result<Tensor> {
        let mut out = runner.run(&feed).with_context(|| format!("running `{name}`"))?;
        out.remove(output).with_context(|| format!("`{name}` returned no `{output}`"))
    };
    let mut rows_of = vec![];
    let mut data: Vec<f32> = vec![];
    let mut grids = vec![];
    if !a.image.is_empty() {
        let processor = hfexport::image::ImageProcessor::from_dir(dir)?;
        let mut encoder = open(Role::ImageEncoder)?.context("the export has no image_encoder component")?;
        let mut projector = open(Role::Projector)?;
        let takes = meta.by_role(Role::ImageEncoder).and_then(|c| c.inputs.first()).map(|p| p.shape.clone());
        for path in &a.image {
            let pixels = processor.pixel_values(path)?;
            let embeds = match (pixels.grid, v.merge.as_ref()) {
                (Some(grid), Some(m)) => {
                    let group = m.spatial_merge_size * m.spatial_merge_size;
                    let (n, width) = (pixels.values.shape()[0], pixels.values.shape()[1]);
                    if width != m.patch_values() || n % group != 0 {
                        bail!(
                            "{}: the image processor makes rows of {width} values, the model takes {} (check \
                             preprocessor_config.json's patch sizes against config.json's)",
                            path.display(),
                            m.patch_values()
                        );
                    }
                    let (positions, frames) = patch_inputs(&[grid], m.spatial_merge_size);
                    grids.push(grid);
                    let feed = BTreeMap::from([
                        ("pixel_values".to_string(), pixels.values.reshaped(vec![n / group, group, width])?),
                        ("patch_positions".to_string(), Tensor::i64(vec![n / group, group, 2], positions)?),
                        ("frame_ids".to_string(), Tensor::i64(vec![n / group, group], frames)?),
                    ]);
                    run(&mut encoder, feed, IMAGE_EMBEDS)?
                }
                (None, None) => {
                    let got: Vec<String> = pixels.values.shape()[1..].iter().map(usize::to_string).collect();
                    if takes.as_ref().is_some_and(|t| t[1..] != got[..]) {
                        bail!(
                            "{}: preprocessed to [{}], but `{}` takes pixel values of [batch, {}] (check the \
                             export's preprocessor_config.json against the model's image size)",
                            path.display(),
                            got.join(", "),
                            encoder.0,
                            takes.unwrap_or_default()[1..].join(", ")
                        );
                    }
                    let feed = BTreeMap::from([("pixel_values".to_string(), pixels.values)]);
                    let features = run(&mut encoder, feed, "image_features")?;
                    let projector = projector.as_mut().context("the export has no multi_modal_projector component")?;
                    run(projector, BTreeMap::from([("image_features".to_string(), features)]), IMAGE_EMBEDS)?
                }
                _ => bail!("{}: preprocessor_config.json names an image processor for another model", dir.display()),
            };
            let s = embeds.shape().to_vec();
            rows_of.push(s[..s.len() - 1].iter().product::<usize>());
            data.extend_from_slice(embeds.cast(hfexport::DType::F32).as_f32()?);
        }
    }
    let mut images = rows_of.iter();
    let expanded: Vec<i64> = prompt
        .iter()
        .flat_map(|&t| match t == v.image_token_id {
            true => vec![t; *images.next().expect("one image per placeholder, checked above")],
            false => vec![t],
        })
        .collect();
    let total: usize = rows_of.iter().sum();
    let embeds = match total {
        0 => Tensor::f32(vec![1, cfg.hidden_size], vec![0.0; cfg.hidden_size])?,
        n => Tensor::f32(vec![n, cfg.hidden_size], data)?,
    };
    let mut fixed = BTreeMap::from([(IMAGE_EMBEDS.to_string(), embeds.cast(dtype))]);
    if decode.inputs.iter().any(|p| p.name == ROPE_POSITIONS) {
        let slots = decode.static_slots().context("a Qwen2-VL decode has a static cache")?;
        let merge = v.merge.as_ref().map_or(1, |m| m.spatial_merge_size);
        let rope = mrope_positions(&expanded, v.image_token_id, &grids, merge, slots)
            .map_err(|e| anyhow::anyhow!("the prompt's multimodal positions: {e}"))?;
        fixed.insert(ROPE_POSITIONS.to_string(), Tensor::i64(vec![3, slots], rope)?);
    }
    Ok((fixed, expanded))
}

/// `decoder_start_token_id` of the export's config.json: an encoder-decoder's first token.
fn decoder_start(dir: &Path) -> Result<i64> {
    let cfg = hfexport::ModelConfig::from_dir(dir)?;
    cfg.seq2seq
        .map(|s| s.decoder_start_token_id)
        .with_context(|| format!("{}: config.json names no decoder start token; give --prompt-ids", dir.display()))
}

pub(crate) fn generate(a: &GenerateArgs) -> Result<()> {
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
    let meta = ExportMetadata::read(dir)?;
    hfexport::core::integrity::check_component_sizes(dir, &meta)?;
    // a raw-audio CTC model's transcript comes from one forward pass
    if let Some(model) = meta.components.iter().find(|c| c.spec.entry == Entry::InputValues) {
        let wav = a.audio.as_ref().with_context(|| {
            format!("{}: this export transcribes speech: give it with --audio FILE.wav", dir.display())
        })?;
        return crate::run::transcribe(dir, wav, model.name());
    }
    let encoded = match meta.by_role(Role::Encoder) {
        Some(_) => Some(encode(dir, &meta, a, tokenizer.as_ref())?),
        None if a.inputs.is_some() || a.audio.is_some() => bail!(
            "{}: --inputs and --audio feed an encoder-decoder's encoder, and this export has none (components: {})",
            dir.display(),
            meta.components.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
        ),
        None => None,
    };
    // the token transformers' generate forces after an encoder-decoder's start token, which
    // counts as the first new one
    let generation_config = hfexport::models::GenerationConfig::from_dir(dir)?;
    let forced = match (&a.prompt_ids, &encoded) {
        (None, Some(_)) if a.max_new_tokens > 0 => a.forced_bos_token_id.or(generation_config.forced_bos_token_id),
        _ if a.forced_bos_token_id.is_some() => bail!(
            "--forced-bos-token-id follows an encoder-decoder's start token: give the encoder's input (--prompt, \
             --inputs or --audio) without --prompt-ids, and --max-new-tokens of at least 1"
        ),
        _ => None,
    };
    let mut prompt = match (&a.prompt_ids, &a.prompt) {
        (Some(ids), _) => parse_prompt_ids(ids)?,
        // an encoder-decoder's decoder starts alone (a text prompt went to the encoder)
        (None, _) if encoded.is_some() => std::iter::once(decoder_start(dir)?).chain(forced).collect(),
        (None, Some(text)) => encode_text(dir, tokenizer.as_ref(), text)?,
        (None, None) => bail!("give --prompt-ids 1,2,3 or --prompt \"text\""),
    };
    let mut fixed = encoded.unwrap_or_default();
    if meta.by_role(Role::ImageEncoder).is_some() {
        let (inputs, expanded) = images(dir, &meta, a, &prompt)?;
        fixed.extend(inputs);
        prompt = expanded;
    } else if !a.image.is_empty() {
        bail!(
            "{}: --image feeds a vision-language export's image encoder, and this export has none (components: {})",
            dir.display(),
            meta.components.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
        );
    }
    // where transformers' generate stops, from the copied generation_config.json / config.json
    let eos = hfexport::models::GenerationConfig::stop_token_ids(dir)?;
    let format = ExportFormat::parse(&meta.format)?;
    let t0 = Instant::now();
    let mut generator = hfexport::backend(format)?.runtime()?.open_generator(dir)?;
    if !fixed.is_empty() {
        generator.set_fixed_inputs(&fixed)?;
    }
    let loaded = Instant::now();
    let mut g = match forced {
        Some(id) => {
            // forced to an EOS id, transformers stops there
            let stop = eos.contains(&id);
            let mut g = generator.generate(&prompt, if stop { 0 } else { a.max_new_tokens - 1 }, &eos)?;
            g.tokens.insert(0, id);
            if stop {
                g.stop = StopReason::Eos(id);
            }
            g
        }
        None => generator.generate(&prompt, a.max_new_tokens, &eos)?,
    };
    // the last token max_new_tokens allows is forced to forced_eos_token_id (the choice there
    // depends on nothing after it, so replacing it is the same as forcing it)
    if let (StopReason::MaxNewTokens, Some(id), Some(last)) =
        (g.stop, generation_config.forced_eos_token_id, g.tokens.last_mut())
    {
        *last = id;
        g.stop = StopReason::Eos(id);
    }
    let t2 = Instant::now();
    let text = match &tokenizer {
        Some(tok) => {
            let ids: Vec<u32> = g.tokens.iter().map(|&t| t as u32).collect();
            Some(tok.decode(&ids, true).map_err(|e| anyhow::anyhow!("cannot decode the generated ids: {e}"))?)
        }
        None => None,
    };
    let secs = (t2 - loaded).as_secs_f64();
    if a.json {
        let (stop, eos_token) = match g.stop {
            StopReason::Eos(t) => ("eos", Some(t)),
            _ => ("max_new_tokens", None),
        };
        let v = serde_json::json!({
            "prompt": prompt,
            "ids": g.tokens,
            "text": text,
            "stop": stop,
            "eos_token": eos_token,
            "runtime": generator.runtime(),
            "kind": generator.kind(),
            "cache": match g.slots { Some(n) => serde_json::json!({"static_slots": n}), None => serde_json::json!("growing") },
            "timings": {
                "load_s": (loaded - t0).as_secs_f64(),
                "generate_s": secs,
                "prefill_ms": g.prefill.as_secs_f64() * 1e3,
                "decode_ms_per_token": g.step_ms,
                "tokens_per_s": g.tokens.len() as f64 / secs.max(1e-9),
            },
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let join = |ids: &[i64]| ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    println!("prompt: {}", join(&prompt));
    println!("ids: {}", join(&g.tokens));
    if let Some(text) = &text {
        println!("text: {text}");
    }
    let stop = match g.stop {
        StopReason::Eos(t) => format!("stopped at EOS token {t}"),
        _ => format!("stopped after --max-new-tokens {}", a.max_new_tokens),
    };
    let kind = match generator.kind() {
        "" => String::new(),
        k => format!("{k}, "),
    };
    let decode = g.step_ms.map_or(String::new(), |ms| format!(", decode {ms:.2} ms/token"));
    eprintln!(
        "{}: load {:.2} s; {} prompt + {} new tokens in {:.2} s ({:.1} tokens/s; prefill {:.1} ms{decode}), {}{}; {stop}",
        generator.runtime(),
        (loaded - t0).as_secs_f64(),
        prompt.len(),
        g.tokens.len(),
        secs,
        g.tokens.len() as f64 / secs.max(1e-9),
        g.prefill.as_secs_f64() * 1e3,
        kind,
        match g.slots {
            Some(n) => format!("static cache of {n} slots"),
            None => "growing cache".into(),
        }
    );
    Ok(())
}
