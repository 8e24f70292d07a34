//! The block library architecture definitions compose: embedding, norms, attention, MLP,
//! decoder layer and head, each reading the [`Layout`](crate::layout::Layout) of its family.
//!
//! Tensor names are never spelled out here: a [`Vb`] carries the prefix of the block being
//! built (in the manner of candle's `VarBuilder`), and each block appends the leaf names its
//! layout gives. Weights stay lazy [`WeightExpr`]s over the checkpoint's tensors; fused
//! projections become slices of one stored tensor, GPT-2's Conv1D weights a transpose, and
//! Gemma's `1 + w` norm weights an expression too, so nothing is computed or copied until a
//! writer streams it. Every weight is checked for presence, dtype and shape as it is declared.

use hfexport_core::ops::{moe_few_tokens, Activation, BinaryOp, Glu, ReduceKind, UnaryOp};
use hfexport_core::{DType, Dim, Op, Tensor, ValueId, WeightExpr};

use crate::config::{
    AttentionSpec, DenseMlp, LayerMlp, LayerSpec, Mixer, ParallelMlpInput, PerLayerInput, QueryScale, Span,
};
use crate::decoder::{Decoder, DisentangledInputs, LayerInputs, Vb};
use crate::error::Result;
use crate::layout::{MlpKind, MlpLayout, MoeLayout, NormKind, PerLayerInputLayout, Projections, QkNorm, StackedForm};

/// One projection of a fused weight: its graph name and its rows.
struct Part<'a> {
    name: &'a str,
    rows: usize,
}

