//! Symbolic dimensions: an algebra over named symbols with integer ranges.
//!
//! A [`Dim`] is a polynomial with integer coefficients over symbols (`batch`, `seq`,
//! `cache_len`, …), kept in a canonical form (monomials sorted, zero terms dropped), so two dims
//! are equal exactly when they are the same polynomial: `seq + past` built in two orders
//! compares equal, and `2*heads*dim` equals `heads*dim*2`. A factor of a monomial may also be
//! the floor of a dim divided by a constant ([`Factor::FloorDiv`]): the length a strided
//! convolution leaves of a symbolic input (`(samples - 400) // 320 + 1`, wav2vec2's frames).
//! Floors are normalised as they are built (whole multiples taken out, nested floors merged), so
//! the same length computed twice compares equal. Symbols get their integer ranges from
//! a [`SymbolScope`]; the bounds of a derived dim follow by interval arithmetic, so a range stated
//! once on an input is kept by every shape computed from it.

use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A named symbol, interned by name inside a graph's [`SymbolScope`].
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Symbol(Arc<str>);

impl Symbol {
    pub fn new(name: &str) -> Symbol {
        Symbol(Arc::from(name))
    }
    pub fn name(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A factor of a monomial: a symbol, or `⌊dim / divisor⌋` for a divisor above 1 whose dim is
/// not a whole multiple of it (see [`Dim::floor_div`]).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Factor {
    Sym(Symbol),
    FloorDiv(Box<Dim>, i64),
}

impl Factor {
    /// The factor as a dim of its own.
    pub fn dim(&self) -> Dim {
        Dim { terms: BTreeMap::from([(vec![self.clone()], 1)]) }
    }

    fn eval(&self, bindings: &Bindings) -> Result<i64> {
        match self {
            Factor::Sym(s) => bindings.get(s).ok_or_else(|| Error::Dim(format!("symbol `{}` is not bound", s.name()))),
            Factor::FloorDiv(d, by) => Ok(d.eval(bindings)?.div_euclid(*by)),
        }
    }

    fn bounds(&self, scope: &SymbolScope) -> (i64, i64) {
        match self {
            Factor::Sym(s) => {
                let r = scope.range(s);
                (r.min, r.max)
            }
            Factor::FloorDiv(d, by) => {
                let (lo, hi) = d.bounds(scope);
                (lo.div_euclid(*by), hi.div_euclid(*by))
            }
        }
    }
}

impl fmt::Debug for Factor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Factor::Sym(s) => f.write_str(s.name()),
            Factor::FloorDiv(d, by) => write!(f, "({d})//{by}"),
        }
    }
}

/// A dimension: an integer polynomial over symbols (and floors of dims) in canonical form.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dim {
    /// monomial (sorted factors, repeated for powers; empty = constant) -> non-zero coefficient
    terms: BTreeMap<Vec<Factor>, i64>,
}

impl Dim {
    pub fn konst(v: i64) -> Dim {
        let mut terms = BTreeMap::new();
        if v != 0 {
            terms.insert(vec![], v);
        }
        Dim { terms }
    }

    pub fn sym(s: &Symbol) -> Dim {
        Factor::Sym(s.clone()).dim()
    }

    /// The constant value, if the dim has no symbol.
    pub fn as_const(&self) -> Option<i64> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// The symbol, if the dim is exactly one symbol.
    pub fn as_symbol(&self) -> Option<&Symbol> {
        match self.terms.iter().next() {
            Some((m, 1)) if self.terms.len() == 1 => match m.as_slice() {
                [Factor::Sym(s)] => Some(s),
                _ => None,
            },
            _ => None,
        }
    }

    /// The terms of the polynomial: (monomial as sorted factors, coefficient), constant first.
    pub fn terms(&self) -> impl Iterator<Item = (&[Factor], i64)> {
        self.terms.iter().map(|(m, c)| (m.as_slice(), *c))
    }

    /// Every symbol the dim reads, inside floors too.
    pub fn symbols(&self) -> Vec<Symbol> {
        let mut out: Vec<Symbol> = vec![];
        for f in self.terms.keys().flatten() {
            match f {
                Factor::Sym(s) => out.push(s.clone()),
                Factor::FloorDiv(d, _) => out.extend(d.symbols()),
            }
        }
        out.sort();
        out.dedup();
        out
    }

