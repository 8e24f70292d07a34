//! The image side of a vision-language model: the image components (LLaVA's `image_encoder`
//! and `multi_modal_projector`, Qwen2-VL's `image_encoder`), and what a decode graph adds for
//! them (the image rows merged into the token embeddings, Qwen2-VL's multimodal rotary), with
//! the host-side inputs those need ([`patch_inputs`], [`mrope_positions`]).
//!
//! A CLIP tower is an image encoder built from the block library like ViT
//! (`Decoder::patch_inputs`, pre-LN layers) from its own config ([`VisionConfig::tower`]); it
//! stops at the deepest hidden state `vision_feature_layer` asks for and returns those states
//! (CLS dropped by the `default` strategy), concatenated; the projector is two linears with an
//! activation between. Qwen2-VL's tower reads the processor's patch rows, rotates each patch by
//! its row and column, attends within frames and ends in the PatchMerger.
//!
//! The decode graph takes the image rows as `image_embeds` `[image_tokens, hidden]` and puts
//! them, in order, where `input_ids` holds the image placeholder, as the models scatter them
//! into `inputs_embeds`; Qwen2-VL's also takes every cache slot's three positions
//! (`rope_positions`). Both are the same tensors every call, so every runtime's in-place
//! generation loop runs a multimodal prompt with fixed inputs only.

use hfexport_core::ops::{Activation, BinaryOp, UnaryOp};
use hfexport_core::plan::{CacheMode, ComponentSpec, Entry, Exit, Planned, Positions, Role};
use hfexport_core::{DType, Dim, Op, Tensor, ValueId};

use crate::config::{ModelConfig, VisionConfig};
use crate::decoder::{max_context, BuildOptions, Decoder, LayerInputs, Vb, Weights};
use crate::error::{ModelError, Result};
use crate::families::{clip::CLIP_VISION, qwen2_vl::QWEN2_VL_VISION, Architecture};
use crate::layout::{TowerKind, VisionLayout};

/// Name of the decode input holding the projected image rows (docs/io-contracts.md).
pub const IMAGE_EMBEDS: &str = "image_embeds";
/// Name of a Qwen2-VL decode's input holding every cache slot's multimodal positions.
pub const ROPE_POSITIONS: &str = "rope_positions";

/// The `image_encoder` and `multi_modal_projector` components.
pub(crate) fn image_components(
    cfg: &ModelConfig,
    arch: &Architecture,
    weights: &dyn Weights,
    opts: &BuildOptions,
) -> Result<Vec<Planned>> {
    let (Some(v), Some(layout)) = (cfg.vision.as_deref(), arch.layout.vision) else {
        return Err(ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: format!("{} has no vision tower", cfg.architecture),
        });
    };
    match layout.kind {
        TowerKind::Clip => {
            Ok(vec![image_encoder(v, layout, weights, opts)?, projector(cfg, v, layout, weights, opts)?])
        }
        TowerKind::Merged { merger_norm } => {
            Ok(vec![merged_image_encoder(cfg, v, layout, merger_norm, weights, opts)?])
        }
    }
}

fn spec(name: &str, role: Role, entry: Entry) -> ComponentSpec {
    ComponentSpec {
        name: name.into(),
        role,
        entry,
        exit: Exit::Embeddings,
        positions: Positions::None,
        cache: CacheMode::None,
    }
}

/// Rows per image the tower returns: the patches, and the CLS position under `full`.
pub fn image_rows(v: &VisionConfig) -> usize {
    let patches = v.tower.encoder.as_ref().and_then(|e| e.image.as_ref()).map_or(0, |i| i.patches());
    patches + usize::from(v.keep_cls)
}

