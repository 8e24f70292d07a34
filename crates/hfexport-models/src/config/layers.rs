//! The attention kind of every layer (full or sliding) and the window, as each modeling class
//! derives them (`layer_types`, `sliding_window`, `max_window_layers`, patterns), and which layers
//! are rotary.

use super::*;

/// The attention kind `layer_types` (or the family's rule) gives a layer: what
/// [`layer_specs`](super::layer_spec) turns into its [`Span`](super::Span).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LayerType {
    /// `full_attention`.
    Full,
    /// `sliding_attention`.
    Sliding,
    /// `chunked_attention`: attention within fixed chunks of positions (Llama 4).
    Chunked,
}

/// transformers' `ALLOWED_ATTN_LAYER_TYPES`: anything else in `layer_types` is invalid there.
pub(super) const ALLOWED_LAYER_TYPES: &[&str] = &[
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "window_attention",
    "indexed_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",
    "minimax_m3_sparse",
    "conv",
    "moe",
    "hybrid",
    "hybrid_sliding",
    "reference_sliding_attention",
    "linear_attention",
];

/// transformers' `_LEGACY_LAYER_TYPE_REMAP`.
pub(super) const LEGACY_LAYER_TYPES: &[(&str, &str)] = &[
    ("mamba", "linear_attention"),
    ("attention", "full_attention"),
    ("deepseek_sparse_attention", "indexed_attention"),
    ("qwen_sparse_attention", "indexed_attention"),
];

/// Qwen2/Qwen3 default `sliding_window` and `max_window_layers`; Mistral's default window.
pub(super) const DEFAULT_SLIDING_WINDOW: usize = 4096;
pub(super) const DEFAULT_MAX_WINDOW_LAYERS: i64 = 28;

pub(super) fn parse_layers(f: &Fields, schema: &ConfigSchema, n: usize) -> Result<(Vec<LayerType>, Option<usize>)> {
    // transformers validates an explicit list even for classes that then ignore it.
    let explicit = explicit_layer_types(f, n)?;
    let (types, window) = match schema.layers {
        // LlamaModel, GemmaModel, GPT2Model, …: no sliding attention at all.
        LayerRule::Full => (vec![LayerType::Full; n], None),
        LayerRule::Mistral { default_window } => mistral_layers(f, explicit, n, default_window)?,
        LayerRule::EveryLayer { default_window } => {
            let window = sliding_window(f, default_window)?;
            let kind = if window.is_some() { LayerType::Sliding } else { LayerType::Full };
            (vec![kind; n], window)
        }
        LayerRule::Qwen => qwen_layers(f, explicit, n)?,
        LayerRule::Pattern { period, pattern_keys, default_window, last_full } => {
            let window = sliding_window(f, Some(default_window))?;
            let mut types = match explicit {
                Some(names) => supported_layer_types(f, &names)?,
                None => {
                    let period = pattern_period(f, pattern_keys, period)?;
                    (0..n)
                        .map(|i| match (i + 1) % period {
                            0 => LayerType::Full,
                            _ => LayerType::Sliding,
                        })
                        .collect()
                }
            };
            if let (true, Some(last)) = (last_full, types.last_mut()) {
                *last = LayerType::Full;
            }
            (types, window)
        }
        LayerRule::UseSlidingWindow => {
            let use_sliding = f.bool("use_sliding_window")?.unwrap_or(false);
            let window = sliding_window(f, None)?.filter(|_| use_sliding);
            let types = match explicit {
                Some(names) => supported_layer_types(f, &names)?,
                // SmolLM3Config: the layers without rope slide when there is a window
                None => no_rope_layers(f, n)?
                    .into_iter()
                    .map(|rotary| match window.is_some() && !rotary {
                        true => LayerType::Sliding,
                        false => LayerType::Full,
                    })
                    .collect(),
            };
            (types, window)
        }
        LayerRule::UniformWhenUsed { default_window } => {
            let use_sliding = f.bool("use_sliding_window")?.unwrap_or(false);
            match sliding_window(f, Some(default_window))?.filter(|_| use_sliding) {
                Some(w) => (vec![LayerType::Sliding; n], Some(w)),
                None => (vec![LayerType::Full; n], None),
            }
        }
        LayerRule::LocalGlobal { default_every, default_local } => {
            let types = match explicit {
                Some(names) => supported_layer_types(f, &names)?,
                None => {
                    let every = f.size("global_attn_every_n_layers", Some(default_every), MAX_LAYERS)?;
                    (0..n)
                        .map(|i| match i % every {
                            0 => LayerType::Full,
                            _ => LayerType::Sliding,
                        })
                        .collect()
                }
            };
            // `sliding_window` is a property of the class: half of `local_attention`; a
            // `sliding_window` key sets `local_attention` to twice its value
            let half = match f.raw("sliding_window") {
                Some(v) if !v.is_null() => f.size("sliding_window", None, MAX_SLIDING_WINDOW)?,
                _ => f.size("local_attention", Some(default_local), 2 * MAX_SLIDING_WINDOW)? / 2,
            };
            (types, Some(half))
        }
        LayerRule::Chunked { default_chunk } => {
            let types = match explicit {
                Some(names) => layer_types_of(f, &names, CHUNKED_KINDS)?,
                // Llama4TextConfig: the rotary layers are chunked
                None => no_rope_layers(f, n)?
                    .into_iter()
                    .map(|rotary| match rotary {
                        true => LayerType::Chunked,
                        false => LayerType::Full,
                    })
                    .collect(),
            };
            let chunk = match f.raw("attention_chunk_size") {
                Some(Value::Null) => None,
                _ => Some(f.size("attention_chunk_size", Some(default_chunk), MAX_SLIDING_WINDOW)?),
            };
            if types.contains(&LayerType::Chunked) && chunk.is_none() {
                // transformers' create_chunked_causal_mask fails so
                return Err(f.err("attention_chunk_size", "is null but there are chunked_attention layers"));
            }
            return Ok((types, chunk));
        }
        LayerRule::EvenBelowMaxWindow => {
            // the config class stores 0 when `use_sliding_window` is false
            let use_sliding = f.bool("use_sliding_window")?.unwrap_or(false);
            let window = match use_sliding {
                true => sliding_window(f, Some(DEFAULT_SLIDING_WINDOW))?,
                false => None,
            };
            let types = match explicit {
                Some(names) => supported_layer_types(f, &names)?,
                None => {
                    let below = f.int("max_window_layers")?.unwrap_or(DEFAULT_MAX_WINDOW_LAYERS);
                    (0..n)
                        .map(|i| match i % 2 == 0 && (i as i64) < below && use_sliding {
                            true => LayerType::Sliding,
                            false => LayerType::Full,
                        })
                        .collect()
                }
            };
            (types, window)
        }
    };
    let sliding = types.contains(&LayerType::Sliding);
    if sliding && window.is_none() {
        let why = match schema.layers {
            LayerRule::Qwen | LayerRule::UseSlidingWindow | LayerRule::EvenBelowMaxWindow => {
                "layer_types has sliding_attention layers but use_sliding_window is false or sliding_window is null"
            }
            _ => "layer_types has sliding_attention layers but sliding_window is not set",
        };
        return Err(f.err("sliding_window", why));
    }
    Ok((types, window.filter(|_| sliding)))
}

