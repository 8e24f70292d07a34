//! The encoder component of an encoder-decoder (Whisper, T5): its inputs in, the encoder states
//! and every decoder layer's cross-attention keys and values out, computed once per input.
//!
//! The encoder's layers are the block library's (`decoder_layer` over a padding-only mask, built
//! from [`ModelConfig::encoder_side`] with the stack's own layout); what differs per family is
//! the input ([`StackInput`]). Whisper's stem is two convolutions of kernel 3 and padding 1
//! (strides 1 and 2), each a matmul over the three taps gathered by slices (no convolution op:
//! every backend lowers slices and matmuls), exact GELU after each, and the learned positions of
//! all `max_source_positions` frames added. T5 reads tokens through the shared embedding, and
//! its layers add a relative position bias to their scores ([`Decoder::relative_mask`]). The
//! cross-attention keys and values use the decoder's projections, so the decode component
//! never recomputes them.

use hfexport_core::ops::{Activation, BinaryOp};
use hfexport_core::plan::{CacheMode, ComponentSpec, Entry, Exit, Planned, Positions, Role};
use hfexport_core::{cache_ports, DType, Dim, Op, Tensor, ValueId};

use crate::config::{AttentionSpec, LayerSpec, ModelConfig, RelativeAttention};
use crate::decoder::{BuildOptions, Decoder, LayerInputs, Vb, Weights};
use crate::error::{ModelError, Result};
use crate::families::Architecture;
use crate::layout::{EncoderStack, StackInput};

/// Name of the cross-attention keys or values (`kind`) of decoder layer `layer`: an output of
/// the encoder component and an input of the decode component (docs/io-contracts.md).
pub fn cross_name(layer: usize, kind: &str) -> String {
    format!("cross.layers.{layer}.{kind}")
}

/// The shape of a decoder layer's cross-attention: its self-attention's (Whisper, T5).
pub(crate) fn cross_attention_spec<'c>(cfg: &ModelConfig, layer: &'c LayerSpec) -> Result<&'c AttentionSpec> {
    layer.attention().ok_or_else(|| ModelError::Config {
        path: "config.json".into(),
        key: "architectures".into(),
        msg: format!("{}: a decoder layer without self-attention cannot have cross-attention", cfg.architecture),
    })
}

/// The `encoder` component of an encoder-decoder with a static cache: the states and each
/// decoder layer's cross-attention keys and values.
pub(crate) fn encoder_component(
    cfg: &ModelConfig,
    arch: &Architecture,
    weights: &dyn Weights,
    opts: &BuildOptions,
) -> Result<Planned> {
    let (mut e, states, entry) = encoder_states(cfg, arch, weights, opts)?;
    e.g.add_output("encoder_hidden_states", states)?;
    // the decoder's cross-attention projections of the states, one pair per decoder layer
    let mut d = Decoder::new(cfg, arch, weights, opts, "encoder").continuing(e.g);
    let (root, cross) = (d.root(), arch.layout.cross_attention.expect("an encoder-decoder has cross-attention"));
    let layers = root.pp(arch.layout.layers);
    for (i, layer) in cfg.layers.iter().enumerate() {
        let (k, v) = d.cross_kv(&layers.pp(i).pp(cross.prefix), cross_attention_spec(cfg, layer)?, states)?;
        d.g.add_output(&cross_name(i, "keys"), k)?;
        d.g.add_output(&cross_name(i, "values"), v)?;
    }
    Ok(Planned { spec: encoder_spec(entry, CacheMode::CrossAttention), graph: d.g })
}

