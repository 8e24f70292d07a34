//! Export folders that appear whole or not at all.
//!
//! An export writes into a staging folder beside the requested one
//! (`.<name>.partial-<pid>-<n>`, holding a locked [`LOCK_FILE`]) and moves it into place only
//! when every file is written ([`StagedDir::commit`]); an error, a panic or an interrupt before
//! that leaves the requested path as it was.
//!
//! - A non-empty destination is refused unless the caller forces it, and then it is replaced
//!   only at commit: swapped with the staging folder in one step (`renameat2` with
//!   `RENAME_EXCHANGE`) and removed after the new one is in place.
//! - Without force, the move never replaces a folder that appeared meanwhile (another export
//!   racing to the same path): `RENAME_NOREPLACE`, and the loser gets an error and removes its
//!   staging folder. Where the filesystem lacks `renameat2`, a check before a plain rename.
//! - A process killed with `kill -9` cannot remove its staging folder: the next export to the
//!   same parent folder does ([`StagedDir::removed_stale`]). A staging folder is stale when its
//!   lock file is no longer locked (the kernel drops the lock with the process), or, before the
//!   lock file exists, when its pid is not running; a live export's folder is never touched.

use crate::error::{Error, Result};
use std::ffi::CString;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The file each staging folder holds locked while its export runs.
pub const LOCK_FILE: &str = ".hfexport-staging.lock";
const STAGING_MARK: &str = ".partial-";

/// Staging folders this process created (their names stay unique per export).
static STAGED: AtomicUsize = AtomicUsize::new(0);

/// A temporary folder that becomes `dest` on commit and is removed otherwise.
#[derive(Debug)]
pub struct StagedDir {
    dest: PathBuf,
    tmp: PathBuf,
    force: bool,
    committed: bool,
    /// Held locked until commit (the kernel releases it if the process dies).
    lock: Option<File>,
    removed_stale: Vec<PathBuf>,
}

fn io_err(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::Artifact(format!("{}: {what}: {e}", path.display()))
}

impl StagedDir {
    /// Checks `dest` (refusing a non-empty folder or a file unless `force`), removes stale
    /// staging folders of dead exports beside it and creates this export's.
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
        let removed_stale = remove_stale_staging(&parent);
        let n = STAGED.fetch_add(1, Ordering::Relaxed);
        let tmp = parent.join(format!(".{name}{STAGING_MARK}{}-{n}", std::process::id()));
        std::fs::create_dir(&tmp).map_err(|e| {
            let what = format!("cannot create its staging folder in {}", parent.display());
            io_err(dest, &what, e)
        })?;
        let mut staged =
            StagedDir { dest: dest.to_path_buf(), tmp, force, committed: false, lock: None, removed_stale };
        let lock_path = staged.tmp.join(LOCK_FILE);
        let lock = File::create(&lock_path).map_err(|e| io_err(&lock_path, "cannot create", e))?;
        lock.try_lock().map_err(|e| Error::Artifact(format!("{}: cannot lock: {e}", lock_path.display())))?;
        staged.lock = Some(lock);
        Ok(staged)
    }

    /// Where files go until commit.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Staging folders of dead exports that [`StagedDir::create`] removed.
    pub fn removed_stale(&self) -> &[PathBuf] {
        &self.removed_stale
    }

    /// Moves the staging folder into place: without force only if nothing is at `dest` but
    /// the empty folder that was there at create (else an error naming the race); with force
    /// by swapping, the replaced folder removed after the new one is in place.
    pub fn commit(mut self) -> Result<PathBuf> {
        let raced = |dest: &Path| {
            Error::Artifact(format!(
                "{} appeared while this export was running (another export to the same path?); nothing was \
                 replaced; pass --force to replace it",
                dest.display()
            ))
        };
        crate::fault::point(crate::fault::COMMIT);
        match (self.force, self.dest.exists()) {
            (true, true) => self.swap_into_place()?,
            (false, true) => {
                // the empty folder `create` accepted; a folder filled meanwhile is not removed
                std::fs::remove_dir(&self.dest).map_err(|_| raced(&self.dest))?;
                self.move_into_place(raced)?
            }
            (_, false) => self.move_into_place(raced)?,
        }
        self.committed = true;
        let _ = std::fs::remove_file(self.dest.join(LOCK_FILE));
        self.lock = None;
        Ok(self.dest.clone())
    }

    /// `tmp` -> `dest`, never replacing what is at `dest`.
    fn move_into_place(&self, raced: impl Fn(&Path) -> Error) -> Result<()> {
        match rename2(&self.tmp, &self.dest, libc::RENAME_NOREPLACE) {
            Ok(()) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EEXIST | libc::ENOTEMPTY)) => Err(raced(&self.dest)),
            Err(e) if unsupported(&e) => {
                if self.dest.exists() {
                    return Err(raced(&self.dest));
                }
                std::fs::rename(&self.tmp, &self.dest)
                    .map_err(|e| io_err(&self.dest, "cannot move the export into place", e))
            }
            Err(e) => Err(io_err(&self.dest, "cannot move the export into place", e)),
        }
    }

    /// `tmp` <-> `dest` in one step, then the old folder (now at `tmp`) removed.
    fn swap_into_place(&self) -> Result<()> {
        let old = match rename2(&self.tmp, &self.dest, libc::RENAME_EXCHANGE) {
            Ok(()) => self.tmp.clone(),
            Err(e) if unsupported(&e) => {
                let aside = self.tmp.with_extension("replaced");
                std::fs::rename(&self.dest, &aside).map_err(|e| io_err(&self.dest, "cannot move aside", e))?;
                std::fs::rename(&self.tmp, &self.dest)
                    .map_err(|e| io_err(&self.dest, "cannot move the export into place", e))?;
                aside
            }
            Err(e) => return Err(io_err(&self.dest, "cannot move the export into place", e)),
        };
        std::fs::remove_dir_all(&old).map_err(|e| io_err(&old, "cannot remove the replaced export", e))
    }
}

