//! Whole or refused: `export.json` records the size and CRC-32 of every file the export wrote
//! ([`FileRecord`]), so a folder cut short by a copy or a full disk, or with flipped bytes, is
//! found before a runtime crashes on it or reads garbage.
//!
//! Loading checks sizes only ([`check_sizes`], a `stat` per file: `hfexport run`, `generate`,
//! `verify_export`); `hfexport inspect --check` reads every byte ([`check_files`]). The CRCs
//! are computed by reading the finished files back just before `export.json` is written, one
//! file per core: the writers patch headers after streaming (zip sizes and CRCs, offsets), so
//! a CRC taken while streaming would not be the file's.

use crate::artifact::LOCK_FILE;
use crate::error::{Error, Result};
use crate::metadata::{ExportMetadata, FILE_NAME};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};

/// One file of an export folder as it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// The path inside the folder, `/`-separated.
    pub path: String,
    pub bytes: u64,
    /// CRC-32 (IEEE, as zip and PNG) of the whole file.
    pub crc32: u32,
}

/// Every file under `dir` but `export.json` (and the staging folder's lock, gone at commit),
/// sorted by path, with its size and CRC-32.
pub fn record_files(dir: &Path) -> Result<Vec<FileRecord>> {
    let mut paths = vec![];
    walk(dir, &mut paths)?;
    paths.retain(|p| p.as_path() != Path::new(FILE_NAME) && p.as_path() != Path::new(LOCK_FILE));
    paths.sort();
    paths
        .par_iter()
        .map(|rel| {
            let (bytes, crc32) = crc_of(&dir.join(rel))?;
            Ok(FileRecord { path: slash_path(rel), bytes, crc32 })
        })
        .collect()
}

/// Every file under `dir`, into `out` as paths relative to `dir`.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let here = dir.join(&rel);
        let entries = std::fs::read_dir(&here).map_err(|e| io_err(&here, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io_err(&here, e))?;
            let kind = entry.file_type().map_err(|e| io_err(&entry.path(), e))?;
            let name = rel.join(entry.file_name());
            if kind.is_dir() {
                stack.push(name);
            } else {
                out.push(name);
            }
        }
    }
    Ok(())
}

fn slash_path(rel: &Path) -> String {
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// The size and CRC-32 of the file at `path`, read in 1 MiB pieces.
fn crc_of(path: &Path) -> Result<(u64, u32)> {
    let mut f = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let (mut hasher, mut buf, mut bytes) = (crc32fast::Hasher::new(), vec![0u8; 1 << 20], 0u64);
    loop {
        let n = f.read(&mut buf).map_err(|e| io_err(path, e))?;
        if n == 0 {
            return Ok((bytes, hasher.finalize()));
        }
        hasher.update(&buf[..n]);
        bytes += n as u64;
    }
}

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Artifact(format!("{}: {e}", path.display()))
}

/// Each recorded file among `only` (all recorded files when `None`) exists in `dir` with its
/// recorded size; the error names the first that does not.
pub fn check_sizes(dir: &Path, meta: &ExportMetadata, only: Option<&[&str]>) -> Result<()> {
    for r in meta.files.iter().filter(|r| only.is_none_or(|o| o.contains(&r.path.as_str()))) {
        let path = dir.join(&r.path);
        let found = std::fs::metadata(&path).map_err(|e| damaged(&path, format!("cannot be read ({e})")))?.len();
        if found != r.bytes {
            return Err(damaged(&path, format!("has {found} bytes, export.json records {}", r.bytes)));
        }
    }
    Ok(())
}

/// [`check_sizes`] over the files the export's components load.
pub fn check_component_sizes(dir: &Path, meta: &ExportMetadata) -> Result<()> {
    let files: Vec<&str> = meta.components.iter().flat_map(|c| c.files.iter().map(String::as_str)).collect();
    check_sizes(dir, meta, Some(&files))
}

/// Every recorded file exists in `dir` with its recorded size and CRC-32 (all read back); the
/// error names the first damaged file in path order. Returns how many files and bytes were
/// checked.
pub fn check_files(dir: &Path, meta: &ExportMetadata) -> Result<(usize, u64)> {
    if meta.files.is_empty() {
        return Err(Error::Artifact(format!(
            "{}: export.json records no file sizes or checksums (written by an older hfexport); re-export to check it",
            dir.join(FILE_NAME).display()
        )));
    }
    check_sizes(dir, meta, None)?;
    let crcs: Vec<Result<u32>> = meta.files.par_iter().map(|r| crc_of(&dir.join(&r.path)).map(|c| c.1)).collect();
    for (r, crc) in meta.files.iter().zip(crcs) {
        let crc = crc?;
        if crc != r.crc32 {
            let msg = format!("has CRC-32 {crc:08x}, export.json records {:08x}: its bytes changed", r.crc32);
            return Err(damaged(&dir.join(&r.path), msg));
        }
    }
    Ok((meta.files.len(), meta.files.iter().map(|r| r.bytes).sum()))
}

fn damaged(path: &Path, what: String) -> Error {
    Error::Artifact(format!(
        "{} {what}: the export folder is damaged (a copy cut short, a full disk, a changed file); copy it again or \
         re-export",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta_with(files: Vec<FileRecord>) -> ExportMetadata {
        let mut m: ExportMetadata = serde_json::from_value(serde_json::json!({
            "schema_version": crate::metadata::SCHEMA_VERSION, "hfexport_version": "0",
            "source": {"architecture": "A", "model_type": null, "checkpoint": "c"},
            "format": "onnx", "task": "causal-lm", "dtype": "float32", "config": {}, "symbols": {},
            "components": [], "patches_applied": [], "runtime_checks": [], "runtime_pins": {},
            "verification": null}))
        .unwrap();
        m.files = files;
        m
    }

    #[test]
    fn records_find_truncated_and_changed_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("a.bin"), b"123456789").unwrap();
        std::fs::write(dir.path().join("sub/b.txt"), b"x").unwrap();
        std::fs::write(dir.path().join(FILE_NAME), b"{}").unwrap();
        let files = record_files(dir.path()).unwrap();
        assert_eq!(files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["a.bin", "sub/b.txt"]);
        assert_eq!((files[0].bytes, files[0].crc32), (9, 0xCBF4_3926));
        let meta = meta_with(files);
        assert_eq!(check_files(dir.path(), &meta).unwrap(), (2, 10));

        std::fs::write(dir.path().join("a.bin"), b"123456780").unwrap();
        let e = check_files(dir.path(), &meta).unwrap_err().to_string();
        assert!(e.contains("a.bin") && e.contains("CRC-32") && e.contains("damaged"), "{e}");
        check_sizes(dir.path(), &meta, None).unwrap();

        std::fs::write(dir.path().join("a.bin"), b"1234").unwrap();
        let e = check_sizes(dir.path(), &meta, Some(&["a.bin"])).unwrap_err().to_string();
        assert!(e.contains("a.bin has 4 bytes, export.json records 9"), "{e}");
        check_sizes(dir.path(), &meta, Some(&["sub/b.txt"])).unwrap();

        std::fs::remove_file(dir.path().join("sub/b.txt")).unwrap();
        let e = check_sizes(dir.path(), &meta, Some(&["sub/b.txt"])).unwrap_err().to_string();
        assert!(e.contains("b.txt cannot be read"), "{e}");
    }
}
