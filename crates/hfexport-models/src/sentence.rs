//! sentence-transformers checkpoints: the modules after the transformer (`modules.json`) that
//! turn token embeddings into one sentence embedding, for `--task sentence-embedding`.
//!
//! `SentenceTransformer.encode` runs the modules of `modules.json` in order: the `Transformer`
//! (the checkpoint's encoder at the folder's root), a `Pooling` (its `config.json`: the
//! `pooling_mode` string or list of sentence-transformers 5+, or the older `pooling_mode_*`
//! flags; several modes are concatenated in their order), and optionally a `Normalize`
//! (`x / max(‖x‖₂, 1e-12)`). The export computes the same in the graph: the outputs
//! `token_embeddings` and `sentence_embedding`, as sentence-transformers names them. A module of
//! any other kind (`Dense`, `Router`, `StaticEmbedding`, custom code) is refused by name, as is
//! a Transformer in a subfolder. `include_prompt: false` changes nothing here: sentence-
//! transformers drops a prompt's tokens only when `encode` is given a prompt, which a graph
//! cannot know; the graph pools every unpadded token, as `encode` does without one.

use std::path::Path;

use serde_json::Value;

use crate::error::{ModelError, Result};

/// The file that lists a sentence-transformers checkpoint's modules.
pub const MODULES_FILE: &str = "modules.json";

/// One pooling of the token embeddings over the tokens `attention_mask` keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolingMode {
    /// The first kept token's embedding.
    Cls,
    /// The elementwise maximum.
    Max,
    /// The mean.
    Mean,
    /// The sum over the square root of the count.
    MeanSqrtLen,
    /// The mean weighted by position (1, 2, …).
    WeightedMean,
    /// The last kept token's embedding.
    LastToken,
}

