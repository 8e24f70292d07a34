//! `cargo xtask codegen [onnx|executorch] [--check]`: generated code committed so a plain build
//! needs no code generator:
//! - the ONNX protobuf types of hfexport-onnx, by prost-build from the vendored
//!   `crates/hfexport-onnx/proto/onnx.proto` (needs protoc);
//! - the flatbuffer types of hfexport-executorch, by the flatc that ships in the executorch
//!   wheel (`.venv/`, `cargo xtask setup`) from the schemas vendored in
//!   `crates/hfexport-executorch/schema/`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The vendored schema, relative to the repository root.
const PROTO: &str = "crates/hfexport-onnx/proto/onnx.proto";
/// The committed Rust code generated from it.
const GENERATED: &str = "crates/hfexport-onnx/src/generated/onnx.rs";
/// What the vendored proto's first line says before the onnx version it came from.
const VERSION_MARKER: &str = "from onnx ";

/// Which generated code `cargo xtask codegen` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    All,
    Onnx,
    Executorch,
}

/// The flatbuffer schemas of hfexport-executorch, the committed code flatc makes of each, and
/// whether the schema's includes are generated into the same file.
const FLATBUFFERS: [(&str, &str, bool); 2] = [
    ("crates/hfexport-executorch/schema/program.fbs", "crates/hfexport-executorch/src/generated/program.rs", true),
    ("crates/hfexport-executorch/schema/xnnpack.fbs", "crates/hfexport-executorch/src/generated/xnnpack.rs", false),
];

/// Regenerates the code of `which`; with `check`, only compares it with a fresh generation and
/// fails when they differ.
pub fn codegen(root: &Path, which: Which, check: bool) -> Result<()> {
    if which != Which::Executorch {
        let proto = root.join(PROTO);
        let onnx_version = vendored_onnx_version(&proto)?;
        let code = generate(&proto, &onnx_version)?;
        write_or_check(root, GENERATED, &code, &format!("{PROTO} (onnx {onnx_version})"), check)?;
    }
    if which != Which::Onnx {
        let flatc = flatc(root)?;
        for (schema, generated, gen_all) in FLATBUFFERS {
            let code = generate_flatbuffers(&flatc, &root.join(schema), gen_all)?;
            write_or_check(root, generated, &code, schema, check)?;
        }
    }
    Ok(())
}

/// Writes `code` to `target` (relative to `root`), or with `check` fails when it differs.
fn write_or_check(root: &Path, rel: &str, code: &str, from: &str, check: bool) -> Result<()> {
    let target = root.join(rel);
    if check {
        let committed = match std::fs::read_to_string(&target) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                bail!("{rel} does not exist: run `cargo xtask codegen`")
            }
            Err(err) => return Err(err).with_context(|| format!("reading {}", target.display())),
        };
        if committed != code {
            bail!("{rel} is out of date with {from}: run `cargo xtask codegen`");
        }
        println!("{rel} is up to date with {from}");
    } else {
        let dir = target.parent().expect("a generated file has a parent directory");
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        if std::fs::read_to_string(&target).is_ok_and(|old| old == code) {
            println!("{rel} unchanged");
        } else {
            std::fs::write(&target, code).with_context(|| format!("writing {}", target.display()))?;
            println!("wrote {rel} from {from}");
        }
    }
    Ok(())
}

/// The flatc of the executorch wheel in `.venv/`, or an error saying how to get it.
fn flatc(root: &Path) -> Result<PathBuf> {
    let lib = root.join(".venv/lib");
    std::fs::read_dir(&lib)
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("site-packages/executorch/data/bin/flatc"))
        .find(|p| p.is_file())
        .with_context(|| {
            format!(
                "no flatc in {}/python3*/site-packages/executorch/data/bin: run `cargo xtask setup` (it installs \
                 executorch==1.5.1, whose wheel ships flatc 24.3.25)",
                lib.display()
            )
        })
}

/// `flatc --rust` on `schema` into a fresh temporary directory; the code to commit behind our
/// preamble.
fn generate_flatbuffers(flatc: &Path, schema: &Path, gen_all: bool) -> Result<String> {
    let out = TempDir::new()?;
    let version = crate::output(Command::new(flatc).arg("--version"))?;
    let mut cmd = Command::new(flatc);
    cmd.arg("--rust").arg("-o").arg(&out.0);
    if gen_all {
        cmd.arg("--gen-all");
    }
    cmd.arg(schema.file_name().expect("a schema file")).current_dir(schema.parent().expect("a schema folder"));
    crate::run(&mut cmd)?;
    let stem = schema.file_stem().expect("a schema file").to_string_lossy();
    let generated = out.0.join(format!("{stem}_generated.rs"));
    let body = std::fs::read_to_string(&generated).with_context(|| format!("reading {}", generated.display()))?;
    Ok(format!(
        "// @generated by `cargo xtask codegen` ({}) from schema/{stem}.fbs. Do not edit.\n{body}",
        version.trim()
    ))
}

/// The onnx release named on the vendored proto's first line
/// (`// Vendored by hfexport from onnx 1.23.2 (...)`).
fn vendored_onnx_version(proto: &Path) -> Result<String> {
    let text = std::fs::read_to_string(proto).with_context(|| format!("reading {}", proto.display()))?;
    let first = text.lines().next().unwrap_or("");
    let version = first
        .split_once(VERSION_MARKER)
        .map(|(_, rest)| rest.split(|c: char| !(c.is_ascii_digit() || c == '.')).next().unwrap_or(""))
        .unwrap_or("");
    if version.split('.').count() != 3 || version.split('.').any(str::is_empty) {
        bail!("{PROTO}: the first line must name the onnx release it came from (`// Vendored by hfexport {VERSION_MARKER}X.Y.Z ...`), found {first:?}");
    }
    Ok(version.to_string())
}

/// Runs prost-build on `proto` into a fresh temporary directory and returns the code to commit:
/// prost-build's output behind our preamble.
fn generate(proto: &Path, onnx_version: &str) -> Result<String> {
    let protoc = protoc()?;
    let out = TempDir::new()?;
    let include = proto.parent().expect("PROTO has a parent directory");
    let mut config = prost_build::Config::new();
    config.protoc_executable(&protoc).out_dir(&out.0);
    config
        .compile_protos(&[proto], &[include])
        .with_context(|| format!("prost-build on {} (protoc: {})", proto.display(), protoc.to_string_lossy()))?;
    // `package onnx;` -> onnx.rs
    let generated = out.0.join("onnx.rs");
    let body = std::fs::read_to_string(&generated).with_context(|| format!("reading {}", generated.display()))?;
    Ok(format!(
        "// @generated by `cargo xtask codegen` from proto/onnx.proto (onnx {onnx_version}). Do not edit.\n{body}"
    ))
}

/// The protoc to run: `$PROTOC` if set (prost-build's convention), else `protoc` on PATH; an
/// error saying how to install it when it does not run.
fn protoc() -> Result<OsString> {
    let protoc = std::env::var_os("PROTOC").unwrap_or_else(|| OsString::from("protoc"));
    match Command::new(&protoc).arg("--version").output() {
        Ok(out) if out.status.success() => Ok(protoc),
        Ok(out) => bail!(
            "`{} --version` failed ({}): {}; install protoc with `apt-get install protobuf-compiler` \
             (or set PROTOC to a working protoc)",
            protoc.to_string_lossy(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(err) => bail!(
            "protoc not found (`{}`: {err}); install it with `apt-get install protobuf-compiler` \
             (or set PROTOC to its path)",
            protoc.to_string_lossy()
        ),
    }
}

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<Self> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("hfexport-codegen-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
