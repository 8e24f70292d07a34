//! Layers that differ from the config's global shape (Gemma 4, Gemma 3n): head sizes and KV
//! heads per layer (transformers' `per_layer_config`), the last layers reusing an earlier
//! layer's keys and values (`num_kv_shared_layers`), per-layer embeddings, MLP widths and gate
//! sparsity per layer, and the residual streams and low-rank residuals around the layers
//! (AltUp, LAuReL); and the token ids a multimodal checkpoint gives other than text embeddings
//! (media placeholders, media-token tables).

use super::*;
use crate::schema::{AltUpKeys, KvSharing, PerLayerHeads, PerLayerInputKeys, PerLayerMlp};

/// The attention shape of one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Heads {
    pub(super) head_dim: usize,
    pub(super) kv_heads: usize,
}

/// The only attributes a `per_layer_config` entry may override here.
const OVERRIDABLE: [&str; 2] = ["head_dim", "num_key_value_heads"];

/// Every layer's head size and KV heads: the config's, or as `per_layer_config` says (absent:
/// the full-attention layers' from the rule's global keys, as `Gemma4TextConfig` fills it in).
/// The layers of one kind must agree: transformers builds one rotary table per kind from them.
pub(super) fn layer_heads(f: &Fields, schema: &ConfigSchema, dims: &Dims) -> Result<Vec<Heads>> {
    let n = dims.num_hidden_layers;
    let global = Heads { head_dim: dims.head_dim, kv_heads: dims.num_key_value_heads };
    let Some(rule) = schema.per_layer_heads else { return Ok(vec![global; n]) };
    let (types, _) = parse_layers(f, schema, n)?;
    let key = "per_layer_config";
    let heads = match f.raw(key) {
        Some(Value::Null) => vec![global; n],
        Some(Value::Object(entries)) => explicit_heads(f, entries, global, n)?,
        Some(v) => return Err(f.err(key, format!("must be an object of layer overrides, got {}", describe(v)))),
        None => {
            let full = global_heads(f, schema, rule, global)?;
            types.iter().map(|t| if *t == LayerType::Full { full } else { global }).collect()
        }
    };
    for (i, h) in heads.iter().enumerate() {
        if h.kv_heads == 0 || !dims.num_attention_heads.is_multiple_of(h.kv_heads) {
            return Err(f.err(
                key,
                format!(
                    "layer {i} has {} KV heads, which do not divide num_attention_heads ({})",
                    h.kv_heads, dims.num_attention_heads
                ),
            ));
        }
        if let Some(j) = (0..i).find(|&j| types[j] == types[i] && heads[j] != *h) {
            return Err(f.err(
                key,
                format!(
                    "layers {j} and {i} are of one attention kind but differ in head_dim or num_key_value_heads, \
                     which transformers' rotary embedding refuses"
                ),
            ));
        }
    }
    Ok(heads)
}

/// The full-attention layers' shape without `per_layer_config`: `global_head_dim` (class
/// default), and `num_global_key_value_heads` when set and the values come from the keys.
fn global_heads(f: &Fields, schema: &ConfigSchema, rule: PerLayerHeads, global: Heads) -> Result<Heads> {
    let head_dim = f.size(rule.global_head_dim.0, Some(rule.global_head_dim.1), MAX_HEAD_DIM)?;
    let from_keys = match schema.values_from_keys {
        Some(key) => f.bool(key)?.unwrap_or(false),
        None => true,
    };
    let kv_heads = match f.raw(rule.global_kv_heads) {
        Some(v) if !v.is_null() && from_keys => f.size(rule.global_kv_heads, None, MAX_HEADS)?,
        _ => global.kv_heads,
    };
    Ok(Heads { head_dim, kv_heads })
}

