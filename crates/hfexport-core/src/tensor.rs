//! Dense host tensors: what the reference evaluator computes with, what weights materialise
//! into, and what `hfexport run` reads and writes.
//!
//! Storage is deliberately narrow: floats (f32, f16, bf16) are held as `f32` values that are
//! exactly representable in the tagged dtype (rounded when created or cast), integers
//! (i64, i32, u8, i8) as `i64` values in range of the tagged dtype. Every op of the reference
//! evaluator therefore has one float and one integer path, and rounding happens only where the
//! graph says so (a `Cast`), exactly like an eager framework computing in the tagged dtype
//! with f32 accumulation.

use crate::dtype::DType;
use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq)]
pub enum TensorData {
    Float(Vec<f32>),
    Int(Vec<i64>),
    Bool(Vec<bool>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<usize>,
    data: TensorData,
}

/// Number of elements of a shape, or an error when it overflows `usize`.
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

fn round_float(dtype: DType, v: f32) -> f32 {
    match dtype {
        DType::F16 => half::f16::from_f32(v).to_f32(),
        DType::BF16 => half::bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

fn wrap_int(dtype: DType, v: i64) -> i64 {
    match dtype {
        DType::I32 => v as i32 as i64,
        DType::U8 => v as u8 as i64,
        DType::I8 => v as i8 as i64,
        _ => v,
    }
}

impl Tensor {
    fn check_len(shape: &[usize], len: usize) -> Result<()> {
        let n = checked_numel(shape).ok_or_else(|| Error::Tensor(format!("shape {shape:?} overflows")))?;
        if n != len {
            return Err(Error::Tensor(format!("shape {shape:?} needs {n} elements, got {len}")));
        }
        Ok(())
    }

    /// A float tensor of `dtype` (f32/f16/bf16); values are rounded to that dtype.
    pub fn float(dtype: DType, shape: Vec<usize>, mut data: Vec<f32>) -> Result<Tensor> {
        if !dtype.is_float() {
            return Err(Error::Tensor(format!("{dtype} is not a float dtype")));
        }
        Self::check_len(&shape, data.len())?;
        if dtype != DType::F32 {
            data.iter_mut().for_each(|v| *v = round_float(dtype, *v));
        }
        Ok(Tensor { dtype, shape, data: TensorData::Float(data) })
    }

    pub fn f32(shape: Vec<usize>, data: Vec<f32>) -> Result<Tensor> {
        Self::float(DType::F32, shape, data)
    }

    /// An integer tensor of `dtype` (i64/i32/u8/i8); values are wrapped to that dtype.
    pub fn int(dtype: DType, shape: Vec<usize>, mut data: Vec<i64>) -> Result<Tensor> {
        if !dtype.is_int() {
            return Err(Error::Tensor(format!("{dtype} is not an integer dtype")));
        }
        Self::check_len(&shape, data.len())?;
        if dtype != DType::I64 {
            data.iter_mut().for_each(|v| *v = wrap_int(dtype, *v));
        }
        Ok(Tensor { dtype, shape, data: TensorData::Int(data) })
    }

    pub fn i64(shape: Vec<usize>, data: Vec<i64>) -> Result<Tensor> {
        Self::int(DType::I64, shape, data)
    }

    pub fn bool(shape: Vec<usize>, data: Vec<bool>) -> Result<Tensor> {
        Self::check_len(&shape, data.len())?;
        Ok(Tensor { dtype: DType::Bool, shape, data: TensorData::Bool(data) })
    }

    /// A scalar (rank 0) float of `dtype`.
    pub fn scalar_float(dtype: DType, v: f32) -> Tensor {
        Tensor::float(dtype, vec![], vec![v]).expect("scalar has one element")
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn numel(&self) -> usize {
        match &self.data {
            TensorData::Float(v) => v.len(),
            TensorData::Int(v) => v.len(),
            TensorData::Bool(v) => v.len(),
        }
    }

    pub fn data(&self) -> &TensorData {
        &self.data
    }

    pub fn into_data(self) -> TensorData {
        self.data
    }

    pub fn as_f32(&self) -> Result<&[f32]> {
        match &self.data {
            TensorData::Float(v) => Ok(v),
            _ => Err(Error::Tensor(format!("expected a float tensor, got {}", self.dtype))),
        }
    }

    pub fn as_i64(&self) -> Result<&[i64]> {
        match &self.data {
            TensorData::Int(v) => Ok(v),
            _ => Err(Error::Tensor(format!("expected an integer tensor, got {}", self.dtype))),
        }
    }

    pub fn as_bool(&self) -> Result<&[bool]> {
        match &self.data {
            TensorData::Bool(v) => Ok(v),
            _ => Err(Error::Tensor(format!("expected a bool tensor, got {}", self.dtype))),
        }
    }

    /// Same data, new shape with the same number of elements.
    pub fn reshaped(mut self, shape: Vec<usize>) -> Result<Tensor> {
        Self::check_len(&shape, self.numel())?;
        self.shape = shape;
        Ok(self)
    }

    /// Converts to `dtype` the way `tensor.to(dtype)` does in PyTorch (floats to ints
    /// truncate toward zero, anything to bool tests non-zero).
    pub fn cast(&self, dtype: DType) -> Tensor {
        let shape = self.shape.clone();
        let data = match (&self.data, dtype) {
            (TensorData::Float(v), d) if d.is_float() => {
                TensorData::Float(v.iter().map(|&x| round_float(d, x)).collect())
            }
            (TensorData::Float(v), DType::Bool) => TensorData::Bool(v.iter().map(|&x| x != 0.0).collect()),
            (TensorData::Float(v), d) => TensorData::Int(v.iter().map(|&x| wrap_int(d, x as i64)).collect()),
            (TensorData::Int(v), d) if d.is_float() => {
                TensorData::Float(v.iter().map(|&x| round_float(d, x as f32)).collect())
            }
            (TensorData::Int(v), DType::Bool) => TensorData::Bool(v.iter().map(|&x| x != 0).collect()),
            (TensorData::Int(v), d) => TensorData::Int(v.iter().map(|&x| wrap_int(d, x)).collect()),
            (TensorData::Bool(v), d) if d.is_float() => {
                TensorData::Float(v.iter().map(|&x| if x { 1.0 } else { 0.0 }).collect())
            }
            (TensorData::Bool(v), DType::Bool) => TensorData::Bool(v.clone()),
            (TensorData::Bool(v), _) => TensorData::Int(v.iter().map(|&x| x as i64).collect()),
        };
        Tensor { dtype, shape, data }
    }

    /// Decodes little-endian bytes of `dtype` (the safetensors / ONNX raw layout).
    pub fn from_le_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Result<Tensor> {
        let n = checked_numel(&shape).ok_or_else(|| Error::Tensor(format!("shape {shape:?} overflows")))?;
        let expected = n.checked_mul(dtype.size()).ok_or_else(|| Error::Tensor("byte size overflows".into()))?;
        if bytes.len() != expected {
            return Err(Error::Tensor(format!("{dtype}{shape:?} needs {expected} bytes, got {}", bytes.len())));
        }
        let t = match dtype {
            DType::F32 => Tensor::f32(
                shape,
                bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
            )?,
            DType::F16 => Tensor {
                dtype,
                shape,
                data: TensorData::Float(
                    bytes.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
                ),
            },
            DType::BF16 => Tensor {
                dtype,
                shape,
                data: TensorData::Float(
                    bytes.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
                ),
            },
            DType::I64 => Tensor::i64(
                shape,
                bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))).collect(),
            )?,
            DType::I32 => Tensor::int(
                dtype,
                shape,
                bytes.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64).collect(),
            )?,
            DType::U8 => Tensor::int(dtype, shape, bytes.iter().map(|&b| b as i64).collect())?,
            DType::I8 => Tensor::int(dtype, shape, bytes.iter().map(|&b| b as i8 as i64).collect())?,
            DType::Bool => Tensor::bool(shape, bytes.iter().map(|&b| b != 0).collect())?,
        };
        Ok(t)
    }

