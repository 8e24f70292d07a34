//! A small safetensors reader (mmap, zero copy) and writer.
//!
//! Format: an 8-byte little-endian header length `n`, `n` bytes of JSON
//! (`{"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {..}}`), then the
//! data section the offsets point into. We keep our own ~300 lines instead of the `safetensors`
//! crate so that every malformed file becomes a [`ModelError`] naming the file and the tensor,
//! and so that a checkpoint's tensors are views of one mmap that a writer can stream from.
//!
//! Everything the header claims is checked at [`SafetensorsFile::open`] against the real file
//! size (header length, dtype, shape products, offsets), so later accessors cannot index out of
//! bounds. The writer produces what Python's `safetensors` writes: header padded with spaces
//! to a multiple of 8 bytes, tensors contiguous in the order given.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use hfexport_core::tensor::checked_numel;
use hfexport_core::{DType, Tensor, TensorInfo};
use memmap2::Mmap;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{ModelError, Result};

/// Largest header we accept (the limit of the reference implementation).
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

const METADATA_KEY: &str = "__metadata__";

/// Where one tensor's bytes are, relative to the start of the data section.
#[derive(Debug, Clone)]
struct Entry {
    info: TensorInfo,
    begin: usize,
    end: usize,
}

/// A safetensors file mapped into memory, its header fully validated.
#[derive(Debug)]
pub struct SafetensorsFile {
    path: PathBuf,
    /// Kept open to notice the file changing size under the map (see [`SafetensorsFile::bytes`]).
    file: File,
    mmap: Mmap,
    data_start: usize,
    entries: BTreeMap<String, Entry>,
    metadata: BTreeMap<String, String>,
}

impl SafetensorsFile {
    /// Maps `path` and validates its header against the file size.
    pub fn open(path: impl AsRef<Path>) -> Result<SafetensorsFile> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| ModelError::io(path, e))?;
        let len = file.metadata().map_err(|e| ModelError::io(path, e))?.len();
        if len < 8 {
            let msg = format!("file is {len} bytes, too short for the 8-byte header length (truncated?)");
            return Err(ModelError::safetensors(path, msg));
        }
        // SAFETY: the map is read-only. A file truncated by another process while mapped would
        // fault on access: `bytes` checks the size before handing out each tensor's slice, which
        // leaves only a truncation during one tensor's copy undefended.
        let mmap = unsafe { Mmap::map(&file) }.map_err(|e| ModelError::io(path, e))?;
        let (header, data_start) = split_header(path, &mmap)?;
        let (entries, metadata) = parse_header(path, header, mmap.len() - data_start)?;
        Ok(SafetensorsFile { path: path.to_path_buf(), file, mmap, data_start, entries, metadata })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every tensor with its dtype and shape, sorted by name.
    pub fn tensors(&self) -> impl Iterator<Item = (&str, TensorInfo)> + '_ {
        self.entries.iter().map(|(name, e)| (name.as_str(), e.info.clone()))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    /// Dtype and shape of `name`, from the header only.
    pub fn info(&self, name: &str) -> Option<TensorInfo> {
        self.entries.get(name).map(|e| e.info.clone())
    }

    /// The stored little-endian bytes of `name`: a slice of the mmap, nothing copied. `None`
    /// also when the file no longer has the size it was mapped with (rewritten or truncated by
    /// another process): [`SafetensorsFile::load`] says so.
    pub fn bytes(&self, name: &str) -> Option<&[u8]> {
        let e = self.entries.get(name)?;
        self.changed_size().is_none().then_some(())?;
        self.mmap.get(self.data_start + e.begin..self.data_start + e.end)
    }

    /// The file's size now, when it differs from the mapped size.
    fn changed_size(&self) -> Option<u64> {
        let now = self.file.metadata().map_or(0, |m| m.len());
        (now != self.mmap.len() as u64).then_some(now)
    }

    /// Drops the resident pages of `name` (a writer is done with it), so streaming a model
    /// larger than memory does not keep it all mapped in. Later reads fault the pages back in.
    pub fn release(&self, name: &str) {
        if let Some(e) = self.entries.get(name) {
            // SAFETY: the map is a private read-only file mapping: MADV_DONTNEED only drops
            // clean pages, which the kernel re-reads from the file on the next access.
            let _ = unsafe {
                self.mmap.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    self.data_start + e.begin,
                    e.end - e.begin,
                )
            };
        }
    }

    /// Drops the resident pages under `bytes` when they are a piece of this file's map (a
    /// writer is done with one chunk of a tensor); returns whether they were. The range is
    /// widened to whole pages: a neighbour's page dropped too is read again when touched.
    pub fn release_bytes(&self, bytes: &[u8]) -> bool {
        let base = self.mmap.as_ptr() as usize;
        let start = bytes.as_ptr() as usize;
        if bytes.is_empty() || start < base || start + bytes.len() > base + self.mmap.len() {
            return false;
        }
        // SAFETY: as in `release`: clean pages of a private read-only file mapping.
        let _ =
            unsafe { self.mmap.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start - base, bytes.len()) };
        true
    }

    /// Decodes `name` into a host tensor of its stored dtype.
    pub fn load(&self, name: &str) -> Result<Tensor> {
        if let Some(now) = self.changed_size() {
            let msg = format!(
                "the file changed size while being read ({} bytes when opened, {now} now) before tensor `{name}` was \
                 read; was it rewritten by another program?",
                self.mmap.len()
            );
            return Err(ModelError::safetensors(&self.path, msg));
        }
        let (Some(e), Some(bytes)) = (self.entries.get(name), self.bytes(name)) else {
            return Err(ModelError::MissingTensor { tensor: name.to_string(), path: self.path.clone() });
        };
        Tensor::from_le_bytes(e.info.dtype, e.info.shape.clone(), bytes)
            .map_err(|err| ModelError::safetensors(&self.path, format!("tensor `{name}`: {err}")))
    }

    /// The `__metadata__` map (empty when the file has none).
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }
}

