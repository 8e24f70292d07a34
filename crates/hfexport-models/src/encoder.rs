//! Encoder graphs (BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA, ALBERT, MPNet, DeBERTa-v2,
//! ModernBERT, ViT): bidirectional layers over the whole sequence, then the head of the task.
//!
//! The layers are the block library's (`decoder_layer` with the family's norms, rotary where
//! the family has it); what differs from a decoder is here: the embeddings (word + learned
//! position + token type, a norm, and a projection where their width is not the layers'),
//! ALBERT's layers shared along the depth, a padding-only mask (every token attends to every
//! unpadded token; a sliding layer only to those within its window on either side) with
//! MPNet's relative position bias or DeBERTa-v2's disentangled position scores added, and the
//! task heads of [`crate::layout::EncoderLayout`]. Inputs keep transformers' names:
//! `input_ids`, `attention_mask` (int64 `[batch, sequence]`) and
//! `token_type_ids` where the family has more than one token type.

use hfexport_core::ops::{Activation, BinaryOp, ReduceKind, UnaryOp};
use hfexport_core::{DType, Dim, Graph, Op, Tensor, ValueId};

use crate::config::Disentangled;
use crate::decoder::{Decoder, DisentangledInputs, LayerInputs, Vb};
use crate::error::{ModelError, Result};
use crate::layout::{
    ClassifierHead, DisentangledLayout, EncoderInput, EncoderLayout, EncoderPositions, HeadAct, HeadActivation,
    MlmHead, Pooler,
};
use crate::patch_bias::RelativeBias;
use crate::sentence::{Dense, DenseActivation, PoolingMode, SentenceModules};
use crate::task::Task;

/// What an encoder's inputs become: the embeddings, the word embedding table (a masked-LM
/// decoder may be tied to it), the layers' shared inputs and the `attention_mask` input.
pub(crate) type EncoderInputs = (ValueId, Option<ValueId>, LayerInputs, Option<ValueId>);

