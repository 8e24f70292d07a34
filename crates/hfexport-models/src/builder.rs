//! Builds core graphs straight from a checkpoint: no tracing, every dim that the I/O contract
//! makes symbolic stays symbolic, and weights stay lazy (names and transforms, no bytes).
//!
//! One decoder builder serves the whole Llama family; the differences between architectures
//! are flags in [`ArchSpec`]. Every weight is checked for presence, dtype and shape before the
//! graph is returned, so a malformed checkpoint fails here with the tensor's name.

use crate::config::{LayerType, ModelConfig};
use crate::error::{ModelError, Result};
use crate::registry::{lookup, ArchSpec};
use hfexport_core::ops::{Activation, BinaryOp};
use hfexport_core::plan::{CacheMode, ComponentSpec, Planned, Role};
use hfexport_core::{DType, Dim, Graph, Op, TensorInfo, ValueId, WeightExpr};

/// What a builder can ask of a weight store: a float tensor of a given shape, or an error
/// naming the tensor and the file.
pub trait Weights {
    fn expect(&self, name: &str, shape: &[usize]) -> Result<TensorInfo>;
}

impl Weights for crate::Checkpoint {
    fn expect(&self, name: &str, shape: &[usize]) -> Result<TensorInfo> {
        self.expect_tensor(name, shape)
    }
}

/// The task a graph is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    CausalLm,
}

impl Task {
    pub const NAMES: [&'static str; 1] = ["causal-lm"];

    /// The name recorded in `export.json`.
    pub fn name(self) -> &'static str {
        match self {
            Task::CausalLm => "causal-lm",
        }
    }

    pub fn parse(s: &str) -> Result<Task, String> {
        match s {
            "causal-lm" | "text-generation" => Ok(Task::CausalLm),
            _ => Err(format!("task `{s}` is not supported; valid: {}", Task::NAMES.join(", "))),
        }
    }
}

/// Largest batch the symbolic `batch` dim admits by default.
pub const DEFAULT_MAX_BATCH: i64 = 4096;

#[derive(Debug, Clone, PartialEq)]
pub struct BuildOptions {
    /// Dtype of the graph's float values and weights (weights are cast lazily).
    pub dtype: DType,
    pub max_batch: i64,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions { dtype: DType::F32, max_batch: DEFAULT_MAX_BATCH }
    }
}

/// The longest sequence the model accepts: `max_position_embeddings`, times the factor for
/// dynamic-NTK rope, whose point is to run past it.
pub fn max_context(cfg: &ModelConfig) -> i64 {
    let base = cfg.max_position_embeddings as f64;
    match cfg.rope.scaling {
        hfexport_core::RopeScaling::Dynamic { factor, .. } => (base * factor.max(1.0)).floor() as i64,
        _ => base as i64,
    }
}

/// Builds the forward graph of `task`: inputs `input_ids`, `attention_mask` (int64
/// `[batch, seq]`), output `logits` `[batch, seq, vocab]`.
pub fn build(cfg: &ModelConfig, weights: &dyn Weights, task: Task, opts: &BuildOptions) -> Result<Graph> {
    let spec = lookup(&cfg.architecture)?;
    match task {
        Task::CausalLm => Decoder { cfg, spec, weights, opts, g: Graph::new("model"), kv: Kv::Tokens }.causal_lm(),
    }
}

/// The forward component of `task` ([`build`] with its spec).
pub fn build_forward(cfg: &ModelConfig, weights: &dyn Weights, task: Task, opts: &BuildOptions) -> Result<Planned> {
    Ok(Planned { spec: ComponentSpec::forward(), graph: build(cfg, weights, task, opts)? })
}

/// Name of the cache tensor of `layer` (`keys` or `values`), as in docs/io-contracts.md.
pub fn cache_name(layer: usize, kind: &str) -> String {
    format!("cache.layers.{layer}.{kind}")
}

