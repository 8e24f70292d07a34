//! Biases, mixture-of-experts settings and the stored dtype.

use super::*;

/// The q/k/v, output, MLP, norm and head biases as the family's class reads them.
pub(super) fn parse_biases(f: &Fields, schema: &ConfigSchema) -> Result<(bool, bool, bool, bool, bool)> {
    let b = &schema.biases;
    Ok((flag(f, b.qkv)?, flag(f, b.o)?, flag(f, b.mlp)?, flag(f, b.norm)?, flag(f, b.head)?))
}

/// A boolean setting as the family's class reads it.
pub(super) fn flag(f: &Fields, flag: Flag) -> Result<bool> {
    Ok(match flag {
        Flag::Key(key) => f.bool(key)?.unwrap_or(false),
        Flag::KeyDefault(key, default) => f.bool(key)?.unwrap_or(default),
        Flag::Always => true,
        Flag::Never => false,
    })
}

/// What the MLP of a parallel block reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParallelMlpInput {
    /// The attention's normed input (Phi, StableLM: one norm feeds both).
    AttentionInput,
    /// Its own norm of the residual stream (GPT-NeoX's `post_attention_layernorm`).
    OwnNorm,
}

/// Whether the layers are parallel blocks, as the family's class decides.
pub(super) fn parallel_block(f: &Fields, schema: &ConfigSchema) -> Result<Option<ParallelMlpInput>> {
    if falcon_new_decoder(f, schema)? {
        // FalconDecoderLayer builds no norm the forward reads without `parallel_attn`
        if f.bool("parallel_attn")? == Some(false) {
            return Err(f.err("parallel_attn", "false with new_decoder_architecture is not supported"));
        }
        return Ok(Some(match f.int("num_ln_in_parallel_attn")? {
            Some(1) => ParallelMlpInput::AttentionInput,
            None | Some(2) => ParallelMlpInput::OwnNorm,
            Some(n) => return Err(f.err("num_ln_in_parallel_attn", format!("{n} is not supported (1 or 2)"))),
        }));
    }
    let Some(p) = schema.parallel else { return Ok(None) };
    let on = flag(f, p.when)?;
    let input = if p.own_mlp_norm { ParallelMlpInput::OwnNorm } else { ParallelMlpInput::AttentionInput };
    Ok(on.then_some(input))
}

