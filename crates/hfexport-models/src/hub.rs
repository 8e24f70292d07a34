//! Checkpoints named by hub repo id (`org/name[@revision]`), resolved offline from a Hugging
//! Face hub cache laid out as `huggingface_hub` lays it out: `models--org--name/refs/<rev>`
//! holds a commit sha, `snapshots/<sha>/` the files (symlinks into `blobs/`). Never a network
//! call (`HF_HUB_OFFLINE` semantics): a model or revision the cache lacks is an error saying
//! where we looked and how to fill it.

use crate::error::{ModelError, Result};
use std::path::{Path, PathBuf};

/// A snapshot folder of the cache and what it is of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub repo: String,
    pub sha: String,
    pub dir: PathBuf,
}

/// The hub cache: `HF_HUB_CACHE`, else `HF_HOME/hub`, else `~/.cache/huggingface/hub`.
pub fn cache_dir() -> PathBuf {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("HF_HUB_CACHE")
        .or_else(|| var("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| var("HOME").map(|h| h.join(".cache").join("huggingface").join("hub")))
        .unwrap_or_else(|| PathBuf::from(".cache/huggingface/hub"))
}

/// `(repo, revision)` when `spec` reads as a repo id (`org/name`, optionally `@revision`).
fn repo_id(spec: &str) -> Option<(&str, Option<&str>)> {
    let (repo, rev) = match spec.split_once('@') {
        Some((r, v)) if !v.is_empty() => (r, Some(v)),
        Some(_) => return None,
        None => (spec, None),
    };
    let (org, name) = repo.split_once('/')?;
    let part = |p: &str| {
        !p.is_empty()
            && !p.starts_with('.')
            && p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    (part(org) && part(name)).then_some((repo, rev))
}

/// The checkpoint folder `spec` names: itself when it exists (a local folder wins), else the
/// cached snapshot of a repo id; an error naming the cache searched when it has none.
pub fn resolve(spec: &Path) -> Result<PathBuf> {
    if spec.exists() {
        return Ok(spec.to_path_buf());
    }
    match spec.to_str().and_then(repo_id) {
        Some((repo, rev)) => Ok(snapshot(&cache_dir(), repo, rev.unwrap_or("main"))?.dir),
        None => Ok(spec.to_path_buf()),
    }
}

/// The snapshot of `repo` at `rev` (a ref under `refs/`, or a commit sha) in `cache`.
pub fn snapshot(cache: &Path, repo: &str, rev: &str) -> Result<Snapshot> {
    let root = cache.join(format!("models--{}", repo.replace('/', "--")));
    let fill = match rev {
        "main" => format!("hf download {repo}"),
        r => format!("hf download {repo} --revision {r}"),
    };
    let missing = |what: String| ModelError::HubCache {
        path: cache.to_path_buf(),
        msg: format!("{what}; fill the cache with `{fill}` (huggingface_hub's command line), or pass a local folder"),
    };
    if !root.is_dir() {
        return Err(missing(format!("`{repo}` is not in the hub cache (looked for {})", root.display())));
    }
    let is_sha = |s: &str| s.len() == 40 && s.chars().all(|c| c.is_ascii_hexdigit());
    let sha = match is_sha(rev) {
        true => rev.to_string(),
        false => {
            let r = root.join("refs").join(rev);
            let text = hfexport_core::limits::read_text(&r, 1024).map_err(|_| {
                missing(format!("`{repo}` has no revision `{rev}` in the hub cache ({} is missing)", r.display()))
            })?;
            let sha = text.trim();
            if !is_sha(sha) {
                return Err(missing(format!("{} does not hold a commit hash (40 hex digits)", r.display())));
            }
            sha.to_string()
        }
    };
    let dir = root.join("snapshots").join(&sha);
    if !dir.join("config.json").exists() {
        return Err(missing(format!("the snapshot {} of `{repo}` has no config.json", dir.display())));
    }
    Ok(Snapshot { repo: repo.to_string(), sha, dir })
}

/// `(repo, sha)` when `dir` is a snapshot folder of a hub cache
/// (`.../models--org--name/snapshots/<sha>`).
pub fn snapshot_of(dir: &Path) -> Option<(String, String)> {
    let sha = dir.file_name()?.to_str()?;
    let snapshots = dir.parent()?;
    if snapshots.file_name()? != "snapshots" {
        return None;
    }
    let repo = snapshots.parent()?.file_name()?.to_str()?.strip_prefix("models--")?;
    let (org, name) = repo.split_once("--")?;
    Some((format!("{org}/{name}"), sha.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids_and_paths_are_told_apart() {
        assert_eq!(repo_id("Qwen/Qwen3-0.6B"), Some(("Qwen/Qwen3-0.6B", None)));
        assert_eq!(repo_id("org/name@v1.0"), Some(("org/name", Some("v1.0"))));
        for path in ["./model", "/abs/path", "a/b/c", "model", "../x/y", "org/name@"] {
            assert_eq!(repo_id(path), None, "{path}");
        }
        let dir = Path::new("/c/models--org--name/snapshots/abc");
        assert_eq!(snapshot_of(dir), Some(("org/name".into(), "abc".into())));
        assert_eq!(snapshot_of(Path::new("/c/some/folder")), None);
    }
}