    /// Encodes as little-endian bytes of the tensor's dtype.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.numel() * self.dtype.size());
        match (&self.data, self.dtype) {
            (TensorData::Float(v), DType::F32) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            (TensorData::Float(v), DType::F16) => {
                v.iter().for_each(|x| out.extend_from_slice(&half::f16::from_f32(*x).to_le_bytes()))
            }
            (TensorData::Float(v), _) => {
                v.iter().for_each(|x| out.extend_from_slice(&half::bf16::from_f32(*x).to_le_bytes()))
            }
            (TensorData::Int(v), DType::I64) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            (TensorData::Int(v), DType::I32) => {
                v.iter().for_each(|x| out.extend_from_slice(&(*x as i32).to_le_bytes()))
            }
            (TensorData::Int(v), _) => v.iter().for_each(|x| out.push(*x as u8)),
            (TensorData::Bool(v), _) => v.iter().for_each(|x| out.push(*x as u8)),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_every_dtype() {
        for dtype in DType::ALL {
            let t = Tensor::f32(vec![2, 2], vec![1.0, -2.0, 0.0, 3.0]).unwrap().cast(dtype);
            let back = Tensor::from_le_bytes(dtype, vec![2, 2], &t.to_le_bytes()).unwrap();
            assert_eq!(t, back, "{dtype}");
        }
    }

    #[test]
    fn float_creation_rounds_to_dtype() {
        let t = Tensor::float(DType::BF16, vec![1], vec![1.0 + 1.0 / 1024.0]).unwrap();
        assert_eq!(t.as_f32().unwrap(), &[1.0]);
    }

    #[test]
    fn wrong_length_is_an_error() {
        assert!(Tensor::f32(vec![3], vec![1.0]).is_err());
        assert!(Tensor::from_le_bytes(DType::F32, vec![2], &[0; 7]).is_err());
    }
}
