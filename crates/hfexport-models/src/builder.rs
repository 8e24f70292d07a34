//! Builds core graphs straight from a checkpoint: no tracing, every dim that the I/O contract
//! makes symbolic stays symbolic, and weights stay lazy (names and transforms, no bytes).
//!
//! This module holds the graph plans (forward, static-cache decode, growing-cache prefill and
//! decode: inputs, masks, positions, rotary tables and caches); what happens between the
//! embedding and the logits is the family's blocks (`blocks.rs`) as its definition
//! ([`crate::families`]) composes them. Every weight is checked for presence, dtype and shape
//! before the graph is returned, so a malformed checkpoint fails here with the tensor's name.

use crate::config::{LayerSpec, ModelConfig, Span};
use crate::decoder::{max_context, BuildOptions, Decoder, Kv, LayerInputs, Weights};
use crate::error::{ModelError, Result};
use crate::task::Task;
use hfexport_core::cache_ports;
use hfexport_core::ops::{Activation, BinaryOp};
use hfexport_core::plan::{CacheMode, ComponentSpec, Entry, Exit, Planned, Positions, Role};
use hfexport_core::{DType, Dim, Graph, Op, RopeConfig, Tensor, ValueId};

/// Builds the forward graph of `task`: inputs `input_ids`, `attention_mask` (int64
/// `[batch, seq]`), output `logits` `[batch, seq, vocab]`.
pub fn build(cfg: &ModelConfig, weights: &dyn Weights, task: Task, opts: &BuildOptions) -> Result<Graph> {
    let arch = &cfg.family()?;
    if arch.layout.dual.is_some() {
        let mut components = crate::dual::components(cfg, arch, weights, task, opts)?;
        return match components.len() {
            1 => Ok(components.remove(0).graph),
            _ => Err(ModelError::Config {
                path: "config.json".into(),
                key: "architectures".into(),
                msg: format!(
                    "{} is exported for `{}` as the components {}: pick one",
                    cfg.architecture,
                    task.name(),
                    components.iter().map(|c| format!("`{}`", c.spec.name)).collect::<Vec<_>>().join(" and ")
                ),
            }),
        };
    }
    let model = Decoder::new(cfg, arch, weights, opts, "model");
    match task {
        Task::CausalLm if task.fits(arch) => model.causal_lm(),
        Task::SpeechRecognition | Task::Text2TextGeneration | Task::ImageTextToText
            if task.fits(arch) && task.generates(arch) =>
        {
            let first = if task == Task::ImageTextToText { "image_encoder" } else { "encoder" };
            Err(ModelError::Config {
                path: "config.json".into(),
                key: "architectures".into(),
                msg: format!(
                    "{} is exported for generation only (components `{first}` and `decode`): add --for-generation \
                     --static-cache N",
                    cfg.architecture
                ),
            })
        }
        _ => model.encoder(task),
    }
}

/// The forward components of `task`: [`build`]'s one graph with its spec, or an image-text
/// dual encoder's (`crate::dual`).
pub fn build_forward(
    cfg: &ModelConfig,
    weights: &dyn Weights,
    task: Task,
    opts: &BuildOptions,
) -> Result<Vec<Planned>> {
    let arch = &cfg.family()?;
    if arch.layout.dual.is_some() {
        return crate::dual::components(cfg, arch, weights, task, opts);
    }
    let mut spec = ComponentSpec::forward();
    match task {
        Task::FeatureExtraction => spec.exit = Exit::HiddenStates,
        Task::SentenceEmbedding => spec.exit = Exit::Embeddings,
        _ => {}
    }
    let graph = build(cfg, weights, task, opts)?;
    if graph.input("pixel_values").is_some() {
        spec.entry = Entry::PixelValues;
    } else if graph.input("input_values").is_some() {
        spec.entry = Entry::InputValues;
    }
    Ok(vec![Planned { spec, graph }])
}