/// The components of `export_for_generation`, by name:
/// - static cache with multi-token decode: `decode` only. Inputs `input_ids` `[1, sequence]`,
///   `attention_mask` bool `[1, 1, sequence, cache_len]` (true = may attend), `position_ids`
///   `[1, sequence]`, `input.cache.layers.<i>.keys|values` `[1, kv_heads, cache_len, head_dim]`;
///   outputs `logits` and `output.cache.…`, each updating its input in place. New keys/values
///   are written at the slots given by `position_ids`; the graph serves the prompt (empty cache)
///   and every later step.
/// - static cache: the same graph as `prefill`, and a `decode` whose `sequence` is 1.
/// - no static cache: `prefill` (the forward graph at batch 1, caches out) and `decode` over a
///   growing cache (`past_len` symbolic, caches one call longer out).
pub fn build_generation(
    cfg: &ModelConfig,
    weights: &dyn Weights,
    opts: &BuildOptions,
    static_cache: Option<usize>,
    multi_token_decode: bool,
) -> Result<Vec<Planned>> {
    let spec = lookup(&cfg.architecture)?;
    let decoder = |name: &str| Decoder { cfg, spec, weights, opts, g: Graph::new(name), kv: Kv::Tokens };
    let planned =
        |role: Role, cache: CacheMode, graph: Graph| Planned { spec: ComponentSpec::generation(role, cache), graph };
    let (stat, grow) = (CacheMode::StaticInPlace, CacheMode::Growing);
    Ok(match static_cache {
        Some(n) if multi_token_decode => vec![planned(Role::Decode, stat, decoder("decode").static_decode(n)?)],
        Some(n) => {
            // the prompt goes through the multi-token graph, later steps through one fixed at 1
            let mut decode = decoder("decode").static_decode(n)?;
            decode.substitute_symbol("sequence", &Dim::konst(1))?;
            vec![
                planned(Role::Prefill, stat, decoder("prefill").static_decode(n)?),
                planned(Role::Decode, stat, decode),
            ]
        }
        None => vec![
            Planned { spec: ComponentSpec::growing_prefill(), graph: decoder("prefill").growing_prefill()? },
            planned(Role::Decode, grow, decoder("decode").growing_decode()?),
        ],
    })
}

/// Per-layer activations shared by every layer: rotary tables, mask and positions.
struct LayerInputs {
    cos: ValueId,
    sin: ValueId,
    mask: ValueId,
    /// Positions of the queries and of the keys (the same in a forward pass; cache slots when
    /// the keys come from a static cache), for sliding windows.
    positions: ValueId,
    key_positions: ValueId,
}

/// Where the keys and values of each layer come from.
enum Kv {
    /// This call's tokens only (the forward graph).
    Tokens,
    /// This call's tokens, whose keys and values are also outputs (a prefill with no cache in).
    Present { outputs: Vec<(ValueId, ValueId)> },
    /// A growing cache: `input.` keys/values of the past tokens, concatenated with this call's
    /// (the `output.` values are one call longer).
    Growing { inputs: Vec<(ValueId, ValueId)>, outputs: Vec<(ValueId, ValueId)> },
    /// A static cache per layer (`input.` keys, values), written at `positions` by
    /// `CacheUpdate`; the updated caches become `output.` values.
    StaticCache { inputs: Vec<(ValueId, ValueId)>, outputs: Vec<(ValueId, ValueId)> },
}

struct Decoder<'a> {
    cfg: &'a ModelConfig,
    spec: &'a ArchSpec,
    weights: &'a dyn Weights,
    opts: &'a BuildOptions,
    g: Graph,
    kv: Kv,
}

