//! The greedy generation loop shared by every runtime's generator.
//!
//! A runtime implements [`Steps`] (run the prompt from position 0, run one more token, where
//! the cache stands and how many slots it has); [`greedy`] does the rest the same way for all
//! of them: argmax as `torch.argmax` (first maximum, NaN lowest), stop at an EOS id (kept) or
//! after `max_new_tokens`, and a clear error carrying the tokens so far when a static cache
//! fills up first. [`static_mask`] is the `attention_mask` of docs/io-contracts.md's static-cache
//! contract.

/// Why [`greedy`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The last token is one of the EOS ids.
    Eos(i64),
    /// `max_new_tokens` were generated.
    MaxNewTokens,
}

/// What a runtime's generator does per call.
pub trait Steps {
    type Error;
    /// Runs `prompt` from position 0 (forgetting the cache); the logits of its last token.
    fn prefill(&mut self, prompt: &[i64]) -> Result<Vec<f32>, Self::Error>;
    /// Runs one token at the current position; its logits.
    fn step(&mut self, token: i64) -> Result<Vec<f32>, Self::Error>;
    /// Tokens in the cache (the position of the next token).
    fn position(&self) -> usize;
    /// Slots of a static cache; `None` when the cache grows.
    fn capacity(&self) -> Option<usize>;
    /// The runtime's error for a message of the loop.
    fn error(msg: String) -> Self::Error;
}

/// Greedy decoding: prefill `prompt`, then one token per step until `max_new_tokens` are
/// generated or a token of `eos` is (it is included).
pub fn greedy<S: Steps>(
    s: &mut S,
    prompt: &[i64],
    max_new_tokens: usize,
    eos: &[i64],
) -> Result<(Vec<i64>, StopReason), S::Error> {
    if prompt.is_empty() {
        return Err(S::error("the prompt is empty: generation needs at least one token".into()));
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
            return Err(S::error(format!(
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

/// The calls a prompt takes: one, or a token per call when the only program that can take it
/// has a query length fixed at 1 (a one-token `decode` without a `prefill`). Never empty.
pub fn prompt_calls(prompt: &[i64], one_token_only: bool) -> std::slice::Chunks<'_, i64> {
    prompt.chunks(if one_token_only { 1 } else { prompt.len().max(1) })
}

/// The static-cache `attention_mask` [1, 1, q, slots] (row-major): slot `j` visible to query
/// `i` iff `j <= pos + i`.
pub fn static_mask(q: usize, pos: usize, slots: usize) -> Vec<bool> {
    (0..q).flat_map(|i| (0..slots).map(move |j| j <= pos + i)).collect()
}

/// Any runtime's [`Steps`] with the wall time of its prompt call and of each step recorded
/// (`hfexport generate` prints them; the benches read them).
pub struct Timed<'a, S> {
    inner: &'a mut S,
    pub prefill: std::time::Duration,
    pub steps: Vec<std::time::Duration>,
}

impl<'a, S: Steps> Timed<'a, S> {
    pub fn new(inner: &'a mut S) -> Self {
        Timed { inner, prefill: Default::default(), steps: vec![] }
    }

    /// Mean milliseconds per step, if any step ran.
    pub fn step_ms(&self) -> Option<f64> {
        let n = self.steps.len();
        (n > 0).then(|| self.steps.iter().map(|d| d.as_secs_f64()).sum::<f64>() * 1e3 / n as f64)
    }
}

impl<S: Steps> Steps for Timed<'_, S> {
    type Error = S::Error;

    fn prefill(&mut self, prompt: &[i64]) -> Result<Vec<f32>, S::Error> {
        let t = std::time::Instant::now();
        let r = self.inner.prefill(prompt);
        self.prefill = t.elapsed();
        r
    }

    fn step(&mut self, token: i64) -> Result<Vec<f32>, S::Error> {
        let t = std::time::Instant::now();
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

    fn error(msg: String) -> S::Error {
        S::error(msg)
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
    pub prefill: std::time::Duration,
    /// Mean time of a one-token step, when there was one.
    pub step_ms: Option<f64>,
}

/// A runtime's generator behind one interface: the CLI and products drive every format the
/// same way ([`crate::backend::Backend::open_generator`]).
pub trait Generator {
    /// The runtime and its version, e.g. `onnxruntime 1.32.0`.
    fn runtime(&self) -> String;
    /// How the cache is held, for a log line: `stateful`, `zero-copy`, or empty.
    fn kind(&self) -> &'static str {
        ""
    }
    /// Feeds `inputs` unchanged to every later call of the decode graphs (an encoder-decoder's
    /// cross-attention keys and values, from its `encoder` component).
    fn set_fixed_inputs(&mut self, inputs: &std::collections::BTreeMap<String, crate::Tensor>) -> crate::Result<()>;
    /// [`greedy`] over this runtime, timed.
    fn generate(&mut self, prompt: &[i64], max_new_tokens: usize, eos: &[i64]) -> crate::Result<Generated>;
}

/// [`greedy`] over `s` with [`Timed`] around it: what every [`Generator::generate`] does.
pub fn timed_greedy<S: Steps>(s: &mut S, prompt: &[i64], max_new_tokens: usize, eos: &[i64]) -> crate::Result<Generated>
where
    S::Error: Into<crate::Error>,
{
    let slots = s.capacity();
    let mut timed = Timed::new(s);
    let (tokens, stop) = greedy(&mut timed, prompt, max_new_tokens, eos).map_err(Into::into)?;
    Ok(Generated { tokens, stop, slots, prefill: timed.prefill, step_ms: timed.step_ms() })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A fake runtime whose next token is always `position + 1`, with `slots` slots.
    struct Counter {
        pos: usize,
        slots: Option<usize>,
    }

    impl Steps for Counter {
        type Error = String;
        fn prefill(&mut self, prompt: &[i64]) -> Result<Vec<f32>, String> {
            self.pos = prompt.len();
            Ok(self.logits())
        }
        fn step(&mut self, _: i64) -> Result<Vec<f32>, String> {
            self.pos += 1;
            Ok(self.logits())
        }
        fn position(&self) -> usize {
            self.pos
        }
        fn capacity(&self) -> Option<usize> {
            self.slots
        }
        fn error(msg: String) -> String {
            msg
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
        let e = greedy(&mut c, &[7, 7], 10, &[]).unwrap_err();
        assert!(e.contains("end of the static cache of 4 slots after 3 new tokens") && e.contains("[3, 4, 5]"), "{e}");
        assert!(greedy(&mut c, &[], 1, &[]).unwrap_err().contains("empty"));
    }
}
