//! Greedy generation, the same for every runtime.
//!
//! Four runtimes run generation exports, and all but their runtime calls is the same: the
//! components found by role in `export.json`, the prompt's calls (one, or a token per call),
//! the per-call `input_ids`/`attention_mask`/`position_ids`, the position and the static
//! cache's bounds, the stop rules, timing, and the [`Generator`] interface the CLI drives. So
//! that logic lives here once, in [`GenerationLoop`], and a runtime implements only
//! [`Session`]: open the components, run one [`Call`] and return its last logits, forget the
//! cache, take inputs fixed for every call.
//!
//! [`greedy`] is the loop itself over any [`Steps`]: argmax as `torch.argmax` (first maximum,
//! NaN lowest), stop at an EOS id (kept) or after `max_new_tokens`, and a clear error carrying
//! the tokens so far when a static cache fills up first. [`static_mask`] is the
//! `attention_mask` of docs/io-contracts.md's static-cache contract.

use crate::config::ExportFormat;
use crate::error::{Error, Result};
use crate::metadata::{Component, ExportMetadata};
use crate::plan::Role;
use crate::Tensor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why [`greedy`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The last token is one of the EOS ids.
    Eos(i64),
    /// `max_new_tokens` were generated.
    MaxNewTokens,
}

/// What [`greedy`] asks of a generator per call.
pub trait Steps {
    /// Runs `prompt` from position 0 (forgetting the cache); the logits of its last token.
    fn prefill(&mut self, prompt: &[i64]) -> Result<Vec<f32>>;
    /// Runs one token at the current position; its logits.
    fn step(&mut self, token: i64) -> Result<Vec<f32>>;
    /// Tokens in the cache (the position of the next token).
    fn position(&self) -> usize;
    /// Slots of a static cache; `None` when the cache grows.
    fn capacity(&self) -> Option<usize>;
}

/// Greedy decoding: prefill `prompt`, then one token per step until `max_new_tokens` are
/// generated or a token of `eos` is (it is included).
pub fn greedy<S: Steps>(
    s: &mut S,
    prompt: &[i64],
    max_new_tokens: usize,
    eos: &[i64],
) -> Result<(Vec<i64>, StopReason)> {
    if prompt.is_empty() {
        return Err(Error::Generation("the prompt is empty: generation needs at least one token".into()));
    }
    if max_new_tokens == 0 {
        return Ok((vec![], StopReason::MaxNewTokens));
    }
    let mut logits = s.prefill(prompt)?;
    let mut tokens = Vec::with_capacity(max_new_tokens);
    loop {
        let next = argmax(&logits) as i64;
        tokens.push(next);
        if eos.contains(&next) {
            return Ok((tokens, StopReason::Eos(next)));
        }
        if tokens.len() == max_new_tokens {
            return Ok((tokens, StopReason::MaxNewTokens));
        }
        if let Some(slots) = s.capacity().filter(|&n| s.position() >= n) {
            return Err(Error::Generation(format!(
                "generation reached the end of the static cache of {slots} slots after {} new tokens (prompt of {} \
                 tokens, {max_new_tokens} asked for); generated so far: {tokens:?}; re-export with a larger \
                 --static-cache or ask for fewer new tokens",
                tokens.len(),
                prompt.len(),
            )));
        }
        logits = s.step(next)?;
    }
}

/// Index of the largest logit (the first on ties, as `torch.argmax`); NaN counts as smallest.
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in logits.iter().enumerate() {
        let b = logits[best];
        if x > b || (b.is_nan() && !x.is_nan()) {
            best = i;
        }
    }
    best
}

/// The static-cache `attention_mask` [1, 1, q, slots] (row-major): slot `j` visible to query
/// `i` iff `j <= pos + i`.
pub fn static_mask(q: usize, pos: usize, slots: usize) -> Vec<bool> {
    (0..q).flat_map(|i| (0..slots).map(move |j| j <= pos + i)).collect()
}

/// One call of a generation component: `tokens` at positions `pos..pos + tokens.len()`.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// [`Role::Prefill`] for the prompt of an export that has a prefill component, else
    /// [`Role::Decode`].
    pub role: Role,
    pub tokens: &'a [i64],
    /// Tokens already in the cache.
    pub pos: usize,
    /// Slots of a static cache; `None` when the cache grows.
    pub slots: Option<usize>,
}

