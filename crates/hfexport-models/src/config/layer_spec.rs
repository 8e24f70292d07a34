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

use crate::layout::{Layout, Projections};

use crate::schema::{Alibi, DeltaNetProjections, GatedNormKeys, LatentRule, Mamba2Keys, SsmLayers, SsmMixer, SsmRule};

use super::*;

/// One decoder (or encoder) layer: how it mixes tokens, and which MLP follows.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerSpec {
    pub mixer: Mixer,
    pub mlp: LayerMlp,
    /// The dense MLP's shape, where [`Self::mlp`] has one.
    pub dense: DenseMlp,
}

/// The MLP after a layer's mixer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerMlp {
    /// The dense MLP of [`LayerSpec::dense`].
    Dense,
    /// The mixture of experts of [`ModelConfig::moe`].
    Sparse,
    /// The dense MLP and the mixture of experts beside it (Gemma 4).
    DenseAndSparse,
    /// None: the mixer is the whole layer (Mamba's blocks).
    None,
}

impl LayerMlp {
    /// Whether the layer runs the mixture of experts (alone or beside its dense MLP).
    pub fn has_experts(self) -> bool {
        matches!(self, LayerMlp::Sparse | LayerMlp::DenseAndSparse)
    }

    /// The sparse MLP where `sparse` says so, else the dense one.
    pub fn dense_or_sparse(sparse: bool) -> LayerMlp {
        match sparse {
            true => LayerMlp::Sparse,
            false => LayerMlp::Dense,
        }
    }
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
    /// Mamba's selective state-space mixer: what it keeps between generation calls is a fixed
    /// size whatever the position: the last `conv_kernel - 1` inputs of its causal convolution
    /// and the state of its recurrence.
    Mamba(MambaSpec),
    /// Mamba2's mixer (state-space duality): one scalar decay per head, B and C shared by the
    /// heads of a group, a gated RMS norm per group before the output projection.
    Mamba2(Mamba2Spec),
    /// LFM2's gated short convolution: `B * x` convolved over the last `kernel` positions (no
    /// activation), times `C`; it keeps only the convolution's last inputs.
    ShortConv(ShortConvSpec),
    /// Attention and a Mamba2 mixer side by side off the same normed input, their outputs
    /// summed (Falcon-H1): it keeps the attention's keys and values and the mixer's states.
    AttentionAndMamba2(AttentionSpec, Mamba2Spec),
    /// The gated DeltaNet (Qwen3-Next, Qwen3.5): linear attention whose state per value head
    /// is a `[key_dim, value_dim]` matrix updated by the gated delta rule; it keeps that state
    /// and its convolution's last inputs.
    GatedDeltaNet(DeltaNetSpec),
}

/// One gated DeltaNet layer's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaNetSpec {
    pub key_heads: usize,
    /// A multiple of `key_heads`: each key head's query and key serve this many / `key_heads`.
    pub value_heads: usize,
    pub key_dim: usize,
    pub value_dim: usize,
    /// `linear_conv_kernel_dim`: the taps of the convolution over q, k and v (no bias).
    pub conv_kernel: usize,
    pub projections: DeltaNetProjections,
}

impl DeltaNetSpec {
    /// The channels of the queries and of the keys (`key_heads * key_dim` each).
    pub fn keys(&self) -> usize {
        self.key_heads * self.key_dim
    }

    /// The channels of the values (`value_heads * value_dim`).
    pub fn values(&self) -> usize {
        self.value_heads * self.value_dim
    }

    /// The channels the convolution runs over: q, k and v.
    pub fn conv_channels(&self) -> usize {
        2 * self.keys() + self.values()
    }
}

/// One short-convolution mixer (`Lfm2ShortConv`) over the hidden size's channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortConvSpec {
    /// The hidden size: the convolution's channels.
    pub channels: usize,
    /// `conv_L_cache`: the convolution's taps.
    pub kernel: usize,
    /// `conv_bias`: the projections and the convolution have biases.
    pub bias: bool,
}