/// `per_layer_config`: layer indices to overrides of [`OVERRIDABLE`] attributes only.
fn explicit_heads(f: &Fields, entries: &Map<String, Value>, global: Heads, n: usize) -> Result<Vec<Heads>> {
    let mut heads = vec![global; n];
    for (index, overrides) in entries {
        let name = format!("per_layer_config.{index}");
        let i = index.parse::<usize>().ok().filter(|&i| i < n).ok_or_else(|| {
            f.err("per_layer_config", format!("`{index}` is not a layer index below num_hidden_layers ({n})"))
        })?;
        let Value::Object(o) = overrides else {
            return Err(f.err(&name, format!("must be an object of overrides, got {}", describe(overrides))));
        };
        if let Some(k) = o.keys().find(|k| !OVERRIDABLE.contains(&k.as_str())) {
            return Err(f.err(
                &format!("{name}.{k}"),
                format!("a per-layer `{k}` is not supported (only {} may differ by layer)", OVERRIDABLE.join(" and ")),
            ));
        }
        let prefix = format!("{}{name}.", f.prefix);
        let layer = Fields::new(o, f.path, &prefix);
        heads[i] = Heads {
            head_dim: layer.size("head_dim", Some(global.head_dim), MAX_HEAD_DIM)?,
            kv_heads: layer.size("num_key_value_heads", Some(global.kv_heads), MAX_HEADS)?,
        };
    }
    Ok(heads)
}

/// The head sizes `[full, sliding]` of the full-attention and sliding layers (the config's
/// where no layer is of that kind), for their rotary embeddings.
pub(super) fn kind_head_dims(f: &Fields, schema: &ConfigSchema, dims: &Dims, heads: &[Heads]) -> Result<[usize; 2]> {
    if schema.per_layer_heads.is_none() {
        return Ok([dims.head_dim; 2]);
    }
    let (types, _) = parse_layers(f, schema, dims.num_hidden_layers)?;
    let of =
        |kind: LayerType| types.iter().zip(heads).find(|(t, _)| **t == kind).map_or(dims.head_dim, |(_, h)| h.head_dim);
    Ok([of(LayerType::Full), of(LayerType::Sliding)])
}

/// The layer whose keys and values each layer reuses (`kv_sharing_modes`): the last
/// `num_kv_shared_layers` take those of the last earlier layer of their kind; `None` for the
/// layers that make their own.
pub(super) fn kv_sources(f: &Fields, rule: Option<KvSharing>, types: &[LayerType]) -> Result<Vec<Option<usize>>> {
    let n = types.len();
    let Some(rule) = rule else { return Ok(vec![None; n]) };
    let (key, default) = rule.layers;
    let shared = match f.int(key)?.unwrap_or(default as i64) {
        0 => return Ok(vec![None; n]),
        k if k > 0 => k as usize,
        k => return Err(f.err(key, format!("{k} is not a layer count"))),
    };
    let first = n.checked_sub(shared).filter(|&first| first > 0).ok_or_else(|| {
        f.err(key, format!("{shared} shared layers leave none of the {n} layers to make keys and values"))
    })?;
    let producer = |t: LayerType| (0..first).rev().find(|&i| types[i] == t);
    (0..n)
        .map(|i| match i < first {
            true => Ok(None),
            false => producer(types[i]).map(Some).ok_or_else(|| {
                f.err(
                    key,
                    format!("layer {i}'s attention kind has no earlier layer whose keys and values it could reuse"),
                )
            }),
        })
        .collect()
}

/// Whether the shared layers' MLP is twice as wide (`use_double_wide_mlp`).
pub(super) fn wide_shared_mlp(f: &Fields, rule: Option<KvSharing>) -> Result<bool> {
    match rule.and_then(|r| r.wide_mlp) {
        Some(key) => Ok(f.bool(key)?.unwrap_or(false)),
        None => Ok(false),
    }
}

/// The media placeholder ids of the top-level config (class defaults where absent; null: none).
pub(super) fn placeholder_ids(top: &Fields, schema: &ConfigSchema) -> Result<Vec<i64>> {
    let mut ids = vec![];
    for &(key, default) in schema.placeholders {
        match top.raw(key) {
            Some(Value::Null) => {}
            None => ids.push(default),
            Some(_) => ids.push(top.int(key)?.expect("not null")),
        }
    }
    Ok(ids)
}

/// Token ids from `start` (to `end`, else on) embedded by a table of their own (Gemma 3n's
/// `embed_vision`, `embed_audio`): `vocab` rows of `hidden`, its norms' epsilon `eps`.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaTokens {
    pub start: i64,
    pub end: Option<i64>,
    pub vocab: usize,
    pub hidden: usize,
    pub eps: f64,
}

