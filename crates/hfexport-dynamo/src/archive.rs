//! Reading a `.pt2` archive back, defensively: `hfexport run` / `inspect` are handed files from
//! anywhere, so every name and size is checked before anything is trusted.
//!
//! - the zip end records (and zip64 ones) must lie inside the file, the central directory must
//!   parse completely, and every entry's data must lie inside the file;
//! - names must be relative paths under one root folder with no `..`, no absolute path, no
//!   backslash and no NUL (zip-slip), and unique;
//! - entries are STORED (payloads: a declared size is the real size) or DEFLATE-compressed
//!   (hfexport compresses its JSON entries; torch's reader inflates any record), a compressed
//!   entry inflating to exactly its declared size, at most [`MAX_PROGRAM_JSON`];
//! - the archive holds one or more programs: `models/<name>.json` each (nothing else may be
//!   under `models/`), a JSON ExportedProgram of schema major 8 (below a size cap), its CRC
//!   checked, with the companion entries torch 2.13 reads for it
//!   (`data/sample_inputs/<name>.pt`, `data/weights/<name>_weights_config.json`,
//!   `data/constants/<name>_constants_config.json`, JSON, CRC checked) and every payload file
//!   those configs name present; programs may share payload files (hfexport stores a weight
//!   used by several programs once).

use crate::zip::{DEFLATE, STORED};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The largest `models/<name>.json` (or payload config) accepted.
pub const MAX_PROGRAM_JSON: u64 = 1 << 30;

#[derive(Debug, thiserror::Error)]
#[error("{}: not a valid .pt2 archive: {msg}", path.display())]
pub struct ArchiveError {
    pub path: PathBuf,
    pub msg: String,
}

/// One entry: where its data is, how long, its CRC.
#[derive(Debug, Clone)]
pub struct EntryInfo {
    pub data_offset: u64,
    /// Size of the data (inflated).
    pub size: u64,
    /// Bytes in the file at `data_offset` (`size` unless compressed).
    pub stored_size: u64,
    /// [`STORED`] or [`DEFLATE`].
    pub method: u16,
    pub crc: u32,
}

/// A checked archive: its entries (names without the root folder) and the parsed programs.
#[derive(Debug)]
pub struct Pt2Archive {
    pub path: PathBuf,
    pub root: String,
    pub entries: BTreeMap<String, EntryInfo>,
    /// Every program by name (`models/<name>.json`); a forward export holds `model`.
    pub programs: BTreeMap<String, serde_json::Value>,
    bytes: memmap2::Mmap,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_le_bytes([s[0], s[1]]))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8).map(|s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
}

/// Why a name is unsafe, if it is.
fn unsafe_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("an empty name")
    } else if name.starts_with('/') || name.contains(':') {
        Some("an absolute path")
    } else if name.contains('\\') || name.contains('\0') {
        Some("a backslash or NUL in the name")
    } else if name.split('/').any(|part| part == ".." || part == ".") {
        Some("a `..` or `.` path component")
    } else {
        None
    }
}