impl Call<'_> {
    /// What every generation component takes per call (docs/io-contracts.md): `input_ids`
    /// int64 [1, q], `attention_mask` (a static cache's bool [1, 1, q, slots], [`static_mask`];
    /// a growing cache's int64 ones [1, pos + q]) and `position_ids` int64 [1, q].
    pub fn inputs(&self) -> Result<BTreeMap<String, Tensor>> {
        let (q, pos) = (self.tokens.len(), self.pos);
        let mask = match self.slots {
            Some(slots) => Tensor::bool(vec![1, 1, q, slots], static_mask(q, pos, slots))?,
            None => Tensor::i64(vec![1, pos + q], vec![1; pos + q])?,
        };
        let positions = (pos..pos + q).map(|p| p as i64).collect();
        Ok(BTreeMap::from([
            ("input_ids".to_string(), Tensor::i64(vec![1, q], self.tokens.to_vec())?),
            ("attention_mask".to_string(), mask),
            ("position_ids".to_string(), Tensor::i64(vec![1, q], positions)?),
        ]))
    }
}

/// The shape of a growing cache's empty past, which the prompt's call takes: one sequence (the
/// batch, the first axis, is 1) and no positions (every other symbolic axis is 0). `dims` are
/// the cache input's, `None` where symbolic.
pub fn empty_past(dims: &[Option<usize>]) -> Vec<usize> {
    dims.iter().enumerate().map(|(axis, d)| d.unwrap_or(usize::from(axis == 0))).collect()
}

/// The generation components of an export folder, found by role: what a [`Session`] opens.
#[derive(Debug)]
pub struct GenerationExport {
    pub dir: PathBuf,
    meta: ExportMetadata,
}

impl GenerationExport {
    /// Reads the `export.json` of `dir`: an export in `format` with a `decode` component.
    /// Errors name the folder.
    pub fn read(dir: &Path, format: ExportFormat) -> Result<GenerationExport> {
        let meta = ExportMetadata::read(dir)?;
        crate::integrity::check_component_sizes(dir, &meta)?;
        let fail = |msg: String| Error::Generation(format!("{}: {msg}", dir.display()));
        let f = format.as_str();
        if meta.format != f {
            return Err(fail(format!(
                "this is a {} export; generation with the {f} runner needs an export made with --format {f}",
                meta.format
            )));
        }
        let export = GenerationExport { dir: dir.to_path_buf(), meta };
        if export.meta.by_role(Role::Decode).is_none() {
            return Err(fail(format!(
                "this export has no `decode` component (components: {}); generation needs an export made with \
                 --for-generation, e.g. hfexport export --format {f} --dynamic --for-generation --static-cache N \
                 --multi-token-decode",
                export.component_names()
            )));
        }
        Ok(export)
    }

    /// The component of the steps (and of the prompt when there is no [`Self::prefill`]).
    pub fn decode(&self) -> &Component {
        self.meta.by_role(Role::Decode).expect("checked by GenerationExport::read")
    }

    /// The component of the prompt, unless `decode` serves it: there is none, or `decode` keeps
    /// its cache as runtime state, which a separate prefill cannot hand over.
    pub fn prefill(&self) -> Option<&Component> {
        self.meta.by_role(Role::Prefill).filter(|_| self.decode().states.is_empty())
    }

    /// Slots of a static cache; `None` when the cache grows.
    pub fn slots(&self) -> Option<usize> {
        self.decode().static_slots()
    }

    /// The most tokens `decode` takes per call: 1 when `input_ids` is [1, 1], else the maximum
    /// of its query-length symbol (a `.pte` plans every tensor at such a bound, so a longer
    /// prompt goes in chunks of it).
    pub fn decode_tokens(&self) -> usize {
        let decode = self.decode();
        let query = decode.inputs.iter().find(|p| p.name == "input_ids").and_then(|p| p.shape.get(1));
        match query {
            Some(d) => d.parse().ok().or_else(|| decode.symbols.get(d).map(|r| r.max as usize)).unwrap_or(usize::MAX),
            None => usize::MAX,
        }
        .max(1)
    }