/// The media-token tables of the top-level config's sub-configs (class defaults where a
/// sub-config or key is absent), in the schema's order; each range ends where the next
/// larger offset starts.
pub(super) fn media_tokens(top: &Fields, schema: &ConfigSchema) -> Result<Vec<MediaTokens>> {
    let mut out = vec![];
    for keys in schema.media_tokens {
        let prefix = format!("{}{}.", top.prefix, keys.config);
        let empty = Map::new();
        let obj = match top.raw(keys.config) {
            Some(Value::Object(o)) => o,
            None | Some(Value::Null) => &empty,
            Some(v) => return Err(top.err(keys.config, format!("must be an object, got {}", describe(v)))),
        };
        let f = Fields::new(obj, top.path, &prefix);
        let start = f.int("vocab_offset")?.unwrap_or(keys.offset);
        if start < 0 {
            return Err(f.err("vocab_offset", format!("{start} is not a token id")));
        }
        out.push(MediaTokens {
            start,
            end: None,
            vocab: f.size("vocab_size", Some(keys.vocab), MAX_VOCAB)?,
            hidden: f.size("hidden_size", Some(keys.hidden), MAX_HIDDEN)?,
            eps: f.number("rms_norm_eps")?.unwrap_or(keys.eps),
        });
    }
    let starts: Vec<i64> = out.iter().map(|m| m.start).collect();
    for m in &mut out {
        m.end = starts.iter().copied().filter(|&s| s > m.start).min();
    }
    Ok(out)
}

/// Per-layer embeddings, when the family has them and their width is not 0 or null.
pub(super) fn per_layer_input(f: &Fields, keys: Option<PerLayerInputKeys>) -> Result<Option<PerLayerInput>> {
    let Some(PerLayerInputKeys { size, vocab }) = keys else { return Ok(None) };
    let width = match f.raw(size.0) {
        Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) if n.as_u64() == Some(0) => return Ok(None),
        _ => f.size(size.0, Some(size.1), MAX_HIDDEN)?,
    };
    Ok(Some(PerLayerInput { size: width, vocab: f.size(vocab.0, Some(vocab.1), MAX_VOCAB)? }))
}

/// One layer's dense MLP: its width and, where its gate is sparsified (Gemma 3n's
/// `activation_sparsity_pattern`), the gate's cutoff in standard deviations above its mean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DenseMlp {
    pub width: usize,
    /// `Φ⁻¹(sparsity)`: the gate becomes `relu(g - mean(g) - std(g) * cutoff)` over its
    /// channels (transformers' `_gaussian_topk`) before the activation.
    pub gate_cutoff: Option<f64>,
}

/// `intermediate_size` given as one width per layer.
pub(super) fn intermediate_sizes(f: &Fields, key: &str) -> Result<Vec<usize>> {
    let bad = |v: &Value| f.err(key, format!("must be a positive integer or a list of them, got {}", describe(v)));
    match f.raw(key) {
        Some(v @ Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|x| x.as_u64().filter(|&x| x > 0 && x as usize <= MAX_INTERMEDIATE).map(|x| x as usize))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| bad(v)),
        Some(v) => Err(bad(v)),
        None => Err(f.err(key, "is missing")),
    }
}

/// Every layer's dense MLP: `width` (the config's, adjusted), or the layer's entry of an
/// `intermediate_size` list, with the gate sparsity the family reads.
pub(super) fn dense_mlps(f: &Fields, schema: &ConfigSchema, dims: &Dims, width: usize) -> Result<Vec<DenseMlp>> {
    let n = dims.num_hidden_layers;
    let Some(rule) = schema.per_layer_mlp else { return Ok(vec![DenseMlp { width, gate_cutoff: None }; n]) };
    let key = schema.keys.intermediate_size;
    let widths = match f.raw(key) {
        Some(Value::Array(_)) => intermediate_sizes(f, key)?,
        _ => vec![width; n],
    };
    if widths.len() != n {
        return Err(f.err(key, format!("lists {} widths for {n} layers (num_hidden_layers)", widths.len())));
    }
    let sparsity = gate_sparsity(f, rule, n)?;
    let mlp = |(width, p): (usize, f64)| DenseMlp { width, gate_cutoff: (p > 0.0).then(|| torch_normal_icdf(p)) };
    Ok(widths.into_iter().zip(sparsity).map(mlp).collect())
}

