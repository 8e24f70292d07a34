//! The common quantities every decoder config has: sizes, heads, head size, epsilon, activation,
//! attention and embedding scales, multipliers and soft-capping, each as the family's schema reads it.

use super::*;
use hfexport_core::ops::Activation;

/// The activation, from the first of the schema's keys present, as the config class rewrites
/// it.
pub(super) fn activation(f: &Fields, schema: &ConfigSchema) -> Result<String> {
    if swiglu(f, schema)? {
        return Ok("silu".into());
    }
    let (key, name) = if schema.seq2seq.is_some_and(|s| s.t5) {
        ("feed_forward_proj", feed_forward_proj(f)?.0)
    } else {
        let given = schema.keys.activation.iter().map(|k| Ok((*k, f.string(k)?))).collect::<Result<Vec<_>>>()?;
        let (key, name) = given
            .into_iter()
            .find_map(|(k, v)| v.map(|v| (k, v)))
            .unwrap_or((schema.keys.activation.first().copied().unwrap_or("hidden_act"), schema.defaults.activation));
        let rewritten = schema.keys.activation_rewrites.iter().find(|(from, _)| *from == name);
        (key, rewritten.map_or(name, |(_, to)| to).to_string())
    };
    if Activation::from_hf(&name).is_none() {
        return Err(f.err(key, format!("`{name}` is not supported; valid: {}", Activation::NAMES.join(", "))));
    }
    Ok(name)
}

/// T5's `feed_forward_proj`: `act` or `gated-act` (`gated-gelu` is `gelu_new`), as
/// `T5Config` splits it: the activation and whether the MLP is gated.
pub(super) fn feed_forward_proj(f: &Fields) -> Result<(String, bool)> {
    let key = "feed_forward_proj";
    let value = f.string(key)?.unwrap_or("relu");
    let parts: Vec<&str> = value.split('-').collect();
    match parts[..] {
        ["gated", "gelu"] => Ok(("gelu_new".into(), true)),
        ["gated", act] => Ok((act.into(), true)),
        [act] => Ok((act.into(), false)),
        _ => Err(f.err(key, format!("`{value}` is not `ACT` or `gated-ACT` (e.g. relu, gated-gelu)"))),
    }
}

/// `tie_word_embeddings` of the top-level config (the model class that owns the head reads
/// it there, also in a multimodal checkpoint), else the class default.
pub(super) fn tie_word_embeddings(top: &Fields, d: &Defaults) -> Result<bool> {
    Ok(top.bool("tie_word_embeddings")?.unwrap_or(d.tie_word_embeddings))
}

// Sizes

#[derive(Clone)]
pub(super) struct Dims {
    pub(super) vocab_size: usize,
    pub(super) hidden_size: usize,
    pub(super) intermediate_size: usize,
    pub(super) num_hidden_layers: usize,
    pub(super) num_attention_heads: usize,
    pub(super) num_key_value_heads: usize,
    pub(super) head_dim: usize,
    pub(super) max_position_embeddings: usize,
}

impl Dims {
    pub(super) fn parse(f: &Fields, schema: &ConfigSchema) -> Result<Dims> {
        let (k, d) = (&schema.keys, &schema.defaults);
        let hidden_size = f.size(k.hidden_size, d.hidden_size, MAX_HIDDEN)?;
        let num_attention_heads = f.size(k.num_attention_heads, d.num_attention_heads, MAX_HEADS)?;
        let ratio = match f.raw(k.mlp_ratio) {
            None | Some(Value::Null) => None,
            Some(_) => match f.number(k.mlp_ratio)? {
                Some(r) if r > 0.0 && (hidden_size as f64 * r) as usize >= 1 => Some(r),
                r => return Err(f.err(k.mlp_ratio, format!("must be a positive ratio, got {r:?}"))),
            },
        };
        let intermediate_size = match (f.raw(k.intermediate_size), d.intermediate_times_hidden, ratio) {
            (None | Some(Value::Null), _, Some(r)) => (hidden_size as f64 * r) as usize,
            (None | Some(Value::Null), Some(times), None) => times * hidden_size,
            // one per layer (Gemma 3n): each layer's is in its spec, the first stands for them
            (Some(Value::Array(_)), _, _) if schema.per_layer_mlp.is_some() => {
                super::per_layer::intermediate_sizes(f, k.intermediate_size)?[0]
            }
            _ => f.size(k.intermediate_size, d.intermediate_size, MAX_INTERMEDIATE)?,
        };
        let dims = Dims {
            vocab_size: f.size("vocab_size", d.vocab_size, MAX_VOCAB)?,
            hidden_size,
            intermediate_size,
            num_hidden_layers: match (f.raw(k.num_hidden_layers), k.layers_fallback) {
                (None | Some(Value::Null), Some(other)) => f.size(other, d.num_hidden_layers, MAX_LAYERS)?,
                _ => f.size(k.num_hidden_layers, d.num_hidden_layers, MAX_LAYERS)?,
            },
            num_attention_heads,
            num_key_value_heads: kv_heads(f, schema, num_attention_heads)?,
            head_dim: head_dim(f, k.head_dim, d, hidden_size, num_attention_heads, rotary(f, schema)?)?,
            max_position_embeddings: f.size(k.max_position_embeddings, d.max_position_embeddings, MAX_POSITIONS)?,
        };
        Ok(dims)
    }
}

