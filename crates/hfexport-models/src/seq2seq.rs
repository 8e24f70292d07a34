//! The speech encoder of an encoder-decoder (Whisper): log-mel frames in, the encoder states and
//! every decoder layer's cross-attention keys and values out, computed once per input.
//!
//! Its layers are the block library's (`decoder_layer` over an all-true mask, built from
//! [`ModelConfig::encoder_side`] under the layout's speech roots); what is Whisper's own is the
//! stem: two convolutions of kernel 3 and padding 1 (strides 1 and 2), each a matmul over the
//! three taps gathered by slices (no convolution op: every backend lowers slices and matmuls),
//! exact GELU after each, and the learned positions of all `max_source_positions` frames added.
//! The cross-attention keys and values use the decoder's `encoder_attn` projections, so the
//! decode component never recomputes them.

use hfexport_core::ops::{Activation, BinaryOp};
use hfexport_core::plan::{CacheMode, ComponentSpec, Entry, Exit, Planned, Positions, Role};
use hfexport_core::{DType, Dim, Op, Tensor, ValueId};

use crate::arch::{Architecture, Layout, SpeechLayout};
use crate::blocks::Vb;
use crate::builder::{BuildOptions, Decoder, LayerInputs, Weights};
use crate::config::ModelConfig;
use crate::error::{ModelError, Result};

/// Name of the cross-attention keys or values (`kind`) of decoder layer `layer`: an output of
/// the encoder component and an input of the decode component (docs/io-contracts.md).
pub fn cross_name(layer: usize, kind: &str) -> String {
    format!("cross.layers.{layer}.{kind}")
}

/// The `encoder` component of a speech encoder-decoder.
pub(crate) fn speech_encoder(
    cfg: &ModelConfig,
    arch: &Architecture,
    weights: &dyn Weights,
    opts: &BuildOptions,
) -> Result<Planned> {
    let (Some(speech), Some(enc_cfg)) = (arch.layout.speech, cfg.encoder_side()) else {
        return Err(ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: format!("{} has no speech encoder", cfg.architecture),
        });
    };
    let enc_arch = Architecture { layout: Layout { roots: speech.roots, ..arch.layout }, ..*arch };
    let mut e = Decoder::new(&enc_cfg, &enc_arch, weights, opts, "encoder");
    let states = e.speech_states(&speech)?;
    e.g.add_output("encoder_hidden_states", states)?;
    // the decoder's cross-attention projections of the states, one pair per decoder layer
    let mut d = Decoder::new(cfg, arch, weights, opts, "encoder").continuing(e.g);
    let (root, cross) = (d.root(), arch.layout.cross_attention.expect("a speech model has cross-attention"));
    let layers = root.pp(arch.layout.layers);
    for i in 0..cfg.num_hidden_layers {
        let (k, v) = d.cross_kv(&layers.pp(i).pp(cross.prefix), states)?;
        d.g.add_output(&cross_name(i, "keys"), k)?;
        d.g.add_output(&cross_name(i, "values"), v)?;
    }
    let spec = ComponentSpec {
        name: "encoder".into(),
        role: Role::Encoder,
        entry: Entry::InputFeatures,
        exit: Exit::HiddenStates,
        positions: Positions::None,
        cache: CacheMode::CrossAttention,
    };
    Ok(Planned { spec, graph: d.g })
}

