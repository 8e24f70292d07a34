//! What the fuzz targets share: the readers under test take paths (they map files, check sizes
//! against the file's real length), so each input is written to a file in a scratch folder of
//! this process and read back through the same public API `hfexport` uses.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A folder private to this fuzzing process, in memory where the machine has `/dev/shm`.
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = Path::new("/dev/shm");
        let base = if base.is_dir() { base.to_path_buf() } else { std::env::temp_dir() };
        let dir = base.join(format!("hfexport-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the fuzz scratch folder");
        dir
    })
}

/// Writes `data` as `name` in the scratch folder; returns its path.
pub fn put(name: &str, data: &[u8]) -> PathBuf {
    let path = scratch().join(name);
    std::fs::write(&path, data).expect("write a fuzz input");
    path
}