/// Whether some layer may be rotary (a rotary head needs an even size).
fn rotary(f: &Fields, schema: &ConfigSchema) -> Result<bool> {
    Ok(match schema.rope {
        RopeRule::None => false,
        RopeRule::WhenKey { key, value } => f.string(key)? == Some(value),
        _ => true,
    })
}

/// The KV heads as the family reads them (`num_key_value_heads`: null means "as many as
/// attention heads" in every class).
pub(super) fn kv_heads(f: &Fields, schema: &ConfigSchema, heads: usize) -> Result<usize> {
    if falcon_new_decoder(f, schema)? {
        let kv = match f.raw("num_kv_heads") {
            None | Some(Value::Null) => heads,
            Some(_) => f.size("num_kv_heads", None, MAX_HEADS)?,
        };
        if !heads.is_multiple_of(kv) {
            return Err(f.err(
                "num_kv_heads",
                format!("num_attention_heads ({heads}) is not a multiple of num_kv_heads ({kv})"),
            ));
        }
        return Ok(kv);
    }
    let kv = match (schema.kv_heads, f.raw("num_key_value_heads")) {
        (KvHeads::MultiQuery(key, default), _) => match f.bool(key)?.unwrap_or(default) {
            true => 1,
            false => heads,
        },
        (KvHeads::Key, Some(Value::Null)) => heads,
        (KvHeads::Key, None) => schema.defaults.num_key_value_heads.unwrap_or(heads),
        (KvHeads::Key, Some(_)) => f.size("num_key_value_heads", None, MAX_HEADS)?,
    };
    if !heads.is_multiple_of(kv) {
        return Err(f.err(
            "num_key_value_heads",
            format!("num_attention_heads ({heads}) is not a multiple of num_key_value_heads ({kv})"),
        ));
    }
    Ok(kv)
}

/// Whether a Falcon config has the new decoder architecture (grouped KV heads, parallel
/// blocks); false for every other family.
pub(super) fn falcon_new_decoder(f: &Fields, schema: &ConfigSchema) -> Result<bool> {
    Ok(schema.falcon_new_decoder && f.bool("new_decoder_architecture")?.unwrap_or(false))
}

/// `head_dim`: the key if set, else `hidden_size // num_attention_heads`; rope needs it even
/// (transformers' `validate_rope` lets tiny odd test dims <= 4 through, and so do we).
pub(super) fn head_dim(
    f: &Fields,
    key: &str,
    d: &Defaults,
    hidden: usize,
    heads: usize,
    rotary: bool,
) -> Result<usize> {
    let derived = || (hidden / heads, format!("hidden_size / num_attention_heads = {hidden} / {heads}"));
    let (dim, origin) = match f.raw(key) {
        Some(Value::Null) => derived(),
        None => match d.head_dim {
            Some(v) => (v, format!("the default of {v}")),
            None => derived(),
        },
        Some(_) => (f.size(key, None, MAX_HEAD_DIM)?, "config value".to_string()),
    };
    if dim == 0 || dim > MAX_HEAD_DIM {
        return Err(f.err(key, format!("{dim} (from {origin}) is outside 1..={MAX_HEAD_DIM}")));
    }
    if rotary && dim > 4 && dim % 2 == 1 {
        return Err(f.err(key, format!("{dim} is odd; rotary embeddings need an even head dim")));
    }
    Ok(dim)
}