/// `pixel_values` `[batch, channels, height, width]` -> `image_features`
/// `[batch, rows, tower hidden x feature layers]`.
fn image_encoder(
    v: &VisionConfig,
    layout: &'static VisionLayout,
    weights: &dyn Weights,
    opts: &BuildOptions,
) -> Result<Planned> {
    let tower_arch = Architecture { layout: *layout.tower, ..CLIP_VISION };
    let enc = layout.tower.encoder.expect("a vision tower is an image encoder");
    let mut e = Decoder::new(&v.tower, &tower_arch, weights, opts, "image_encoder");
    let act = e.activation()?;
    let root = e.root();
    let (mut h, _, shared, _) = e.patch_inputs(&root, &enc, "batch")?;
    let deepest = v.feature_layers.iter().copied().max().unwrap_or(0);
    let layers = root.pp(layout.tower.layers);
    let mut states = vec![h];
    for i in 0..deepest {
        h = e.decoder_layer(&layers.pp(i), i, h, &shared, act)?;
        states.push(h);
    }
    let tokens = image_rows(v) + usize::from(!v.keep_cls);
    let mut features = vec![];
    for (k, &layer) in v.feature_layers.iter().enumerate() {
        let x = match v.keep_cls {
            true => states[layer],
            false => {
                let slice = Op::Slice { axis: 1, start: Dim::konst(1), end: Dim::from(tokens) };
                e.op(&format!("features.{k}.patches"), slice, &[states[layer]])?
            }
        };
        features.push(x);
    }
    let out = match features[..] {
        [one] => one,
        _ => e.op("features", Op::Concat { axis: 2 }, &features)?,
    };
    e.g.add_output("image_features", out)?;
    Ok(Planned { spec: spec("image_encoder", Role::ImageEncoder, Entry::PixelValues), graph: e.g })
}

/// `image_features` -> `image_embeds` `[batch, rows, text hidden]`: `linear_2(act(linear_1(x)))`.
fn projector(
    cfg: &ModelConfig,
    v: &VisionConfig,
    layout: &'static VisionLayout,
    weights: &dyn Weights,
    opts: &BuildOptions,
) -> Result<Planned> {
    let arch = Architecture { layout: *layout.tower, ..CLIP_VISION };
    let mut d = Decoder::new(cfg, &arch, weights, opts, "multi_modal_projector");
    let (hs, width) = (cfg.hidden_size, v.tower.hidden_size * v.feature_layers.len());
    let batch = Dim::sym(&d.g.symbols.declare("batch", 1, opts.max_batch)?);
    let shape = vec![batch, Dim::from(image_rows(v)), Dim::from(width)];
    let x = d.g.add_input("image_features", opts.dtype, shape)?;
    let [first, second] = layout.projector;
    let root = projector_root(layout, weights);
    let act = Activation::from_hf(&v.projector_act).ok_or_else(|| ModelError::Config {
        path: "config.json".into(),
        key: "projector_hidden_act".into(),
        msg: format!("`{}` is not supported; valid: {}", v.projector_act, Activation::NAMES.join(", ")),
    })?;
    let x = d.linear(&root.pp(first), hs, width, v.projector_bias, x)?;
    let x = d.op(&root.pp(first).name("act"), Op::Activate(act), &[x])?;
    let x = d.linear(&root.pp(second), hs, hs, v.projector_bias, x)?;
    d.g.add_output("image_embeds", x)?;
    Ok(Planned { spec: spec("multi_modal_projector", Role::Projector, Entry::Embeddings), graph: d.g })
}

