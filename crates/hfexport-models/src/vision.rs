//! The image side of a vision-language model (LLaVA): the `image_encoder` and
//! `multi_modal_projector` components, and the merge of their image embeddings into a decode
//! graph's token embeddings.
//!
//! The tower is an image encoder built from the block library like ViT
//! ([`Decoder::patch_inputs`], pre-LN layers) from its own config ([`VisionConfig::tower`]); it
//! stops at the deepest hidden state `vision_feature_layer` asks for and returns those states
//! (CLS dropped by the `default` strategy), concatenated. The projector is two linears with an
//! activation between. The decode graph takes the projected rows as `image_embeds`
//! `[image_tokens, hidden]` and puts them, in order, where `input_ids` holds the image
//! placeholder, as `LlavaModel` scatters them into `inputs_embeds`; so every runtime's
//! generation loop runs a multimodal prompt with only one more fixed input.

use hfexport_core::ops::{Activation, BinaryOp};
use hfexport_core::plan::{CacheMode, ComponentSpec, Entry, Exit, Planned, Positions, Role};
use hfexport_core::{DType, Dim, Op, Tensor, ValueId};

use crate::arch::{self, Architecture, VisionLayout};
use crate::blocks::Vb;
use crate::builder::{max_context, BuildOptions, Decoder, Weights};
use crate::config::{ModelConfig, VisionConfig};
use crate::error::{ModelError, Result};

/// Name of the decode input holding the projected image rows (docs/io-contracts.md).
pub const IMAGE_EMBEDS: &str = "image_embeds";

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
    Ok(vec![image_encoder(v, layout, weights, opts)?, projector(cfg, v, layout, weights, opts)?])
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
    let tower_arch = Architecture { layout: *layout.tower, ..arch::CLIP_VISION };
    let enc = layout.tower.encoder.expect("a vision tower is an image encoder");
    let mut e = Decoder::new(&v.tower, &tower_arch, weights, opts, "image_encoder");
    let act = e.activation()?;
    let root = e.root();
    let (mut h, _, shared, _) = e.patch_inputs(&root, &enc)?;
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
    let arch = Architecture { layout: *layout.tower, ..arch::CLIP_VISION };
    let mut d = Decoder::new(cfg, &arch, weights, opts, "multi_modal_projector");
    let (hs, width) = (cfg.hidden_size, v.tower.hidden_size * v.feature_layers.len());
    let batch = Dim::sym(&d.g.symbols.declare("batch", 1, opts.max_batch)?);
    let shape = vec![batch, Dim::from(image_rows(v)), Dim::from(width)];
    let x = d.g.add_input("image_features", opts.dtype, shape)?;
    let [first, second] = layout.projector;
    let root = layout
        .projector_roots
        .iter()
        .map(|r| Vb::root(r))
        .find(|r| weights.has(&r.pp(first).name("weight")))
        .unwrap_or_else(|| Vb::root(layout.projector_roots[0]));
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
    /// vocabulary). A placeholder's rank among the prompt's is a cumulative count, a product
    /// with an upper triangular matrix of ones (exact in f32 up to 2^24 tokens).
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
        let counted = self.op("image.placeholders_f32", Op::Cast(DType::F32), &[is_image])?;
        let iota = self.op("image.positions", Op::Iota { len: q.clone() }, &[])?;
        let rows = self.op("image.rows", Op::Reshape { shape: vec![q.clone(), one.clone()] }, &[iota])?;
        let cols = self.op("image.cols", Op::Reshape { shape: vec![one.clone(), q.clone()] }, &[iota])?;
        let upper = self.op("image.upper", Op::Binary(BinaryOp::LessEqual), &[rows, cols])?;
        let upper = self.op("image.upper_f32", Op::Cast(DType::F32), &[upper])?;
        let count = self.op("image.count", Op::MatMul, &[counted, upper])?;
        let count = self.op("image.count_i64", Op::Cast(DType::I64), &[count])?;
        let first = self.op("image.one", int(1), &[])?;
        let rank = self.op("image.rank", Op::Binary(BinaryOp::Sub), &[count, first])?;
        let rank = self.op("image.row_ids", Op::Where, &[is_image, rank, zero])?;
        let rows = self.op("image.embeds", Op::Gather { axis: 0 }, &[image, rank])?;
        let at = self.op("image.placeholders_3d", Op::Reshape { shape: vec![b, q, one] }, &[is_image])?;
        Ok((self.op("image.merged", Op::Where, &[at, rows, h])?, table))
    }
}
