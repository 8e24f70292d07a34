//! Element types of graph values and tensors.
//!
//! The set is closed on purpose: every backend must be able to name each of them, and the
//! reference evaluator must be able to compute with each of them.

use std::fmt;

/// Element type of a graph value or a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
    BF16,
    I64,
    I32,
    Bool,
    U8,
    I8,
}

impl DType {
    pub const ALL: [DType; 8] =
        [DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool, DType::U8, DType::I8];

    /// Bytes per element in the canonical little-endian storage.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::I64 => 8,
            DType::Bool | DType::U8 | DType::I8 => 1,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }

    pub fn is_int(self) -> bool {
        matches!(self, DType::I64 | DType::I32 | DType::U8 | DType::I8)
    }

    /// Short name used by the text dump (`f32`, `i64`, …).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::I8 => "i8",
        }
    }

    /// The safetensors spelling (`F32`, `BF16`, `I64`, `BOOL`, …).
    pub fn safetensors_name(self) -> &'static str {
        match self {
            DType::F32 => "F32",
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::I64 => "I64",
            DType::I32 => "I32",
            DType::Bool => "BOOL",
            DType::U8 => "U8",
            DType::I8 => "I8",
        }
    }

    pub fn from_safetensors_name(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.safetensors_name() == s)
    }

    /// The user-facing spelling of float types on the command line and in configs
    /// (`float32`, `float16`, `bfloat16`).
    pub fn from_user_name(s: &str) -> Option<DType> {
        match s {
            "float32" | "f32" | "fp32" => Some(DType::F32),
            "float16" | "f16" | "fp16" | "half" => Some(DType::F16),
            "bfloat16" | "bf16" => Some(DType::BF16),
            _ => None,
        }
    }

    /// The name [`DType::from_user_name`] reads back, for a float export dtype (`float32` for
    /// anything but float16 and bfloat16).
    pub fn user_name(self) -> &'static str {
        match self {
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            _ => "float32",
        }
    }

    /// The smallest finite value, used as "minus infinity" in masks so that fully masked rows
    /// never produce NaN (as transformers' eager attention does).
    pub fn min_finite(self) -> f32 {
        match self {
            DType::F16 => half::f16::MIN.to_f32(),
            DType::BF16 => half::bf16::MIN.to_f32(),
            _ => f32::MIN,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