/// Qwen2-VL's `image_encoder`: `pixel_values` f32 `[image_tokens, merge^2, channels x temporal x
/// patch x patch]` (the processor's `[patches, ...]` rows, grouped by the merged row they make),
/// `patch_positions` i64 `[image_tokens, merge^2, 2]` (each patch's row and column in its image,
/// see [`patch_inputs`]) and `frame_ids` i64 `[image_tokens, merge^2]` (patches attend within
/// their frame) -> `image_embeds` `[image_tokens, hidden]`.
fn merged_image_encoder(
    cfg: &ModelConfig,
    v: &VisionConfig,
    layout: &'static VisionLayout,
    merger_norm: &str,
    weights: &dyn Weights,
    opts: &BuildOptions,
) -> Result<Planned> {
    let m = v.merge.as_ref().expect("a merged tower has its merge config");
    let tower_arch = Architecture { layout: *layout.tower, ..QWEN2_VL_VISION };
    let t = &v.tower;
    let mut e = Decoder::new(t, &tower_arch, weights, opts, "image_encoder");
    let act = e.activation()?;
    let (dtype, hs, group) = (opts.dtype, t.hidden_size, m.spatial_merge_size * m.spatial_merge_size);
    let tokens = Dim::sym(&e.g.symbols.declare("image_tokens", 1, 1 << 16)?);
    let patches = tokens.mul(&Dim::from(group));
    let d = Dim::from;
    // every input grouped by merged row: the processor's arrays viewed [tokens, merge^2, ...]
    let grouped = |rest: &[usize]| [vec![tokens.clone(), d(group)], rest.iter().map(|&r| d(r)).collect()].concat();
    let x = e.g.add_input("pixel_values", DType::F32, grouped(&[m.patch_values()]))?;
    let pos = e.g.add_input("patch_positions", DType::I64, grouped(&[2]))?;
    let frames = e.g.add_input("frame_ids", DType::I64, grouped(&[]))?;
    let mut x = e.op("pixel_values.rows", Op::Reshape { shape: vec![patches.clone(), d(m.patch_values())] }, &[x])?;
    let pos = e.op("patch_positions.rows", Op::Reshape { shape: vec![patches.clone(), d(2)] }, &[pos])?;
    let frames = e.op("frame_ids.rows", Op::Reshape { shape: vec![patches.clone()] }, &[frames])?;
    if dtype != DType::F32 {
        x = e.op("pixel_values.cast", Op::Cast(dtype), &[x])?;
    }
    let root = e.root();
    let vb = root.pp(layout.tower.embed);
    let (c, tp, p) = (m.channels, m.temporal_patch_size, m.patch_size);
    let w = e.weight(&vb, "weight", &[hs, c, tp, p, p])?;
    let w = e.op(&vb.name("flat_weight"), Op::Reshape { shape: vec![d(hs), d(m.patch_values())] }, &[w])?;
    let x = e.op(vb.path(), Op::Linear, &[x, w])?;
    let one = Dim::konst(1);
    let h = e.op("hidden", Op::Reshape { shape: vec![one.clone(), patches.clone(), d(hs)] }, &[x])?;
    let shared = e.frame_inputs(&patches, pos, frames)?;
    let layers = root.pp(layout.tower.layers);
    let mut h = h;
    for i in 0..t.num_hidden_layers {
        h = e.decoder_layer(&layers.pp(i), i, h, &shared, act)?;
    }
    let h = e.norm(&root.pp(merger_norm), hs, h)?;
    let h = e.op("merger.grouped", Op::Reshape { shape: vec![tokens, d(hs * group)] }, &[h])?;
    let mroot = projector_root(layout, weights);
    let [first, second] = layout.projector;
    let h = e.linear(&mroot.pp(first), hs * group, hs * group, true, h)?;
    let h = e.op(&mroot.pp(first).name("act"), Op::Activate(Activation::Gelu), &[h])?;
    let h = e.linear(&mroot.pp(second), cfg.hidden_size, hs * group, true, h)?;
    e.g.add_output(IMAGE_EMBEDS, h)?;
    Ok(Planned { spec: spec("image_encoder", Role::ImageEncoder, Entry::PatchRows), graph: e.g })
}

/// The first of the projector's roots under which its first linear exists (the first root when
/// none does, so the error names it).
fn projector_root(layout: &VisionLayout, weights: &dyn Weights) -> Vb {
    let roots = layout.projector_roots;
    let found = roots.iter().map(|r| Vb::root(r)).find(|r| weights.has(&r.pp(layout.projector[0]).name("weight")));
    found.unwrap_or_else(|| Vb::root(roots[0]))
}

