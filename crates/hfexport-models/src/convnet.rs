//! Convolutional vision backbones (ResNet, ConvNeXt V1 and V2): `pixel_values` `[batch, channels, height, width]`
//! (float32, the config's image size) through convolutions, batch norms and pooling, with no
//! transformer layer; `last_hidden_state` is the last stage's feature map, `pooler_output` its
//! average over positions (ResNet's `AdaptiveAvgPool2d((1, 1))`; ConvNeXt normalises it), and
//! the classifier a linear over that.
//!
//! Batch norms stay in the graph in inference form, `(x - mean) * (weight / sqrt(var + eps)) +
//! bias` over per-channel weights: the runtimes fold the weight-only half into constants when
//! they load the model, and the exported weights stay the checkpoint's own tensors.

use hfexport_core::ops::{Activation, BinaryOp, ReduceKind, UnaryOp, Window};
use hfexport_core::{DType, Dim, Graph, Op, ValueId};

use crate::config::{Backbone, ConvNetConfig, ConvNextConfig, ResNetConfig};
use crate::decoder::{Decoder, Vb};
use crate::error::Result;
use crate::task::Task;

/// `nn.BatchNorm2d`'s epsilon, which no config of these families sets.
const BATCH_NORM_EPS: f64 = 1e-5;

/// What a backbone gives the heads: its last feature map `[batch, width, height', width']`
/// (`last_hidden_state`) and its pooled features (`pooler_output`, as the class shapes them).
struct Features {
    map: ValueId,
    pooled: ValueId,
    width: usize,
}

/// The epsilon of ConvNeXt's norms inside the backbone (its config's `layer_norm_eps` is the
/// final norm's only).
const CONVNEXT_NORM_EPS: f64 = 1e-6;

/// A convolution of a backbone: channels in and out, its square kernel and stride.
#[derive(Debug, Clone, Copy)]
struct ConvSpec {
    cin: usize,
    cout: usize,
    kernel: usize,
    stride: usize,
}

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

    /// The `pixel_values` input at the config's image size, in the graph's dtype.
    fn pixel_values(&mut self, net: &ConvNetConfig) -> Result<ValueId> {
        let batch = Dim::sym(&self.g.symbols.declare("batch", 1, self.opts.max_batch)?);
        let [h, w] = net.image;
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
        let stem = ConvSpec { cin: channels, cout: r.embedding_size, kernel: 7, stride: 2 };
        let h = self.conv_norm(&root.pp("embedder.embedder"), stem, Some(act), x)?;
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
    fn layer_norm(&mut self, vb: &Vb, width: usize, eps: f64, x: ValueId) -> Result<ValueId> {
        let (w, b) = (self.weight(vb, "weight", &[width])?, self.weight(vb, "bias", &[width])?);
        self.op(vb.path(), Op::LayerNorm { eps: eps as f32 }, &[x, w, b])
    }

    /// ConvNeXt's `channels_first` LayerNorm: over the channels of `[batch, channels, h, w]`.
    fn channels_norm(&mut self, vb: &Vb, channels: usize, eps: f64, x: ValueId) -> Result<ValueId> {
        let h = self.op(&vb.name("channels_last"), Op::Transpose { perm: vec![0, 2, 3, 1] }, &[x])?;
        let h = self.layer_norm(vb, channels, eps, h)?;
        self.op(&vb.name("channels_first"), Op::Transpose { perm: vec![0, 3, 1, 2] }, &[h])
    }

    /// The convolution at `vb` (`weight` `[cout, cin / groups, *kernel]`, `bias` when
    /// `bias`).
    fn conv(
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
        let relu = Some(Activation::Relu);
        let inner = vb.pp("layer");
        let conv = |cin, cout, kernel, stride| ConvSpec { cin, cout, kernel, stride };
        let h = match r.bottleneck {
            true => {
                let (reduced, first) = (cout / 4, if r.downsample_in_bottleneck { stride } else { 1 });
                let h = self.conv_norm(&inner.pp(0), conv(cin, reduced, 1, first), relu, x)?;
                let h = self.conv_norm(&inner.pp(1), conv(reduced, reduced, 3, stride / first), relu, h)?;
                self.conv_norm(&inner.pp(2), conv(reduced, cout, 1, 1), None, h)?
            }
            false => {
                let h = self.conv_norm(&inner.pp(0), conv(cin, cout, 3, stride), relu, x)?;
                self.conv_norm(&inner.pp(1), conv(cout, cout, 3, 1), None, h)?
            }
        };
        let residual = match cin != cout || stride != 1 {
            true => self.conv_norm(&vb.pp("shortcut"), conv(cin, cout, 1, stride), None, x)?,
            false => x,
        };
        let h = self.op(&vb.name("residual"), Op::Binary(BinaryOp::Add), &[h, residual])?;
        self.op(&vb.name("act"), Op::Activate(act), &[h])
    }

    /// `convolution` (padding half the kernel, no bias), `normalization` (a batch norm), then
    /// `act`: transformers' `ResNetConvLayer`.
    fn conv_norm(&mut self, vb: &Vb, c: ConvSpec, act: Option<Activation>, x: ValueId) -> Result<ValueId> {
        let window = Window::new(&[c.kernel, c.kernel], &[c.stride, c.stride], &[c.kernel / 2, c.kernel / 2]);
        let h = self.conv(&vb.pp("convolution"), (c.cin, c.cout), window, 1, false, x)?;
        let h = self.batch_norm(&vb.pp("normalization"), c.cout, h)?;
        match act {
            Some(act) => self.op(&vb.name("act"), Op::Activate(act), &[h]),
            None => Ok(h),
        }
    }

    /// An inference batch norm over the channels (axis 1) of `x` `[batch, channels, *spatial]`:
    /// `weight`, `bias`, `running_mean`, `running_var` `[channels]`.
    fn batch_norm(&mut self, vb: &Vb, channels: usize, x: ValueId) -> Result<ValueId> {
        let rank = self.g.info(x).shape.len();
        let per_channel: Vec<Dim> = (0..rank - 1).map(|i| Dim::from(if i == 0 { channels } else { 1 })).collect();
        let column = |this: &mut Self, leaf: &str| -> Result<ValueId> {
            let v = this.weight(vb, leaf, &[channels])?;
            this.op(&vb.name(format!("{leaf}.channels")), Op::Reshape { shape: per_channel.clone() }, &[v])
        };
        let (mean, var) = (column(self, "running_mean")?, column(self, "running_var")?);
        let (weight, bias) = (column(self, "weight")?, column(self, "bias")?);
        let eps = self.scalar(&vb.name("eps"), BATCH_NORM_EPS)?;
        let var = self.op(&vb.name("var_eps"), Op::Binary(BinaryOp::Add), &[var, eps])?;
        let std = self.op(&vb.name("std"), Op::Unary(UnaryOp::Sqrt), &[var])?;
        let scale = self.op(&vb.name("scale"), Op::Binary(BinaryOp::Div), &[weight, std])?;
        let centred = self.op(&vb.name("centred"), Op::Binary(BinaryOp::Sub), &[x, mean])?;
        let scaled = self.op(&vb.name("scaled"), Op::Binary(BinaryOp::Mul), &[centred, scale])?;
        self.op(vb.path(), Op::Binary(BinaryOp::Add), &[scaled, bias])
    }
}