/// Reads the header length and returns the header bytes and where the data section starts.
fn split_header<'m>(path: &Path, bytes: &'m [u8]) -> Result<(&'m [u8], usize)> {
    let (len_bytes, rest) = bytes.split_at(8);
    let claimed = u64::from_le_bytes(len_bytes.try_into().expect("split_at(8)"));
    let available = rest.len() as u64;
    if claimed > MAX_HEADER_BYTES {
        let msg = format!(
            "header length field claims {claimed} bytes, above the limit of {MAX_HEADER_BYTES} \
             (the file has {available} bytes after it)"
        );
        return Err(ModelError::safetensors(path, msg));
    }
    if claimed > available {
        let msg =
            format!("header length field claims {claimed} bytes but only {available} bytes follow it (truncated?)");
        return Err(ModelError::safetensors(path, msg));
    }
    let end = 8 + claimed as usize;
    Ok((&bytes[8..end], end))
}

/// A tensor entry as written in the header.
#[derive(Deserialize)]
struct RawEntry {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: [u64; 2],
}

type Header = (BTreeMap<String, Entry>, BTreeMap<String, String>);

fn parse_header(path: &Path, header: &[u8], data_len: usize) -> Result<Header> {
    let map: Map<String, Value> = serde_json::from_slice(header)
        .map_err(|e| ModelError::safetensors(path, format!("header is not a JSON object: {e}")))?;
    let mut entries = BTreeMap::new();
    let mut metadata = BTreeMap::new();
    for (name, value) in &map {
        if name == METADATA_KEY {
            metadata = parse_metadata(path, value)?;
            continue;
        }
        let entry = parse_entry(value, data_len)
            .map_err(|msg| ModelError::safetensors(path, format!("tensor `{name}`: {msg}")))?;
        entries.insert(name.clone(), entry);
    }
    Ok((entries, metadata))
}

fn parse_metadata(path: &Path, value: &Value) -> Result<BTreeMap<String, String>> {
    let bad = || ModelError::safetensors(path, "`__metadata__` must map strings to strings");
    let Value::Object(map) = value else {
        return Err(bad());
    };
    map.iter().map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())).ok_or_else(bad)).collect()
}

