//! Convolutional vision backbones (ResNet): `pixel_values` `[batch, channels, height, width]`
//! (float32, the config's image size) through convolutions, batch norms and pooling, with no
//! transformer layer; `last_hidden_state` is the last stage's feature map, `pooler_output` its
//! average over positions (`AdaptiveAvgPool2d((1, 1))`), and the classifier a linear over that.
//!
//! Batch norms stay in the graph in inference form, `(x - mean) * (weight / sqrt(var + eps)) +
//! bias` over per-channel weights: the runtimes fold the weight-only half into constants when
//! they load the model, and the exported weights stay the checkpoint's own tensors.

use hfexport_core::ops::{Activation, BinaryOp, ReduceKind, UnaryOp, Window};
use hfexport_core::{DType, Dim, Graph, Op, ValueId};

use crate::config::{Backbone, ConvNetConfig, ResNetConfig};
use crate::decoder::{Decoder, Vb};
use crate::error::Result;
use crate::task::Task;

/// `nn.BatchNorm2d`'s epsilon, which no config of these families sets.
const BATCH_NORM_EPS: f64 = 1e-5;

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
        let (h, width) = match &net.backbone {
            Backbone::ResNet(r) => self.resnet(&root, r, net.channels, x)?,
        };
        let pooled = Op::Reduce { kind: ReduceKind::Mean, axes: vec![2, 3], keep_dims: true };
        let pooled = self.op(&root.name("pooler"), pooled, &[h])?;
        match task {
            Task::FeatureExtraction => {
                self.g.add_output("last_hidden_state", h)?;
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
    /// unless `downsample_in_first_stage`, each later one halves it. Returns the feature map
    /// and its channels.
    fn resnet(&mut self, root: &Vb, r: &ResNetConfig, channels: usize, x: ValueId) -> Result<(ValueId, usize)> {
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
        Ok((h, cin))
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
        let conv = vb.pp("convolution");
        let w = self.weight(&conv, "weight", &[c.cout, c.cin, c.kernel, c.kernel])?;
        let window = Window::new(&[c.kernel, c.kernel], &[c.stride, c.stride], &[c.kernel / 2, c.kernel / 2]);
        let h = self.op(conv.path(), Op::Conv { window, groups: 1 }, &[x, w])?;
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
