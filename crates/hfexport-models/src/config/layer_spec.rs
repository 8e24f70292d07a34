//! What each decoder layer is, one [`LayerSpec`] per layer.
//!
//! Families differ layer by layer (Gemma's sliding and full layers with their own rotary,
//! SmolLM3's layers without rotary, GPT-2's per-layer score factor, Qwen-MoE's dense layers),
//! and the next ones differ more (linear attention and convolutions between attention layers,
//! chunked or shared-KV attention, per-layer head counts and sizes). So a config resolves to a
//! list of specs rather than parallel per-layer flags: the block builder matches on a layer's
//! [`Mixer`] to build it, and [`LayerSpec::cache`] says what that layer keeps between
//! generation calls, so a new kind of layer is a new variant that the compiler makes both
//! places handle.

use hfexport_core::{Dim, RopeConfig};

use crate::schema::Alibi;

use super::*;

/// One decoder (or encoder) layer: how it mixes tokens, and which MLP follows.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerSpec {
    pub mixer: Mixer,
    /// The MLP is the mixture of experts of [`ModelConfig::moe`] (false: the dense MLP of
    /// `intermediate_size`).
    pub sparse_mlp: bool,
}

/// How a layer mixes information across positions.
#[derive(Debug, Clone, PartialEq)]
pub enum Mixer {
    /// Softmax attention over keys and values (cached per layer in generation).
    Attention(AttentionSpec),
}

/// One attention layer's own shape and settings.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionSpec {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub span: Span,
    /// The rotary embedding; `None` for a layer without one (SmolLM3's NoPE layers, GPT-2).
    pub rope: Option<RopeConfig>,
    /// The factor of the attention scores (`head_dim ** -0.5` in most families).
    pub scale: f64,
    /// Linear biases by key position added to the scores, in place of rotary (Bloom, Falcon).
    pub alibi: Option<Alibi>,
}

/// The keys a query attends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// Every earlier position (every position in an encoder).
    Full,
    /// The last `n` positions, the query's own included (both sides within `n` in an encoder).
    Sliding(usize),
}

impl LayerSpec {
    /// The attention of this layer, `None` for a layer of another kind.
    pub fn attention(&self) -> Option<&AttentionSpec> {
        match &self.mixer {
            Mixer::Attention(a) => Some(a),
        }
    }

    /// The names of the tensors this layer keeps between generation calls
    /// (`cache.layers.<i>.<name>`), in the order [`Self::cache`] gives their shapes.
    pub fn cache_names(&self) -> &'static [&'static str] {
        match &self.mixer {
            Mixer::Attention(_) => &["keys", "values"],
        }
    }

    /// The tensors this layer keeps between generation calls, `(name, shape)` in the order the
    /// graph's `input.cache.layers.<i>.*` are declared; `len` is the cache's positions.
    pub fn cache(&self, len: &Dim) -> Vec<(&'static str, Vec<Dim>)> {
        let shapes = match &self.mixer {
            Mixer::Attention(a) => {
                let shape = vec![Dim::konst(1), Dim::from(a.kv_heads), len.clone(), Dim::from(a.head_dim)];
                vec![shape.clone(), shape]
            }
        };
        self.cache_names().iter().copied().zip(shapes).collect()
    }
}

impl ModelConfig {
    /// The window of the sliding layers; `None` when no layer slides.
    pub fn sliding_window(&self) -> Option<usize> {
        self.layers.iter().filter_map(LayerSpec::attention).find_map(|a| match a.span {
            Span::Sliding(w) => Some(w),
            Span::Full => None,
        })
    }
}

/// Every layer of a config read by `schema`: the attention kinds and window, the rotary of
/// each (the sliding layers' own where the family has one), the score factors, and which
/// layers have the sparse MLP (`sparse`, empty for a dense model).
pub(super) fn layer_specs(
    f: &Fields,
    schema: &ConfigSchema,
    dims: &Dims,
    (rope, sliding_rope): (&RopeConfig, Option<&RopeConfig>),
    sparse: &[bool],
) -> Result<Vec<LayerSpec>> {
    let n = dims.num_hidden_layers;
    let (types, window) = parse_layers(f, schema, n)?;
    let spans: Vec<Span> = types
        .iter()
        .map(|t| match (t, window) {
            (LayerType::SlidingAttention, Some(w)) => Span::Sliding(w),
            _ => Span::Full,
        })
        .collect();
    let alibi = match schema.alibi {
        Some(rule) if flag(f, rule.when)? => Some(rule.kind),
        _ => None,
    };
    // ALiBi replaces rotary (Falcon's `rotary` is `not alibi`)
    let rotary = match alibi {
        Some(_) => vec![false; spans.len()],
        None => rotary_layers(f, schema, &spans)?,
    };
    let scales = attention_scales(f, schema, dims)?;
    let specs = spans.iter().enumerate().map(|(i, &span)| {
        let layer_rope = match span {
            Span::Sliding(_) => sliding_rope.unwrap_or(rope),
            Span::Full => rope,
        };
        let attention = AttentionSpec {
            heads: dims.num_attention_heads,
            kv_heads: dims.num_key_value_heads,
            head_dim: dims.head_dim,
            span,
            rope: rotary[i].then(|| layer_rope.clone()),
            scale: scales[i],
            alibi,
        };
        LayerSpec { mixer: Mixer::Attention(attention), sparse_mlp: sparse.get(i).copied().unwrap_or(false) }
    });
    Ok(specs.collect())
}