/// One Mamba2 mixer's shape (`Mamba2Config`).
#[derive(Debug, Clone, PartialEq)]
pub struct Mamba2Spec {
    pub heads: usize,
    pub head_dim: usize,
    /// `n_groups`: the heads share B and C (and the gated norm) in this many groups.
    pub groups: usize,
    pub state: usize,
    pub conv_kernel: usize,
    pub conv_bias: bool,
    /// The input projection's bias, and the output projection's.
    pub bias: bool,
    pub out_bias: bool,
    pub norm: GatedNorm,
    /// `time_step_limit`: the step sizes are clamped to this range (the class default
    /// `(0, inf)` changes nothing after the softplus).
    pub dt_limit: (f64, f64),
}

impl Mamba2Spec {
    /// `heads * head_dim`: the scan's channels.
    pub fn inner(&self) -> usize {
        self.heads * self.head_dim
    }

    /// The channels the convolution runs over: the scan's input, then B and C of every group.
    pub fn conv_channels(&self) -> usize {
        self.inner() + 2 * self.groups * self.state
    }
}

/// Where a Mamba2 mixer's gated RMS norm (per group of heads) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatedNorm {
    /// `norm(y * silu(gate))` (Mamba2, Bamba; Falcon-H1's `mamba_norm_before_gate` false).
    AfterGate,
    /// `norm(y) * silu(gate)` (Falcon-H1's class default).
    BeforeGate,
    /// No norm: `y * silu(gate)` (Falcon-H1's `mamba_rms_norm` false, its class default).
    None,
}

/// One Mamba mixer's shape (`MambaConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MambaSpec {
    /// `expand * hidden_size`: the channels of the convolution and the scan.
    pub inner: usize,
    /// `state_size`: the state per channel.
    pub state: usize,
    /// `conv_kernel`: the causal depthwise convolution's taps.
    pub conv_kernel: usize,
    /// `time_step_rank`: the low-rank width of the step size's projection.
    pub dt_rank: usize,
    /// `use_conv_bias`, `use_bias` (the in and out projections').
    pub conv_bias: bool,
    pub bias: bool,
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
    /// The queries multiplied by a factor of their position (Mistral 4).
    pub query_scale: Option<QueryScale>,
}

/// Llama 4's query scaling by position (`get_llama_4_attn_scale`): the queries at position `p`
/// are multiplied by `1 + beta * ln(1 + floor((p + offset) / divisor))`, which is 1 below
/// `divisor - offset` (Mistral 4: `llama_4_scaling_beta` and `original_max_position_embeddings`
/// of its rope dict, offset 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueryScale {
    pub beta: f64,
    pub divisor: usize,
    pub offset: usize,
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
    /// The queries multiplied by a factor of their position (Llama 4's layers without rope).
    pub query_scale: Option<QueryScale>,
    /// The earlier layer whose keys and values (this call's, cache included) this layer attends
    /// over: it has no key or value projections and keeps no cache of its own (Gemma 4's
    /// `num_kv_shared_layers`).
    pub kv_source: Option<usize>,
    /// The values are the key projection's output (before the key norm and rotary; Gemma 4's
    /// `attention_k_eq_v` in its full-attention layers).
    pub values_from_keys: bool,
}

/// The keys a query attends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// Every earlier position (every position in an encoder).
    Full,
    /// The last `n` positions, the query's own included (both sides within `n` in an encoder).
    Sliding(usize),
    /// The earlier positions of the query's chunk of `n` (chunks counted from each sequence's
    /// first token: a left-padded row's from its first unpadded one; Llama 4).
    Chunked(usize),
}

impl LayerSpec {
    /// The attention of this layer, `None` for a layer of another kind.
    pub fn attention(&self) -> Option<&AttentionSpec> {
        match &self.mixer {
            Mixer::Attention(a) | Mixer::AttentionAndMamba2(a, _) => Some(a),
            Mixer::LatentAttention(_)
            | Mixer::Mamba(_)
            | Mixer::Mamba2(_)
            | Mixer::ShortConv(_)
            | Mixer::GatedDeltaNet(_) => None,
        }
    }

