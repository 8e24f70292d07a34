//! The quality report of a quantized export: how far quantization moved the logits
//! (`verification.against_float` in `export.json`).
//!
//! The exporter runs the quantized and the float graph in the reference evaluator on the same
//! sample inputs and feeds each pair of logits here; [`LogitComparison`] keeps the top-1
//! agreement and the largest error relative to the largest float logit over non-padded
//! positions. The measure belongs with the quantization it judges; running the graphs (sample
//! inputs, the evaluator) stays with the exporter.

use hfexport_core::metadata::QuantQuality;

/// Quantized logits against float logits, accumulated over samples.
#[derive(Debug, Clone, Default)]
pub struct LogitComparison {
    agree: usize,
    positions: usize,
    worst: f32,
    largest: f32,
}

impl LogitComparison {
    /// Adds one sample: `quant` and `float` hold rows of `vocab` logits in the same order;
    /// `mask` (one entry per row, when given) skips the rows where it is 0 (padding).
    pub fn add(&mut self, quant: &[f32], float: &[f32], vocab: usize, mask: Option<&[f32]>) {
        for (row, (qr, fr)) in quant.chunks(vocab).zip(float.chunks(vocab)).enumerate() {
            if mask.is_some_and(|m| m[row] == 0.0) {
                continue;
            }
            let argmax = |r: &[f32]| r.iter().enumerate().fold(0, |b, (i, x)| if *x > r[b] { i } else { b });
            self.agree += usize::from(argmax(qr) == argmax(fr));
            self.positions += 1;
            for (a, b) in qr.iter().zip(fr) {
                self.worst = self.worst.max((a - b).abs());
                self.largest = self.largest.max(b.abs());
            }
        }
    }

    /// Top-1 agreement, `max |q - f| / max |f|` and the positions compared.
    pub fn finish(&self) -> QuantQuality {
        QuantQuality {
            top1_agreement: self.agree as f32 / self.positions.max(1) as f32,
            max_rel_logit_error: self.worst / self.largest.max(f32::MIN_POSITIVE),
            positions: self.positions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Padded rows are skipped; the argmax and the relative error are per the float logits.
    #[test]
    fn compares_non_padded_rows() {
        let mut c = LogitComparison::default();
        let float = [1.0, 4.0, 0.0, 2.0, 0.0, 0.0];
        let quant = [1.0, 3.0, 0.0, 1.0, 1.5, 9.0];
        c.add(&quant, &float, 3, Some(&[1.0, 1.0]));
        let q = c.finish();
        assert_eq!((q.top1_agreement, q.positions), (0.5, 2));
        assert_eq!(q.max_rel_logit_error, 9.0 / 4.0);
        let mut c = LogitComparison::default();
        c.add(&quant, &float, 3, Some(&[1.0, 0.0]));
        let q = c.finish();
        assert_eq!((q.top1_agreement, q.max_rel_logit_error, q.positions), (1.0, 0.25, 1));
    }
}