/// The MoE keys as the family's config class reads them, and per layer whether its MLP is the
/// sparse one. Qwen's `num_experts` of 0 (or every layer listed in `mlp_only_layers`) leaves a
/// dense model: no config and no sparse layer.
pub(super) fn parse_moe(f: &Fields, schema: &ConfigSchema, dims: &Dims) -> Result<(Option<MoeConfig>, Vec<bool>)> {
    let Some(m) = schema.moe else { return Ok((None, vec![])) };
    let key = m.experts_keys.iter().copied().find(|k| f.raw(k).is_some_and(|v| !v.is_null()));
    let num_experts = match key {
        Some(k) if f.int(k)? == Some(0) && (m.layers == MoeLayers::SparseStep || m.zero_experts_dense) => 0,
        Some(k) => f.size(k, None, MAX_EXPERTS)?,
        None => m.default_experts,
    };
    let n = dims.num_hidden_layers;
    if num_experts == 0 && m.zero_experts_dense {
        return Ok((None, vec![]));
    }
    let sparse_layers: Vec<bool> = match m.layers {
        MoeLayers::Every => vec![true; n],
        MoeLayers::FirstDense(key, default) => {
            let dense = match f.int(key)? {
                None => default,
                Some(k) if (0..=MAX_LAYERS as i64).contains(&k) => k as usize,
                Some(k) => return Err(f.err(key, format!("{k} is not a layer count"))),
            };
            (0..n).map(|i| i >= dense).collect()
        }
        MoeLayers::SparseStep => {
            let step = f.size("decoder_sparse_step", Some(1), MAX_LAYERS)?;
            let dense = mlp_only_layers(f)?;
            (0..n).map(|i| num_experts > 0 && !dense.contains(&(i as i64)) && (i + 1) % step == 0).collect()
        }
        MoeLayers::Interval { interval, start, end } => {
            let interval = f.size("moe_layer_interval", Some(interval), MAX_LAYERS)?;
            let start = f.int("moe_layer_start_index")?.unwrap_or(start as i64);
            let end = match f.int("moe_layer_end_index")?.unwrap_or(end) {
                -1 => n as i64 - 1,
                end => end,
            };
            (0..n).map(|i| (i + 1) % interval == 0 && (start..=end).contains(&(i as i64))).collect()
        }
        MoeLayers::WhenKey(key) => vec![f.bool(key)?.unwrap_or(false); n],
        MoeLayers::ListedOrStep => match f.raw("moe_layers") {
            None | Some(Value::Null) => {
                let step = f.size("interleave_moe_layer_step", Some(1), MAX_LAYERS)?;
                (0..n).map(|i| (i + 1) % step == 0).collect()
            }
            Some(_) => {
                let listed = layer_list(f, "moe_layers")?;
                (0..n).map(|i| listed.contains(&(i as i64))).collect()
            }
        },
    };
    if !sparse_layers.contains(&true) {
        return Ok((None, vec![]));
    }
    let experts_key = key.unwrap_or(m.experts_keys[0]);
    if num_experts == 0 {
        // a class default of none (Gemma 4's): required once a layer is sparse
        return Err(f.err(experts_key, "is missing (the sparse layers need their expert count)"));
    }
    // a class default of 0: none (DeepSeek-V2's null, which transformers cannot route with)
    let top_k = f.size("num_experts_per_tok", (m.default_top_k > 0).then_some(m.default_top_k), MAX_EXPERTS)?;
    if top_k > num_experts {
        return Err(
            f.err("num_experts_per_tok", format!("{top_k} is more than the {num_experts} experts ({experts_key})"))
        );
    }
    let intermediate_size = match m.intermediate {
        // a class default of 0: none, the key is required
        Some((key, default)) => f.size(key, (default > 0).then_some(default), MAX_INTERMEDIATE)?,
        None => dims.intermediate_size,
    };
    let normalize = match m.normalize {
        NormTopK::Key(default) => f.bool("norm_topk_prob")?.unwrap_or(default),
        NormTopK::Always => true,
    };
    let shared_expert_intermediate_size = match m.shared_expert {
        Some(SharedSize::Key(key, default)) if f.int(key)?.unwrap_or(default as i64) != 0 => {
            Some(f.size(key, Some(default), MAX_INTERMEDIATE)?)
        }
        // DeepSeek builds its shared MLP whatever the count: of width 0 it still adds the down
        // projection's bias (with `mlp_bias`)
        Some(SharedSize::Experts(key, default)) => match f.int(key)? {
            Some(0) => Some(0),
            _ => Some(f.size(key, Some(default), MAX_EXPERTS)? * intermediate_size),
        },
        Some(SharedSize::ExpertsIfAny(key, default)) => match f.int(key)? {
            Some(0) => None,
            _ => Some(f.size(key, Some(default), MAX_EXPERTS)? * intermediate_size),
        },
        _ => None,
    };
    let routing = routing(f, &m, (num_experts, top_k), normalize)?;
    let clamped_swiglu = match m.glu {
        MoeGlu::Activation => None,
        MoeGlu::Clamped { alpha, limit } => {
            let clamp = finite_or(f, limit)?;
            if clamp <= 0.0 {
                return Err(f.err(limit.0, format!("{clamp} must be positive (the clamp of the experts' SwiGLU)")));
            }
            Some((finite_or(f, alpha)?, clamp))
        }
    };
    let moe = MoeConfig {
        num_experts,
        top_k,
        intermediate_size,
        routing,
        shared_expert_intermediate_size,
        clamped_swiglu,
        biased: m.biased,
        weigh_input: m.routing == RoutingRule::SigmoidInput,
    };
    Ok((Some(moe), sparse_layers))
}

