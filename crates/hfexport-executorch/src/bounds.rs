//! Default upper bounds of a `.pte` export: ExecuTorch reserves every planned tensor at its
//! bound when a method loads, so the model's natural ranges (`batch` <= 4096, `sequence` <=
//! `max_position_embeddings`) would ask a phone for tens of GiB. For every symbol the user left
//! open ([`hfexport_core::dynamic::open_symbols`]: no `max` in `dynamic_shapes`, no
//! `--static-cache`):
//!
//! - the batch (the leading axis of the first input, `input_ids`, when the component's entry
//!   leads with a batch: [`hfexport_core::plan::Entry::leads_with_batch`]) is at most
//!   [`DEFAULT_MAX_BATCH`]: ExecuTorch's LLM runners run one sequence at a time;
//! - every other open symbol (`sequence`, a growing cache's `past_len`, a vision tower's
//!   `image_tokens`, which leads Qwen2-VL's patch rows) is at most one common
//!   cap: the model's bound when the plan fits, else the largest cap for which the memory plans
//!   of all methods together fit [`PLAN_BUDGET`] (rounded down to a multiple of [`ROUND`] once
//!   it is at least that), found by bisection over the plan itself: the methods are lowered
//!   once and replanned at each candidate ([`crate::plan::rebound`]).
//!
//! For a Qwen3-0.6B-shaped model in float32 that is `sequence` <= 1728 (1008 MiB, nearly all
//! of it the `[1, 1728, 151936]` logits, which reuse the bytes of the attention scores that
//! died before them); with a small vocabulary the two live `[heads, seq, seq]` tensors of the
//! decomposed attention (scores and softmax) set the bound.
//!
//! Bounds the user gives win (and may exceed the budget, up to [`crate::export::MAX_ARENA`]
//! per method).

use crate::export::unplanned_method;
use crate::plan::{plan, rebound};
use crate::program::Method;
use crate::{EtError, Result};
use hfexport_core::backend::DefaultBounds;
use hfexport_core::config::ExecutorchConfig;
use hfexport_core::plan::Planned;
use hfexport_core::SymbolScope;
use std::collections::{BTreeMap, BTreeSet};

/// What the default bounds aim for: the memory plans of all methods together (what a caller
/// loading every method reserves), 1 GiB.
pub const PLAN_BUDGET: u64 = 1 << 30;

/// The default batch bound.
pub const DEFAULT_MAX_BATCH: i64 = 1;

/// A default cap of at least this is rounded down to a multiple of it.
pub const ROUND: i64 = 64;

pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// One method and what may change in it.
struct Candidate {
    method: Method,
    scope: SymbolScope,
    /// Open symbols: (name, is the batch, the model's maximum).
    open: Vec<(String, bool, i64)>,
}

impl Candidate {
    /// The maxima of the open symbols at `cap` (only those below the model's).
    fn maxima(&self, cap: i64) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for (name, batch, model_max) in &self.open {
            let min = self.scope.get(name).map(|s| self.scope.range(&s).min).unwrap_or(1);
            let max = (if *batch { DEFAULT_MAX_BATCH } else { cap }).max(min).min(*model_max);
            if max < *model_max {
                out.insert(name.clone(), max);
            }
        }
        out
    }

    /// The arena of the method planned at `cap`.
    fn arena(&mut self, cap: i64) -> u64 {
        let mut scope = self.scope.clone();
        for (name, max) in self.maxima(cap) {
            let s = scope.get(&name).expect("an open symbol of the graph");
            let min = scope.range(&s).min;
            scope.set_range(&s, min, max);
        }
        rebound(&mut self.method, &scope);
        plan(&mut self.method);
        self.method.arena
    }
}

/// The default bounds of `prepared` (the components through the core passes; `open[i]`:
/// component `i`'s open symbols), with a note of what was chosen and the plan's size.
pub fn default_bounds(
    prepared: &[Planned],
    open: &[BTreeSet<String>],
    cfg: &ExecutorchConfig,
) -> Result<DefaultBounds> {
    if open.iter().all(BTreeSet::is_empty) {
        return Ok(DefaultBounds::default());
    }
    let mut candidates = vec![];
    for (c, open) in prepared.iter().zip(open) {
        let g = &c.graph;
        let batch = g
            .inputs()
            .first()
            .filter(|_| c.spec.entry.leads_with_batch())
            .and_then(|p| g.info(p.value).shape.first())
            .and_then(|d| d.as_symbol());
        let open = g
            .symbols
            .iter()
            .filter(|(s, _)| open.contains(s.name()))
            .map(|(s, r)| (s.name().to_string(), Some(s) == batch, r.max))
            .collect();
        candidates.push(Candidate { method: unplanned_method(g, cfg)?, scope: g.symbols.clone(), open });
    }
    let total = |cands: &mut Vec<Candidate>, cap: i64| cands.iter_mut().map(|c| c.arena(cap)).sum::<u64>();
    // the cap shared by the open symbols other than the batch (none: only the batch is open)
    let top = candidates.iter().flat_map(|c| c.open.iter()).filter(|o| !o.1).map(|o| o.2).max();
    let cap = match top {
        None => 1,
        Some(top) if total(&mut candidates, top) <= PLAN_BUDGET => top,
        Some(top) => {
            let floor = total(&mut candidates, 1);
            if floor > PLAN_BUDGET {
                let at: Vec<String> =
                    candidates.iter().flat_map(|c| c.maxima(1)).map(|(s, m)| format!("{s} <= {m}")).collect();
                return Err(EtError::Plan(format!(
                    "even at {} the memory plan needs {}, more than the {} GiB budget of ExecuTorch's default \
                     bounds: give every bound in dynamic_shapes (up to {} GiB per method is accepted)",
                    at.join(", "),
                    mib(floor),
                    PLAN_BUDGET >> 30,
                    crate::export::MAX_ARENA >> 30
                )));
            }
            // fits at `lo`, not at `hi`
            let (mut lo, mut hi) = (1, top);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                match total(&mut candidates, mid) <= PLAN_BUDGET {
                    true => lo = mid,
                    false => hi = mid,
                }
            }
            let round = lo / ROUND * ROUND;
            match round >= ROUND && total(&mut candidates, round) <= PLAN_BUDGET {
                true => round,
                false => lo,
            }
        }
    };
    let maxima: Vec<BTreeMap<String, i64>> = candidates.iter().map(|c| c.maxima(cap)).collect();
    let arena = total(&mut candidates, cap);
    // each narrowed symbol once, with the model's bound
    let mut chosen: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for (c, m) in candidates.iter().zip(&maxima) {
        for (name, max) in m {
            let model = c.open.iter().find(|o| &o.0 == name).map(|o| o.2).unwrap_or(*max);
            let e = chosen.entry(name).or_insert((*max, model));
            *e = (e.0.max(*max), e.1.max(model));
        }
    }
    let note = (!chosen.is_empty()).then(|| {
        let list: Vec<String> =
            chosen.iter().map(|(s, (max, model))| format!("{s} <= {max} (model: {model})")).collect();
        let fits = match arena <= PLAN_BUDGET {
            true => "fits",
            false => "is over (at the bounds given)",
        };
        format!(
            "default bounds for ExecuTorch: {}; the memory plan ({}) {fits} the {} GiB budget of the defaults \
             (set a max in dynamic_shapes for other bounds)",
            list.join(", "),
            mib(arena),
            PLAN_BUDGET >> 30
        )
    });
    Ok(DefaultBounds { maxima, note })
}
