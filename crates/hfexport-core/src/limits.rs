//! How much a file may make hfexport allocate before anything is read.
//!
//! Every reader of outside data checks a size the file declares against the file's real size
//! and against a limit here, so a hostile or corrupt file is an error naming it, never an
//! allocation it chose. The limits are far above any real model's files. Readers with their own
//! formats keep their bounds beside their code and are listed in ARCHITECTURE.md's invariants
//! (the safetensors header, `.pt2` entries, `.pte` segments, config values).

use std::io::{Error, ErrorKind};
use std::path::Path;

/// `config.json`, `generation_config.json`, an export config (`--config`), `--dynamic-shapes`.
pub const CONFIG_JSON: u64 = 16 << 20;
/// `model.safetensors.index.json` (an index of 10k shards stays far below).
pub const SHARD_INDEX: u64 = 100 << 20;
/// An export folder's `export.json`.
pub const EXPORT_JSON: u64 = 64 << 20;
/// `tokenizer.json` (the largest on the hub are tens of MB).
pub const TOKENIZER_JSON: u64 = 512 << 20;

/// The text of `path` when it is at most `max` bytes of UTF-8. A larger file or one that is not
/// UTF-8 is an [`ErrorKind::InvalidData`] error saying so; others are the I/O error.
pub fn read_text(path: &Path, max: u64) -> std::io::Result<String> {
    let len = std::fs::metadata(path)?.len();
    if len > max {
        let msg = format!("file is {len} bytes, more than the {max} bytes such a file can plausibly need");
        return Err(Error::new(ErrorKind::InvalidData, msg));
    }
    let bytes = std::fs::read(path)?;
    String::from_utf8(bytes).map_err(|e| Error::new(ErrorKind::InvalidData, format!("not UTF-8: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_and_non_utf8_files_are_invalid_data() {
        let dir = std::env::temp_dir().join(format!("hfexport-limits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.json");
        std::fs::File::create(&big).unwrap().set_len(1 << 40).unwrap();
        let e = read_text(&big, CONFIG_JSON).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidData);
        assert!(e.to_string().contains("1099511627776 bytes"), "{e}");
        let latin1 = dir.join("latin1.json");
        std::fs::write(&latin1, b"{\"a\": \"\xe9\"}").unwrap();
        assert!(read_text(&latin1, CONFIG_JSON).unwrap_err().to_string().contains("not UTF-8"));
        std::fs::write(&latin1, b"{}").unwrap();
        assert_eq!(read_text(&latin1, 2).unwrap(), "{}");
        assert_eq!(read_text(&dir.join("absent"), 2).unwrap_err().kind(), ErrorKind::NotFound);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
