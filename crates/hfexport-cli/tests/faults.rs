//! Exports that are killed, starved of disk, refused by the filesystem or fed files that change
//! under them: the requested output is absent or complete, never partial; nothing is left behind
//! that the next export does not clean up; every failure is a clear error, never a crash.
//!
//! The exports stop themselves at named points (`HFEXPORT_FAULT_STOP`, see
//! `hfexport_core::fault`), where the test kills them or changes their input, so each case hits
//! its point every time instead of racing a timer.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::fixture;

fn hfexport() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hfexport"))
}

fn export_args(model: &Path, out: &Path) -> Vec<String> {
    let s = |p: &Path| p.to_str().unwrap().to_string();
    ["export", "--model", &s(model), "--format", "onnx", "--output", &s(out)].map(String::from).to_vec()
}

fn export(model: &Path, out: &Path, extra: &[&str]) -> Output {
    hfexport().args(export_args(model, out)).args(extra).output().expect("run hfexport")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stderr), String::from_utf8_lossy(&o.stdout))
}

/// An export that stops itself at `point`, stopped there (or a failure with what it printed).
fn stopped_at(point: &str, model: &Path, out: &Path, extra: &[&str]) -> Child {
    let mut child = hfexport()
        .args(export_args(model, out))
        .args(extra)
        .env("HFEXPORT_FAULT_STOP", point)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hfexport");
    let stat = PathBuf::from(format!("/proc/{}/stat", child.id()));
    let start = Instant::now();
    loop {
        let state = std::fs::read_to_string(&stat).unwrap_or_default();
        // the state follows the parenthesised command name
        if state.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('T')) {
            return child;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let o = child.wait_with_output().unwrap();
            panic!("the export ended ({status}) before fault point {point}: {}", text(&o));
        }
        assert!(start.elapsed() < Duration::from_secs(120), "the export never reached fault point {point}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// Every file below `dir` (the ONNX graphs sit in `onnx/`) with its bytes, by relative path.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = vec![];
    for name in entries(dir) {
        let path = dir.join(&name);
        match path.is_dir() {
            true => files.extend(contents(&path).into_iter().map(|(f, b)| (format!("{name}/{f}"), b))),
            false => files.push((name, std::fs::read(&path).unwrap())),
        }
    }
    files
}

/// Every file `export.json` lists is there and non-empty: the export is complete.
fn assert_complete(out: &Path) {
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("export.json")).expect("export.json")).unwrap();
    let comps = meta["components"].as_array().expect("components");
    assert!(!comps.is_empty());
    for c in comps {
        for f in c["files"].as_array().expect("files") {
            let p = out.join(f.as_str().unwrap());
            assert!(p.metadata().is_ok_and(|m| m.len() > 0), "{} is missing or empty", p.display());
        }
    }
}

/// `kill -9` while streaming weights, after the graphs are written and just before the commit:
/// the output folder never appears; the staging folder left behind is removed by the next
/// export to the same parent, which says so and writes a complete export. Killed while
/// replacing an export with `--force`, the old export is untouched.
#[test]
fn killed_exports_leave_the_output_absent_or_whole() {
    let fx = fixture("qwen3");
    for point in ["weights", "graph", "commit"] {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let mut child = stopped_at(point, &fx, &out, &[]);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!out.exists(), "{point}: the output appeared although the export was killed");
        let left = entries(tmp.path());
        assert!(
            left.len() == 1 && left[0].starts_with(".out.partial-"),
            "{point}: expected the killed export's staging folder, found {left:?}"
        );
        let o = export(&fx, &out, &[]);
        assert!(o.status.success(), "{point}: {}", text(&o));
        assert!(
            text(&o).contains("staging folder of an interrupted export") && text(&o).contains(&left[0]),
            "{}",
            text(&o)
        );
        assert_eq!(entries(tmp.path()), ["out"], "{point}: the next export cleaned up");
        assert_complete(&out);

        // replacing it with --force, killed at the same point: the old export stays whole
        let before = contents(&out);
        let mut child = stopped_at(point, &fx, &out, &["--force", "--dtype", "float16"]);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(before == contents(&out), "{point}: the export being replaced changed");
    }
}

/// An input file truncated by another program in the middle of an export: a clear error naming
/// the file, not a crash on the vanished pages, and nothing left behind.
#[test]
fn a_checkpoint_truncated_during_the_export_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model");
    std::fs::create_dir(&model).unwrap();
    for f in std::fs::read_dir(fixture("qwen3")).unwrap() {
        let f = f.unwrap().path();
        if f.is_file() {
            std::fs::copy(&f, model.join(f.file_name().unwrap())).unwrap();
        }
    }
    let weights = model.join("model.safetensors");
    let out = tmp.path().join("out");
    let child = stopped_at("weights", &model, &out, &[]);
    // keep the header, drop every tensor's bytes
    let bytes = std::fs::read(&weights).unwrap();
    let header = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap());
    std::fs::OpenOptions::new().write(true).open(&weights).unwrap().set_len(header).unwrap();
    // SAFETY: kill has no memory-safety preconditions
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGCONT) }, 0);
    let o = child.wait_with_output().unwrap();
    let said = text(&o);
    assert_eq!(o.status.code(), Some(1), "a clear error, not a crash: {:?} {said}", o.status);
    assert!(said.contains("model.safetensors") && said.contains("changed size while being read"), "{said}");
    assert_eq!(entries(tmp.path()), ["model"], "nothing left behind");
}

