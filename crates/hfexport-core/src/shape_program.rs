//! Symbolic dims computed at run time, for backends whose reshapes and slices take shapes as
//! tensors (ONNX, OpenVINO).
//!
//! A backend implements [`ShapeEmitter`] (read one axis of a graph input, an int64 constant,
//! multiply, add, concatenate) and [`DimLowering`] turns any [`Dim`] polynomial into those
//! ops (and a floor division, for the floors of strided convolutions' lengths): each symbol is read once from the first graph input axis that carries it, each distinct
//! dim is computed once and reused, and a fully constant shape is a single constant. Keeping
//! this in one place means both backends agree on how `batch * sequence` or `past_len + 1`
//! become graph arithmetic.

use crate::{Dim, Factor, Graph, Symbol};
use std::collections::HashMap;

/// The few ops a backend provides for computing dims; every value is a 1-element (or, for
/// `concat`, 1-D) int64 tensor.
pub trait ShapeEmitter {
    type Value: Clone;
    type Error;
    /// Axis `axis` of graph input `input` (the input's port name) as a 1-element tensor.
    fn input_axis(&mut self, input: &str, axis: usize) -> Result<Self::Value, Self::Error>;
    /// A 1-D int64 constant.
    fn const_i64(&mut self, values: &[i64]) -> Result<Self::Value, Self::Error>;
    fn mul(&mut self, a: Self::Value, b: Self::Value) -> Result<Self::Value, Self::Error>;
    fn add(&mut self, a: Self::Value, b: Self::Value) -> Result<Self::Value, Self::Error>;
    /// `⌊a / b⌋` for a positive constant `b` (a strided convolution's output length).
    fn floor_div(&mut self, a: Self::Value, b: Self::Value) -> Result<Self::Value, Self::Error>;
    /// Joins 1-D tensors into one shape tensor.
    fn concat(&mut self, parts: Vec<Self::Value>) -> Result<Self::Value, Self::Error>;
}

/// Where each symbol is read from, and the dims already computed.
#[derive(Debug)]
pub struct DimLowering<V> {
    sources: HashMap<Symbol, (String, usize)>,
    cache: HashMap<Dim, V>,
}

impl<V: Clone> DimLowering<V> {
    /// Records, for every symbol, the first graph input axis that is exactly that symbol.
    pub fn new(g: &Graph) -> DimLowering<V> {
        let mut sources = HashMap::new();
        for p in g.inputs() {
            for (axis, d) in g.info(p.value).shape.iter().enumerate() {
                if let Some(s) = d.as_symbol() {
                    sources.entry(s.clone()).or_insert((p.name.clone(), axis));
                }
            }
        }
        DimLowering { sources, cache: HashMap::new() }
    }

    /// Where `s` is read from: (graph input name, axis).
    pub fn source(&self, s: &Symbol) -> Option<&(String, usize)> {
        self.sources.get(s)
    }

    /// A 1-element int64 tensor holding the run-time value of `d`. A symbol that is no input's
    /// dim is an error message naming it.
    pub fn dim<E: ShapeEmitter<Value = V>>(&mut self, e: &mut E, d: &Dim) -> Result<V, DimError<E::Error>> {
        if let Some(v) = self.cache.get(d) {
            return Ok(v.clone());
        }
        let v = if let Some(c) = d.as_const() {
            e.const_i64(&[c]).map_err(DimError::Emit)?
        } else if let Some(s) = d.as_symbol() {
            let (input, axis) =
                self.sources.get(s).cloned().ok_or_else(|| {
                    DimError::Unbound(format!("symbol `{}` is not the dim of any graph input", s.name()))
                })?;
            e.input_axis(&input, axis).map_err(DimError::Emit)?
        } else {
            self.polynomial(e, d)?
        };
        self.cache.insert(d.clone(), v.clone());
        Ok(v)
    }

    /// `c0 + Σ cᵢ·∏ symbols`, term by term.
    fn polynomial<E: ShapeEmitter<Value = V>>(&mut self, e: &mut E, d: &Dim) -> Result<V, DimError<E::Error>> {
        let mut acc: Option<V> = None;
        for (monomial, coeff) in d.terms() {
            let mut term: Option<V> = None;
            for f in monomial {
                let v = match f {
                    Factor::Sym(s) => self.dim(e, &Dim::sym(s))?,
                    Factor::FloorDiv(d, by) => {
                        let v = self.dim(e, d)?;
                        let by = e.const_i64(&[*by]).map_err(DimError::Emit)?;
                        e.floor_div(v, by).map_err(DimError::Emit)?
                    }
                };
                term = Some(match term {
                    None => v,
                    Some(t) => e.mul(t, v).map_err(DimError::Emit)?,
                });
            }
            let term = match term {
                None => e.const_i64(&[coeff]).map_err(DimError::Emit)?,
                Some(t) if coeff == 1 => t,
                Some(t) => {
                    let c = e.const_i64(&[coeff]).map_err(DimError::Emit)?;
                    e.mul(t, c).map_err(DimError::Emit)?
                }
            };
            acc = Some(match acc {
                None => term,
                Some(a) => e.add(a, term).map_err(DimError::Emit)?,
            });
        }
        match acc {
            Some(a) => Ok(a),
            None => e.const_i64(&[0]).map_err(DimError::Emit),
        }
    }

    /// A 1-D int64 tensor holding a whole shape (one constant when every dim is constant).
    pub fn shape<E: ShapeEmitter<Value = V>>(&mut self, e: &mut E, dims: &[Dim]) -> Result<V, DimError<E::Error>> {
        if let Some(consts) = dims.iter().map(Dim::as_const).collect::<Option<Vec<i64>>>() {
            return e.const_i64(&consts).map_err(DimError::Emit);
        }
        let parts = dims.iter().map(|d| self.dim(e, d)).collect::<Result<Vec<_>, _>>()?;
        e.concat(parts).map_err(DimError::Emit)
    }
}

/// Why a dim could not be lowered.
#[derive(Debug)]
pub enum DimError<E> {
    /// A symbol no graph input carries.
    Unbound(String),
    /// The backend's emitter failed.
    Emit(E),
}