    /// The components' names, for messages.
    fn component_names(&self) -> String {
        self.meta.components.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
    }
}

/// The runtime calls of generation, all a runtime implements: [`GenerationLoop`] does the rest.
pub trait Session: Sized {
    /// The format whose exports this runtime runs.
    const FORMAT: ExportFormat;
    /// Opens the components of `export` in the runtime, with an empty cache.
    fn open(export: &GenerationExport) -> Result<Self>;
    /// The runtime and its version, e.g. `onnxruntime 1.32.0`.
    fn runtime(&self) -> String;
    /// How the cache is held, for a log line: `stateful`, `zero-copy`, or empty.
    fn kind(&self) -> &'static str {
        ""
    }
    /// Forgets the cache: the next call is at position 0.
    fn reset(&mut self) -> Result<()>;
    /// Runs `call` on the component of its role (within the cache's bounds, checked); the
    /// logits of its last token, as f32.
    fn run(&mut self, call: &Call) -> Result<Vec<f32>>;
    /// Feeds `inputs` unchanged to every later call (an encoder-decoder's cross-attention keys
    /// and values, from its `encoder` component).
    fn set_fixed_inputs(&mut self, inputs: &BTreeMap<String, Tensor>) -> Result<()>;
}

/// Greedy generation over a generation export in any runtime: the components by role, the
/// prompt in one call of `prefill` (or of `decode`, in chunks of the most it takes), the
/// position and a static cache's bounds; the runtime's [`Session`] makes each call.
#[derive(Debug)]
pub struct GenerationLoop<S> {
    session: S,
    dir: PathBuf,
    slots: Option<usize>,
    /// The prompt goes through `prefill`.
    has_prefill: bool,
    /// The most tokens `decode` takes per call.
    decode_tokens: usize,
    pos: usize,
    last_stop: Option<StopReason>,
}

impl<S: Session> GenerationLoop<S> {
    /// Opens the generation components of the export folder `dir`; errors name the folder
    /// and what is missing.
    pub fn load(dir: impl AsRef<Path>) -> Result<GenerationLoop<S>> {
        let export = GenerationExport::read(dir.as_ref(), S::FORMAT)?;
        Ok(GenerationLoop {
            session: S::open(&export)?,
            slots: export.slots(),
            has_prefill: export.prefill().is_some(),
            decode_tokens: export.decode_tokens(),
            dir: export.dir,
            pos: 0,
            last_stop: None,
        })
    }

    /// The runtime's session (its buffers and files).
    pub fn session(&self) -> &S {
        &self.session
    }

    /// Slots of a static cache; `None` when the cache grows.
    pub fn cache_slots(&self) -> Option<usize> {
        self.slots
    }

    /// Tokens already in the cache: the position of the next token.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Why the last [`GenerationLoop::generate`] stopped.
    pub fn last_stop(&self) -> Option<StopReason> {
        self.last_stop
    }

    /// Runs the whole prompt from position 0 (the cache is reset) and returns the logits of
    /// its last token.
    pub fn prefill(&mut self, prompt: &[i64]) -> Result<Vec<f32>> {
        if prompt.is_empty() {
            return Err(Error::Generation("the prompt is empty: generation needs at least one token".into()));
        }
        if let Some(slots) = self.slots.filter(|&s| prompt.len() > s) {
            return Err(Error::Generation(format!(
                "prompt of {} tokens does not fit a static cache of {slots} slots ({}); re-export with a larger \
                 --static-cache",
                prompt.len(),
                self.dir.display()
            )));
        }
        self.session.reset()?;
        self.pos = 0;
        let (role, per_call) = match self.has_prefill {
            true => (Role::Prefill, prompt.len()),
            false => (Role::Decode, self.decode_tokens),
        };
        let mut logits = vec![];
        for chunk in prompt.chunks(per_call) {
            logits = self.call(role, chunk)?;
        }
        Ok(logits)
    }

    /// Runs one token at the current position and returns its logits.
    pub fn step(&mut self, token: i64) -> Result<Vec<f32>> {
        self.call(Role::Decode, &[token])
    }

