//! How quantized rows become the stored bytes of one part ([`QuantPart`]): values one per
//! byte (an i8's bits or a u8), the unsigned form that formats with an implicit zero point read
//! (ONNX Runtime's `MatMulNBits`, XNNPACK's `qbint4`: `q + 2^(bits-1)`), scales in their
//! storage dtype, zero points one per byte.
//!
//! Separate from [`crate::rtn`] because it is layout, not arithmetic: any kernel's rows are
//! stored this way. Packing 4-bit values two per byte is a layout a backend asks of core
//! (`WeightExpr::Pack`, nibble order per runtime), applied while the part streams.

use crate::rtn::QuantizedRows;
use hfexport_core::{DType, QuantPart, QuantScheme};

impl QuantizedRows {
    /// The little-endian bytes of one part (see [`QuantPart`]).
    pub fn part_bytes(self, part: QuantPart, scheme: &QuantScheme, scale_dtype: DType) -> Vec<u8> {
        match part {
            QuantPart::Values => self.values.clone(),
            QuantPart::Unsigned if !scheme.symmetric => self.values.clone(),
            QuantPart::Unsigned => {
                let shift = 1u8 << (scheme.bits - 1);
                self.values.iter().map(|v| v.wrapping_add(shift)).collect()
            }
            QuantPart::Scales => match scale_dtype {
                DType::F16 => self.scales.iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect(),
                DType::BF16 => self.scales.iter().flat_map(|&v| half::bf16::from_f32(v).to_le_bytes()).collect(),
                _ => self.scales.iter().flat_map(|v| v.to_le_bytes()).collect(),
            },
            QuantPart::ZeroPoints => self.zero_points.clone(),
        }
    }
}
