//! A Hugging Face checkpoint folder: `config.json` plus mmapped safetensors weights.
//!
//! Weights are found the way transformers finds them: `model.safetensors.index.json` (shards
//! named by its `weight_map`), else `model.safetensors`, else every `*.safetensors` in the
//! folder. Each file is mapped once and only its header is read; tensor bytes are decoded when
//! a writer or the evaluator asks for them ([`TensorSource`]), so opening a 100 GB checkpoint
//! costs a few header reads.
//!
//! The index is untrusted input: a shard name must stay inside the checkpoint folder (no
//! absolute paths, no `..`, no symlink leading out), every tensor it lists must be in its shard,
//! and no tensor may be stored twice.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use hfexport_core::{Error as CoreError, Tensor, TensorInfo, TensorSource};
use serde_json::Value;

use crate::config::{read_small_text, ModelConfig};
use crate::error::{ModelError, Result};
use crate::prequantized::{self, PreQuant};
use crate::safetensors::SafetensorsFile;
use hfexport_core::DType;

pub const INDEX_FILE: &str = "model.safetensors.index.json";
pub const SINGLE_FILE: &str = "model.safetensors";

const MAX_INDEX_BYTES: u64 = hfexport_core::limits::SHARD_INDEX;

/// A checkpoint folder, opened: its config and an index of its tensors.
#[derive(Debug)]
pub struct Checkpoint {
    pub config: ModelConfig,
    /// GPTQ/AWQ layout when `config.json` has a `quantization_config`.
    pub prequantized: Option<PreQuant>,
    dir: PathBuf,
    files: Vec<SafetensorsFile>,
    /// Tensor name -> (index into `files`, its name in that file): the same name but for a
    /// sentence-transformers `Dense` module's tensors, mapped under the module's prefix
    /// (`sentence.2.linear.weight` is `linear.weight` of `2_Dense/model.safetensors`).
    tensors: BTreeMap<String, (usize, String)>,
}

/// Whether the family of `config` reads MXFP4 experts (GPT-OSS's stacked form).
fn reads_mxfp4(config: &ModelConfig) -> Result<bool> {
    let moe = config.family()?.layout.moe;
    Ok(moe.is_some_and(|m| m.form == crate::layout::StackedForm::TransposedInterleaved))
}

impl Checkpoint {
    /// Reads `config.json` and maps the weight files of `dir`: a folder, or a hub repo id
    /// (`org/name[@revision]`) whose snapshot the Hugging Face cache holds ([`crate::hub`]).
    pub fn open(dir: &Path) -> Result<Checkpoint> {
        let dir = &crate::hub::resolve(dir)?;
        let config = ModelConfig::from_dir(dir)?;
        let path = dir.join("config.json");
        let raw: Value =
            serde_json::from_str(&read_small_text(&path, 64 << 20)?).map_err(|e| ModelError::json(&path, &e))?;
        let prequantized = prequantized::from_config(&raw, &path)?;
        if prequantized::method(&raw) == Some(prequantized::MXFP4) && !reads_mxfp4(&config)? {
            return Err(ModelError::config(
                &path,
                "quantization_config.quant_method",
                format!("`mxfp4` is read for GPT-OSS's experts only, not for {}", config.architecture),
            ));
        }
        let mut files = open_weight_files(dir)?;
        let mut tensors = index_tensors(&files)?;
        for dense in config.sentence.iter().flat_map(|m| &m.dense) {
            let file = SafetensorsFile::open(&dense.file)?;
            for (name, _) in file.tensors() {
                let mapped = format!("{}.{name}", dense.prefix);
                if let Some((first, _)) = tensors.insert(mapped.clone(), (files.len(), name.to_string())) {
                    let first = files[first].path().to_path_buf();
                    return Err(ModelError::DuplicateTensor { tensor: mapped, first, second: dense.file.clone() });
                }
            }
            files.push(file);
        }
        Ok(Checkpoint { config, prequantized, dir: dir.to_path_buf(), files, tensors })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every tensor name, sorted.
    pub fn tensor_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.tensors.keys().map(String::as_str)
    }

