//! Rope (modeling_rope_utils.py: convert_rope_params_to_dict, standardize_rope_params and the
//! per-type init functions): the old (`rope_theta` + `rope_scaling`) and new (`rope_parameters`)
//! forms merged as transformers merges them, validated per rope type.

use super::*;
use crate::schema::LatentRule;

pub(super) const SUPPORTED_ROPE_TYPES: &str = "default, linear, dynamic, llama3, yarn, longrope, proportional";
pub(super) const DEFAULT_THETA: f64 = 10_000.0;
pub(super) const LAYER_TYPE_KEYS: [&str; 2] = ["full_attention", "sliding_attention"];

/// The rope of full-attention layers, and the sliding layers' own where the family has one;
/// `[full, sliding]`: the head sizes of those layers, where they differ by kind (Gemma 4).
pub(super) fn parse_ropes(
    f: &Fields,
    schema: &ConfigSchema,
    dims: &Dims,
    [full_head, sliding_head]: [usize; 2],
) -> Result<(RopeConfig, Option<RopeConfig>)> {
    let empty = Map::new();
    let class_default = class_default_rope(f, schema)?;
    let (key, dict) = rope_dict(f)?.unwrap_or(("rope_parameters", &class_default));
    let theta = schema.defaults.rope_theta;
    if let RopeRule::Fixed { dim_key, default_dim } = schema.rope {
        let dim = fixed_rotary_dim(f, dim_key, default_dim, dims.head_dim)?;
        return Ok((RopeConfig { theta, dim, scaling: RopeScaling::Default }, None));
    }
    let RopeRule::PerLayerType { global_theta, local_theta } = schema.rope else {
        let prefix = format!("{key}.");
        let d = Fields::new(dict, f.path, &prefix);
        reject_nested_rope(&d)?;
        return Ok((parse_rope(f, &d, schema, dims, theta)?, None));
    };
    // `rope_parameters` keyed by layer type, or the flat legacy form: the global rope (its
    // theta under `global_theta` where the family names it so), plus `local_theta` for the
    // sliding layers.
    let legacy_theta = |key: &str, default: f64| match f.raw(key) {
        None | Some(Value::Null) => Ok(default),
        Some(_) => f.required_positive(key, "any"),
    };
    let theta = match global_theta {
        Some(key) => legacy_theta(key, theta)?,
        None => theta,
    };
    let nested = LAYER_TYPE_KEYS.iter().any(|k| dict.contains_key(*k));
    let prefixes = [format!("{key}."), format!("{key}.full_attention."), format!("{key}.sliding_attention.")];
    let none = Fields::new(&empty, f.path, "");
    let full = match nested {
        true => layer_type_rope(f, dict, "full_attention", &prefixes[1])?,
        false => Some(Fields::new(dict, f.path, &prefixes[0])),
    };
    let container = Fields::new(dict, f.path, &prefixes[0]);
    let (full_dims, sliding_dims) =
        (Dims { head_dim: full_head, ..dims.clone() }, Dims { head_dim: sliding_head, ..dims.clone() });
    let full = parse_rope(f, full.as_ref().unwrap_or(&none), schema, &full_dims, theta)?;
    // a flat dict is nested under `full_attention` by transformers, whose yarn then reads
    // `truncate` from the nested container, where it is not: its own is never read
    let full = container_truncate(full, if nested { &container } else { &none })?;
    let local_theta = legacy_theta(local_theta, DEFAULT_THETA)?;
    let sliding = match if nested { layer_type_rope(f, dict, "sliding_attention", &prefixes[2])? } else { None } {
        Some(d) => container_truncate(parse_rope(&none, &d, schema, &sliding_dims, local_theta)?, &container)?,
        None if full_head == sliding_head => {
            RopeConfig { theta: local_theta, dim: full.dim, scaling: RopeScaling::Default }
        }
        None => RopeConfig { theta: local_theta, dim: sliding_head, scaling: RopeScaling::Default },
    };
    Ok((full, Some(sliding)))
}

