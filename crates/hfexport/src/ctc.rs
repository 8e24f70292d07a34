//! Greedy CTC decoding of a speech encoder's per-frame `logits` (wav2vec2's `…ForCTC`): the
//! best label of each frame, repeats merged, the blank (the config's pad id) dropped; and the
//! text of those labels as transformers' speech-recognition pipeline decodes them
//! (`Wav2Vec2CTCTokenizer.decode`, special tokens kept, as the pipeline asks for CTC) from the
//! checkpoint's `vocab.json`: the pad token dropped, the word delimiter (`|`) replaced by
//! `replace_word_delimiter_char` (a space), the characters joined and stripped, and
//! `clean_up_tokenization_spaces` applied where the tokenizer's config asks for it.

use crate::{Error, Result};
use hfexport_core::Tensor;
use std::collections::HashMap;
use std::path::Path;

/// The transcript ids of each row of `logits` `[batch, frames, vocab]`.
pub fn greedy_ids(logits: &Tensor, blank: i64) -> Result<Vec<Vec<i64>>> {
    let &[batch, frames, vocab] = logits.shape() else {
        return Err(Error::Unsupported(format!("CTC logits must be [batch, frames, vocab], got {:?}", logits.shape())));
    };
    let x = logits.cast(hfexport_core::DType::F32);
    let x = x.as_f32()?;
    let best = |at: usize| (0..vocab).max_by(|&i, &j| x[at + i].total_cmp(&x[at + j])).unwrap_or(0) as i64;
    Ok((0..batch)
        .map(|b| {
            let labels: Vec<i64> = (0..frames).map(|t| best((b * frames + t) * vocab)).collect();
            merged(&labels).into_iter().filter(|&id| id != blank).collect()
        })
        .collect())
}

/// `ids` with runs of one id merged into one.
fn merged(ids: &[i64]) -> Vec<i64> {
    let mut out: Vec<i64> = Vec::with_capacity(ids.len());
    for &id in ids {
        if out.last() != Some(&id) {
            out.push(id);
        }
    }
    out
}

/// A CTC tokenizer's vocabulary (`vocab.json`) and what its `tokenizer_config.json` says of
/// decoding (`word_delimiter_token`, `replace_word_delimiter_char`, `pad_token`,
/// `clean_up_tokenization_spaces`, with `Wav2Vec2CTCTokenizer`'s defaults).
#[derive(Debug, Clone)]
pub struct CtcVocab {
    tokens: HashMap<i64, String>,
    delimiter: String,
    replacement: String,
    pad: String,
    clean_up: bool,
}

impl CtcVocab {
    /// The vocabulary of `dir`, `None` where it has no `vocab.json`.
    pub fn from_dir(dir: &Path) -> Result<Option<CtcVocab>> {
        let path = dir.join("vocab.json");
        if !path.is_file() {
            return Ok(None);
        }
        let bad = |p: &Path, msg: String| Error::Unsupported(format!("{}: {msg}", p.display()));
        let read = |p: &Path| -> Result<serde_json::Value> {
            let text = hfexport_core::limits::read_text(p, hfexport_core::limits::TOKENIZER_JSON)
                .map_err(|e| bad(p, e.to_string()))?;
            serde_json::from_str(&text).map_err(|e| bad(p, e.to_string()))
        };
        let vocab = read(&path)?;
        let map = vocab.as_object().ok_or_else(|| bad(&path, "is not an object of token: id".into()))?;
        let mut tokens = HashMap::new();
        for (token, id) in map {
            let id = id.as_i64().ok_or_else(|| bad(&path, format!("`{token}`'s id is not an integer")))?;
            tokens.insert(id, token.clone());
        }
        let config_path = dir.join("tokenizer_config.json");
        let config = if config_path.is_file() { read(&config_path)? } else { serde_json::Value::Null };
        let special = |key: &str, default: &str| -> String {
            match config.get(key) {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(serde_json::Value::Object(o)) => {
                    o.get("content").and_then(|c| c.as_str()).unwrap_or(default).to_string()
                }
                _ => default.to_string(),
            }
        };
        Ok(Some(CtcVocab {
            tokens,
            delimiter: special("word_delimiter_token", "|"),
            replacement: special("replace_word_delimiter_char", " "),
            pad: special("pad_token", "<pad>"),
            clean_up: config.get("clean_up_tokenization_spaces").and_then(serde_json::Value::as_bool) == Some(true),
        }))
    }

    /// The text of transcript ids (repeats already merged).
    pub fn text(&self, ids: &[i64]) -> String {
        let chars: Vec<&str> = ids
            .iter()
            .filter_map(|id| self.tokens.get(id).map(String::as_str))
            .filter(|t| *t != self.pad)
            .map(|t| if t == self.delimiter { self.replacement.as_str() } else { t })
            .collect();
        let text = chars.concat().trim().to_string();
        match self.clean_up {
            true => clean_up_tokenization(&text),
            false => text,
        }
    }
}

/// transformers' `clean_up_tokenization`: no space before punctuation and English contractions.
fn clean_up_tokenization(text: &str) -> String {
    let pairs = [
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ];
    pairs.iter().fold(text.to_string(), |t, (from, to)| t.replace(from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_merge_and_blanks_split_them() {
        // frames: a a <pad> a b b <pad> <pad> | c  (ids: pad 0, a 1, b 2, | 3, c 4)
        let labels = [1, 1, 0, 1, 2, 2, 0, 0, 3, 4];
        let mut x = vec![0f32; labels.len() * 5];
        for (t, &l) in labels.iter().enumerate() {
            x[t * 5 + l] = 1.0;
        }
        let logits = Tensor::f32(vec![1, labels.len(), 5], x).unwrap();
        let ids = greedy_ids(&logits, 0).unwrap();
        assert_eq!(ids, vec![vec![1, 1, 2, 3, 4]]);
        let mut vocab = CtcVocab {
            tokens: [(0, "<pad>"), (1, "a"), (2, "b"), (3, "|"), (4, "c"), (5, ".")]
                .map(|(i, t)| (i, t.to_string()))
                .into(),
            delimiter: "|".into(),
            replacement: " ".into(),
            pad: "<pad>".into(),
            clean_up: false,
        };
        assert_eq!(vocab.text(&ids[0]), "aab c");
        assert_eq!(vocab.text(&[1, 3, 5]), "a .");
        vocab.clean_up = true;
        assert_eq!(vocab.text(&[1, 3, 5]), "a.");
    }
}