/// The components of `export_for_generation`, by name:
/// - static cache with multi-token decode: `decode` only. Inputs `input_ids` `[1, sequence]`,
///   `attention_mask` bool `[1, 1, sequence, cache_len]` (true = may attend), `position_ids`
///   `[1, sequence]`, `past_key_values.<i>.key|value` `[1, kv_heads, cache_len, head_dim]`;
///   outputs `logits` and `present.<i>.…`, each updating its input in place. New keys/values
///   are written at the slots given by `position_ids`; the graph serves the prompt (empty cache)
///   and every later step.
/// - static cache: the same graph as `prefill`, and a `decode` whose `sequence` is 1.
/// - no static cache: `decode` over a growing cache (`past_len` symbolic, caches one call longer
///   out), which takes the prompt over an empty past as the clients drive one decoder (optimum's
///   `ORTModelForCausalLM`, transformers.js, ONNX Runtime GenAI, optimum-intel).
/// - a model with recurrent layers (Mamba, LFM2's convolutions): a static cache only (each
///   recurrent layer's cache is its fixed-size state, updated in place); a model that scans
///   (Mamba, Mamba2), unless the format loops over a run-time sequence
///   (`BuildOptions::sequence_loops`), gets `decode` at one token per call whatever
///   `multi_token_decode` says: the prompt goes through it token by token.
pub fn build_generation(
    cfg: &ModelConfig,
    weights: &dyn Weights,
    opts: &BuildOptions,
    static_cache: Option<usize>,
    multi_token_decode: bool,
) -> Result<Vec<Planned>> {
    let arch = &cfg.family()?;
    let decoder = |name: &str| Decoder::new(cfg, arch, weights, opts, name);
    let decode_opts = BuildOptions { latent: opts.latent.in_component(true), ..opts.clone() };
    let decoding = || Decoder::new(cfg, arch, weights, &decode_opts, "decode");
    let planned =
        |role: Role, cache: CacheMode, graph: Graph| Planned { spec: ComponentSpec::generation(role, cache), graph };
    let (stat, grow) = (CacheMode::StaticInPlace, CacheMode::Growing);
    // the one static `decode` of a format that keeps the cache in its program: any number of
    // tokens per call, at the slots `cache_position` gives
    let slotted = ComponentSpec { positions: Positions::Slots, ..ComponentSpec::generation(Role::Decode, stat) };
    // an encoder-decoder: the encoder (states and cross-attention keys and values, once per
    // input), then the decoder's components over a static cache
    let mut components = vec![];
    if arch.layout.encoder_stack.is_some() && static_cache.is_none() {
        return crate::seq2seq::growing_components(cfg, arch, weights, opts);
    }
    if arch.layout.vision.is_some() && static_cache.is_none() {
        return Err(ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: format!("{} exports for generation with a static cache: add --static-cache N", cfg.architecture),
        });
    }
    if cfg.recurrent() {
        let Some(n) = static_cache else { return Err(decoding().needs_static_cache()) };
        if cfg.scans() && !opts.sequence_loops {
            // no graph of this format loops over a prompt: it goes through the one-token step
            let mut decode = decoding().static_decode(n)?;
            decode.substitute_symbol("sequence", &Dim::konst(1))?;
            return Ok(vec![planned(Role::Decode, stat, decode)]);
        }
    }
    if arch.layout.encoder_stack.is_some() {
        components.push(crate::seq2seq::encoder_component(cfg, arch, weights, opts)?);
    }
    if arch.layout.vision.is_some() {
        components.extend(crate::vision::image_components(cfg, arch, weights, opts)?);
    }
    components.extend(match static_cache {
        Some(n) if opts.slot_positions && takes_slots(cfg) => {
            vec![Planned { spec: slotted, graph: decoding().static_decode(n)? }]
        }
        Some(n) if multi_token_decode => vec![planned(Role::Decode, stat, decoding().static_decode(n)?)],
        Some(n) => {
            // the prompt goes through the multi-token graph, later steps through one fixed at 1
            let mut decode = decoding().static_decode(n)?;
            decode.substitute_symbol("sequence", &Dim::konst(1))?;
            vec![
                planned(Role::Prefill, stat, decoder("prefill").static_decode(n)?),
                planned(Role::Decode, stat, decode),
            ]
        }
        None => vec![planned(Role::Decode, grow, decoding().growing_decode()?)],
    });
    Ok(components)
}

/// Whether `cfg`'s static decode can take `cache_position` (`Positions::Slots`) when the
/// format asks for it: a text decoder's (an image or encoder input has no place in that call)
/// attending over its cache (a recurrent state kept in the program would carry one prompt into
/// the next: nothing there is masked).
pub fn takes_slots(cfg: &ModelConfig) -> bool {
    cfg.vision.is_none() && cfg.seq2seq.is_none() && !cfg.recurrent()
}