    fn normalized(mut self) -> Dim {
        self.terms.retain(|_, c| *c != 0);
        self
    }

    pub fn add(&self, other: &Dim) -> Dim {
        let mut terms = self.terms.clone();
        for (m, c) in &other.terms {
            *terms.entry(m.clone()).or_insert(0) += c;
        }
        Dim { terms }.normalized()
    }

    pub fn neg(&self) -> Dim {
        Dim { terms: self.terms.iter().map(|(m, c)| (m.clone(), -c)).collect() }
    }

    pub fn sub(&self, other: &Dim) -> Dim {
        self.add(&other.neg())
    }

    pub fn mul(&self, other: &Dim) -> Dim {
        let mut terms: BTreeMap<Vec<Factor>, i64> = BTreeMap::new();
        for (ma, ca) in &self.terms {
            for (mb, cb) in &other.terms {
                let mut m: Vec<Factor> = ma.iter().chain(mb).cloned().collect();
                m.sort();
                *terms.entry(m).or_insert(0) += ca * cb;
            }
        }
        Dim { terms }.normalized()
    }

    /// The dim with every occurrence of symbol `s` replaced by `with`.
    pub fn substitute(&self, s: &Symbol, with: &Dim) -> Dim {
        let mut out = Dim::konst(0);
        for (m, c) in &self.terms {
            let mut term = Dim::konst(*c);
            for x in m {
                term = term.mul(&match x {
                    Factor::Sym(y) if y == s => with.clone(),
                    Factor::Sym(_) => x.dim(),
                    Factor::FloorDiv(d, by) => d.substitute(s, with).floor_div(*by),
                });
            }
            out = out.add(&term);
        }
        out
    }

    /// `⌊self / by⌋` for a positive `by`, normalised: each coefficient's whole multiples of
    /// `by` are taken out of the floor (`⌊(2n + 3) / 2⌋ = n + 1 + ⌊1 / 2⌋ = n + 1`), a floor of
    /// a floor plus a constant is one floor (`⌊(⌊n / 5⌋ + 1) / 2⌋ = ⌊(n + 5) / 10⌋`, as
    /// `⌊(⌊x / a⌋ + c) / b⌋ = ⌊(x + ca) / ab⌋` for integers), and what stays symbolic becomes a
    /// [`Factor::FloorDiv`]: a chain of strided convolutions' length is one floor.
    pub fn floor_div(&self, by: i64) -> Dim {
        assert!(by > 0, "floor division by {by}");
        if by == 1 {
            return self.clone();
        }
        let (mut whole, mut rest) = (BTreeMap::new(), BTreeMap::new());
        for (m, c) in &self.terms {
            whole.insert(m.clone(), c.div_euclid(by));
            rest.insert(m.clone(), c.rem_euclid(by));
        }
        let (whole, rest) = (Dim { terms: whole }.normalized(), Dim { terms: rest }.normalized());
        if let Some(c) = rest.as_const() {
            return whole.add(&Dim::konst(c.div_euclid(by)));
        }
        let c = rest.terms.get(&Vec::new()).copied().unwrap_or(0);
        let symbolic: Vec<_> = rest.terms.iter().filter(|(m, _)| !m.is_empty()).collect();
        let floor = match symbolic[..] {
            [(m, 1)] if matches!(m[..], [Factor::FloorDiv(..)]) => {
                let [Factor::FloorDiv(inner, d)] = &m[..] else { unreachable!("matched above") };
                inner.add(&Dim::konst(c * d)).floor_div(d * by)
            }
            _ => Factor::FloorDiv(Box::new(rest), by).dim(),
        };
        whole.add(&floor)
    }

    /// Exact division by a positive constant; an error when some coefficient is not divisible.
    pub fn div_exact(&self, d: i64) -> Result<Dim> {
        if d <= 0 || self.terms.values().any(|c| c % d != 0) {
            return Err(Error::Dim(format!("`{self}` is not divisible by {d}")));
        }
        Ok(Dim { terms: self.terms.iter().map(|(m, c)| (m.clone(), c / d)).collect() })
    }