/// MistralModel applies `config.sliding_window` to every layer. But AutoConfig reads
/// a `mistral` config that has a `layer_types` key as `ministral`, whose layers slide only where
/// `layer_types` says so (transformers 5.23 `configuration_auto.py`).
pub(super) fn mistral_layers(
    f: &Fields,
    explicit: Option<Vec<String>>,
    n: usize,
    default_window: Option<usize>,
) -> Result<(Vec<LayerType>, Option<usize>)> {
    let window = sliding_window(f, default_window)?;
    let model_type = f.string("model_type")?;
    let ministral = model_type == Some("ministral") || f.raw("layer_types").is_some();
    if ministral && matches!(f.raw("head_dim"), None | Some(Value::Null)) {
        // MinistralAttention computes `head_dim ** -0.5` without a fallback
        return Err(f.err("head_dim", "is required when a Mistral config has `layer_types` (read as Ministral)"));
    }
    let kind = if window.is_some() { LayerType::Sliding } else { LayerType::Full };
    let types = match explicit {
        Some(names) if ministral => supported_layer_types(f, &names)?,
        _ => vec![kind; n],
    };
    Ok((types, window))
}

/// The sliding-window pattern of Gemma 3 (`sliding_window_pattern`, a legacy key still on the
/// Hub): every `period`-th layer is full.
pub(super) fn pattern_period(f: &Fields, keys: &[&str], default: usize) -> Result<usize> {
    for key in keys {
        if let Some(p) = f.count_lenient(key, MAX_LAYERS)? {
            return Ok(p);
        }
    }
    Ok(default)
}

/// Per layer: whether it has a rotary embedding.
/// Per layer (of the given spans): whether it has a rotary embedding.
pub(super) fn rotary_layers(f: &Fields, schema: &ConfigSchema, spans: &[Span]) -> Result<Vec<bool>> {
    let n = spans.len();
    match schema.rope {
        RopeRule::None => Ok(vec![false; n]),
        RopeRule::Uniform | RopeRule::PerLayerType { .. } | RopeRule::Fixed { .. } => Ok(vec![true; n]),
        RopeRule::SlidingOnly => Ok(spans.iter().map(|s| *s != Span::Full).collect()),
        RopeRule::NoRopeLayers | RopeRule::NoRopeLayersTuned => no_rope_layers(f, n),
        RopeRule::WhenKey { key, value } => Ok(vec![f.string(key)? == Some(value); n]),
    }
}