/// The token embeddings' own width (`schema.embed_dim`'s key, null meaning the hidden size,
/// absent the class default), `None` where it is the hidden size.
pub(super) fn embed_dim(f: &Fields, schema: &ConfigSchema, hidden: usize) -> Result<Option<usize>> {
    let Some(key) = schema.embed_dim else { return Ok(None) };
    let dim = match f.raw(key) {
        None => schema.defaults.embed_dim.unwrap_or(hidden),
        Some(Value::Null) => hidden,
        Some(_) => f.size(key, None, MAX_HIDDEN)?,
    };
    Ok((dim != hidden).then_some(dim))
}

pub(super) fn parse_eps(f: &Fields, schema: &ConfigSchema) -> Result<f64> {
    let key = schema.keys.norm_eps;
    let eps = f.number(key)?.unwrap_or(schema.defaults.norm_eps);
    if eps < 0.0 {
        return Err(f.err(key, format!("must not be negative, got {eps}")));
    }
    Ok(eps)
}

/// The attention score factor of each layer.
pub(super) fn attention_scales(f: &Fields, schema: &ConfigSchema, dims: &Dims) -> Result<Vec<f64>> {
    let n = dims.num_hidden_layers;
    let inv_sqrt = |x: f64| x.powf(-0.5);
    Ok(match schema.scale {
        ScaleRule::HeadDim => vec![inv_sqrt(dims.head_dim as f64); n],
        ScaleRule::QueryPreAttnScalar => {
            let key = "query_pre_attn_scalar";
            let s = match f.raw(key) {
                None => schema.defaults.query_pre_attn_scalar.unwrap_or(dims.head_dim as f64),
                Some(_) => f.required_positive(key, "any")?,
            };
            vec![inv_sqrt(s); n]
        }
        ScaleRule::AttentionMultiplier => vec![f.number("attention_multiplier")?.unwrap_or(1.0); n],
        ScaleRule::One => vec![1.0; n],
        ScaleRule::Disentangled => {
            let (c2p, p2c) = super::encoder::pos_att_types(f)?;
            vec![inv_sqrt((dims.head_dim * (1 + c2p as usize + p2c as usize)) as f64); n]
        }
        ScaleRule::Gpt2 { by_layer_key } => {
            let base = if f.bool("scale_attn_weights")?.unwrap_or(true) { inv_sqrt(dims.head_dim as f64) } else { 1.0 };
            let by_layer = by_layer_key && f.bool("scale_attn_by_inverse_layer_idx")?.unwrap_or(false);
            (0..n).map(|i| if by_layer { base / (i + 1) as f64 } else { base }).collect()
        }
    })
}

/// The factor of the token embeddings.
pub(super) fn embedding_scale(f: &Fields, schema: &ConfigSchema, dims: &Dims) -> Result<Option<f64>> {
    Ok(match schema.embedding_scale {
        EmbeddingScale::None => None,
        EmbeddingScale::SqrtHidden => Some((dims.hidden_size as f64).sqrt()),
        EmbeddingScale::Multiplier => f.number("embedding_multiplier")?.or(Some(1.0)),
        EmbeddingScale::SqrtHiddenIf(key, default) => {
            f.bool(key)?.unwrap_or(default).then(|| (dims.hidden_size as f64).sqrt())
        }
    })
}

/// Falcon-H1's µP multipliers where the family has them.
pub(super) fn mup_multipliers(f: &Fields, schema: &ConfigSchema) -> Result<Option<Mup>> {
    if !schema.mup {
        return Ok(None);
    }
    let one = |key: &str| -> Result<f64> { Ok(f.number(key)?.unwrap_or(1.0)) };
    Ok(Some(Mup {
        key: one("key_multiplier")?,
        attention_in: one("attention_in_multiplier")?,
        attention_out: one("attention_out_multiplier")?,
        ssm_in: one("ssm_in_multiplier")?,
        ssm_out: one("ssm_out_multiplier")?,
        ssm: numbers(f, "ssm_multipliers")?,
        mlp: numbers(f, "mlp_multipliers")?,
    }))
}

