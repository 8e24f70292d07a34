//! Swin (`SwinModel`, `SwinForImageClassification`) and Swinv2: a hierarchical transformer whose
//! layers attend within square windows of patches. Its graph is built at one image size, like the
//! convolutional backbones' (`crate::convnet`, which calls it): transformers decides from the
//! grid each stage sees whether its windows shift and how it pads, so those are the graph's
//! constants, and only the batch is symbolic.
//!
//! Per stage: the grid is padded at its bottom and right to whole windows; every second layer
//! rolls it up and left by half a window first (and back after), masking (-100, as transformers
//! does) the pairs of a window that the roll brought from different regions; where the grid is no
//! larger than a window, nothing shifts. The windows of an image are folded into the heads axis
//! (`[batch, windows x heads, window², head_dim]`), so that one attention with one additive mask
//! `[1, windows x heads, window², window²]` (the layer's relative position bias plus the shift
//! mask, constants of the graph's dtype) serves any batch. A stage but the last ends in a patch
//! merging: each 2x2 block of patches (the grid padded to even sides) concatenated in
//! transformers' order, a norm, and a linear to twice the width.
//!
//! Swinv2 ([`SwinVersion::V2`]) differs in branches of the same functions: its norms follow the
//! attention and the MLP, its scores are cosine similarities times a learned per-head scale, its
//! relative position bias is computed by an MLP from log-spaced offsets, its windows and shifts
//! are fixed from the configured image size (transformers builds them into its layers), and its
//! patch merging normalises after the reduction.

use hfexport_core::ops::{Activation, BinaryOp, ReduceKind, UnaryOp, Window};
use hfexport_core::{Dim, Op, Tensor, ValueId};

use crate::config::{SwinConfig, SwinVersion};
use crate::convnet::Features;
use crate::decoder::{Decoder, Vb};
use crate::error::{ModelError, Result};
use crate::patch_bias::grid_pair_row;

/// `nn.LayerNorm`'s default epsilon: the patch embedding's and the patch merging's norms, which
/// transformers builds without the config's `layer_norm_eps`.
const TORCH_NORM_EPS: f64 = 1e-5;

/// The additive score of a window's pair from different shift regions (transformers' value).
const SHIFT_MASKED: f32 = -100.0;

/// The `rows x cols` grid of patches a stage sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Grid {
    rows: usize,
    cols: usize,
}

impl Grid {
    fn len(self) -> usize {
        self.rows * self.cols
    }

    /// The grid padded at its end to multiples of `side`.
    fn padded(self, side: usize) -> Grid {
        Grid { rows: self.rows.div_ceil(side) * side, cols: self.cols.div_ceil(side) * side }
    }
}

/// How the layers of one stage attend: the window side, the shift of the odd layers (0 where
/// the grid is no larger than a window) and the padded grid.
#[derive(Debug, Clone, Copy)]
struct Windows {
    side: usize,
    shift: usize,
    padded: Grid,
}

impl Windows {
    fn count(&self) -> usize {
        self.padded.len() / (self.side * self.side)
    }

    fn area(&self) -> usize {
        self.side * self.side
    }
}