    /// Value of the dim with every symbol bound.
    pub fn eval(&self, bindings: &Bindings) -> Result<i64> {
        let mut total: i64 = 0;
        for (m, c) in &self.terms {
            let mut v = *c;
            for f in m {
                let x = f.eval(bindings)?;
                v = v.checked_mul(x).ok_or_else(|| Error::Dim(format!("`{self}` overflows")))?;
            }
            total = total.checked_add(v).ok_or_else(|| Error::Dim(format!("`{self}` overflows")))?;
        }
        Ok(total)
    }

    /// Inclusive integer bounds of the dim given the ranges of its symbols.
    pub fn bounds(&self, scope: &SymbolScope) -> (i64, i64) {
        let (mut lo, mut hi) = (0i64, 0i64);
        for (m, c) in &self.terms {
            let (mut a, mut b) = (*c, *c);
            for f in m {
                let (min, max) = f.bounds(scope);
                let cands =
                    [a.saturating_mul(min), a.saturating_mul(max), b.saturating_mul(min), b.saturating_mul(max)];
                a = *cands.iter().min().expect("four candidates");
                b = *cands.iter().max().expect("four candidates");
            }
            lo = lo.saturating_add(a);
            hi = hi.saturating_add(b);
        }
        (lo, hi)
    }
}

impl From<i64> for Dim {
    fn from(v: i64) -> Dim {
        Dim::konst(v)
    }
}

