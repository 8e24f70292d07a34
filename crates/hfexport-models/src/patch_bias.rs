//! BEiT's relative position bias over a patch grid: each (query, key) pair of the class token
//! and the patches reads one row `[heads]` of a learned table, by the pair's offset on the grid
//! (a `rows x cols` grid's table has `(2 rows - 1)(2 cols - 1) + 3` rows, the last three for the
//! class token to a patch, a patch to the class token and the class token to itself), as
//! transformers' `BeitRelativePositionBias.generate_relative_position_index` numbers them; the
//! rows are computed on the host, once per graph.
//!
//! transformers' `forward` resamples the table's grid rows bilinearly before reading them: it
//! reads the stored grid as `[2 cols - 1, 2 rows - 1]` and resamples that to the image's
//! `[2 rows' - 1, 2 cols' - 1]`. At the configured size this is the identity only for a square
//! grid; its result is what is reproduced, as one constant matrix times the table, which
//! runtimes fold.

use hfexport_core::{Dim, Op, Tensor, ValueId};

use crate::decoder::{Decoder, Vb};
use crate::error::Result;

/// What every layer reads its table through: the row of each pair and the resampling.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RelativeBias {
    /// `[tokens * tokens]` (i64): the table row of each (query, key) pair.
    pub(crate) index: ValueId,
    /// `[grid rows, stored grid rows]`: the resampling of the stored grid rows, where needed.
    pub(crate) resample: Option<ValueId>,
    /// The stored table's grid rows (its three class-token rows follow).
    pub(crate) stored_rows: usize,
    /// The class token and the patches.
    pub(crate) tokens: usize,
}

impl RelativeBias {
    /// The rows of a `grid` of patches whose table was learned over `stored`'s, as constants of
    /// the graph `d` builds.
    pub(crate) fn new(
        d: &mut Decoder<'_>,
        (stored, grid): ([usize; 2], [usize; 2]),
        tokens: usize,
    ) -> Result<RelativeBias> {
        let index = pair_rows(grid);
        let n = index.len();
        let index = d.op("relative_bias.pairs", Op::Constant(Tensor::i64(vec![n], index)?), &[])?;
        let span = |g: [usize; 2]| [2 * g[0] - 1, 2 * g[1] - 1];
        let ([sh, sw], [gh, gw]) = (span(stored), span(grid));
        // transformers reads the stored grid as [sw, sh] and resamples it to [gh, gw]
        let resample = match (sw, sh) == (gh, gw) {
            true => None,
            false => {
                let (wy, wx) = (bilinear_weights(sw, gh), bilinear_weights(sh, gw));
                let mut m = vec![0f32; gh * gw * sw * sh];
                for (y, x) in (0..gh).flat_map(|y| (0..gw).map(move |x| (y, x))) {
                    for (a, b) in (0..sw).flat_map(|a| (0..sh).map(move |b| (a, b))) {
                        m[(y * gw + x) * sw * sh + a * sh + b] = (wy[y * sw + a] * wx[x * sh + b]) as f32;
                    }
                }
                let m = Tensor::float(d.opts.dtype, vec![gh * gw, sw * sh], m)?;
                Some(d.op("relative_bias.resample", Op::Constant(m), &[])?)
            }
        };
        Ok(RelativeBias { index, resample, stored_rows: sh * sw, tokens })
    }
}

/// The table row of each (query, key) pair of the class token and a `[rows, cols]` grid of
/// patches, row-major over `[tokens, tokens]`.
fn pair_rows([rows, cols]: [usize; 2]) -> Vec<i64> {
    let n = rows * cols;
    let grid_rows = (2 * rows as i64 - 1) * (2 * cols as i64 - 1);
    let mut out = vec![0i64; (n + 1) * (n + 1)];
    for q in 0..=n {
        for k in 0..=n {
            out[q * (n + 1) + k] = match (q, k) {
                (0, 0) => grid_rows + 2,
                (_, 0) => grid_rows + 1,
                (0, _) => grid_rows,
                _ => grid_pair_row([rows, cols], q - 1, k - 1),
            };
        }
    }
    out
}