    /// The weight files, in the order they were opened.
    pub fn weight_files(&self) -> impl Iterator<Item = &Path> + '_ {
        self.files.iter().map(SafetensorsFile::path)
    }

    /// The file holding `name`, and its name there.
    fn file_of(&self, name: &str) -> Option<(&SafetensorsFile, &str)> {
        self.tensors.get(name).map(|(i, inner)| (&self.files[*i], inner.as_str()))
    }

    /// Dtype and shape of the stored tensor `name`.
    fn stored_info(&self, name: &str) -> Option<TensorInfo> {
        let (file, inner) = self.file_of(name)?;
        file.info(inner)
    }

    /// Dtype and shape of `name` from its file header (or, for a GPTQ/AWQ module, of a virtual
    /// tensor: see [`crate::prequantized`]).
    pub fn tensor_info(&self, name: &str) -> Option<TensorInfo> {
        match self.file_of(name) {
            Some(_) => self.stored_info(name),
            None => self.virtual_info(name),
        }
    }

    /// `(module prefix, part)` of a virtual tensor of a quantized module: `P.weight` (part
    /// `""`, the dequantized weight) or `P.qweight:values|:zeros|:scales`.
    fn virtual_parts<'n>(&self, name: &'n str) -> Option<(&'n str, &'n str)> {
        self.prequantized?;
        let (prefix, part) = match name.strip_suffix(".weight") {
            Some(p) => (p, ""),
            None => {
                let (q, part) = name.split_at(name.rfind(':')?);
                (q.strip_suffix(".qweight")?, part)
            }
        };
        self.tensors.contains_key(&format!("{prefix}.qweight")).then_some((prefix, part))
    }

    fn virtual_info(&self, name: &str) -> Option<TensorInfo> {
        let (prefix, part) = self.virtual_parts(name)?;
        let pq = self.prequantized?;
        let qweight = self.stored_info(&format!("{prefix}.qweight"))?;
        let scales = self.stored_info(&format!("{prefix}.scales"))?;
        match part {
            "" => pq.part_info(prequantized::VALUES, &qweight, &scales).map(|i| TensorInfo { dtype: DType::F32, ..i }),
            p => pq.part_info(p, &qweight, &scales),
        }
    }

    /// Materialises a virtual tensor of a GPTQ/AWQ module.
    fn load_virtual(&self, name: &str) -> Result<Tensor> {
        let (prefix, part) = self.virtual_parts(name).ok_or_else(|| self.missing(name))?;
        let pq = self.prequantized.ok_or_else(|| self.missing(name))?;
        let stored = |s: &str| self.load_tensor(&format!("{prefix}.{s}"));
        let values = || -> Result<Tensor> {
            let v = pq.values(&stored("qweight")?)?;
            if let Some(g_idx) = self.tensor_info(&format!("{prefix}.g_idx")).map(|_| stored("g_idx")).transpose()? {
                let groups =
                    self.virtual_info(&format!("{prefix}.qweight{}", prequantized::SCALES)).map_or(1, |i| i.shape[1]);
                pq.check_g_idx(&format!("{prefix}.g_idx"), &g_idx, v.shape()[1], groups)?;
            }
            Ok(v)
        };
        match part {
            prequantized::VALUES => values(),
            prequantized::ZEROS => Ok(pq.zeros(&stored("qzeros")?)?),
            prequantized::SCALES => Ok(pq.scales(&stored("scales")?)?),
            _ => {
                let (q, z, s) = (values()?, pq.zeros(&stored("qzeros")?)?, pq.scales(&stored("scales")?)?);
                Ok(hfexport_core::quant::dequantize(&q, &s.cast(DType::F32), Some(&z))?)
            }
        }
    }

    /// The stored bytes of `name` (a view of the mmap).
    pub fn tensor_bytes(&self, name: &str) -> Option<&[u8]> {
        let (file, inner) = self.file_of(name)?;
        file.bytes(inner)
    }

    /// Decodes `name`.
    pub fn load_tensor(&self, name: &str) -> Result<Tensor> {
        match self.file_of(name) {
            Some((file, inner)) => file.load(inner),
            None => Err(self.missing(name)),
        }
    }

    /// Checks that `name` exists, is a float tensor (f32/f16/bf16) and has `shape`.
    pub fn expect_tensor(&self, name: &str, shape: &[usize]) -> Result<TensorInfo> {
        self.expect_stored(name, shape, true)
    }

    /// `name` as a u8 tensor of `shape` (MXFP4 blocks and scales), or an error naming it.
    pub fn expect_bytes(&self, name: &str, shape: &[usize]) -> Result<TensorInfo> {
        self.expect_stored(name, shape, false)
    }

    fn expect_stored(&self, name: &str, shape: &[usize], float: bool) -> Result<TensorInfo> {
        let info = self.tensor_info(name).ok_or_else(|| self.missing(name))?;
        let path = self.file_of(name).map_or_else(|| self.dir.clone(), |(f, _)| f.path().to_path_buf());
        let mismatch = |expected: String| ModelError::TensorMismatch {
            tensor: name.to_string(),
            path: path.clone(),
            expected,
            actual: format!("{} {:?}", info.dtype, info.shape),
        };
        if float && !info.dtype.is_float() {
            return Err(mismatch(format!("a float tensor (f32, f16 or bf16) {shape:?}")));
        }
        if !float && info.dtype != DType::U8 {
            return Err(mismatch(format!("a u8 tensor {shape:?}")));
        }
        if info.shape != shape {
            return Err(mismatch(format!("shape {shape:?}")));
        }
        Ok(info)
    }

    /// The error for a tensor the model needs and the checkpoint lacks; a sentence-transformers
    /// Dense module's own (`sentence.<idx>.linear.bias`) is named as its file holds it.
    fn missing(&self, name: &str) -> ModelError {
        let dense = self.config.sentence.iter().flat_map(|m| &m.dense);
        let in_dense = dense.filter_map(|d| Some((d, name.strip_prefix(&d.prefix)?.strip_prefix('.')?))).next();
        match in_dense {
            Some((d, inner)) => ModelError::MissingTensor { tensor: inner.to_string(), path: d.file.clone() },
            None => ModelError::MissingTensor { tensor: name.to_string(), path: self.dir.clone() },
        }
    }

    fn unknown(&self, name: &str) -> CoreError {
        CoreError::Weight { tensor: name.to_string(), msg: format!("not found in checkpoint {}", self.dir.display()) }
    }
}