/// An encoder-decoder over a growing cache, laid out as optimum's `ORTModelForSeq2SeqLM` /
/// `ORTModelForSpeechSeq2Seq` and transformers.js load one: the `encoder` (its states out as
/// `last_hidden_state`, nothing else) and one `decode` that takes the states and computes its
/// cross-attention keys and values itself (the merged decoder, [`Decoder::seq2seq_decode`]).
pub(crate) fn growing_components(
    cfg: &ModelConfig,
    arch: &Architecture,
    weights: &dyn Weights,
    opts: &BuildOptions,
) -> Result<Vec<Planned>> {
    let (mut e, states, entry) = encoder_states(cfg, arch, weights, opts)?;
    e.g.add_output(cache_ports::ENCODER_OUTPUT, states)?;
    let encoder = Planned { spec: encoder_spec(entry, CacheMode::None), graph: e.g };
    let text = matches!(arch.layout.encoder_stack.map(|s| s.input), Some(StackInput::Tokens));
    let decode = Decoder::new(cfg, arch, weights, opts, "decode").seq2seq_decode(text)?;
    let spec =
        ComponentSpec { positions: Positions::Implicit, ..ComponentSpec::generation(Role::Decode, CacheMode::Growing) };
    Ok(vec![encoder, Planned { spec, graph: decode }])
}

fn encoder_spec(entry: Entry, cache: CacheMode) -> ComponentSpec {
    ComponentSpec {
        name: "encoder".into(),
        role: Role::Encoder,
        entry,
        exit: Exit::HiddenStates,
        positions: Positions::None,
        cache,
    }
}

/// The encoder stack's graph (named `encoder`) and its final states.
fn encoder_states<'a>(
    cfg: &'a ModelConfig,
    arch: &'a Architecture,
    weights: &'a dyn Weights,
    opts: &'a BuildOptions,
) -> Result<(Decoder<'a>, ValueId, Entry)> {
    let (Some(stack), Some(enc_cfg)) = (arch.layout.encoder_stack, cfg.encoder_side()) else {
        return Err(ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: format!("{} has no encoder stack", cfg.architecture),
        });
    };
    let enc_arch = Architecture { layout: *stack.layout, ..*arch };
    let mut e = Decoder::new(&enc_cfg, &enc_arch, weights, opts, "encoder");
    let (states, entry) = e.encoder_states(&stack)?;
    // the graph outlives the encoder side's config and layout: continue it in the model's
    let g = std::mem::replace(&mut e.g, hfexport_core::Graph::new("encoder"));
    Ok((Decoder::new(cfg, arch, weights, opts, "encoder").continuing(g), states, entry))
}