/// The rope dict of one layer type inside `dict` (`prefix` names it in errors).
pub(super) fn layer_type_rope<'b>(
    f: &Fields<'b>,
    dict: &'b Map<String, Value>,
    layer_type: &str,
    prefix: &'b str,
) -> Result<Option<Fields<'b>>> {
    match dict.get(layer_type) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(Fields::new(m, f.path, prefix))),
        Some(v) => Err(f.err(prefix.trim_end_matches('.'), format!("must be an object, got {}", describe(v)))),
    }
}

/// A number of the rope dict transformers keeps (the file's, else the class default's), for
/// keys other code reads from it (Mistral 4's `llama_4_scaling_beta`); `None` when absent.
pub(super) fn rope_dict_number(f: &Fields, schema: &ConfigSchema, key: &str) -> Result<Option<f64>> {
    let class_default = class_default_rope(f, schema)?;
    let (name, dict) = rope_dict(f)?.unwrap_or(("rope_parameters", &class_default));
    Fields::new(dict, f.path, &format!("{name}.")).number(key)
}

/// One rope from its dict `d` (keys prefixed as in the file), with `f` the config top level
/// for the keys transformers also reads there; `default_theta` when neither sets `rope_theta`.
pub(super) fn parse_rope(
    f: &Fields,
    d: &Fields,
    schema: &ConfigSchema,
    dims: &Dims,
    default_theta: f64,
) -> Result<RopeConfig> {
    let rope_type = rope_type(d)?;
    let dim = match schema.latent {
        // a proportional rope spans the whole head: its factor says how much of it turns
        _ if rope_type == "proportional" => dims.head_dim,
        Some(rule) if rule.partial_of_head => latent_rotary_dim(f, d, &rule, dims.head_dim)?,
        _ => rotary_dim(f, d, schema, dims.head_dim)?,
    };
    let theta = rope_theta(f, d, schema.keys.rope_theta, default_theta)?;
    let rope_type = match schema.rope_type_rewrites.iter().find(|(from, _)| *from == rope_type) {
        Some((_, to)) => to.to_string(),
        None => rope_type,
    };
    let type_key = if d.raw("rope_type").is_some() { "rope_type" } else { "type" };
    if let Some(allowed) = schema.rope_types.filter(|a| !a.contains(&rope_type.as_str())) {
        return Err(d.err(
            type_key,
            format!("rope type `{rope_type}` is not accepted by this architecture (accepted: {})", allowed.join(", ")),
        ));
    }
    let max_pos = dims.max_position_embeddings;
    let scaling = match rope_type.as_str() {
        "default" => RopeScaling::Default,
        "linear" => RopeScaling::Linear { factor: d.required_positive("factor", &rope_type)? },
        "dynamic" => dynamic_scaling(d, dims)?,
        "llama3" => llama3_scaling(f, d, max_pos)?,
        "yarn" => yarn_scaling(f, d, theta, max_pos)?,
        "longrope" => longrope_scaling(f, d, dim, max_pos)?,
        "proportional" => proportional_scaling(d)?,
        other => {
            return Err(
                d.err(type_key, format!("rope type `{other}` is not supported (supported: {SUPPORTED_ROPE_TYPES})"))
            )
        }
    };
    Ok(RopeConfig { theta, dim, scaling })
}

/// `proportional` (`_compute_proportional_rope_parameters`): `factor` (1.0) divides every
/// frequency, `partial_rotary_factor` (1.0) of the head's channel pairs turn.
fn proportional_scaling(d: &Fields) -> Result<RopeScaling> {
    let factor = match d.raw("factor") {
        None | Some(Value::Null) => 1.0,
        Some(_) => d.required_positive("factor", "proportional")?,
    };
    let key = "partial_rotary_factor";
    let partial_rotary_factor = d.number(key)?.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&partial_rotary_factor) {
        return Err(d.err(key, format!("{partial_rotary_factor} is not a fraction of the head (0 to 1)")));
    }
    Ok(RopeScaling::Proportional { factor, partial_rotary_factor })
}

