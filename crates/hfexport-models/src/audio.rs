//! Speech encoders over raw audio (wav2vec2, HuBERT, WavLM, Data2VecAudio): `input_values` `[batch, samples]`
//! (float32, as the feature extractor leaves them) through the convolutional feature encoder
//! into frames, a projection to the hidden size, the weight-normed grouped positional
//! convolution added, then the library's encoder layers.
//!
//! The audio length stays symbolic: each strided convolution's output length is a floor of
//! the input's (`crate`-wide `Dim` floors), so one export takes any clip at least one
//! receptive field long. A checkpoint whose feature extractor returns an `attention_mask`
//! (`[batch, samples]`, the layer-normed checkpoints') takes it: a frame is kept when every
//! sample it reads is (`j * hop + receptive_field <= length`, the integer form of transformers'
//! `_get_feat_extract_output_lengths`), the kept frames' states alone enter the positional
//! convolution, the layers attend to kept frames only, and the classifier averages them.
//! Without one, as optimum exports these models, a batch of clips is zero-padded to one length
//! and every frame attends to every frame, which is what transformers computes without a mask
//! (the group-norm checkpoints are meant to be run so). The layers are post-norm, or pre-norm
//! with the encoder's norm after them when `do_stable_layer_norm` (the config's
//! `post_residual_norms`, as OPT's).

use hfexport_core::ops::{BinaryOp, ReduceKind, UnaryOp, Window};
use hfexport_core::{DType, Dim, Op, ValueId};

use crate::config::{AudioConfig, FeatureNorm};
use crate::decoder::{Decoder, Vb};
use crate::encoder::EncoderInputs;
use crate::error::{ModelError, Result};
use crate::layout::AudioLayout;

/// The longest clip an export accepts, in samples: ten minutes at 16 kHz.
pub const MAX_SAMPLES: i64 = 16_000 * 600;

/// The epsilon of `nn.GroupNorm` and `nn.LayerNorm` inside the feature encoder, which the
/// config's `layer_norm_eps` does not set.
const FEATURE_NORM_EPS: f64 = 1e-5;

