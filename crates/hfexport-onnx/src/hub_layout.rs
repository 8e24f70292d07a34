//! The `onnx/` folder of an export: the Hugging Face Hub's ONNX layout beside ours.
//!
//! optimum's `ORTModel` classes and sentence-transformers' onnx backend load `model.onnx` from
//! the folder's root (where hfexport writes it); transformers.js and fastembed load
//! `onnx/model.onnx`, with `config.json` and the tokenizer at the root. So every `.onnx` of an
//! export and its external data are also under `onnx/`, as hard links: no second copy of the
//! weights, and ONNX Runtime, which refuses external data reached through a symbolic link,
//! reads them as the files they are. A filesystem without hard links gets copies.

use crate::error::OnnxError;
use hfexport_core::metadata::Component;
use hfexport_core::Result;
use std::path::Path;

/// The subfolder transformers.js and fastembed read.
pub const SUBFOLDER: &str = "onnx";

/// Links every file of `components` into `dir/onnx/`.
pub fn link_subfolder(components: &[Component], dir: &Path) -> Result<()> {
    let sub = dir.join(SUBFOLDER);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| hfexport_core::Error::from(OnnxError::Io { path, source })
    };
    std::fs::create_dir_all(&sub).map_err(io(&sub))?;
    let mut files: Vec<&str> = components.iter().flat_map(|c| c.files.iter().map(String::as_str)).collect();
    files.sort_unstable();
    files.dedup();
    for name in files {
        let (src, dst) = (dir.join(name), sub.join(name));
        if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst).map_err(io(&src))?;
        }
    }
    Ok(())
}