/// The rope dict a config without one gets from its class: the schema's `default_rope` when
/// neither `rope_parameters` nor `rope_scaling` is there (absent or null), else none (an empty
/// dict: the default rope over `rope_theta`).
fn class_default_rope(f: &Fields, schema: &ConfigSchema) -> Result<Map<String, Value>> {
    let unset = |key: &str| f.raw(key).is_none_or(Value::is_null);
    match schema.default_rope {
        Some(json) if unset("rope_parameters") && unset("rope_scaling") => {
            let mut dict: Map<String, Value> = serde_json::from_str(json).expect("a family's default rope is JSON");
            // the class default of the base frequency stays the config's to override
            if let Some(theta) = f.raw("rope_theta").filter(|v| !v.is_null()) {
                dict.insert("rope_theta".into(), theta.clone());
            }
            Ok(dict)
        }
        _ => Ok(Map::new()),
    }
}

/// `self.rope_parameters = rope_scaling or self.rope_parameters`: a non-empty `rope_scaling`
/// (old files) wins over `rope_parameters`.
pub(super) fn rope_dict<'a>(f: &Fields<'a>) -> Result<Option<(&'static str, &'a Map<String, Value>)>> {
    for key in ["rope_scaling", "rope_parameters"] {
        match f.raw(key) {
            None | Some(Value::Null) => continue,
            Some(Value::Object(m)) if m.is_empty() => continue,
            Some(Value::Object(m)) => return Ok(Some((key, m))),
            Some(v) => return Err(f.err(key, format!("must be an object, got {}", describe(v)))),
        }
    }
    Ok(None)
}

pub(super) fn reject_nested_rope(d: &Fields) -> Result<()> {
    for layer_type in ["full_attention", "sliding_attention"] {
        if d.raw(layer_type).is_some() {
            return Err(d.err(layer_type, "per-layer-type rope parameters are not supported"));
        }
    }
    Ok(())
}

/// The rope dict's `rope_theta`, else the family's top-level key (`rope_theta`), else
/// `default_theta`.
pub(super) fn rope_theta(f: &Fields, d: &Fields, top_key: &str, default_theta: f64) -> Result<f64> {
    let (src, key) = if d.raw("rope_theta").is_some() { (d, "rope_theta") } else { (f, top_key) };
    let theta = match src.raw(key) {
        None => default_theta,
        Some(_) => src.required_positive(key, "any")?,
    };
    Ok(theta)
}

/// The rotated channels: `int(head_dim * partial_rotary_factor)` (the rope dict's factor, else
/// the top-level one, else the class default) for a family whose modeling code honours it;
/// others need 1.0.
pub(super) fn rotary_dim(f: &Fields, d: &Fields, schema: &ConfigSchema, head_dim: usize) -> Result<usize> {
    let (src, key) = match d.raw("partial_rotary_factor") {
        Some(_) => (d, "partial_rotary_factor"),
        None => (f, schema.keys.partial_rotary_factor),
    };
    let p = match (src.number(key)?, schema.partial_rotary) {
        (Some(p), _) | (None, Some(p)) => p,
        (None, None) => return Ok(head_dim),
    };
    if p == 1.0 {
        return Ok(head_dim);
    }
    if schema.partial_rotary.is_none() {
        return Err(src.err(
            key,
            format!("{p} is not supported by this architecture (only 1.0, rotary embeddings over the whole head)"),
        ));
    }
    let dim = (head_dim as f64 * p) as usize;
    if !(p > 0.0 && p < 1.0) || dim < 2 || dim % 2 == 1 {
        return Err(src.err(
            key,
            format!(
                "{p} gives {dim} rotated channels of head_dim {head_dim}; need an even number >= 2 (0 < factor <= 1)"
            ),
        ));
    }
    Ok(dim)
}

