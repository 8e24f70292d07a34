//! sentence-transformers checkpoints: the modules after the transformer (`modules.json`) that
//! turn token embeddings into one sentence embedding, for `--task sentence-embedding`.
//!
//! `SentenceTransformer.encode` runs the modules of `modules.json` in order: the `Transformer`
//! (the checkpoint's encoder at the folder's root), a `Pooling` (its `config.json`: the
//! `pooling_mode` string or list of sentence-transformers 5+, or the older `pooling_mode_*`
//! flags; several modes are concatenated in their order), any number of `Dense` projections
//! (`act(x Wᵀ + b)`, plus `x` or a projection of it with `use_residual`; their weights in the
//! module folder's `model.safetensors`, which the checkpoint maps as `sentence.<index>.*`), and
//! optionally a `Normalize` (`x / max(‖x‖₂, 1e-12)`). The export computes the same in the
//! graph: the outputs `last_hidden_state` (sentence-transformers' `token_embeddings`, under the
//! name its onnx and openvino backends read) and `sentence_embedding`. A module of any other kind (`Router`, `StaticEmbedding`, custom code) is refused
//! by name, as are a Transformer in a subfolder, a Dense over other features than the sentence
//! embedding and an activation other than torch's identity, tanh, sigmoid, ReLU, GELU and SiLU. `include_prompt: false` changes nothing here: sentence-
//! transformers drops a prompt's tokens only when `encode` is given a prompt, which a graph
//! cannot know; the graph pools every unpadded token, as `encode` does without one.

use std::path::{Path, PathBuf};

use hfexport_core::Activation;
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
    /// The `Dense` modules after the pooling, in order.
    pub dense: Vec<Dense>,
    /// A `Normalize` module follows.
    pub normalize: bool,
}

/// A `Dense` module: `act(x Wᵀ + b)`, plus the input (`in == out`) or `x Rᵀ` with `use_residual`.
#[derive(Debug, Clone, PartialEq)]
pub struct Dense {
    /// Its weights' file (`<folder>/model.safetensors`).
    pub file: PathBuf,
    /// The prefix the checkpoint maps its tensors under: `sentence.<index in modules.json>`
    /// (`linear.weight` is `sentence.2.linear.weight`).
    pub prefix: String,
    pub in_features: usize,
    pub out_features: usize,
    pub bias: bool,
    pub activation: DenseActivation,
    pub residual: bool,
}

/// A `Dense` module's `activation_function` (torch's class, as sentence-transformers saves it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenseActivation {
    Identity,
    Tanh,
    Sigmoid,
    Act(Activation),
}