impl<'a> Decoder<'a> {
    fn causal_lm(mut self) -> Result<Graph> {
        let act = self.activation()?;
        let batch = Dim::sym(&self.g.symbols.declare("batch", 1, self.opts.max_batch)?);
        let seq = Dim::sym(&self.g.symbols.declare("sequence", 1, max_context(self.cfg))?);
        let ids = self.g.add_input("input_ids", DType::I64, vec![batch.clone(), seq.clone()])?;
        let am = self.g.add_input("attention_mask", DType::I64, vec![batch.clone(), seq.clone()])?;
        let shared = self.layer_inputs(&batch, &seq, am)?;
        self.logits(ids, &shared, act)?;
        Ok(self.g)
    }

    fn static_decode(mut self, max_cache_len: usize) -> Result<Graph> {
        let (cfg, act) = (self.cfg, self.activation()?);
        let one = Dim::konst(1);
        let seq = Dim::sym(&self.g.symbols.declare("sequence", 1, max_cache_len as i64)?);
        // a cache kept in the program is all of its slots on every call
        let slotted = self.takes_slots();
        let fewest = if slotted { max_cache_len as i64 } else { 1 };
        let len = Dim::sym(&self.g.symbols.declare("cache_len", fewest, max_cache_len as i64)?);
        let ids = self.g.add_input("input_ids", DType::I64, vec![one.clone(), seq.clone()])?;
        let (mask, positions) = match slotted {
            true => self.slot_inputs(&seq, &len)?,
            false => {
                let mask = self.g.add_input(
                    "attention_mask",
                    DType::Bool,
                    vec![one.clone(), one.clone(), seq.clone(), len.clone()],
                )?;
                (mask, self.g.add_input("position_ids", DType::I64, vec![one.clone(), seq])?)
            }
        };
        let inputs = self.cache_inputs(&len, &one)?;
        self.kv = Kv::StaticCache { inputs, outputs: vec![] };
        let cross = self.cross_inputs()?;
        self.image = self.image_input()?;
        let ropes = match self.cfg.vision.as_ref().is_some_and(|v| !v.mrope_section.is_empty()) {
            true => self.mrope_rotary(positions, &len)?,
            false => self.rotary(positions)?,
        };
        let slots = self.op("cache.slots", Op::Iota { len: len.clone() }, &[])?;
        let key_positions = self.op("cache.slot_ids", Op::Reshape { shape: vec![one, len] }, &[slots])?;
        let mut shared = LayerInputs { cross, ..LayerInputs::new(ropes, mask, positions, key_positions) };
        self.alibi_masks(&mut shared, None)?;
        if cfg.relative_attention.is_some() {
            let root = self.root();
            shared.mask = self.relative_mask(&self.t5_bias_table(&root), positions, key_positions, mask, false)?;
        }
        self.logits(ids, &shared, act)?;
        self.cache_outputs(true)?;
        Ok(self.g)
    }

    /// Whether this static decode takes `cache_position` ([`BuildOptions::slot_positions`] and
    /// [`takes_slots`]).
    pub(crate) fn takes_slots(&self) -> bool {
        self.opts.slot_positions && takes_slots(self.cfg)
    }

    /// [`cache_ports::CACHE_POSITION`] `[seq]` (the slots of this call, `len` of them in all)
    /// and what it stands for: the positions `[1, seq]` and the causal mask `[1, 1, seq, len]`
    /// (slot `j` visible to query `i` iff `j <= cache_position[i]`), as the static cache's
    /// `attention_mask` and `position_ids` would have been fed.
    fn slot_inputs(&mut self, seq: &Dim, len: &Dim) -> Result<(ValueId, ValueId)> {
        let one = Dim::konst(1);
        let slots = self.g.add_input(cache_ports::CACHE_POSITION, DType::I64, vec![seq.clone()])?;
        let positions = self.op("cache.query_ids", Op::Reshape { shape: vec![one.clone(), seq.clone()] }, &[slots])?;
        let q = self.op(
            "mask.query_pos",
            Op::Reshape { shape: vec![one.clone(), one.clone(), seq.clone(), one.clone()] },
            &[slots],
        )?;
        let all = self.op("mask.slots", Op::Iota { len: len.clone() }, &[])?;
        let k =
            self.op("mask.key_pos", Op::Reshape { shape: vec![one.clone(), one.clone(), one, len.clone()] }, &[all])?;
        let mask = self.op("mask.causal", Op::Binary(BinaryOp::GreaterEqual), &[q, k])?;
        Ok((mask, positions))
    }