    /// The rotary embedding of this layer, of whatever kind it is.
    pub fn rope(&self) -> Option<&RopeConfig> {
        match &self.mixer {
            Mixer::Attention(a) | Mixer::AttentionAndMamba2(a, _) => a.rope.as_ref(),
            Mixer::LatentAttention(l) => Some(&l.rope),
            Mixer::Mamba(_) | Mixer::Mamba2(_) | Mixer::ShortConv(_) | Mixer::GatedDeltaNet(_) => None,
        }
    }

    /// The names of the tensors this layer keeps between generation calls
    /// (the cache `<i>.<name>`), in the order [`Self::cache`] gives their shapes.
    pub fn cache_names(&self) -> &'static [&'static str] {
        match &self.mixer {
            // it attends over another layer's
            Mixer::Attention(a) if a.kv_source.is_some() => &[],
            // a latent layer's: the normed latent and the rotated shared key, in the slots
            // transformers' cache gives them
            Mixer::Attention(_) | Mixer::LatentAttention(_) => &["key", "value"],
            // the convolution's last inputs and the scan's state
            Mixer::Mamba(_) | Mixer::Mamba2(_) | Mixer::GatedDeltaNet(_) => &["conv", "ssm"],
            Mixer::ShortConv(_) => &["conv"],
            // the attention's, then the mixer's
            Mixer::AttentionAndMamba2(..) => &["key", "value", "conv", "ssm"],
        }
    }

    /// The tensors this layer keeps between generation calls, `(name, shape)` in the order the
    /// graph's `past_key_values.<i>.*` are declared; `len` is the cache's positions.
    pub fn cache(&self, len: &Dim) -> Vec<(&'static str, Vec<Dim>)> {
        let kv = |a: &AttentionSpec| {
            let shape = vec![Dim::konst(1), Dim::from(a.kv_heads), len.clone(), Dim::from(a.head_dim)];
            vec![shape.clone(), shape]
        };
        let mamba2 = |m: &Mamba2Spec| {
            vec![
                vec![Dim::konst(1), Dim::from(m.conv_channels()), Dim::from(m.conv_kernel - 1)],
                vec![Dim::konst(1), Dim::from(m.heads), Dim::from(m.head_dim), Dim::from(m.state)],
            ]
        };
        let shapes = match &self.mixer {
            Mixer::Attention(a) if a.kv_source.is_some() => vec![],
            Mixer::Attention(a) => kv(a),
            Mixer::LatentAttention(l) => {
                let one = Dim::konst(1);
                vec![
                    vec![one.clone(), one.clone(), len.clone(), Dim::from(l.kv_lora_rank)],
                    vec![one.clone(), one, len.clone(), Dim::from(l.rope_dim)],
                ]
            }
            // fixed sizes: a recurrent layer's cache does not grow with the position
            Mixer::Mamba(m) => vec![
                vec![Dim::konst(1), Dim::from(m.inner), Dim::from(m.conv_kernel - 1)],
                vec![Dim::konst(1), Dim::from(m.inner), Dim::from(m.state)],
            ],
            Mixer::Mamba2(m) => mamba2(m),
            Mixer::ShortConv(c) => vec![vec![Dim::konst(1), Dim::from(c.channels), Dim::from(c.kernel - 1)]],
            Mixer::AttentionAndMamba2(a, m) => [kv(a), mamba2(m)].concat(),
            Mixer::GatedDeltaNet(d) => vec![
                vec![Dim::konst(1), Dim::from(d.conv_channels()), Dim::from(d.conv_kernel - 1)],
                vec![Dim::konst(1), Dim::from(d.value_heads), Dim::from(d.key_dim), Dim::from(d.value_dim)],
            ],
        };
        self.cache_names().iter().copied().zip(shapes).collect()
    }
}