impl Decoder<'_> {
    fn weight(&mut self, name: &str, shape: &[usize]) -> Result<ValueId> {
        let info = self.weights.expect(name, shape)?;
        let mut expr = WeightExpr::stored(name);
        if info.dtype != self.opts.dtype {
            expr = WeightExpr::Cast(Box::new(expr), self.opts.dtype);
        }
        Ok(self.g.add_weight(name, expr, self.opts.dtype, shape))
    }

    fn op(&mut self, name: &str, op: Op, ins: &[ValueId]) -> Result<ValueId> {
        Ok(self.g.op(name, op, ins)?)
    }

    fn linear(&mut self, prefix: &str, out: usize, inp: usize, bias: bool, x: ValueId) -> Result<ValueId> {
        let w = self.weight(&format!("{prefix}.weight"), &[out, inp])?;
        let mut ins = vec![x, w];
        if bias {
            ins.push(self.weight(&format!("{prefix}.bias"), &[out])?);
        }
        self.op(prefix, Op::Linear, &ins)
    }

    fn rms_norm(&mut self, prefix: &str, size: usize, x: ValueId) -> Result<ValueId> {
        let w = self.weight(&format!("{prefix}.weight"), &[size])?;
        let eps = self.cfg.rms_norm_eps as f32;
        self.op(prefix, Op::RmsNorm { eps }, &[x, w])
    }

    fn activation(&self) -> Result<Activation> {
        let name = &self.cfg.hidden_act;
        Activation::from_hf(name).ok_or_else(|| ModelError::Config {
            path: "config.json".into(),
            key: "hidden_act".into(),
            msg: format!("`{name}` is not supported; valid: {}", Activation::NAMES.join(", ")),
        })
    }

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
        let len = Dim::sym(&self.g.symbols.declare("cache_len", 1, max_cache_len as i64)?);
        let ids = self.g.add_input("input_ids", DType::I64, vec![one.clone(), seq.clone()])?;
        let mask = self.g.add_input(
            "attention_mask",
            DType::Bool,
            vec![one.clone(), one.clone(), seq.clone(), len.clone()],
        )?;
        let positions = self.g.add_input("position_ids", DType::I64, vec![one.clone(), seq])?;
        let cache_shape = vec![one.clone(), Dim::from(cfg.num_key_value_heads), len.clone(), Dim::from(cfg.head_dim)];
        let mut inputs = vec![];
        for i in 0..cfg.num_hidden_layers {
            let k =
                self.g.add_input(&format!("input.{}", cache_name(i, "keys")), self.opts.dtype, cache_shape.clone())?;
            let v = self.g.add_input(
                &format!("input.{}", cache_name(i, "values")),
                self.opts.dtype,
                cache_shape.clone(),
            )?;
            inputs.push((k, v));
        }
        self.kv = Kv::StaticCache { inputs, outputs: vec![] };
        let (cos, sin) = self.rotary(positions)?;
        let slots = self.op("cache.slots", Op::Iota { len: len.clone() }, &[])?;
        let key_positions = self.op("cache.slot_ids", Op::Reshape { shape: vec![one, len] }, &[slots])?;
        let shared = LayerInputs { cos, sin, mask, positions, key_positions };
        self.logits(ids, &shared, act)?;
        self.cache_outputs(true)?;
        Ok(self.g)
    }

    /// Prefill of a growing cache: the forward graph at batch 1, whose keys and values are
    /// also outputs (`output.cache.*`, `[1, kv_heads, sequence, head_dim]`).
    fn growing_prefill(mut self) -> Result<Graph> {
        let act = self.activation()?;
        let one = Dim::konst(1);
        let seq = Dim::sym(&self.g.symbols.declare("sequence", 1, max_context(self.cfg))?);
        let ids = self.g.add_input("input_ids", DType::I64, vec![one.clone(), seq.clone()])?;
        let am = self.g.add_input("attention_mask", DType::I64, vec![one.clone(), seq.clone()])?;
        self.kv = Kv::Present { outputs: vec![] };
        let shared = self.layer_inputs(&one, &seq, am)?;
        self.logits(ids, &shared, act)?;
        self.cache_outputs(false)?;
        Ok(self.g)
    }

    /// Decode over a growing cache: `input.cache.*` `[1, kv_heads, past_len, head_dim]`,
    /// `attention_mask` int64 `[1, past_len + sequence]` (0 = padding), `position_ids`
    /// `[1, sequence]`; outputs the caches with this call's keys appended.
    fn growing_decode(mut self) -> Result<Graph> {
        let (cfg, act) = (self.cfg, self.activation()?);
        let one = Dim::konst(1);
        let max = max_context(cfg);
        let seq = Dim::sym(&self.g.symbols.declare("sequence", 1, max)?);
        let past = Dim::sym(&self.g.symbols.declare("past_len", 0, max - 1)?);
        let total = past.add(&seq);
        let ids = self.g.add_input("input_ids", DType::I64, vec![one.clone(), seq.clone()])?;
        let am = self.g.add_input("attention_mask", DType::I64, vec![one.clone(), total.clone()])?;
        let positions = self.g.add_input("position_ids", DType::I64, vec![one.clone(), seq.clone()])?;
        let cache_shape = vec![one.clone(), Dim::from(cfg.num_key_value_heads), past, Dim::from(cfg.head_dim)];
        let inputs = self.cache_inputs(&cache_shape)?;
        self.kv = Kv::Growing { inputs, outputs: vec![] };
        let (cos, sin) = self.rotary(positions)?;
        let keys = self.op("cache.positions", Op::Iota { len: total.clone() }, &[])?;
        let key_positions =
            self.op("cache.key_ids", Op::Reshape { shape: vec![one.clone(), total.clone()] }, &[keys])?;
        let q = self.op(
            "mask.query_pos",
            Op::Reshape { shape: vec![one.clone(), one.clone(), seq, one.clone()] },
            &[positions],
        )?;
        let k = self.op(
            "mask.key_pos",
            Op::Reshape { shape: vec![one.clone(), one.clone(), one.clone(), total.clone()] },
            &[keys],
        )?;
        let causal = self.op("mask.causal", Op::Binary(BinaryOp::GreaterEqual), &[q, k])?;
        let pad = self.op("mask.padding", Op::Cast(DType::Bool), &[am])?;
        let pad =
            self.op("mask.padding_keys", Op::Reshape { shape: vec![one.clone(), one.clone(), one, total] }, &[pad])?;
        let mask = self.op("mask", Op::Binary(BinaryOp::And), &[causal, pad])?;
        let shared = LayerInputs { cos, sin, mask, positions, key_positions };
        self.logits(ids, &shared, act)?;
        self.cache_outputs(false)?;
        Ok(self.g)
    }

    /// Embedding, decoder layers, final norm and head: the `logits` output.
    fn logits(&mut self, ids: ValueId, shared: &LayerInputs, act: Activation) -> Result<()> {
        let cfg = self.cfg;
        let embed = self.weight("model.embed_tokens.weight", &[cfg.vocab_size, cfg.hidden_size])?;
        let mut h = self.op("model.embed_tokens", Op::Gather { axis: 0 }, &[embed, ids])?;
        for i in 0..cfg.num_hidden_layers {
            h = self.decoder_layer(i, h, shared, act)?;
        }
        let h = self.rms_norm("model.norm", cfg.hidden_size, h)?;
        let lm_head = if cfg.tie_word_embeddings {
            embed
        } else {
            self.weight("lm_head.weight", &[cfg.vocab_size, cfg.hidden_size])?
        };
        let logits = self.op("lm_head", Op::Linear, &[h, lm_head])?;
        self.g.add_output("logits", logits)?;
        Ok(())
    }

    /// Rotary tables for `positions` `[b|1, s]`, in the graph's dtype.
    fn rotary(&mut self, positions: ValueId) -> Result<(ValueId, ValueId)> {
        let rope = self.cfg.rope.clone();
        let cs = self.g.add_node("model.rotary_emb", Op::RotaryCosSin { rope }, &[positions])?;
        let dtype = self.opts.dtype;
        let (mut cos, mut sin) = (cs[0], cs[1]);
        if dtype != DType::F32 {
            cos = self.op("model.rotary_emb.cos", Op::Cast(dtype), &[cos])?;
            sin = self.op("model.rotary_emb.sin", Op::Cast(dtype), &[sin])?;
        }
        Ok((cos, sin))
    }

    /// Positions `0..seq` (as transformers uses without `position_ids`), rotary tables, and the
    /// causal mask combined with the padding mask.
    fn layer_inputs(&mut self, batch: &Dim, seq: &Dim, attention_mask: ValueId) -> Result<LayerInputs> {
        let one = Dim::konst(1);
        let pos = self.op("positions", Op::Iota { len: seq.clone() }, &[])?;
        let positions = self.op("position_ids", Op::Reshape { shape: vec![one.clone(), seq.clone()] }, &[pos])?;
        let (cos, sin) = self.rotary(positions)?;
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
        Ok(LayerInputs { cos, sin, mask, positions, key_positions: positions })
    }

    fn decoder_layer(&mut self, i: usize, h: ValueId, s: &LayerInputs, act: Activation) -> Result<ValueId> {
        let cfg = self.cfg;
        let p = format!("model.layers.{i}");
        let x = self.rms_norm(&format!("{p}.input_layernorm"), cfg.hidden_size, h)?;
        let a = self.attention(&format!("{p}.self_attn"), i, x, s)?;
        let h = self.op(&format!("{p}.attn_residual"), Op::Binary(BinaryOp::Add), &[h, a])?;
        let x = self.rms_norm(&format!("{p}.post_attention_layernorm"), cfg.hidden_size, h)?;
        let m = self.mlp(&format!("{p}.mlp"), x, act)?;
        self.op(&format!("{p}.mlp_residual"), Op::Binary(BinaryOp::Add), &[h, m])
    }

    /// `[b, s, heads*d]` -> `[b, heads, s, d]`, with the optional per-head norm in between.
    fn split_heads(&mut self, name: &str, x: ValueId, heads: usize, norm: Option<String>) -> Result<ValueId> {
        let s = self.g.info(x).shape.clone();
        let d = self.cfg.head_dim;
        let shape = vec![s[0].clone(), s[1].clone(), Dim::from(heads), Dim::from(d)];
        let mut x = self.op(&format!("{name}.split_heads"), Op::Reshape { shape }, &[x])?;
        if let Some(norm) = norm {
            x = self.rms_norm(&norm, d, x)?;
        }
        self.op(&format!("{name}.heads_first"), Op::Transpose { perm: vec![0, 2, 1, 3] }, &[x])
    }

    fn attention(&mut self, p: &str, layer: usize, x: ValueId, s: &LayerInputs) -> Result<ValueId> {
        let (cfg, spec) = (self.cfg, self.spec);
        let (hd, nh, nkv) = (cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads);
        let qkv_bias = spec.qkv_bias.resolve(cfg.attention_bias);
        let q = self.linear(&format!("{p}.q_proj"), nh * hd, cfg.hidden_size, qkv_bias, x)?;
        let k = self.linear(&format!("{p}.k_proj"), nkv * hd, cfg.hidden_size, qkv_bias, x)?;
        let v = self.linear(&format!("{p}.v_proj"), nkv * hd, cfg.hidden_size, qkv_bias, x)?;
        let norm = |n: &str| spec.qk_norm.then(|| format!("{p}.{n}_norm"));
        let q = self.split_heads(&format!("{p}.q"), q, nh, norm("q"))?;
        let k = self.split_heads(&format!("{p}.k"), k, nkv, norm("k"))?;
        let v = self.split_heads(&format!("{p}.v"), v, nkv, None)?;
        let q = self.op(&format!("{p}.q_rotary"), Op::ApplyRotary, &[q, s.cos, s.sin])?;
        let k = self.op(&format!("{p}.k_rotary"), Op::ApplyRotary, &[k, s.cos, s.sin])?;
        let (k, v) = self.cached_kv(p, layer, k, v, s.positions)?;
        let window = match (spec.sliding_window, cfg.layer_types.get(layer), cfg.sliding_window) {
            (true, Some(LayerType::SlidingAttention), Some(w)) => Some(w),
            _ => None,
        };
        let scale = (hd as f64).powf(-0.5) as f32;
        let op = Op::Attention { scale, softcap: None, sliding_window: window };
        let mut ins = vec![q, k, v, s.mask];
        if window.is_some() {
            ins.extend([s.positions, s.key_positions]);
        }
        let o = self.op(&format!("{p}.attention"), op, &ins)?;
        let o = self.op(&format!("{p}.heads_last"), Op::Transpose { perm: vec![0, 2, 1, 3] }, &[o])?;
        let sh = self.g.info(o).shape.clone();
        let merged = vec![sh[0].clone(), sh[1].clone(), Dim::from(nh * hd)];
        let o = self.op(&format!("{p}.merge_heads"), Op::Reshape { shape: merged }, &[o])?;
        let o_bias = spec.o_bias.resolve(cfg.attention_bias);
        self.linear(&format!("{p}.o_proj"), cfg.hidden_size, nh * hd, o_bias, o)
    }

    /// With a static cache, writes this call's keys and values into the layer's cache at the
    /// tokens' positions and attends over the whole updated cache. The cache input is read by
    /// `CacheUpdate` only and everything after reads the update, so a backend may bind the
    /// input and output to one buffer.
    fn cached_kv(
        &mut self,
        p: &str,
        layer: usize,
        k: ValueId,
        v: ValueId,
        positions: ValueId,
    ) -> Result<(ValueId, ValueId)> {
        let (k, v) = match &self.kv {
            Kv::Tokens | Kv::Present { .. } => (k, v),
            Kv::StaticCache { inputs, .. } => {
                let (ck, cv) = inputs[layer];
                let k = self.op(&format!("{p}.cache_keys"), Op::CacheUpdate, &[ck, k, positions])?;
                (k, self.op(&format!("{p}.cache_values"), Op::CacheUpdate, &[cv, v, positions])?)
            }
            Kv::Growing { inputs, .. } => {
                let (pk, pv) = inputs[layer];
                let k = self.op(&format!("{p}.cache_keys"), Op::Concat { axis: 2 }, &[pk, k])?;
                (k, self.op(&format!("{p}.cache_values"), Op::Concat { axis: 2 }, &[pv, v])?)
            }
        };
        match &mut self.kv {
            Kv::Tokens => {}
            Kv::Present { outputs } | Kv::StaticCache { outputs, .. } | Kv::Growing { outputs, .. } => {
                outputs.push((k, v))
            }
        }
        Ok((k, v))
    }

    /// Declares `input.cache.*` of every layer with `shape`.
    fn cache_inputs(&mut self, shape: &[Dim]) -> Result<Vec<(ValueId, ValueId)>> {
        (0..self.cfg.num_hidden_layers)
            .map(|i| {
                let dtype = self.opts.dtype;
                let k = self.g.add_input(&format!("input.{}", cache_name(i, "keys")), dtype, shape.to_vec())?;
                let v = self.g.add_input(&format!("input.{}", cache_name(i, "values")), dtype, shape.to_vec())?;
                Ok((k, v))
            })
            .collect()
    }

    /// Adds `output.cache.*` for the caches the layers produced; `alias`: they update the
    /// inputs of the same name in place.
    fn cache_outputs(&mut self, alias: bool) -> Result<()> {
        let outputs = match std::mem::replace(&mut self.kv, Kv::Tokens) {
            Kv::Present { outputs } | Kv::StaticCache { outputs, .. } | Kv::Growing { outputs, .. } => outputs,
            Kv::Tokens => vec![],
        };
        for (i, (k, v)) in outputs.into_iter().enumerate() {
            for (kind, value) in [("keys", k), ("values", v)] {
                let name = cache_name(i, kind);
                self.g.add_output(&format!("output.{name}"), value)?;
                if alias {
                    self.g.add_alias(&format!("output.{name}"), &format!("input.{name}"));
                }
            }
        }
        Ok(())
    }

    fn mlp(&mut self, p: &str, x: ValueId, act: Activation) -> Result<ValueId> {
        let (hs, is) = (self.cfg.hidden_size, self.cfg.intermediate_size);
        let mut ins = vec![
            x,
            self.weight(&format!("{p}.gate_proj.weight"), &[is, hs])?,
            self.weight(&format!("{p}.up_proj.weight"), &[is, hs])?,
            self.weight(&format!("{p}.down_proj.weight"), &[hs, is])?,
        ];
        if self.spec.mlp_bias.resolve(self.cfg.mlp_bias) {
            ins.push(self.weight(&format!("{p}.gate_proj.bias"), &[is])?);
            ins.push(self.weight(&format!("{p}.up_proj.bias"), &[is])?);
            ins.push(self.weight(&format!("{p}.down_proj.bias"), &[hs])?);
        }
        self.op(p, Op::GatedMlp { act }, &ins)
    }
}