/// Per-patch host inputs of a merged tower for images of `grids` `(t, h, w)` (in patches):
/// each patch's `(row, column)` in its image, laid out block-major over `merge x merge` blocks
/// as the processor orders patches (repeated per frame), and the index of its frame.
pub fn patch_inputs(grids: &[[usize; 3]], merge: usize) -> (Vec<i64>, Vec<i64>) {
    let (mut positions, mut frames) = (vec![], vec![]);
    let mut frame = 0;
    for &[t, h, w] in grids {
        for _ in 0..t {
            for bh in 0..h / merge {
                for bw in 0..w / merge {
                    for ih in 0..merge {
                        for iw in 0..merge {
                            positions.extend([(bh * merge + ih) as i64, (bw * merge + iw) as i64]);
                            frames.push(frame);
                        }
                    }
                }
            }
            frame += 1;
        }
    }
    (positions, frames)
}

/// Qwen2-VL's multimodal positions (`get_rope_index`) of a prompt whose image placeholders are
/// already expanded (`t x h/m x w/m` per image of grid `(t, h, w)`), `[3, slots]` row-major:
/// text tokens advance all three rows together; an image's tokens get its temporal, row and
/// column indices offset by the position before it, and the text after resumes at
/// `max(h, w) / m` past that; slots after the prompt (the generated tokens) continue from
/// the prompt's largest position plus one. An error when the placeholders do not fit the grids.
pub fn mrope_positions(
    prompt: &[i64],
    image_token: i64,
    grids: &[[usize; 3]],
    merge: usize,
    slots: usize,
) -> std::result::Result<Vec<i64>, String> {
    let mut rows: [Vec<i64>; 3] = [vec![], vec![], vec![]];
    let (mut i, mut next, mut images) = (0, 0i64, grids.iter());
    while i < prompt.len() {
        if prompt[i] != image_token {
            rows.iter_mut().for_each(|r| r.push(next));
            (i, next) = (i + 1, next + 1);
            continue;
        }
        let [t, h, w] = *images.next().ok_or("the prompt has more image tokens than the images give")?;
        let (gh, gw) = (h / merge, w / merge);
        let n = t * gh * gw;
        if prompt[i..].iter().take(n).filter(|&&x| x == image_token).count() != n {
            return Err(format!("an image of {t}x{h}x{w} patches needs {n} image tokens in a row"));
        }
        for ti in 0..t {
            for hi in 0..gh {
                for wi in 0..gw {
                    rows[0].push(next + ti as i64);
                    rows[1].push(next + hi as i64);
                    rows[2].push(next + wi as i64);
                }
            }
        }
        i += n;
        next += gh.max(gw) as i64;
    }
    if images.next().is_some() {
        return Err("the prompt has fewer image tokens than the images give".into());
    }
    let start = rows.iter().flatten().copied().max().map_or(0, |m| m + 1);
    let len = prompt.len();
    if len > slots {
        return Err(format!("the prompt of {len} tokens is longer than the cache of {slots} slots"));
    }
    for r in rows.iter_mut() {
        r.extend((0..(slots - len) as i64).map(|k| start + k));
    }
    Ok(rows.concat())
}