/// Validates one header entry; the error text is prefixed with the tensor name by the caller.
fn parse_entry(value: &Value, data_len: usize) -> std::result::Result<Entry, String> {
    let raw = RawEntry::deserialize(value).map_err(|e| format!("malformed entry: {e}"))?;
    let dtype = DType::from_safetensors_name(&raw.dtype).ok_or_else(|| {
        let supported: Vec<_> = DType::ALL.iter().map(|d| d.safetensors_name()).collect();
        format!("dtype `{}` is not supported (supported: {})", raw.dtype, supported.join(", "))
    })?;
    let shape = raw
        .shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|_| format!("shape {:?} does not fit in memory", raw.shape))?;
    let nbytes = checked_numel(&shape)
        .and_then(|n| n.checked_mul(dtype.size()))
        .ok_or_else(|| format!("shape {shape:?} overflows"))?;
    let [begin, end] = raw.data_offsets;
    if begin > end || end > data_len as u64 {
        return Err(format!("data_offsets [{begin}, {end}] are outside the data section of {data_len} bytes"));
    }
    let (begin, end) = (begin as usize, end as usize);
    if end - begin != nbytes {
        return Err(format!(
            "data_offsets [{begin}, {end}] span {} bytes but {} {shape:?} needs {nbytes}",
            end - begin,
            raw.dtype
        ));
    }
    Ok(Entry { info: TensorInfo { dtype, shape }, begin, end })
}

/// Writes `tensors` (in that order, contiguous) and `metadata` as a safetensors file.
pub fn write_safetensors(
    path: impl AsRef<Path>,
    tensors: &[(&str, &Tensor)],
    metadata: &BTreeMap<String, String>,
) -> Result<()> {
    let path = path.as_ref();
    let header = build_header(path, tensors, metadata)?;
    let io = |e| ModelError::io(path, e);
    let mut w = BufWriter::new(File::create(path).map_err(io)?);
    w.write_all(&(header.len() as u64).to_le_bytes()).map_err(io)?;
    w.write_all(&header).map_err(io)?;
    for (_, t) in tensors {
        w.write_all(&t.to_le_bytes()).map_err(io)?;
    }
    w.into_inner().map_err(|e| io(e.into_error()))?;
    Ok(())
}

/// The JSON header, padded with spaces to a multiple of 8 bytes.
fn build_header(path: &Path, tensors: &[(&str, &Tensor)], metadata: &BTreeMap<String, String>) -> Result<Vec<u8>> {
    let mut obj = Map::new();
    if !metadata.is_empty() {
        obj.insert(METADATA_KEY.to_string(), serde_json::to_value(metadata).expect("strings"));
    }
    let mut offset = 0usize;
    for (name, t) in tensors {
        if *name == METADATA_KEY || obj.contains_key(*name) {
            let msg = format!("cannot write tensor `{name}`: the name is reserved or used twice");
            return Err(ModelError::safetensors(path, msg));
        }
        let end = offset + t.numel() * t.dtype().size();
        let entry = serde_json::json!({
            "dtype": t.dtype().safetensors_name(),
            "shape": t.shape(),
            "data_offsets": [offset, end],
        });
        obj.insert(name.to_string(), entry);
        offset = end;
    }
    let mut bytes = serde_json::to_vec(&obj).expect("a map of strings and numbers serialises");
    bytes.resize(bytes.len().div_ceil(8) * 8, b' ');
    Ok(bytes)
}

