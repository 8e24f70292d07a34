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
    // an absent attention_mask means all ones; the decode graphs attend to every encoder
    // position, so a mask can only be all ones
    match feed.get("attention_mask").map(|m| m.as_i64().map_or(true, |v| v.iter().any(|&x| x != 1))) {
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
    let mut runner = backend.open_runner(dir, comp, &config)?;
    let out = runner.run(&feed).with_context(|| format!("running `{}` on {source}", comp.name()))?;
    // what the decode graphs take of it: the cross-attention keys and values
    let takes = |name: &str| meta.by_role(Role::Decode).is_some_and(|d| d.inputs.iter().any(|p| p.name == name));
    Ok(out.into_iter().filter(|(k, _)| takes(k)).collect())
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

/// The image embeddings the decode graph takes (`image_embeds`, one row per image token) and
/// the prompt with each image placeholder expanded to its image's rows, as the processor
/// expands it: the images run through the `image_encoder` and `multi_modal_projector`
/// components. Without images the decode still takes one (unused) row.
fn images(dir: &Path, meta: &ExportMetadata, a: &GenerateArgs, prompt: &[i64]) -> Result<(Tensor, Vec<i64>)> {
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
    let port = decode.inputs.iter().find(|p| p.name == hfexport::models::vision::IMAGE_EMBEDS);
    let dtype = port.and_then(|p| hfexport::DType::from_user_name(&p.dtype)).unwrap_or(hfexport::DType::F32);
    if a.image.is_empty() {
        let zeros = Tensor::float(dtype, vec![1, cfg.hidden_size], vec![0.0; cfg.hidden_size])?;
        return Ok((zeros, prompt.to_vec()));
    }
    let processor = hfexport::image::ClipImageProcessor::from_dir(dir)?;
    let backend = hfexport::backend(ExportFormat::parse(&meta.format)?)?;
    let config = AutoExportConfig::from_dict(&meta.config)?;
    let open = |role: Role| -> Result<(String, Box<dyn hfexport::core::backend::Runner>, Vec<String>)> {
        let comp = meta.by_role(role).with_context(|| format!("the export has no {role:?} component"))?;
        let input = comp.inputs.first().map_or(vec![], |p| p.shape[1..].to_vec());
        Ok((comp.name().to_string(), backend.open_runner(dir, comp, &config)?, input))
    };
    let (encoder, mut encode, takes) = open(Role::ImageEncoder)?;
    let (projector, mut project, _) = open(Role::Projector)?;
    // one image a call: every runtime's export takes a batch of 1 (ExecuTorch's default bound)
    let (mut rows, mut data, mut width) = (0, vec![], 0);
    for path in &a.image {
        let pixels = processor.pixel_values(path)?;
        let got: Vec<String> = pixels.shape()[1..].iter().map(usize::to_string).collect();
        if got != takes {
            bail!(
                "{}: preprocessed to [{}], but `{encoder}` takes pixel values of [batch, {}] (check the export's \
                 preprocessor_config.json against the model's image size)",
                path.display(),
                got.join(", "),
                takes.join(", ")
            );
        }
        let mut out = encode.run(&BTreeMap::from([("pixel_values".to_string(), pixels)]))?;
        let features =
            out.remove("image_features").with_context(|| format!("`{encoder}` returned no image_features"))?;
        let mut out = project.run(&BTreeMap::from([("image_features".to_string(), features)]))?;
        let embeds = out.remove("image_embeds").with_context(|| format!("`{projector}` returned no image_embeds"))?;
        let s = embeds.shape().to_vec();
        (rows, width) = (s[1], s[2]);
        data.push(embeds);
    }
    let as_f32 = |t: &Tensor| t.cast(hfexport::DType::F32).as_f32().map(<[f32]>::to_vec);
    let flat: Vec<f32> = data.iter().map(as_f32).collect::<Result<Vec<_>, _>>()?.concat();
    let embeds = Tensor::f32(vec![a.image.len() * rows, width], flat)?.cast(dtype);
    let expanded = prompt.iter().flat_map(|&t| if t == v.image_token_id { vec![t; rows] } else { vec![t] }).collect();
    Ok((embeds, expanded))
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
    let encoded = match meta.by_role(Role::Encoder) {
        Some(_) => Some(encode(dir, &meta, a, tokenizer.as_ref())?),
        None if a.inputs.is_some() || a.audio.is_some() => bail!(
            "{}: --inputs and --audio feed an encoder-decoder's encoder, and this export has none (components: {})",
            dir.display(),
            meta.components.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
        ),
        None => None,
    };
    let mut prompt = match (&a.prompt_ids, &a.prompt) {
        (Some(ids), _) => parse_prompt_ids(ids)?,
        // an encoder-decoder's decoder starts alone (a text prompt went to the encoder)
        (None, _) if encoded.is_some() => vec![decoder_start(dir)?],
        (None, Some(text)) => encode_text(dir, tokenizer.as_ref(), text)?,
        (None, None) => bail!("give --prompt-ids 1,2,3 or --prompt \"text\""),
    };
    let mut fixed = encoded.unwrap_or_default();
    if meta.by_role(Role::ImageEncoder).is_some() {
        let (embeds, expanded) = images(dir, &meta, a, &prompt)?;
        fixed.insert(hfexport::models::vision::IMAGE_EMBEDS.to_string(), embeds);
        prompt = expanded;
    } else if !a.image.is_empty() {
        bail!(
            "{}: --image feeds a vision-language export's image encoder, and this export has none (components: {})",
            dir.display(),
            meta.components.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
        );
    }
    // EOS ids of the copied generation_config.json (none when the file or the key is absent)
    let eos = hfexport::models::GenerationConfig::from_dir(dir)?.eos_token_ids;
    let format = ExportFormat::parse(&meta.format)?;
    let t0 = Instant::now();
    let mut generator = hfexport::backend(format)?.open_generator(dir)?;
    if !fixed.is_empty() {
        generator.set_fixed_inputs(&fixed)?;
    }
    let loaded = Instant::now();
    let g = generator.generate(&prompt, a.max_new_tokens, &eos)?;
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