    /// Decode over a growing cache: `past_key_values.*` `[batch, kv_heads, past_len, head_dim]`,
    /// `attention_mask` int64 `[batch, past_len + sequence]` (0 = padding), `position_ids`
    /// `[batch, sequence]` (rotary and learned positions; a left-padded row's are its own);
    /// outputs the caches with this call's keys appended.
    fn growing_decode(mut self) -> Result<Graph> {
        let (cfg, act) = (self.cfg, self.activation()?);
        let one = Dim::konst(1);
        let max = max_context(cfg);
        let batch = Dim::sym(&self.g.symbols.declare("batch", 1, self.opts.max_batch)?);
        let seq = Dim::sym(&self.g.symbols.declare("sequence", 1, max)?);
        let past = Dim::sym(&self.g.symbols.declare("past_len", 0, max - 1)?);
        let total = past.add(&seq);
        let ids = self.g.add_input("input_ids", DType::I64, vec![batch.clone(), seq.clone()])?;
        let am = self.g.add_input("attention_mask", DType::I64, vec![batch.clone(), total.clone()])?;
        let positions = self.g.add_input("position_ids", DType::I64, vec![batch.clone(), seq.clone()])?;
        let inputs = self.cache_inputs(&past, &batch)?;
        self.kv = Kv::Growing { inputs, outputs: vec![] };
        let ropes = self.rotary(positions)?;
        let (query_positions, key_positions, causal) = self.slot_positions(&past, &seq)?;
        let pad = self.op("mask.padding", Op::Cast(DType::Bool), &[am])?;
        let pad = self.op("mask.padding_keys", Op::Reshape { shape: vec![batch, one.clone(), one, total] }, &[pad])?;
        let mask = self.op("mask", Op::Binary(BinaryOp::And), &[causal, pad])?;
        let mut shared = LayerInputs {
            token_positions: Some(positions),
            padding: Some(am),
            ..LayerInputs::new(ropes, mask, query_positions, key_positions)
        };
        self.alibi_masks(&mut shared, Some(am))?;
        self.logits(ids, &shared, act)?;
        self.cache_outputs(false)?;
        Ok(self.g)
    }

    /// The cache slots of a growing-cache call's queries `[1, seq]` (`past..past + seq`) and of
    /// its keys `[1, past + seq]`, and the causal mask between them `[1, 1, seq, past + seq]`:
    /// causality and windows go by cache slot, as transformers' `cache_position` (in a
    /// left-padded batch the rows' token positions are their own; chunks count them,
    /// `chunked_mask`).
    pub(crate) fn slot_positions(&mut self, past: &Dim, seq: &Dim) -> Result<(ValueId, ValueId, ValueId)> {
        let (one, total) = (Dim::konst(1), past.add(seq));
        let slots = self.op("cache.positions", Op::Iota { len: total.clone() }, &[])?;
        let key_positions =
            self.op("cache.key_ids", Op::Reshape { shape: vec![one.clone(), total.clone()] }, &[slots])?;
        let query_slots =
            self.op("cache.query_slots", Op::Slice { axis: 0, start: past.clone(), end: total.clone() }, &[slots])?;
        let query_positions =
            self.op("cache.query_ids", Op::Reshape { shape: vec![one.clone(), seq.clone()] }, &[query_slots])?;
        let q = self.op(
            "mask.query_pos",
            Op::Reshape { shape: vec![one.clone(), one.clone(), seq.clone(), one.clone()] },
            &[query_slots],
        )?;
        let k = self.op("mask.key_pos", Op::Reshape { shape: vec![one.clone(), one.clone(), one, total] }, &[slots])?;
        let causal = self.op("mask.causal", Op::Binary(BinaryOp::GreaterEqual), &[q, k])?;
        Ok((query_positions, key_positions, causal))
    }