/// Reads every tensor of a file (CLI inputs and outputs, small by nature).
pub fn read_all(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>> {
    let file = SafetensorsFile::open(path)?;
    file.entries.keys().map(|name| Ok((name.clone(), file.load(name)?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a raw file: the given header length field, header text and data bytes.
    fn raw_file(dir: &Path, claimed_len: Option<u64>, header: &str, data: &[u8]) -> PathBuf {
        let path = dir.join("raw.safetensors");
        let mut bytes = claimed_len.unwrap_or(header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn open_err(path: &Path) -> String {
        let err = SafetensorsFile::open(path).unwrap_err();
        assert!(matches!(err, ModelError::Safetensors { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(&path.display().to_string()), "message must name the file: {msg}");
        msg
    }

    fn sample(dtype: DType) -> Tensor {
        let values = vec![1.0, -2.0, 0.0, 3.0, 0.5, 100.0];
        Tensor::f32(vec![2, 3], values).unwrap().cast(dtype)
    }

    #[test]
    fn round_trip_every_dtype() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("all.safetensors");
        let tensors: Vec<(String, Tensor)> = DType::ALL
            .iter()
            .map(|d| (format!("t.{}", d.name()), sample(*d)))
            .chain([
                ("scalar".to_string(), Tensor::scalar_float(DType::BF16, 1.5)),
                ("empty".to_string(), Tensor::f32(vec![0, 3], vec![]).unwrap()),
            ])
            .collect();
        let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let meta = BTreeMap::from([("format".to_string(), "pt".to_string())]);
        write_safetensors(&path, &refs, &meta).unwrap();

        let file = SafetensorsFile::open(&path).unwrap();
        assert_eq!(file.metadata(), &meta);
        assert_eq!(file.len(), tensors.len());
        for (name, t) in &tensors {
            let info = file.info(name).unwrap();
            assert_eq!((info.dtype, info.shape.as_slice()), (t.dtype(), t.shape()), "{name}");
            assert_eq!(file.bytes(name).unwrap(), t.to_le_bytes().as_slice(), "{name}");
            assert_eq!(&file.load(name).unwrap(), t, "{name}");
        }
        let all = read_all(&path).unwrap();
        assert_eq!(all.len(), tensors.len());
    }

    #[test]
    fn writer_layout_matches_the_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.safetensors");
        let (a, b) = (sample(DType::F32), sample(DType::I8));
        write_safetensors(&path, &[("b", &b), ("a", &a)], &BTreeMap::new()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert_eq!(n % 8, 0);
        let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        // Tensors are stored in the order given, contiguously.
        assert_eq!(header["b"]["data_offsets"], serde_json::json!([0, 6]));
        assert_eq!(header["a"]["data_offsets"], serde_json::json!([6, 30]));
        assert!(header.get(METADATA_KEY).is_none());
        assert_eq!(bytes.len(), 8 + n + 30);
    }

    #[test]
    fn writer_refuses_duplicate_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.safetensors");
        let t = sample(DType::F32);
        let err = write_safetensors(&path, &[("w", &t), ("w", &t)], &BTreeMap::new()).unwrap_err();
        assert!(err.to_string().contains("`w`"), "{err}");
    }

    #[test]
    fn too_short_for_the_length_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("short.safetensors");
        std::fs::write(&path, [1, 2, 3]).unwrap();
        assert!(open_err(&path).contains("3 bytes"));
    }

    #[test]
    fn truncated_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.safetensors");
        let t = sample(DType::F32);
        write_safetensors(&path, &[("weight", &t)], &BTreeMap::new()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        // Cut inside the data section: the offsets now point past the end.
        std::fs::write(&path, &bytes[..bytes.len() - 4]).unwrap();
        let msg = open_err(&path);
        assert!(msg.contains("`weight`") && msg.contains("data_offsets"), "{msg}");
        // Cut inside the header.
        std::fs::write(&path, &bytes[..20]).unwrap();
        let msg = open_err(&path);
        assert!(msg.contains("only 12 bytes follow"), "{msg}");
    }

    #[test]
    fn header_claims_more_than_the_file_has() {
        let dir = tempfile::tempdir().unwrap();
        let path = raw_file(dir.path(), Some(1000), "{}", &[]);
        let msg = open_err(&path);
        assert!(msg.contains("claims 1000 bytes") && msg.contains("only 2 bytes"), "{msg}");
    }

    #[test]
    fn absurd_header_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = raw_file(dir.path(), Some(u64::MAX), "{}", &[]);
        let msg = open_err(&path);
        assert!(msg.contains(&u64::MAX.to_string()) && msg.contains("limit"), "{msg}");
    }

    #[test]
    fn header_is_not_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = raw_file(dir.path(), None, "{\"a\": ", &[]);
        assert!(open_err(&path).contains("JSON"));
    }

    #[test]
    fn offsets_out_of_range() {
        let dir = tempfile::tempdir().unwrap();
        let header = r#"{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}"#;
        let path = raw_file(dir.path(), None, header, &[0; 4]);
        let msg = open_err(&path);
        assert!(msg.contains("`w`") && msg.contains("[0, 8]") && msg.contains("4 bytes"), "{msg}");
    }

    #[test]
    fn offsets_reversed() {
        let dir = tempfile::tempdir().unwrap();
        let header = r#"{"w": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}}"#;
        let path = raw_file(dir.path(), None, header, &[0; 4]);
        assert!(open_err(&path).contains("`w`"));
    }

    #[test]
    fn size_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        let header = r#"{"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}}"#;
        let path = raw_file(dir.path(), None, header, &[0; 8]);
        let msg = open_err(&path);
        assert!(msg.contains("`w`") && msg.contains("span 8 bytes") && msg.contains("needs 6"), "{msg}");
    }

    #[test]
    fn shape_overflow() {
        let dir = tempfile::tempdir().unwrap();
        let header =
            format!(r#"{{"w": {{"dtype": "F32", "shape": [{0}, {0}], "data_offsets": [0, 0]}}}}"#, u64::MAX / 2);
        let path = raw_file(dir.path(), None, &header, &[]);
        let msg = open_err(&path);
        assert!(msg.contains("`w`") && msg.contains("overflows"), "{msg}");
    }

    #[test]
    fn unsupported_dtype() {
        let dir = tempfile::tempdir().unwrap();
        let header = r#"{"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}}"#;
        let path = raw_file(dir.path(), None, header, &[0; 8]);
        let msg = open_err(&path);
        assert!(msg.contains("`w`") && msg.contains("`F64`") && msg.contains("BF16"), "{msg}");
    }

    #[test]
    fn malformed_entry_and_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let header = r#"{"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}"#;
        let path = raw_file(dir.path(), None, header, &[]);
        assert!(open_err(&path).contains("`w`: malformed entry"));
        let header = r#"{"__metadata__": {"n": 3}}"#;
        let path = raw_file(dir.path(), None, header, &[]);
        assert!(open_err(&path).contains("__metadata__"));
    }

    #[test]
    fn load_of_an_unknown_tensor_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = raw_file(dir.path(), None, "{}", &[]);
        let file = SafetensorsFile::open(&path).unwrap();
        assert!(file.is_empty() && file.bytes("nope").is_none());
        let err = file.load("nope").unwrap_err();
        assert!(matches!(err, ModelError::MissingTensor { .. }));
        assert!(err.to_string().contains("`nope`"));
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        fn entry() -> impl Strategy<Value = String> {
            let dtype = prop::sample::select(vec!["F32", "BF16", "I8", "BOOL", "F64"]);
            let shape = prop::collection::vec(0u64..5, 0..3);
            (dtype, shape, 0u64..40, 0u64..40)
                .prop_map(|(d, s, b, e)| format!(r#"{{"dtype": "{d}", "shape": {s:?}, "data_offsets": [{b}, {e}]}}"#))
        }

        /// Whatever a header claims, opening never panics, and what opens loads.
        fn check(path: &Path) {
            if let Ok(file) = SafetensorsFile::open(path) {
                for (name, info) in file.tensors() {
                    let t = file.load(name).unwrap();
                    assert_eq!((t.dtype(), t.shape()), (info.dtype, info.shape.as_slice()));
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(200))]

            #[test]
            fn random_headers(entries in prop::collection::vec(entry(), 0..4), data_len in 0usize..40) {
                let dir = tempfile::tempdir().unwrap();
                let body: Vec<String> = entries.iter().enumerate().map(|(i, e)| format!("\"t{i}\": {e}")).collect();
                let header = format!("{{{}}}", body.join(", "));
                check(&raw_file(dir.path(), None, &header, &vec![7; data_len]));
            }

            #[test]
            fn corrupted_files(pos in 0usize..200, byte in any::<u8>(), cut in 0usize..200) {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("x.safetensors");
                let t = sample(DType::F16);
                write_safetensors(&path, &[("a", &t), ("b", &t)], &BTreeMap::new()).unwrap();
                let mut bytes = std::fs::read(&path).unwrap();
                let pos = pos % bytes.len();
                bytes[pos] = byte;
                bytes.truncate(bytes.len() - cut.min(bytes.len()) / 4);
                std::fs::write(&path, &bytes).unwrap();
                check(&path);
            }
        }
    }
}
