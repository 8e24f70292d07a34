//! Convolutional vision backbones (ResNet, ConvNeXt V1 and V2, MobileNetV2): `pixel_values`
//! `[batch, channels, height, width]` (float32, at the export's `image_size`, else the
//! config's) through convolutions, batch norms and pooling, with no transformer layer;
//! `last_hidden_state` is the last stage's feature map, `pooler_output` its
//! average over positions (ResNet's `AdaptiveAvgPool2d((1, 1))`; ConvNeXt normalises it), and
//! the classifier a linear over that.
//!
//! Batch norms stay in the graph in inference form, `(x - mean) * (weight / sqrt(var + eps)) +
//! bias` over per-channel weights: the runtimes fold the weight-only half into constants when
//! they load the model, and the exported weights stay the checkpoint's own tensors.

use hfexport_core::ops::{Activation, BinaryOp, ReduceKind, UnaryOp, Window};
use hfexport_core::{DType, Dim, Graph, Op, ValueId};

use crate::config::{Backbone, ConvNetConfig, ConvNextConfig, MobileNetV2Config, ResNetConfig};
use crate::decoder::{Decoder, Vb};
use crate::error::Result;
use crate::task::Task;

/// `nn.BatchNorm2d`'s epsilon, which ResNet's config does not set.
const BATCH_NORM_EPS: f64 = 1e-5;

/// What a backbone gives the heads: its last feature map `[batch, width, height', width']`
/// (`last_hidden_state`) and its pooled features (`pooler_output`, as the class shapes them).
pub(crate) struct Features {
    pub(crate) map: ValueId,
    pub(crate) pooled: ValueId,
    pub(crate) width: usize,
}

/// A ResNet convolution layer: square `kernel` padded by half of it, `stride`, no groups.
fn resnet_conv(channels: (usize, usize), kernel: usize, stride: usize, act: ConvAct) -> ConvNorm {
    let window = Window::new(&[kernel, kernel], &[stride, stride], &[kernel / 2, kernel / 2]);
    ConvNorm { channels, window, groups: 1, eps: BATCH_NORM_EPS, act }
}

/// The epsilon of ConvNeXt's norms inside the backbone (its config's `layer_norm_eps` is the
/// final norm's only).
const CONVNEXT_NORM_EPS: f64 = 1e-6;

/// The activation after a convolution and its norm.
#[derive(Debug, Clone, Copy)]
enum ConvAct {
    None,
    /// `min(relu(x), 6)`: MobileNet's `relu6`, which no other family uses.
    Relu6,
    Act(Activation),
}

/// A convolution followed by a batch norm and an activation (transformers' `ResNetConvLayer`,
/// `MobileNetV2ConvLayer`): channels in and out, the window, groups, the norm's epsilon.
#[derive(Debug, Clone)]
struct ConvNorm {
    channels: (usize, usize),
    window: Window,
    groups: usize,
    eps: f64,
    act: ConvAct,
}

/// The `(begin, end)` padding of TensorFlow's "SAME" over an axis of `len` (transformers'
/// `apply_tf_padding`, dilation included as it computes it).
fn same_padding(len: usize, kernel: usize, stride: usize, dilation: usize) -> (usize, usize) {
    let along = match len % stride {
        0 => kernel.saturating_sub(stride),
        rest => kernel.saturating_sub(rest),
    };
    (along / 2 * dilation, (along - along / 2) * dilation)
}

/// transformers' `make_divisible`: `value` rounded to the nearest multiple of `divisor` (at least
/// `min`), one more multiple if that lost over 10%.
fn make_divisible(value: usize, divisor: usize, min: usize) -> usize {
    let rounded = min.max((value + divisor / 2) / divisor * divisor);
    match (rounded as f64) < 0.9 * value as f64 {
        true => rounded + divisor,
        false => rounded,
    }
}

/// MobileNetV2's layer widths before the depth multiplier, and its layers' strides.
const MOBILENET_V2_WIDTHS: [usize; 17] = [16, 24, 24, 32, 32, 32, 64, 64, 64, 64, 96, 96, 96, 160, 160, 160, 320];
const MOBILENET_V2_STRIDES: [usize; 16] = [2, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1];