impl PoolingMode {
    const NAMES: [(&'static str, PoolingMode); 6] = [
        ("cls", PoolingMode::Cls),
        ("max", PoolingMode::Max),
        ("mean", PoolingMode::Mean),
        ("mean_sqrt_len_tokens", PoolingMode::MeanSqrtLen),
        ("weightedmean", PoolingMode::WeightedMean),
        ("lasttoken", PoolingMode::LastToken),
    ];
    /// The `pooling_mode_*` flags of sentence-transformers before 5.
    const FLAGS: [(&'static str, PoolingMode); 6] = [
        ("pooling_mode_cls_token", PoolingMode::Cls),
        ("pooling_mode_max_tokens", PoolingMode::Max),
        ("pooling_mode_mean_tokens", PoolingMode::Mean),
        ("pooling_mode_mean_sqrt_len_tokens", PoolingMode::MeanSqrtLen),
        ("pooling_mode_weightedmean_tokens", PoolingMode::WeightedMean),
        ("pooling_mode_lasttoken", PoolingMode::LastToken),
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES.iter().find(|(_, m)| *m == self).map_or("?", |(n, _)| n)
    }
}

/// What follows the transformer in a sentence-transformers checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct SentenceModules {
    /// The pooling modes, concatenated in this order (one in almost every checkpoint).
    pub pooling: Vec<PoolingMode>,
    /// A `Normalize` module follows the pooling.
    pub normalize: bool,
}

/// The modules of the sentence-transformers checkpoint in `dir`; `None` when it has no
/// `modules.json`.
pub fn read(dir: &Path) -> Result<Option<SentenceModules>> {
    let path = dir.join(MODULES_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let list = read_json(&path)?;
    let Value::Array(modules) = list else {
        return Err(ModelError::config(&path, "<root>", "must be a JSON array of modules"));
    };
    let (mut transformer, mut pooling, mut normalize) = (false, None, false);
    for (i, m) in modules.iter().enumerate() {
        let key = |k: &str| format!("[{i}].{k}");
        let text =
            |k: &str| m.get(k).and_then(Value::as_str).ok_or_else(|| ModelError::config(&path, &key(k), "is missing"));
        let kind = text("type")?;
        let folder = m.get("path").and_then(Value::as_str).unwrap_or("");
        match (kind.rsplit('.').next().unwrap_or(kind), transformer, &pooling, normalize) {
            ("Transformer", false, None, false) if folder.is_empty() => transformer = true,
            ("Transformer", false, None, false) => {
                return Err(ModelError::config(
                    &path,
                    &key("path"),
                    format!("a Transformer module in `{folder}/` is not supported (only the checkpoint's own root)"),
                ))
            }
            ("Pooling", true, None, false) => pooling = Some(read_pooling(&dir.join(folder).join("config.json"))?),
            ("Normalize", true, Some(_), false) => normalize = true,
            (name @ ("Transformer" | "Pooling" | "Normalize"), ..) => {
                return Err(ModelError::config(
                    &path,
                    &key("type"),
                    format!("`{name}` out of place: supported is Transformer, Pooling, then optionally Normalize"),
                ))
            }
            _ => {
                return Err(ModelError::config(
                    &path,
                    &key("type"),
                    format!(
                        "the module `{kind}` is not supported for sentence-embedding (supported: Transformer, \
                         Pooling, Normalize)"
                    ),
                ))
            }
        }
    }
    match pooling {
        Some(pooling) => Ok(Some(SentenceModules { pooling, normalize })),
        None => Err(ModelError::config(&path, "<root>", "has no Transformer followed by a Pooling module")),
    }
}

/// A `Pooling` module's modes from its `config.json`: `pooling_mode` (a name or a list), else
/// the `pooling_mode_*` flags set (mean when none is), as sentence-transformers reads them.
fn read_pooling(path: &Path) -> Result<Vec<PoolingMode>> {
    let cfg = read_json(path)?;
    let by_name = |v: &Value| -> Result<PoolingMode> {
        let name = v.as_str().unwrap_or_default();
        PoolingMode::NAMES.iter().find(|(n, _)| *n == name).map(|(_, m)| *m).ok_or_else(|| {
            let valid: Vec<&str> = PoolingMode::NAMES.iter().map(|(n, _)| *n).collect();
            ModelError::config(path, "pooling_mode", format!("`{v}` is not supported; valid: {}", valid.join(", ")))
        })
    };
    match cfg.get("pooling_mode") {
        Some(Value::Array(list)) if !list.is_empty() => list.iter().map(by_name).collect(),
        Some(v @ Value::String(_)) => Ok(vec![by_name(v)?]),
        Some(v) => {
            Err(ModelError::config(path, "pooling_mode", format!("`{v}` must be a mode name or a list of them")))
        }
        None => {
            let set: Vec<PoolingMode> = PoolingMode::FLAGS
                .iter()
                .filter(|(k, _)| cfg.get(*k).and_then(Value::as_bool) == Some(true))
                .map(|(_, m)| *m)
                .collect();
            Ok(if set.is_empty() { vec![PoolingMode::Mean] } else { set })
        }
    }
}

fn read_json(path: &Path) -> Result<Value> {
    let text = crate::config::read_small_text(path, 1 << 20)?;
    serde_json::from_str(&text).map_err(|e| ModelError::json(path, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(modules: &str, pooling: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(MODULES_FILE), modules).unwrap();
        std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
        std::fs::write(dir.path().join("1_Pooling/config.json"), pooling).unwrap();
        dir
    }

    const MODULES: &str = r#"[
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]"#;

    #[test]
    fn reads_legacy_flags_and_mode_lists() {
        let legacy =
            r#"{"word_embedding_dimension": 8, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#;
        let m = read(folder(MODULES, legacy).path()).unwrap().unwrap();
        assert_eq!(m, SentenceModules { pooling: vec![PoolingMode::Cls], normalize: true });
        let none_set = r#"{"word_embedding_dimension": 8}"#;
        assert_eq!(read(folder(MODULES, none_set).path()).unwrap().unwrap().pooling, vec![PoolingMode::Mean]);
        let list = r#"{"embedding_dimension": 8, "pooling_mode": ["max", "lasttoken"]}"#;
        let m = read(folder(MODULES, list).path()).unwrap().unwrap();
        assert_eq!(m.pooling, vec![PoolingMode::Max, PoolingMode::LastToken]);
    }

    #[test]
    fn refuses_what_it_does_not_build_by_name() {
        let dense = MODULES.replace("2_Normalize", "2_Dense").replace("models.Normalize", "models.Dense");
        let e = read(folder(&dense, r#"{"pooling_mode": "mean"}"#).path()).unwrap_err().to_string();
        assert!(e.contains("sentence_transformers.models.Dense") && e.contains("not supported"), "{e}");
        let e = read(folder(MODULES, r#"{"pooling_mode": "median"}"#).path()).unwrap_err().to_string();
        assert!(e.contains("median") && e.contains("weightedmean"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
    }
}