impl From<usize> for Dim {
    fn from(v: usize) -> Dim {
        Dim::konst(v as i64)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0");
        }
        // symbolic terms first (in canonical order), the constant last: `past + seq + 1`
        let mut parts: Vec<(bool, String)> = Vec::new();
        for (m, c) in self.terms.iter().filter(|(m, _)| !m.is_empty()) {
            let names: Vec<String> = m.iter().map(|f| format!("{f:?}")).collect();
            let body = names.join("*");
            let s = match c.abs() {
                1 => body,
                a => format!("{a}*{body}"),
            };
            parts.push((*c < 0, s));
        }
        if let Some(c) = self.terms.get(&Vec::new()) {
            parts.push((*c < 0, c.abs().to_string()));
        }
        for (i, (neg, s)) in parts.iter().enumerate() {
            match (i, neg) {
                (0, true) => write!(f, "-{s}")?,
                (0, false) => write!(f, "{s}")?,
                (_, true) => write!(f, " - {s}")?,
                (_, false) => write!(f, " + {s}")?,
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Inclusive integer range of a symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SymRange {
    pub min: i64,
    pub max: i64,
}

impl SymRange {
    pub const UNBOUNDED: SymRange = SymRange { min: 0, max: i64::MAX };
}

/// The symbols of a graph with their ranges.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SymbolScope {
    ranges: BTreeMap<Symbol, SymRange>,
}

impl SymbolScope {
    /// Declares (or narrows) a symbol; its range is the intersection with any earlier one.
    pub fn declare(&mut self, name: &str, min: i64, max: i64) -> Result<Symbol> {
        let s = Symbol::new(name);
        let r = self.ranges.get(&s).copied().unwrap_or(SymRange::UNBOUNDED);
        let (min, max) = (r.min.max(min), r.max.min(max));
        if min > max {
            return Err(Error::Dim(format!("symbol `{name}` would have an empty range {min}..={max}")));
        }
        self.ranges.insert(s.clone(), SymRange { min, max });
        Ok(s)
    }

    /// Sets a symbol's range, replacing any earlier one (the caller has validated it).
    pub fn set_range(&mut self, s: &Symbol, min: i64, max: i64) {
        self.ranges.insert(s.clone(), SymRange { min, max });
    }

    pub fn remove(&mut self, s: &Symbol) {
        self.ranges.remove(s);
    }

    pub fn range(&self, s: &Symbol) -> SymRange {
        self.ranges.get(s).copied().unwrap_or(SymRange::UNBOUNDED)
    }

    pub fn get(&self, name: &str) -> Option<Symbol> {
        self.ranges.keys().find(|s| s.name() == name).cloned()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Symbol, &SymRange)> {
        self.ranges.iter()
    }
}

/// Concrete values of symbols, found by matching a graph's input shapes with real tensors.
#[derive(Debug, Clone, Default)]
pub struct Bindings {
    values: BTreeMap<Symbol, i64>,
}

impl Bindings {
    pub fn get(&self, s: &Symbol) -> Option<i64> {
        self.values.get(s).copied()
    }

    /// Binds `dim` to `value`: a bare symbol is bound (or checked against an earlier binding),
    /// anything else is evaluated and compared. Errors say which dim disagreed.
    pub fn unify(&mut self, dim: &Dim, value: i64) -> Result<()> {
        if let Some(s) = dim.as_symbol() {
            match self.values.get(s) {
                Some(&v) if v != value => {
                    return Err(Error::Dim(format!("`{}` is {v} elsewhere but {value} here", s.name())))
                }
                _ => {
                    self.values.insert(s.clone(), value);
                    return Ok(());
                }
            }
        }
        let v = dim.eval(self)?;
        if v != value {
            return Err(Error::Dim(format!("expected `{dim}` = {v}, got {value}")));
        }
        Ok(())
    }

    /// Checks every bound symbol against its range in `scope`.
    pub fn check_ranges(&self, scope: &SymbolScope) -> Result<()> {
        for (s, v) in &self.values {
            let r = scope.range(s);
            if *v < r.min || *v > r.max {
                return Err(Error::Dim(format!("`{}` = {v} is outside its range {}..={}", s.name(), r.min, r.max)));
            }
        }
        Ok(())
    }
}

/// Broadcasts two dims (numpy rules): equal dims, or one of them the constant 1.
pub fn broadcast_dim(a: &Dim, b: &Dim) -> Option<Dim> {
    if a == b {
        Some(a.clone())
    } else if a.as_const() == Some(1) {
        Some(b.clone())
    } else if b.as_const() == Some(1) {
        Some(a.clone())
    } else {
        None
    }
}

/// Broadcasts two shapes, aligning trailing axes.
pub fn broadcast_shapes(a: &[Dim], b: &[Dim]) -> Option<Vec<Dim>> {
    let n = a.len().max(b.len());
    let one = Dim::konst(1);
    (0..n)
        .map(|i| {
            let da = if i + a.len() >= n { &a[i + a.len() - n] } else { &one };
            let db = if i + b.len() >= n { &b[i + b.len() - n] } else { &one };
            broadcast_dim(da, db)
        })
        .collect()
}

/// Product of dims (the element count of a shape).
pub fn product(dims: &[Dim]) -> Dim {
    dims.iter().fold(Dim::konst(1), |acc, d| acc.mul(d))
}

/// `[batch, seq, 64]` style rendering of a shape.
pub fn shape_to_string(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> (SymbolScope, Dim, Dim) {
        let mut sc = SymbolScope::default();
        let b = sc.declare("batch", 1, 8).unwrap();
        let s = sc.declare("seq", 1, 128).unwrap();
        (sc, Dim::sym(&b), Dim::sym(&s))
    }

    #[test]
    fn addition_is_canonical() {
        let (_, b, s) = scope();
        assert_eq!(b.add(&s), s.add(&b));
        assert_eq!(s.add(&Dim::konst(3)).sub(&Dim::konst(3)), s);
        assert_eq!(s.sub(&s).as_const(), Some(0));
        assert_eq!(b.add(&s).add(&Dim::konst(1)).to_string(), "batch + seq + 1");
    }

    #[test]
    fn multiplication_distributes() {
        let (_, b, s) = scope();
        let lhs = b.add(&Dim::konst(2)).mul(&s);
        let rhs = b.mul(&s).add(&s.mul(&Dim::konst(2)));
        assert_eq!(lhs, rhs);
        assert_eq!(lhs.to_string(), "batch*seq + 2*seq");
        assert_eq!(s.mul(&Dim::konst(4)).div_exact(2).unwrap(), s.mul(&Dim::konst(2)));
        assert!(s.add(&Dim::konst(1)).div_exact(2).is_err());
    }

    #[test]
    fn substitution_replaces_every_occurrence() {
        let (_, b, s) = scope();
        let d = b.mul(&s).add(&s.mul(&Dim::konst(2))).add(&Dim::konst(1));
        let sym = s.as_symbol().unwrap().clone();
        assert_eq!(d.substitute(&sym, &Dim::konst(3)), b.mul(&Dim::konst(3)).add(&Dim::konst(7)));
        let t = Dim::sym(&Symbol::new("tokens"));
        assert_eq!(d.substitute(&sym, &t).to_string(), "batch*tokens + 2*tokens + 1");
    }

    #[test]
    fn floors_are_normalised_and_evaluate_like_integer_division() {
        let (sc, b, s) = scope();
        assert_eq!(s.mul(&Dim::konst(2)).add(&Dim::konst(3)).floor_div(2), s.add(&Dim::konst(1)));
        assert_eq!(Dim::konst(-7).floor_div(2).as_const(), Some(-4));
        // a strided conv of kernel 10, stride 5, then of kernel 3, stride 2: one floor
        let conv1 = s.sub(&Dim::konst(10)).floor_div(5).add(&Dim::konst(1));
        let conv2 = conv1.sub(&Dim::konst(3)).floor_div(2).add(&Dim::konst(1));
        assert_eq!(conv2, s.floor_div(10).sub(&Dim::konst(1)));
        // a floor plus a constant inside a floor is one floor
        let conv3 = conv2.sub(&Dim::konst(2)).floor_div(2).add(&Dim::konst(1));
        assert_eq!(conv3.to_string(), "(seq + 10)//20 - 1");
        assert_eq!(conv2.to_string(), "(seq)//10 - 1");
        assert_eq!(conv2.symbols(), vec![s.as_symbol().unwrap().clone()]);
        assert_eq!(conv2.as_symbol(), None);
        let mut bind = Bindings::default();
        bind.unify(&s, 57).unwrap();
        for (d, want) in [(&conv1, (57 - 10) / 5 + 1), (&conv2, ((57 - 10) / 5 + 1 - 3) / 2 + 1)] {
            assert_eq!(d.eval(&bind).unwrap(), want);
        }
        assert_eq!(conv2.bounds(&sc), (-1, 11));
        let sym = s.as_symbol().unwrap().clone();
        assert_eq!(conv2.substitute(&sym, &Dim::konst(57)).as_const(), Some(4));
        assert_eq!(
            b.mul(&conv1)
                .floor_div(3)
                .eval(&{
                    let mut bb = bind.clone();
                    bb.unify(&b, 2).unwrap();
                    bb
                })
                .unwrap(),
            2 * 10 / 3
        );
    }

    #[test]
    fn ranges_are_kept_through_arithmetic() {
        let (sc, b, s) = scope();
        assert_eq!(b.mul(&s).bounds(&sc), (1, 1024));
        assert_eq!(s.add(&Dim::konst(5)).bounds(&sc), (6, 133));
        assert_eq!(s.sub(&b).bounds(&sc), (-7, 127));
    }

    #[test]
    fn declaring_twice_intersects_ranges() {
        let mut sc = SymbolScope::default();
        sc.declare("seq", 1, 100).unwrap();
        let s = sc.declare("seq", 10, 4096).unwrap();
        assert_eq!(sc.range(&s), SymRange { min: 10, max: 100 });
        assert!(sc.declare("seq", 200, 300).is_err());
    }

    #[test]
    fn broadcasting_symbolic_shapes() {
        let (_, b, s) = scope();
        let one = Dim::konst(1);
        let out = broadcast_shapes(&[b.clone(), one.clone(), s.clone()], &[s.clone(), one.clone()]).unwrap();
        assert_eq!(out, vec![b.clone(), s.clone(), s.clone()]);
        assert!(broadcast_shapes(std::slice::from_ref(&b), std::slice::from_ref(&s)).is_none());
        assert!(broadcast_shapes(&[Dim::konst(2)], &[Dim::konst(3)]).is_none());
    }

    #[test]
    fn bindings_unify_and_check_ranges() {
        let (sc, b, s) = scope();
        let mut bind = Bindings::default();
        bind.unify(&b, 2).unwrap();
        bind.unify(&s, 5).unwrap();
        bind.unify(&b.mul(&s), 10).unwrap();
        assert!(bind.unify(&b.mul(&s), 11).is_err());
        assert!(bind.unify(&b, 3).is_err());
        bind.check_ranges(&sc).unwrap();
        let mut big = Bindings::default();
        big.unify(&b, 9).unwrap();
        assert!(big.check_ranges(&sc).is_err());
    }
}