impl TensorSource for Checkpoint {
    fn info(&self, name: &str) -> hfexport_core::Result<TensorInfo> {
        self.tensor_info(name).ok_or_else(|| self.unknown(name))
    }

    fn load(&self, name: &str) -> hfexport_core::Result<Tensor> {
        if self.file_of(name).is_none() && self.virtual_parts(name).is_some() {
            return self
                .load_virtual(name)
                .map_err(|e| CoreError::Weight { tensor: name.to_string(), msg: e.to_string() });
        }
        let (file, inner) = self.file_of(name).ok_or_else(|| self.unknown(name))?;
        file.load(inner).map_err(|e| CoreError::Weight { tensor: name.to_string(), msg: e.to_string() })
    }

    fn raw(&self, name: &str) -> Option<&[u8]> {
        self.tensor_bytes(name)
    }

    fn release(&self, name: &str) {
        if let Some((file, inner)) = self.file_of(name) {
            file.release(inner);
        }
    }

    fn release_bytes(&self, bytes: &[u8]) {
        let _ = self.files.iter().any(|f| f.release_bytes(bytes));
    }
}

/// Opens the weight files of `dir`, in the order transformers would pick them.
fn open_weight_files(dir: &Path) -> Result<Vec<SafetensorsFile>> {
    let index = dir.join(INDEX_FILE);
    if index.is_file() {
        return open_sharded(dir, &index);
    }
    let single = dir.join(SINGLE_FILE);
    if single.is_file() {
        return Ok(vec![SafetensorsFile::open(&single)?]);
    }
    let found = list_safetensors(dir)?;
    if found.is_empty() {
        return Err(ModelError::NoWeights {
            dir: dir.to_path_buf(),
            has_bin: dir.join("pytorch_model.bin").exists() || dir.join("pytorch_model.bin.index.json").exists(),
        });
    }
    found.iter().map(SafetensorsFile::open).collect()
}