/// The rotary channels of a latent attention whose `partial_rotary_factor` is of the whole
/// query/key head (Mistral 4): `int((nope + rope) * factor)` (absent: `rope / (nope + rope)`,
/// as the config class sets it) must be the `qk_rope_head_dim` channels (`rope`), which
/// transformers' rotary embedding and its `q_rot` slice both assume.
fn latent_rotary_dim(f: &Fields, d: &Fields, rule: &LatentRule, rope: usize) -> Result<usize> {
    let head = rope + f.size("qk_nope_head_dim", Some(rule.nope_head_dim), MAX_HEAD_DIM)?;
    let key = "partial_rotary_factor";
    let src = if d.raw(key).is_some() { d } else { f };
    let Some(p) = src.number(key)? else { return Ok(rope) };
    let dim = (head as f64 * p) as usize;
    if dim != rope {
        return Err(src.err(
            key,
            format!(
                "{p} rotates {dim} of the {head} query/key channels, not the qk_rope_head_dim ({rope}) \
                 that latent attention rotates"
            ),
        ));
    }
    Ok(rope)
}

/// A fixed rope's rotated channels: the key's even count up to the head size (absent: the class
/// default, else the whole head; null is refused, as the config class refuses it).
fn fixed_rotary_dim(f: &Fields, key: &str, default: Option<usize>, head_dim: usize) -> Result<usize> {
    let dim = f.size(key, Some(default.unwrap_or(head_dim)), MAX_HIDDEN)?;
    if dim < 2 || dim % 2 == 1 || dim > head_dim {
        return Err(f.err(key, format!("{dim} rotated channels of head_dim {head_dim}: need an even number >= 2")));
    }
    Ok(dim)
}

/// `rope_type`, falling back to the old `type` key, then to `default`.
pub(super) fn rope_type(d: &Fields) -> Result<String> {
    for key in ["rope_type", "type"] {
        match d.raw(key) {
            None => continue,
            Some(Value::String(s)) => return Ok(s.clone()),
            Some(v) => {
                return Err(d.err(key, format!("must be one of {SUPPORTED_ROPE_TYPES}, got {}", describe(v))));
            }
        }
    }
    Ok("default".to_string())
}

pub(super) fn dynamic_scaling(d: &Fields, dims: &Dims) -> Result<RopeScaling> {
    if dims.head_dim == 2 {
        return Err(d.err("rope_type", "dynamic rope needs head_dim > 2 (it divides by head_dim - 2)"));
    }
    Ok(RopeScaling::Dynamic {
        factor: d.required_positive("factor", "dynamic")?,
        max_position_embeddings: dims.max_position_embeddings,
    })
}

pub(super) fn llama3_scaling(f: &Fields, d: &Fields, max_pos: usize) -> Result<RopeScaling> {
    Ok(RopeScaling::Llama3 {
        factor: d.required_positive("factor", "llama3")?,
        low_freq_factor: d.required_positive("low_freq_factor", "llama3")?,
        high_freq_factor: d.required_positive("high_freq_factor", "llama3")?,
        original_max_position_embeddings: original_max_positions(f, d, max_pos)?,
    })
}

pub(super) fn yarn_scaling(f: &Fields, d: &Fields, theta: f64, max_pos: usize) -> Result<RopeScaling> {
    if theta == 1.0 {
        return Err(d.err("rope_theta", "yarn needs rope_theta != 1 (it divides by log(rope_theta))"));
    }
    let original = original_max_positions(f, d, max_pos)?;
    // `factor` must be present; an explicit null means max_position_embeddings / original.
    let factor = match d.raw("factor") {
        Some(Value::Null) => max_pos as f64 / original as f64,
        _ => d.required_positive("factor", "yarn")?,
    };
    // `get("beta_fast") or 32`: null and 0 both take the default.
    let or_default =
        |key: &str, default: f64| -> Result<f64> { Ok(d.number(key)?.filter(|v| *v != 0.0).unwrap_or(default)) };
    Ok(RopeScaling::Yarn {
        factor,
        original_max_position_embeddings: original,
        beta_fast: or_default("beta_fast", 32.0)?,
        beta_slow: or_default("beta_slow", 1.0)?,
        mscale: d.number("mscale")?,
        mscale_all_dim: d.number("mscale_all_dim")?,
        attention_factor: d.number("attention_factor")?,
        truncate: yarn_truncate(d)?,
    })
}