impl Decoder<'_> {
    /// The audio's frames `[batch, frames, hidden]` in front of the layers, and their inputs
    /// (every frame visible to every other).
    pub(crate) fn audio_inputs(&mut self, root: &Vb, names: &AudioLayout) -> Result<EncoderInputs> {
        let audio = self.audio_config()?.clone();
        let hs = self.cfg.hidden_size;
        let batch = Dim::sym(&self.g.symbols.declare("batch", 1, self.opts.max_batch)?);
        let field = audio.receptive_field() as i64;
        let samples = Dim::sym(&self.g.symbols.declare("samples", field, MAX_SAMPLES.max(field))?);
        let mut x = self.g.add_input("input_values", DType::F32, vec![batch.clone(), samples.clone()])?;
        let attention_mask = match audio.attention_mask {
            true => Some(self.g.add_input("attention_mask", DType::I64, vec![batch.clone(), samples.clone()])?),
            false => None,
        };
        if self.opts.dtype != DType::F32 {
            x = self.op("input_values.cast", Op::Cast(self.opts.dtype), &[x])?;
        }
        let x = self.op("input_values.channel", Op::Reshape { shape: vec![batch, Dim::konst(1), samples] }, &[x])?;
        let features = self.feature_encoder(&root.pp(names.conv_layers), &audio, x)?;
        let mut h =
            self.op(&root.pp(names.conv_layers).name("frames"), Op::Transpose { perm: vec![0, 2, 1] }, &[features])?;
        let width = audio.convs.last().map_or(1, |c| c.channels);
        let projection = root.pp(names.projection);
        if audio.projection_norm {
            h = self.norm(&projection.pp("layer_norm"), width, h)?;
        }
        h = self.linear(&projection.pp("projection"), hs, width, true, h)?;
        let frames = self.g.info(h).shape[1].clone();
        let kept = attention_mask.map(|am| self.kept_frames(&audio, am, &frames)).transpose()?;
        if let Some(kept) = kept {
            let column = Op::Reshape { shape: vec![self.g.info(h).shape[0].clone(), frames.clone(), Dim::konst(1)] };
            let column = self.op("frames.kept_column", column, &[kept])?;
            let column = self.op("frames.kept_scale", Op::Cast(self.opts.dtype), &[column])?;
            h = self.op("frames.padding_zeroed", Op::Binary(BinaryOp::Mul), &[h, column])?;
        }
        let positions = self.positional_conv(&root.pp(names.pos_conv), &audio, h)?;
        h = self.op(&root.pp(names.pos_conv).name("added"), Op::Binary(BinaryOp::Add), &[h, positions])?;
        // post-norm layers: the encoder's norm comes before them (else it is the final norm)
        if self.cfg.post_residual_norms {
            h = self.norm(&root.pp(names.encoder_norm), hs, h)?;
        }
        let mut shared = self.all_visible(frames.clone())?;
        if let Some(kept) = kept {
            let b = self.g.info(h).shape[0].clone();
            let one = Dim::konst(1);
            shared.mask = self.op("mask.frames", Op::Reshape { shape: vec![b, one.clone(), one, frames] }, &[kept])?;
        }
        if let (Some(rel), Some(gated)) = (audio.relative_bias, names.gated_bias) {
            let at = shared.positions;
            shared.gated_bias = Some(self.relative_bias(&root.pp(gated.table), rel, (at, at), true)?);
        }
        // the heads' mask is over frames: 1 where kept
        let frame_mask = kept.map(|k| self.op("frames.kept_ids", Op::Cast(DType::I64), &[k])).transpose()?;
        Ok((h, None, shared, frame_mask))
    }

    /// Which frames `[batch, frames]` (bool) read only kept samples of `attention_mask`
    /// `[batch, samples]`: frame `j` ends at sample `j * hop + receptive_field`, which must be at
    /// most the row's kept count. A row shorter than one receptive field has an output length
    /// `L <= 0`, which transformers' `_get_feature_vector_attention_mask` uses as the index
    /// `L - 1` from the end: it keeps the frames `j < frames + L`, `(j - frames) * hop +
    /// receptive_field <= length` (all of them when `L` is 0), and so does this. In f32, exact
    /// for the up to 2^24 samples an export takes.
    fn kept_frames(&mut self, audio: &AudioConfig, attention_mask: ValueId, frames: &Dim) -> Result<ValueId> {
        let hop: usize = audio.convs.iter().map(|c| c.stride).product();
        let mask = self.op("frames.mask", Op::Cast(DType::F32), &[attention_mask])?;
        let sum = Op::Reduce { kind: ReduceKind::Sum, axes: vec![1], keep_dims: true };
        let lengths = self.op("frames.lengths", sum, &[mask])?;
        let iota = self.op("frames.index", Op::Iota { len: frames.clone() }, &[])?;
        let iota = self.op("frames.index_row", Op::Reshape { shape: vec![Dim::konst(1), frames.clone()] }, &[iota])?;
        let iota = self.op("frames.index_f32", Op::Cast(DType::F32), &[iota])?;
        let f32_scalar = |v: usize| hfexport_core::Tensor::float(DType::F32, vec![], vec![v as f32]);
        let hop = self.op("frames.hop", Op::Constant(f32_scalar(hop)?), &[])?;
        let field = self.op("frames.field", Op::Constant(f32_scalar(audio.receptive_field())?), &[])?;
        let start = self.op("frames.start", Op::Binary(BinaryOp::Mul), &[iota, hop])?;
        let end = self.op("frames.end", Op::Binary(BinaryOp::Add), &[start, field])?;
        let kept = self.op("frames.kept_from_start", Op::Binary(BinaryOp::LessEqual), &[end, lengths])?;
        // a row shorter than the receptive field: counted back from the last frame
        let last = Op::Reduce { kind: ReduceKind::Max, axes: vec![1], keep_dims: true };
        let last = self.op("frames.last", last, &[iota])?;
        let one = self.op("frames.one", Op::Constant(f32_scalar(1)?), &[])?;
        let count = self.op("frames.count", Op::Binary(BinaryOp::Add), &[last, one])?;
        let back = self.op("frames.back", Op::Binary(BinaryOp::Sub), &[iota, count])?;
        let back = self.op("frames.back_start", Op::Binary(BinaryOp::Mul), &[back, hop])?;
        let back = self.op("frames.back_end", Op::Binary(BinaryOp::Add), &[back, field])?;
        let wrapped = self.op("frames.kept_wrapped", Op::Binary(BinaryOp::LessEqual), &[back, lengths])?;
        let short = self.op("frames.short", Op::Binary(BinaryOp::Less), &[lengths, field])?;
        // a short row keeps no frame counted from the start (logic ops: ONNX Runtime has no
        // `Where` over bools)
        let wrapped = self.op("frames.kept_if_short", Op::Binary(BinaryOp::And), &[short, wrapped])?;
        self.op("frames.kept", Op::Binary(BinaryOp::Or), &[kept, wrapped])
    }

    /// WavLM's gated position bias as the layer's additive mask `[b, heads, q, k]`: each head's
    /// slice of the attention input `x` through the layer's gate linear (8 outputs summed in two
    /// halves of 4, then sigmoid: `a` and `b`), the gate `a * (b * constant - 1) + 2` scaling the
    /// shared `bias` row of each query; where `mask` allows, else the dtype's lowest value.
    pub(crate) fn gated_bias_mask(
        &mut self,
        vb: &Vb,
        (heads, head_dim): (usize, usize),
        x: ValueId,
        (mask, bias): (ValueId, ValueId),
    ) -> Result<ValueId> {
        let names = match self.arch.layout.encoder.map(|e| e.input) {
            Some(crate::layout::EncoderInput::Audio(AudioLayout { gated_bias: Some(g), .. })) => *g,
            _ => unreachable!("a gated bias is made for a layout that names its gate"),
        };
        let d = |v: usize| Dim::from(v);
        let shape = self.g.info(x).shape.clone();
        let (b, q) = (shape[0].clone(), shape[1].clone());
        let name = |leaf: &str| vb.name(format!("gated_bias.{leaf}"));
        let split = Op::Reshape { shape: vec![b.clone(), q.clone(), d(heads), d(head_dim)] };
        let per_head = self.op(&name("heads"), split, &[x])?;
        let per_head = self.op(&name("heads_first"), Op::Transpose { perm: vec![0, 2, 1, 3] }, &[per_head])?;
        let proj = self.linear(&vb.pp(names.linear), 8, head_dim, true, per_head)?;
        let halves = Op::Reshape { shape: vec![b.clone(), d(heads), q.clone(), d(2), d(4)] };
        let proj = self.op(&name("halves"), halves, &[proj])?;
        let sum = Op::Reduce { kind: ReduceKind::Sum, axes: vec![4], keep_dims: false };
        let proj = self.op(&name("sums"), sum, &[proj])?;
        let gates = self.op(&name("sigmoid"), Op::Unary(UnaryOp::Sigmoid), &[proj])?;
        let gate_a = Op::Slice { axis: 3, start: Dim::konst(0), end: Dim::konst(1) };
        let gate_a = self.op(&name("a"), gate_a, &[gates])?;
        let gate_b = Op::Slice { axis: 3, start: Dim::konst(1), end: Dim::konst(2) };
        let gate_b = self.op(&name("b"), gate_b, &[gates])?;
        let constant = self.weight(vb, names.constant, &[1, heads, 1, 1])?;
        let scaled = self.op(&name("b_scaled"), Op::Binary(BinaryOp::Mul), &[gate_b, constant])?;
        let one = self.scalar(&name("one"), 1.0)?;
        let shifted = self.op(&name("b_shifted"), Op::Binary(BinaryOp::Sub), &[scaled, one])?;
        let gate = self.op(&name("a_times"), Op::Binary(BinaryOp::Mul), &[gate_a, shifted])?;
        let two = self.scalar(&name("two"), 2.0)?;
        let gate = self.op(&name("gate"), Op::Binary(BinaryOp::Add), &[gate, two])?;
        let gated = self.op(&name("gated"), Op::Binary(BinaryOp::Mul), &[gate, bias])?;
        self.masked_bias(&name("mask"), mask, gated)
    }

    /// The config's audio front; an error naming the class where it has none.
    pub(crate) fn audio_config(&self) -> Result<&AudioConfig> {
        self.cfg.encoder.as_ref().and_then(|e| e.audio.as_ref()).ok_or_else(|| ModelError::Config {
            path: "config.json".into(),
            key: "conv_dim".into(),
            msg: format!("{} reads raw audio, but the config has no feature encoder", self.cfg.architecture),
        })
    }

    /// The feature encoder's convolutions over `x` `[batch, 1, samples]`: each strided
    /// convolution, its norm (a per-channel GroupNorm after the first only, or a LayerNorm
    /// over the channels after each), the activation; `[batch, channels, frames]`.
    fn feature_encoder(&mut self, layers: &Vb, audio: &AudioConfig, mut x: ValueId) -> Result<ValueId> {
        let mut cin = 1;
        for (i, c) in audio.convs.iter().enumerate() {
            let vb = layers.pp(i);
            let window = Window::new(&[c.kernel], &[c.stride], &[0]);
            x = self.conv(&vb.pp("conv"), (cin, c.channels), window, 1, audio.conv_bias, x)?;
            x = match (audio.norm, i) {
                (FeatureNorm::Group, 0) => self.instance_norm(&vb.pp("layer_norm"), c.channels, x)?,
                (FeatureNorm::Layer, _) => self.channels_norm(&vb.pp("layer_norm"), c.channels, FEATURE_NORM_EPS, x)?,
                (FeatureNorm::Group, _) => x,
            };
            x = self.op(&vb.name("act"), Op::Activate(audio.act), &[x])?;
            cin = c.channels;
        }
        Ok(x)
    }

    /// `nn.GroupNorm` with one group per channel over `x` `[batch, channels, frames]`: each
    /// channel normalised over its frames (biased variance), then `weight` and `bias`.
    fn instance_norm(&mut self, vb: &Vb, channels: usize, x: ValueId) -> Result<ValueId> {
        let mean = |this: &mut Self, name: &str, v: ValueId| {
            this.op(&vb.name(name), Op::Reduce { kind: ReduceKind::Mean, axes: vec![2], keep_dims: true }, &[v])
        };
        let m = mean(self, "mean", x)?;
        let centred = self.op(&vb.name("centred"), Op::Binary(BinaryOp::Sub), &[x, m])?;
        let square = self.op(&vb.name("square"), Op::Binary(BinaryOp::Mul), &[centred, centred])?;
        let var = mean(self, "var", square)?;
        let eps = self.scalar(&vb.name("eps"), FEATURE_NORM_EPS)?;
        let var = self.op(&vb.name("var_eps"), Op::Binary(BinaryOp::Add), &[var, eps])?;
        let std = self.op(&vb.name("std"), Op::Unary(UnaryOp::Sqrt), &[var])?;
        let normed = self.op(&vb.name("normed"), Op::Binary(BinaryOp::Div), &[centred, std])?;
        let column = vec![Dim::from(channels), Dim::konst(1)];
        let w = self.weight(vb, "weight", &[channels])?;
        let w = self.op(&vb.name("weight.column"), Op::Reshape { shape: column.clone() }, &[w])?;
        let b = self.weight(vb, "bias", &[channels])?;
        let b = self.op(&vb.name("bias.column"), Op::Reshape { shape: column }, &[b])?;
        let scaled = self.op(&vb.name("scaled"), Op::Binary(BinaryOp::Mul), &[normed, w])?;
        self.op(vb.path(), Op::Binary(BinaryOp::Add), &[scaled, b])
    }

    /// The positional embedding of `h` `[batch, frames, hidden]`: the grouped convolution of
    /// `num_conv_pos_embeddings` (weight-normed) padded by half of it, then the activation; or
    /// Data2VecAudio's stack of plain ones, each normed over the channels without weights before
    /// its activation. An even kernel's last frame is dropped. `[batch, frames, hidden]`.
    fn positional_conv(&mut self, vb: &Vb, audio: &AudioConfig, h: ValueId) -> Result<ValueId> {
        let mut x = self.op(&vb.name("channels_first"), Op::Transpose { perm: vec![0, 2, 1] }, &[h])?;
        x = match audio.pos_layers {
            None => self.positional_layer(vb, audio, false, x)?,
            Some(n) => {
                for i in 0..n {
                    x = self.positional_layer(&vb.pp("layers").pp(i).pp("conv"), audio, true, x)?;
                }
                x
            }
        };
        self.op(&vb.name("channels_last"), Op::Transpose { perm: vec![0, 2, 1] }, &[x])
    }

    /// One positional convolution at `vb` over `x` `[batch, hidden, frames]` (weight-normed,
    /// or plain and then `normed` over the channels without weights), then the activation.
    fn positional_layer(&mut self, vb: &Vb, audio: &AudioConfig, normed: bool, x: ValueId) -> Result<ValueId> {
        let (hs, k, groups) = (self.cfg.hidden_size, audio.pos_kernel, audio.pos_groups);
        let frames = self.g.info(x).shape[2].clone();
        let w = match normed {
            true => self.weight(vb, "weight", &[hs, hs / groups, k])?,
            false => self.weight_normed(vb, [hs, hs / groups, k])?,
        };
        let b = self.weight(vb, "bias", &[hs])?;
        let window = Window::new(&[k], &[1], &[k / 2]);
        let mut y = self.op(vb.path(), Op::Conv { window, groups }, &[x, w, b])?;
        if k % 2 == 0 {
            y = self.op(&vb.name("same"), Op::Slice { axis: 2, start: Dim::konst(0), end: frames }, &[y])?;
        }
        if normed {
            let t = self.op(&vb.name("channels_last"), Op::Transpose { perm: vec![0, 2, 1] }, &[y])?;
            let t = self.unit_layer_norm(&vb.pp("norm"), hs, FEATURE_NORM_EPS as f32, t)?;
            y = self.op(&vb.name("channels_first"), Op::Transpose { perm: vec![0, 2, 1] }, &[t])?;
        }
        self.op(&vb.name("act"), Op::Activate(audio.act), &[y])
    }

    /// `g * v / ‖v‖` of torch's `weight_norm(dim=2)`: the norm of `v` over every axis but the
    /// kernel's, `g` `[1, 1, kernel]`. The parametrization's names (`original0`, `original1`)
    /// or the legacy `weight_g` / `weight_v`, whichever the file stores.
    fn weight_normed(&mut self, vb: &Vb, shape: [usize; 3]) -> Result<ValueId> {
        let modern = vb.pp("parametrizations.weight");
        let (g, v) = match self.weights.has(&modern.name("original1")) {
            true => (self.weight(&modern, "original0", &[1, 1, shape[2]])?, self.weight(&modern, "original1", &shape)?),
            false => (self.weight(vb, "weight_g", &[1, 1, shape[2]])?, self.weight(vb, "weight_v", &shape)?),
        };
        let square = self.op(&vb.name("weight.square"), Op::Binary(BinaryOp::Mul), &[v, v])?;
        let sum = Op::Reduce { kind: ReduceKind::Sum, axes: vec![0, 1], keep_dims: true };
        let sum = self.op(&vb.name("weight.sum"), sum, &[square])?;
        let norm = self.op(&vb.name("weight.norm"), Op::Unary(UnaryOp::Sqrt), &[sum])?;
        let scale = self.op(&vb.name("weight.scale"), Op::Binary(BinaryOp::Div), &[g, norm])?;
        self.op(&vb.name("weight"), Op::Binary(BinaryOp::Mul), &[v, scale])
    }
}