/// A filesystem mounted for one test and unmounted when dropped.
struct Mount(PathBuf);

impl Mount {
    /// A tmpfs of `bytes` at `dir` with extra options, or why it cannot be made here (needs
    /// root and the right to mount).
    fn tmpfs(dir: &Path, bytes: u64, extra: &str) -> Result<Mount, String> {
        // SAFETY: geteuid has no preconditions
        if unsafe { libc::geteuid() } != 0 {
            return Err("not running as root".into());
        }
        std::fs::create_dir_all(dir).unwrap();
        let opts = format!("size={bytes}{extra}");
        let o = Command::new("mount").args(["-t", "tmpfs", "-o", &opts, "tmpfs"]).arg(dir).output();
        match o {
            Ok(o) if o.status.success() => Ok(Mount(dir.to_path_buf())),
            Ok(o) => Err(format!("mount refused: {}", String::from_utf8_lossy(&o.stderr).trim())),
            Err(e) => Err(format!("cannot run mount: {e}")),
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn skipped(test: &str, why: &str) {
    eprintln!("SKIPPED {test}: {why} (this check needs a tmpfs mount; run the suite as root, as CI does)");
}

/// A disk that fills up during the export: "No space left on device" naming what was being
/// written, and the filesystem left as it was.
#[test]
fn a_full_filesystem_is_a_clear_error_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let fx = fixture("qwen3");
    let whole = tmp.path().join("whole");
    let o = export(&fx, &whole, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let size: u64 = entries(&whole).iter().map(|f| whole.join(f).metadata().unwrap().len()).sum();
    let small = tmp.path().join("small");
    let mount = match Mount::tmpfs(&small, size / 2, "") {
        Ok(m) => m,
        Err(why) => return skipped("a_full_filesystem_is_a_clear_error_and_leaves_nothing", &why),
    };
    let o = export(&fx, &small.join("out"), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("No space left on device"), "{}", text(&o));
    assert!(entries(&small).is_empty(), "left behind on the full filesystem: {:?}", entries(&small));
    drop(mount);
}

/// An output folder whose parent cannot be written: a clear error naming the folder.
#[test]
fn a_read_only_output_parent_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let parent = tmp.path().join("ro");
    // root writes through permission bits: a read-only mount then; otherwise the bits suffice
    // SAFETY: geteuid has no preconditions
    let _mount = match unsafe { libc::geteuid() } {
        0 => match Mount::tmpfs(&parent, 1 << 20, ",ro") {
            Ok(m) => Some(m),
            Err(why) => return skipped("a_read_only_output_parent_is_a_clear_error", &why),
        },
        _ => {
            std::fs::create_dir(&parent).unwrap();
            std::fs::set_permissions(&parent, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
            None
        }
    };
    let o = export(&fixture("qwen3"), &parent.join("out"), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let said = text(&o);
    assert!(said.contains(parent.to_str().unwrap()), "the error names the folder: {said}");
    assert!(said.contains("Read-only file system") || said.contains("Permission denied"), "{said}");
    assert!(entries(&parent).is_empty());
}

/// Files declaring absurd sizes are refused from their metadata, before a byte is read: a
/// (sparse) 17 MB `config.json`, a 100 MB `export.json`, a safetensors header claiming 1 TB.
#[test]
fn hostile_sizes_are_refused_before_anything_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let sparse = |path: &Path, len: u64| std::fs::File::create(path).unwrap().set_len(len).unwrap();
    let model = tmp.path().join("model");
    std::fs::create_dir(&model).unwrap();
    sparse(&model.join("config.json"), 17 << 20);
    let o = hfexport().args(["inspect", model.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("config.json") && text(&o).contains("more than the 16777216 bytes"), "{}", text(&o));

    let export = tmp.path().join("export");
    std::fs::create_dir(&export).unwrap();
    sparse(&export.join("export.json"), 100 << 20);
    let o = hfexport().args(["inspect", export.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("export.json") && text(&o).contains("more than the 67108864 bytes"), "{}", text(&o));

    std::fs::copy(fixture("qwen3").join("config.json"), model.join("config.json")).unwrap();
    let mut header = (1u64 << 40).to_le_bytes().to_vec();
    header.extend(b"{}");
    std::fs::write(model.join("model.safetensors"), header).unwrap();
    let o = hfexport().args(["inspect", model.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("model.safetensors") && text(&o).contains("above the limit"), "{}", text(&o));
}