impl Decoder<'_> {
    /// The forward graph of an encoder `task`; outputs named as transformers names them.
    pub(crate) fn encoder(mut self, task: Task) -> Result<Graph> {
        let (cfg, arch) = (self.cfg, self.arch);
        let (Some(enc), Some(_), true) = (arch.layout.encoder, cfg.encoder.as_ref(), task.fits(arch)) else {
            return Err(self.task_error(task));
        };
        if let EncoderInput::ConvNet { classifier } = enc.input {
            return self.convnet(task, classifier);
        }
        let act = self.activation()?;
        let root = self.root();
        let states = self.final_states(&root, &enc, "batch")?;
        self.encoder_head(task, &root, &enc, states, act)?;
        Ok(self.g)
    }

    /// The inputs of a token or patch encoder through its layers and final norm: the final
    /// states, the word embedding table (text) and the `attention_mask` input (text). An image
    /// batch is the symbol `batch` names.
    pub(crate) fn final_states(
        &mut self,
        root: &Vb,
        enc: &EncoderLayout,
        batch: &str,
    ) -> Result<(ValueId, Option<ValueId>, Option<ValueId>)> {
        let act = self.activation()?;
        let (mut h, words, shared, attention_mask) = match enc.input {
            EncoderInput::Tokens => self.token_inputs(root, enc)?,
            EncoderInput::Patches { .. } => self.patch_inputs(root, enc, batch)?,
            EncoderInput::Audio(names) => self.audio_inputs(root, names)?,
            EncoderInput::ConvNet { .. } => unreachable!("a convolutional network has no layers of the library"),
        };
        for (i, layer) in self.encoder_layers(root, enc) {
            h = self.decoder_layer(&layer, i, h, &shared, act)?;
        }
        // post-residual norms (wav2vec2's post-norm layers) and BEiT's mean pooling leave no
        // final norm
        let final_norm = self.arch.layout.final_norm;
        let mean_pooled = self.beit().is_some_and(|b| b.mean_pooling);
        if !final_norm.is_empty() && !self.cfg.post_residual_norms && !mean_pooled {
            h = self.norm(&root.pp(final_norm), self.cfg.hidden_size, h)?;
        }
        Ok((h, words, attention_mask))
    }

    /// The layers in the order they run, each with its index among `num_hidden_layers` (which
    /// its config entry is): `layers.<i>`, or under ALBERT's sharing every layer of the group
    /// layer `i` runs.
    fn encoder_layers(&self, root: &Vb, enc: &EncoderLayout) -> Vec<(usize, Vb)> {
        let n = self.cfg.num_hidden_layers;
        let groups = self.cfg.encoder.as_ref().and_then(|e| e.layer_groups);
        match (groups, enc.layer_groups) {
            (Some(groups), Some(names)) => (0..n)
                .flat_map(|i| {
                    let group = root.pp(names.groups).pp(groups.group_of(i, n)).pp(names.inner);
                    (0..groups.inner).map(move |j| (i, group.pp(j)))
                })
                .collect(),
            _ => (0..n).map(|i| (i, root.pp(self.arch.layout.layers).pp(i))).collect(),
        }
    }

    /// `input_ids`, `attention_mask` (and `token_type_ids`) in: the embeddings, the word
    /// embedding table, the layers' masks and rotary tables, and the `attention_mask` input.
    fn token_inputs(&mut self, root: &Vb, enc: &EncoderLayout) -> Result<EncoderInputs> {
        let cfg = self.cfg;
        let types_n = cfg.encoder.as_ref().map_or(0, |e| e.type_vocab_size);
        // RoBERTa's positions start after the padding id: fewer tokens fit
        let first = match self.position_padding(enc)? {
            None => 0,
            Some(pad) => pad as usize + 1,
        };
        let max_seq = cfg.max_position_embeddings.saturating_sub(first).max(1) as i64;
        let batch = Dim::sym(&self.g.symbols.declare("batch", 1, self.opts.max_batch)?);
        let seq = Dim::sym(&self.g.symbols.declare("sequence", 1, max_seq)?);
        let bs = vec![batch.clone(), seq.clone()];
        let ids = self.g.add_input("input_ids", DType::I64, bs.clone())?;
        let am = self.g.add_input("attention_mask", DType::I64, bs.clone())?;
        let types = match types_n > 1 {
            true => Some(self.g.add_input("token_type_ids", DType::I64, bs)?),
            false => None,
        };
        let positions = self.encoder_positions(enc, ids, &seq)?;
        let (h, words) = self.encoder_embeddings(root, enc, ids, positions, types)?;
        let one = Dim::konst(1);
        let keys = self.op("mask.padding", Op::Cast(DType::Bool), &[am])?;
        let mut mask = self.op("mask", Op::Reshape { shape: vec![batch, one.clone(), one, seq.clone()] }, &[keys])?;
        if enc.causal {
            mask = self.causal_mask(&seq, mask)?;
        }
        if let (Some(_), Some(table)) = (self.cfg.relative_attention, enc.relative_bias) {
            // MPNet's bias is over the sequence's own positions, whatever the padding
            let iota = self.op("bias.positions", Op::Iota { len: seq.clone() }, &[])?;
            let at = self.op("bias.position_ids", Op::Reshape { shape: vec![Dim::konst(1), seq.clone()] }, &[iota])?;
            mask = self.relative_mask(&root.pp(table), at, at, mask, true)?;
        }
        let mut shared = LayerInputs::without_rope(mask, positions);
        if let (Some(d), Some(names)) = (cfg.encoder.as_ref().and_then(|e| e.disentangled), enc.disentangled) {
            shared.disentangled = Some(self.disentangled_inputs(root, (d, names), &seq, max_seq)?);
        }
        shared.ropes = self.rotary(positions)?;
        shared.sliding_mask = self.window_mask(&seq, mask)?;
        Ok((h, Some(words), shared, Some(am)))
    }

    /// DeBERTa-v2's relative embeddings (normed where the config says) and the gather indices
    /// of its two position terms ([`DisentangledInputs`]); the buckets come from constant
    /// tables over every query - key distance a sequence of up to `max_seq` tokens has.
    fn disentangled_inputs(
        &mut self,
        root: &Vb,
        (d, names): (Disentangled, DisentangledLayout),
        seq: &Dim,
        max_seq: i64,
    ) -> Result<DisentangledInputs> {
        let (hs, rows) = (self.cfg.hidden_size, 2 * d.span as i64);
        let mut rel = self.weight(&root.pp(names.rel_embeddings), "weight", &[rows as usize, hs])?;
        if d.norm_rel_embeddings {
            rel = self.norm(&root.pp(names.rel_norm), hs, rel)?;
        }
        let one = Dim::konst(1);
        let iota = self.op("rel.positions", Op::Iota { len: seq.clone() }, &[])?;
        let queries = self.op("rel.queries", Op::Reshape { shape: vec![seq.clone(), one.clone()] }, &[iota])?;
        let keys = self.op("rel.keys", Op::Reshape { shape: vec![one, seq.clone()] }, &[iota])?;
        let distance = self.op("rel.distance", Op::Binary(BinaryOp::Sub), &[queries, keys])?;
        let lowest = self.id_scalar("rel.lowest", max_seq - 1)?;
        let at = self.op("rel.distance_index", Op::Binary(BinaryOp::Add), &[distance, lowest])?;
        let clamp = |v: i64| v.clamp(0, rows - 1);
        let span = d.span as i64;
        let c2p = |r: i64| clamp(d.bucket(r) + span);
        let p2c = |r: i64| clamp(span - d.bucket(-r));
        let width = self.id_scalar("rel.row", rows)?;
        let mut index = |name: &str, of: &dyn Fn(i64) -> i64, line: ValueId| -> Result<ValueId> {
            let table: Vec<i64> = (1 - max_seq..max_seq).map(of).collect();
            let at = self.lookup(&format!("rel.{name}.column"), &table, at)?;
            let start = self.op(&format!("rel.{name}.row_start"), Op::Binary(BinaryOp::Mul), &[line, width])?;
            self.op(&format!("rel.{name}.index"), Op::Binary(BinaryOp::Add), &[start, at])
        };
        let c2p = index("c2p", &c2p, queries)?;
        let p2c = index("p2c", &p2c, keys)?;
        Ok(DisentangledInputs { rel, c2p, p2c })
    }

    /// The sliding layers' mask: `mask` and `|query - key| <= sliding_window` (transformers'
    /// bidirectional sliding window, ModernBERT's half of `local_attention`); `None` when no
    /// layer slides.
    fn window_mask(&mut self, seq: &Dim, mask: ValueId) -> Result<Option<ValueId>> {
        let cfg = self.cfg;
        let Some(w) = cfg.sliding_window() else {
            return Ok(None);
        };
        let (q, k) = self.query_key_positions("mask.window", seq)?;
        let w = self.op("mask.window.size", Op::Constant(Tensor::int(DType::I64, vec![], vec![w as i64])?), &[])?;
        let q_end = self.op("mask.window.query_end", Op::Binary(BinaryOp::Add), &[q, w])?;
        let k_end = self.op("mask.window.key_end", Op::Binary(BinaryOp::Add), &[k, w])?;
        let before = self.op("mask.window.before", Op::Binary(BinaryOp::LessEqual), &[k, q_end])?;
        let after = self.op("mask.window.after", Op::Binary(BinaryOp::LessEqual), &[q, k_end])?;
        let window = self.op("mask.window", Op::Binary(BinaryOp::And), &[before, after])?;
        Ok(Some(self.op("mask.sliding", Op::Binary(BinaryOp::And), &[window, mask])?))
    }

    /// `mask` and `key <= query`: CLIP's text model is causal over its unpadded tokens.
    fn causal_mask(&mut self, seq: &Dim, mask: ValueId) -> Result<ValueId> {
        let (q, k) = self.query_key_positions("mask.causal", seq)?;
        let before = self.op("mask.causal.before", Op::Binary(BinaryOp::LessEqual), &[k, q])?;
        self.op("mask.causal", Op::Binary(BinaryOp::And), &[before, mask])
    }

    /// The positions `0..seq` as queries `[1, 1, seq, 1]` and as keys `[1, 1, 1, seq]` (nodes
    /// under `name`), for masks that compare the two.
    fn query_key_positions(&mut self, name: &str, seq: &Dim) -> Result<(ValueId, ValueId)> {
        let one = Dim::konst(1);
        let iota = self.op(&format!("{name}.positions"), Op::Iota { len: seq.clone() }, &[])?;
        let q = Op::Reshape { shape: vec![one.clone(), one.clone(), seq.clone(), one.clone()] };
        let k = Op::Reshape { shape: vec![one.clone(), one.clone(), one, seq.clone()] };
        Ok((self.op(&format!("{name}.queries"), q, &[iota])?, self.op(&format!("{name}.keys"), k, &[iota])?))
    }

    /// `pixel_values` `[batch, channels, height, width]` (float32) in: the patch embeddings (the
    /// convolution with kernel = stride = patch as one matmul over the patches, row-major as
    /// the convolution's output is flattened), the `cls` token in front, learned positions
    /// added, the embedding norm where the family has one; every token attends to every token.
    pub(crate) fn patch_inputs(&mut self, root: &Vb, enc: &EncoderLayout, batch: &str) -> Result<EncoderInputs> {
        let EncoderInput::Patches { cls, distillation, positions, patch_bias, flat } = enc.input else {
            unreachable!("called for a patch encoder only")
        };
        let (hs, dtype) = (self.cfg.hidden_size, self.opts.dtype);
        let img = self.cfg.encoder.as_ref().and_then(|e| e.image.clone()).ok_or_else(|| ModelError::Config {
            path: "config.json".into(),
            key: "image_size".into(),
            msg: "an image encoder needs image_size, patch_size and num_channels".into(),
        })?;
        let (c, [ph, pw]) = (img.channels, img.patch);
        let [ih, iw] = self.opts.image_size.unwrap_or(img.size);
        if ih % ph != 0 || iw % pw != 0 {
            return Err(ModelError::Config {
                path: "config.json".into(),
                key: "patch_size".into(),
                msg: format!("{:?} does not divide the image size {:?} asked for", img.patch, [ih, iw]),
            });
        }
        let (gh, gw) = (ih / ph, iw / pw);
        let n = gh * gw;
        let batch = Dim::sym(&self.g.symbols.declare(batch, 1, self.opts.max_batch)?);
        let d = |v: usize| Dim::from(v);
        let mut x = self.g.add_input("pixel_values", DType::F32, vec![batch.clone(), d(c), d(ih), d(iw)])?;
        if dtype != DType::F32 {
            x = self.op("pixel_values.cast", Op::Cast(dtype), &[x])?;
        }
        let vb = root.pp(self.arch.layout.embed);
        let grid = vec![batch.clone(), d(c), d(gh), d(ph), d(gw), d(pw)];
        let x = self.op(&vb.name("grid"), Op::Reshape { shape: grid }, &[x])?;
        let x = self.op(&vb.name("patches_first"), Op::Transpose { perm: vec![0, 2, 4, 1, 3, 5] }, &[x])?;
        let x = self.op(&vb.name("patches"), Op::Reshape { shape: vec![batch.clone(), d(n), d(c * ph * pw)] }, &[x])?;
        let w = self.weight(&vb, "weight", &[hs, c, ph, pw])?;
        let w = self.op(&vb.name("flat_weight"), Op::Reshape { shape: vec![d(hs), d(c * ph * pw)] }, &[w])?;
        let patches = match patch_bias {
            true => {
                let b = self.weight(&vb, "bias", &[hs])?;
                self.op(vb.path(), Op::Linear, &[x, w, b])?
            }
            false => self.op(vb.path(), Op::Linear, &[x, w])?,
        };
        let tokens = usize::from(cls.is_some()) + usize::from(distillation.is_some());
        let stored = [img.size[0] / ph, img.size[1] / pw];
        let n0 = stored[0] * stored[1];
        // learned positions, unless the config has none (BEiT's default)
        let absolute = self.cfg.encoder.as_ref().is_none_or(|e| e.absolute_positions);
        let pos = match (absolute, flat) {
            (false, _) => None,
            (true, true) => Some(self.weight(root, positions, &[n0 + tokens, hs])?),
            (true, false) => Some(self.weight(root, positions, &[1, n0 + tokens, hs])?),
        };
        let mut leading = vec![];
        if let Some(cls) = cls {
            leading.push(match flat {
                true => {
                    let cls = self.weight(root, cls, &[hs])?;
                    self.op(&root.name("cls_3d"), Op::Reshape { shape: vec![d(1), d(1), d(hs)] }, &[cls])?
                }
                false => self.weight(root, cls, &[1, 1, hs])?,
            });
        }
        let pos = match (pos, [gh, gw] == stored) {
            (Some(pos), false) => {
                let as_3d = Op::Reshape { shape: vec![d(1), d(n0 + tokens), d(hs)] };
                let pos = if flat { self.op(&root.name("positions_3d"), as_3d, &[pos])? } else { pos };
                Some(self.interpolated_positions(root, pos, (tokens, stored), [gh, gw])?)
            }
            (pos, _) => pos,
        };
        if let Some(distillation) = distillation {
            leading.push(self.weight(root, distillation, &[1, 1, hs])?);
        }
        let mut parts = vec![];
        for (i, t) in leading.into_iter().enumerate() {
            let expand = Op::Expand { shape: vec![batch.clone(), d(1), d(hs)] };
            parts.push(self.op(&root.name(format!("leading_tokens.{i}")), expand, &[t])?);
        }
        let h = match parts.is_empty() {
            true => patches,
            false => {
                parts.push(patches);
                self.op(&root.name("tokens"), Op::Concat { axis: 1 }, &parts)?
            }
        };
        let mut h = match pos {
            Some(pos) => self.op(&root.name("embeddings"), Op::Binary(BinaryOp::Add), &[h, pos])?,
            None => h,
        };
        if let Some(norm) = enc.embed_norm {
            h = self.norm(&root.pp(norm), hs, h)?;
        }
        let mut shared = self.all_visible(n + tokens)?;
        if let (Some(beit), Some(tables)) = (self.beit(), enc.relative_tables) {
            let bias = RelativeBias::new(self, (stored, [gh, gw]), n + tokens)?;
            if beit.shared_bias {
                shared.mask = self.relative_table_bias(root, tables.shared, &bias)?;
            }
            if beit.layer_bias {
                shared.relative_index = Some(bias);
            }
        }
        Ok((h, None, shared, None))
    }

    /// BEiT's settings, for a BEiT config.
    pub(crate) fn beit(&self) -> Option<crate::config::BeitSettings> {
        self.cfg.encoder.as_ref().and_then(|e| e.beit)
    }

    /// The learned positions `[1, tokens + rows * cols, hidden]` of a `stored` patch grid
    /// resampled to the `grid` of other images, as transformers' `interpolate_pos_encoding`
    /// does (ViT and DeiT when asked, DINOv2 always): the leading tokens' rows kept, the
    /// patches' bicubically (`align_corners=False`, A = -0.75, edges clamped) from the square
    /// grid the stored rows form. Resampling is linear: one constant matrix times the rows.
    fn interpolated_positions(
        &mut self,
        root: &Vb,
        pos: ValueId,
        (tokens, stored): (usize, [usize; 2]),
        grid: [usize; 2],
    ) -> Result<ValueId> {
        if stored[0] != stored[1] {
            return Err(ModelError::Config {
                path: "config.json".into(),
                key: "image_size".into(),
                msg: format!(
                    "gives a {}x{} grid of position embeddings, which transformers resamples only when square: \
                     export at the configured size",
                    stored[0], stored[1]
                ),
            });
        }
        let (hs, d) = (self.cfg.hidden_size, |v: usize| Dim::from(v));
        let (n0, n) = (stored[0] * stored[1], grid[0] * grid[1]);
        let rows = Op::Slice { axis: 1, start: d(tokens), end: d(tokens + n0) };
        let rows = self.op(&root.name("positions.patches"), rows, &[pos])?;
        let rows = self.op(&root.name("positions.grid"), Op::Reshape { shape: vec![d(n0), d(hs)] }, &[rows])?;
        let (wh, ww) = (bicubic_weights(stored[0], grid[0]), bicubic_weights(stored[1], grid[1]));
        let mut m = vec![0f32; n * n0];
        for (i, row) in m.chunks_mut(n0).enumerate() {
            let (y, x) = (i / grid[1], i % grid[1]);
            for (j, w) in row.iter_mut().enumerate() {
                *w = (wh[y * stored[0] + j / stored[1]] * ww[x * stored[1] + j % stored[1]]) as f32;
            }
        }
        let m = Tensor::float(self.opts.dtype, vec![n, n0], m)?;
        let m = self.op(&root.name("positions.resampling"), Op::Constant(m), &[])?;
        let resampled = self.op(&root.name("positions.resampled"), Op::MatMul, &[m, rows])?;
        let shape = Op::Reshape { shape: vec![d(1), d(n), d(hs)] };
        let resampled = self.op(&root.name("positions.resampled_3d"), shape, &[resampled])?;
        if tokens == 0 {
            return Ok(resampled);
        }
        let lead = Op::Slice { axis: 1, start: Dim::konst(0), end: d(tokens) };
        let lead = self.op(&root.name("positions.leading"), lead, &[pos])?;
        self.op(&root.name("positions.interpolated"), Op::Concat { axis: 1 }, &[lead, resampled])
    }

    /// The layer inputs of `n` positions that all see each other (image patches, audio frames).
    pub(crate) fn all_visible(&mut self, n: impl Into<Dim>) -> Result<LayerInputs> {
        let n = n.into();
        let all = Tensor::bool(vec![1, 1, 1, 1], vec![true])?;
        let mask = self.op("mask", Op::Constant(all), &[])?;
        let iota = self.op("positions", Op::Iota { len: n.clone() }, &[])?;
        let positions = self.op("position_ids", Op::Reshape { shape: vec![Dim::konst(1), n] }, &[iota])?;
        Ok(LayerInputs::without_rope(mask, positions))
    }

    pub(crate) fn task_error(&self, task: Task) -> ModelError {
        let valid: Vec<&str> = Task::ALL.iter().filter(|t| t.fits(self.arch)).map(|t| t.name()).collect();
        ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: format!("{} cannot do the task `{}`; valid: {}", self.cfg.architecture, task.name(), valid.join(", ")),
        }
    }

    /// The padding id positions are numbered after; `None`: numbered from zero.
    fn position_padding(&self, enc: &EncoderLayout) -> Result<Option<i64>> {
        match enc.positions {
            EncoderPositions::FromZero => Ok(None),
            EncoderPositions::AfterPadding => self.pad_id().map(Some),
            EncoderPositions::AfterFixedPadding(pad) => Ok(Some(pad)),
        }
    }

    fn pad_id(&self) -> Result<i64> {
        self.cfg.pad_token_id.ok_or_else(|| ModelError::Config {
            path: "config.json".into(),
            key: "pad_token_id".into(),
            msg: "is null, but this family numbers positions after the padding id".into(),
        })
    }

    /// Position ids: `[1, seq]` from zero, or RoBERTa's `[batch, seq]` counted over the
    /// non-padding tokens (`cumsum(ids != pad) * (ids != pad) + pad`).
    fn encoder_positions(&mut self, enc: &EncoderLayout, ids: ValueId, seq: &Dim) -> Result<ValueId> {
        let one = Dim::konst(1);
        let iota = self.op("positions", Op::Iota { len: seq.clone() }, &[])?;
        let Some(pad) = self.position_padding(enc)? else {
            return self.op("position_ids", Op::Reshape { shape: vec![one, seq.clone()] }, &[iota]);
        };
        let pad_t = self.op("positions.pad", Op::Constant(Tensor::int(DType::I64, vec![], vec![pad])?), &[])?;
        let is_pad = self.op("positions.is_pad", Op::Binary(BinaryOp::Equal), &[ids, pad_t])?;
        let real = self.op("positions.real", Op::Unary(UnaryOp::Not), &[is_pad])?;
        let real = self.op("positions.real_i64", Op::Cast(DType::I64), &[real])?;
        let count = self.cumulative_sum("positions.cumsum", real)?;
        let count = self.op("positions.counted", Op::Binary(BinaryOp::Mul), &[count, real])?;
        self.op("position_ids", Op::Binary(BinaryOp::Add), &[count, pad_t])
    }

    /// `norm(word[ids] + position[positions] + token_type[types or 0])`, projected to the
    /// hidden size where the embeddings have a width of their own, and the word embedding
    /// table (a masked-LM decoder may be tied to it).
    fn encoder_embeddings(
        &mut self,
        root: &Vb,
        enc: &EncoderLayout,
        ids: ValueId,
        positions: ValueId,
        types: Option<ValueId>,
    ) -> Result<(ValueId, ValueId)> {
        let (hs, width) = (self.cfg.hidden_size, self.cfg.embed_width());
        let (mut h, words) = self.embed(root, ids, positions)?;
        let types_n = self.cfg.encoder.as_ref().map_or(0, |e| e.type_vocab_size);
        if let Some(tte) = enc.token_type_embed.filter(|_| types_n > 0) {
            h = self.token_types(&root.pp(tte), h, types)?;
        }
        let projection = enc
            .embed_projection
            .filter(|p| self.cfg.embed_dim.is_some() || self.weights.has(&root.pp(p.name).name("weight")));
        let (before, after) = (projection.filter(|p| p.before_norm), projection.filter(|p| !p.before_norm));
        if let Some(p) = before {
            h = self.linear(&root.pp(p.name), hs, width, p.bias, h)?;
        }
        if let Some(norm) = enc.embed_norm {
            h = self.norm(&root.pp(norm), if before.is_some() { hs } else { width }, h)?;
        }
        if let Some(p) = after {
            h = self.linear(&root.pp(p.name), hs, width, p.bias, h)?;
        }
        Ok((h, words))
    }

    /// `h + token_type[types or 0]`.
    fn token_types(&mut self, vb: &Vb, h: ValueId, types: Option<ValueId>) -> Result<ValueId> {
        let (width, n_types) = (self.cfg.embed_width(), self.cfg.encoder.as_ref().map_or(1, |e| e.type_vocab_size));
        let table = self.weight(vb, "weight", &[n_types, width])?;
        let types = match types {
            Some(t) => t,
            // one token type: every token is type 0
            None => self.op(&vb.name("zero"), Op::Constant(Tensor::int(DType::I64, vec![], vec![0])?), &[])?,
        };
        let t = self.op(&vb.name("gather"), Op::Gather { axis: 0 }, &[table, types])?;
        self.op(&vb.name("add"), Op::Binary(BinaryOp::Add), &[h, t])
    }

    /// The first token's hidden state `[batch, hidden]` (`h[:, 0]`).
    fn first_token(&mut self, name: &str, h: ValueId) -> Result<ValueId> {
        self.token_at(name, 0, h)
    }

    /// `concat(h[:, 0], mean(h[:, 1:]))` `[batch, 2 * hidden]` of `h` `[batch, 1 + patches,
    /// hidden]`.
    fn class_and_patch_mean(&mut self, name: &str, h: ValueId) -> Result<ValueId> {
        let shape = self.g.info(h).shape.clone();
        let cls = self.first_token(name, h)?;
        let patches = Op::Slice { axis: 1, start: Dim::konst(1), end: shape[1].clone() };
        let patches = self.op(&format!("{name}.patches"), patches, &[h])?;
        let mean = Op::Reduce { kind: ReduceKind::Mean, axes: vec![1], keep_dims: false };
        let mean = self.op(&format!("{name}.patch_mean"), mean, &[patches])?;
        self.op(&format!("{name}.class_and_patch_mean"), Op::Concat { axis: 1 }, &[cls, mean])
    }

    /// The pooled state `[batch, width]` of the final states `h` by `pooler`; `None` without one
    /// (or where the checkpoint stores no pooler dense).
    pub(crate) fn pooled(&mut self, root: &Vb, pooler: Option<Pooler>, h: ValueId) -> Result<Option<ValueId>> {
        Ok(Some(match pooler {
            Some(Pooler::FirstToken) => self.first_token("pooler", h)?,
            Some(Pooler::Dense(dense)) if self.weights.has(&root.pp(dense).name("weight")) => {
                self.pooler(root, dense, h)?
            }
            Some(Pooler::EndOfText) => self.end_of_text(h)?,
            Some(Pooler::LastToken { head }) => self.last_token(root, head, h)?,
            Some(Pooler::NormedFirstToken { norm }) => {
                let cls = self.first_token("pooler", h)?;
                self.norm(&root.pp(norm), self.cfg.hidden_size, cls)?
            }
            Some(Pooler::Probe { head }) => self.attention_probe(&root.pp(head), h)?,
            Some(Pooler::PatchMeanIf { norm }) if self.beit().is_some_and(|b| b.mean_pooling) => {
                let shape = self.g.info(h).shape.clone();
                let patches = Op::Slice { axis: 1, start: Dim::konst(1), end: shape[1].clone() };
                let patches = self.op("pooler.patches", patches, &[h])?;
                let mean = Op::Reduce { kind: ReduceKind::Mean, axes: vec![1], keep_dims: false };
                let mean = self.op("pooler.patch_mean", mean, &[patches])?;
                self.norm(&root.pp(norm), self.cfg.hidden_size, mean)?
            }
            Some(Pooler::PatchMeanIf { .. }) => self.first_token("pooler", h)?,
            Some(Pooler::Dense(_)) | None => return Ok(None),
        }))
    }

    /// CLIP's text pooling: the state `[batch, hidden]` at each row's first end-of-text id
    /// (the config's one `eos_token_id`; with the legacy id 2, the first of the row's largest
    /// ids), at position 0 in a row without one (as torch's `argmax` of all-false).
    fn end_of_text(&mut self, h: ValueId) -> Result<ValueId> {
        let ids = self.g.input("input_ids").map(|p| p.value).ok_or_else(|| ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: "end-of-text pooling needs the input_ids".into(),
        })?;
        let eos = match self.cfg.eos_token_ids[..] {
            [id] => id,
            ref ids => {
                return Err(ModelError::Config {
                    path: "config.json".into(),
                    key: "text_config.eos_token_id".into(),
                    msg: format!("the text is pooled at its one end-of-text id; got {ids:?}"),
                })
            }
        };
        let end = match eos {
            2 => self.op(
                "pooler.largest_id",
                Op::Reduce { kind: ReduceKind::Max, axes: vec![1], keep_dims: true },
                &[ids],
            )?,
            _ => self.id_scalar("pooler.eos_token_id", eos)?,
        };
        let at_end = self.op("pooler.at_end", Op::Binary(BinaryOp::Equal), &[ids, end])?;
        let seq = self.g.info(ids).shape[1].clone();
        let iota = self.op("pooler.positions", Op::Iota { len: seq.clone() }, &[])?;
        let iota = self.op("pooler.position_row", Op::Reshape { shape: vec![Dim::konst(1), seq] }, &[iota])?;
        // the first such position: the max of -position over them (none: -(2^40), then 0)
        let none = self.id_scalar("pooler.none", -(1 << 40))?;
        let neg = self.op("pooler.minus_positions", Op::Unary(UnaryOp::Neg), &[iota])?;
        let x = self.op("pooler.ends", Op::Where, &[at_end, neg, none])?;
        let max = Op::Reduce { kind: ReduceKind::Max, axes: vec![1], keep_dims: true };
        let minus_first = self.op("pooler.minus_first", max, &[x])?;
        let first = self.op("pooler.first", Op::Unary(UnaryOp::Neg), &[minus_first])?;
        let zero = self.id_scalar("pooler.zero", 0)?;
        let found = self.op("pooler.found", Op::Binary(BinaryOp::Greater), &[minus_first, none])?;
        let first = self.op("pooler.first_or_zero", Op::Where, &[found, first, zero])?;
        let pick = self.op("pooler.pick", Op::Binary(BinaryOp::Equal), &[iota, first])?;
        let pick = self.op("pooler.pick_float", Op::Cast(self.opts.dtype), &[pick])?;
        self.weighted_rows("pooler", pick, h)
    }

    /// SigLIP's text pooling: `head(h[:, -1])` `[batch, projection_size]`.
    fn last_token(&mut self, root: &Vb, head: &str, h: ValueId) -> Result<ValueId> {
        let shape = self.g.info(h).shape.clone();
        let last = Op::Slice { axis: 1, start: shape[1].sub(&Dim::konst(1)), end: shape[1].clone() };
        let x = self.op("pooler.last", last, &[h])?;
        let x = self.op("pooler.squeeze", Op::Reshape { shape: vec![shape[0].clone(), shape[2].clone()] }, &[x])?;
        let hs = self.cfg.hidden_size;
        let out = self.cfg.encoder.as_ref().map_or(hs, |e| e.pooler_size);
        self.linear(&root.pp(head), out, hs, true, x)
    }

    /// `h[:, at]` of `h` `[batch, sequence, hidden]`.
    pub(crate) fn token_at(&mut self, name: &str, at: i64, h: ValueId) -> Result<ValueId> {
        let shape = self.g.info(h).shape.clone();
        let (start, end) = (Dim::konst(at), Dim::konst(at + 1));
        let part = if at == 0 { "first".to_string() } else { format!("token{at}") };
        let x = self.op(&format!("{name}.{part}"), Op::Slice { axis: 1, start, end }, &[h])?;
        self.op(&format!("{name}.squeeze"), Op::Reshape { shape: vec![shape[0].clone(), shape[2].clone()] }, &[x])
    }

    /// `act(dense(h[:, 0]))` of the pooler at `pooler` (`pooler_act`: tanh unless ViT's config
    /// says otherwise).
    fn pooler(&mut self, root: &Vb, pooler: &str, h: ValueId) -> Result<ValueId> {
        let hs = self.cfg.hidden_size;
        let (size, act) = self.cfg.encoder.as_ref().map_or((hs, "tanh"), |e| (e.pooler_size, e.pooler_act.as_str()));
        let vb = root.pp(pooler);
        let x = self.first_token(vb.path(), h)?;
        let x = self.linear(&vb, size, hs, true, x)?;
        let op = match (act, Activation::from_hf(act)) {
            ("tanh", _) => Op::Unary(UnaryOp::Tanh),
            (_, Some(a)) => Op::Activate(a),
            (_, None) => {
                return Err(ModelError::Config {
                    path: "config.json".into(),
                    key: self.arch.config.encoder.map_or("pooler_act", |e| e.pooler.act).into(),
                    msg: format!("`{act}` is not supported; valid: tanh, {}", Activation::NAMES.join(", ")),
                })
            }
        };
        self.op(&vb.name("act"), op, &[x])
    }

    /// ModernBERT's `classifier_pooling = "mean"`: the mean of `h` over the tokens
    /// `attention_mask` keeps, `[batch, hidden]`.
    fn mean_pool(&mut self, h: ValueId, attention_mask: ValueId) -> Result<ValueId> {
        let m = self.op("pooling.mask", Op::Cast(self.opts.dtype), &[attention_mask])?;
        let sum = self.weighted_rows("pooling.sum", m, h)?;
        let n = self.op("pooling.count", Op::Reduce { kind: ReduceKind::Sum, axes: vec![1], keep_dims: true }, &[m])?;
        self.op("pooling.mean", Op::Binary(BinaryOp::Div), &[sum, n])
    }

    /// sentence-transformers' pooling of `h` `[batch, sequence, hidden]` over the tokens
    /// `attention_mask` keeps, each mode in turn and concatenated, then its `Normalize`
    /// (`crate::sentence`; the formulas of its `Pooling._forward_padded`, down to the clamps).
    fn sentence_embedding(&mut self, m: &SentenceModules, h: ValueId, attention_mask: ValueId) -> Result<ValueId> {
        let shape = self.g.info(h).shape.clone();
        let (b, s) = (shape[0].clone(), shape[1].clone());
        let dtype = self.opts.dtype;
        let keep = self.op("pooling.keep", Op::Cast(DType::Bool), &[attention_mask])?;
        let mask = self.op("pooling.mask", Op::Cast(dtype), &[attention_mask])?;
        // positions 1..=sequence, [1, sequence], in int64 (exact at any length, unlike bf16)
        let iota = self.op("pooling.positions", Op::Iota { len: s.clone() }, &[])?;
        let iota = self.op("pooling.positions_row", Op::Reshape { shape: vec![Dim::konst(1), s.clone()] }, &[iota])?;
        let one = self.id_scalar("pooling.one", 1)?;
        let from_one = self.op("pooling.positions_from_one", Op::Binary(BinaryOp::Add), &[iota, one])?;
        // the kept positions counted from 1, 0 where padded
        let kept = self.op("pooling.kept_positions", Op::Binary(BinaryOp::Mul), &[attention_mask, from_one])?;
        let tiny = self.scalar("pooling.clamp", 1e-9)?;
        let sum_over_seq = Op::Reduce { kind: ReduceKind::Sum, axes: vec![1], keep_dims: true };
        let mut parts = vec![];
        for (i, mode) in m.pooling.iter().enumerate() {
            let name = |what: &str| format!("pooling.{i}.{}.{what}", mode.name());
            let part = match mode {
                PoolingMode::Mean | PoolingMode::MeanSqrtLen => {
                    let sum = self.weighted_rows(&name("sum"), mask, h)?;
                    let n = self.op(&name("count"), sum_over_seq.clone(), &[mask])?;
                    let n = self.op(&name("count_clamped"), Op::Binary(BinaryOp::Max), &[n, tiny])?;
                    let n = match mode {
                        PoolingMode::Mean => n,
                        _ => self.op(&name("sqrt_count"), Op::Unary(UnaryOp::Sqrt), &[n])?,
                    };
                    self.op(&name("pooled"), Op::Binary(BinaryOp::Div), &[sum, n])?
                }
                PoolingMode::WeightedMean => {
                    let w = self.op(&name("weights"), Op::Cast(dtype), &[kept])?;
                    let sum = self.weighted_rows(&name("sum"), w, h)?;
                    let n = self.op(&name("weight_sum"), sum_over_seq.clone(), &[w])?;
                    let n = self.op(&name("weight_sum_clamped"), Op::Binary(BinaryOp::Max), &[n, tiny])?;
                    self.op(&name("pooled"), Op::Binary(BinaryOp::Div), &[sum, n])?
                }
                PoolingMode::Max => {
                    let shape3 = vec![b.clone(), s.clone(), Dim::konst(1)];
                    let keep3 = self.op(&name("keep"), Op::Reshape { shape: shape3 }, &[keep])?;
                    let low = self.scalar(&name("minus_inf"), f64::NEG_INFINITY)?;
                    let x = self.op(&name("masked"), Op::Where, &[keep3, h, low])?;
                    let max = Op::Reduce { kind: ReduceKind::Max, axes: vec![1], keep_dims: false };
                    self.op(&name("pooled"), max, &[x])?
                }
                PoolingMode::Cls | PoolingMode::LastToken => {
                    let max = Op::Reduce { kind: ReduceKind::Max, axes: vec![1], keep_dims: true };
                    let at = match mode {
                        // the first kept position: max of -position over the kept ones; none
                        // kept: position 1, as sentence-transformers' argmax of zeros
                        PoolingMode::Cls => {
                            let padded = self.id_scalar(&name("padded"), -(1 << 40))?;
                            let neg = self.op(&name("minus_positions"), Op::Unary(UnaryOp::Neg), &[from_one])?;
                            let x = self.op(&name("kept_first"), Op::Where, &[keep, neg, padded])?;
                            let minus_first = self.op(&name("minus_first"), max, &[x])?;
                            let none =
                                self.op(&name("none_kept"), Op::Binary(BinaryOp::Equal), &[minus_first, padded])?;
                            let first = self.op(&name("first"), Op::Unary(UnaryOp::Neg), &[minus_first])?;
                            self.op(&name("first_or_one"), Op::Where, &[none, one, first])?
                        }
                        // the last kept position (none kept: 0, no position, a zero vector, as
                        // sentence-transformers' gather of h * mask gives)
                        _ => self.op(&name("last"), max, &[kept])?,
                    };
                    let pick = self.op(&name("pick"), Op::Binary(BinaryOp::Equal), &[from_one, at])?;
                    let pick = self.op(&name("pick_float"), Op::Cast(dtype), &[pick])?;
                    self.weighted_rows(&name("pooled"), pick, h)?
                }
            };
            parts.push(part);
        }
        let mut e = match parts.len() {
            1 => parts[0],
            _ => self.op("pooling.concat", Op::Concat { axis: 1 }, &parts)?,
        };
        for d in &m.dense {
            e = self.dense(d, e)?;
        }
        if m.normalize {
            e = self.l2_normalize("normalize", e, Some(1e-12))?;
        }
        Ok(e)
    }

    /// A sentence-transformers `Dense` module over `x` `[batch, in]`: `act(x Wᵀ + b)`, plus `x`
    /// (or `x Rᵀ` when the widths differ) with `use_residual`.
    fn dense(&mut self, d: &Dense, x: ValueId) -> Result<ValueId> {
        let width = self.g.info(x).shape[1].as_const();
        if width != Some(d.in_features as i64) {
            return Err(ModelError::config(
                d.file.with_file_name("config.json"),
                "in_features",
                format!("is {}, but the module's input is {} wide", d.in_features, width.unwrap_or(-1)),
            ));
        }
        let vb = Vb::root(&d.prefix);
        let y = self.linear(&vb.pp("linear"), d.out_features, d.in_features, d.bias, x)?;
        let name = vb.name("activation");
        let y = match d.activation {
            DenseActivation::Identity => y,
            DenseActivation::Tanh => self.op(&name, Op::Unary(UnaryOp::Tanh), &[y])?,
            DenseActivation::Sigmoid => self.op(&name, Op::Unary(UnaryOp::Sigmoid), &[y])?,
            DenseActivation::Act(a) => self.op(&name, Op::Activate(a), &[y])?,
        };
        if !d.residual {
            return Ok(y);
        }
        let r = match d.in_features == d.out_features {
            true => x,
            false => self.linear(&vb.pp("residual"), d.out_features, d.in_features, false, x)?,
        };
        self.op(&vb.name("residual_add"), Op::Binary(BinaryOp::Add), &[y, r])
    }

    /// `Σ_s w[b, s] · h[b, s, :]` `[batch, hidden]`: `w` `[batch, sequence]` as one matmul row per
    /// sequence.
    fn weighted_rows(&mut self, name: &str, w: ValueId, h: ValueId) -> Result<ValueId> {
        let shape = self.g.info(h).shape.clone();
        let (b, s, hs) = (shape[0].clone(), shape[1].clone(), shape[2].clone());
        let rows = self.op(&format!("{name}.rows"), Op::Reshape { shape: vec![b.clone(), Dim::konst(1), s] }, &[w])?;
        let sum = self.op(&format!("{name}.matmul"), Op::MatMul, &[rows, h])?;
        self.op(name, Op::Reshape { shape: vec![b, hs] }, &[sum])
    }

    /// `norm(act(dense(x)))`: the masked-LM transform (ModernBERT's prediction head), from the
    /// hidden size to the embeddings' width (the decoder's input).
    fn transform(&mut self, m: MlmHead, x: ValueId, act: Activation) -> Result<ValueId> {
        let (hs, width) = (self.cfg.hidden_size, self.cfg.embed_width());
        let heads = self.cfg.encoder.as_ref().map(|e| &e.heads);
        let dense = Vb::root(m.dense);
        let x = self.linear(&dense, width, hs, heads.is_none_or(|h| h.dense_bias), x)?;
        let act = match m.act {
            HeadActivation::Hidden => act,
            HeadActivation::Gelu => Activation::Gelu,
            HeadActivation::Classifier => {
                let name = heads.and_then(|h| h.activation.as_deref()).unwrap_or("gelu");
                Activation::from_hf(name).ok_or_else(|| ModelError::Config {
                    path: "config.json".into(),
                    key: "classifier_activation".into(),
                    msg: format!("`{name}` is not supported; valid: {}", Activation::NAMES.join(", ")),
                })?
            }
        };
        let x = self.op(&dense.name("act"), Op::Activate(act), &[x])?;
        self.norm(&Vb::root(m.norm), width, x)
    }

    fn encoder_head(
        &mut self,
        task: Task,
        root: &Vb,
        enc: &EncoderLayout,
        (h, words, attention_mask): (ValueId, Option<ValueId>, Option<ValueId>),
        act: Activation,
    ) -> Result<()> {
        let hs = self.cfg.hidden_size;
        let labels = self.cfg.encoder.as_ref().map_or(2, |e| e.num_labels);
        let top = Vb::root("");
        match task {
            Task::FeatureExtraction => {
                self.g.add_output("last_hidden_state", h)?;
                // a `…WithProjection` class stores its projection (`CLIPTextModel` none)
                let projection = enc.projection.filter(|p| self.weights.has(&top.pp(p.linear).name("weight")));
                match (self.pooled(root, enc.pooler, h)?, projection) {
                    (Some(p), Some(projection)) => {
                        let size = self.cfg.encoder.as_ref().map_or(hs, |e| e.pooler_size);
                        let e = self.linear(&top.pp(projection.linear), size, hs, false, p)?;
                        self.g.add_output(projection.output, e)?;
                    }
                    (Some(p), None) => self.g.add_output("pooler_output", p)?,
                    (None, _) => {}
                }
            }
            Task::SentenceEmbedding => {
                let modules = self.cfg.sentence.clone().ok_or_else(|| ModelError::Config {
                    path: crate::sentence::MODULES_FILE.into(),
                    key: "<root>".into(),
                    msg: "task sentence-embedding needs a sentence-transformers checkpoint (modules.json with a \
                          Pooling module beside config.json)"
                        .into(),
                })?;
                let am = attention_mask.ok_or_else(|| self.task_error(task))?;
                // the token states under transformers' name: sentence-transformers' onnx and
                // openvino backends (optimum's feature-extraction models) read
                // `last_hidden_state` and run the modules themselves
                self.g.add_output("last_hidden_state", h)?;
                let e = self.sentence_embedding(&modules, h, am)?;
                self.g.add_output("sentence_embedding", e)?;
            }
            Task::FillMask => {
                let x = self.transform(enc.mlm, h, act)?;
                let words = words.ok_or_else(|| self.task_error(task))?;
                let logits = self.mlm_decoder(words, enc.mlm.decoder, enc.mlm.bias, x)?;
                self.g.add_output("logits", logits)?;
            }
            Task::SequenceClassification | Task::ImageClassification => {
                let logits = match enc.classifier {
                    ClassifierHead::FirstToken { out } => {
                        let x = self.first_token(out, h)?;
                        self.linear(&top.pp(out), labels, hs, true, x)?
                    }
                    ClassifierHead::ClassAndPatchMean { out } => {
                        let x = self.class_and_patch_mean(out, h)?;
                        self.linear(&top.pp(out), labels, 2 * hs, true, x)?
                    }
                    ClassifierHead::Distillable { cls, distillation, .. }
                        if self.weights.has(&top.pp(cls).name("weight")) =>
                    {
                        let x = self.first_token(cls, h)?;
                        let cls_logits = self.linear(&top.pp(cls), labels, hs, true, x)?;
                        let x = self.token_at(distillation, 1, h)?;
                        let distilled = self.linear(&top.pp(distillation), labels, hs, true, x)?;
                        let sum = self.op("logits.sum", Op::Binary(BinaryOp::Add), &[cls_logits, distilled])?;
                        let half = self.scalar("logits.half", 0.5)?;
                        self.op("logits.mean", Op::Binary(BinaryOp::Mul), &[sum, half])?
                    }
                    ClassifierHead::Distillable { out, .. } => {
                        let x = self.first_token(out, h)?;
                        self.linear(&top.pp(out), labels, hs, true, x)?
                    }
                    ClassifierHead::Pooled { out } => {
                        // a dense pooler is read whether stored or not, so a missing one is named
                        let p = match enc.pooler {
                            Some(Pooler::Dense(pooler)) => self.pooler(root, pooler, h)?,
                            other => self.pooled(root, other, h)?.ok_or_else(|| self.task_error(task))?,
                        };
                        self.linear(&top.pp(out), labels, hs, true, p)?
                    }
                    ClassifierHead::OwnPooler { pooler, out } => {
                        let p = self.pooler(&top, pooler, h)?;
                        self.linear(&top.pp(out), labels, hs, true, p)?
                    }
                    ClassifierHead::Dense { dense, act, out } => {
                        let x = self.first_token(dense, h)?;
                        let x = self.linear(&top.pp(dense), hs, hs, true, x)?;
                        let name = top.pp(dense).name("act");
                        let x = match act {
                            HeadAct::Tanh => self.op(&name, Op::Unary(UnaryOp::Tanh), &[x])?,
                            HeadAct::Relu => self.op(&name, Op::Activate(Activation::Relu), &[x])?,
                            HeadAct::Gelu => self.op(&name, Op::Activate(Activation::Gelu), &[x])?,
                        };
                        self.linear(&top.pp(out), labels, hs, true, x)?
                    }
                    ClassifierHead::MeanProjected { projector, out } => {
                        let audio = self.audio_config()?;
                        if audio.weighted_layer_sum {
                            return Err(ModelError::Config {
                                path: "config.json".into(),
                                key: "use_weighted_layer_sum".into(),
                                msg:
                                    "is true: a classifier over a learned mix of every layer's states is not supported"
                                        .into(),
                            });
                        }
                        let width = audio.classifier_proj_size;
                        let x = self.linear(&top.pp(projector), width, hs, true, h)?;
                        // over the kept frames where the model takes a mask
                        let x = match attention_mask {
                            Some(frames) => self.mean_pool(x, frames)?,
                            None => {
                                let mean = Op::Reduce { kind: ReduceKind::Mean, axes: vec![1], keep_dims: false };
                                self.op(&top.pp(projector).name("mean"), mean, &[x])?
                            }
                        };
                        self.linear(&top.pp(out), labels, width, true, x)?
                    }
                    ClassifierHead::Pooling { out } => {
                        let mean = self.cfg.encoder.as_ref().is_some_and(|e| e.heads.mean_pooling);
                        let x = match (mean, attention_mask) {
                            (true, Some(am)) => self.mean_pool(h, am)?,
                            _ => self.first_token(out, h)?,
                        };
                        let x = self.transform(enc.mlm, x, act)?;
                        self.linear(&top.pp(out), labels, hs, true, x)?
                    }
                };
                self.g.add_output("logits", logits)?;
            }
            Task::TokenClassification => {
                let x = if enc.shared_transform { self.transform(enc.mlm, h, act)? } else { h };
                let logits = self.linear(&top.pp(enc.token_classifier), labels, hs, true, x)?;
                self.g.add_output("logits", logits)?;
            }
            Task::QuestionAnswering => {
                let x = if enc.shared_transform { self.transform(enc.mlm, h, act)? } else { h };
                let span = self.linear(&top.pp(enc.qa), 2, hs, true, x)?;
                let shape = self.g.info(h).shape[..2].to_vec();
                for (i, name) in ["start_logits", "end_logits"].into_iter().enumerate() {
                    let (a, b) = (Dim::konst(i as i64), Dim::konst(i as i64 + 1));
                    let x = self.op(&format!("{}.{name}", enc.qa), Op::Slice { axis: 2, start: a, end: b }, &[span])?;
                    let x = self.op(name, Op::Reshape { shape: shape.clone() }, &[x])?;
                    self.g.add_output(name, x)?;
                }
            }
            Task::SpeechRecognition => {
                let EncoderInput::Audio(names) = enc.input else { return Err(self.task_error(task)) };
                let logits = self.linear(&top.pp(names.ctc_head), self.cfg.vocab_size, hs, true, h)?;
                self.g.add_output("logits", logits)?;
            }
            Task::CausalLm | Task::Text2TextGeneration | Task::ImageTextToText | Task::ZeroShotImageClassification => {
                return Err(self.task_error(task))
            }
        }
        Ok(())
    }

    /// `x · decoderᵀ + bias`, the decoder the word embeddings unless the checkpoint stores its
    /// own (as for a decoder's head); the bias the head's `bias` when tied (transformers 5 ties
    /// `<decoder>.bias` to it), else the decoder's own where stored.
    fn mlm_decoder(&mut self, words: ValueId, decoder: &str, bias: &str, x: ValueId) -> Result<ValueId> {
        let (v, width) = (self.cfg.vocab_size, self.cfg.embed_width());
        let dec = Vb::root(decoder);
        let w = match self.weights.has(&dec.name("weight")) {
            true => self.weight(&dec, "weight", &[v, width])?,
            false => words,
        };
        if self.cfg.encoder.as_ref().is_some_and(|e| !e.heads.decoder_bias) {
            return self.op(decoder, Op::Linear, &[x, w]);
        }
        // tied, `<decoder>.bias` is tied to the head's `bias`; untied, the decoder's own is used
        let own = self.weights.has(&dec.name("bias"));
        let b = match (self.cfg.tie_word_embeddings && self.weights.has(bias)) || !own {
            true => self.weight(&Vb::root(""), bias, &[v])?,
            false => self.weight(&dec, "bias", &[v])?,
        };
        self.op(decoder, Op::Linear, &[x, w, b])
    }
}

/// The `[out, input]` weights of torch's bicubic resampling of `input` samples to `out`
/// (`upsample_bicubic2d`, `align_corners=False`): output `o` reads the source point
/// `(o + 0.5) * input / out - 0.5` through the cubic convolution kernel (A = -0.75) over its
/// four neighbours, indices clamped to the edges.
fn bicubic_weights(input: usize, out: usize) -> Vec<f64> {
    const A: f64 = -0.75;
    let near = |x: f64| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    let scale = input as f64 / out as f64;
    let mut w = vec![0.0; out * input];
    for o in 0..out {
        let real = scale * (o as f64 + 0.5) - 0.5;
        let (floor, t) = (real.floor(), real - real.floor());
        let coefficients = [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)];
        for (k, c) in coefficients.into_iter().enumerate() {
            let at = (floor as i64 - 1 + k as i64).clamp(0, input as i64 - 1) as usize;
            w[o * input + at] += c;
        }
    }
    w
}