    /// Greedy decoding (see [`greedy`]); the new tokens.
    pub fn generate(&mut self, prompt: &[i64], max_new_tokens: usize, eos: &[i64]) -> Result<Vec<i64>> {
        self.last_stop = None;
        let (tokens, stop) = greedy(self, prompt, max_new_tokens, eos)?;
        self.last_stop = Some(stop);
        Ok(tokens)
    }

    fn call(&mut self, role: Role, tokens: &[i64]) -> Result<Vec<f32>> {
        if let Some(slots) = self.slots.filter(|&s| self.pos + tokens.len() > s) {
            return Err(Error::Generation(format!(
                "the static cache of {slots} slots is full (position {}): no room for another token ({}); \
                 re-export with a larger --static-cache",
                self.pos,
                self.dir.display()
            )));
        }
        let logits = self.session.run(&Call { role, tokens, pos: self.pos, slots: self.slots })?;
        self.pos += tokens.len();
        Ok(logits)
    }
}

impl<S: Session> Steps for GenerationLoop<S> {
    fn prefill(&mut self, prompt: &[i64]) -> Result<Vec<f32>> {
        GenerationLoop::prefill(self, prompt)
    }

    fn step(&mut self, token: i64) -> Result<Vec<f32>> {
        GenerationLoop::step(self, token)
    }

    fn position(&self) -> usize {
        self.pos
    }

    fn capacity(&self) -> Option<usize> {
        self.slots
    }
}

/// Any [`Steps`] with the wall time of its prompt call and of each step recorded
/// (`hfexport generate` prints them; the benches read them).
pub struct Timed<'a, S> {
    inner: &'a mut S,
    pub prefill: Duration,
    pub steps: Vec<Duration>,
}

impl<'a, S: Steps> Timed<'a, S> {
    pub fn new(inner: &'a mut S) -> Self {
        Timed { inner, prefill: Duration::ZERO, steps: vec![] }
    }

    /// Mean milliseconds per step, if any step ran.
    pub fn step_ms(&self) -> Option<f64> {
        let n = self.steps.len();
        (n > 0).then(|| self.steps.iter().map(|d| d.as_secs_f64()).sum::<f64>() * 1e3 / n as f64)
    }
}

impl<S: Steps> Steps for Timed<'_, S> {
    fn prefill(&mut self, prompt: &[i64]) -> Result<Vec<f32>> {
        let t = Instant::now();
        let r = self.inner.prefill(prompt);
        self.prefill = t.elapsed();
        r
    }

    fn step(&mut self, token: i64) -> Result<Vec<f32>> {
        let t = Instant::now();
        let r = self.inner.step(token);
        self.steps.push(t.elapsed());
        r
    }

    fn position(&self) -> usize {
        self.inner.position()
    }

    fn capacity(&self) -> Option<usize> {
        self.inner.capacity()
    }
}

/// What one greedy run gives a caller to print.
#[derive(Debug, Clone)]
pub struct Generated {
    pub tokens: Vec<i64>,
    pub stop: StopReason,
    /// Slots of a static cache; `None` when the cache grows.
    pub slots: Option<usize>,
    /// Time in the prompt call.
    pub prefill: Duration,
    /// Mean time of a one-token step, when there was one.
    pub step_ms: Option<f64>,
}

/// Any runtime's [`GenerationLoop`] behind one interface: the CLI and products drive every
/// format the same way ([`crate::backend::Runtime::open_generator`]).
pub trait Generator {
    /// The runtime and its version, e.g. `onnxruntime 1.32.0`.
    fn runtime(&self) -> String;
    /// How the cache is held, for a log line: `stateful`, `zero-copy`, or empty.
    fn kind(&self) -> &'static str;
    /// Feeds `inputs` unchanged to every later call of the decode graphs (an encoder-decoder's
    /// cross-attention keys and values, from its `encoder` component).
    fn set_fixed_inputs(&mut self, inputs: &BTreeMap<String, Tensor>) -> Result<()>;
    /// [`greedy`] over this runtime, timed.
    fn generate(&mut self, prompt: &[i64], max_new_tokens: usize, eos: &[i64]) -> Result<Generated>;
}

impl<S: Session> Generator for GenerationLoop<S> {
    fn runtime(&self) -> String {
        self.session.runtime()
    }