impl ModelConfig {
    /// Modules a quantized export keeps float whatever the recipe says (transformers' names):
    /// each Mamba mixer's `dt_proj`, whose input is the low-rank time step (`hidden / 16`
    /// channels, rarely a multiple of a group) and whose error the softplus and the exponential
    /// decay amplify; DeBERTa-v2's projections of its relative embeddings (its position
    /// projections, or with `share_att_key` the key and query projections), whose input is a
    /// constant: OpenVINO 2026.4 fails to compile a compressed weight applied to one. Named
    /// under each root the family's checkpoints use (a sentence-transformers folder saves the
    /// bare encoder, without its class's prefix).
    pub fn kept_float(&self) -> Result<Vec<String>> {
        let layout = self.family()?.layout;
        let mut kept = vec![];
        for root in layout.roots {
            self.kept_float_under(&layout, root, &mut kept);
        }
        Ok(kept)
    }

    fn kept_float_under(&self, layout: &Layout, root: &str, kept: &mut Vec<String>) {
        let layer = |i: usize, module: &str| format!("{root}{}.{i}.{module}", layout.layers);
        if let Some(mixer) = layout.ssm {
            let mamba = self.layers.iter().enumerate().filter(|(_, l)| matches!(l.mixer, Mixer::Mamba(_)));
            kept.extend(mamba.map(|(i, _)| layer(i, &format!("{mixer}.dt_proj"))));
        }
        let disentangled = self.encoder.as_ref().and_then(|e| e.disentangled);
        // (the graph refuses disentangled attention over fused projections)
        let names = layout.encoder.and_then(|e| e.disentangled);
        if let (Some(d), Some(names), Projections::Separate { q, k, .. }) = (disentangled, names, layout.attention.qkv)
        {
            let modules = if d.share_att_key { [k, q] } else { [names.pos_key, names.pos_query] };
            for i in 0..self.num_hidden_layers {
                for (module, _) in modules.iter().zip([d.c2p, d.p2c]).filter(|(_, on)| *on) {
                    kept.push(layer(i, &format!("{}.{module}", layout.attention.prefix)));
                }
            }
        }
    }

    /// Whether some layer's recurrence runs over the sequence (a scan: Mamba, Mamba2), which a
    /// format without a loop lowering can only unroll over a fixed length.
    pub fn scans(&self) -> bool {
        let scans = |m: &Mixer| {
            matches!(m, Mixer::Mamba(_) | Mixer::Mamba2(_) | Mixer::AttentionAndMamba2(..) | Mixer::GatedDeltaNet(_))
        };
        self.layers.iter().any(|l| scans(&l.mixer))
    }

    /// Whether some layer keeps a recurrent state (its cache does not grow with the position).
    pub fn recurrent(&self) -> bool {
        let recurrent = |m: &Mixer| !matches!(m, Mixer::Attention(_) | Mixer::LatentAttention(_));
        self.layers.iter().any(|l| recurrent(&l.mixer))
    }

    /// The width of the token embeddings: `embed_dim` where it differs, else the hidden size.
    pub fn embed_width(&self) -> usize {
        self.embed_dim.unwrap_or(self.hidden_size)
    }

