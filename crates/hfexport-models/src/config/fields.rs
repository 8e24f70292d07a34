//! Typed access to a JSON object, naming the file and the key in every error: the reason configs
//! are read key by key rather than through a typed serde struct (a serde error names no key path).

use super::*;

/// A JSON object plus what error messages need: the file, and the dotted prefix of nested keys.
pub(super) struct Fields<'a> {
    pub(super) obj: &'a Map<String, Value>,
    pub(super) path: &'a Path,
    pub(super) prefix: &'a str,
    /// The family's `(key, alias)` pairs ([`ConfigSchema::aliases`]).
    pub(super) aliases: &'static [(&'static str, &'static str)],
}

impl<'a> Fields<'a> {
    pub(super) fn new(obj: &'a Map<String, Value>, path: &'a Path, prefix: &'a str) -> Fields<'a> {
        Fields { obj, path, prefix, aliases: &[] }
    }

    /// The same object read with a family's key aliases.
    pub(super) fn with_aliases(&self, aliases: &'static [(&'static str, &'static str)]) -> Fields<'a> {
        Fields { aliases, ..*self }
    }

    /// The value of `key`, or of its alias when that is set (non-null).
    pub(super) fn raw(&self, key: &str) -> Option<&'a Value> {
        let alias = self.aliases.iter().find(|(k, _)| *k == key).and_then(|(_, a)| self.obj.get(*a));
        alias.filter(|v| !v.is_null()).or_else(|| self.obj.get(key))
    }

    pub(super) fn err(&self, key: &str, msg: impl Into<String>) -> ModelError {
        ModelError::config(PathBuf::from(self.path), &format!("{}{key}", self.prefix), msg)
    }

    /// An integer; absent or null is `None`.
    pub(super) fn int(&self, key: &str) -> Result<Option<i64>> {
        match self.raw(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => {
                v.as_i64().map(Some).ok_or_else(|| self.err(key, format!("must be an integer, got {}", describe(v))))
            }
        }
    }

    /// A positive integer in `1..=max`; absent takes `default` (`None`: the key is required),
    /// null is an error.
    pub(super) fn size(&self, key: &str, default: Option<usize>, max: usize) -> Result<usize> {
        let v = match self.raw(key) {
            None => return default.ok_or_else(|| self.err(key, "is missing")),
            Some(v) => v,
        };
        let n = match (v.as_u64(), v.as_i64()) {
            (Some(n), _) => n,
            (None, Some(n)) => return Err(self.err(key, format!("must be a positive integer, got {n}"))),
            _ => return Err(self.err(key, format!("must be a positive integer, got {}", describe(v)))),
        };
        self.check_count(key, n, max)
    }

    /// Like [`Fields::size`] for an optional key, also accepting integral floats (`8192.0`),
    /// as transformers does inside rope dicts.
    pub(super) fn count_lenient(&self, key: &str, max: usize) -> Result<Option<usize>> {
        let v = match self.raw(key) {
            None | Some(Value::Null) => return Ok(None),
            Some(v) => v,
        };
        let n = match (v.as_u64(), v.as_f64()) {
            (Some(n), _) => n,
            (None, Some(x)) if x.fract() == 0.0 && x >= 1.0 => x as u64,
            _ => return Err(self.err(key, format!("must be a positive integer, got {}", describe(v)))),
        };
        self.check_count(key, n, max).map(Some)
    }

    pub(super) fn check_count(&self, key: &str, n: u64, max: usize) -> Result<usize> {
        if n == 0 {
            return Err(self.err(key, "must be a positive integer, got 0"));
        }
        match usize::try_from(n) {
            Ok(n) if n <= max => Ok(n),
            _ => Err(self.err(key, format!("{n} is above the limit of {max}"))),
        }
    }

    /// A finite number (integer or float); absent or null is `None`.
    pub(super) fn number(&self, key: &str) -> Result<Option<f64>> {
        match self.raw(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v @ Value::Number(_)) => match v.as_f64() {
                Some(x) if x.is_finite() => Ok(Some(x)),
                _ => Err(self.err(key, format!("must be a finite number, got {}", describe(v)))),
            },
            Some(v) => Err(self.err(key, format!("must be a number, got {}", describe(v)))),
        }
    }

    /// A number > 0 that `rope_type` needs (`"any"`: every rope type).
    pub(super) fn required_positive(&self, key: &str, rope_type: &str) -> Result<f64> {
        let what = if rope_type == "any" { String::new() } else { format!(" (required by rope_type `{rope_type}`)") };
        match self.number(key)? {
            Some(x) if x > 0.0 => Ok(x),
            Some(x) => Err(self.err(key, format!("must be > 0, got {x}"))),
            None => Err(self.err(key, format!("is missing or null{what}"))),
        }
    }

    /// A boolean; absent is `None`, null is an error.
    pub(super) fn bool(&self, key: &str) -> Result<Option<bool>> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.err(key, format!("must be true or false, got {}", describe(v)))),
        }
    }

    /// A string; absent or null is `None`.
    pub(super) fn string(&self, key: &str) -> Result<Option<&'a str>> {
        match self.raw(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.err(key, format!("must be a string, got {}", describe(v)))),
        }
    }
}

/// A short rendering of a JSON value for error messages.
pub(super) fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("the string {}", Value::String(s.chars().take(60).collect())),
        Value::Array(_) => "a list".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}