impl Decoder<'_> {
    /// `input_features` `[batch, num_mel_bins, 2 * max_source_positions]` (float32) through the
    /// stem, the layers and the final norm: `[batch, max_source_positions, hidden]`.
    fn speech_states(&mut self, speech: &SpeechLayout) -> Result<ValueId> {
        let (cfg, dtype) = (self.cfg, self.opts.dtype);
        let s2s = cfg.seq2seq.as_ref().expect("an encoder side comes from a seq2seq config");
        let (mel, frames, hs) = (s2s.mel_bins, 2 * s2s.source_positions, cfg.hidden_size);
        let batch = Dim::sym(&self.g.symbols.declare("batch", 1, self.opts.max_batch)?);
        let d = |v: usize| Dim::from(v);
        let mut x = self.g.add_input("input_features", DType::F32, vec![batch.clone(), d(mel), d(frames)])?;
        if dtype != DType::F32 {
            x = self.op("input_features.cast", Op::Cast(dtype), &[x])?;
        }
        let root = self.root_of(speech.roots);
        // time-major from here on: [batch, frames, channels]
        let x = self.op(&root.name("frames_first"), Op::Transpose { perm: vec![0, 2, 1] }, &[x])?;
        let x = self.conv3(&root.pp(speech.convs[0]), x, mel, 1)?;
        let x = self.conv3(&root.pp(speech.convs[1]), x, hs, 2)?;
        let pos = self.weight(&root.pp(speech.positions), "weight", &[s2s.source_positions, hs])?;
        let mut h = self.op(&root.name("embeddings"), Op::Binary(BinaryOp::Add), &[x, pos])?;
        let all = Tensor::bool(vec![1, 1, 1, 1], vec![true])?;
        let mask = self.op("mask", Op::Constant(all), &[])?;
        let iota = self.op("positions", Op::Iota { len: d(s2s.source_positions) }, &[])?;
        let positions = self.op("position_ids", Op::Reshape { shape: vec![d(1), d(s2s.source_positions)] }, &[iota])?;
        let shared = LayerInputs::without_rope(mask, positions);
        let act = self.activation()?;
        let layers = root.pp(self.arch.layout.layers);
        for i in 0..cfg.num_hidden_layers {
            h = self.decoder_layer(&layers.pp(i), i, h, &shared, act)?;
        }
        self.norm(&root.pp(speech.final_norm), hs, h)
    }

    /// The first of `roots` under which the speech stem is stored.
    fn root_of(&self, roots: &[&str]) -> Vb {
        let conv = self.arch.layout.speech.map_or("conv1", |s| s.convs[0]);
        let root = roots.iter().find(|r| self.weights.has(&Vb::root(r).pp(conv).name("weight"))).unwrap_or(&roots[0]);
        Vb::root(root)
    }

    /// `gelu(conv1d(x))` with kernel 3, padding 1 and `stride` 1 or 2, over `x` `[batch, frames,
    /// channels]` (`in_ch` channels); the weight `[out, in, 3]` at `vb`. The three taps are
    /// slices of the zero-padded input, concatenated over channels (tap-major) and multiplied
    /// by the weight laid out `[out, 3 * in]`.
    fn conv3(&mut self, vb: &Vb, x: ValueId, in_ch: usize, stride: usize) -> Result<ValueId> {
        let hs = self.cfg.hidden_size;
        let shape = self.g.info(x).shape.clone();
        let (batch, frames) = (shape[0].clone(), shape[1].as_const().expect("static frames") as usize);
        let out_frames = frames / stride;
        let d = |v: usize| Dim::from(v);
        let zero = Tensor::float(self.opts.dtype, vec![1, 1, in_ch], vec![0.0; in_ch])?;
        let zero = self.op(&vb.name("pad"), Op::Constant(zero), &[])?;
        let zero = self.op(&vb.name("pad_rows"), Op::Expand { shape: vec![batch.clone(), d(1), d(in_ch)] }, &[zero])?;
        let padded = self.op(&vb.name("padded"), Op::Concat { axis: 1 }, &[zero, x, zero])?;
        let mut taps = vec![];
        for j in 0..3 {
            let name = vb.name(format!("tap{j}"));
            let (start, end) = (Dim::from(j), Dim::from(j + frames));
            let mut t = self.op(&name, Op::Slice { axis: 1, start, end }, &[padded])?;
            if stride == 2 {
                let pairs = vec![batch.clone(), d(out_frames), d(2), d(in_ch)];
                t = self.op(&format!("{name}.pairs"), Op::Reshape { shape: pairs }, &[t])?;
                let (first, one) = (Dim::konst(0), Dim::konst(1));
                t = self.op(&format!("{name}.even"), Op::Slice { axis: 2, start: first, end: one }, &[t])?;
                let rows = vec![batch.clone(), d(out_frames), d(in_ch)];
                t = self.op(&format!("{name}.strided"), Op::Reshape { shape: rows }, &[t])?;
            }
            taps.push(t);
        }
        let cols = self.op(&vb.name("taps"), Op::Concat { axis: 2 }, &taps)?;
        let w = self.weight(vb, "weight", &[hs, in_ch, 3])?;
        let w = self.op(&vb.name("taps_first"), Op::Transpose { perm: vec![0, 2, 1] }, &[w])?;
        let w = self.op(&vb.name("flat_weight"), Op::Reshape { shape: vec![d(hs), d(3 * in_ch)] }, &[w])?;
        let b = self.weight(vb, "bias", &[hs])?;
        let y = self.op(vb.path(), Op::Linear, &[cols, w, b])?;
        self.op(&vb.name("gelu"), Op::Activate(Activation::Gelu), &[y])
    }
}