    /// The window of the sliding layers; `None` when no layer slides.
    pub fn sliding_window(&self) -> Option<usize> {
        self.layers.iter().filter_map(LayerSpec::attention).find_map(|a| match a.span {
            Span::Sliding(w) => Some(w),
            Span::Full | Span::Chunked(_) => None,
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
    (heads, mlps): (&[Heads], &[DenseMlp]),
) -> Result<Vec<LayerSpec>> {
    let n = dims.num_hidden_layers;
    if let Some(rule @ SsmRule { layers: SsmLayers::Every, .. }) = schema.ssm {
        let mixer = ssm_mixer(f, rule, dims)?;
        return Ok(mlps.iter().map(|&dense| LayerSpec { mixer: mixer.clone(), mlp: LayerMlp::None, dense }).collect());
    }
    let (types, window) = parse_layers(f, schema, n)?;
    let spans: Vec<Span> = types
        .iter()
        .map(|t| match (t, window) {
            (LayerType::Sliding, Some(w)) => Span::Sliding(w),
            (LayerType::Chunked, Some(n)) => Span::Chunked(n),
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
        let latent = latent_spec(f, schema, &rule, dims, rope)?;
        let layer = |i: usize| LayerSpec {
            mixer: Mixer::LatentAttention(latent.clone()),
            mlp: LayerMlp::dense_or_sparse(sparse.get(i).copied().unwrap_or(false)),
            dense: mlps[i],
        };
        return Ok((0..n).map(layer).collect());
    }
    let scales = attention_scales(f, schema, dims)?;
    let temperature = nope_temperature(f, schema)?;
    let kv_sources = kv_sources(f, schema.kv_sharing, &types)?;
    let widened = wide_shared_mlp(f, schema.kv_sharing)?;
    let values_from_keys = match schema.values_from_keys {
        Some(key) => f.bool(key)?.unwrap_or(false),
        None => false,
    };
    let recurrent = match schema.ssm {
        Some(rule @ SsmRule { layers: SsmLayers::LayerTypes { kind, attention }, .. }) => {
            hybrid_layers(f, n, (kind, Attends::Listed(attention)), &ssm_mixer(f, rule, dims)?)?
        }
        Some(rule @ SsmRule { layers: SsmLayers::Interval { kind, interval }, .. }) => {
            hybrid_layers(f, n, (kind, Attends::Every(interval)), &ssm_mixer(f, rule, dims)?)?
        }
        _ => vec![None; n],
    };
    // beside every layer's attention (only a Mamba2 mixer is read so: `SsmMixer` of Falcon-H1)
    let parallel = match schema.ssm {
        Some(rule @ SsmRule { layers: SsmLayers::Parallel, .. }) => Some(ssm_mixer(f, rule, dims)?),
        _ => None,
    };
    let specs = spans.iter().enumerate().map(|(i, &span)| {
        let layer_rope = match span {
            Span::Sliding(_) => sliding_rope.unwrap_or(rope),
            Span::Full | Span::Chunked(_) => rope,
        };
        let attention = AttentionSpec {
            heads: dims.num_attention_heads,
            kv_heads: heads[i].kv_heads,
            head_dim: heads[i].head_dim,
            span,
            rope: rotary[i].then(|| layer_rope.clone()),
            scale: scales[i],
            alibi,
            query_scale: temperature.filter(|_| !rotary[i]),
            kv_source: kv_sources[i],
            values_from_keys: values_from_keys && types[i] == LayerType::Full,
        };
        let times = if kv_sources[i].is_some() && widened { 2 } else { 1 };
        let dense = DenseMlp { width: times * mlps[i].width, ..mlps[i] };
        let mlp = match (sparse.get(i).copied().unwrap_or(false), schema.moe.is_some_and(|m| m.beside_dense)) {
            (true, true) => LayerMlp::DenseAndSparse,
            (sparse, _) => LayerMlp::dense_or_sparse(sparse),
        };
        let mixer = match (&recurrent[i], parallel.clone()) {
            (_, Some(Mixer::Mamba2(m))) => Mixer::AttentionAndMamba2(attention, m),
            (Some(mixer), _) => mixer.clone(),
            (None, _) => Mixer::Attention(attention),
        };
        LayerSpec { mixer, mlp, dense }
    });
    Ok(specs.collect())
}

/// A latent-attention layer as `DeepseekV2Attention` reads its config: the ranks and per-head
/// sizes with the class defaults (`q_lora_rank` null: one query projection), the rotary over
/// the `qk_rope_head_dim` channels (`dims.head_dim`), and the score scale with yarn's
/// `mscale_all_dim` correction.
fn latent_spec(
    f: &Fields,
    schema: &ConfigSchema,
    rule: &LatentRule,
    dims: &Dims,
    rope: &RopeConfig,
) -> Result<LatentSpec> {
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
        query_scale: if rule.llama4_query_scale { Some(llama4_query_scale(f, schema)?) } else { None },
    })
}

/// Llama 4's temperature of the queries of the layers without rope ([`RopeRule::NoRopeLayersTuned`]),
/// `None` without `attn_temperature_tuning` or for another rope rule.
fn nope_temperature(f: &Fields, schema: &ConfigSchema) -> Result<Option<QueryScale>> {
    if schema.rope != RopeRule::NoRopeLayersTuned || !f.bool("attn_temperature_tuning")?.unwrap_or(true) {
        return Ok(None);
    }
    let beta = f.number("attn_scale")?.unwrap_or(0.1);
    let divisor = f.size("floor_scale", Some(8192), MAX_POSITIONS)?;
    Ok(Some(QueryScale { beta, divisor, offset: 1 }))
}

/// Mistral 4's query scaling: `llama_4_scaling_beta` and `original_max_position_embeddings` of
/// the rope dict, both required (transformers' attention reads them unconditionally).
fn llama4_query_scale(f: &Fields, schema: &ConfigSchema) -> Result<QueryScale> {
    let missing = |key: &str| {
        f.err(
            rope_dict(f).ok().flatten().map_or("rope_parameters", |(name, _)| name),
            format!("has no `{key}`, which this architecture's attention scales its queries with"),
        )
    };
    let beta = rope_dict_number(f, schema, "llama_4_scaling_beta")?.ok_or_else(|| missing("llama_4_scaling_beta"))?;
    let key = "original_max_position_embeddings";
    let divisor = rope_dict_number(f, schema, key)?.ok_or_else(|| missing(key))?;
    if !(divisor >= 1.0 && divisor.fract() == 0.0 && beta.is_finite()) {
        return Err(f.err(key, format!("{divisor} must be a positive integer (with a finite llama_4_scaling_beta)")));
    }
    Ok(QueryScale { beta, divisor: divisor as usize, offset: 0 })
}

/// A Mamba mixer as `MambaConfig` reads its keys, with the class defaults.
fn mamba_spec(f: &Fields, dims: &Dims) -> Result<MambaSpec> {
    let hidden = dims.hidden_size;
    let expand = f.size("expand", Some(2), MAX_HIDDEN)?;
    let inner = expand.checked_mul(hidden).filter(|&w| w <= MAX_INTERMEDIATE).ok_or_else(|| {
        f.err("expand", format!("{expand} times hidden_size {hidden} exceeds {MAX_INTERMEDIATE} channels"))
    })?;
    let conv_kernel = conv_kernel(f, ("conv_kernel", 4))?;
    let dt_rank = match f.raw("time_step_rank") {
        None | Some(Value::Null) => hidden.div_ceil(16),
        Some(Value::String(s)) if s == "auto" => hidden.div_ceil(16),
        Some(_) => f.size("time_step_rank", None, MAX_HIDDEN)?,
    };
    Ok(MambaSpec {
        inner,
        state: f.size("state_size", Some(16), MAX_HEAD_DIM)?,
        conv_kernel,
        dt_rank,
        conv_bias: f.bool("use_conv_bias")?.unwrap_or(true),
        bias: f.bool("use_bias")?.unwrap_or(false),
    })
}

/// The state-space mixer `rule` reads.
fn ssm_mixer(f: &Fields, rule: SsmRule, dims: &Dims) -> Result<Mixer> {
    Ok(match rule.mixer {
        SsmMixer::Mamba => Mixer::Mamba(mamba_spec(f, dims)?),
        SsmMixer::Mamba2(keys) => Mixer::Mamba2(mamba2_spec(f, keys, dims)?),
        SsmMixer::GatedDeltaNet(projections) => Mixer::GatedDeltaNet(delta_net_spec(f, projections)?),
        SsmMixer::ShortConv => Mixer::ShortConv(ShortConvSpec {
            channels: dims.hidden_size,
            kernel: conv_kernel(f, ("conv_L_cache", 3))?,
            bias: f.bool("conv_bias")?.unwrap_or(false),
        }),
    })
}

/// Which layers of a hybrid attend when `layer_types` does not say.
#[derive(Debug, Clone, Copy)]
enum Attends {
    /// Those the key lists (absent: every layer); no key: none.
    Listed(Option<&'static str>),
    /// Every `interval`-th (the key and its class default).
    Every((&'static str, usize)),
}

/// A hybrid's layers: `mixer` where `layer_types` names `kind`, `None` (attention) where it
/// names `full_attention`; without `layer_types`, attention where `attends` says.
fn hybrid_layers(f: &Fields, n: usize, (kind, attends): (&str, Attends), mixer: &Mixer) -> Result<Vec<Option<Mixer>>> {
    let kinds = match (explicit_layer_types(f, n)?, attends) {
        (Some(kinds), _) => kinds,
        (None, Attends::Listed(None)) => vec![kind.to_string(); n],
        (None, Attends::Every((key, default))) => {
            let every = f.size(key, Some(default), MAX_LAYERS)?;
            (0..n).map(|i| if (i + 1) % every == 0 { "full_attention" } else { kind }.to_string()).collect()
        }
        (None, Attends::Listed(Some(key))) => {
            let listed = match f.raw(key) {
                None | Some(Value::Null) => (0..n as i64).collect(),
                Some(Value::Array(list)) => list
                    .iter()
                    .map(|v| v.as_i64().filter(|i| (0..n as i64).contains(i)))
                    .collect::<Option<Vec<i64>>>()
                    .ok_or_else(|| f.err(key, format!("must list layer indices below {n}")))?,
                Some(v) => return Err(f.err(key, format!("must be a list of layer indices, got {}", describe(v)))),
            };
            (0..n as i64).map(|i| if listed.contains(&i) { "full_attention" } else { kind }.to_string()).collect()
        }
    };
    let layer = |(i, k): (usize, &String)| match k.as_str() {
        "full_attention" => Ok(None),
        k if k == kind => Ok(Some(mixer.clone())),
        other => Err(f.err(
            "layer_types",
            format!("entry {i} is `{other}`, which is not supported (supported: {kind}, full_attention)"),
        )),
    };
    kinds.iter().enumerate().map(layer).collect()
}

/// A gated DeltaNet as `Qwen3NextConfig` / `Qwen3_5TextConfig` read its keys, with their
/// class defaults; the value heads must be a multiple of the key heads (they repeat).
fn delta_net_spec(f: &Fields, projections: DeltaNetProjections) -> Result<DeltaNetSpec> {
    let key_heads = f.size("linear_num_key_heads", Some(16), MAX_HEADS)?;
    let value_heads = f.size("linear_num_value_heads", Some(32), MAX_HEADS)?;
    if !value_heads.is_multiple_of(key_heads) {
        return Err(f.err(
            "linear_num_value_heads",
            format!("{value_heads} is not a multiple of linear_num_key_heads ({key_heads})"),
        ));
    }
    Ok(DeltaNetSpec {
        key_heads,
        value_heads,
        key_dim: f.size("linear_key_head_dim", Some(128), MAX_HEAD_DIM)?,
        value_dim: f.size("linear_value_head_dim", Some(128), MAX_HEAD_DIM)?,
        conv_kernel: conv_kernel(f, ("linear_conv_kernel_dim", 4))?,
        projections,
    })
}

/// The convolution's taps under `key` (class default `default`): at least two, one carried.
fn conv_kernel(f: &Fields, (key, default): (&str, usize)) -> Result<usize> {
    let k = f.size(key, Some(default), MAX_HIDDEN)?;
    if k < 2 {
        return Err(f.err(key, format!("{k} is not supported (at least 2 taps)")));
    }
    Ok(k)
}

/// A Mamba2 mixer as its config class reads `keys`, with the class defaults and the
/// `validate_architecture` check (`hidden_size * expand == heads * head_dim`; an `"auto"` head
/// size is that quotient).
fn mamba2_spec(f: &Fields, keys: &Mamba2Keys, dims: &Dims) -> Result<Mamba2Spec> {
    let heads = f.size(keys.heads.0, Some(keys.heads.1), MAX_HEADS)?;
    let expand = f.size(keys.expand.0, Some(keys.expand.1), MAX_HIDDEN)?;
    let inner = match keys.inner.map(|k| (k, f.raw(k))) {
        None | Some((_, None | Some(Value::Null))) => {
            dims.hidden_size.checked_mul(expand).filter(|&w| w <= MAX_INTERMEDIATE)
        }
        Some((key, Some(_))) => Some(f.size(key, None, MAX_INTERMEDIATE)?),
    };
    let head_dim = match (f.raw(keys.head_dim.0), keys.head_dim.1) {
        (None | Some(Value::Null), None) => inner.map_or(0, |w| w / heads),
        (Some(Value::String(s)), _) if s == "auto" => inner.map_or(0, |w| w / heads),
        (_, default) => f.size(keys.head_dim.0, default, MAX_HEAD_DIM)?,
    };
    if inner.is_none() || inner != heads.checked_mul(head_dim) {
        let width = match inner.zip(keys.inner) {
            Some((w, key)) if f.raw(key).is_some_and(|v| !v.is_null()) => format!("{key} ({w})"),
            _ => format!("hidden_size * {} ({} * {expand})", keys.expand.0, dims.hidden_size),
        };
        return Err(f.err(
            keys.heads.0,
            format!("{width} must equal {} * {} ({heads} * {head_dim})", keys.heads.0, keys.head_dim.0),
        ));
    }
    let groups = f.size(keys.groups.0, Some(keys.groups.1), MAX_HEADS)?;
    let bias = f.bool(keys.bias.0)?.unwrap_or(keys.bias.1);
    if !heads.is_multiple_of(groups) {
        return Err(f.err(keys.groups.0, format!("{groups} does not divide {} ({heads})", keys.heads.0)));
    }
    Ok(Mamba2Spec {
        heads,
        head_dim,
        groups,
        state: f.size(keys.state.0, Some(keys.state.1), MAX_HEAD_DIM)?,
        conv_kernel: conv_kernel(f, keys.conv_kernel)?,
        conv_bias: f.bool(keys.conv_bias.0)?.unwrap_or(keys.conv_bias.1),
        bias,
        out_bias: match keys.out_bias {
            Some((key, default)) => f.bool(key)?.unwrap_or(default),
            None => bias,
        },
        norm: gated_norm(f, keys.norm)?,
        dt_limit: time_step_limit(f)?,
    })
}

/// Where the gated norm is, as `keys` read it (`None`: always there, after the gate).
fn gated_norm(f: &Fields, keys: Option<GatedNormKeys>) -> Result<GatedNorm> {
    let Some(GatedNormKeys { enabled, before_gate }) = keys else { return Ok(GatedNorm::AfterGate) };
    Ok(match (f.bool(enabled.0)?.unwrap_or(enabled.1), f.bool(before_gate.0)?.unwrap_or(before_gate.1)) {
        (false, _) => GatedNorm::None,
        (true, true) => GatedNorm::BeforeGate,
        (true, false) => GatedNorm::AfterGate,
    })
}

/// `time_step_limit`: two numbers, either of which may be transformers' encoding of an
/// infinity (`{"__float__": "Infinity"}`); the class default `(0, inf)`.
fn time_step_limit(f: &Fields) -> Result<(f64, f64)> {
    let key = "time_step_limit";
    let number = |v: &Value| match v {
        Value::Number(n) => n.as_f64(),
        Value::Object(o) => match o.get("__float__").and_then(Value::as_str) {
            Some("Infinity") => Some(f64::INFINITY),
            Some("-Infinity") => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    };
    match f.raw(key) {
        None | Some(Value::Null) => Ok((0.0, f64::INFINITY)),
        Some(Value::Array(pair)) => match pair.iter().map(number).collect::<Option<Vec<f64>>>().as_deref() {
            Some(&[lo, hi]) if lo <= hi => Ok((lo, hi)),
            _ => Err(
                f.err(key, format!("must be two numbers (low <= high), got {}", describe(&Value::Array(pair.clone()))))
            ),
        },
        Some(v) => Err(f.err(key, format!("must be two numbers (low <= high), got {}", describe(v)))),
    }
}