impl Decoder<'_> {
    // ---- weights ------------------------------------------------------------------------------

    /// The stored tensor `name`, checked against `shape`, as an expression in the graph dtype
    /// once `transform` is applied (the cast goes last, so slices stream raw bytes).
    fn stored(&self, name: &str, shape: &[usize]) -> Result<(WeightExpr, DType)> {
        let info = self.weights.expect(name, shape)?;
        Ok((WeightExpr::stored(name), info.dtype))
    }

    /// Declares a graph weight `name` computed by `expr` (read in `stored` dtype).
    fn declare(&mut self, name: &str, expr: WeightExpr, stored: DType, shape: &[usize]) -> ValueId {
        let dtype = self.opts.dtype;
        let expr = if stored != dtype { WeightExpr::Cast(Box::new(expr), dtype) } else { expr };
        self.g.add_weight(name, expr, dtype, shape)
    }

    /// The stored tensor `vb.leaf` as a graph weight.
    pub(crate) fn weight(&mut self, vb: &Vb, leaf: &str, shape: &[usize]) -> Result<ValueId> {
        let name = vb.name(leaf);
        let (expr, dtype) = self.stored(&name, shape)?;
        Ok(self.declare(&name, expr, dtype, shape))
    }

    pub(crate) fn op(&mut self, name: &str, op: Op, ins: &[ValueId]) -> Result<ValueId> {
        Ok(self.g.op(name, op, ins)?)
    }

    /// A scalar of the graph's dtype (rounded to it, as transformers' tensors of that dtype are).
    pub(crate) fn scalar(&mut self, name: &str, v: f64) -> Result<ValueId> {
        let t = Tensor::scalar_float(self.opts.dtype, v as f32);
        self.op(name, Op::Constant(t), &[])
    }

    /// `bias` where `mask` allows, else the dtype's lowest value: a bool mask made additive
    /// with a bias (ALiBi's, T5's and MPNet's relative positions, DeBERTa's position scores).
    pub(crate) fn masked_bias(&mut self, name: &str, mask: ValueId, bias: ValueId) -> Result<ValueId> {
        let dtype = self.opts.dtype;
        let low = Tensor::float(dtype, vec![], vec![dtype.min_finite()])?;
        let low = self.op(&format!("{name}.masked_value"), Op::Constant(low), &[])?;
        self.op(name, Op::Where, &[mask, bias, low])
    }

    /// `table[index]` for a constant integer table (buckets of relative distances): stored as
    /// floats and gathered as embeddings are (every backend's gather takes floats), then cast
    /// back; exact for values below 2^24.
    pub(crate) fn lookup(&mut self, name: &str, table: &[i64], index: ValueId) -> Result<ValueId> {
        let values = Tensor::float(DType::F32, vec![table.len()], table.iter().map(|&v| v as f32).collect())?;
        let values = self.op(&format!("{name}.table"), Op::Constant(values), &[])?;
        let at = self.op(&format!("{name}.values"), Op::Gather { axis: 0 }, &[values, index])?;
        self.op(name, Op::Cast(DType::I64), &[at])
    }

    /// A scalar i64 constant (a token id or a bound of one).
    pub(crate) fn id_scalar(&mut self, name: &str, v: i64) -> Result<ValueId> {
        self.op(name, Op::Constant(Tensor::i64(vec![], vec![v])?), &[])
    }

    /// `x * factor`.
    pub(crate) fn scale(&mut self, name: &str, x: ValueId, factor: f64) -> Result<ValueId> {
        let c = self.scalar(&format!("{name}.factor"), factor)?;
        self.op(name, Op::Binary(BinaryOp::Mul), &[x, c])
    }

    /// `x / ‖x‖` over the last axis, the norm at least `eps` where given (torch's `F.normalize`,
    /// 1e-12: sentence-transformers' Normalize module, Swinv2's cosine attention; none: CLIP's
    /// and SigLIP's `_get_vector_norm`).
    pub(crate) fn l2_normalize(&mut self, name: &str, x: ValueId, eps: Option<f64>) -> Result<ValueId> {
        let last = self.g.info(x).shape.len() - 1;
        let sq = self.op(&format!("{name}.square"), Op::Binary(BinaryOp::Mul), &[x, x])?;
        let sum = Op::Reduce { kind: ReduceKind::Sum, axes: vec![last], keep_dims: true };
        let n = self.op(&format!("{name}.sum"), sum, &[sq])?;
        let mut n = self.op(&format!("{name}.norm"), Op::Unary(UnaryOp::Sqrt), &[n])?;
        if let Some(eps) = eps {
            let eps = self.scalar(&format!("{name}.eps"), eps)?;
            n = self.op(&format!("{name}.clamped"), Op::Binary(BinaryOp::Max), &[n, eps])?;
        }
        self.op(name, Op::Binary(BinaryOp::Div), &[x, n])
    }

    /// `tanh(x / cap) * cap` (Gemma's soft-capping).
    pub(crate) fn softcap(&mut self, name: &str, x: ValueId, cap: f64) -> Result<ValueId> {
        let c = self.scalar(&format!("{name}.cap"), cap)?;
        let x = self.op(&format!("{name}.divide"), Op::Binary(BinaryOp::Div), &[x, c])?;
        let x = self.op(&format!("{name}.tanh"), Op::Unary(UnaryOp::Tanh), &[x])?;
        self.op(name, Op::Binary(BinaryOp::Mul), &[x, c])
    }

    // ---- projections --------------------------------------------------------------------------

    /// `x · wᵀ (+ b)` with `w` stored `[out, in]` at `vb.weight`.
    pub(crate) fn linear(&mut self, vb: &Vb, out: usize, inp: usize, bias: bool, x: ValueId) -> Result<ValueId> {
        self.reordered_linear(vb, [out, inp], bias, None, x)
    }

    /// A linear whose output channels are the stored ones in the order `rows` gives (all of them
    /// in order when `None`).
    pub(crate) fn reordered_linear(
        &mut self,
        vb: &Vb,
        shape: [usize; 2],
        bias: bool,
        rows: Option<&[usize]>,
        x: ValueId,
    ) -> Result<ValueId> {
        self.selected_linear((vb, vb), shape, bias, rows, x)
    }

    /// A linear over the rows `rows` (all, in order, when `None`) of the `[out, inp]` weight
    /// stored at `stored`, declared (and named in the graph) as `named`'s: one part of a
    /// projection that holds two (Qwen3-Next's `[query | gate]` per head).
    pub(crate) fn selected_linear(
        &mut self,
        (stored, named): (&Vb, &Vb),
        [out, inp]: [usize; 2],
        bias: bool,
        rows: Option<&[usize]>,
        x: ValueId,
    ) -> Result<ValueId> {
        let kept = rows.map_or(out, <[usize]>::len);
        let mut read = |leaf: &str, shape: &[usize], declared: &[usize]| -> Result<ValueId> {
            let (expr, dtype) = self.stored(&stored.name(leaf), shape)?;
            let expr = match rows {
                Some(rows) => WeightExpr::Rows { expr: Box::new(expr), rows: rows.to_vec() },
                None => expr,
            };
            Ok(self.declare(&named.name(leaf), expr, dtype, declared))
        };
        let mut ins = vec![x, read("weight", &[out, inp], &[kept, inp])?];
        if bias {
            ins.push(read("bias", &[out], &[kept])?);
        }
        self.op(named.path(), Op::Linear, &ins)
    }

    /// One linear per part of a fused weight stored at `vb` (`[sum of rows, in]`, or `[in, sum]`
    /// for a Conv1D), each reading its rows; the parts are named `parent.<part.name>` as if the
    /// checkpoint stored them apart.
    #[allow(clippy::too_many_arguments)] // the layout of one fused weight: splitting it names nothing
    fn fused_linear(
        &mut self,
        vb: &Vb,
        parent: &Vb,
        parts: &[Part],
        inp: usize,
        bias: bool,
        conv1d: bool,
        x: ValueId,
    ) -> Result<Vec<ValueId>> {
        let total: usize = parts.iter().map(|p| p.rows).sum();
        let shape = if conv1d { [inp, total] } else { [total, inp] };
        let (w, w_dtype) = self.stored(&vb.name("weight"), &shape)?;
        let w = if conv1d { WeightExpr::Transpose(Box::new(w)) } else { w };
        let b = match bias {
            true => Some(self.stored(&vb.name("bias"), &[total])?),
            false => None,
        };
        let mut start = 0;
        let mut outs = vec![];
        for part in parts {
            let (end, p) = (start + part.rows, parent.pp(part.name));
            let wv = self.declare(&p.name("weight"), w.clone().slice(0, start, end), w_dtype, &[part.rows, inp]);
            let mut ins = vec![x, wv];
            if let Some((b, b_dtype)) = &b {
                ins.push(self.declare(&p.name("bias"), b.clone().slice(0, start, end), *b_dtype, &[part.rows]));
            }
            outs.push(self.op(p.path(), Op::Linear, &ins)?);
            start = end;
        }
        Ok(outs)
    }

    /// A GPT-2 `Conv1D` (`x · w + b`, `w` stored `[in, out]`).
    fn conv1d(&mut self, vb: &Vb, out: usize, inp: usize, x: ValueId) -> Result<ValueId> {
        let name = vb.name("weight");
        let (w, dtype) = self.stored(&name, &[inp, out])?;
        let w = self.declare(&name, WeightExpr::Transpose(Box::new(w)), dtype, &[out, inp]);
        let b = self.weight(vb, "bias", &[out])?;
        self.op(vb.path(), Op::Linear, &[x, w, b])
    }

    /// The running sum of `x` (f32 or i64) along its last axis.
    pub(crate) fn cumulative_sum(&mut self, name: &str, x: ValueId) -> Result<ValueId> {
        let axis = self.g.info(x).shape.len() - 1;
        self.op(name, Op::CumSum { axis }, &[x])
    }

    /// The positions of the tokens of an attention mask `[b, n]` (i64, 0 = padding) counted
    /// over the mask, padding at 0: `(cumsum(mask) - 1) * mask`.
    pub(crate) fn mask_positions(&mut self, name: &str, mask: ValueId) -> Result<ValueId> {
        let count = self.cumulative_sum(&format!("{name}.cumsum"), mask)?;
        let one = self.op(&format!("{name}.one"), Op::Constant(Tensor::int(DType::I64, vec![], vec![1])?), &[])?;
        let from_zero = self.op(&format!("{name}.from_zero"), Op::Binary(BinaryOp::Sub), &[count, one])?;
        self.op(name, Op::Binary(BinaryOp::Mul), &[from_zero, mask])
    }

    // ---- norms --------------------------------------------------------------------------------

    /// The family's norm over the last axis (`size` wide) with weights at `vb`.
    pub(crate) fn norm(&mut self, vb: &Vb, size: usize, x: ValueId) -> Result<ValueId> {
        let eps = self.cfg.norm_eps as f32;
        let name = vb.name("weight");
        match self.arch.layout.norm {
            NormKind::Rms => {
                let w = self.weight(vb, "weight", &[size])?;
                self.op(vb.path(), Op::RmsNorm { eps }, &[x, w])
            }
            NormKind::RmsOnePlus => {
                let (w, dtype) = self.stored(&name, &[size])?;
                let w = self.declare(&name, WeightExpr::OnePlus(Box::new(w)), dtype, &[size]);
                self.op(vb.path(), Op::RmsNorm { eps }, &[x, w])
            }
            NormKind::Layer if !self.cfg.norm_affine => self.unit_layer_norm(vb, size, eps, x),
            NormKind::Layer => {
                let mut ins = vec![x, self.weight(vb, "weight", &[size])?];
                if self.cfg.norm_bias {
                    ins.push(self.weight(vb, "bias", &[size])?);
                }
                self.op(vb.path(), Op::LayerNorm { eps }, &ins)
            }
        }
    }

    /// A LayerNorm over the last axis (`size` wide) without weight or bias (OPT's
    /// `layer_norm_elementwise_affine` false, Data2VecAudio's positional convolutions'); its unit
    /// weight is a constant under `vb`.
    pub(crate) fn unit_layer_norm(&mut self, vb: &Vb, size: usize, eps: f32, x: ValueId) -> Result<ValueId> {
        let ones = Tensor::float(self.opts.dtype, vec![size], vec![1.0; size])?;
        let ones = self.op(&vb.name("unit_weight"), Op::Constant(ones), &[])?;
        self.op(vb.path(), Op::LayerNorm { eps }, &[x, ones])
    }

    /// The norm named `leaf` of a layer, when the layout has one there.
    fn optional_norm(&mut self, vb: &Vb, leaf: Option<&str>, x: ValueId) -> Result<ValueId> {
        match leaf {
            Some(leaf) => self.norm(&vb.pp(leaf), self.cfg.hidden_size, x),
            None => Ok(x),
        }
    }

    // ---- embedding and head -------------------------------------------------------------------

    /// Token embeddings (scaled as the family scales them), plus learned absolute positions
    /// where the family has them. Returns the hidden states and the embedding table (for a
    /// tied head). Where the embeddings have a width of their own, OPT projects the words to
    /// the hidden size first (`embed_projections`); otherwise the positions share the words'
    /// width and an encoder projects the sum (ELECTRA, ALBERT).
    pub(crate) fn embed(&mut self, root: &Vb, ids: ValueId, positions: ValueId) -> Result<(ValueId, ValueId)> {
        let (cfg, layout) = (self.cfg, &self.arch.layout);
        let vb = self.token_table(root);
        let mut width = cfg.embed_width();
        let table = self.weight(&vb, "weight", &[cfg.vocab_size, width])?;
        let mut h = self.op(vb.path(), Op::Gather { axis: 0 }, &[table, ids])?;
        if let Some(s) = cfg.embedding_scale {
            h = self.scale(&vb.name("scaled"), h, s)?;
        }
        if let (Some(_), Some([project_in, _])) = (cfg.embed_dim, layout.embed_projections) {
            h = self.linear(&root.pp(project_in), cfg.hidden_size, width, false, h)?;
            width = cfg.hidden_size;
        }
        let absolute = cfg.encoder.as_ref().is_none_or(|e| e.absolute_positions);
        if let Some(wpe) = layout.position_embed.filter(|_| absolute) {
            let vb = root.pp(wpe);
            let padding_row = self.padding_position_row()?;
            let offset = padding_row.map_or(layout.position_offset, |r| r + 1);
            let rows = cfg.max_position_embeddings + offset;
            let w = self.position_table(&vb, rows, width, padding_row)?;
            let mut positions = positions;
            if offset > 0 {
                let offset = Tensor::int(DType::I64, vec![], vec![offset as i64])?;
                let offset = self.op(&vb.name("offset"), Op::Constant(offset), &[])?;
                positions = self.op(&vb.name("offset_ids"), Op::Binary(BinaryOp::Add), &[positions, offset])?;
            }
            let p = self.op(&vb.name("gather"), Op::Gather { axis: 0 }, &[w, positions])?;
            h = self.op(&vb.name("add"), Op::Binary(BinaryOp::Add), &[h, p])?;
        }
        if let Some(norm) = layout.embed_norm {
            h = self.norm(&root.pp(norm), width, h)?;
        }
        Ok((h, table))
    }

    /// Where the token table is stored: the layout's `embed`, else the first of its aliases
    /// the file has (`embed` when none is, so the error names it).
    fn token_table(&self, root: &Vb) -> Vb {
        let layout = &self.arch.layout;
        let stored = |n: &&&str| self.weights.has(&root.pp(n).name("weight"));
        let name = std::iter::once(&layout.embed).chain(layout.embed_aliases).find(stored).unwrap_or(&layout.embed);
        root.pp(name)
    }

    /// The position row a padding token reads where positions count the non-padding ids
    /// ([`Layout::positions_from_ids`](crate::layout::Layout)): the padding id; the counted
    /// positions start one row after it.
    pub(crate) fn padding_position_row(&self) -> Result<Option<usize>> {
        if !self.arch.layout.positions_from_ids {
            return Ok(None);
        }
        match self.cfg.pad_token_id {
            Some(pad) if pad >= 0 => Ok(Some(pad as usize)),
            _ => Err(crate::ModelError::Config {
                path: "config.json".into(),
                key: "pad_token_id".into(),
                msg: format!("{}: positions are counted from the padding id, and there is none", self.cfg.architecture),
            }),
        }
    }

    /// `ids` numbered as fairseq's `make_positions` does, less the offset `embed` adds: the
    /// count of non-padding ids up to each one minus 1, and -1 at a padding id (so it reads the
    /// padding row).
    pub(crate) fn id_positions(&mut self, ids: ValueId) -> Result<ValueId> {
        let pad = self.padding_position_row()?.expect("the caller checked positions_from_ids") as i64;
        let pad = self.id_scalar("position_ids.pad", pad)?;
        let padding = self.op("position_ids.padding", Op::Binary(BinaryOp::Equal), &[ids, pad])?;
        let padding = self.op("position_ids.padding_count", Op::Cast(DType::I64), &[padding])?;
        let one = self.id_scalar("position_ids.one", 1)?;
        let kept = self.op("position_ids.kept", Op::Binary(BinaryOp::Sub), &[one, padding])?;
        let count = self.cumulative_sum("position_ids.cumsum", kept)?;
        let count = self.op("position_ids.counted", Op::Binary(BinaryOp::Mul), &[count, kept])?;
        self.op("position_ids.from_ids", Op::Binary(BinaryOp::Sub), &[count, one])
    }

    /// The learned position table at `vb` (`[rows, width]`), or the layout's computed one (with
    /// `padding_row` zeroed) when the file does not store it.
    fn position_table(&mut self, vb: &Vb, rows: usize, width: usize, padding_row: Option<usize>) -> Result<ValueId> {
        match self.arch.layout.sinusoid {
            Some(s) if !self.weights.has(&vb.name("weight")) => {
                let table = Tensor::float(self.opts.dtype, vec![rows, width], s.table(rows, width, padding_row))?;
                self.op(&vb.name("sinusoid"), Op::Constant(table), &[])
            }
            _ => self.weight(vb, "weight", &[rows, width]),
        }
    }

    /// `h` with the rows of media tokens (ids in a [`MediaTokens`] range) replaced by their own
    /// table's embedding, as Gemma 3n's text-only forward embeds them; `h` itself when the
    /// config has no such tables.
    pub(crate) fn media_token_embeddings(&mut self, ids: ValueId, mut h: ValueId) -> Result<ValueId> {
        let tables = self.arch.layout.media_embedders;
        for (m, names) in self.cfg.media_tokens.clone().iter().zip(tables) {
            let vb = Vb::root(names.prefix);
            let start = self.id_scalar(&vb.name("start"), m.start)?;
            let mut inside = self.op(&vb.name("from"), Op::Binary(BinaryOp::GreaterEqual), &[ids, start])?;
            if let Some(end) = m.end {
                let end = self.id_scalar(&vb.name("end"), end)?;
                let below = self.op(&vb.name("below"), Op::Binary(BinaryOp::Less), &[ids, end])?;
                inside = self.op(&vb.name("inside"), Op::Binary(BinaryOp::And), &[inside, below])?;
            }
            // elsewhere its last row, as transformers reads a dummy id there
            let local = self.op(&vb.name("local"), Op::Binary(BinaryOp::Sub), &[ids, start])?;
            let last = self.id_scalar(&vb.name("last"), m.vocab as i64 - 1)?;
            let local = self.op(&vb.name("rows"), Op::Where, &[inside, local, last])?;
            let table = self.weight(&vb.pp(names.embedding), "weight", &[m.vocab, m.hidden])?;
            let e = self.op(vb.pp(names.embedding).path(), Op::Gather { axis: 0 }, &[table, local])?;
            let eps = m.eps as f32;
            let w = self.weight(&vb.pp(names.norm), "weight", &[m.hidden])?;
            let e = self.op(vb.pp(names.norm).path(), Op::RmsNorm { eps }, &[e, w])?;
            let e = self.linear(&vb.pp(names.projection), self.cfg.hidden_size, m.hidden, false, e)?;
            let ones = Tensor::float(self.opts.dtype, vec![self.cfg.hidden_size], vec![1.0; self.cfg.hidden_size])?;
            let ones = self.op(&vb.name("post_norm.unit_weight"), Op::Constant(ones), &[])?;
            let e = self.op(&vb.name("post_norm"), Op::RmsNorm { eps }, &[e, ones])?;
            let sh = self.g.info(ids).shape.clone();
            let shape = vec![sh[0].clone(), sh[1].clone(), Dim::konst(1)];
            let inside = self.op(&vb.name("inside.rows"), Op::Reshape { shape }, &[inside])?;
            h = self.op(&vb.name("embedded"), Op::Where, &[inside, e, h])?;
        }
        Ok(h)
    }

    /// The stack's final norm over `h`; none where the layers norm after their residual adds
    /// (OPT's `do_layer_norm_before` false, BART, Marian).
    pub(crate) fn final_norm(&mut self, root: &Vb, h: ValueId) -> Result<ValueId> {
        match self.cfg.post_residual_norms {
            true => Ok(h),
            false => self.norm(&root.pp(self.arch.layout.final_norm), self.cfg.hidden_size, h),
        }
    }

    /// Final norm, head, logit scaling and soft-capping. The head is the checkpoint's own where
    /// it stores one (transformers 5 keeps a stored head even when the config says tied), else
    /// the embedding `table` when tied.
    pub(crate) fn head(&mut self, root: &Vb, h: ValueId, table: ValueId) -> Result<ValueId> {
        let (cfg, layout) = (self.cfg, &self.arch.layout);
        let mut h = self.final_norm(root, h)?;
        let width = cfg.embed_width();
        if let (Some(_), Some([_, project_out])) = (cfg.embed_dim, layout.embed_projections) {
            h = self.linear(&root.pp(project_out), width, cfg.hidden_size, false, h)?;
        }
        let stored = layout.heads.iter().find(|n| self.weights.has(&Vb::root(n).name("weight")));
        let w = match (stored, cfg.tie_word_embeddings) {
            (None, true) => table,
            (stored, _) => {
                let name = stored.unwrap_or(&layout.heads[0]);
                self.weight(&Vb::root(name), "weight", &[cfg.vocab_size, width])?
            }
        };
        let mut ins = vec![h, w];
        if cfg.head_bias {
            ins.push(self.weight(&Vb::root(layout.heads[0]), "bias", &[cfg.vocab_size])?);
        }
        let mut logits = self.op("lm_head", Op::Linear, &ins)?;
        if let Some(name) = layout.logits_bias.filter(|n| self.weights.has(n)) {
            let bias = self.weight(&Vb::root(""), name, &[1, cfg.vocab_size])?;
            logits = self.op("lm_head.biased", Op::Binary(BinaryOp::Add), &[logits, bias])?;
        }
        if let Some(s) = cfg.logits_scaling {
            logits = self.scale("lm_head.scaled", logits, 1.0 / s)?;
        }
        if let Some(cap) = cfg.final_softcap {
            logits = self.softcap("lm_head.softcap", logits, cap)?;
        }
        Ok(logits)
    }

    // ---- decoder layer ------------------------------------------------------------------------

    /// One decoder layer: its mixer and MLP ([`Self::layer_body`]), then the layout's per-layer
    /// extras: the per-layer embedding's residual and the layer's stored factor. Over AltUp's
    /// streams (Gemma 3n), the layer that wraps the body in their prediction and correction.
    pub(crate) fn decoder_layer(
        &mut self,
        vb: &Vb,
        i: usize,
        h: ValueId,
        s: &LayerInputs,
        act: Activation,
    ) -> Result<ValueId> {
        let layout = self.arch.layout;
        if let (Some(altup), Some(names)) = (self.cfg.altup, layout.altup) {
            return self.altup_layer(vb, i, (altup, names), h, s, act);
        }
        let mut h = self.layer_body(vb, i, h, s, act)?;
        if let (Some(per_layer), Some(names)) = (s.per_layer, layout.per_layer_inputs) {
            let y = self.per_layer_update(vb, i, names, h, per_layer, act)?;
            h = self.op(&vb.name("per_layer_residual"), Op::Binary(BinaryOp::Add), &[h, y])?;
        }
        match layout.layer_scalar {
            Some(leaf) => {
                let w = self.weight(vb, leaf, &[1])?;
                self.op(&vb.name("scaled"), Op::Binary(BinaryOp::Mul), &[h, w])
            }
            None => Ok(h),
        }
    }

    /// `norm(up(act(gate(h)) * p_i))`, `p_i` layer `i`'s slice of the per-layer embeddings
    /// `per_layer` `[b, s, layers, size]`: what the per-layer embedding adds to the residual.
    pub(crate) fn per_layer_update(
        &mut self,
        vb: &Vb,
        i: usize,
        names: PerLayerInputLayout,
        h: ValueId,
        per_layer: ValueId,
        act: Activation,
    ) -> Result<ValueId> {
        let (hs, size) = (self.cfg.hidden_size, self.g.info(per_layer).shape[3].clone());
        let p = size.as_const().expect("a fixed width") as usize;
        let slice = Op::Slice { axis: 2, start: Dim::from(i), end: Dim::from(i + 1) };
        let mine = self.op(&vb.name("per_layer_input.slice"), slice, &[per_layer])?;
        let sh = self.g.info(h).shape.clone();
        let shape = vec![sh[0].clone(), sh[1].clone(), size];
        let mine = self.op(&vb.name("per_layer_input"), Op::Reshape { shape }, &[mine])?;
        let g = self.linear(&vb.pp(names.gate), p, hs, false, h)?;
        let g = self.op(&vb.pp(names.gate).name("act"), Op::Activate(act), &[g])?;
        let g = self.op(&vb.name("per_layer_input.gated"), Op::Binary(BinaryOp::Mul), &[g, mine])?;
        let y = self.linear(&vb.pp(names.up), hs, p, false, g)?;
        self.norm(&vb.pp(names.norm), hs, y)
    }

    /// The per-layer embeddings `[b, s, layers, size]` of tokens `ids` whose (scaled) embeddings
    /// are `h`: `(norm(proj(h) / sqrt(hidden)) + embed(ids) * sqrt(size)) / sqrt(2)`.
    pub(crate) fn per_layer_inputs(
        &mut self,
        root: &Vb,
        names: PerLayerInputLayout,
        pli: PerLayerInput,
        ids: ValueId,
        h: ValueId,
    ) -> Result<ValueId> {
        let (n, hs) = (self.cfg.num_hidden_layers, self.cfg.hidden_size);
        let width = n * pli.size;
        let sh = self.g.info(h).shape.clone();
        let per_layer = vec![sh[0].clone(), sh[1].clone(), Dim::from(n), Dim::from(pli.size)];
        let embed = root.pp(names.embed);
        let table = self.weight(&embed, "weight", &[pli.vocab, width])?;
        let ids = self.ids_below(&embed.name("ids"), ids, pli.vocab)?;
        let t = self.op(embed.path(), Op::Gather { axis: 0 }, &[table, ids])?;
        let t = self.scale(&embed.name("scaled"), t, (pli.size as f64).sqrt())?;
        let t = self.op(&embed.name("per_layer"), Op::Reshape { shape: per_layer.clone() }, &[t])?;
        let projection = root.pp(names.projection);
        let p = self.linear(&projection, width, hs, false, h)?;
        let p = self.scale(&projection.name("scaled"), p, (hs as f64).powf(-0.5))?;
        let p = self.op(&projection.name("per_layer"), Op::Reshape { shape: per_layer }, &[p])?;
        let p = self.norm(&root.pp(names.projection_norm), pli.size, p)?;
        let sum = self.op(&root.name("per_layer_inputs.sum"), Op::Binary(BinaryOp::Add), &[p, t])?;
        self.scale(&root.name("per_layer_inputs"), sum, 0.5f64.sqrt())
    }

    /// `ids` with those at or past `rows` (the table's end) as 0, as Gemma 3n reads its smaller
    /// per-layer table; `ids` itself when the vocabulary fits.
    fn ids_below(&mut self, name: &str, ids: ValueId, rows: usize) -> Result<ValueId> {
        if rows >= self.cfg.vocab_size {
            return Ok(ids);
        }
        let end = self.id_scalar(&format!("{name}.end"), rows as i64)?;
        let zero = self.id_scalar(&format!("{name}.zero"), 0)?;
        let inside = self.op(&format!("{name}.inside"), Op::Binary(BinaryOp::Less), &[ids, end])?;
        self.op(name, Op::Where, &[inside, ids, zero])
    }

    /// The mixer and MLP of a layer (as its [`LayerSpec`](crate::config::LayerSpec) says), each
    /// with the norms the layout places around it, scaled by the residual multiplier, added to
    /// the residual stream.
    pub(crate) fn layer_body(
        &mut self,
        vb: &Vb,
        i: usize,
        h: ValueId,
        s: &LayerInputs,
        act: Activation,
    ) -> Result<ValueId> {
        let (cfg, spec) = (self.cfg, &self.cfg.layers[i]);
        let norms = self.arch.layout.norms;
        // OPT's `do_layer_norm_before` false: the pre-sublayer norms move after the residual adds
        let (pre, post) = match cfg.post_residual_norms {
            true => ((None, None), (norms.pre_attention, norms.pre_mlp)),
            false => ((norms.pre_attention, norms.pre_mlp), (None, None)),
        };
        let pre_attention = match (cfg.parallel, norms.own_parallel) {
            (Some(ParallelMlpInput::OwnNorm), Some([attention, _])) => Some(attention),
            _ => pre.0.filter(|_| i > 0 || !norms.first_without_pre_attention),
        };
        let x = self.optional_norm(vb, pre_attention, h)?;
        let a = match &spec.mixer {
            Mixer::Attention(a) => self.attention(&vb.pp(self.arch.layout.attention.prefix), i, a, x, s)?,
            Mixer::LatentAttention(l) => {
                self.latent_attention(&vb.pp(self.arch.layout.attention.prefix), i, l, x, s)?
            }
            Mixer::Mamba(m) => self.mamba_mixer(&vb.pp(self.ssm_prefix()?), i, m, x, s)?,
            Mixer::Mamba2(m) => self.mamba2_mixer(&vb.pp(self.ssm_prefix()?), i, m, x, s)?,
            Mixer::ShortConv(c) => self.short_conv_mixer(&vb.pp(self.ssm_prefix()?), i, c, x, s)?,
            Mixer::AttentionAndMamba2(a, m) => self.attention_and_mamba2(vb, i, (a, m), x, s)?,
            Mixer::GatedDeltaNet(d) => self.gated_delta_net(&vb.pp(self.ssm_prefix()?), i, d, x, s)?,
        };
        let a = self.optional_norm(vb, norms.post_attention, a)?;
        let a = self.layer_scale(vb, 0, a)?;
        if let Some(input) = cfg.parallel {
            return self.parallel_mlp(vb, spec, (h, x, a), input, act);
        }
        let mut h = self.residual(&vb.name("attn_residual"), h, a)?;
        if let (Some(rank), Some(names)) = (cfg.laurel_rank, self.arch.layout.laurel) {
            h = self.laurel(&vb.pp(names.prefix), names, rank, (h, x))?;
        }
        if spec.mlp == LayerMlp::None {
            return Ok(h);
        }
        h = self.optional_norm(vb, norms.attention_residual.or(post.0), h)?;
        if let (Some(cross), Some(&(k, v))) = (self.arch.layout.cross_attention, s.cross.get(i)) {
            let a = crate::seq2seq::cross_attention_spec(cfg, spec)?;
            // its norm placed as the self-attention's: before it, or after its residual add
            let x = match cfg.post_residual_norms {
                true => h,
                false => self.norm(&vb.pp(cross.norm), cfg.hidden_size, h)?,
            };
            let c = self.cross_attention(&vb.pp(cross.prefix), a, x, (k, v), s.cross_mask)?;
            h = self.residual(&vb.name("cross_residual"), h, c)?;
            if cfg.post_residual_norms {
                h = self.norm(&vb.pp(cross.norm), cfg.hidden_size, h)?;
            }
        }
        let x = self.optional_norm(vb, pre.1, h)?;
        let m = self.layer_mlp(vb, spec, (h, x), act)?;
        let m = self.optional_norm(vb, norms.post_mlp, m)?;
        let m = self.layer_scale(vb, 1, m)?;
        let h = self.residual(&vb.name("mlp_residual"), h, m)?;
        self.optional_norm(vb, norms.mlp_residual.or(post.1), h)
    }

    /// Falcon-H1's parallel mixers: `mamba(x) * ssm_out + attention(x * attention_in) *
    /// attention_out` (the multipliers 1.0 without µP).
    fn attention_and_mamba2(
        &mut self,
        vb: &Vb,
        i: usize,
        (a, m): (&AttentionSpec, &crate::config::Mamba2Spec),
        x: ValueId,
        s: &LayerInputs,
    ) -> Result<ValueId> {
        let mup = self.cfg.mup.clone();
        let factor = |pick: fn(&crate::config::Mup) -> f64| mup.as_ref().map_or(1.0, pick);
        let attention = vb.pp(self.arch.layout.attention.prefix);
        let xa = self.scale(&attention.name("input_scaled"), x, factor(|m| m.attention_in))?;
        let y = self.attention(&attention, i, a, xa, s)?;
        let y = self.scale(&attention.name("output_scaled"), y, factor(|m| m.attention_out))?;
        let mixer = vb.pp(self.ssm_prefix()?);
        let z = self.mamba2_mixer(&mixer, i, m, x, s)?;
        let z = self.scale(&mixer.name("output_scaled"), z, factor(|m| m.ssm_out))?;
        self.op(&vb.name("mixers_sum"), Op::Binary(BinaryOp::Add), &[z, y])
    }

    /// The block name of a state-space mixer under its layer.
    fn ssm_prefix(&self) -> Result<&'static str> {
        self.arch.layout.ssm.ok_or_else(|| crate::ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: format!("{}: the family's layout names no state-space mixer", self.cfg.architecture),
        })
    }

    /// The MLP half of a parallel block and the sum `attn + mlp + h` (transformers' order), from
    /// the residual `h`, the attention's normed input `x` and its output `a`.
    fn parallel_mlp(
        &mut self,
        vb: &Vb,
        spec: &LayerSpec,
        (h, x, a): (ValueId, ValueId, ValueId),
        input: ParallelMlpInput,
        act: Activation,
    ) -> Result<ValueId> {
        let x = match input {
            ParallelMlpInput::AttentionInput => x,
            ParallelMlpInput::OwnNorm => {
                let norms = self.arch.layout.norms;
                self.optional_norm(vb, norms.own_parallel.map(|[_, mlp]| mlp).or(norms.pre_mlp), h)?
            }
        };
        let m = self.layer_mlp(vb, spec, (h, x), act)?;
        let am = self.op(&vb.name("parallel_sum"), Op::Binary(BinaryOp::Add), &[a, m])?;
        self.residual(&vb.name("parallel_residual"), h, am)
    }

    /// The layer's MLP over `x`, the normed residual `h`: the sparse one where its spec says
    /// so, else the dense one of its width (with experts beside it where it says so).
    fn layer_mlp(&mut self, vb: &Vb, spec: &LayerSpec, (h, x): (ValueId, ValueId), act: Activation) -> Result<ValueId> {
        let dense = vb.pp(self.arch.layout.mlp.prefix);
        match (self.arch.layout.moe, spec.mlp) {
            (Some(moe), LayerMlp::Sparse) => self.moe(vb, &moe, (x, None), act),
            (Some(moe), LayerMlp::DenseAndSparse) => {
                let d = self.mlp(&dense, spec.dense, x, act)?;
                self.experts_beside(vb, &moe, (h, d), act)
            }
            _ => self.mlp(&dense, spec.dense, x, act),
        }
    }

    /// The dense MLP's output `d` and the experts beside it over the residual `h`, combined as
    /// the layout's [`crate::layout::BesideDense`] says.
    fn experts_beside(
        &mut self,
        vb: &Vb,
        moe: &MoeLayout,
        (h, d): (ValueId, ValueId),
        act: Activation,
    ) -> Result<ValueId> {
        let hs = self.cfg.hidden_size;
        let beside = moe.beside.ok_or_else(|| crate::ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: format!("{}: the layout says not how experts beside a dense MLP combine", self.cfg.architecture),
        })?;
        let d = self.norm(&vb.pp(beside.dense_norm), hs, d)?;
        let ones = Tensor::float(self.opts.dtype, vec![hs], vec![1.0; hs])?;
        let ones = self.op(&vb.name("router_input.unit_weight"), Op::Constant(ones), &[])?;
        let eps = self.cfg.norm_eps as f32;
        let r = self.op(&vb.name("router_input.normed"), Op::RmsNorm { eps }, &[h, ones])?;
        let scale = self.weight(vb, beside.router_scale, &[hs])?;
        let r = self.op(&vb.name("router_input.scaled"), Op::Binary(BinaryOp::Mul), &[r, scale])?;
        let r = self.scale(&vb.name("router_input"), r, (hs as f64).powf(-0.5))?;
        let x = self.norm(&vb.pp(beside.pre_norm), hs, h)?;
        let y = self.moe(vb, moe, (x, Some(r)), act)?;
        let y = self.norm(&vb.pp(beside.experts_norm), hs, y)?;
        self.op(&vb.name("dense_and_experts"), Op::Binary(BinaryOp::Add), &[d, y])
    }

    /// `x` times the layout's per-channel scale `which` (0: the attention's, 1: the MLP's).
    fn layer_scale(&mut self, vb: &Vb, which: usize, x: ValueId) -> Result<ValueId> {
        let Some(names) = self.arch.layout.layer_scales else { return Ok(x) };
        // BEiT stores its scales only where `layer_scale_init_value` is positive
        if self.beit().is_some_and(|b| !b.layer_scale) {
            return Ok(x);
        }
        let w = self.weight(vb, names[which], &[self.cfg.hidden_size])?;
        self.op(&vb.name(format!("{}.scaled", names[which])), Op::Binary(BinaryOp::Mul), &[x, w])
    }

    fn residual(&mut self, name: &str, h: ValueId, x: ValueId) -> Result<ValueId> {
        let x = match self.cfg.residual_multiplier {
            Some(m) => self.scale(&format!("{name}.scaled"), x, m)?,
            None => x,
        };
        self.op(name, Op::Binary(BinaryOp::Add), &[h, x])
    }

    // ---- attention ----------------------------------------------------------------------------

    /// The q, k and v projections `[b, s, heads * head_dim]`.
    fn qkv(&mut self, vb: &Vb, a: &AttentionSpec, x: ValueId) -> Result<(ValueId, ValueId, ValueId)> {
        let (hs, bias) = (self.cfg.hidden_size, self.cfg.attention_bias);
        let (q_rows, kv_rows) = (a.heads * a.head_dim, a.kv_heads * a.head_dim);
        let stored_q_rows = if self.arch.layout.attention.output_gate { 2 * q_rows } else { q_rows };
        let parts = [
            Part { name: "q_proj", rows: q_rows },
            Part { name: "k_proj", rows: kv_rows },
            Part { name: "v_proj", rows: kv_rows },
        ];
        let (mut q_order, k_order) = (self.rotary_order(a, a.heads), self.rotary_order(a, a.kv_heads));
        if self.arch.layout.attention.output_gate {
            // each head's query rows of its stored `[query | gate]` pair
            let query = gated_rows(a.heads, a.head_dim, 0);
            q_order = Some(match q_order {
                Some(order) => order.iter().map(|&r| query[r]).collect(),
                None => query,
            });
        }
        let outs = match self.arch.layout.attention.qkv {
            Projections::Separate { q, k, v } => {
                let q = self.reordered_linear(&vb.pp(q), [stored_q_rows, hs], bias, q_order.as_deref(), x)?;
                let key_bias = bias && !self.arch.layout.attention.unbiased_key;
                let k = self.reordered_linear(&vb.pp(k), [kv_rows, hs], key_bias, k_order.as_deref(), x)?;
                let v = match a.values_from_keys {
                    true => k,
                    false => self.linear(&vb.pp(v), kv_rows, hs, bias, x)?,
                };
                vec![q, k, v]
            }
            _ if a.values_from_keys => return Err(self.needs_separate("values from the key projection")),
            _ if q_order.is_some() => {
                return Err(crate::ModelError::Config {
                    path: "config.json".into(),
                    key: "architectures".into(),
                    msg: "interleaved rotary needs separate q/k/v projections".into(),
                })
            }
            Projections::Fused(name) => self.fused_linear(&vb.pp(name), vb, &parts, hs, bias, false, x)?,
            Projections::FusedConv1d(name) => self.fused_linear(&vb.pp(name), vb, &parts, hs, true, true, x)?,
            Projections::FusedPerKvGroup(name) => self.grouped_qkv(&vb.pp(name), a, bias, x)?,
        };
        Ok((outs[0], outs[1], outs[2]))
    }

    /// The order of the q or k projection's rows (`heads` heads of layer `a`) when the family's
    /// rotary pairs neighbouring channels (see [`pairs_as_halves`]); `None`: as stored.
    fn rotary_order(&self, a: &AttentionSpec, heads: usize) -> Option<Vec<usize>> {
        let rope = a.rope.as_ref().filter(|_| self.arch.layout.interleaved_rotary)?;
        Some(pairs_as_halves(heads, a.head_dim, rope.dim))
    }

    /// The q, k and v of one linear whose rows are grouped per KV head (`[kv, q_per_kv + 2, d]`):
    /// its output reshaped to the groups, each part sliced out and flattened back to
    /// `[b, s, heads * d]` (a query head's index is its group's times `q_per_kv` plus its place).
    fn grouped_qkv(&mut self, vb: &Vb, a: &AttentionSpec, bias: bool, x: ValueId) -> Result<Vec<ValueId>> {
        let (d, kv) = (a.head_dim, a.kv_heads);
        let g = a.heads / kv;
        let y = self.linear(vb, kv * (g + 2) * d, self.cfg.hidden_size, bias, x)?;
        let s = self.g.info(x).shape.clone();
        let groups = vec![s[0].clone(), s[1].clone(), Dim::from(kv), Dim::from((g + 2) * d)];
        let y = self.op(&vb.name("groups"), Op::Reshape { shape: groups }, &[y])?;
        let mut out = vec![];
        for (part, from, to) in [("q", 0, g), ("k", g, g + 1), ("v", g + 1, g + 2)] {
            let rows = Op::Slice { axis: 3, start: Dim::from(from * d), end: Dim::from(to * d) };
            let p = self.op(&vb.name(format!("{part}_rows")), rows, &[y])?;
            let flat = vec![s[0].clone(), s[1].clone(), Dim::from(kv * (to - from) * d)];
            out.push(self.op(&vb.name(part), Op::Reshape { shape: flat }, &[p])?);
        }
        Ok(out)
    }

    /// `[b, s, heads*d]` -> `[b, heads, s, d]`, with the per-head norm in between where the
    /// family has one.
    pub(crate) fn split_heads(
        &mut self,
        vb: &Vb,
        x: ValueId,
        [heads, d]: [usize; 2],
        norm: Option<HeadNorm>,
    ) -> Result<ValueId> {
        let s = self.g.info(x).shape.clone();
        let shape = vec![s[0].clone(), s[1].clone(), Dim::from(heads), Dim::from(d)];
        let mut x = self.op(&vb.name("split_heads"), Op::Reshape { shape }, &[x])?;
        x = match norm {
            Some(HeadNorm::Shared(norm)) => self.norm(&norm, d, x)?,
            Some(HeadNorm::Rows { vb, stacked, order }) => self.head_rows_norm(&vb, [heads, d], (stacked, order), x)?,
            Some(HeadNorm::Unit) => self.unit_norm(&vb.name("unit_norm"), x, d)?,
            None => x,
        };
        self.op(&vb.name("heads_first"), Op::Transpose { perm: vec![0, 2, 1, 3] }, &[x])
    }

    /// An RMS norm without weight over the last axis (`d` wide) of `x`, with the config's epsilon.
    pub(crate) fn unit_norm(&mut self, name: &str, x: ValueId, d: usize) -> Result<ValueId> {
        let ones = Tensor::float(self.opts.dtype, vec![d], vec![1.0; d])?;
        let ones = self.op(&format!("{name}_weight"), Op::Constant(ones), &[])?;
        self.op(name, Op::RmsNorm { eps: self.cfg.norm_eps as f32 }, &[x, ones])
    }

    /// A LayerNorm without bias over the last axis of `x` `[b, s, heads, d]` whose weight has one
    /// row per head (stored `[heads, d]`, or `stacked` from one norm per head; its columns read
    /// in `order` when given): normalised with unit weight, then scaled by the rows.
    fn head_rows_norm(
        &mut self,
        vb: &Vb,
        [heads, d]: [usize; 2],
        (stacked, order): (bool, Option<Vec<usize>>),
        x: ValueId,
    ) -> Result<ValueId> {
        let ones = Tensor::f32(vec![d], vec![1.0; d])?.cast(self.opts.dtype);
        let ones = self.op(&vb.name("unit"), Op::Constant(ones), &[])?;
        let eps = self.cfg.norm_eps as f32;
        let normed = self.op(&vb.name("normed"), Op::LayerNorm { eps }, &[x, ones])?;
        let name = vb.name("weight");
        let (w, dtype) = match stacked {
            false => self.stored(&name, &[heads, d])?,
            true => {
                let rows = (0..heads).map(|h| self.stored(&vb.pp("norms").pp(h).name("weight"), &[d]));
                let rows: Vec<(WeightExpr, DType)> = rows.collect::<Result<_>>()?;
                let dtype = rows[0].1;
                (WeightExpr::Stack(rows.into_iter().map(|(e, _)| e).collect()), dtype)
            }
        };
        let w = match order {
            Some(rows) => {
                let by_column = WeightExpr::Rows { expr: Box::new(WeightExpr::Transpose(Box::new(w))), rows };
                WeightExpr::Transpose(Box::new(by_column))
            }
            None => w,
        };
        let w = self.declare(&name, w, dtype, &[heads, d]);
        self.op(vb.path(), Op::Binary(BinaryOp::Mul), &[normed, w])
    }

    /// `q [b, h, s, d]` times its position's factor `1 + beta * ln(1 + floor((p + offset) /
    /// divisor))` ([`QueryScale`]), the positions `[b or 1, s]` (int64, so the floor is an
    /// exact integer division).
    pub(crate) fn scale_queries_by_position(
        &mut self,
        name: &str,
        q: ValueId,
        positions: ValueId,
        qs: QueryScale,
    ) -> Result<ValueId> {
        let offset = self.id_scalar(&format!("{name}.offset"), qs.offset as i64)?;
        let divisor = self.id_scalar(&format!("{name}.divisor"), qs.divisor as i64)?;
        let p = self.op(&format!("{name}.shifted"), Op::Binary(BinaryOp::Add), &[positions, offset])?;
        let p = self.op(&format!("{name}.blocks"), Op::Binary(BinaryOp::Div), &[p, divisor])?;
        let p = self.op(&format!("{name}.blocks_f32"), Op::Cast(DType::F32), &[p])?;
        let f32_scalar = |v: f64| Op::Constant(Tensor::scalar_float(DType::F32, v as f32));
        let one = self.op(&format!("{name}.one"), f32_scalar(1.0), &[])?;
        let beta = self.op(&format!("{name}.beta"), f32_scalar(qs.beta), &[])?;
        let f = self.op(&format!("{name}.log_arg"), Op::Binary(BinaryOp::Add), &[p, one])?;
        let f = self.op(&format!("{name}.log"), Op::Unary(UnaryOp::Log), &[f])?;
        let f = self.op(&format!("{name}.times_beta"), Op::Binary(BinaryOp::Mul), &[f, beta])?;
        let f = self.op(&format!("{name}.factor_f32"), Op::Binary(BinaryOp::Add), &[f, one])?;
        let f = self.op(&format!("{name}.factor"), Op::Cast(self.opts.dtype), &[f])?;
        let ps = self.g.info(positions).shape.clone();
        let shape = vec![ps[0].clone(), Dim::konst(1), ps[1].clone(), Dim::konst(1)];
        let f = self.op(&format!("{name}.per_query"), Op::Reshape { shape }, &[f])?;
        self.op(name, Op::Binary(BinaryOp::Mul), &[q, f])
    }

    /// The rotary embedding over the first `dim` of the `d` channels of `x` `[b, h, s, d]` (all
    /// of them unless the rotary is partial).
    pub(crate) fn rotate(
        &mut self,
        name: &str,
        x: ValueId,
        (cos, sin): (ValueId, ValueId),
        [dim, d]: [usize; 2],
    ) -> Result<ValueId> {
        if dim == d {
            return self.op(name, Op::ApplyRotary, &[x, cos, sin]);
        }
        let (zero, rot, full) = (Dim::konst(0), Dim::from(dim), Dim::from(d));
        let r = self.op(&format!("{name}.rotated"), Op::Slice { axis: 3, start: zero, end: rot.clone() }, &[x])?;
        let pass = self.op(&format!("{name}.passed"), Op::Slice { axis: 3, start: rot, end: full }, &[x])?;
        let r = self.op(&format!("{name}.apply"), Op::ApplyRotary, &[r, cos, sin])?;
        self.op(name, Op::Concat { axis: 3 }, &[r, pass])
    }

    fn attention(&mut self, vb: &Vb, layer: usize, a: &AttentionSpec, x: ValueId, s: &LayerInputs) -> Result<ValueId> {
        let layout = self.arch.layout.attention;
        let (hd, nh) = (a.head_dim, a.heads);
        let qk_norm = if self.cfg.qk_norm { layout.qk_norm } else { QkNorm::None };
        let [q_norm, k_norm] = self.head_norms(vb, a, qk_norm);
        let (mut q, k, v) = match a.kv_source {
            // the keys and values of an earlier layer: only the queries are this layer's
            Some(source) => {
                let Projections::Separate { q, .. } = layout.qkv else {
                    return Err(self.needs_separate("keys and values shared between layers"));
                };
                let (shape, order) = ([nh * hd, self.cfg.hidden_size], self.rotary_order(a, nh));
                let q = self.reordered_linear(&vb.pp(q), shape, self.cfg.attention_bias, order.as_deref(), x)?;
                let (k, v) = self.layer_kv.get(&source).copied().expect("a source layer is built first");
                (q, None, Some((k, v)))
            }
            None => {
                let (q, k, v) = self.qkv(vb, a, x)?;
                (q, Some((k, v)), None)
            }
        };
        if let QkNorm::Whole([qn, _]) = qk_norm {
            q = self.norm(&vb.pp(qn), nh * hd, q)?;
        }
        let k = k.map(|kv| self.project_keys(vb, a, kv, qk_norm)).transpose()?;
        let mut q = self.split_heads(&vb.pp("q"), q, [nh, hd], q_norm)?;
        let k = k.map(|kv| self.split_keys_values(vb, a, kv, k_norm)).transpose()?;
        let rope = a.rope.as_ref().map(|r| (r.dim, s.tables(r)));
        if let Some((dim, tables)) = rope {
            q = self.rotate(&vb.name("q_rotary"), q, tables, [dim, hd])?;
        }
        let k = match (k, rope) {
            (Some((k, v)), Some((dim, tables))) => Some((self.rotate(&vb.name("k_rotary"), k, tables, [dim, hd])?, v)),
            (k, _) => k,
        };
        // Llama 4's L2 norm comes after the rotary, whose cos and sin a rope's attention factor
        // (yarn's, longrope's) scales: the norm undoes that factor
        let l2 = qk_norm == QkNorm::UnitOnRotary && rope.is_some();
        if l2 {
            q = self.unit_norm(&vb.name("q_l2_norm"), q, hd)?;
        }
        let k = match k {
            Some((k, v)) if l2 => Some((self.unit_norm(&vb.name("k_l2_norm"), k, hd)?, v)),
            k => k,
        };
        if let Some(qs) = a.query_scale {
            q = self.scale_queries_by_position(&vb.name("q_temperature"), q, s.positions, qs)?;
        }
        let (k, v) = match (k, v) {
            (Some((k, v)), _) => {
                let (k, v) = self.cached_kv(vb.path(), layer, k, v, s.positions)?;
                self.layer_kv.insert(layer, (k, v));
                (k, v)
            }
            (None, Some(kv)) => {
                self.record_no_cache(layer);
                kv
            }
            (None, None) => unreachable!("a layer has its own keys or another's"),
        };
        self.attend(vb, a, (q, k, v), x, s)
    }

    /// The per-head norms of the queries and keys the layout has (`Whole` norms are applied
    /// before the heads are split).
    fn head_norms(&self, vb: &Vb, a: &AttentionSpec, qk_norm: QkNorm) -> [Option<HeadNorm>; 2] {
        match qk_norm {
            QkNorm::PerHead([qn, kn]) => [Some(HeadNorm::Shared(vb.pp(qn))), Some(HeadNorm::Shared(vb.pp(kn)))],
            QkNorm::PerHeadRows([qn, kn]) | QkNorm::PerHeadNorms([qn, kn]) => {
                // the channels of each head are reordered as the projections' rows are
                let order = self.rotary_order(a, 1);
                let stacked = matches!(qk_norm, QkNorm::PerHeadNorms(_));
                let rows = |n: &str| HeadNorm::Rows { vb: vb.pp(n), stacked, order: order.clone() };
                [Some(rows(qn)), Some(rows(kn))]
            }
            // Llama 4's comes after the rotary (in `attention`)
            QkNorm::None | QkNorm::Whole(_) | QkNorm::UnitOnRotary => [None, None],
        }
    }

    /// The key projection `[b, s, kv_heads * d]` normed as a whole and scaled where the layout
    /// and config say (before the heads are split).
    fn project_keys(
        &mut self,
        vb: &Vb,
        a: &AttentionSpec,
        (mut k, v): (ValueId, ValueId),
        qk_norm: QkNorm,
    ) -> Result<(ValueId, ValueId)> {
        if let QkNorm::Whole([_, kn]) = qk_norm {
            k = self.norm(&vb.pp(kn), a.kv_heads * a.head_dim, k)?;
        }
        if let Some(mup) = &self.cfg.mup {
            k = self.scale(&vb.name("k_scaled"), k, mup.key)?;
        }
        Ok((k, v))
    }

    /// The keys and values `[b, kv_heads, s, d]`, each head normed where the layout says.
    fn split_keys_values(
        &mut self,
        vb: &Vb,
        a: &AttentionSpec,
        (k, v): (ValueId, ValueId),
        k_norm: Option<HeadNorm>,
    ) -> Result<(ValueId, ValueId)> {
        let shape = [a.kv_heads, a.head_dim];
        let k = self.split_heads(&vb.pp("k"), k, shape, k_norm)?;
        let v_norm = self.arch.layout.attention.v_norm.then_some(HeadNorm::Unit);
        Ok((k, self.split_heads(&vb.pp("v"), v, shape, v_norm)?))
    }

    /// The attention op over `q`, `k`, `v` with the layer's mask, window, soft-cap and sinks,
    /// then the heads merged through the output projection (and gate).
    fn attend(
        &mut self,
        vb: &Vb,
        a: &AttentionSpec,
        (q, k, v): (ValueId, ValueId, ValueId),
        x: ValueId,
        s: &LayerInputs,
    ) -> Result<ValueId> {
        let (layout, nh) = (self.arch.layout.attention, a.heads);
        // an encoder's windows are in its sliding mask; a decoder's are the op's (causal)
        let (mask, window) = match (a.span, s.sliding_mask) {
            (Span::Sliding(_), Some(m)) => (m, None),
            (Span::Sliding(w), None) => (s.mask_of(a), Some(w)),
            (Span::Chunked(_), _) => (s.chunked_mask.expect("made when a layer is chunked"), None),
            (Span::Full, _) => (s.mask_of(a), None),
        };
        let mask = match s.disentangled {
            Some(d) => self.disentangled_mask(vb, a, (q, k), mask, d)?,
            None => mask,
        };
        let mask = match s.gated_bias {
            Some(bias) => self.gated_bias_mask(vb, (a.heads, a.head_dim), x, (mask, bias))?,
            None => mask,
        };
        // BEiT's layer's own relative position bias, beside a shared one
        let mask = match (s.relative_index, self.arch.layout.encoder.and_then(|e| e.relative_tables)) {
            (Some(r), Some(tables)) => {
                let bias = self.relative_table_bias(vb, tables.per_layer, &r)?;
                match self.g.info(mask).dtype.is_float() {
                    true => self.op(&vb.name("relative_bias.with_shared"), Op::Binary(BinaryOp::Add), &[mask, bias])?,
                    false => bias,
                }
            }
            _ => mask,
        };
        let softcap = self.cfg.attn_softcap.map(|c| c as f32);
        let sinks = layout.sinks.map(|name| self.weight(vb, name, &[nh])).transpose()?;
        let op = Op::Attention { scale: a.scale as f32, softcap, sliding_window: window, sinks: sinks.is_some() };
        let mut ins = vec![q, k, v, mask];
        if window.is_some() {
            ins.extend([s.positions, s.key_positions]);
        }
        ins.extend(sinks);
        let o = self.op(&vb.name("attention"), op, &ins)?;
        match layout.output_gate {
            true => {
                let gate = self.output_gate(vb, a, x)?;
                self.merge_heads_out_gated(vb, a, o, Some(gate))
            }
            false => self.merge_heads_out(vb, a, o),
        }
    }

    /// DeBERTa-v2's scores beyond the content's as the layer's additive mask `[b, heads, q, k]`:
    /// `c2p[i, j] = q_i · Kr[bucket(i - j)]` and `p2c[i, j] = k_j · Qr[-bucket(j - i)]` (both
    /// scaled as the content scores are), `Kr` / `Qr` the relative embeddings through the
    /// layer's position (or, shared, its own) key and query projections; where `mask` allows,
    /// else the dtype's lowest value. Each term is one matmul against all `2 * span` relative
    /// embeddings and one gather of its `[q, k]` entries ([`DisentangledInputs`]).
    fn disentangled_mask(
        &mut self,
        vb: &Vb,
        a: &AttentionSpec,
        (q, k): (ValueId, ValueId),
        mask: ValueId,
        d: DisentangledInputs,
    ) -> Result<ValueId> {
        let cfg = self.cfg;
        let spec = cfg.encoder.as_ref().and_then(|e| e.disentangled).expect("the inputs come from the config");
        let names = self.arch.layout.encoder.and_then(|e| e.disentangled).expect("the layout has its names");
        let Projections::Separate { q: q_proj, k: k_proj, .. } = self.arch.layout.attention.qkv else {
            return Err(self.needs_separate("disentangled attention"));
        };
        let (heads, hd, hs, rows) = (a.heads, a.head_dim, cfg.hidden_size, 2 * spec.span);
        let mut terms = vec![];
        for (on, content, own, shared, index, what) in
            [(spec.c2p, q, names.pos_key, k_proj, d.c2p, "c2p"), (spec.p2c, k, names.pos_query, q_proj, d.p2c, "p2c")]
        {
            if !on {
                continue;
            }
            let proj = vb.pp(if spec.share_att_key { shared } else { own });
            let name = |part: &str| vb.name(format!("{what}.{part}"));
            let r = self.linear(&proj, heads * hd, hs, true, d.rel)?;
            let shape = vec![Dim::konst(1), rows.into(), heads.into(), hd.into()];
            let r = self.op(&name("heads"), Op::Reshape { shape }, &[r])?;
            let r = self.op(&name("keys_last"), Op::Transpose { perm: vec![0, 2, 3, 1] }, &[r])?;
            let scores = self.op(&name("scores"), Op::MatMul, &[content, r])?;
            let shape = self.g.info(scores).shape.clone();
            let flat = vec![shape[0].clone(), shape[1].clone(), hfexport_core::dim::product(&shape[2..])];
            let scores = self.op(&name("flat"), Op::Reshape { shape: flat }, &[scores])?;
            let term = self.op(&name("gather"), Op::Gather { axis: 2 }, &[scores, index])?;
            terms.push(self.scale(&name("scaled"), term, a.scale)?);
        }
        let Some(&first) = terms.first() else { return Ok(mask) };
        let bias = match terms.get(1) {
            Some(&second) => self.op(&vb.name("position_scores"), Op::Binary(BinaryOp::Add), &[first, second])?,
            None => first,
        };
        self.masked_bias(&vb.name("position_mask"), mask, bias)
    }

    /// The error of a layout whose fused projections cannot give what `what` needs.
    fn needs_separate(&self, what: &str) -> crate::ModelError {
        crate::ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: format!("{}: {what} needs separate q/k/v projections", self.cfg.architecture),
        }
    }

    /// `sigmoid` of the gate rows of the query projection (`[query | gate]` per head) over `x`:
    /// `[b, s, heads * head_dim]`.
    fn output_gate(&mut self, vb: &Vb, a: &AttentionSpec, x: ValueId) -> Result<ValueId> {
        let Projections::Separate { q, .. } = self.arch.layout.attention.qkv else {
            return Err(crate::ModelError::Config {
                path: "config.json".into(),
                key: "architectures".into(),
                msg: "an attention output gate needs a separate query projection".into(),
            });
        };
        let (q_rows, hs) = (a.heads * a.head_dim, self.cfg.hidden_size);
        let rows = gated_rows(a.heads, a.head_dim, 1);
        let stored = vb.pp(q);
        let gate = self.selected_linear(
            (&stored, &stored.pp("gate")),
            [2 * q_rows, hs],
            self.cfg.attention_bias,
            Some(&rows),
            x,
        )?;
        self.op(&vb.name("output_gate"), Op::Unary(UnaryOp::Sigmoid), &[gate])
    }

    /// `[b, heads, s, d]` -> `[b, s, heads * d]` through the output projection.
    fn merge_heads_out(&mut self, vb: &Vb, a: &AttentionSpec, o: ValueId) -> Result<ValueId> {
        self.merge_heads_out_gated(vb, a, o, None)
    }

    /// [`Self::merge_heads_out`], the merged heads times `gate` `[b, s, heads * head_dim]`
    /// first when there is one.
    fn merge_heads_out_gated(
        &mut self,
        vb: &Vb,
        a: &AttentionSpec,
        o: ValueId,
        gate: Option<ValueId>,
    ) -> Result<ValueId> {
        let (cfg, layout) = (self.cfg, self.arch.layout.attention);
        let (hd, nh) = (a.head_dim, a.heads);
        let o = self.op(&vb.name("heads_last"), Op::Transpose { perm: vec![0, 2, 1, 3] }, &[o])?;
        let sh = self.g.info(o).shape.clone();
        let merged = vec![sh[0].clone(), sh[1].clone(), Dim::from(nh * hd)];
        let mut o = self.op(&vb.name("merge_heads"), Op::Reshape { shape: merged }, &[o])?;
        if let Some(gate) = gate {
            o = self.op(&vb.name("gated"), Op::Binary(BinaryOp::Mul), &[o, gate])?;
        }
        let out = vb.pp(layout.out);
        match layout.qkv {
            Projections::FusedConv1d(_) => self.conv1d(&out, cfg.hidden_size, nh * hd, o),
            Projections::Separate { .. } | Projections::Fused(_) | Projections::FusedPerKvGroup(_) => {
                self.linear(&out, cfg.hidden_size, nh * hd, cfg.o_bias, o)
            }
        }
    }

    /// Attention of `x` over the encoder's keys and values `[b, heads, enc_len, head_dim]`
    /// (the encoder positions `mask` allows, every one without), with the self-attention's
    /// projection names.
    fn cross_attention(
        &mut self,
        vb: &Vb,
        a: &AttentionSpec,
        x: ValueId,
        (k, v): (ValueId, ValueId),
        mask: Option<ValueId>,
    ) -> Result<ValueId> {
        let cfg = self.cfg;
        let (hd, nh) = (a.head_dim, a.heads);
        let [q, _, _] = self.separate_qkv()?;
        let q = self.linear(&vb.pp(q), nh * hd, cfg.hidden_size, cfg.attention_bias, x)?;
        let q = self.split_heads(&vb.pp("q"), q, [nh, hd], None)?;
        let mask = match mask {
            Some(m) => m,
            None => self.op(&vb.name("mask"), Op::Constant(Tensor::bool(vec![1, 1, 1, 1], vec![true])?), &[])?,
        };
        let op = Op::Attention { scale: a.scale as f32, softcap: None, sliding_window: None, sinks: false };
        let o = self.op(&vb.name("attention"), op, &[q, k, v, mask])?;
        self.merge_heads_out(vb, a, o)
    }

    /// The q, k and v projection names of a cross-attention (laid out as the self-attention).
    fn separate_qkv(&self) -> Result<[&'static str; 3]> {
        match self.arch.layout.attention.qkv {
            Projections::Separate { q, k, v } => Ok([q, k, v]),
            _ => Err(crate::ModelError::Config {
                path: "config.json".into(),
                key: "architectures".into(),
                msg: "cross-attention needs separate q/k/v projections".into(),
            }),
        }
    }

    /// The keys and values `[b, heads, enc_len, head_dim]` of the encoder `states` for the
    /// cross-attention at `vb` (of a layer shaped `a`).
    pub(crate) fn cross_kv(&mut self, vb: &Vb, a: &AttentionSpec, states: ValueId) -> Result<(ValueId, ValueId)> {
        let (cfg, layout) = (self.cfg, self.arch.layout.attention);
        let (hd, nh, hs) = (a.head_dim, a.heads, cfg.hidden_size);
        let [_, k, v] = self.separate_qkv()?;
        let key_bias = cfg.attention_bias && !layout.unbiased_key;
        let keys = self.linear(&vb.pp(k), nh * hd, hs, key_bias, states)?;
        let values = self.linear(&vb.pp(v), nh * hd, hs, cfg.attention_bias, states)?;
        let keys = self.split_heads(&vb.pp("k"), keys, [nh, hd], None)?;
        Ok((keys, self.split_heads(&vb.pp("v"), values, [nh, hd], None)?))
    }

    // ---- MLP ----------------------------------------------------------------------------------

    /// The dense MLP, `is` wide.
    fn mlp(&mut self, vb: &Vb, dense: DenseMlp, x: ValueId, act: Activation) -> Result<ValueId> {
        let (bias, is) = (self.cfg.mlp_bias, dense.width);
        match (&self.cfg.mup, self.arch.layout.mlp.kind, dense.gate_cutoff) {
            (Some(mup), MlpKind::Gated { gate, up }, _) => {
                let names = [gate, up, self.arch.layout.mlp.down];
                self.scaled_gated_mlp(vb, names, (is, bias), mup.mlp, x, act)
            }
            (None, MlpKind::Gated { gate, up }, Some(cutoff)) => {
                let names = [gate, up, self.arch.layout.mlp.down];
                self.sparse_gated_mlp(vb, names, (is, bias), cutoff, x, act)
            }
            _ => self.mlp_of(vb, &self.arch.layout.mlp, is, bias, x, act),
        }
    }

    /// Gemma 3n's MLP on its sparse layers: `down(act(relu(g - mean(g) - std(g) * cutoff)) *
    /// up(x))`, `g = gate(x)`, the mean and (biased) deviation over `g`'s channels
    /// (transformers' `_gaussian_topk`: keeping about the top `Φ(cutoff)` of a normal gate).
    fn sparse_gated_mlp(
        &mut self,
        vb: &Vb,
        [gate, up, down]: [&str; 3],
        (is, bias): (usize, bool),
        cutoff: f64,
        x: ValueId,
        act: Activation,
    ) -> Result<ValueId> {
        let hs = self.cfg.hidden_size;
        let g = self.linear(&vb.pp(gate), is, hs, bias, x)?;
        let name = |what: &str| vb.pp(gate).name(what);
        let mean = Op::Reduce { kind: ReduceKind::Mean, axes: vec![self.g.info(g).shape.len() - 1], keep_dims: true };
        let m = self.op(&name("mean"), mean.clone(), &[g])?;
        let centred = self.op(&name("centred"), Op::Binary(BinaryOp::Sub), &[g, m])?;
        let sq = self.op(&name("centred.squared"), Op::Binary(BinaryOp::Mul), &[centred, centred])?;
        let var = self.op(&name("variance"), mean, &[sq])?;
        let std = self.op(&name("std"), Op::Unary(UnaryOp::Sqrt), &[var])?;
        // transformers' order of rounding: `g - (mean + std * q)` (q already torch's float32)
        let margin = self.scale(&name("margin"), std, cutoff)?;
        let cut = self.op(&name("cutoff"), Op::Binary(BinaryOp::Add), &[m, margin])?;
        let shifted = self.op(&name("shifted"), Op::Binary(BinaryOp::Sub), &[g, cut])?;
        let g = self.op(&name("sparse"), Op::Activate(Activation::Relu), &[shifted])?;
        let g = self.op(&name("act"), Op::Activate(act), &[g])?;
        let u = self.linear(&vb.pp(up), is, hs, bias, x)?;
        let gu = self.op(&vb.name("gated"), Op::Binary(BinaryOp::Mul), &[g, u])?;
        self.linear(&vb.pp(down), hs, is, bias, gu)
    }

    /// Falcon-H1's MLP: `down(act(gate(x) * m0) * up(x)) * m1`, the µP `mlp_multipliers` `[m0,
    /// m1]` around linears named `[gate, up, down]` under `vb`.
    fn scaled_gated_mlp(
        &mut self,
        vb: &Vb,
        [gate, up, down]: [&str; 3],
        (is, bias): (usize, bool),
        [m0, m1]: [f64; 2],
        x: ValueId,
        act: Activation,
    ) -> Result<ValueId> {
        let hs = self.cfg.hidden_size;
        let g = self.linear(&vb.pp(gate), is, hs, bias, x)?;
        let g = self.scale(&vb.pp(gate).name("scaled"), g, m0)?;
        let g = self.op(&vb.pp(gate).name("act"), Op::Activate(act), &[g])?;
        let u = self.linear(&vb.pp(up), is, hs, bias, x)?;
        let h = self.op(&vb.name("gated"), Op::Binary(BinaryOp::Mul), &[g, u])?;
        let y = self.linear(&vb.pp(down), hs, is, bias, h)?;
        self.scale(&vb.pp(down).name("scaled"), y, m1)
    }

    /// An MLP of `layout`'s kind and names under `vb`, `is` wide.
    fn mlp_of(
        &mut self,
        vb: &Vb,
        layout: &MlpLayout,
        is: usize,
        bias: bool,
        x: ValueId,
        act: Activation,
    ) -> Result<ValueId> {
        let hs = self.cfg.hidden_size;
        let down = vb.pp(layout.down);
        match layout.kind {
            MlpKind::Gated { gate, up } => self.gated_mlp(vb, [gate, up, layout.down], is, bias, x, act),
            MlpKind::GatedFused(fused) => self.fused_gated_mlp(vb, fused, &down, (is, bias), x, act),
            MlpKind::SwiGluIf { fused, down, .. } if self.cfg.gated_mlp => {
                self.fused_gated_mlp(vb, fused, &vb.pp(down), (is, bias), x, act)
            }
            MlpKind::SwiGluIf { plain, .. } => self.plain_mlp(vb, plain, &down, (is, bias), x, act),
            MlpKind::PlainConv1d(fc) => {
                let h = self.conv1d(&vb.pp(fc), is, hs, x)?;
                let h = self.op(&vb.name("act"), Op::Activate(act), &[h])?;
                self.conv1d(&down, hs, is, h)
            }
            MlpKind::Plain(fc) => self.plain_mlp(vb, fc, &down, (is, bias), x, act),
            MlpKind::GatedIf { gate, up, .. } if self.cfg.gated_mlp => {
                self.gated_mlp(vb, [gate, up, layout.down], is, bias, x, act)
            }
            MlpKind::GatedIf { plain, .. } => self.plain_mlp(vb, plain, &down, (is, bias), x, act),
        }
    }

    /// `down(act(a) * b)` over the halves `[a; b]` of one `[gate; up]` linear `fused` (Phi-3's
    /// `gate_up_proj`, DINOv2's `weights_in`), as the gated MLP op's own gate and up weights.
    fn fused_gated_mlp(
        &mut self,
        vb: &Vb,
        fused: &str,
        down: &Vb,
        (is, bias): (usize, bool),
        x: ValueId,
        act: Activation,
    ) -> Result<ValueId> {
        let hs = self.cfg.hidden_size;
        let (gate_up, gate, up) = (vb.pp(fused), vb.pp("gate_proj"), vb.pp("up_proj"));
        let (w, dtype) = self.stored(&gate_up.name("weight"), &[2 * is, hs])?;
        let mut ins = vec![
            x,
            self.declare(&gate.name("weight"), w.clone().slice(0, 0, is), dtype, &[is, hs]),
            self.declare(&up.name("weight"), w.slice(0, is, 2 * is), dtype, &[is, hs]),
            self.weight(down, "weight", &[hs, is])?,
        ];
        if bias {
            let (b, dtype) = self.stored(&gate_up.name("bias"), &[2 * is])?;
            ins.push(self.declare(&gate.name("bias"), b.clone().slice(0, 0, is), dtype, &[is]));
            ins.push(self.declare(&up.name("bias"), b.slice(0, is, 2 * is), dtype, &[is]));
            ins.push(self.weight(down, "bias", &[hs])?);
        }
        self.op(vb.path(), Op::GatedMlp { act }, &ins)
    }

    /// `down(act(fc(x)))` with linears `fc` (under `vb`) and `down`, `is` wide.
    fn plain_mlp(
        &mut self,
        vb: &Vb,
        fc: &str,
        down: &Vb,
        (is, bias): (usize, bool),
        x: ValueId,
        act: Activation,
    ) -> Result<ValueId> {
        let hs = self.cfg.hidden_size;
        let h = self.linear(&vb.pp(fc), is, hs, bias, x)?;
        let h = self.op(&vb.pp(fc).name("act"), Op::Activate(act), &[h])?;
        self.linear(down, hs, is, bias, h)
    }

    /// `down(act(gate(x)) * up(x))` with separate linears named `[gate, up, down]` under `vb`.
    fn gated_mlp(
        &mut self,
        vb: &Vb,
        [gate, up, down]: [&str; 3],
        is: usize,
        bias: bool,
        x: ValueId,
        act: Activation,
    ) -> Result<ValueId> {
        let hs = self.cfg.hidden_size;
        let (gate, up, down) = (vb.pp(gate), vb.pp(up), vb.pp(down));
        let mut ins = vec![
            x,
            self.weight(&gate, "weight", &[is, hs])?,
            self.weight(&up, "weight", &[is, hs])?,
            self.weight(&down, "weight", &[hs, is])?,
        ];
        if bias {
            ins.push(self.weight(&gate, "bias", &[is])?);
            ins.push(self.weight(&up, "bias", &[is])?);
            ins.push(self.weight(&down, "bias", &[hs])?);
        }
        self.op(vb.path(), Op::GatedMlp { act }, &ins)
    }

    // ---- mixture of experts -------------------------------------------------------------------

    /// The sparse MLP of layer `layer` (its `Vb`): router, stacked experts and, where the family
    /// has one, the shared expert scaled by its sigmoid gate.
    fn moe(
        &mut self,
        layer: &Vb,
        layout: &MoeLayout,
        (x, router_x): (ValueId, Option<ValueId>),
        act: Activation,
    ) -> Result<ValueId> {
        let (cfg, hs) = (self.cfg, self.cfg.hidden_size);
        let m = cfg.moe.as_ref().expect("sparse layers come from a MoE config");
        let (e, is) = (m.num_experts, m.intermediate_size);
        let vb = layer.pp(layout.prefix);
        let router = vb.pp(self.first_stored(&vb, layout.router, "weight"));
        let router_w = self.weight(&router, "weight", &[e, hs])?;
        let experts = vb.pp(layout.experts);
        let stacked = if self.weights.has(&experts.pp(0).pp(layout.gate).name("weight")) {
            let mut stack = |leaf: &str, shape: [usize; 2]| self.stacked(&experts, leaf, e, shape);
            Stacked {
                weights: [stack(layout.gate, [is, hs])?, stack(layout.up, [is, hs])?, stack(layout.down, [hs, is])?],
                biases: None,
            }
        } else {
            let fused = layer.pp(layout.fused_prefix);
            let stored =
                |name: &str| ["", "_blocks"].iter().any(|s| self.weights.has(&fused.name(format!("{name}{s}"))));
            let names = *layout.fused.iter().find(|[gate_up, _]| stored(gate_up)).unwrap_or(&layout.fused[0]);
            match layout.form {
                StackedForm::GateRowsFirst => {
                    Stacked { weights: self.fused_experts(&fused, names, e, is)?, biases: None }
                }
                StackedForm::TransposedInterleaved => self.interleaved_experts(&fused, names, e, is)?,
                StackedForm::TransposedGateFirst => {
                    Stacked { weights: self.transposed_experts(&fused, names, e, is)?, biases: None }
                }
            }
        };
        let mut ins = vec![x, router_w];
        ins.extend(stacked.weights);
        if m.biased {
            let [gate, up, down] = stacked.biases.ok_or_else(|| self.unbiased_experts(&vb))?;
            ins.extend([self.weight(&router, "bias", &[e])?, gate, up, down]);
        }
        let glu = match m.clamped_swiglu {
            Some((alpha, limit)) => Glu::Clamped { alpha: alpha as f32, limit: limit as f32 },
            None => Glu::Gated(act),
        };
        // as the shapes are now; `Pass::ChooseMoeStrategies` sets it again for the shapes an
        // export runs (a decode component fixes `sequence` after building)
        let few_tokens = moe_few_tokens(&self.g.info(x).shape, m.top_k, &Dim::from(e));
        if m.routing.corrected() {
            let name = layout.correction.ok_or_else(|| self.uncorrected_router(&vb))?;
            ins.push(self.correction(&vb, name, e)?);
        }
        let op = Op::Moe {
            top_k: m.top_k,
            routing: m.routing,
            glu,
            biased: m.biased,
            few_tokens,
            weigh_input: m.weigh_input,
            own_router: router_x.is_some(),
        };
        if let (Some(r), Some(beside)) = (router_x, layout.beside) {
            ins.extend([r, self.weight(layer, beside.expert_scale, &[e])?]);
        }
        let y = self.op(&vb.name("experts"), op, &ins)?;
        let (Some(shared), Some(shared_is)) = (layout.shared, m.shared_expert_intermediate_size) else {
            return Ok(y);
        };
        if shared_is == 0 {
            // a shared MLP of width 0 adds its down projection's bias, where it has one
            if !cfg.mlp_bias {
                return Ok(y);
            }
            let b = self.weight(&layer.pp(shared.mlp.prefix).pp(shared.mlp.down), "bias", &[hs])?;
            return self.op(vb.path(), Op::Binary(BinaryOp::Add), &[y, b]);
        }
        let s = self.mlp_of(&layer.pp(shared.mlp.prefix), &shared.mlp, shared_is, cfg.mlp_bias, x, act)?;
        let s = match shared.gate {
            Some(gate) => {
                let g = self.linear(&layer.pp(gate), 1, hs, false, x)?;
                let g = self.op(&vb.name("shared_gate"), Op::Unary(UnaryOp::Sigmoid), &[g])?;
                self.op(&vb.name("shared_scaled"), Op::Binary(BinaryOp::Mul), &[g, s])?
            }
            None => s,
        };
        self.op(vb.path(), Op::Binary(BinaryOp::Add), &[y, s])
    }

    /// The routing correction `[experts]` at `block.name`, stored so or as `[1, experts]`
    /// (ERNIE 4.5's `moe_statics`, one row per expert group of which it has one).
    fn correction(&mut self, block: &Vb, name: &str, e: usize) -> Result<ValueId> {
        let full = block.name(name);
        if self.weights.info(&full).is_some_and(|i| i.shape == [1, e]) {
            let (stored, dtype) = self.stored(&full, &[1, e])?;
            let expr = WeightExpr::Item { expr: Box::new(stored), index: 0 };
            return Ok(self.declare(&full, expr, dtype, &[e]));
        }
        self.weight(block, name, &[e])
    }

    /// The error for a routing that reads a correction in a family whose router has none.
    fn uncorrected_router(&self, vb: &Vb) -> crate::ModelError {
        crate::ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: format!("the router under `{}` has no routing correction for this routing", vb.path()),
        }
    }

    /// The error for a biased MoE config over experts stored without biases.
    fn unbiased_experts(&self, vb: &Vb) -> crate::ModelError {
        crate::ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: format!("the experts under `{}` are stored per expert, without the biases this family has", vb.path()),
        }
    }

    /// `experts.<e>.<leaf>.weight` for every expert, stacked `[experts, out, in]`, each expert
    /// checked (present, shape) so a missing or odd one is an error naming its tensor, and
    /// cast on its own (the stack streams expert by expert).
    fn stacked(&mut self, experts: &Vb, leaf: &str, n: usize, shape: [usize; 2]) -> Result<ValueId> {
        let parts = (0..n).map(|i| self.stored(&experts.pp(i).pp(leaf).name("weight"), &shape));
        let parts = parts.collect::<Result<Vec<_>>>()?;
        Ok(self.declare_stack(&experts.pp(leaf).name("weight"), parts, &[n, shape[0], shape[1]]))
    }

    /// [`StackedForm::GateRowsFirst`]: `gate_up_proj [E, 2 * inter, hidden]` split into its
    /// halves, `down_proj [E, hidden, inter]` as stored.
    fn fused_experts(&mut self, vb: &Vb, [gate_up, down]: [&str; 2], e: usize, is: usize) -> Result<[ValueId; 3]> {
        let hs = self.cfg.hidden_size;
        let (w, dtype) = self.stored(&vb.name(gate_up), &[e, 2 * is, hs])?;
        let experts = vb.pp("experts");
        let gate = self.declare(&experts.name("gate_proj"), w.clone().slice(1, 0, is), dtype, &[e, is, hs]);
        let up = self.declare(&experts.name("up_proj"), w.slice(1, is, 2 * is), dtype, &[e, is, hs]);
        let (w, dtype) = self.stored(&vb.name(down), &[e, hs, is])?;
        let down = self.declare(&experts.name("down_proj"), w, dtype, &[e, hs, is]);
        Ok([gate, up, down])
    }

    /// Llama 4's stacked experts ([`StackedForm::TransposedGateFirst`]) as `[E, out, in]` gate,
    /// up and down weights, read one expert at a time: each expert's `gate_up [hidden,
    /// 2 * inter]` transposed, its first `inter` rows the gate's, and `down [inter, hidden]`
    /// transposed.
    fn transposed_experts(&mut self, vb: &Vb, [gate_up, down]: [&str; 2], e: usize, is: usize) -> Result<[ValueId; 3]> {
        let hs = self.cfg.hidden_size;
        let (gate_up_rows, dtype) = self.expert_rows(vb, gate_up, e, [2 * is, hs])?;
        let (down_rows, down_dtype) = self.expert_rows(vb, down, e, [hs, is])?;
        let experts = vb.pp("experts");
        let part = |start: usize| -> Vec<(WeightExpr, DType)> {
            let slice =
                |p: &WeightExpr| WeightExpr::Slice { expr: Box::new(p.clone()), axis: 0, start, end: start + is };
            gate_up_rows.iter().map(|p| (slice(p), dtype)).collect()
        };
        let gate = self.declare_stack(&experts.name("gate_proj"), part(0), &[e, is, hs]);
        let up = self.declare_stack(&experts.name("up_proj"), part(is), &[e, is, hs]);
        let down_parts = down_rows.into_iter().map(|p| (p, down_dtype)).collect();
        let down = self.declare_stack(&experts.name("down_proj"), down_parts, &[e, hs, is]);
        Ok([gate, up, down])
    }

    /// GPT-OSS's stacked experts ([`StackedForm::TransposedInterleaved`]) as `[E, out, in]`
    /// gate, up and down weights and their `[E, out]` biases, read one expert at a time: each
    /// expert's `gate_up [hidden, 2 * inter]` transposed, its even rows the gate's and its odd
    /// ones the up's; from MXFP4 blocks where the checkpoint has them.
    fn interleaved_experts(&mut self, vb: &Vb, [gate_up, down]: [&str; 2], e: usize, is: usize) -> Result<Stacked> {
        let hs = self.cfg.hidden_size;
        let (evens, odds): (Vec<usize>, Vec<usize>) =
            ((0..is).map(|i| 2 * i).collect(), (0..is).map(|i| 2 * i + 1).collect());
        let gate_up_rows = self.expert_rows(vb, gate_up, e, [2 * is, hs])?;
        let down_rows = self.expert_rows(vb, down, e, [hs, is])?;
        let experts = vb.pp("experts");
        // each part with the dtype it is read in
        let pick = |(parts, dtype): &(Vec<WeightExpr>, DType), rows: &[usize]| -> Vec<(WeightExpr, DType)> {
            let row = |p: &WeightExpr| WeightExpr::Rows { expr: Box::new(p.clone()), rows: rows.to_vec() };
            parts.iter().map(|p| (row(p), *dtype)).collect()
        };
        let gate = self.declare_stack(&experts.name("gate_proj"), pick(&gate_up_rows, &evens), &[e, is, hs]);
        let up = self.declare_stack(&experts.name("up_proj"), pick(&gate_up_rows, &odds), &[e, is, hs]);
        let down_parts = down_rows.0.into_iter().map(|p| (p, down_rows.1)).collect();
        let down_w = self.declare_stack(&experts.name("down_proj"), down_parts, &[e, hs, is]);
        let (b, dtype) = self.stored(&vb.name(format!("{gate_up}_bias")), &[e, 2 * is])?;
        let items = ((0..e).map(|i| WeightExpr::Item { expr: Box::new(b.clone()), index: i }).collect(), dtype);
        let gate_b = self.declare_stack(&experts.name("gate_proj_bias"), pick(&items, &evens), &[e, is]);
        let up_b = self.declare_stack(&experts.name("up_proj_bias"), pick(&items, &odds), &[e, is]);
        let down_b = self.weight(vb, &format!("{down}_bias"), &[e, hs])?;
        Ok(Stacked { weights: [gate, up, down_w], biases: Some([gate_b, up_b, down_b]) })
    }

    /// Each expert's `[out, in]` rows of the stacked `name`: from MXFP4 `<name>_blocks
    /// [E, out, in / 32, 16]` and `<name>_scales [E, out, in / 32]` where stored, else the
    /// transpose of each expert of `name [E, in, out]`; with the dtype they are read in.
    fn expert_rows(&self, vb: &Vb, name: &str, e: usize, [out, inp]: [usize; 2]) -> Result<(Vec<WeightExpr>, DType)> {
        let item = |expr: &WeightExpr, index| WeightExpr::Item { expr: Box::new(expr.clone()), index };
        let blocks = vb.name(format!("{name}_blocks"));
        if !self.weights.has(&blocks) {
            let (w, dtype) = self.stored(&vb.name(name), &[e, inp, out])?;
            return Ok(((0..e).map(|i| WeightExpr::Transpose(Box::new(item(&w, i)))).collect(), dtype));
        }
        if !inp.is_multiple_of(32) {
            return Err(crate::ModelError::Config {
                path: "config.json".into(),
                key: "hidden_size".into(),
                msg: format!("MXFP4 `{blocks}` needs input widths that are multiples of 32, got {inp}"),
            });
        }
        let scales = vb.name(format!("{name}_scales"));
        self.weights.expect_bytes(&blocks, &[e, out, inp / 32, 16])?;
        self.weights.expect_bytes(&scales, &[e, out, inp / 32])?;
        let (b, s) = (WeightExpr::stored(&blocks), WeightExpr::stored(&scales));
        let parts = (0..e).map(|i| WeightExpr::Mxfp4 { blocks: Box::new(item(&b, i)), scales: Box::new(item(&s, i)) });
        Ok((parts.collect(), DType::F32))
    }

    /// Per-expert parts, each with the dtype it is read in and cast on its own (so the stack
    /// streams expert by expert), stacked as the graph weight `name` of `shape`.
    fn declare_stack(&mut self, name: &str, parts: Vec<(WeightExpr, DType)>, shape: &[usize]) -> ValueId {
        let dtype = self.opts.dtype;
        let cast =
            |(p, stored): (WeightExpr, DType)| if stored != dtype { WeightExpr::Cast(Box::new(p), dtype) } else { p };
        self.g.add_weight(name, WeightExpr::Stack(parts.into_iter().map(cast).collect()), dtype, shape)
    }

    /// The first of `names` under `vb` whose `leaf` tensor the checkpoint has, else the first
    /// (whose absence the caller's read reports).
    fn first_stored(&self, vb: &Vb, names: &[&'static str], leaf: &str) -> &'static str {
        names.iter().copied().find(|n| self.weights.has(&vb.pp(n).name(leaf))).unwrap_or(names[0])
    }
}

/// A MoE layer's stacked `[gate, up, down]` weights and, where stored, their biases.
struct Stacked {
    weights: [ValueId; 3],
    biases: Option<[ValueId; 3]>,
}

/// The channel order that turns rotate-every-two pairs `(2i, 2i + 1)` of the first `rotary`
/// channels of each of `heads` heads of size `d` into rotate-half pairs `(i, i + rotary/2)`:
/// per head, the even rotary channels, then the odd ones, then the channels rotary leaves alone.
pub(crate) fn pairs_as_halves(heads: usize, d: usize, rotary: usize) -> Vec<usize> {
    (0..heads)
        .flat_map(|h| {
            let evens = (0..rotary).step_by(2);
            let odds = (1..rotary).step_by(2);
            evens.chain(odds).chain(rotary..d).map(move |c| h * d + c)
        })
        .collect()
}

/// The norm of each head's queries or keys: one weight shared by the heads (at its `Vb`), or
/// one row per head, stored together or `stacked` from per-head norms, with its columns in an
/// order (see [`Decoder::head_rows_norm`]).
pub(crate) enum HeadNorm {
    Shared(Vb),
    Rows {
        vb: Vb,
        stacked: bool,
        order: Option<Vec<usize>>,
    },
    /// An RMS norm without weight (Llama 4's L2 norm).
    Unit,
}

/// The rows of part `part` (0: query, 1: gate) of a `[heads * 2 * d, ...]` projection stored as
/// `[query d | gate d]` per head.
pub(crate) fn gated_rows(heads: usize, d: usize, part: usize) -> Vec<usize> {
    (0..heads).flat_map(|h| (h * 2 + part) * d..(h * 2 + part + 1) * d).collect()
}