impl Decoder<'_> {
    /// The forward graph of a convolutional `task`: the backbone, then its outputs or the
    /// classifier at `classifier`.
    pub(crate) fn convnet(mut self, task: Task, classifier: &str) -> Result<Graph> {
        let net = self.cfg.convnet.clone().ok_or_else(|| self.task_error(task))?;
        let root = self.root();
        let x = self.pixel_values(&net)?;
        let Features { map, pooled, width } = match &net.backbone {
            Backbone::ResNet(r) => self.resnet(&root, r, net.channels, x)?,
            Backbone::ConvNext(c) => self.convnext(&root, c, net.channels, x)?,
            Backbone::MobileNetV2(m) => self.mobilenet_v2(&root, m, net.channels, x)?,
            Backbone::Swin(s) => self.swin(&root, s, net.channels, x)?,
        };
        match task {
            Task::FeatureExtraction => {
                self.g.add_output("last_hidden_state", map)?;
                self.g.add_output("pooler_output", pooled)?;
            }
            Task::ImageClassification => {
                let batch = self.g.info(x).shape[0].clone();
                let flat = Op::Reshape { shape: vec![batch, Dim::from(width)] };
                let flat = self.op(&Vb::root(classifier).name("flatten"), flat, &[pooled])?;
                let labels = self.cfg.encoder.as_ref().map_or(2, |e| e.num_labels);
                let logits = self.linear(&Vb::root(classifier), labels, width, true, flat)?;
                self.g.add_output("logits", logits)?;
            }
            _ => return Err(self.task_error(task)),
        }
        Ok(self.g)
    }

    /// The feature map's average over its positions, `[batch, channels, 1, 1]`.
    fn average_positions(&mut self, name: &str, map: ValueId, keep_dims: bool) -> Result<ValueId> {
        self.op(name, Op::Reduce { kind: ReduceKind::Mean, axes: vec![2, 3], keep_dims }, &[map])
    }

    /// The `pixel_values` input at the image size asked for (else the config's), in the graph's
    /// dtype.
    fn pixel_values(&mut self, net: &ConvNetConfig) -> Result<ValueId> {
        let batch = Dim::sym(&self.g.symbols.declare("batch", 1, self.opts.max_batch)?);
        let [h, w] = self.opts.image_size.unwrap_or(net.image);
        let shape = vec![batch, Dim::from(net.channels), Dim::from(h), Dim::from(w)];
        let x = self.g.add_input("pixel_values", DType::F32, shape)?;
        match self.opts.dtype {
            DType::F32 => Ok(x),
            dtype => self.op("pixel_values.cast", Op::Cast(dtype), &[x]),
        }
    }

    /// ResNet: the stem (`embedder.embedder`, 7x7 stride 2, then a 3x3 stride-2 max pool), and
    /// its stages (`encoder.stages.<s>.layers.<l>`); the first stage keeps the resolution
    /// unless `downsample_in_first_stage`, each later one halves it; `pooler` averages the last
    /// map to `[batch, width, 1, 1]`.
    fn resnet(&mut self, root: &Vb, r: &ResNetConfig, channels: usize, x: ValueId) -> Result<Features> {
        let act = self.activation()?;
        let stem = resnet_conv((channels, r.embedding_size), 7, 2, ConvAct::Act(act));
        let h = self.conv_norm(&root.pp("embedder.embedder"), stem, x)?;
        let pool = Op::MaxPool { window: Window::new(&[3, 3], &[2, 2], &[1, 1]) };
        let mut h = self.op(&root.name("embedder.pooler"), pool, &[h])?;
        let mut cin = r.embedding_size;
        for (s, (&cout, &depth)) in r.hidden_sizes.iter().zip(&r.depths).enumerate() {
            let stride = if s > 0 || r.downsample_in_first_stage { 2 } else { 1 };
            for l in 0..depth {
                let vb = root.pp("encoder.stages").pp(s).pp("layers").pp(l);
                let (from, stride) = if l == 0 { (cin, stride) } else { (cout, 1) };
                h = self.resnet_layer(&vb, r, (from, cout, stride), act, h)?;
            }
            cin = cout;
        }
        let pooled = self.average_positions(&root.name("pooler"), h, true)?;
        Ok(Features { map: h, pooled, width: cin })
    }

    /// ConvNeXt (V1 and V2): the patch stem (`embeddings.patch_embeddings`, a norm over the
    /// channels), the stages (`encoder.stages.<s>`: from the second on, `downsampling_layer`'s
    /// norm and 2x2 stride-2 convolution; then `layers.<l>`), and the final `layernorm` over
    /// the positions' average, `[batch, width]`.
    fn convnext(&mut self, root: &Vb, c: &ConvNextConfig, channels: usize, x: ValueId) -> Result<Features> {
        let act = self.activation()?;
        let stem = root.pp("embeddings");
        let patch = stem.pp("patch_embeddings");
        let first = c.hidden_sizes[0];
        let h = self.conv(&patch, (channels, first), Window::new(&c.patch, &c.patch, &[0, 0]), 1, true, x)?;
        let mut h = self.channels_norm(&stem.pp("layernorm"), first, CONVNEXT_NORM_EPS, h)?;
        let mut cin = first;
        for (s, (&cout, &depth)) in c.hidden_sizes.iter().zip(&c.depths).enumerate() {
            let stage = root.pp("encoder.stages").pp(s);
            if s > 0 || cin != cout {
                let (down, stride) = (stage.pp("downsampling_layer"), if s > 0 { 2 } else { 1 });
                h = self.channels_norm(&down.pp(0), cin, CONVNEXT_NORM_EPS, h)?;
                let window = Window::new(&[2, 2], &[stride, stride], &[0, 0]);
                h = self.conv(&down.pp(1), (cin, cout), window, 1, true, h)?;
            }
            for l in 0..depth {
                h = self.convnext_block(&stage.pp("layers").pp(l), c, cout, act, h)?;
            }
            cin = cout;
        }
        let mean = self.average_positions(&root.name("pooler"), h, false)?;
        let pooled = self.layer_norm(&root.pp("layernorm"), cin, self.cfg.norm_eps, mean)?;
        Ok(Features { map: h, pooled, width: cin })
    }

    /// One ConvNeXt block over `[batch, dim, h, w]`: the 7x7 depthwise `dwconv`, then over the
    /// channels last `layernorm`, `pwconv1` (4x), the activation, V2's `grn`, `pwconv2`, V1's
    /// `layer_scale_parameter`, and the residual.
    fn convnext_block(
        &mut self,
        vb: &Vb,
        c: &ConvNextConfig,
        dim: usize,
        act: Activation,
        x: ValueId,
    ) -> Result<ValueId> {
        let h = self.conv(&vb.pp("dwconv"), (dim, dim), Window::new(&[7, 7], &[1, 1], &[3, 3]), dim, true, x)?;
        let h = self.op(&vb.name("channels_last"), Op::Transpose { perm: vec![0, 2, 3, 1] }, &[h])?;
        let h = self.layer_norm(&vb.pp("layernorm"), dim, CONVNEXT_NORM_EPS, h)?;
        let h = self.linear(&vb.pp("pwconv1"), 4 * dim, dim, true, h)?;
        let mut h = self.op(&vb.name("act"), Op::Activate(act), &[h])?;
        if c.grn {
            h = self.global_response_norm(&vb.pp("grn"), 4 * dim, h)?;
        }
        let mut h = self.linear(&vb.pp("pwconv2"), dim, 4 * dim, true, h)?;
        if c.layer_scale {
            let gamma = self.weight(vb, "layer_scale_parameter", &[dim])?;
            h = self.op(&vb.name("layer_scale"), Op::Binary(BinaryOp::Mul), &[gamma, h])?;
        }
        let h = self.op(&vb.name("channels_first"), Op::Transpose { perm: vec![0, 3, 1, 2] }, &[h])?;
        self.op(&vb.name("residual"), Op::Binary(BinaryOp::Add), &[x, h])
    }

    /// ConvNeXt V2's GRN over `x` `[batch, h, w, dim]`: each channel's L2 norm over the
    /// positions, divided by its mean over the channels (+ 1e-6), scales `x`; then `weight *
    /// that + bias + x` (`weight`, `bias` stored `[1, 1, 1, dim]`).
    fn global_response_norm(&mut self, vb: &Vb, dim: usize, x: ValueId) -> Result<ValueId> {
        let (w, b) = (self.weight(vb, "weight", &[1, 1, 1, dim])?, self.weight(vb, "bias", &[1, 1, 1, dim])?);
        let sq = self.op(&vb.name("square"), Op::Binary(BinaryOp::Mul), &[x, x])?;
        let sum = Op::Reduce { kind: ReduceKind::Sum, axes: vec![1, 2], keep_dims: true };
        let sum = self.op(&vb.name("sum_squares"), sum, &[sq])?;
        let global = self.op(&vb.name("global"), Op::Unary(UnaryOp::Sqrt), &[sum])?;
        let mean = Op::Reduce { kind: ReduceKind::Mean, axes: vec![3], keep_dims: true };
        let mean = self.op(&vb.name("global_mean"), mean, &[global])?;
        let eps = self.scalar(&vb.name("eps"), 1e-6)?;
        let mean = self.op(&vb.name("global_mean_eps"), Op::Binary(BinaryOp::Add), &[mean, eps])?;
        let norm = self.op(&vb.name("norm"), Op::Binary(BinaryOp::Div), &[global, mean])?;
        let h = self.op(&vb.name("normed"), Op::Binary(BinaryOp::Mul), &[x, norm])?;
        let h = self.op(&vb.name("scaled"), Op::Binary(BinaryOp::Mul), &[w, h])?;
        let h = self.op(&vb.name("biased"), Op::Binary(BinaryOp::Add), &[h, b])?;
        self.op(vb.path(), Op::Binary(BinaryOp::Add), &[h, x])
    }

    /// A LayerNorm over the last axis with `weight` and `bias`.
    pub(crate) fn layer_norm(&mut self, vb: &Vb, width: usize, eps: f64, x: ValueId) -> Result<ValueId> {
        let (w, b) = (self.weight(vb, "weight", &[width])?, self.weight(vb, "bias", &[width])?);
        self.op(vb.path(), Op::LayerNorm { eps: eps as f32 }, &[x, w, b])
    }

    /// A `channels_first` LayerNorm (ConvNeXt's, wav2vec2's feature encoder's): over the
    /// channels of `[batch, channels, *spatial]`.
    pub(crate) fn channels_norm(&mut self, vb: &Vb, channels: usize, eps: f64, x: ValueId) -> Result<ValueId> {
        let rank = self.g.info(x).shape.len();
        let last: Vec<usize> = std::iter::once(0).chain(2..rank).chain([1]).collect();
        let first: Vec<usize> = [0, rank - 1].into_iter().chain(1..rank - 1).collect();
        let h = self.op(&vb.name("channels_last"), Op::Transpose { perm: last }, &[x])?;
        let h = self.layer_norm(vb, channels, eps, h)?;
        self.op(&vb.name("channels_first"), Op::Transpose { perm: first }, &[h])
    }

    /// The convolution at `vb` (`weight` `[cout, cin / groups, *kernel]`, `bias` when
    /// `bias`).
    pub(crate) fn conv(
        &mut self,
        vb: &Vb,
        (cin, cout): (usize, usize),
        window: Window,
        groups: usize,
        bias: bool,
        x: ValueId,
    ) -> Result<ValueId> {
        let shape: Vec<usize> = [cout, cin / groups].into_iter().chain(window.kernel.iter().copied()).collect();
        let mut ins = vec![x, self.weight(vb, "weight", &shape)?];
        if bias {
            ins.push(self.weight(vb, "bias", &[cout])?);
        }
        self.op(vb.path(), Op::Conv { window, groups }, &ins)
    }

    /// One residual layer: its convolutions (`layer.<i>`), the shortcut (`shortcut`, a strided
    /// 1x1 and a norm where the width or resolution changes), the sum, the activation. The
    /// inner convolutions' activation is ReLU whatever `hidden_act` says, as transformers
    /// builds them.
    fn resnet_layer(
        &mut self,
        vb: &Vb,
        r: &ResNetConfig,
        (cin, cout, stride): (usize, usize, usize),
        act: Activation,
        x: ValueId,
    ) -> Result<ValueId> {
        let relu = ConvAct::Act(Activation::Relu);
        let inner = vb.pp("layer");
        let h = match r.bottleneck {
            true => {
                let (reduced, first) = (cout / 4, if r.downsample_in_bottleneck { stride } else { 1 });
                let h = self.conv_norm(&inner.pp(0), resnet_conv((cin, reduced), 1, first, relu), x)?;
                let h = self.conv_norm(&inner.pp(1), resnet_conv((reduced, reduced), 3, stride / first, relu), h)?;
                self.conv_norm(&inner.pp(2), resnet_conv((reduced, cout), 1, 1, ConvAct::None), h)?
            }
            false => {
                let h = self.conv_norm(&inner.pp(0), resnet_conv((cin, cout), 3, stride, relu), x)?;
                self.conv_norm(&inner.pp(1), resnet_conv((cout, cout), 3, 1, ConvAct::None), h)?
            }
        };
        let residual = match cin != cout || stride != 1 {
            true => self.conv_norm(&vb.pp("shortcut"), resnet_conv((cin, cout), 1, stride, ConvAct::None), x)?,
            false => x,
        };
        let h = self.op(&vb.name("residual"), Op::Binary(BinaryOp::Add), &[h, residual])?;
        self.op(&vb.name("act"), Op::Activate(act), &[h])
    }

    /// `convolution` (no bias), `normalization` (a batch norm), then the activation.
    fn conv_norm(&mut self, vb: &Vb, c: ConvNorm, x: ValueId) -> Result<ValueId> {
        let h = self.conv(&vb.pp("convolution"), c.channels, c.window, c.groups, false, x)?;
        let h = self.batch_norm(&vb.pp("normalization"), c.channels.1, c.eps, h)?;
        let name = vb.name("act");
        match c.act {
            ConvAct::None => Ok(h),
            ConvAct::Act(act) => self.op(&name, Op::Activate(act), &[h]),
            ConvAct::Relu6 => {
                let h = self.op(&name, Op::Activate(Activation::Relu), &[h])?;
                let six = self.scalar(&format!("{name}.six"), 6.0)?;
                self.op(&format!("{name}.clamped"), Op::Binary(BinaryOp::Min), &[h, six])
            }
        }
    }

    /// MobileNetV2: the stem (`conv_stem`: a 3x3 stride-2 convolution, a 1x1 expansion unless
    /// `first_layer_is_expansion`, a depthwise 3x3 and a 1x1 reduction), 16 inverted residual
    /// `layer.<i>`, the final 1x1 `conv_1x1`, and its positions' average `[batch, width]`.
    fn mobilenet_v2(&mut self, root: &Vb, m: &MobileNetV2Config, channels: usize, x: ValueId) -> Result<Features> {
        let act = m.act.map_or(ConvAct::Relu6, ConvAct::Act);
        let depth = |c: usize| {
            let scaled = (c as f64 * m.depth_multiplier).round_ties_even() as usize;
            make_divisible(scaled, m.divisible_by, m.min_depth)
        };
        let widths = MOBILENET_V2_WIDTHS.map(depth);
        let (stem, expanded) = (root.pp("conv_stem"), depth(32));
        let mut h = self.mobile_conv(&stem.pp("first_conv"), m, (channels, expanded), (3, 2, 1, 1), act, x)?;
        if !m.first_layer_is_expansion {
            h = self.mobile_conv(&stem.pp("expand_1x1"), m, (expanded, expanded), (1, 1, 1, 1), act, h)?;
        }
        h = self.mobile_conv(&stem.pp("conv_3x3"), m, (expanded, expanded), (3, 1, expanded, 1), act, h)?;
        h = self.mobile_conv(&stem.pp("reduce_1x1"), m, (expanded, widths[0]), (1, 1, 1, 1), ConvAct::None, h)?;
        // past `output_stride`, a layer's stride becomes the next layers' dilation
        let (mut reached, mut dilation) = (2, 1);
        for (i, &step) in MOBILENET_V2_STRIDES.iter().enumerate() {
            let (stride, dilated) = match reached == m.output_stride {
                true => {
                    let d = dilation;
                    dilation *= step;
                    (1, d)
                }
                false => {
                    reached *= step;
                    (step, 1)
                }
            };
            let vb = root.pp("layer").pp(i);
            h = self.inverted_residual(&vb, m, (widths[i], widths[i + 1]), (stride, dilated), act, h)?;
        }
        let out = match m.finegrained_output && m.depth_multiplier < 1.0 {
            true => 1280,
            false => depth(1280),
        };
        h = self.mobile_conv(&root.pp("conv_1x1"), m, (widths[16], out), (1, 1, 1, 1), act, h)?;
        let pooled = self.average_positions(&root.name("pooler"), h, false)?;
        Ok(Features { map: h, pooled, width: out })
    }

    /// A MobileNetV2 inverted residual: `expand_1x1` to `expand_ratio` times the channels, the
    /// depthwise `conv_3x3` (strided or dilated), `reduce_1x1` without activation, and the
    /// residual where neither the stride nor the width changes.
    fn inverted_residual(
        &mut self,
        vb: &Vb,
        m: &MobileNetV2Config,
        (cin, cout): (usize, usize),
        (stride, dilation): (usize, usize),
        act: ConvAct,
        x: ValueId,
    ) -> Result<ValueId> {
        let e = make_divisible((cin as f64 * m.expand_ratio).round_ties_even() as usize, m.divisible_by, m.min_depth);
        let h = self.mobile_conv(&vb.pp("expand_1x1"), m, (cin, e), (1, 1, 1, 1), act, x)?;
        let h = self.mobile_conv(&vb.pp("conv_3x3"), m, (e, e), (3, stride, e, dilation), act, h)?;
        let h = self.mobile_conv(&vb.pp("reduce_1x1"), m, (e, cout), (1, 1, 1, 1), ConvAct::None, h)?;
        match stride == 1 && cin == cout {
            true => self.op(&vb.name("residual"), Op::Binary(BinaryOp::Add), &[x, h]),
            false => Ok(h),
        }
    }

    /// A `MobileNetV2ConvLayer` of square `kernel`, `stride`, `groups` and `dilation`: padded
    /// "SAME" for the input's size where `tf_padding`, else by half the (dilated) kernel.
    fn mobile_conv(
        &mut self,
        vb: &Vb,
        m: &MobileNetV2Config,
        channels: (usize, usize),
        (kernel, stride, groups, dilation): (usize, usize, usize, usize),
        act: ConvAct,
        x: ValueId,
    ) -> Result<ValueId> {
        let spatial: Vec<usize> =
            self.g.info(x).shape[2..].iter().map(|d| d.as_const().expect("static image size") as usize).collect();
        let pads: Vec<(usize, usize)> = match m.tf_padding {
            true => spatial.iter().map(|&len| same_padding(len, kernel, stride, dilation)).collect(),
            false => vec![((kernel - 1) / 2 * dilation, (kernel - 1) / 2 * dilation); 2],
        };
        let window = Window {
            kernel: vec![kernel; 2],
            stride: vec![stride; 2],
            dilation: vec![dilation; 2],
            pads_begin: pads.iter().map(|p| p.0).collect(),
            pads_end: pads.iter().map(|p| p.1).collect(),
        };
        self.conv_norm(vb, ConvNorm { channels, window, groups, eps: m.norm_eps, act }, x)
    }

    /// An inference batch norm over the channels (axis 1) of `x` `[batch, channels, *spatial]`:
    /// `weight`, `bias`, `running_mean`, `running_var` `[channels]`.
    fn batch_norm(&mut self, vb: &Vb, channels: usize, eps: f64, x: ValueId) -> Result<ValueId> {
        let rank = self.g.info(x).shape.len();
        let per_channel: Vec<Dim> = (0..rank - 1).map(|i| Dim::from(if i == 0 { channels } else { 1 })).collect();
        let column = |this: &mut Self, leaf: &str| -> Result<ValueId> {
            let v = this.weight(vb, leaf, &[channels])?;
            this.op(&vb.name(format!("{leaf}.channels")), Op::Reshape { shape: per_channel.clone() }, &[v])
        };
        let (mean, var) = (column(self, "running_mean")?, column(self, "running_var")?);
        let (weight, bias) = (column(self, "weight")?, column(self, "bias")?);
        let eps = self.scalar(&vb.name("eps"), eps)?;
        let var = self.op(&vb.name("var_eps"), Op::Binary(BinaryOp::Add), &[var, eps])?;
        let std = self.op(&vb.name("std"), Op::Unary(UnaryOp::Sqrt), &[var])?;
        let scale = self.op(&vb.name("scale"), Op::Binary(BinaryOp::Div), &[weight, std])?;
        let centred = self.op(&vb.name("centred"), Op::Binary(BinaryOp::Sub), &[x, mean])?;
        let scaled = self.op(&vb.name("scaled"), Op::Binary(BinaryOp::Mul), &[centred, scale])?;
        self.op(vb.path(), Op::Binary(BinaryOp::Add), &[scaled, bias])
    }
}