    /// An encoder-decoder's decode inputs: each layer's cross-attention keys and values
    /// `[1, heads, encoder positions, head_dim]` (the encoder component's outputs).
    fn cross_inputs(&mut self) -> Result<Vec<(ValueId, ValueId)>> {
        let cfg = self.cfg;
        if cfg.seq2seq.is_none() {
            return Ok(vec![]);
        }
        let positions = self.encoded_len()?;
        let mut cross = vec![];
        for (i, layer) in cfg.layers.iter().enumerate() {
            let a = crate::seq2seq::cross_attention_spec(cfg, layer)?;
            let shape = vec![Dim::konst(1), Dim::from(a.heads), positions.clone(), Dim::from(a.head_dim)];
            let k = self.g.add_input(&crate::seq2seq::cross_name(i, "keys"), self.opts.dtype, shape.clone())?;
            let v = self.g.add_input(&crate::seq2seq::cross_name(i, "values"), self.opts.dtype, shape)?;
            cross.push((k, v));
        }
        Ok(cross)
    }

    /// Embedding, decoder layers, final norm and head: the `logits` output.
    pub(crate) fn logits(&mut self, ids: ValueId, shared: &LayerInputs, act: Activation) -> Result<()> {
        let mut shared = LayerInputs { chunked_mask: self.chunked_mask(shared)?, ..shared.clone() };
        let root = self.root();
        let positions = shared.token_positions.unwrap_or(shared.positions);
        let (ids, (mut h, table)) = match self.image {
            Some(image) => (ids, self.embed_with_image(&root, ids, image, positions)?),
            None => {
                let ids = self.without_placeholders(ids)?;
                let (h, table) = self.embed(&root, ids, positions)?;
                (ids, (self.media_token_embeddings(ids, h)?, table))
            }
        };
        if let (Some(pli), Some(names)) = (self.cfg.per_layer_input, self.arch.layout.per_layer_inputs) {
            shared.per_layer = Some(self.per_layer_inputs(&root, names, pli, ids, h)?);
        }
        let shared = &shared;
        let altup = self.cfg.altup.zip(self.arch.layout.altup);
        if let Some((altup, names)) = altup {
            h = self.altup_streams(&root, names, altup.streams, h)?;
        }
        let layers = root.pp(self.arch.layout.layers);
        for i in 0..self.cfg.num_hidden_layers {
            h = self.decoder_layer(&layers.pp(i), i, h, shared, act)?;
        }
        if let Some((altup, names)) = altup {
            h = self.altup_merge(&root, names, altup.streams, h)?;
        }
        let logits = self.head(&root, h, table)?;
        self.g.add_output("logits", logits)?;
        Ok(())
    }

    /// `ids` with the config's media placeholders as the padding token (Gemma 4 embeds them so
    /// when no media come with them); `ids` itself when there are none.
    fn without_placeholders(&mut self, ids: ValueId) -> Result<ValueId> {
        let cfg = self.cfg;
        let (placeholders, pad) = (&cfg.placeholder_ids, cfg.pad_token_id.unwrap_or(0));
        if placeholders.is_empty() {
            return Ok(ids);
        }
        let mut any = None;
        for (i, &p) in placeholders.iter().enumerate() {
            let c = self.id_scalar(&format!("placeholders.{i}"), p)?;
            let hit = self.op(&format!("placeholders.{i}.hit"), Op::Binary(BinaryOp::Equal), &[ids, c])?;
            any = Some(match any {
                Some(prev) => self.op(&format!("placeholders.{i}.any"), Op::Binary(BinaryOp::Or), &[prev, hit])?,
                None => hit,
            });
        }
        let pad = self.id_scalar("placeholders.pad", pad)?;
        self.op("input_ids.text", Op::Where, &[any.expect("some placeholder"), pad, ids])
    }

