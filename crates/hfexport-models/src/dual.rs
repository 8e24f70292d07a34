//! Image-text dual encoders (CLIP, SigLIP): a text tower and an image tower, each an encoder of
//! the block library over its own config (`text_config`, `vision_config`), pooled (CLIP: the
//! end-of-text token and the class token; SigLIP: the last position through the text `head`,
//! and an attention probe over the image) and projected into one space where CLIP has
//! projections, where the zero-shot head scores every image against every text.
//!
//! The components, with transformers' names:
//! - `zero-shot-image-classification`, one `model`: `input_ids`, `attention_mask` int64
//!   `[batch, sequence]` and `pixel_values` `[image_batch, channels, height, width]` (the two
//!   batches independent, as the processor makes them) to `logits_per_image`
//!   `[image_batch, batch]`, `logits_per_text` `[batch, image_batch]`, `text_embeds` and
//!   `image_embeds` (normalised), as `CLIPModel.forward` returns them (SigLIP adds its
//!   `logit_bias` to the scaled cosines).
//! - `feature-extraction`, `text_model` (`text_embeds`, `last_hidden_state`) and `vision_model`
//!   (`image_embeds`, `last_hidden_state`): `get_text_features` and `get_image_features`
//!   (projected, not normalised), for a retrieval index built from one side at a time.

use hfexport_core::ops::{BinaryOp, UnaryOp};
use hfexport_core::plan::{ComponentSpec, Entry, Exit, Planned, Role};
use hfexport_core::{Dim, Op, ValueId};

use crate::config::ModelConfig;
use crate::decoder::{BuildOptions, Decoder, Vb, Weights};
use crate::error::{ModelError, Result};
use crate::families::Architecture;
use crate::layout::DualLayout;
use crate::task::Task;

/// The components of a dual encoder's `task` (see the module doc).
pub(crate) fn components(
    cfg: &ModelConfig,
    arch: &Architecture,
    weights: &dyn Weights,
    task: Task,
    opts: &BuildOptions,
) -> Result<Vec<Planned>> {
    let (Some(dual), Some(d)) = (arch.layout.dual, cfg.dual.as_deref()) else {
        return Err(ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: format!("{} is not an image-text dual encoder", cfg.architecture),
        });
    };
    let vision_arch = dual.vision;
    let towers = Towers { cfg, arch, vision: &d.vision, vision_arch, dual, weights, opts };
    match task {
        Task::ZeroShotImageClassification => Ok(vec![towers.zero_shot()?]),
        Task::FeatureExtraction => Ok(vec![
            towers.tower_model(("text_model", "text_embeds", Entry::TokenIds), (cfg, arch))?,
            towers.tower_model(("vision_model", "image_embeds", Entry::PixelValues), (&d.vision, vision_arch))?,
        ]),
        _ => Err(Decoder::new(cfg, arch, weights, opts, "model").task_error(task)),
    }
}

/// Both towers' configs and layouts, and what the components are built with.
struct Towers<'a> {
    cfg: &'a ModelConfig,
    arch: &'a Architecture,
    vision: &'a ModelConfig,
    vision_arch: &'a Architecture,
    dual: &'a DualLayout,
    weights: &'a dyn Weights,
    opts: &'a BuildOptions,
}

fn spec(name: &str, role: Role, entry: Entry) -> ComponentSpec {
    let exit = if role == Role::Forward { Exit::Logits } else { Exit::Embeddings };
    ComponentSpec { name: name.into(), role, entry, exit, ..ComponentSpec::forward() }
}

impl Towers<'_> {
    /// A tower's projection into the shared space (its layout's), with its width.
    fn projection(&self, tower: &Architecture) -> Option<(&'static str, usize)> {
        let width = self.cfg.dual.as_ref().and_then(|d| d.projection_dim)?;
        tower.layout.encoder.and_then(|e| e.projection).map(|p| (p.linear, width))
    }

    /// A tower as a component of its own (`text_model`, `vision_model`): its pooled state
    /// projected (output `embeds`), and its final states.
    fn tower_model(
        &self,
        (name, embeds, entry): (&str, &str, Entry),
        (cfg, arch): (&ModelConfig, &Architecture),
    ) -> Result<Planned> {
        let mut t = Decoder::new(cfg, arch, self.weights, self.opts, name);
        let (last, e) = t.tower(self.projection(arch), "batch")?;
        t.g.add_output(embeds, e)?;
        t.g.add_output("last_hidden_state", last)?;
        Ok(Planned { spec: spec(name, Role::Tower, entry), graph: t.g })
    }

    /// `model`: both towers in one graph and the scaled cosine similarities between them.
    fn zero_shot(&self) -> Result<Planned> {
        let mut t = Decoder::new(self.cfg, self.arch, self.weights, self.opts, "model");
        let (_, text) = t.tower(self.projection(self.arch), "batch")?;
        let mut v = Decoder::new(self.vision, self.vision_arch, self.weights, self.opts, "model").continuing(t.g);
        let (_, image) = v.tower(self.projection(self.vision_arch), "image_batch")?;
        let text = v.l2_normalize("text_embeds.normalized", text, None)?;
        let image = v.l2_normalize("image_embeds.normalized", image, None)?;
        let scale = v.stored_scalar(self.dual.logit_scale)?;
        let scale = v.op("logit_scale.exp", Op::Unary(UnaryOp::Exp), &[scale])?;
        let image_t = v.op("image_embeds.transposed", Op::Transpose { perm: vec![1, 0] }, &[image])?;
        let cosines = v.op("cosines", Op::MatMul, &[text, image_t])?;
        let mut logits = v.op("logits_per_text", Op::Binary(BinaryOp::Mul), &[cosines, scale])?;
        if let Some(bias) = self.dual.logit_bias {
            let bias = v.stored_scalar(bias)?;
            logits = v.op("logits_per_text.biased", Op::Binary(BinaryOp::Add), &[logits, bias])?;
        }
        let per_image = v.op("logits_per_image", Op::Transpose { perm: vec![1, 0] }, &[logits])?;
        v.g.add_output("logits_per_image", per_image)?;
        v.g.add_output("logits_per_text", logits)?;
        v.g.add_output("text_embeds", text)?;
        v.g.add_output("image_embeds", image)?;
        let graph = v.g;
        Ok(Planned { spec: spec("model", Role::Forward, Entry::TextAndPixels), graph })
    }
}