/// How the config's experts are chosen ([`RoutingRule`]): DeepSeek's groups checked against the
/// expert count and `num_experts_per_tok`, as its router would fail on them.
fn routing(f: &Fields, m: &MoeSchema, (experts, top_k): (usize, usize), normalize: bool) -> Result<Routing> {
    let (score, groups, top_groups, normalize, scale_default) = match m.routing {
        RoutingRule::Softmax => return Ok(Routing::Softmax { normalize }),
        RoutingRule::DeepSeekV2 => {
            let (groups, top_groups) = match f.string("topk_method")?.unwrap_or("greedy") {
                "greedy" => (1, 1),
                "group_limited_greedy" => {
                    (f.size("n_group", None, MAX_EXPERTS)?, f.size("topk_group", None, MAX_EXPERTS)?)
                }
                other => {
                    return Err(
                        f.err("topk_method", format!("`{other}` is not supported (greedy, group_limited_greedy)"))
                    )
                }
            };
            (RouterScore::Softmax, groups, top_groups, false, 1.0)
        }
        RoutingRule::Grouped { score, groups, top_groups, scale } => {
            let groups = f.size("n_group", Some(groups), MAX_EXPERTS)?;
            (score, groups, f.size("topk_group", Some(top_groups), MAX_EXPERTS)?, normalize, scale)
        }
        RoutingRule::SoftmaxCorrected => {
            let score = RouterScore::SoftmaxCorrected;
            return Ok(Routing::Grouped { score, groups: 1, top_groups: 1, normalize: true, scale: 1.0 });
        }
        RoutingRule::SigmoidInput => {
            let score = RouterScore::Sigmoid;
            return Ok(Routing::Grouped { score, groups: 1, top_groups: 1, normalize: false, scale: 1.0 });
        }
    };
    if groups == 0 || !experts.is_multiple_of(groups) {
        return Err(f.err("n_group", format!("{groups} does not divide the {experts} experts into equal groups")));
    }
    if score.group_by_two() && experts / groups < 2 {
        return Err(f.err("n_group", format!("{groups} groups of {experts} experts: a group needs two experts")));
    }
    if top_groups == 0 || top_groups > groups {
        return Err(f.err("topk_group", format!("{top_groups} is not in 1..={groups} (n_group)")));
    }
    if top_k > top_groups * (experts / groups) {
        return Err(f.err(
            "num_experts_per_tok",
            format!(
                "{top_k} is more than the {} experts of the topk_group best groups",
                top_groups * (experts / groups)
            ),
        ));
    }
    let scale = finite_or(f, ("routed_scaling_factor", scale_default))?;
    Ok(Routing::Grouped { score, groups, top_groups, normalize, scale: scale as f32 })
}

/// The number at `key`, its class default when absent or null.
fn finite_or(f: &Fields, (key, default): (&str, f64)) -> Result<f64> {
    Ok(f.number(key)?.unwrap_or(default))
}

/// `mlp_only_layers`: null or absent is none; entries are layer indices.
pub(super) fn mlp_only_layers(f: &Fields) -> Result<Vec<i64>> {
    layer_list(f, "mlp_only_layers")
}

/// A list of layer indices at `key` (empty when absent or null).
fn layer_list(f: &Fields, key: &str) -> Result<Vec<i64>> {
    match f.raw(key) {
        None | Some(Value::Null) => Ok(vec![]),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_i64().ok_or_else(|| f.err(key, format!("entry {i} must be an integer, got {}", describe(v))))
            })
            .collect(),
        Some(v) => Err(f.err(key, format!("must be a list, got {}", describe(v)))),
    }
}

/// `dtype` wins over the older `torch_dtype` unless it is null.
pub(super) fn parse_dtype(f: &Fields) -> Result<Option<DType>> {
    for key in ["dtype", "torch_dtype"] {
        if let Some(name) = f.string(key)? {
            return match name {
                "float32" | "float" => Ok(Some(DType::F32)),
                "float16" | "half" => Ok(Some(DType::F16)),
                "bfloat16" => Ok(Some(DType::BF16)),
                other => Err(f.err(key, format!("`{other}` is not supported (supported: float32, float16, bfloat16)"))),
            };
        }
    }
    Ok(None)
}