/// The table row of the pair of patches `q` and `k` (row-major on a `[rows, cols]` grid): their
/// offset on the grid, numbered over the `(2 rows - 1) x (2 cols - 1)` offsets (BEiT's patches,
/// Swin's window).
pub(crate) fn grid_pair_row([rows, cols]: [usize; 2], q: usize, k: usize) -> i64 {
    let (qr, qc) = ((q / cols) as i64, (q % cols) as i64);
    let (kr, kc) = ((k / cols) as i64, (k % cols) as i64);
    (qr - kr + rows as i64 - 1) * (2 * cols as i64 - 1) + (qc - kc + cols as i64 - 1)
}

/// The `[out, input]` weights of torch's bilinear resampling of `input` samples to `out`
/// (`align_corners=False`, no antialiasing): output `o` reads the source point
/// `(o + 0.5) * input / out - 0.5` (at least 0) between its two neighbours.
fn bilinear_weights(input: usize, out: usize) -> Vec<f64> {
    let scale = input as f64 / out as f64;
    let mut w = vec![0.0; out * input];
    for o in 0..out {
        let src = (scale * (o as f64 + 0.5) - 0.5).max(0.0);
        let lo = (src.floor() as usize).min(input - 1);
        let hi = (lo + 1).min(input - 1);
        let t = src - lo as f64;
        w[o * input + lo] += 1.0 - t;
        w[o * input + hi] += t;
    }
    w
}

impl Decoder<'_> {
    /// A BEiT relative position bias `[1, heads, tokens, tokens]` from the table `leaf` under
    /// `vb`: its grid rows resampled to the image's grid where they differ, then each (query,
    /// key) pair's row.
    pub(crate) fn relative_table_bias(&mut self, vb: &Vb, leaf: &str, r: &RelativeBias) -> Result<ValueId> {
        let heads = self.cfg.num_attention_heads;
        let d = |v: usize| Dim::from(v);
        let mut table = self.weight(vb, leaf, &[r.stored_rows + 3, heads])?;
        let name = |part: &str| vb.name(format!("{leaf}.{part}"));
        if let Some(resample) = r.resample {
            let grid = self.op(&name("grid"), Op::Slice { axis: 0, start: d(0), end: d(r.stored_rows) }, &[table])?;
            let rest = Op::Slice { axis: 0, start: d(r.stored_rows), end: d(r.stored_rows + 3) };
            let rest = self.op(&name("class_rows"), rest, &[table])?;
            let grid = self.op(&name("resampled"), Op::MatMul, &[resample, grid])?;
            table = self.op(&name("table"), Op::Concat { axis: 0 }, &[grid, rest])?;
        }
        self.pair_bias(&vb.name(leaf), table, r.index, (heads, r.tokens))
    }

    /// `[1, heads, tokens, tokens]`: for each (query, key) pair the row `index[q * tokens + k]`
    /// of `table` `[rows, heads]` (BEiT's patches, Swin's windows), as `{prefix}`.
    pub(crate) fn pair_bias(
        &mut self,
        prefix: &str,
        table: ValueId,
        index: ValueId,
        (heads, tokens): (usize, usize),
    ) -> Result<ValueId> {
        let d = |v: usize| Dim::from(v);
        let bias = self.op(&format!("{prefix}.pairs"), Op::Gather { axis: 0 }, &[table, index])?;
        let bias = self.op(&format!("{prefix}.heads_first"), Op::Transpose { perm: vec![1, 0] }, &[bias])?;
        self.op(prefix, Op::Reshape { shape: vec![d(1), d(heads), d(tokens), d(tokens)] }, &[bias])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_read_their_grid_offset_and_the_class_rows() {
        // a 2 x 3 grid: 3 x 5 offsets, then the class rows 15, 16, 17
        let rows = pair_rows([2, 3]);
        assert_eq!(rows.len(), 49);
        assert_eq!(&rows[..7], &[17, 15, 15, 15, 15, 15, 15]);
        assert_eq!(rows[7], 16);
        // patch 0 (0, 0) with itself: offset (0, 0) -> (1, 2) -> 1 * 5 + 2
        assert_eq!(rows[7 + 1], 7);
        // patch 0 with patch 5 (1, 2): offset (-1, -2) -> (0, 0)
        assert_eq!(rows[7 + 6], 0);
    }

    #[test]
    fn bilinear_weights_are_the_identity_at_one_size_and_sum_to_one() {
        let same = bilinear_weights(3, 3);
        assert_eq!(same, vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
        let up = bilinear_weights(3, 5);
        for row in up.chunks(3) {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
        // torch: the first output reads source -0.2, clamped to 0
        assert_eq!(&up[..3], &[1.0, 0.0, 0.0]);
    }
}
