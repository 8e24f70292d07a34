//! The fixture list of `tests/fixtures/manifest.json`, read once; the workspace tests and the
//! CLI's tests both include this file, so there is one list for every test.

use std::path::Path;
use std::sync::OnceLock;

use super::MANIFEST;

/// Names of the committed causal-LM checkpoints with attention caches, in manifest order;
/// `HFEXPORT_FIXTURES=a,b` narrows the list for a local run (an unknown name panics, so a typo
/// cannot pass vacuously).
pub fn fixtures() -> Vec<&'static str> {
    causal_lms(false)
}

/// The causal-LM checkpoints whose layers keep a recurrent state (Mamba), in manifest order;
/// narrowed like [`fixtures`].
pub fn recurrent_fixtures() -> Vec<&'static str> {
    causal_lms(true)
}

/// Whether a fixture is exported for generation (components and caches), not as one forward
/// graph: a raw-audio encoder's speech recognition (CTC) is one graph.
fn generating(f: &Entry) -> bool {
    GENERATING.contains(&f.task) && !f.audio
}

fn causal_lms(recurrent: bool) -> Vec<&'static str> {
    let all = manifest_fixtures().into_iter().filter(|f| f.task == "causal-lm" && f.recurrent == recurrent);
    narrowed(all.map(|f| f.name).collect())
}

/// Tasks exported for generation (components and caches), not as one forward graph.
const GENERATING: [&str; 3] = ["causal-lm", "automatic-speech-recognition", "text2text-generation"];

/// The task of the image-text dual encoders (CLIP), whose fixtures have lists of their own.
const DUAL: &str = "zero-shot-image-classification";

/// The encoder fixtures (BERT, RoBERTa, ...) with their task, in manifest order; narrowed by
/// `HFEXPORT_FIXTURES` like [`fixtures`].
pub fn encoder_fixtures() -> Vec<(&'static str, &'static str)> {
    let all: Vec<_> = manifest_fixtures()
        .into_iter()
        .filter(|f| !generating(f) && f.task != DUAL)
        .map(|f| (f.name, f.task))
        .collect();
    let names = narrowed(all.iter().map(|(n, _)| *n).collect());
    all.into_iter().filter(|(n, _)| names.contains(n)).collect()
}

/// The image-text dual encoder fixtures (CLIP), in manifest order; narrowed like [`fixtures`].
pub fn dual_fixtures() -> Vec<&'static str> {
    narrowed(manifest_fixtures().into_iter().filter(|f| f.task == DUAL).map(|f| f.name).collect())
}

/// The encoder-decoder fixtures (Whisper, T5), in manifest order; narrowed like [`fixtures`].
pub fn seq2seq_fixtures() -> Vec<&'static str> {
    let all = manifest_fixtures().into_iter().filter(|f| generating(f) && f.task != "causal-lm");
    narrowed(all.map(|f| f.name).collect())
}

/// The speech encoder-decoder fixtures (Whisper), in manifest order; narrowed like [`fixtures`].
pub fn speech_fixtures() -> Vec<&'static str> {
    let all = manifest_fixtures().into_iter().filter(|f| f.task == "automatic-speech-recognition" && !f.audio);
    narrowed(all.map(|f| f.name).collect())
}

/// `HFEXPORT_FIXTURES=a,b` keeps those of `all` (a name in no list panics, so a typo cannot
/// pass vacuously; a name of the other list is dropped).
fn narrowed(all: Vec<&'static str>) -> Vec<&'static str> {
    match std::env::var("HFEXPORT_FIXTURES") {
        Ok(only) if !only.is_empty() => {
            let known: Vec<&str> = manifest_fixtures().iter().map(|f| f.name).collect();
            only.split(',')
                .inspect(|n| assert!(known.contains(n), "HFEXPORT_FIXTURES: no fixture `{n}`"))
                .filter_map(|n| all.iter().find(|a| **a == n).copied())
                .collect()
        }
        _ => all,
    }
}

/// One fixture of the manifest.
#[derive(Debug, Clone, Copy)]
struct Entry {
    name: &'static str,
    task: &'static str,
    /// Its layers keep a recurrent state, not an attention cache.
    recurrent: bool,
    /// An encoder over raw audio (wav2vec2): one forward graph whatever its task.
    audio: bool,
}

/// Every fixture of the manifest.
fn manifest_fixtures() -> Vec<Entry> {
    static NAMES: OnceLock<Vec<Entry>> = OnceLock::new();
    NAMES
        .get_or_init(|| {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(MANIFEST);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let v: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let list = v["fixtures"].as_array().unwrap_or_else(|| panic!("{}: no `fixtures` list", path.display()));
            list.iter()
                .map(|f| {
                    let name =
                        f["name"].as_str().unwrap_or_else(|| panic!("{}: a fixture without name", path.display()));
                    let task = f["task"].as_str().unwrap_or_else(|| panic!("{}: `{name}` has no task", path.display()));
                    let leak = |s: &str| &*Box::leak(s.to_string().into_boxed_str());
                    let recurrent = f["recurrent"].as_bool().unwrap_or(false);
                    let audio = f["audio"].as_bool().unwrap_or(false);
                    Entry { name: leak(name), task: leak(task), recurrent, audio }
                })
                .collect()
        })
        .clone()
}