impl Decoder<'_> {
    /// Swin over `x` `[batch, channels, height, width]`: the patch embedding, the stages
    /// (`encoder.layers.<s>`: `blocks.<l>`, then `downsample`), the final `layernorm`, and the
    /// mean over the patches as `pooler_output`.
    pub(crate) fn swin(&mut self, root: &Vb, s: &SwinConfig, channels: usize, x: ValueId) -> Result<Features> {
        let net = self.cfg.convnet.as_ref().expect("Swin is a backbone of the config");
        // transformers' `patch_grid`: the configured image in whole patches
        let configured = Grid { rows: net.image[0] / s.patch[0], cols: net.image[1] / s.patch[1] };
        let (mut h, mut grid) = self.swin_embeddings(&root.pp("embeddings"), s, (channels, configured), x)?;
        let stages = s.depths.len();
        for (stage, &depth) in s.depths.iter().enumerate() {
            let windows = self.stage_windows(s, stage, (grid, configured))?;
            let vb = root.pp("encoder.layers").pp(stage);
            // one shift mask for the stage's shifted layers
            let shift_mask = match windows.shift > 0 && depth > 1 {
                true => Some(self.shift_mask(&vb.name("shift_mask"), windows)?),
                false => None,
            };
            for l in 0..depth {
                let mask = shift_mask.filter(|_| l % 2 == 1);
                h = self.swin_layer(&vb.pp("blocks").pp(l), s, stage, (windows, mask), grid, h)?;
            }
            if stage + 1 < stages {
                let v2 = s.version != SwinVersion::V1;
                (h, grid) = self.patch_merging(&vb.pp("downsample"), (s.width(stage), v2), grid, h)?;
            }
        }
        let width = s.width(stages - 1);
        let map = self.layer_norm(&root.pp("layernorm"), width, self.cfg.norm_eps, h)?;
        let mean = Op::Reduce { kind: ReduceKind::Mean, axes: vec![1], keep_dims: false };
        let pooled = self.op(&root.name("pooler"), mean, &[map])?;
        Ok(Features { map, pooled, width })
    }

    /// The patch convolution over the image padded to whole patches, as `[batch, patches,
    /// embed_dim]`, its norm, and the learned positions where the config has them.
    fn swin_embeddings(
        &mut self,
        vb: &Vb,
        s: &SwinConfig,
        (channels, stored): (usize, Grid),
        x: ValueId,
    ) -> Result<(ValueId, Grid)> {
        let shape = self.g.info(x).shape.clone();
        let [height, width] =
            [&shape[2], &shape[3]].map(|d| d.as_const().expect("Swin's image size is static") as usize);
        let [ph, pw] = s.patch;
        let grid = Grid { rows: height.div_ceil(ph), cols: width.div_ceil(pw) };
        let x = self.pad_end(&vb.name("padded"), x, 2, grid.rows * ph)?;
        let x = self.pad_end(&vb.name("padded_width"), x, 3, grid.cols * pw)?;
        let conv = vb.pp("patch_embeddings.projection");
        let h = self.conv(&conv, (channels, s.embed_dim), Window::new(&s.patch, &s.patch, &[0, 0]), 1, true, x)?;
        let d = |v: usize| Dim::from(v);
        let batch = shape[0].clone();
        let h = self.op(&conv.name("flat"), Op::Reshape { shape: vec![batch, d(s.embed_dim), d(grid.len())] }, &[h])?;
        let h = self.op(&conv.name("patches"), Op::Transpose { perm: vec![0, 2, 1] }, &[h])?;
        let h = self.layer_norm(&vb.pp("norm"), s.embed_dim, TORCH_NORM_EPS, h)?;
        if !s.absolute_positions {
            return Ok((h, grid));
        }
        if stored != grid {
            return Err(ModelError::Config {
                path: "config.json".into(),
                key: "use_absolute_embeddings".into(),
                msg: format!(
                    "is true: Swin's learned positions are for the {}x{} patches of the configured image_size; a \
                     {height}x{width} image gives {}x{} (another image size, or one that is not a multiple of \
                     patch_size, is unsupported, as in transformers)",
                    stored.rows, stored.cols, grid.rows, grid.cols
                ),
            });
        }
        let pos = self.weight(vb, "position_embeddings", &[1, grid.len(), s.embed_dim])?;
        Ok((self.op(&vb.name("positioned"), Op::Binary(BinaryOp::Add), &[h, pos])?, grid))
    }

    /// Stage `stage`'s windows over `grid`. Swin's, as transformers' `set_shift_and_window_size`
    /// and `maybe_pad` make them from the grid the stage sees: a grid narrower than a window is
    /// refused (transformers' relative bias then no longer fits its scores). Swinv2's from the
    /// grid the stage has at the configured image size (`configured`, halved per stage, rounding
    /// down), as its layers fix them when they are built: the window no taller than that grid,
    /// unshifted where it is as tall.
    fn stage_windows(&self, s: &SwinConfig, stage: usize, (grid, configured): (Grid, Grid)) -> Result<Windows> {
        let refuse = |rows: usize, cols: usize, why: &str| ModelError::Config {
            path: "config.json".into(),
            key: "window_size".into(),
            msg: format!(
                "is {}, but stage {stage} of Swin sees a {rows}x{cols} grid of patches {why}: a grid smaller than a \
                 window is unsupported (transformers fails on it too); export a larger --image-size",
                s.window
            ),
        };
        if let SwinVersion::V2 { .. } = s.version {
            let rows = configured.rows >> stage;
            let side = rows.min(s.window);
            if side == 0 {
                return Err(refuse(rows, configured.cols >> stage, "at the configured image_size"));
            }
            let shift = if rows <= side { 0 } else { s.window / 2 };
            return Ok(Windows { side, shift, padded: grid.padded(side) });
        }
        let smallest = grid.rows.min(grid.cols);
        if smallest < s.window {
            return Err(refuse(grid.rows, grid.cols, "at this image size"));
        }
        let shift = if smallest <= s.window { 0 } else { s.window / 2 };
        Ok(Windows { side: s.window, shift, padded: grid.padded(s.window) })
    }

    /// One Swin layer: `layernorm_before`, the window attention (on the grid rolled by the
    /// stage's shift where the layer has the `shift_mask`), the residual, then
    /// `layernorm_after`, the MLP (`intermediate.dense`, the activation, `output.dense`) and the
    /// residual. Swinv2's norms are on the branches' outputs instead (before the residuals).
    fn swin_layer(
        &mut self,
        vb: &Vb,
        s: &SwinConfig,
        stage: usize,
        (windows, shift_mask): (Windows, Option<ValueId>),
        grid: Grid,
        x: ValueId,
    ) -> Result<ValueId> {
        let (c, eps, v2) = (s.width(stage), self.cfg.norm_eps, s.version != SwinVersion::V1);
        let batch = self.g.info(x).shape[0].clone();
        let d = |v: usize| Dim::from(v);
        let h = match v2 {
            true => x,
            false => self.layer_norm(&vb.pp("layernorm_before"), c, eps, x)?,
        };
        let h = self.op(
            &vb.name("grid"),
            Op::Reshape { shape: vec![batch.clone(), d(grid.rows), d(grid.cols), d(c)] },
            &[h],
        )?;
        let h = self.pad_end(&vb.name("padded_rows"), h, 1, windows.padded.rows)?;
        let mut h = self.pad_end(&vb.name("padded_cols"), h, 2, windows.padded.cols)?;
        let shift = if shift_mask.is_some() { windows.shift } else { 0 };
        for axis in [1, 2] {
            h = self.roll(&vb.name(format!("rolled.{axis}")), h, axis, shift, false)?;
        }
        let h = self.partition(&vb.name("windows"), h, windows, c, false)?;
        let h = self.window_attention(&vb.pp("attention"), s, stage, windows, shift_mask, h)?;
        let mut h = self.partition(&vb.name("merged"), h, windows, c, true)?;
        for axis in [1, 2] {
            h = self.roll(&vb.name(format!("unrolled.{axis}")), h, axis, shift, true)?;
        }
        let d0 = d(0);
        let h = self.op(&vb.name("cropped_rows"), Op::Slice { axis: 1, start: d0.clone(), end: d(grid.rows) }, &[h])?;
        let h = self.op(&vb.name("cropped"), Op::Slice { axis: 2, start: d0, end: d(grid.cols) }, &[h])?;
        let mut h = self.op(&vb.name("sequence"), Op::Reshape { shape: vec![batch, d(grid.len()), d(c)] }, &[h])?;
        if v2 {
            h = self.layer_norm(&vb.pp("layernorm_before"), c, eps, h)?;
        }
        let x = self.op(&vb.name("attention_residual"), Op::Binary(BinaryOp::Add), &[x, h])?;
        let act = self.activation()?;
        let h = match v2 {
            true => x,
            false => self.layer_norm(&vb.pp("layernorm_after"), c, eps, x)?,
        };
        let h = self.linear(&vb.pp("intermediate.dense"), s.mlp_width(stage), c, true, h)?;
        let h = self.op(&vb.name("intermediate.act"), Op::Activate(act), &[h])?;
        let mut h = self.linear(&vb.pp("output.dense"), c, s.mlp_width(stage), true, h)?;
        if v2 {
            h = self.layer_norm(&vb.pp("layernorm_after"), c, eps, h)?;
        }
        self.op(&vb.name("mlp_residual"), Op::Binary(BinaryOp::Add), &[x, h])
    }

    /// Attention within each window of `x` `[batch, windows, window², width]`: `self.query`,
    /// `self.key`, `self.value`, scores plus the layer's relative position bias and the shift
    /// mask, then `output.dense`. Swinv2's scores are cosine similarities (queries and keys
    /// L2-normalised, keys unbiased) times each head's `self.logit_scale` (exponentiated, at most
    /// 100), applied to the queries.
    fn window_attention(
        &mut self,
        vb: &Vb,
        s: &SwinConfig,
        stage: usize,
        windows: Windows,
        shift_mask: Option<ValueId>,
        x: ValueId,
    ) -> Result<ValueId> {
        let (c, heads, v2) = (s.width(stage), s.heads[stage], s.version != SwinVersion::V1);
        let (hd, n, count) = (c / heads, windows.area(), windows.count());
        let batch = self.g.info(x).shape[0].clone();
        let d = |v: usize| Dim::from(v);
        let this = vb.pp("self");
        let mut qkv = vec![];
        for part in ["query", "key", "value"] {
            let p = this.pp(part);
            let t = self.linear(&p, c, c, s.qkv_bias && !(v2 && part == "key"), x)?;
            let shape = vec![batch.clone(), d(count), d(n), d(heads), d(hd)];
            let t = self.op(&p.name("heads"), Op::Reshape { shape }, &[t])?;
            let mut t = self.op(&p.name("heads_first"), Op::Transpose { perm: vec![0, 1, 3, 2, 4] }, &[t])?;
            if v2 && part != "value" {
                t = self.l2_normalize(&p.name("normalized"), t, Some(1e-12))?;
            }
            if v2 && part == "query" {
                let scale = self.logit_scale(&this, heads)?;
                t = self.op(&p.name("scaled"), Op::Binary(BinaryOp::Mul), &[t, scale])?;
            }
            let shape = vec![batch.clone(), d(count * heads), d(n), d(hd)];
            qkv.push(self.op(&p.name("window_heads"), Op::Reshape { shape }, &[t])?);
        }
        let bias = match v2 {
            true => self.continuous_position_bias(&this, s, stage, windows.side)?,
            false => self.table_position_bias(&this, heads, windows.side)?,
        };
        let mask = self.swin_window_mask(&this, (heads, windows), bias, shift_mask)?;
        let scale = if v2 { 1.0 } else { (hd as f64).powf(-0.5) as f32 };
        let op = Op::Attention { scale, softcap: None, sliding_window: None, sinks: false };
        let o = self.op(&vb.name("scores"), op, &[qkv[0], qkv[1], qkv[2], mask])?;
        let o = self.op(
            &vb.name("windows"),
            Op::Reshape { shape: vec![batch.clone(), d(count), d(heads), d(n), d(hd)] },
            &[o],
        )?;
        let o = self.op(&vb.name("tokens_first"), Op::Transpose { perm: vec![0, 1, 3, 2, 4] }, &[o])?;
        let o = self.op(&vb.name("merged"), Op::Reshape { shape: vec![batch, d(count), d(n), d(c)] }, &[o])?;
        self.linear(&vb.pp("output.dense"), c, c, true, o)
    }

    /// Swinv2's per-head logit scale `[heads, 1, 1]`: `exp(min(logit_scale, ln 100))`.
    fn logit_scale(&mut self, vb: &Vb, heads: usize) -> Result<ValueId> {
        let stored = self.weight(vb, "logit_scale", &[heads, 1, 1])?;
        let cap = self.scalar(&vb.name("logit_scale.cap"), 100f64.ln())?;
        let capped = self.op(&vb.name("logit_scale.capped"), Op::Binary(BinaryOp::Min), &[stored, cap])?;
        self.op(&vb.name("logit_scale.exp"), Op::Unary(UnaryOp::Exp), &[capped])
    }

    /// The rows of each (query, key) pair of a window of `side`, by their offset: `[side⁴]` (i64).
    fn window_pairs(&mut self, vb: &Vb, side: usize) -> Result<ValueId> {
        let n = side * side;
        let rows: Vec<i64> = (0..n * n).map(|i| grid_pair_row([side, side], i / n, i % n)).collect();
        self.op(&vb.name("relative_position_index"), Op::Constant(Tensor::i64(vec![n * n], rows)?), &[])
    }

    /// `[1, heads, side², side²]` from `table` `[(2 side - 1)², heads]`, each pair's row.
    fn window_bias(&mut self, vb: &Vb, (heads, side): (usize, usize), table: ValueId) -> Result<ValueId> {
        let index = self.window_pairs(vb, side)?;
        self.pair_bias(&vb.name("relative_bias"), table, index, (heads, side * side))
    }

    /// Swin's learned table `relative_position_bias_table`, read per pair.
    fn table_position_bias(&mut self, vb: &Vb, heads: usize, side: usize) -> Result<ValueId> {
        let table = self.weight(vb, "relative_position_bias_table", &[(2 * side - 1) * (2 * side - 1), heads])?;
        self.window_bias(vb, (heads, side), table)
    }

    /// Swinv2's `16 * sigmoid(mlp(offsets))` read per pair: `continuous_position_bias_mlp` (a
    /// 2 -> 512 linear, ReLU, a 512 -> heads linear without bias) over every offset of a window of
    /// `side`, each offset normalised to [-8, 8] by the pretrained (else this) window and
    /// log-spaced, `sign(x) log2(|x| + 1) / 3`, as transformers' `create_coords_table_and_index`.
    fn continuous_position_bias(&mut self, vb: &Vb, s: &SwinConfig, stage: usize, side: usize) -> Result<ValueId> {
        let SwinVersion::V2 { pretrained_windows } = &s.version else { unreachable!("Swinv2's bias") };
        let heads = s.heads[stage];
        let norm = match (pretrained_windows[stage], side) {
            (0, 1) => 1.0,
            (0, w) => (w - 1) as f32,
            (p, _) => (p - 1) as f32,
        };
        let span = 2 * side - 1;
        let log_spaced = |o: f32| {
            let x = o / norm * 8.0;
            x.signum() * (x.abs() + 1.0).log2() / 3.0
        };
        let offsets = (0..span).map(|i| i as f32 - (side - 1) as f32);
        let coords: Vec<f32> =
            offsets.clone().flat_map(|h| offsets.clone().flat_map(move |w| [h, w])).map(log_spaced).collect();
        let coords = Tensor::float(self.opts.dtype, vec![span * span, 2], coords)?;
        let mlp = vb.pp("continuous_position_bias_mlp");
        let coords = self.op(&mlp.name("coords"), Op::Constant(coords), &[])?;
        let h = self.linear(&mlp.pp(0), 512, 2, true, coords)?;
        let h = self.op(&mlp.name("relu"), Op::Activate(Activation::Relu), &[h])?;
        let table = self.linear(&mlp.pp(2), heads, 512, false, h)?;
        let bias = self.window_bias(vb, (heads, side), table)?;
        let bias = self.op(&vb.name("relative_bias.sigmoid"), Op::Unary(UnaryOp::Sigmoid), &[bias])?;
        self.scale(&vb.name("relative_bias.scaled"), bias, 16.0)
    }

    /// The additive mask `[1, windows x heads, window², window²]`: the relative position `bias`
    /// `[1, heads, window², window²]`, plus the shift mask of `shift_mask` `[windows, 1, window²,
    /// window²]` where the layer shifts.
    fn swin_window_mask(
        &mut self,
        vb: &Vb,
        (heads, windows): (usize, Windows),
        bias: ValueId,
        shift_mask: Option<ValueId>,
    ) -> Result<ValueId> {
        let (n, count) = (windows.area(), windows.count());
        let d = |v: usize| Dim::from(v);
        let per_window = match shift_mask {
            Some(m) => self.op(&vb.name("shift_masked"), Op::Binary(BinaryOp::Add), &[bias, m])?,
            None => {
                self.op(&vb.name("every_window"), Op::Expand { shape: vec![d(count), d(heads), d(n), d(n)] }, &[bias])?
            }
        };
        self.op(&vb.name("window_mask"), Op::Reshape { shape: vec![d(1), d(count * heads), d(n), d(n)] }, &[per_window])
    }

    /// transformers' `get_attn_mask` for the rolled, padded grid: each position's region (3
    /// along each axis: before the last window, in it before the last `shift`, in the last
    /// `shift`), and per window `SHIFT_MASKED` between positions of different regions, as a
    /// constant `[windows, 1, window², window²]` of the graph's dtype.
    fn shift_mask(&mut self, name: &str, windows: Windows) -> Result<ValueId> {
        let Windows { side, shift, padded } = windows;
        let region = |i: usize, len: usize| usize::from(i >= len - side) + usize::from(i >= len - shift);
        let label = |r: usize, c: usize| region(r, padded.rows) * 3 + region(c, padded.cols);
        let (n, per_row) = (windows.area(), padded.cols / side);
        let mut mask = Vec::with_capacity(windows.count() * n * n);
        for w in 0..windows.count() {
            let (r0, c0) = (w / per_row * side, w % per_row * side);
            let labels: Vec<usize> = (0..n).map(|t| label(r0 + t / side, c0 + t % side)).collect();
            for &q in &labels {
                mask.extend(labels.iter().map(|&k| if q == k { 0.0 } else { SHIFT_MASKED }));
            }
        }
        let t = Tensor::float(self.opts.dtype, vec![windows.count(), 1, n, n], mask)?;
        self.op(name, Op::Constant(t), &[])
    }

    /// transformers' `window_partition` of `x` `[batch, rows, cols, width]` (padded) into
    /// `[batch, windows, window², width]`, row-major over the windows and within each; or, with
    /// `reverse`, `window_reverse` back.
    fn partition(&mut self, name: &str, x: ValueId, windows: Windows, c: usize, reverse: bool) -> Result<ValueId> {
        let batch = self.g.info(x).shape[0].clone();
        let (side, Grid { rows, cols }) = (windows.side, windows.padded);
        let d = |v: usize| Dim::from(v);
        let blocks = |b: &Dim| vec![b.clone(), d(rows / side), d(side), d(cols / side), d(side), d(c)];
        let by_window = |b: &Dim| vec![b.clone(), d(rows / side), d(cols / side), d(side), d(side), d(c)];
        let (from, to) = match reverse {
            false => (blocks(&batch), vec![batch, d(windows.count()), d(windows.area()), d(c)]),
            true => (by_window(&batch), vec![batch, d(rows), d(cols), d(c)]),
        };
        let x = self.op(&format!("{name}.blocks"), Op::Reshape { shape: from }, &[x])?;
        let x = self.op(&format!("{name}.transposed"), Op::Transpose { perm: vec![0, 1, 3, 2, 4, 5] }, &[x])?;
        self.op(name, Op::Reshape { shape: to }, &[x])
    }

    /// transformers' `SwinPatchMerging` of `x` `[batch, patches, width]` over `grid`: the grid
    /// padded to even sides, each 2x2 block's patches concatenated (top-left, bottom-left,
    /// top-right, bottom-right), `norm`, and `reduction` to twice the width (Swinv2: `reduction`,
    /// then `norm`).
    fn patch_merging(&mut self, vb: &Vb, (c, v2): (usize, bool), grid: Grid, x: ValueId) -> Result<(ValueId, Grid)> {
        let batch = self.g.info(x).shape[0].clone();
        let d = |v: usize| Dim::from(v);
        let even = grid.padded(2);
        let half = Grid { rows: even.rows / 2, cols: even.cols / 2 };
        let h = self.op(
            &vb.name("grid"),
            Op::Reshape { shape: vec![batch.clone(), d(grid.rows), d(grid.cols), d(c)] },
            &[x],
        )?;
        let h = self.pad_end(&vb.name("padded_rows"), h, 1, even.rows)?;
        let h = self.pad_end(&vb.name("padded_cols"), h, 2, even.cols)?;
        let blocks = vec![batch.clone(), d(half.rows), d(2), d(half.cols), d(2), d(c)];
        let h = self.op(&vb.name("blocks"), Op::Reshape { shape: blocks }, &[h])?;
        // [b, i, row, j, col, c] -> [b, i, j, col, row, c]: channel block `col * 2 + row`
        let h = self.op(&vb.name("block_order"), Op::Transpose { perm: vec![0, 1, 3, 4, 2, 5] }, &[h])?;
        let h = self.op(&vb.name("merged"), Op::Reshape { shape: vec![batch, d(half.len()), d(4 * c)] }, &[h])?;
        if v2 {
            let h = self.linear(&vb.pp("reduction"), 2 * c, 4 * c, false, h)?;
            return Ok((self.layer_norm(&vb.pp("norm"), 2 * c, TORCH_NORM_EPS, h)?, half));
        }
        let h = self.layer_norm(&vb.pp("norm"), 4 * c, TORCH_NORM_EPS, h)?;
        Ok((self.linear(&vb.pp("reduction"), 2 * c, 4 * c, false, h)?, half))
    }

    /// `x` with zeros appended along `axis` up to `len` (the identity when it is that long).
    fn pad_end(&mut self, name: &str, x: ValueId, axis: usize, len: usize) -> Result<ValueId> {
        let info = self.g.info(x).clone();
        let have = info.shape[axis].as_const().expect("a padded axis is static") as usize;
        if have == len {
            return Ok(x);
        }
        let mut shape = info.shape.clone();
        shape[axis] = Dim::from(len - have);
        let mut one = shape.clone();
        one[0] = Dim::from(1usize);
        let count = one.iter().map(|d| d.as_const().expect("static but the batch") as usize).product();
        let one: Vec<usize> = one.iter().map(|d| d.as_const().expect("static") as usize).collect();
        let zeros = Tensor::float(info.dtype, one, vec![0.0; count])?;
        let zeros = self.op(&format!("{name}.zeros"), Op::Constant(zeros), &[])?;
        let zeros = self.op(&format!("{name}.zeros_batch"), Op::Expand { shape }, &[zeros])?;
        self.op(name, Op::Concat { axis }, &[x, zeros])
    }

    /// `torch.roll` of `x` along `axis` by `-shift` (or `shift` with `back`): two slices
    /// swapped.
    fn roll(&mut self, name: &str, x: ValueId, axis: usize, shift: usize, back: bool) -> Result<ValueId> {
        if shift == 0 {
            return Ok(x);
        }
        let len = self.g.info(x).shape[axis].as_const().expect("a rolled axis is static") as usize;
        let cut = if back { len - shift } else { shift };
        let d = |v: usize| Dim::from(v);
        let head = self.op(&format!("{name}.head"), Op::Slice { axis, start: d(0), end: d(cut) }, &[x])?;
        let tail = self.op(&format!("{name}.tail"), Op::Slice { axis, start: d(cut), end: d(len) }, &[x])?;
        self.op(name, Op::Concat { axis }, &[tail, head])
    }
}
