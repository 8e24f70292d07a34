//! Lazy weights: a graph names checkpoint tensors and the transforms to apply to them; bytes
//! are produced one tensor at a time, when a writer or the evaluator asks for them.
//!
//! This is what lets an exporter stream a model far larger than memory: the graph holds only
//! names, shapes and a short transform chain per weight, and a [`TensorSource`] (the mmapped
//! checkpoint of `hfexport-models`) materialises one tensor on demand.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Shape and dtype of a stored tensor, known without reading its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// Where lazy weights come from (a checkpoint, or an in-memory map in tests and benches).
pub trait TensorSource: Send + Sync {
    /// Dtype and shape of `name`, without reading its data.
    fn info(&self, name: &str) -> Result<TensorInfo>;
    /// Materialises `name` (decoded from its stored dtype, nothing else applied).
    fn load(&self, name: &str) -> Result<Tensor>;
}

/// How to produce a weight's value from stored tensors.
#[derive(Debug, Clone, PartialEq)]
pub enum WeightExpr {
    /// A stored tensor, by its checkpoint name.
    Stored(String),
    /// Converted to another dtype (e.g. bf16 checkpoint weights exported as f32).
    Cast(Box<WeightExpr>, DType),
    /// A 2-D transpose (e.g. `[out, in]` linear weights for a backend that wants `[in, out]`).
    Transpose(Box<WeightExpr>),
}

impl WeightExpr {
    pub fn stored(name: &str) -> WeightExpr {
        WeightExpr::Stored(name.to_string())
    }

    /// The stored tensors this expression reads.
    pub fn sources(&self) -> Vec<&str> {
        match self {
            WeightExpr::Stored(n) => vec![n.as_str()],
            WeightExpr::Cast(e, _) | WeightExpr::Transpose(e) => e.sources(),
        }
    }

    /// Dtype and shape of the result, from the stored tensors' metadata only.
    pub fn info(&self, src: &dyn TensorSource) -> Result<TensorInfo> {
        match self {
            WeightExpr::Stored(n) => src.info(n),
            WeightExpr::Cast(e, d) => Ok(TensorInfo { dtype: *d, ..e.info(src)? }),
            WeightExpr::Transpose(e) => {
                let i = e.info(src)?;
                match i.shape.as_slice() {
                    [a, b] => Ok(TensorInfo { dtype: i.dtype, shape: vec![*b, *a] }),
                    s => Err(Error::Weight {
                        tensor: e.sources().join(","),
                        msg: format!("transpose needs a 2-D tensor, got shape {s:?}"),
                    }),
                }
            }
        }
    }

    /// Materialises the weight.
    pub fn materialize(&self, src: &dyn TensorSource) -> Result<Tensor> {
        match self {
            WeightExpr::Stored(n) => src.load(n),
            WeightExpr::Cast(e, d) => Ok(e.materialize(src)?.cast(*d)),
            WeightExpr::Transpose(e) => {
                let t = e.materialize(src)?;
                let [r, c] = t.shape() else {
                    return Err(Error::Weight {
                        tensor: e.sources().join(","),
                        msg: format!("transpose needs a 2-D tensor, got shape {:?}", t.shape()),
                    });
                };
                let (r, c) = (*r, *c);
                let v = t.cast(DType::F32);
                let data = v.as_f32()?;
                let mut out = vec![0f32; r * c];
                for i in 0..r {
                    for j in 0..c {
                        out[j * r + i] = data[i * c + j];
                    }
                }
                Ok(Tensor::f32(vec![c, r], out)?.cast(t.dtype()))
            }
        }
    }
}

impl std::fmt::Display for WeightExpr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WeightExpr::Stored(n) => write!(f, "{n}"),
            WeightExpr::Cast(e, d) => write!(f, "cast<{d}>({e})"),
            WeightExpr::Transpose(e) => write!(f, "transpose({e})"),
        }
    }
}

/// A [`TensorSource`] over tensors held in memory (tests, benches, generated weights).
#[derive(Debug, Default, Clone)]
pub struct MemorySource {
    tensors: std::collections::BTreeMap<String, Tensor>,
}

impl MemorySource {
    pub fn insert(&mut self, name: &str, t: Tensor) {
        self.tensors.insert(name.to_string(), t);
    }
}

impl TensorSource for MemorySource {
    fn info(&self, name: &str) -> Result<TensorInfo> {
        let t = self.load_ref(name)?;
        Ok(TensorInfo { dtype: t.dtype(), shape: t.shape().to_vec() })
    }
    fn load(&self, name: &str) -> Result<Tensor> {
        self.load_ref(name).cloned()
    }
}

impl MemorySource {
    fn load_ref(&self, name: &str) -> Result<&Tensor> {
        self.tensors.get(name).ok_or_else(|| Error::Weight { tensor: name.to_string(), msg: "no such tensor".into() })
    }
}