impl Decoder<'_> {
    /// A vision-language decode's `image_embeds` `[image_tokens, hidden]` input (`None` for a
    /// text model).
    pub(crate) fn image_input(&mut self) -> Result<Option<ValueId>> {
        if self.cfg.vision.is_none() {
            return Ok(None);
        }
        let rows = Dim::sym(&self.g.symbols.declare("image_tokens", 1, max_context(self.cfg))?);
        let shape = vec![rows, Dim::from(self.cfg.hidden_size)];
        Ok(Some(self.g.add_input(IMAGE_EMBEDS, self.opts.dtype, shape)?))
    }

    /// The token embeddings of `ids` `[1, q]` with the rows of `image` put, in order, where
    /// `ids` holds the image placeholder (its own id is never looked up: it may lie past the
    /// vocabulary). A placeholder's rank among the prompt's is a cumulative count.
    pub(crate) fn embed_with_image(
        &mut self,
        root: &Vb,
        ids: ValueId,
        image: ValueId,
        positions: ValueId,
    ) -> Result<(ValueId, ValueId)> {
        let v = self.cfg.vision.as_deref().expect("an image input comes with a vision config");
        let shape = self.g.info(ids).shape.clone();
        let (b, q) = (shape[0].clone(), shape[1].clone());
        let int = |x: i64| Op::Constant(Tensor::int(DType::I64, vec![], vec![x]).expect("a scalar"));
        let token = self.op("image.token_id", int(v.image_token_id), &[])?;
        let is_image = self.op("image.placeholders", Op::Binary(BinaryOp::Equal), &[ids, token])?;
        let zero = self.op("image.zero", int(0), &[])?;
        let text_ids = self.op("image.text_ids", Op::Where, &[is_image, zero, ids])?;
        let (h, table) = self.embed(root, text_ids, positions)?;
        let one = Dim::konst(1);
        let counted = self.op("image.placeholders_i64", Op::Cast(DType::I64), &[is_image])?;
        let count = self.cumulative_sum("image.count", counted)?;
        let first = self.op("image.one", int(1), &[])?;
        let rank = self.op("image.rank", Op::Binary(BinaryOp::Sub), &[count, first])?;
        let rank = self.op("image.row_ids", Op::Where, &[is_image, rank, zero])?;
        let rows = self.op("image.embeds", Op::Gather { axis: 0 }, &[image, rank])?;
        let at = self.op("image.placeholders_3d", Op::Reshape { shape: vec![b, q, one] }, &[is_image])?;
        Ok((self.op("image.merged", Op::Where, &[at, rows, h])?, table))
    }

    /// The layer inputs of a merged tower: the 2-D rotary tables of `positions` `[patches, 2]`
    /// (`cos`/`sin` of `cat(row x f, column x f)` twice over, `f` the `head_dim / 4`
    /// frequencies `theta^(-2i / (head_dim / 2))`, in f32) and the mask letting each patch see
    /// the patches of its frame.
    fn frame_inputs(&mut self, patches: &Dim, positions: ValueId, frames: ValueId) -> Result<LayerInputs> {
        let rope = self.cfg.rope.clone();
        let quarter = rope.dim / 4;
        let half = (rope.dim / 2) as f32;
        let base = rope.theta as f32;
        let inv: Vec<f32> = (0..quarter).map(|i| 1.0 / base.powf((2 * i) as f32 / half)).collect();
        let inv = self.op("rotary.inv_freq", Op::Constant(Tensor::f32(vec![1, quarter], inv)?), &[])?;
        let pos = self.op("rotary.positions", Op::Cast(DType::F32), &[positions])?;
        let mut parts = vec![];
        for (k, name) in ["rows", "cols"].into_iter().enumerate() {
            let (a, b) = (Dim::konst(k as i64), Dim::konst(k as i64 + 1));
            let x = self.op(&format!("rotary.{name}"), Op::Slice { axis: 1, start: a, end: b }, &[pos])?;
            parts.push(self.op(&format!("rotary.{name}.freqs"), Op::Binary(BinaryOp::Mul), &[x, inv])?);
        }
        let freqs = self.op("rotary.freqs", Op::Concat { axis: 1 }, &parts)?;
        let emb = self.op("rotary.emb", Op::Concat { axis: 1 }, &[freqs, freqs])?;
        let shape = vec![Dim::konst(1), patches.clone(), Dim::from(rope.dim)];
        let mut tables = vec![];
        for (name, f) in [("cos", UnaryOp::Cos), ("sin", UnaryOp::Sin)] {
            let t = self.op(&format!("rotary.{name}"), Op::Unary(f), &[emb])?;
            let mut t = self.op(&format!("rotary.{name}_3d"), Op::Reshape { shape: shape.clone() }, &[t])?;
            if self.opts.dtype != DType::F32 {
                t = self.op(&format!("rotary.{name}_cast"), Op::Cast(self.opts.dtype), &[t])?;
            }
            tables.push(t);
        }
        let one = Dim::konst(1);
        let q = self.op(
            "mask.query_frames",
            Op::Reshape { shape: vec![one.clone(), one.clone(), patches.clone(), one.clone()] },
            &[frames],
        )?;
        let k = self.op(
            "mask.key_frames",
            Op::Reshape { shape: vec![one.clone(), one.clone(), one, patches.clone()] },
            &[frames],
        )?;
        let mask = self.op("mask", Op::Binary(BinaryOp::Equal), &[q, k])?;
        let iota = self.op("positions", Op::Iota { len: patches.clone() }, &[])?;
        let ids = self.op("position_ids", Op::Reshape { shape: vec![Dim::konst(1), patches.clone()] }, &[iota])?;
        let mut shared = LayerInputs::without_rope(mask, ids);
        shared.ropes = vec![(rope, tables[0], tables[1])];
        Ok(shared)
    }

    /// A decode's multimodal rotary tables (Qwen2-VL): `rope_positions` i64 `[3, cache_len]`
    /// (every slot's temporal, height and width position, [`mrope_positions`]; the same tensor
    /// every call) gathered at the slots `positions`, the default rope of each row, and the
    /// frequencies taken from the rows by `mrope_section` (chunk `i` of the doubled sections
    /// from row `i % 3`), as `apply_multimodal_rotary_pos_emb`.
    pub(crate) fn mrope_rotary(
        &mut self,
        positions: ValueId,
        slots: &Dim,
    ) -> Result<Vec<(hfexport_core::RopeConfig, ValueId, ValueId)>> {
        let v = self.cfg.vision.as_deref().expect("M-RoPE comes with a vision config");
        let section = v.mrope_section.clone();
        let rope = self.cfg.rope.clone();
        let table = self.g.add_input(ROPE_POSITIONS, DType::I64, vec![Dim::konst(3), slots.clone()])?;
        let q = self.g.info(positions).shape[1].clone();
        let rows = self.op("mrope.positions", Op::Gather { axis: 1 }, &[table, positions])?;
        let mut cos_sin: Vec<(ValueId, ValueId)> = vec![];
        for r in 0..3 {
            let (a, b) = (Dim::konst(r), Dim::konst(r + 1));
            let x = self.op(&format!("mrope.row{r}"), Op::Slice { axis: 0, start: a, end: b }, &[rows])?;
            let x =
                self.op(&format!("mrope.row{r}_2d"), Op::Reshape { shape: vec![Dim::konst(1), q.clone()] }, &[x])?;
            let cs =
                self.g.add_node(&format!("model.rotary_emb.row{r}"), Op::RotaryCosSin { rope: rope.clone() }, &[x])?;
            cos_sin.push((cs[0], cs[1]));
        }
        let mut tables = vec![];
        for (which, name) in [(0, "cos"), (1, "sin")] {
            let (mut parts, mut at) = (vec![], 0i64);
            for (i, &len) in section.iter().chain(&section).enumerate() {
                let src = if which == 0 { cos_sin[i % 3].0 } else { cos_sin[i % 3].1 };
                let (a, b) = (Dim::konst(at), Dim::konst(at + len as i64));
                parts.push(self.op(&format!("mrope.{name}.{i}"), Op::Slice { axis: 2, start: a, end: b }, &[src])?);
                at += len as i64;
            }
            let mut t = self.op(&format!("mrope.{name}"), Op::Concat { axis: 2 }, &parts)?;
            if self.opts.dtype != DType::F32 {
                t = self.op(&format!("mrope.{name}_cast"), Op::Cast(self.opts.dtype), &[t])?;
            }
            tables.push(t);
        }
        Ok(vec![(rope, tables[0], tables[1])])
    }
}