/// SmolLM3's `no_rope_layers` (1: rotary, 0: none), else every `no_rope_layer_interval`-th
/// layer without.
pub(super) fn no_rope_layers(f: &Fields, n: usize) -> Result<Vec<bool>> {
    let key = "no_rope_layers";
    match f.raw(key) {
        // an empty list reads as none (Llama4TextConfig's `if self.no_rope_layers`)
        None | Some(Value::Null) => default_no_rope_layers(f, n),
        Some(Value::Array(list)) if list.is_empty() => default_no_rope_layers(f, n),
        Some(Value::Array(list)) if list.len() == n => list
            .iter()
            .enumerate()
            .map(|(i, v)| match v.as_i64() {
                Some(0) => Ok(false),
                Some(1) => Ok(true),
                _ => Err(f.err(key, format!("entry {i} must be 0 (no rope) or 1, got {}", describe(v)))),
            })
            .collect(),
        Some(Value::Array(list)) => Err(f.err(key, format!("has {} entries but there are {n} layers", list.len()))),
        Some(v) => Err(f.err(key, format!("must be a list, got {}", describe(v)))),
    }
}

/// Every `no_rope_layer_interval`-th layer (1-based, class default 4) without rope.
fn default_no_rope_layers(f: &Fields, n: usize) -> Result<Vec<bool>> {
    let interval = f.count_lenient("no_rope_layer_interval", MAX_LAYERS)?.unwrap_or(4);
    Ok((0..n).map(|i| (i + 1) % interval != 0).collect())
}

/// Qwen2/Qwen3: `sliding_window` only counts with `use_sliding_window`; without an explicit
/// `layer_types`, layers from `max_window_layers` on slide.
pub(super) fn qwen_layers(
    f: &Fields,
    explicit: Option<Vec<String>>,
    n: usize,
) -> Result<(Vec<LayerType>, Option<usize>)> {
    let use_sliding = f.bool("use_sliding_window")?.unwrap_or(false);
    let window = sliding_window(f, Some(DEFAULT_SLIDING_WINDOW))?.filter(|_| use_sliding);
    let types = match explicit {
        Some(names) => supported_layer_types(f, &names)?,
        None => {
            let first_sliding = f.int("max_window_layers")?.unwrap_or(DEFAULT_MAX_WINDOW_LAYERS);
            (0..n)
                .map(|i| match window {
                    Some(_) if i as i64 >= first_sliding => LayerType::Sliding,
                    _ => LayerType::Full,
                })
                .collect()
        }
    };
    Ok((types, window))
}

/// `sliding_window`: absent takes the class default, null means none.
pub(super) fn sliding_window(f: &Fields, default: Option<usize>) -> Result<Option<usize>> {
    match f.raw("sliding_window") {
        None => Ok(default),
        Some(Value::Null) => Ok(None),
        Some(_) => Ok(Some(f.size("sliding_window", None, MAX_SLIDING_WINDOW)?)),
    }
}

/// An explicit `layer_types`, checked as `PreTrainedConfig.validate_layer_type` does.
pub(super) fn explicit_layer_types(f: &Fields, n: usize) -> Result<Option<Vec<String>>> {
    let list = match f.raw("layer_types") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(list)) => list,
        Some(v) => return Err(f.err("layer_types", format!("must be a list, got {}", describe(v)))),
    };
    let mut names = Vec::with_capacity(list.len().min(MAX_LAYERS));
    for (i, v) in list.iter().enumerate() {
        let Value::String(s) = v else {
            return Err(f.err("layer_types", format!("entry {i} must be a string, got {}", describe(v))));
        };
        let s = LEGACY_LAYER_TYPES.iter().find(|(old, _)| old == s).map_or(s.as_str(), |(_, new)| new);
        if !ALLOWED_LAYER_TYPES.contains(&s) {
            return Err(
                f.err("layer_types", format!("entry {i} is `{s}`; allowed: {}", ALLOWED_LAYER_TYPES.join(", ")))
            );
        }
        names.push(s.to_string());
    }
    if names.len() != n {
        return Err(f.err("layer_types", format!("has {} entries but num_hidden_layers is {n}", names.len())));
    }
    Ok(Some(names))
}

/// The layer kinds we can build.
pub(super) fn supported_layer_types(f: &Fields, names: &[String]) -> Result<Vec<LayerType>> {
    layer_types_of(f, names, ATTENTION_KINDS)
}

/// The layer kinds most families' `layer_types` may name.
const ATTENTION_KINDS: &[(&str, LayerType)] =
    &[("full_attention", LayerType::Full), ("sliding_attention", LayerType::Sliding)];

/// Llama 4's.
const CHUNKED_KINDS: &[(&str, LayerType)] =
    &[("full_attention", LayerType::Full), ("chunked_attention", LayerType::Chunked)];

/// `names` read as the `kinds` a family builds; any other is refused, naming the entry.
fn layer_types_of(f: &Fields, names: &[String], kinds: &[(&str, LayerType)]) -> Result<Vec<LayerType>> {
    let supported: Vec<&str> = kinds.iter().map(|(n, _)| *n).collect();
    names
        .iter()
        .enumerate()
        .map(|(i, s)| match kinds.iter().find(|(n, _)| n == s) {
            Some((_, kind)) => Ok(*kind),
            None => Err(f.err(
                "layer_types",
                format!("entry {i} is `{s}`, which is not supported (supported: {})", supported.join(", ")),
            )),
        })
        .collect()
}