    fn kind(&self) -> &'static str {
        self.session.kind()
    }

    fn set_fixed_inputs(&mut self, inputs: &BTreeMap<String, Tensor>) -> Result<()> {
        self.session.set_fixed_inputs(inputs)
    }

    fn generate(&mut self, prompt: &[i64], max_new_tokens: usize, eos: &[i64]) -> Result<Generated> {
        let slots = self.slots;
        let mut timed = Timed::new(self);
        let (tokens, stop) = greedy(&mut timed, prompt, max_new_tokens, eos)?;
        let (prefill, step_ms) = (timed.prefill, timed.step_ms());
        self.last_stop = Some(stop);
        Ok(Generated { tokens, stop, slots, prefill, step_ms })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn argmax_takes_the_first_maximum_and_skips_nan() {
        assert_eq!(argmax(&[0.0, 3.0, 3.0, 1.0]), 1);
        assert_eq!(argmax(&[f32::NAN, -1.0, 2.0]), 2);
        assert_eq!(argmax(&[5.0]), 0);
    }

    #[test]
    fn static_mask_is_causal_from_the_position() {
        assert_eq!(static_mask(2, 1, 4), [true, true, false, false, true, true, true, false]);
    }

    #[test]
    fn a_call_feeds_ids_mask_and_positions_of_its_cache() {
        let call = Call { role: Role::Decode, tokens: &[7, 8], pos: 1, slots: Some(4) };
        let f = call.inputs().unwrap();
        assert_eq!(f["input_ids"].as_i64().unwrap(), [7, 8]);
        assert_eq!(f["position_ids"].as_i64().unwrap(), [1, 2]);
        assert_eq!((f["attention_mask"].dtype(), f["attention_mask"].shape()), (DType::Bool, &[1, 1, 2, 4][..]));
        let growing = Call { slots: None, ..call }.inputs().unwrap();
        assert_eq!(growing["attention_mask"].as_i64().unwrap(), [1, 1, 1]);
    }

    /// A fake runtime whose next token is always `position + 1`, with `slots` slots.
    struct Counter {
        pos: usize,
        slots: Option<usize>,
    }

    impl Steps for Counter {
        fn prefill(&mut self, prompt: &[i64]) -> Result<Vec<f32>> {
            self.pos = prompt.len();
            Ok(self.logits())
        }
        fn step(&mut self, _: i64) -> Result<Vec<f32>> {
            self.pos += 1;
            Ok(self.logits())
        }
        fn position(&self) -> usize {
            self.pos
        }
        fn capacity(&self) -> Option<usize> {
            self.slots
        }
    }

    impl Counter {
        fn logits(&self) -> Vec<f32> {
            (0..64).map(|i| if i == self.pos + 1 { 1.0 } else { 0.0 }).collect()
        }
    }

    #[test]
    fn timed_records_the_prompt_call_and_every_step() {
        let mut c = Counter { pos: 0, slots: None };
        let mut t = Timed::new(&mut c);
        let (tokens, _) = greedy(&mut t, &[1, 2], 4, &[]).unwrap();
        assert_eq!(tokens, [3, 4, 5, 6]);
        assert_eq!(t.steps.len(), 3);
        assert!(t.step_ms().is_some());
    }

    #[test]
    fn greedy_stops_at_eos_at_max_tokens_and_at_a_full_cache() {
        let mut c = Counter { pos: 0, slots: None };
        assert_eq!(greedy(&mut c, &[7, 7], 10, &[5]).unwrap(), (vec![3, 4, 5], StopReason::Eos(5)));
        assert_eq!(greedy(&mut c, &[7], 3, &[]).unwrap(), (vec![2, 3, 4], StopReason::MaxNewTokens));
        let mut c = Counter { pos: 0, slots: Some(4) };
        let e = greedy(&mut c, &[7, 7], 10, &[]).unwrap_err().to_string();
        assert!(e.contains("end of the static cache of 4 slots after 3 new tokens") && e.contains("[3, 4, 5]"), "{e}");
        assert!(greedy(&mut c, &[], 1, &[]).unwrap_err().to_string().contains("empty"));
    }
}
