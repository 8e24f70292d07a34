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

use crate::schema::{Alibi, LatentRule};

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
    /// Multi-head latent attention (DeepSeek-V2/V3): every head's keys and values expanded from
    /// one compressed latent per token plus one shared rotary key, which are what the cache
    /// keeps (`kv_lora_rank + qk_rope_head_dim` values per token, as transformers caches them).
    LatentAttention(LatentSpec),
}

/// One latent-attention layer's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct LatentSpec {
    pub heads: usize,
    /// `q_lora_rank`: the queries through a low-rank projection and its norm; `None`: one
    /// `q_proj`.
    pub q_lora_rank: Option<usize>,
    pub kv_lora_rank: usize,
    /// Each head's query and key channels without rotary (`qk_nope_head_dim`), with it
    /// (`qk_rope_head_dim`, shared by the heads on the key side), and its value channels.
    pub nope_dim: usize,
    pub rope_dim: usize,
    pub v_dim: usize,
    pub rope: RopeConfig,
    /// The rotary pairs channels `(2i, 2i + 1)`: the projections' rotary rows are read
    /// reordered so that the rotate-half rotary applies (V2 always, V3's `rope_interleave`).
    pub interleaved: bool,
    /// `(qk_nope_head_dim + qk_rope_head_dim) ** -0.5`, times yarn's `mscale_all_dim` factor
    /// squared.
    pub scale: f64,
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
            Mixer::LatentAttention(_) => None,
        }
    }

    /// The rotary embedding of this layer, of whatever kind it is.
    pub fn rope(&self) -> Option<&RopeConfig> {
        match &self.mixer {
            Mixer::Attention(a) => a.rope.as_ref(),
            Mixer::LatentAttention(l) => Some(&l.rope),
        }
    }

    /// The names of the tensors this layer keeps between generation calls
    /// (`cache.layers.<i>.<name>`), in the order [`Self::cache`] gives their shapes.
    pub fn cache_names(&self) -> &'static [&'static str] {
        match &self.mixer {
            // a latent layer's: the normed latent and the rotated shared key, in the slots
            // transformers' cache gives them
            Mixer::Attention(_) | Mixer::LatentAttention(_) => &["keys", "values"],
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
            Mixer::LatentAttention(l) => {
                let one = Dim::konst(1);
                vec![
                    vec![one.clone(), one.clone(), len.clone(), Dim::from(l.kv_lora_rank)],
                    vec![one.clone(), one, len.clone(), Dim::from(l.rope_dim)],
                ]
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
    if let Some(rule) = schema.latent {
        let latent = latent_spec(f, &rule, dims, rope)?;
        let layer = |i: usize| LayerSpec {
            mixer: Mixer::LatentAttention(latent.clone()),
            sparse_mlp: sparse.get(i).copied().unwrap_or(false),
        };
        return Ok((0..n).map(layer).collect());
    }
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

/// A latent-attention layer as `DeepseekV2Attention` reads its config: the ranks and per-head
/// sizes with the class defaults (`q_lora_rank` null: one query projection), the rotary over
/// the `qk_rope_head_dim` channels (`dims.head_dim`), and the score scale with yarn's
/// `mscale_all_dim` correction.
fn latent_spec(f: &Fields, rule: &LatentRule, dims: &Dims, rope: &RopeConfig) -> Result<LatentSpec> {
    if dims.num_key_value_heads != dims.num_attention_heads {
        // every head has its own expanded keys: transformers' repeat_kv fails on fewer
        return Err(f.err(
            "num_key_value_heads",
            format!(
                "{} differs from num_attention_heads ({}): latent attention expands keys for every head",
                dims.num_key_value_heads, dims.num_attention_heads
            ),
        ));
    }
    let q_lora_rank = match (f.raw("q_lora_rank"), rule.q_lora_rank) {
        (Some(Value::Null), _) | (None, None) => None,
        (None, Some(default)) => Some(default),
        (Some(_), _) => Some(f.size("q_lora_rank", None, MAX_HIDDEN)?),
    };
    let kv_lora_rank = f.size("kv_lora_rank", Some(rule.kv_lora_rank), MAX_HIDDEN)?;
    let nope_dim = f.size("qk_nope_head_dim", Some(rule.nope_head_dim), MAX_HEAD_DIM)?;
    let v_dim = f.size("v_head_dim", Some(rule.v_head_dim), MAX_HEAD_DIM)?;
    let rope_dim = dims.head_dim;
    for (key, v) in [("q_lora_rank", q_lora_rank.unwrap_or(1)), ("kv_lora_rank", kv_lora_rank), ("v_head_dim", v_dim)] {
        if v == 0 {
            return Err(f.err(key, "must be at least 1"));
        }
    }
    let mut scale = ((nope_dim + rope_dim) as f64).powf(-0.5);
    // `yarn_apply_mscale`: a rope other than the default with `mscale_all_dim` scales the
    // scores by the square of yarn's magnitude correction
    if let RopeScaling::Yarn { factor, mscale_all_dim: Some(m), .. } = rope.scaling {
        if m != 0.0 && factor > 1.0 {
            let mscale = 0.1 * m * factor.ln() + 1.0;
            scale *= mscale * mscale;
        }
    }
    Ok(LatentSpec {
        heads: dims.num_attention_heads,
        q_lora_rank,
        kv_lora_rank,
        nope_dim,
        rope_dim,
        v_dim,
        rope: rope.clone(),
        interleaved: flag(f, rule.interleave)?,
        scale,
    })
}