/// Every `*.safetensors` file directly in `dir`, sorted by name.
fn list_safetensors(dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |e| ModelError::io(dir, e);
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.extension().is_some_and(|e| e == "safetensors") && path.is_file() {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

/// Builds the name -> file map; a name stored in two files is an error.
fn index_tensors(files: &[SafetensorsFile]) -> Result<BTreeMap<String, (usize, String)>> {
    let mut tensors: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for (i, file) in files.iter().enumerate() {
        for (name, _) in file.tensors() {
            if let Some((first, _)) = tensors.get(name) {
                return Err(ModelError::DuplicateTensor {
                    tensor: name.to_string(),
                    first: files[*first].path().to_path_buf(),
                    second: file.path().to_path_buf(),
                });
            }
            tensors.insert(name.to_string(), (i, name.to_string()));
        }
    }
    Ok(tensors)
}

// ---------------------------------------------------------------------------------------------
// Sharded checkpoints

/// Opens the shards named by the index and checks each listed tensor is in its shard.
fn open_sharded(dir: &Path, index_path: &Path) -> Result<Vec<SafetensorsFile>> {
    let weight_map = read_weight_map(index_path)?;
    let roots = shard_roots(dir)?;
    let mut shard_ids: BTreeMap<&str, usize> = BTreeMap::new();
    let mut files = Vec::new();
    for (tensor, shard) in &weight_map {
        let id = match shard_ids.get(shard.as_str()) {
            Some(&id) => id,
            None => {
                let path = resolve_shard(dir, &roots, index_path, tensor, shard)?;
                files.push(SafetensorsFile::open(&path)?);
                shard_ids.insert(shard, files.len() - 1);
                files.len() - 1
            }
        };
        if !files[id].contains(tensor) {
            return Err(ModelError::MissingTensor { tensor: tensor.clone(), path: files[id].path().to_path_buf() });
        }
    }
    Ok(files)
}

/// The `weight_map` of an index file: tensor name -> shard file name.
fn read_weight_map(index_path: &Path) -> Result<BTreeMap<String, String>> {
    let text = read_small_text(index_path, MAX_INDEX_BYTES)?;
    let value: Value = serde_json::from_str(&text).map_err(|e| ModelError::json(index_path, &e))?;
    let Some(Value::Object(map)) = value.get("weight_map") else {
        return Err(ModelError::shard_index(index_path, "`weight_map` is missing or not an object"));
    };
    map.iter()
        .map(|(tensor, shard)| match shard {
            Value::String(s) => Ok((tensor.clone(), s.clone())),
            _ => Err(ModelError::shard_index(
                index_path,
                format!("`weight_map` entry `{tensor}` must be a file name, got {shard}"),
            )),
        })
        .collect()
}

/// Where shards may resolve to after following symlinks: the checkpoint folder and, when it is
/// a Hugging Face cache snapshot (`<repo>/snapshots/<revision>`, whose files are symlinks to
/// `<repo>/blobs/<hash>`), that repository's `blobs` folder.
fn shard_roots(dir: &Path) -> Result<Vec<PathBuf>> {
    let canonical = dir.canonicalize().map_err(|e| ModelError::io(dir, e))?;
    let mut roots = vec![canonical.clone()];
    if let Some(snapshots) = canonical.parent().filter(|p| p.ends_with("snapshots")) {
        if let Some(repo) = snapshots.parent() {
            roots.push(repo.join("blobs"));
        }
    }
    Ok(roots)
}

/// The path of a shard, which must be a plain relative path and stay inside [`shard_roots`]
/// after following symlinks.
fn resolve_shard(dir: &Path, roots: &[PathBuf], index_path: &Path, tensor: &str, shard: &str) -> Result<PathBuf> {
    let bad = |why: &str| {
        ModelError::shard_index(index_path, format!("`weight_map` entry `{tensor}`: shard `{shard}` {why}"))
    };
    let rel = Path::new(shard);
    let plain = rel.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if shard.is_empty() || rel.is_absolute() || !plain {
        return Err(bad("must be a plain relative path inside the checkpoint folder"));
    }
    let path = dir.join(rel);
    let canonical = match path.canonicalize() {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(bad(&format!("does not exist ({})", path.display())))
        }
        Err(e) => return Err(ModelError::io(&path, e)),
    };
    if !roots.iter().any(|root| canonical.starts_with(root)) {
        return Err(bad(&format!("resolves to {}, outside the checkpoint folder", canonical.display())));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::safetensors::write_safetensors;
    use hfexport_core::DType;

    const CONFIG: &str = r#"{
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": 16, "hidden_size": 8, "intermediate_size": 16,
        "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 32
    }"#;

    fn folder() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), CONFIG).unwrap();
        dir
    }

    fn tensor(shape: &[usize]) -> Tensor {
        let n = shape.iter().product();
        Tensor::f32(shape.to_vec(), (0..n).map(|i| i as f32).collect()).unwrap()
    }

    fn write(dir: &Path, file: &str, tensors: &[(&str, &Tensor)]) {
        write_safetensors(dir.join(file), tensors, &BTreeMap::new()).unwrap();
    }

    fn write_index(dir: &Path, entries: &[(&str, &str)]) {
        let map: serde_json::Map<String, Value> =
            entries.iter().map(|(t, f)| (t.to_string(), Value::from(*f))).collect();
        let index = serde_json::json!({"metadata": {"total_size": 0}, "weight_map": map});
        std::fs::write(dir.join(INDEX_FILE), index.to_string()).unwrap();
    }

    fn open_err(dir: &Path) -> (ModelError, String) {
        let err = Checkpoint::open(dir).unwrap_err();
        let msg = err.to_string();
        (err, msg)
    }

    #[test]
    fn checkpoint_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Checkpoint>();
    }

    #[test]
    fn sharded_checkpoint_reads_lazily() {
        let dir = folder();
        let (a, b, c) = (tensor(&[16, 8]), tensor(&[8]), tensor(&[2, 2]));
        write(dir.path(), "model-00001-of-00002.safetensors", &[("embed", &a)]);
        write(dir.path(), "model-00002-of-00002.safetensors", &[("norm", &b), ("extra", &c)]);
        write_index(
            dir.path(),
            &[("embed", "model-00001-of-00002.safetensors"), ("norm", "./model-00002-of-00002.safetensors")],
        );
        let ckpt = Checkpoint::open(dir.path()).unwrap();
        assert_eq!(ckpt.config.hidden_size, 8);
        assert_eq!(ckpt.tensor_names().collect::<Vec<_>>(), ["embed", "extra", "norm"]);
        assert_eq!(ckpt.weight_files().count(), 2);
        let src: &dyn TensorSource = &ckpt;
        assert_eq!(src.info("norm").unwrap(), TensorInfo { dtype: DType::F32, shape: vec![8] });
        assert_eq!(src.load("embed").unwrap(), a);
        assert_eq!(ckpt.tensor_bytes("norm").unwrap(), b.to_le_bytes().as_slice());
        assert_eq!(ckpt.expect_tensor("embed", &[16, 8]).unwrap().shape, vec![16, 8]);
    }

    #[test]
    fn unknown_tensor_through_tensor_source_names_the_folder() {
        let dir = folder();
        write(dir.path(), SINGLE_FILE, &[("w", &tensor(&[2]))]);
        let ckpt = Checkpoint::open(dir.path()).unwrap();
        for err in [ckpt.info("nope").unwrap_err(), ckpt.load("nope").unwrap_err()] {
            assert!(matches!(&err, CoreError::Weight { tensor, .. } if tensor == "nope"));
            assert!(err.to_string().contains(&dir.path().display().to_string()), "{err}");
        }
    }

    #[test]
    fn expect_tensor_reports_missing_shape_and_dtype() {
        let dir = folder();
        let ids = Tensor::i64(vec![2], vec![1, 2]).unwrap();
        write(dir.path(), SINGLE_FILE, &[("w", &tensor(&[4, 8])), ("ids", &ids)]);
        let ckpt = Checkpoint::open(dir.path()).unwrap();

        let err = ckpt.expect_tensor("q_proj", &[4, 8]).unwrap_err();
        assert!(matches!(err, ModelError::MissingTensor { .. }));
        assert!(err.to_string().contains("`q_proj`") && err.to_string().contains(&dir.path().display().to_string()));

        let err = ckpt.expect_tensor("w", &[8, 4]).unwrap_err();
        assert!(matches!(err, ModelError::TensorMismatch { .. }));
        let msg = err.to_string();
        assert!(msg.contains("`w`") && msg.contains("[8, 4]") && msg.contains("f32 [4, 8]"), "{msg}");
        assert!(msg.contains(SINGLE_FILE), "{msg}");

        let msg = ckpt.expect_tensor("ids", &[2]).unwrap_err().to_string();
        assert!(msg.contains("`ids`") && msg.contains("float") && msg.contains("i64"), "{msg}");
    }

    #[test]
    fn no_config_json() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), SINGLE_FILE, &[("w", &tensor(&[2]))]);
        let (err, msg) = open_err(dir.path());
        assert!(matches!(err, ModelError::Io { .. }));
        assert!(msg.contains("config.json"), "{msg}");
    }

    #[test]
    fn no_weights() {
        let dir = folder();
        std::fs::write(dir.path().join("pytorch_model.bin"), b"").unwrap();
        let (err, msg) = open_err(dir.path());
        assert!(matches!(err, ModelError::NoWeights { has_bin: true, .. }));
        assert!(msg.contains(&dir.path().display().to_string()) && msg.contains("pytorch_model.bin"), "{msg}");
    }

    #[test]
    fn loose_files_are_read_sorted_and_duplicates_refused() {
        let dir = folder();
        let t = tensor(&[2]);
        write(dir.path(), "b.safetensors", &[("w", &t)]);
        write(dir.path(), "a.safetensors", &[("v", &t)]);
        let ckpt = Checkpoint::open(dir.path()).unwrap();
        let names: Vec<_> = ckpt.weight_files().map(|p| p.file_name().unwrap().to_owned()).collect();
        assert_eq!(names, ["a.safetensors", "b.safetensors"]);

        write(dir.path(), "c.safetensors", &[("w", &t)]);
        let (err, msg) = open_err(dir.path());
        assert!(matches!(err, ModelError::DuplicateTensor { .. }));
        assert!(msg.contains("`w`") && msg.contains("b.safetensors") && msg.contains("c.safetensors"), "{msg}");
    }

    #[test]
    fn duplicate_tensor_across_indexed_shards() {
        let dir = folder();
        let t = tensor(&[2]);
        write(dir.path(), "s1.safetensors", &[("w", &t)]);
        write(dir.path(), "s2.safetensors", &[("w", &t), ("v", &t)]);
        write_index(dir.path(), &[("w", "s1.safetensors"), ("v", "s2.safetensors")]);
        let (err, msg) = open_err(dir.path());
        assert!(matches!(err, ModelError::DuplicateTensor { .. }));
        assert!(msg.contains("`w`") && msg.contains("s1.safetensors") && msg.contains("s2.safetensors"), "{msg}");
    }

    #[test]
    fn index_naming_a_missing_shard() {
        let dir = folder();
        write_index(dir.path(), &[("w", "model-00001-of-00002.safetensors")]);
        let (err, msg) = open_err(dir.path());
        assert!(matches!(err, ModelError::ShardIndex { .. }));
        assert!(msg.contains(INDEX_FILE) && msg.contains("model-00001-of-00002.safetensors"), "{msg}");
        assert!(msg.contains("does not exist"), "{msg}");
    }

    #[test]
    fn index_listing_a_tensor_its_shard_lacks() {
        let dir = folder();
        write(dir.path(), "s1.safetensors", &[("w", &tensor(&[2]))]);
        write_index(dir.path(), &[("w", "s1.safetensors"), ("v", "s1.safetensors")]);
        let (err, msg) = open_err(dir.path());
        assert!(matches!(err, ModelError::MissingTensor { .. }));
        assert!(msg.contains("`v`") && msg.contains("s1.safetensors"), "{msg}");
    }

    #[test]
    fn index_paths_escaping_the_folder_are_refused() {
        let outer = tempfile::tempdir().unwrap();
        let dir = outer.path().join("ckpt");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("config.json"), CONFIG).unwrap();
        write(outer.path(), "x.safetensors", &[("w", &tensor(&[2]))]);
        let absolute = outer.path().join("x.safetensors");
        for bad in ["../x.safetensors", "sub/../../x.safetensors", absolute.to_str().unwrap(), ""] {
            write_index(&dir, &[("w", bad)]);
            let (err, msg) = open_err(&dir);
            assert!(matches!(err, ModelError::ShardIndex { .. }), "{bad}: {err:?}");
            assert!(msg.contains(INDEX_FILE) && msg.contains(&format!("`{bad}`")), "{msg}");
            assert!(msg.contains("plain relative path"), "{msg}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlinked_shard_leading_outside_is_refused() {
        let outer = tempfile::tempdir().unwrap();
        let dir = outer.path().join("ckpt");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("config.json"), CONFIG).unwrap();
        write(outer.path(), "x.safetensors", &[("w", &tensor(&[2]))]);
        std::os::unix::fs::symlink(outer.path().join("x.safetensors"), dir.join("link.safetensors")).unwrap();
        write_index(&dir, &[("w", "link.safetensors")]);
        let (err, msg) = open_err(&dir);
        assert!(matches!(err, ModelError::ShardIndex { .. }), "{err:?}");
        assert!(msg.contains("link.safetensors") && msg.contains("outside"), "{msg}");
    }

    #[cfg(unix)]
    #[test]
    fn hugging_face_cache_snapshots_may_link_to_their_blobs() {
        let repo = tempfile::tempdir().unwrap();
        let (blobs, snap) = (repo.path().join("blobs"), repo.path().join("snapshots/0123abcd"));
        std::fs::create_dir_all(&blobs).unwrap();
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::write(snap.join("config.json"), CONFIG).unwrap();
        write(&blobs, "f00d", &[("w", &tensor(&[2]))]);
        std::os::unix::fs::symlink("../../blobs/f00d", snap.join("model-00001-of-00001.safetensors")).unwrap();
        write_index(&snap, &[("w", "model-00001-of-00001.safetensors")]);
        assert_eq!(Checkpoint::open(&snap).unwrap().load_tensor("w").unwrap(), tensor(&[2]));

        // Anything else outside the snapshot is still refused.
        write(repo.path(), "elsewhere", &[("w", &tensor(&[2]))]);
        std::os::unix::fs::symlink("../../elsewhere", snap.join("evil.safetensors")).unwrap();
        write_index(&snap, &[("w", "evil.safetensors")]);
        let (err, msg) = open_err(&snap);
        assert!(matches!(err, ModelError::ShardIndex { .. }) && msg.contains("evil.safetensors"), "{msg}");
    }

    #[test]
    fn malformed_index() {
        let dir = folder();
        std::fs::write(dir.path().join(INDEX_FILE), "{\"weight_map\": ").unwrap();
        let (err, msg) = open_err(dir.path());
        assert!(matches!(err, ModelError::Json { .. }) && msg.contains(INDEX_FILE), "{msg}");
        std::fs::write(dir.path().join(INDEX_FILE), r#"{"weight_map": {"w": 3}}"#).unwrap();
        let (err, msg) = open_err(dir.path());
        assert!(matches!(err, ModelError::ShardIndex { .. }) && msg.contains("`w`"), "{msg}");
        std::fs::write(dir.path().join(INDEX_FILE), r#"{"metadata": {}}"#).unwrap();
        let (_, msg) = open_err(dir.path());
        assert!(msg.contains("weight_map") && msg.contains(INDEX_FILE), "{msg}");
    }
}