/// `N` finite numbers under `key`; absent or null: all 1.0.
fn numbers<const N: usize>(f: &Fields, key: &str) -> Result<[f64; N]> {
    let bad = |v: &Value| f.err(key, format!("must be a list of {N} numbers, got {}", describe(v)));
    match f.raw(key) {
        None | Some(Value::Null) => Ok([1.0; N]),
        Some(v @ Value::Array(items)) => {
            let xs: Option<Vec<f64>> = items.iter().map(|x| x.as_f64().filter(|x| x.is_finite())).collect();
            xs.and_then(|xs| xs.try_into().ok()).ok_or_else(|| bad(v))
        }
        Some(v) => Err(bad(v)),
    }
}

/// Granite's `residual_multiplier` and `logits_scaling` (1.0 by default).
pub(super) fn granite_multipliers(f: &Fields, schema: &ConfigSchema) -> Result<(Option<f64>, Option<f64>)> {
    if !schema.granite_multipliers {
        return Ok((None, None));
    }
    let residual = f.number("residual_multiplier")?.unwrap_or(1.0);
    let logits = match f.raw("logits_scaling") {
        None | Some(Value::Null) => 1.0,
        Some(_) => f.required_positive("logits_scaling", "any")?,
    };
    Ok((Some(residual), Some(logits)))
}

/// The divisor of the logits for a family that multiplies them by a factor (Cohere's
/// `logit_scale`, which its modeling code needs as a number).
pub(super) fn logit_scale_divisor(f: &Fields, schema: &ConfigSchema) -> Result<Option<f64>> {
    let Some((key, default)) = schema.logit_scale else { return Ok(None) };
    let scale = match f.raw(key) {
        None => default,
        Some(_) => f.required_positive(key, "any")?,
    };
    Ok(Some(1.0 / scale))
}

/// Gemma 2/3's soft-capping of attention scores and final logits (null: none).
pub(super) fn softcaps(f: &Fields, schema: &ConfigSchema) -> Result<(Option<f64>, Option<f64>)> {
    let cap = |key: &str, honoured: bool, default: Option<f64>| -> Result<Option<f64>> {
        match f.raw(key) {
            _ if !honoured => Ok(None),
            None => Ok(default),
            Some(Value::Null) => Ok(None),
            Some(_) => f.required_positive(key, "any").map(Some),
        }
    };
    let (s, d) = (schema.softcapping, &schema.defaults);
    Ok((
        cap("attn_logit_softcapping", s.attention, d.attn_softcap)?,
        cap("final_logit_softcapping", s.logits, d.final_softcap)?,
    ))
}

/// The MLP's width as LFM2's `Lfm2MLP` derives it when `block_auto_adjust_ff_dim` (class
/// default true): two thirds of `intermediate_size`, times `block_ffn_dim_multiplier` (1.0),
/// rounded up to a multiple of `block_multiple_of` (256); a null multiplier skips both.
pub(super) fn adjusted_ffn(f: &Fields, schema: &ConfigSchema, intermediate: usize) -> Result<usize> {
    if swiglu(f, schema)? {
        // Dinov2SwiGLUFFN: two thirds of the width, rounded up to a multiple of 8
        return Ok((2 * intermediate / 3).div_ceil(8) * 8);
    }
    if !schema.ffn_auto_adjust || !f.bool("block_auto_adjust_ff_dim")?.unwrap_or(true) {
        return Ok(intermediate);
    }
    let width = 2 * intermediate / 3;
    let multiplier = match f.raw("block_ffn_dim_multiplier") {
        Some(Value::Null) => return Ok(width),
        None => 1.0,
        Some(_) => f.number("block_ffn_dim_multiplier")?.unwrap_or(1.0),
    };
    let multiple = f.size("block_multiple_of", Some(256), MAX_INTERMEDIATE)?;
    let width = (multiplier * width as f64) as usize;
    let rounded = width.div_ceil(multiple) * multiple;
    if rounded == 0 || rounded > MAX_INTERMEDIATE {
        return Err(f.err("block_ffn_dim_multiplier", format!("gives an MLP of {rounded} channels")));
    }
    Ok(rounded)
}

/// Whether the schema's SwiGLU key is set (DINOv2's `use_swiglu_ffn`, false by default).
pub(super) fn swiglu(f: &Fields, schema: &ConfigSchema) -> Result<bool> {
    Ok(match schema.swiglu {
        Some(key) => f.bool(key)?.unwrap_or(false),
        None => false,
    })
}