    /// `s.mask` and, per query, the keys of its chunk where a layer is chunked (Llama 4): the
    /// chunk of a forward pass's token is counted over the attention mask (from each row's
    /// first token, as transformers skips the left padding), of a generation step's by its
    /// position and cache slot.
    fn chunked_mask(&mut self, s: &LayerInputs) -> Result<Option<ValueId>> {
        let chunk = self.cfg.layers.iter().filter_map(LayerSpec::attention).find_map(|a| match a.span {
            Span::Chunked(n) => Some(n),
            Span::Full | Span::Sliding(_) => None,
        });
        let Some(chunk) = chunk else { return Ok(None) };
        // chunks count from each row's first token, as transformers' left-padding-aware chunked
        // mask does: positions counted over `attention_mask`, whose last columns are the
        // queries' in a growing-cache decode (its mask spans the past too)
        let (queries, keys) = match s.padding {
            Some(am) => {
                let counted = self.mask_positions("mask.chunk_positions", am)?;
                let (total, seq) = (self.g.info(am).shape[1].clone(), self.g.info(s.positions).shape[1].clone());
                let queries = match total == seq {
                    true => counted,
                    false => {
                        let past = Op::Slice { axis: 1, start: total.sub(&seq), end: total };
                        self.op("mask.chunk_query_positions", past, &[counted])?
                    }
                };
                (queries, counted)
            }
            None => (s.positions, s.key_positions),
        };
        let size = self.op("mask.chunk_size", Op::Constant(Tensor::i64(vec![], vec![chunk as i64])?), &[])?;
        let one = Dim::konst(1);
        let mut chunk_of = |name: &str, p: ValueId, query: bool| -> Result<ValueId> {
            let c = self.op(&format!("mask.{name}_chunks"), Op::Binary(BinaryOp::Div), &[p, size])?;
            let ps = self.g.info(p).shape.clone();
            let shape = match query {
                true => vec![ps[0].clone(), one.clone(), ps[1].clone(), one.clone()],
                false => vec![ps[0].clone(), one.clone(), one.clone(), ps[1].clone()],
            };
            self.op(&format!("mask.{name}_chunk_ids"), Op::Reshape { shape }, &[c])
        };
        let (q, k) = (chunk_of("query", queries, true)?, chunk_of("key", keys, false)?);
        let same = self.op("mask.same_chunk", Op::Binary(BinaryOp::Equal), &[q, k])?;
        Ok(Some(self.op("mask.chunked", Op::Binary(BinaryOp::And), &[s.mask, same])?))
    }

    /// Rotary tables for `positions` `[b|1, s]`, in the graph's dtype, for each distinct rope
    /// the layers use (the sliding layers' own is `model.rotary_emb_local`).
    pub(crate) fn rotary(&mut self, positions: ValueId) -> Result<Vec<(RopeConfig, ValueId, ValueId)>> {
        let mut ropes: Vec<RopeConfig> = vec![];
        for rope in self.cfg.layers.iter().filter_map(LayerSpec::rope) {
            if !ropes.contains(rope) {
                ropes.push(rope.clone());
            }
        }
        let dtype = self.opts.dtype;
        let mut tables = vec![];
        for rope in ropes {
            let name = if rope == self.cfg.rope { "model.rotary_emb" } else { "model.rotary_emb_local" };
            let cs = self.g.add_node(name, Op::RotaryCosSin { rope: rope.clone() }, &[positions])?;
            let (mut cos, mut sin) = (cs[0], cs[1]);
            if dtype != DType::F32 {
                cos = self.op(&format!("{name}.cos"), Op::Cast(dtype), &[cos])?;
                sin = self.op(&format!("{name}.sin"), Op::Cast(dtype), &[sin])?;
            }
            tables.push((rope, cos, sin));
        }
        Ok(tables)
    }

    /// Positions `0..seq` (as transformers uses without `position_ids`), rotary tables, and the
    /// causal mask combined with the padding mask.
    fn layer_inputs(&mut self, batch: &Dim, seq: &Dim, attention_mask: ValueId) -> Result<LayerInputs> {
        let one = Dim::konst(1);
        let pos = self.op("positions", Op::Iota { len: seq.clone() }, &[])?;
        let positions = self.op("position_ids", Op::Reshape { shape: vec![one.clone(), seq.clone()] }, &[pos])?;
        let ropes = self.rotary(positions)?;
        let q = self.op(
            "mask.query_pos",
            Op::Reshape { shape: vec![one.clone(), one.clone(), seq.clone(), one.clone()] },
            &[pos],
        )?;
        let k = self.op(
            "mask.key_pos",
            Op::Reshape { shape: vec![one.clone(), one.clone(), one.clone(), seq.clone()] },
            &[pos],
        )?;
        let causal = self.op("mask.causal", Op::Binary(BinaryOp::GreaterEqual), &[q, k])?;
        let pad = self.op("mask.padding", Op::Cast(DType::Bool), &[attention_mask])?;
        let pad = self.op(
            "mask.padding_keys",
            Op::Reshape { shape: vec![batch.clone(), one.clone(), one, seq.clone()] },
            &[pad],
        )?;
        let mask = self.op("mask", Op::Binary(BinaryOp::And), &[causal, pad])?;
        let mut shared =
            LayerInputs { padding: Some(attention_mask), ..LayerInputs::new(ropes, mask, positions, positions) };
        if self.arch.layout.positions_from_mask {
            // the causal mask is made above from `0..seq`; a window compares these, which differ
            // from it by the row's padding only
            shared.positions = self.mask_positions("position_ids.counted", attention_mask)?;
            shared.key_positions = shared.positions;
        }
        self.alibi_masks(&mut shared, Some(attention_mask))?;
        Ok(shared)
    }