impl DenseActivation {
    const NAMES: [(&'static str, DenseActivation); 6] = [
        ("torch.nn.modules.linear.Identity", DenseActivation::Identity),
        ("torch.nn.modules.activation.Tanh", DenseActivation::Tanh),
        ("torch.nn.modules.activation.Sigmoid", DenseActivation::Sigmoid),
        ("torch.nn.modules.activation.ReLU", DenseActivation::Act(Activation::Relu)),
        ("torch.nn.modules.activation.GELU", DenseActivation::Act(Activation::Gelu)),
        ("torch.nn.modules.activation.SiLU", DenseActivation::Act(Activation::Silu)),
    ];
}

/// The configs sentence-transformers reads at a checkpoint's root, beside `config.json`.
pub const CONFIG_FILES: [&str; 3] = [MODULES_FILE, "config_sentence_transformers.json", "sentence_bert_config.json"];

/// The module folders `modules.json` in `dir` names (`1_Pooling`, `2_Dense`, …), relative to
/// `dir`: what an export carries over, with [`CONFIG_FILES`], so that `SentenceTransformer`
/// loads from it the modules the checkpoint has. Empty without `modules.json`; a path that
/// leaves the folder is an error naming it.
pub fn module_folders(dir: &Path) -> Result<Vec<PathBuf>> {
    let path = dir.join(MODULES_FILE);
    if !path.is_file() {
        return Ok(vec![]);
    }
    let Value::Array(modules) = read_json(&path)? else {
        return Err(ModelError::config(&path, "<root>", "must be a JSON array of modules"));
    };
    let mut folders = vec![];
    for (i, m) in modules.iter().enumerate() {
        let folder = Path::new(m.get("path").and_then(Value::as_str).unwrap_or(""));
        if folder.as_os_str().is_empty() {
            continue;
        }
        if !folder.components().all(|c| matches!(c, std::path::Component::Normal(_))) {
            let msg = format!("`{}` is not a folder inside the checkpoint", folder.display());
            return Err(ModelError::config(&path, &format!("[{i}].path"), msg));
        }
        folders.push(folder.to_path_buf());
    }
    Ok(folders)
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
    let (mut transformer, mut pooling, mut dense, mut normalize) = (false, None, vec![], false);
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
            ("Dense", true, Some(_), false) if folder.is_empty() => {
                return Err(ModelError::config(&path, &key("path"), "a Dense module needs a folder of its own"))
            }
            ("Dense", true, Some(_), false) => dense.push(read_dense(&dir.join(folder), i)?),
            ("Normalize", true, Some(_), false) => normalize = true,
            (name @ ("Transformer" | "Pooling" | "Dense" | "Normalize"), ..) => {
                return Err(ModelError::config(
                    &path,
                    &key("type"),
                    format!(
                        "`{name}` out of place: supported is Transformer, Pooling, any Dense, then optionally \
                         Normalize"
                    ),
                ))
            }
            _ => {
                return Err(ModelError::config(
                    &path,
                    &key("type"),
                    format!(
                        "the module `{kind}` is not supported for sentence-embedding (supported: Transformer, \
                         Pooling, Dense, Normalize)"
                    ),
                ))
            }
        }
    }
    match pooling {
        Some(pooling) => Ok(Some(SentenceModules { pooling, dense, normalize })),
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

/// A `Dense` module from its folder's `config.json` (module `index` of `modules.json`): the
/// keys `Dense.get_config_dict` writes, the activation tanh when the key is absent (the class
/// default), and its weights in the folder's `model.safetensors`.
fn read_dense(folder: &Path, index: usize) -> Result<Dense> {
    let path = folder.join("config.json");
    let cfg = read_json(&path)?;
    let size = |k: &str| {
        cfg.get(k)
            .and_then(Value::as_u64)
            .filter(|&v| v > 0)
            .map(|v| v as usize)
            .ok_or_else(|| ModelError::config(&path, k, "must be a positive integer"))
    };
    let flag = |k: &str, default: bool| match cfg.get(k) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(ModelError::config(&path, k, format!("must be true or false, got {v}"))),
    };
    for k in ["module_input_name", "module_output_name"] {
        match cfg.get(k).map(|v| v.as_str().ok_or(v)) {
            None | Some(Ok("sentence_embedding")) => {}
            Some(Err(v)) => return Err(ModelError::config(&path, k, format!("must be a string, got {v}"))),
            Some(Ok(other)) => {
                return Err(ModelError::config(
                    &path,
                    k,
                    format!("`{other}` is not supported (a Dense over the sentence embedding only)"),
                ))
            }
        }
    }
    let activation = match cfg.get("activation_function") {
        None => DenseActivation::Tanh,
        Some(v) => {
            let name = v.as_str().unwrap_or_default();
            DenseActivation::NAMES.iter().find(|(n, _)| *n == name).map(|(_, a)| *a).ok_or_else(|| {
                let valid: Vec<&str> = DenseActivation::NAMES.iter().map(|(n, _)| *n).collect();
                ModelError::config(
                    &path,
                    "activation_function",
                    format!("`{v}` is not supported; supported: {}", valid.join(", ")),
                )
            })?
        }
    };
    let file = folder.join("model.safetensors");
    if !file.is_file() {
        let why = match folder.join("pytorch_model.bin").is_file() {
            true => "only safetensors weights are read (pytorch_model.bin is not)",
            false => "is missing",
        };
        return Err(ModelError::config(&file, "<file>", why));
    }
    Ok(Dense {
        file,
        prefix: format!("sentence.{index}"),
        in_features: size("in_features")?,
        out_features: size("out_features")?,
        bias: flag("bias", true)?,
        activation,
        residual: flag("use_residual", false)?,
    })
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
        assert_eq!(m, SentenceModules { pooling: vec![PoolingMode::Cls], dense: vec![], normalize: true });
        let none_set = r#"{"word_embedding_dimension": 8}"#;
        assert_eq!(read(folder(MODULES, none_set).path()).unwrap().unwrap().pooling, vec![PoolingMode::Mean]);
        let list = r#"{"embedding_dimension": 8, "pooling_mode": ["max", "lasttoken"]}"#;
        let m = read(folder(MODULES, list).path()).unwrap().unwrap();
        assert_eq!(m.pooling, vec![PoolingMode::Max, PoolingMode::LastToken]);
    }

    #[test]
    fn refuses_what_it_does_not_build_by_name() {
        let router = MODULES.replace("2_Normalize", "2_Router").replace("models.Normalize", "models.Router");
        let e = read(folder(&router, r#"{"pooling_mode": "mean"}"#).path()).unwrap_err().to_string();
        assert!(e.contains("sentence_transformers.models.Router") && e.contains("not supported"), "{e}");
        let e = read(folder(MODULES, r#"{"pooling_mode": "median"}"#).path()).unwrap_err().to_string();
        assert!(e.contains("median") && e.contains("weightedmean"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
    }

    /// A `Dense` between the pooling and the `Normalize`, its config as sentence-transformers
    /// writes it (the activation's torch class); what it does not build is refused naming the key.
    #[test]
    fn reads_dense_modules_and_refuses_their_other_forms() {
        let modules = MODULES.replace(
            r#"{"idx": 2, "name": "2", "path": "2_Normalize""#,
            r#"{"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
               {"idx": 3, "name": "3", "path": "3_Normalize""#,
        );
        let dir = folder(&modules, r#"{"pooling_mode": "mean"}"#);
        let dense_dir = dir.path().join("2_Dense");
        std::fs::create_dir(&dense_dir).unwrap();
        let write = |cfg: &str| std::fs::write(dense_dir.join("config.json"), cfg).unwrap();
        write(
            r#"{"in_features": 8, "out_features": 4, "bias": false, "activation_function": "torch.nn.modules.activation.Tanh"}"#,
        );
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("model.safetensors") && e.contains("missing"), "{e}");
        std::fs::write(dense_dir.join("model.safetensors"), b"").unwrap();
        let m = read(dir.path()).unwrap().unwrap();
        let want = Dense {
            file: dense_dir.join("model.safetensors"),
            prefix: "sentence.2".into(),
            in_features: 8,
            out_features: 4,
            bias: false,
            activation: DenseActivation::Tanh,
            residual: false,
        };
        assert_eq!((m.dense, m.normalize), (vec![want], true));
        write(
            r#"{"in_features": 8, "out_features": 4, "activation_function": "torch.nn.modules.activation.Softsign"}"#,
        );
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("activation_function") && e.contains("Softsign") && e.contains("not supported"), "{e}");
        write(r#"{"in_features": 8, "out_features": 4, "module_input_name": "token_embeddings"}"#);
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("module_input_name") && e.contains("token_embeddings"), "{e}");
        write(r#"{"in_features": 8, "out_features": 4, "module_output_name": 3}"#);
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("module_output_name") && e.contains("must be a string"), "{e}");
        // a Dense at the checkpoint's root would map the encoder's own weights as its
        let rooted = modules.replace(r#""path": "2_Dense""#, r#""path": """#);
        let e = read(folder(&rooted, r#"{"pooling_mode": "mean"}"#).path()).unwrap_err().to_string();
        assert!(e.contains("[2].path") && e.contains("folder of its own"), "{e}");
    }
}