/// Each layer's target sparsity of its gate: the list under the rule's key, else the class
/// default (the first layers sparse when there are more than that many).
fn gate_sparsity(f: &Fields, rule: PerLayerMlp, n: usize) -> Result<Vec<f64>> {
    let key = rule.sparsity;
    let bad = |v: &Value| f.err(key, format!("must list {n} fractions in [0, 1) (one per layer), got {}", describe(v)));
    match f.raw(key) {
        None | Some(Value::Null) => {
            let sparse = if n > rule.default_layers { rule.default_layers } else { 0 };
            Ok((0..n).map(|i| if i < sparse { rule.default_sparsity } else { 0.0 }).collect())
        }
        Some(v @ Value::Array(items)) if items.len() == n => items
            .iter()
            .map(|x| x.as_f64().filter(|p| (0.0..1.0).contains(p)))
            .collect::<Option<Vec<f64>>>()
            .ok_or_else(|| bad(v)),
        // a single number is one per layer only in a list transformers fills in itself
        Some(v) => Err(bad(v)),
    }
}

/// torch's `Normal(0, 1).icdf(p)` on a float32 `p`, as transformers computes the gate's cutoff:
/// `erfinv(2p - 1) * sqrt(2)`, each step rounded to float32 as torch's are (the cutoff moves the
/// gate of every channel near it: one ulp off moved a random test model's logits 4e-5).
fn torch_normal_icdf(p: f64) -> f64 {
    let y = 2.0 * p as f32 - 1.0;
    ((erfinv(y as f64) as f32) * std::f32::consts::SQRT_2) as f64
}

/// `erfinv(y)` for `|y| < 1`: [`normal_quantile`] refined by a Newton step on `erf`.
fn erfinv(y: f64) -> f64 {
    let x = normal_quantile((y + 1.0) / 2.0) / std::f64::consts::SQRT_2;
    let slope = std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp();
    x - (hfexport_core::erf64(x) - y) / slope
}

/// `Φ⁻¹(p)`, the standard normal quantile (Acklam's rational approximation, relative error
/// below 1.2e-9).
fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.38357751867269e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] =
        [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
    let poly = |c: &[f64], x: f64| c.iter().fold(0.0, |acc, &k| acc * x + k);
    let tail = |q: f64| poly(&C, q) / (poly(&D, q) * q + 1.0);
    const LOW: f64 = 0.02425;
    match p {
        p if p < LOW => tail((-2.0 * p.ln()).sqrt()),
        p if p > 1.0 - LOW => -tail((-2.0 * (1.0 - p).ln()).sqrt()),
        p => {
            let q = p - 0.5;
            let r = q * q;
            q * poly(&A, r) / (poly(&B, r) * r + 1.0)
        }
    }
}

/// AltUp's streams (Gemma 3n): how many, the one the layers compute on, and whether its
/// correction is scaled before the per-layer embeddings read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AltUp {
    pub streams: usize,
    pub active: usize,
    pub correct_scale: bool,
}

pub(super) fn altup(f: &Fields, keys: Option<AltUpKeys>) -> Result<Option<AltUp>> {
    let Some(k) = keys else { return Ok(None) };
    let streams = f.size(k.streams.0, Some(k.streams.1), 64)?;
    let active = f.int(k.active.0)?.unwrap_or(k.active.1 as i64);
    if !(0..streams as i64).contains(&active) {
        return Err(f.err(k.active.0, format!("{active} is not one of the {streams} streams ({})", k.streams.0)));
    }
    let correct_scale = f.bool(k.correct_scale.0)?.unwrap_or(k.correct_scale.1);
    Ok(Some(AltUp { streams, active: active as usize, correct_scale }))
}

/// LAuReL's rank, where the family has it.
pub(super) fn laurel_rank(f: &Fields, key: Option<(&'static str, usize)>) -> Result<Option<usize>> {
    key.map(|(key, default)| f.size(key, Some(default), MAX_HIDDEN)).transpose()
}