    /// With a static cache, writes this call's keys and values into the layer's cache at the
    /// tokens' positions and attends over the whole updated cache. The cache input is read by
    /// `CacheUpdate` only and everything after reads the update, so a backend may bind the
    /// input and output to one buffer.
    pub(crate) fn cached_kv(
        &mut self,
        p: &str,
        layer: usize,
        k: ValueId,
        v: ValueId,
        positions: ValueId,
    ) -> Result<(ValueId, ValueId)> {
        let (k, v) = match &self.kv {
            Kv::Tokens => (k, v),
            Kv::StaticCache { inputs, .. } => {
                let (ck, cv) = (inputs[layer][0], inputs[layer][1]);
                let k = self.op(&format!("{p}.cache_keys"), Op::CacheUpdate, &[ck, k, positions])?;
                (k, self.op(&format!("{p}.cache_values"), Op::CacheUpdate, &[cv, v, positions])?)
            }
            Kv::Growing { inputs, .. } => {
                let (pk, pv) = (inputs[layer][0], inputs[layer][1]);
                let k = self.op(&format!("{p}.cache_keys"), Op::Concat { axis: 2 }, &[pk, k])?;
                (k, self.op(&format!("{p}.cache_values"), Op::Concat { axis: 2 }, &[pv, v])?)
            }
        };
        match &mut self.kv {
            Kv::Tokens => {}
            Kv::StaticCache { outputs, .. } | Kv::Growing { outputs, .. } => record_cache(outputs, layer, vec![k, v]),
        }
        Ok((k, v))
    }

    /// Records that `layer` keeps no cache (it attends over another layer's).
    pub(crate) fn record_no_cache(&mut self, layer: usize) {
        match &mut self.kv {
            Kv::Tokens => {}
            Kv::StaticCache { outputs, .. } | Kv::Growing { outputs, .. } => record_cache(outputs, layer, vec![]),
        }
    }

    /// Declares `past_key_values.<i>.*` of every layer, as its [`crate::config::LayerSpec::cache`] says,
    /// over `len` positions.
    fn cache_inputs(&mut self, len: &Dim, batch: &Dim) -> Result<Vec<Vec<ValueId>>> {
        let (cfg, dtype) = (self.cfg, self.opts.dtype);
        let mut layers = Vec::with_capacity(cfg.layers.len());
        for (i, layer) in cfg.layers.iter().enumerate() {
            let mut states = vec![];
            for (kind, mut shape) in layer.cache(len) {
                shape[0] = batch.clone();
                states.push(self.g.add_input(&cache_ports::past(&cache_ports::layer_cache(i, kind)), dtype, shape)?);
            }
            layers.push(states);
        }
        Ok(layers)
    }

    /// Adds `present.<i>.*` for the caches the layers produced; `alias`: they update the
    /// inputs of the same name in place.
    fn cache_outputs(&mut self, alias: bool) -> Result<()> {
        let outputs = match std::mem::replace(&mut self.kv, Kv::Tokens) {
            Kv::StaticCache { outputs, .. } | Kv::Growing { outputs, .. } => outputs,
            Kv::Tokens => vec![],
        };
        for (i, (layer, states)) in self.cfg.layers.iter().zip(outputs).enumerate() {
            for (kind, value) in layer.cache_names().iter().zip(states) {
                let cache = cache_ports::layer_cache(i, kind);
                self.g.add_output(&cache_ports::present(&cache), value)?;
                if alias {
                    self.g.add_alias(&cache_ports::present(&cache), &cache_ports::past(&cache));
                }
            }
        }
        Ok(())
    }
}

/// Adds `states` to layer `layer`'s cache outputs: a new entry for its first mixer, appended
/// for a second one of the same layer (Falcon-H1's attention, then its Mamba2 mixer).
pub(crate) fn record_cache(outputs: &mut Vec<Vec<ValueId>>, layer: usize, states: Vec<ValueId>) {
    if outputs.len() == layer + 1 {
        outputs[layer].extend(states);
    } else {
        debug_assert_eq!(outputs.len(), layer, "layers record their caches in order");
        outputs.push(states);
    }
}