/// `renameat2(from, to, flags)`.
fn rename2(from: &Path, to: &Path, flags: libc::c_uint) -> std::io::Result<()> {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other);
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: both are NUL-terminated paths that outlive the call
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), flags) };
    match r {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Whether `renameat2` (or its flag) is missing on this kernel or filesystem.
fn unsupported(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP))
}

/// Removes the staging folders in `parent` whose export is dead; returns them. Errors are not
/// the current export's business: a folder that cannot be read or removed is left.
fn remove_stale_staging(parent: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(parent) else { return vec![] };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| staging_pid(p).is_some() && is_stale(p) && std::fs::remove_dir_all(p).is_ok())
        .collect()
}

/// The pid in a staging folder's name (`.<name>.partial-<pid>[-<n>]`).
fn staging_pid(p: &Path) -> Option<u32> {
    let name = p.file_name()?.to_str()?;
    let (_, rest) = name.strip_prefix('.')?.rsplit_once(STAGING_MARK)?;
    rest.split('-').next()?.parse().ok()
}

fn is_stale(dir: &Path) -> bool {
    match File::open(dir.join(LOCK_FILE)) {
        // the lock dies with its process; taking it here means nobody holds it
        Ok(f) => f.try_lock().is_ok(),
        // not locked yet (or an older layout): by the pid, where /proc says
        Err(_) => {
            let proc = Path::new("/proc");
            proc.is_dir() && staging_pid(dir).is_some_and(|pid| !proc.join(pid.to_string()).exists())
        }
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

    #[test]
    fn a_folder_that_appears_meanwhile_is_not_replaced() {
        let root = scratch("race");
        let dest = root.join("out");
        let (a, b) = (StagedDir::create(&dest, false).unwrap(), StagedDir::create(&dest, false).unwrap());
        std::fs::write(a.path().join("a.txt"), "a").unwrap();
        std::fs::write(b.path().join("b.txt"), "b").unwrap();
        a.commit().unwrap();
        let e = b.commit().unwrap_err().to_string();
        assert!(e.contains("appeared while this export was running") && e.contains("--force"), "{e}");
        assert!(dest.join("a.txt").exists() && !dest.join("b.txt").exists(), "the winner's export stays");
        assert!(!dest.join(LOCK_FILE).exists());
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 1, "the loser's staging folder is gone");
    }

    #[test]
    fn stale_staging_folders_of_dead_exports_are_removed_and_live_ones_kept() {
        let root = scratch("stale");
        let dest = root.join("out");
        // a live export (this process holds its lock)
        let live = StagedDir::create(&root.join("other"), false).unwrap();
        // a killed export: its lock file is there, unlocked
        let dead = root.join(".out.partial-4194305-0");
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join(LOCK_FILE), "").unwrap();
        std::fs::write(dead.join("model.onnx.data"), "half").unwrap();
        // killed before it locked: a pid that cannot run (above Linux's pid_max)
        let early = root.join(".other.partial-4194306");
        std::fs::create_dir(&early).unwrap();
        let s = StagedDir::create(&dest, false).unwrap();
        let mut removed = s.removed_stale().to_vec();
        removed.sort();
        assert_eq!(removed, [early.clone(), dead.clone()]);
        assert!(!dead.exists() && !early.exists() && live.path().exists());
        // neither this one, nor the live one, is stale to a third export
        let third = StagedDir::create(&root.join("third"), false).unwrap();
        assert!(third.removed_stale().is_empty() && s.path().exists() && live.path().exists());
    }
}
