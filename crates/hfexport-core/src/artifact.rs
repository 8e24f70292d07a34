//! Export folders that appear whole or not at all.
//!
//! An export writes into a temporary folder beside the requested one and moves it into place
//! only when every file is written ([`StagedDir::commit`]); an error, a panic or an interrupt
//! before that leaves the requested path as it was. A non-empty destination is refused unless
//! the caller forces it, and then it is replaced only at commit.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// A temporary folder that becomes `dest` on commit and is removed otherwise.
#[derive(Debug)]
pub struct StagedDir {
    dest: PathBuf,
    tmp: PathBuf,
    committed: bool,
}

fn io_err(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::Artifact(format!("{}: {what}: {e}", path.display()))
}

impl StagedDir {
    /// Checks `dest` (refusing a non-empty folder or a file unless `force`) and creates the
    /// staging folder beside it.
    pub fn create(dest: &Path, force: bool) -> Result<StagedDir> {
        if dest.exists() {
            if !dest.is_dir() {
                return Err(Error::Artifact(format!("{} exists and is not a folder", dest.display())));
            }
            let non_empty = std::fs::read_dir(dest).map_err(|e| io_err(dest, "cannot read", e))?.next().is_some();
            if non_empty && !force {
                return Err(Error::Artifact(format!("{} is not empty; pass --force to replace it", dest.display())));
            }
        }
        let name = dest
            .file_name()
            .ok_or_else(|| Error::Artifact(format!("{} has no folder name", dest.display())))?
            .to_string_lossy()
            .into_owned();
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(|e| io_err(&parent, "cannot create", e))?;
        let tmp = parent.join(format!(".{name}.partial-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| io_err(&tmp, "cannot clear a stale staging folder", e))?;
        }
        std::fs::create_dir(&tmp).map_err(|e| io_err(&tmp, "cannot create", e))?;
        Ok(StagedDir { dest: dest.to_path_buf(), tmp, committed: false })
    }

    /// Where files go until commit.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Moves the staging folder into place, replacing `dest`.
    pub fn commit(mut self) -> Result<PathBuf> {
        if self.dest.exists() {
            std::fs::remove_dir_all(&self.dest).map_err(|e| io_err(&self.dest, "cannot replace", e))?;
        }
        std::fs::rename(&self.tmp, &self.dest)
            .map_err(|e| io_err(&self.dest, "cannot move the export into place", e))?;
        self.committed = true;
        Ok(self.dest.clone())
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("hfexport-artifact-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    #[test]
    fn commit_moves_the_folder_into_place() {
        let root = scratch("commit");
        let dest = root.join("out");
        let s = StagedDir::create(&dest, false).unwrap();
        std::fs::write(s.path().join("a.txt"), "x").unwrap();
        assert!(!dest.exists(), "nothing at the destination before commit");
        s.commit().unwrap();
        assert_eq!(std::fs::read_to_string(dest.join("a.txt")).unwrap(), "x");
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 1, "no staging folder left");
    }

    #[test]
    fn dropping_without_commit_leaves_nothing() {
        let root = scratch("drop");
        let dest = root.join("out");
        {
            let s = StagedDir::create(&dest, false).unwrap();
            std::fs::write(s.path().join("half.onnx"), "x").unwrap();
        }
        assert!(!dest.exists());
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0);
    }

    #[test]
    fn non_empty_destination_needs_force() {
        let root = scratch("force");
        let dest = root.join("out");
        std::fs::create_dir_all(&dest).unwrap();
        std::fs::write(dest.join("old.txt"), "old").unwrap();
        let e = StagedDir::create(&dest, false).unwrap_err().to_string();
        assert!(e.contains("not empty") && e.contains("--force"), "{e}");
        let s = StagedDir::create(&dest, true).unwrap();
        assert!(dest.join("old.txt").exists(), "replaced only at commit");
        std::fs::write(s.path().join("new.txt"), "new").unwrap();
        s.commit().unwrap();
        assert!(!dest.join("old.txt").exists() && dest.join("new.txt").exists());
    }
}