/// transformers 5.23's yarn reads `truncate` from `config.rope_parameters` itself, not from the
/// layer type's dict (`_compute_yarn_parameters`), so in a dict keyed by layer type a layer's
/// own `truncate` is never read: the container's applies (absent: true).
fn container_truncate(mut rope: RopeConfig, container: &Fields) -> Result<RopeConfig> {
    if let RopeScaling::Yarn { truncate, .. } = &mut rope.scaling {
        *truncate = yarn_truncate(container)?;
    }
    Ok(rope)
}

/// `rope_parameters.get("truncate", True)`: absent means true, an explicit null false.
pub(super) fn yarn_truncate(d: &Fields) -> Result<bool> {
    match d.raw("truncate") {
        None => Ok(true),
        Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(d.err("truncate", format!("must be true or false, got {}", describe(v)))),
    }
}

/// Longrope (Phi-3.5, Phi-4-mini): short factors up to `original_max_position_embeddings`,
/// long ones past it, each list `dim / 2` long; the attention factor defaults to
/// `sqrt(1 + ln(factor) / ln(original))` with `factor = max_position_embeddings / original`.
pub(super) fn longrope_scaling(f: &Fields, d: &Fields, dim: usize, max_pos: usize) -> Result<RopeScaling> {
    let original = match original_max_positions_opt(f, d)? {
        Some(v) => v,
        None => return Err(d.err("original_max_position_embeddings", "is missing (required by rope_type `longrope`)")),
    };
    let factors = |key: &str| -> Result<Vec<f64>> {
        let list = match d.raw(key) {
            Some(Value::Array(list)) => list,
            None | Some(Value::Null) => return Err(d.err(key, "is missing (required by rope_type `longrope`)")),
            Some(v) => return Err(d.err(key, format!("must be a list of numbers, got {}", describe(v)))),
        };
        if list.len() != dim / 2 {
            return Err(d.err(key, format!("has {} entries; the {dim} rotated channels need {}", list.len(), dim / 2)));
        }
        list.iter()
            .enumerate()
            .map(|(i, v)| match v.as_f64() {
                Some(x) if x.is_finite() && x > 0.0 => Ok(x),
                _ => Err(d.err(key, format!("entry {i} must be a positive number, got {}", describe(v)))),
            })
            .collect()
    };
    let factor = match d.number("factor")? {
        Some(x) => x,
        None => max_pos as f64 / original as f64,
    };
    let attention_factor = match d.number("attention_factor")? {
        Some(a) => a,
        None if factor <= 1.0 => 1.0,
        None => (1.0 + factor.ln() / (original as f64).ln()).sqrt(),
    };
    Ok(RopeScaling::LongRope {
        short_factor: factors("short_factor")?,
        long_factor: factors("long_factor")?,
        original_max_position_embeddings: original,
        attention_factor,
    })
}

/// For llama3 and yarn: a top-level `original_max_position_embeddings` wins (the Phi3 case in
/// `standardize_rope_params`), then the rope dict's, then `max_position_embeddings`.
pub(super) fn original_max_positions(f: &Fields, d: &Fields, max_pos: usize) -> Result<usize> {
    Ok(original_max_positions_opt(f, d)?.unwrap_or(max_pos))
}

pub(super) fn original_max_positions_opt(f: &Fields, d: &Fields) -> Result<Option<usize>> {
    let key = "original_max_position_embeddings";
    for src in [f, d] {
        if let Some(v) = src.count_lenient(key, MAX_POSITIONS)? {
            return Ok(Some(v));
        }
    }
    Ok(None)
}