impl Decoder<'_> {
    /// An encoder-decoder's decode over a growing cache (optimum's merged decoder): inputs
    /// `input_ids` `[batch, sequence]`, `encoder_hidden_states` `[batch, encoder positions,
    /// hidden]`, a text encoder's `encoder_attention_mask` `[batch, encoder positions]`, and per
    /// layer `past_key_values.<i>.decoder.key|value` `[batch, heads, past_len, head_dim]` then
    /// `past_key_values.<i>.encoder.key|value` `[batch, heads, encoder_past_len, head_dim]`
    /// (the order optimum zips them in); outputs `logits` and the `present.` of each, in the same
    /// order. Positions are the cache slots `past_len..` (no decoder padding in a seq2seq batch).
    /// The cross-attention's keys and values are the past ones followed by the projections of
    /// the states from `encoder_past_len` on: the first call (an empty encoder past, as both
    /// clients feed it) projects all of them, a later one (the past returned) none, so no
    /// branch (`use_cache_branch`) is needed.
    pub(crate) fn seq2seq_decode(mut self, text_encoder: bool) -> Result<hfexport_core::Graph> {
        let (cfg, act, dtype) = (self.cfg, self.activation()?, self.opts.dtype);
        let one = Dim::konst(1);
        let max = crate::decoder::max_context(cfg);
        let batch = Dim::sym(&self.g.symbols.declare("batch", 1, self.opts.max_batch)?);
        let seq = Dim::sym(&self.g.symbols.declare("sequence", 1, max)?);
        let past = Dim::sym(&self.g.symbols.declare("past_len", 0, max - 1)?);
        let encoded = self.encoded_len()?;
        let (_, most) = encoded.bounds(&self.g.symbols);
        let encoded_past = Dim::sym(&self.g.symbols.declare(cache_ports::ENCODER_PAST, 0, most)?);
        let mask = match text_encoder {
            true => {
                Some(self.g.add_input(cache_ports::ENCODER_MASK, DType::I64, vec![batch.clone(), encoded.clone()])?)
            }
            false => None,
        };
        let ids = self.g.add_input("input_ids", DType::I64, vec![batch.clone(), seq.clone()])?;
        let states = self.g.add_input(
            cache_ports::ENCODER_STATES,
            dtype,
            vec![batch.clone(), encoded.clone(), Dim::from(cfg.hidden_size)],
        )?;
        let kinds = [
            cache_ports::decoder_kind("key"),
            cache_ports::decoder_kind("value"),
            cache_ports::encoder_kind("key"),
            cache_ports::encoder_kind("value"),
        ];
        let mut pasts = vec![];
        for (i, layer) in cfg.layers.iter().enumerate() {
            let a = cross_attention_spec(cfg, layer)?;
            let own = layer.cache(&past).into_iter().map(|(_, shape)| shape);
            let theirs = vec![Dim::konst(1), Dim::from(a.heads), encoded_past.clone(), Dim::from(a.head_dim)];
            let mut caches = vec![];
            for (kind, mut shape) in kinds.iter().zip(own.chain([theirs.clone(), theirs])) {
                shape[0] = batch.clone();
                caches.push(self.g.add_input(&cache_ports::past(&cache_ports::layer_cache(i, kind)), dtype, shape)?);
            }
            pasts.push(caches);
        }
        // the states not yet projected: all of them on the first call, none after
        let fresh = Op::Slice { axis: 1, start: encoded_past, end: encoded.clone() };
        let fresh = self.op("encoder.fresh_states", fresh, &[states])?;
        let (root, layout) =
            (self.root(), self.arch.layout.cross_attention.expect("an encoder-decoder has cross-attention"));
        let layers = root.pp(self.arch.layout.layers);
        let mut cross = vec![];
        for (i, layer) in cfg.layers.iter().enumerate() {
            let vb = layers.pp(i).pp(layout.prefix);
            let (k, v) = self.cross_kv(&vb, cross_attention_spec(cfg, layer)?, fresh)?;
            let k = self.op(&vb.name("cache_keys"), Op::Concat { axis: 2 }, &[pasts[i][2], k])?;
            cross.push((k, self.op(&vb.name("cache_values"), Op::Concat { axis: 2 }, &[pasts[i][3], v])?));
        }
        self.kv =
            crate::decoder::Kv::Growing { inputs: pasts.iter().map(|p| p[..2].to_vec()).collect(), outputs: vec![] };
        let (positions, key_positions, causal) = self.slot_positions(&past, &seq)?;
        let mut shared =
            LayerInputs { cross: cross.clone(), ..LayerInputs::new(vec![], causal, positions, key_positions) };
        if let Some(m) = mask {
            let m = self.op("encoder_mask.keys", Op::Cast(DType::Bool), &[m])?;
            let shape = vec![batch, one.clone(), one, encoded];
            shared.cross_mask = Some(self.op("encoder_mask", Op::Reshape { shape }, &[m])?);
        }
        if cfg.relative_attention.is_some() {
            shared.mask = self.relative_mask(&self.t5_bias_table(&root), positions, key_positions, causal, false)?;
        }
        self.logits(ids, &shared, act)?;
        let outputs = match std::mem::replace(&mut self.kv, crate::decoder::Kv::Tokens) {
            crate::decoder::Kv::Growing { outputs, .. } => outputs,
            _ => unreachable!("set above"),
        };
        for (i, (own, (k, v))) in outputs.into_iter().zip(cross).enumerate() {
            let values = own.into_iter().chain([k, v]);
            for (kind, value) in kinds.iter().zip(values) {
                self.g.add_output(&cache_ports::present(&cache_ports::layer_cache(i, kind)), value)?;
            }
        }
        Ok(self.g)
    }

    /// The encoder's positions as the decode sees them: Whisper's all `max_source_positions`
    /// frames, a text encoder's as many as its input has tokens (`encoder_sequence`).
    pub(crate) fn encoded_len(&mut self) -> Result<Dim> {
        let cfg = self.cfg;
        match cfg.seq2seq.as_ref().and_then(|s| s.source_positions) {
            Some(n) => Ok(Dim::from(n)),
            None => Ok(Dim::sym(&self.g.symbols.declare(
                "encoder_sequence",
                1,
                cfg.max_position_embeddings.max(1) as i64,
            )?)),
        }
    }

    /// The stack's input through its layers and final norm: `[batch, positions, hidden]`.
    fn encoder_states(&mut self, stack: &EncoderStack) -> Result<(ValueId, Entry)> {
        let (h, shared, entry) = match stack.input {
            StackInput::Speech { convs, positions } => {
                let (h, shared) = self.speech_inputs(convs, positions)?;
                (h, shared, Entry::InputFeatures)
            }
            StackInput::Tokens => {
                let (h, shared) = self.token_stack_inputs()?;
                (h, shared, Entry::TokenIds)
            }
        };
        let (act, root) = (self.activation()?, self.root());
        let layers = root.pp(self.arch.layout.layers);
        let mut h = h;
        for i in 0..self.cfg.num_hidden_layers {
            h = self.decoder_layer(&layers.pp(i), i, h, &shared, act)?;
        }
        Ok((self.final_norm(&root, h)?, entry))
    }

    /// T5: `input_ids` and `attention_mask` (int64 `[batch, sequence]`) through the token
    /// embedding; every token attends to every unpadded token, with the bidirectional relative
    /// position bias.
    fn token_stack_inputs(&mut self) -> Result<(ValueId, LayerInputs)> {
        let max_seq = self.cfg.max_position_embeddings.max(1) as i64;
        let batch = Dim::sym(&self.g.symbols.declare("batch", 1, self.opts.max_batch)?);
        let seq = Dim::sym(&self.g.symbols.declare("sequence", 1, max_seq)?);
        let ids = self.g.add_input("input_ids", DType::I64, vec![batch.clone(), seq.clone()])?;
        let am = self.g.add_input("attention_mask", DType::I64, vec![batch.clone(), seq.clone()])?;
        let one = Dim::konst(1);
        let iota = self.op("positions", Op::Iota { len: seq.clone() }, &[])?;
        let positions = self.op("position_ids", Op::Reshape { shape: vec![one.clone(), seq.clone()] }, &[iota])?;
        let root = self.root();
        let embedded_positions = match self.arch.layout.positions_from_ids {
            true => self.id_positions(ids)?,
            false => positions,
        };
        let (h, _) = self.embed(&root, ids, embedded_positions)?;
        let keys = self.op("mask.padding", Op::Cast(DType::Bool), &[am])?;
        let mut mask = self.op("mask", Op::Reshape { shape: vec![batch, one.clone(), one, seq] }, &[keys])?;
        if self.cfg.relative_attention.is_some() {
            mask = self.relative_mask(&self.t5_bias_table(&root), positions, positions, mask, true)?;
        }
        Ok((h, LayerInputs::without_rope(mask, positions)))
    }

    /// Whisper: `input_features` `[batch, num_mel_bins, 2 * max_source_positions]` (float32)
    /// through the convolutions, the learned positions added; every frame attends to every frame.
    fn speech_inputs(&mut self, convs: [&str; 2], positions: &str) -> Result<(ValueId, LayerInputs)> {
        let (cfg, dtype) = (self.cfg, self.opts.dtype);
        let s2s = cfg.seq2seq.as_ref().expect("an encoder side comes from a seq2seq config");
        let (Some(mel), Some(n)) = (s2s.mel_bins, s2s.source_positions) else {
            return Err(ModelError::Config {
                path: "config.json".into(),
                key: "num_mel_bins".into(),
                msg: "a speech encoder needs num_mel_bins and max_source_positions".into(),
            });
        };
        let hs = cfg.hidden_size;
        let batch = Dim::sym(&self.g.symbols.declare("batch", 1, self.opts.max_batch)?);
        let d = |v: usize| Dim::from(v);
        let mut x = self.g.add_input("input_features", DType::F32, vec![batch, d(mel), d(2 * n)])?;
        if dtype != DType::F32 {
            x = self.op("input_features.cast", Op::Cast(dtype), &[x])?;
        }
        let root = self.stem_root(convs[0]);
        // time-major from here on: [batch, frames, channels]
        let x = self.op(&root.name("frames_first"), Op::Transpose { perm: vec![0, 2, 1] }, &[x])?;
        let x = self.conv3(&root.pp(convs[0]), x, mel, 1)?;
        let x = self.conv3(&root.pp(convs[1]), x, hs, 2)?;
        let pos = self.weight(&root.pp(positions), "weight", &[n, hs])?;
        let h = self.op(&root.name("embeddings"), Op::Binary(BinaryOp::Add), &[x, pos])?;
        Ok((h, self.all_visible(n)?))
    }

    /// The first of the layout's roots under which the convolution `conv` is stored.
    fn stem_root(&self, conv: &str) -> Vb {
        let roots = self.arch.layout.roots;
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

    /// T5's bias table: the first layer's, shared by all.
    pub(crate) fn t5_bias_table(&self, root: &Vb) -> Vb {
        root.pp(self.arch.layout.layers).pp(0).pp(self.arch.layout.relative_bias.unwrap_or_default())
    }

    /// A relative position bias (T5, MPNet) as the layers' additive mask `[batch, heads, q, k]`:
    /// the bias in the table at `vb` of each (query, key) pair's bucket (`query` and `key` positions
    /// `[1, q]`, `[1, k]`), where `mask` (bool, broadcast to `[batch, 1, q, k]`) allows, else the
    /// dtype's lowest value. Buckets come from a constant table over the clamped distance (every
    /// distance beyond `max_distance` shares the last bucket), so no logarithm runs in the graph.
    pub(crate) fn relative_mask(
        &mut self,
        vb: &Vb,
        query: ValueId,
        key: ValueId,
        mask: ValueId,
        bidirectional: bool,
    ) -> Result<ValueId> {
        let rel = self.cfg.relative_attention.expect("the caller checked the config");
        let bias = self.relative_bias(vb, rel, (query, key), bidirectional)?;
        self.masked_bias("bias.mask", mask, bias)
    }

    /// The bias `[1, heads, q, k]` in the table at `vb` of each (query, key) pair's bucket, as
    /// [`Decoder::relative_mask`] buckets them (WavLM's, which each layer gates before masking).
    pub(crate) fn relative_bias(
        &mut self,
        vb: &Vb,
        rel: RelativeAttention,
        (query, key): (ValueId, ValueId),
        bidirectional: bool,
    ) -> Result<ValueId> {
        let heads = self.cfg.num_attention_heads;
        let far = rel.max_distance as i64;
        let table: Vec<i64> = (-far..=far).map(|r| rel.bucket(r, bidirectional)).collect();
        let (q, k) = (self.g.info(query).shape[1].clone(), self.g.info(key).shape[1].clone());
        let one = Dim::konst(1);
        let qs = self.op("bias.queries", Op::Reshape { shape: vec![q.clone(), one.clone()] }, &[query])?;
        let ks = self.op("bias.keys", Op::Reshape { shape: vec![one, k.clone()] }, &[key])?;
        let distance = self.op("bias.distance", Op::Binary(BinaryOp::Sub), &[ks, qs])?;
        let scalar = |v: i64| Tensor::int(DType::I64, vec![], vec![v]);
        let lo = self.op("bias.lowest", Op::Constant(scalar(-far)?), &[])?;
        let hi = self.op("bias.highest", Op::Constant(scalar(far)?), &[])?;
        let clamped = self.op("bias.clamped_low", Op::Binary(BinaryOp::Max), &[distance, lo])?;
        let clamped = self.op("bias.clamped", Op::Binary(BinaryOp::Min), &[clamped, hi])?;
        let index = self.op("bias.index", Op::Binary(BinaryOp::Add), &[clamped, hi])?;
        let buckets = self.lookup("bias.buckets", &table, index)?;
        let w = self.weight(vb, "weight", &[rel.table_rows, heads])?;
        let bias = self.op(&vb.name("gather"), Op::Gather { axis: 0 }, &[w, buckets])?;
        let bias = self.op(&vb.name("heads_first"), Op::Transpose { perm: vec![2, 0, 1] }, &[bias])?;
        self.op(&vb.name("batched"), Op::Reshape { shape: vec![Dim::konst(1), Dim::from(heads), q, k] }, &[bias])
    }
}