impl Decoder<'_> {
    /// A tower over its inputs (`input_ids` and `attention_mask`, or `pixel_values` whose batch
    /// is the symbol `batch` names): its final states and its pooled state, projected where
    /// the model has a `projection` (its name and width).
    fn tower(&mut self, projection: Option<(&str, usize)>, batch: &str) -> Result<(ValueId, ValueId)> {
        let enc = self.arch.layout.encoder.expect("a dual encoder's tower is an encoder");
        let root = self.root();
        let (last, _, _) = self.final_states(&root, &enc, batch)?;
        let pooled = self.pooled(&root, enc.pooler, last)?.expect("a dual encoder's towers pool");
        let embeds = self.projected(projection, pooled)?;
        Ok((last, embeds))
    }

    /// `x · projectionᵀ` into the shared space (`projection_dim` wide), or `x` itself where the
    /// tower's own head ends in it.
    fn projected(&mut self, projection: Option<(&str, usize)>, x: ValueId) -> Result<ValueId> {
        let Some((name, out)) = projection else { return Ok(x) };
        let width = self.cfg.hidden_size;
        self.linear(&Vb::root(name), out, width, false, x)
    }

    /// A learned scalar, stored `[]` (CLIP) or `[1]` (SigLIP).
    fn stored_scalar(&mut self, name: &str) -> Result<ValueId> {
        let one = self.weights.info(name).is_some_and(|i| i.shape.len() == 1);
        self.weight(&Vb::root(""), name, if one { &[1] } else { &[] })
    }

    /// SigLIP's attention pooling of `h` `[batch, tokens, hidden]` to `[batch, hidden]`: the
    /// learned `probe` attends over the states (`attention`, a `torch.nn.MultiheadAttention`
    /// with its packed `in_proj_weight`), then `h + mlp(layernorm(h))` at the probe.
    pub(crate) fn attention_probe(&mut self, vb: &Vb, h: ValueId) -> Result<ValueId> {
        let (hs, heads) = (self.cfg.hidden_size, self.cfg.num_attention_heads);
        let hd = hs / heads;
        let shape = self.g.info(h).shape.clone();
        let (batch, tokens) = (shape[0].clone(), shape[1].clone());
        let d = |v: usize| Dim::from(v);
        let probe = self.weight(vb, "probe", &[1, 1, hs])?;
        let att = vb.pp("attention");
        let w = self.weight(&att, "in_proj_weight", &[3 * hs, hs])?;
        let b = self.weight(&att, "in_proj_bias", &[3 * hs])?;
        let mut qkv = vec![];
        for (i, (part, x, len)) in
            [("q", probe, d(1)), ("k", h, tokens.clone()), ("v", h, tokens.clone())].into_iter().enumerate()
        {
            let rows = Op::Slice { axis: 0, start: d(i * hs), end: d((i + 1) * hs) };
            let wi = self.op(&att.name(format!("{part}_weight")), rows.clone(), &[w])?;
            let bi = self.op(&att.name(format!("{part}_bias")), rows, &[b])?;
            let y = self.op(&att.name(format!("{part}_proj")), Op::Linear, &[x, wi, bi])?;
            let lead = if part == "q" { d(1) } else { batch.clone() };
            let y = self.op(
                &att.name(format!("{part}_heads")),
                Op::Reshape { shape: vec![lead, len, d(heads), d(hd)] },
                &[y],
            )?;
            qkv.push(self.op(&att.name(format!("{part}_first")), Op::Transpose { perm: vec![0, 2, 1, 3] }, &[y])?);
        }
        let kt = self.op(&att.name("k_transposed"), Op::Transpose { perm: vec![0, 1, 3, 2] }, &[qkv[1]])?;
        let scores = self.op(&att.name("scores"), Op::MatMul, &[qkv[0], kt])?;
        let scale = self.scalar(&att.name("scale"), 1.0 / (hd as f64).sqrt())?;
        let scores = self.op(&att.name("scaled"), Op::Binary(BinaryOp::Mul), &[scores, scale])?;
        let p = self.op(&att.name("softmax"), Op::Softmax { axis: 3 }, &[scores])?;
        let o = self.op(&att.name("context"), Op::MatMul, &[p, qkv[2]])?;
        let o = self.op(&att.name("context_rows"), Op::Transpose { perm: vec![0, 2, 1, 3] }, &[o])?;
        let o = self.op(&att.name("context_flat"), Op::Reshape { shape: vec![batch.clone(), d(hs)] }, &[o])?;
        let o = self.linear(&att.pp("out_proj"), hs, hs, true, o)?;
        let x = self.norm(&vb.pp("layernorm"), hs, o)?;
        let act = self.activation()?;
        let mlp = vb.pp("mlp");
        let x = self.linear(&mlp.pp("fc1"), self.cfg.intermediate_size, hs, true, x)?;
        let x = self.op(&mlp.name("act"), Op::Activate(act), &[x])?;
        let x = self.linear(&mlp.pp("fc2"), hs, self.cfg.intermediate_size, true, x)?;
        self.op(&vb.name("residual"), Op::Binary(BinaryOp::Add), &[o, x])
    }
}