impl Pt2Archive {
    /// Reads and checks `path` (see the module docs); errors name the file and what is wrong.
    pub fn open(path: impl AsRef<Path>) -> Result<Pt2Archive, ArchiveError> {
        let path = path.as_ref().to_path_buf();
        let fail = |msg: String| ArchiveError { path: path.clone(), msg };
        let file = std::fs::File::open(&path).map_err(|e| fail(format!("cannot open it: {e}")))?;
        // SAFETY: the map is read-only and private to this reader; a file truncated under us
        // can fault, which `hfexport run` accepts as it does for any mmap'd checkpoint.
        let bytes = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| fail(format!("cannot map it: {e}")))?;
        let len = bytes.len();
        // end of central directory: the last signature within the last 64 KiB + 22 bytes
        let lo = len.saturating_sub(22 + 0xFFFF);
        let eocd = (lo..len.saturating_sub(21))
            .rev()
            .find(|&i| u32_at(&bytes, i) == Some(0x0605_4b50))
            .ok_or_else(|| fail("no zip end-of-central-directory record (truncated, or not a zip file)".into()))?;
        let mut count = u16_at(&bytes, eocd + 10).expect("in bounds") as u64;
        let mut cd_size = u32_at(&bytes, eocd + 12).expect("in bounds") as u64;
        let mut cd_start = u32_at(&bytes, eocd + 16).expect("in bounds") as u64;
        if cd_start == 0xFFFF_FFFF || count == 0xFFFF {
            // zip64: the locator sits right before the end record
            let loc = eocd.checked_sub(20).filter(|&l| u32_at(&bytes, l) == Some(0x0706_4b50));
            let rec = loc.and_then(|l| u64_at(&bytes, l + 8)).map(|r| r as usize);
            let rec = rec
                .filter(|&r| u32_at(&bytes, r) == Some(0x0606_4b50))
                .ok_or_else(|| fail("a zip64 archive without a valid zip64 end record".into()))?;
            count = u64_at(&bytes, rec + 32).ok_or_else(|| fail("truncated zip64 end record".into()))?;
            cd_size = u64_at(&bytes, rec + 40).ok_or_else(|| fail("truncated zip64 end record".into()))?;
            cd_start = u64_at(&bytes, rec + 48).ok_or_else(|| fail("truncated zip64 end record".into()))?;
        }
        if cd_start.checked_add(cd_size).is_none_or(|end| end > len as u64) {
            return Err(fail(format!(
                "the central directory ({cd_size} bytes at {cd_start}) lies outside the file of {len} bytes"
            )));
        }
        let mut entries = BTreeMap::new();
        let mut root: Option<String> = None;
        let mut at = cd_start as usize;
        for i in 0..count {
            let bad = |what: &str| fail(format!("central directory entry {i}: {what}"));
            if u32_at(&bytes, at) != Some(0x0201_4b50) {
                return Err(bad("bad signature"));
            }
            let method = u16_at(&bytes, at + 10).ok_or_else(|| bad("truncated"))?;
            let crc = u32_at(&bytes, at + 16).ok_or_else(|| bad("truncated"))?;
            let mut csize = u32_at(&bytes, at + 20).ok_or_else(|| bad("truncated"))? as u64;
            let mut usize_ = u32_at(&bytes, at + 24).ok_or_else(|| bad("truncated"))? as u64;
            let n = u16_at(&bytes, at + 28).ok_or_else(|| bad("truncated"))? as usize;
            let m = u16_at(&bytes, at + 30).ok_or_else(|| bad("truncated"))? as usize;
            let k = u16_at(&bytes, at + 32).ok_or_else(|| bad("truncated"))? as usize;
            let mut offset = u32_at(&bytes, at + 42).ok_or_else(|| bad("truncated"))? as u64;
            let name_bytes = bytes.get(at + 46..at + 46 + n).ok_or_else(|| bad("truncated name"))?;
            let name = std::str::from_utf8(name_bytes).map_err(|_| bad("a name that is not UTF-8"))?.to_string();
            let mut extra = bytes.get(at + 46 + n..at + 46 + n + m).ok_or_else(|| bad("truncated extra field"))?;
            while extra.len() >= 4 {
                let (id, size) = (u16_at(extra, 0).expect("4 bytes"), u16_at(extra, 2).expect("4 bytes") as usize);
                let body = extra.get(4..4 + size).ok_or_else(|| bad("truncated extra field"))?;
                if id == 1 {
                    let mut fields = body.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8")));
                    for v in [&mut usize_, &mut csize, &mut offset] {
                        if *v == 0xFFFF_FFFF {
                            *v = fields.next().ok_or_else(|| bad("short zip64 extra field"))?;
                        }
                    }
                }
                extra = &extra[4 + size..];
            }
            at += 46 + n + m + k;
            if let Some(why) = unsafe_name(&name) {
                return Err(fail(format!("entry `{name}` is unsafe: {why}")));
            }
            let (first, rest) =
                name.split_once('/').ok_or_else(|| fail(format!("entry `{name}` is not under a root folder")))?;
            match &root {
                None => root = Some(first.to_string()),
                Some(r) if r != first => {
                    return Err(fail(format!("entry `{name}` is outside the archive's root folder `{r}`")))
                }
                _ => {}
            }
            match method {
                STORED if csize == usize_ => {}
                STORED => {
                    return Err(fail(format!(
                        "entry `{name}` is stored with {csize} bytes in the file but declares {usize_}"
                    )))
                }
                DEFLATE if usize_ <= MAX_PROGRAM_JSON => {}
                DEFLATE => {
                    return Err(fail(format!(
                        "entry `{name}` is compressed and inflates to {usize_} bytes (limit {MAX_PROGRAM_JSON})"
                    )))
                }
                _ => {
                    return Err(fail(format!(
                        "entry `{name}` uses compression method {method}; .pt2 entries are stored or deflated"
                    )))
                }
            }
            // the data follows the local header
            let lh = offset as usize;
            if u32_at(&bytes, lh) != Some(0x0403_4b50) {
                return Err(fail(format!("entry `{name}`: no local header at offset {offset}")));
            }
            let ln =
                u16_at(&bytes, lh + 26).ok_or_else(|| fail(format!("entry `{name}`: truncated local header")))? as u64;
            let lm =
                u16_at(&bytes, lh + 28).ok_or_else(|| fail(format!("entry `{name}`: truncated local header")))? as u64;
            let data_offset = offset + 30 + ln + lm;
            if data_offset.checked_add(csize).is_none_or(|end| end > len as u64) {
                return Err(fail(format!(
                    "entry `{name}` declares {csize} bytes at offset {data_offset}, past the end of the file ({len} bytes)"
                )));
            }
            let info = EntryInfo { data_offset, size: usize_, stored_size: csize, method, crc };
            if entries.insert(rest.to_string(), info).is_some() {
                return Err(fail(format!("entry `{name}` appears twice")));
            }
        }
        let root = root.ok_or_else(|| fail("the archive is empty".into()))?;
        for required in ["archive_format", "archive_version", ".data/version"] {
            if !entries.contains_key(required) {
                return Err(fail(format!("the entry `{root}/{required}` that torch.export.load requires is missing")));
            }
        }
        // every entry under models/ is read by torch as a program: only `models/<name>.json`
        let mut names = vec![];
        for name in entries.keys().filter_map(|k| k.strip_prefix("models/")) {
            match name.strip_suffix(".json") {
                Some(n) if !n.is_empty() && !n.contains('/') => names.push(n.to_string()),
                _ => {
                    return Err(fail(format!(
                        "entry `{root}/models/{name}` is not a program: only `models/<name>.json` may be under models/"
                    )))
                }
            }
        }
        if names.is_empty() {
            return Err(fail(format!(
                "the entry `{root}/models/<name>.json` (a program) that torch.export.load requires is missing"
            )));
        }
        for n in &names {
            for required in [
                format!("data/sample_inputs/{n}.pt"),
                format!("data/weights/{n}_weights_config.json"),
                format!("data/constants/{n}_constants_config.json"),
            ] {
                if !entries.contains_key(&required) {
                    return Err(fail(format!(
                        "the entry `{root}/{required}` that torch.export.load requires for program `{n}` is missing"
                    )));
                }
            }
        }
        let mut archive = Pt2Archive { path, root, entries, programs: BTreeMap::new(), bytes };
        let format = archive.entry("archive_format")?;
        if &*format != b"pt2" {
            return Err(archive.fail(format!("archive_format is {:?}, not \"pt2\"", String::from_utf8_lossy(&format))));
        }
        for n in names {
            let program = archive.json(&format!("models/{n}.json"))?;
            let major = program["schema_version"]["major"].as_i64();
            if major != Some(8) {
                return Err(
                    archive.fail(format!("models/{n}.json has schema major version {major:?}; torch 2.13 reads 8"))
                );
            }
            for (config, dir) in [
                (format!("data/weights/{n}_weights_config.json"), "data/weights"),
                (format!("data/constants/{n}_constants_config.json"), "data/constants"),
            ] {
                archive.check_payload_config(&config, dir)?;
            }
            archive.programs.insert(n, program);
        }
        Ok(archive)
    }

    /// An entry parsed as JSON (size capped, CRC checked).
    fn json(&self, name: &str) -> Result<serde_json::Value, ArchiveError> {
        let size = self.entries.get(name).map_or(0, |e| e.size);
        if size > MAX_PROGRAM_JSON {
            return Err(self.fail(format!("{name} is {size} bytes (limit {MAX_PROGRAM_JSON})")));
        }
        serde_json::from_slice(&self.entry(name)?).map_err(|e| self.fail(format!("{name} is not JSON: {e}")))
    }

    /// A payload config: `{"config": {name: {"path_name": …}}}`, every file it names present
    /// under `dir` (several names, and several programs, may share one file).
    fn check_payload_config(&self, config: &str, dir: &str) -> Result<(), ArchiveError> {
        let v = self.json(config)?;
        let map = v["config"].as_object().ok_or_else(|| self.fail(format!("{config} has no `config` object")))?;
        for (name, payload) in map {
            let file = payload["path_name"]
                .as_str()
                .ok_or_else(|| self.fail(format!("{config}: `{name}` has no path_name")))?;
            if file.is_empty() || file.contains('/') || unsafe_name(file).is_some() {
                return Err(self.fail(format!("{config}: `{name}` names the unsafe file `{file}`")));
            }
            if !self.entries.contains_key(&format!("{dir}/{file}")) {
                return Err(self
                    .fail(format!("{config}: `{name}` is stored in `{}/{dir}/{file}`, which is missing", self.root)));
            }
        }
        Ok(())
    }

    /// The program `name`; the error lists the programs the archive holds.
    pub fn program(&self, name: &str) -> Result<&serde_json::Value, ArchiveError> {
        self.programs.get(name).ok_or_else(|| {
            self.fail(format!(
                "it holds no program `{name}` (programs: {})",
                self.programs.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
            ))
        })
    }

    /// The program a caller that names none gets: the only one, else `model` (what
    /// `torch.export.load` returns).
    pub fn default_program(&self) -> Result<&str, ArchiveError> {
        if self.programs.contains_key("model") {
            return Ok("model");
        }
        match self.programs.keys().collect::<Vec<_>>()[..] {
            [only] => Ok(only),
            _ => Err(self.fail(format!(
                "it holds several programs ({}); name the one to load",
                self.programs.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
            ))),
        }
    }

    fn fail(&self, msg: String) -> ArchiveError {
        ArchiveError { path: self.path.clone(), msg }
    }

    /// The bytes of an entry (name without the root folder; inflated if compressed, else
    /// borrowed from the file), its CRC checked.
    pub fn entry(&self, name: &str) -> Result<Cow<'_, [u8]>, ArchiveError> {
        let e = self.entries.get(name).ok_or_else(|| self.fail(format!("no entry `{}/{name}`", self.root)))?;
        let raw = &self.bytes[e.data_offset as usize..(e.data_offset + e.stored_size) as usize];
        let data = match e.method {
            DEFLATE => Cow::Owned(
                miniz_oxide::inflate::decompress_to_vec_with_limit(raw, e.size as usize)
                    .ok()
                    .filter(|d| d.len() as u64 == e.size)
                    .ok_or_else(|| {
                        self.fail(format!(
                            "entry `{}/{name}` does not inflate to its {} bytes (corrupt)",
                            self.root, e.size
                        ))
                    })?,
            ),
            _ => Cow::Borrowed(raw),
        };
        if crc32fast::hash(&data) != e.crc {
            return Err(self.fail(format!("entry `{}/{name}` fails its CRC check (corrupt)", self.root)));
        }
        Ok(data)
    }
}
