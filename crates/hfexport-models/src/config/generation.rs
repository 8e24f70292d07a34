//! `generation_config.json` and the special token ids of `config.json`.

use super::*;

/// What `generation_config.json` says about decoding: the special tokens (which override
/// `config.json`'s) and the sampling defaults. Every field is `None` (or empty) when the file or
/// the key is absent, so callers choose their own fallback.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerationConfig {
    pub bos_token_id: Option<i64>,
    pub eos_token_ids: Vec<i64>,
    pub pad_token_id: Option<i64>,
    pub do_sample: Option<bool>,
    pub temperature: Option<f64>,
    pub top_k: Option<usize>,
    pub top_p: Option<f64>,
    pub repetition_penalty: Option<f64>,
    /// The token `generate` forces right after an encoder-decoder's start token (BART-CNN's
    /// BOS, an mBART or NLLB target language). transformers 5.23 reads it from this file only:
    /// a `config.json` key of that name no longer reaches the generation config.
    pub forced_bos_token_id: Option<i64>,
    /// The token `generate` forces as the last one `max_new_tokens` allows (BART's EOS).
    pub forced_eos_token_id: Option<i64>,
}

impl GenerationConfig {
    /// Reads `<dir>/generation_config.json`; the default when the folder has none.
    pub fn from_dir(dir: &Path) -> Result<GenerationConfig> {
        let path = dir.join("generation_config.json");
        if !path.is_file() {
            return Ok(GenerationConfig::default());
        }
        let text = read_small_text(&path, MAX_CONFIG_BYTES)?;
        let value: Value = serde_json::from_str(&text).map_err(|e| ModelError::json(&path, &e))?;
        let Value::Object(obj) = &value else {
            return Err(ModelError::config(
                &path,
                "<root>",
                format!("must be a JSON object, got {}", describe(&value)),
            ));
        };
        let f = Fields::new(obj, &path, "");
        let eos = match f.raw("eos_token_id") {
            Some(Value::Array(list)) => eos_list(&f, list)?,
            _ => f.int("eos_token_id")?.into_iter().collect(),
        };
        Ok(GenerationConfig {
            bos_token_id: f.int("bos_token_id")?,
            eos_token_ids: eos,
            pad_token_id: f.int("pad_token_id")?,
            do_sample: f.bool("do_sample")?,
            temperature: f.number("temperature")?,
            top_k: f.int("top_k")?.map(|k| k.max(0) as usize),
            top_p: f.number("top_p")?,
            repetition_penalty: f.number("repetition_penalty")?,
            forced_bos_token_id: f.int("forced_bos_token_id")?,
            forced_eos_token_id: f.int("forced_eos_token_id")?,
        })
    }
}

impl GenerationConfig {
    /// The ids transformers 5.23's `generate` stops at for the checkpoint (or export) in `dir`:
    /// `generation_config.json`'s `eos_token_id` when that file exists (none when it lacks the
    /// key), else the `eos_token_id` that `config.json` itself spells out (or its
    /// `text_config`'s), never a class default: transformers derives a missing generation
    /// config from the keys a config file sets, so a Llama file without the key stops nowhere,
    /// although `LlamaConfig` defaults it to 2.
    pub fn stop_token_ids(dir: &Path) -> Result<Vec<i64>> {
        if dir.join("generation_config.json").is_file() {
            return Ok(GenerationConfig::from_dir(dir)?.eos_token_ids);
        }
        let path = dir.join("config.json");
        let Some(value) = read_optional_json(&path)? else { return Ok(vec![]) };
        let text_config = value.get("text_config").filter(|t| t.get("eos_token_id").is_some());
        let (obj, prefix) = match text_config {
            Some(t) if value.get("eos_token_id").is_none() => (t, "text_config."),
            _ => (&value, ""),
        };
        let Value::Object(obj) = obj else { return Ok(vec![]) };
        let f = Fields::new(obj, &path, prefix);
        match f.raw("eos_token_id") {
            Some(Value::Array(list)) => eos_list(&f, list),
            _ => Ok(f.int("eos_token_id")?.into_iter().collect()),
        }
    }
}

/// The JSON of `path`; `None` when there is no such file.
fn read_optional_json(path: &Path) -> Result<Option<Value>> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = read_small_text(path, MAX_CONFIG_BYTES)?;
    Ok(Some(serde_json::from_str(&text).map_err(|e| ModelError::json(path, &e))?))
}

pub(super) type TokenIds = (Option<i64>, Vec<i64>, Option<i64>);

/// `bos_token_id`, `eos_token_id` (an integer or a list) and `pad_token_id`; absent keys take
/// the class defaults, null means none.
pub(super) fn parse_token_ids(f: &Fields, d: &Defaults) -> Result<TokenIds> {
    let one = |key: &str, default: Option<i64>| -> Result<Option<i64>> {
        match f.raw(key) {
            None => Ok(default),
            Some(_) => f.int(key),
        }
    };
    let eos = match f.raw("eos_token_id") {
        None => d.eos_token_id.into_iter().collect(),
        Some(Value::Array(list)) => eos_list(f, list)?,
        Some(_) => f.int("eos_token_id")?.into_iter().collect(),
    };
    Ok((one("bos_token_id", d.bos_token_id)?, eos, one("pad_token_id", d.pad_token_id)?))
}

pub(super) fn eos_list(f: &Fields, list: &[Value]) -> Result<Vec<i64>> {
    list.iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_i64()
                .ok_or_else(|| f.err("eos_token_id", format!("entry {i} must be an integer, got {}", describe(v))))
        })
        .collect()
}
