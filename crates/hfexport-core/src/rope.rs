//! Rotary position embedding parameters and inverse frequencies, as transformers defines them
//! (`modeling_rope_utils.py`: default, linear, dynamic, llama3, yarn, longrope and proportional
//! rope types).
//!
//! Frequencies are computed in f32 with the same operation order as transformers, so the
//! exported constants equal the buffers of the PyTorch module. Two types depend on the input
//! (the longest position seen, `max(position_ids) + 1`), so the decomposition of the rotary op
//! builds their frequencies in the graph: `dynamic` from [`RopeConfig::dynamic_base_exponent`],
//! `longrope` by choosing between the two tables of [`RopeConfig::longrope_inv_freqs`].

use serde::Serialize;

/// Rope scaling, one variant per `rope_type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "rope_type", rename_all = "lowercase")]
pub enum RopeScaling {
    Default,
    Linear {
        factor: f64,
    },
    /// Dynamic NTK: the base grows with the longest position once it passes
    /// `max_position_embeddings`.
    Dynamic {
        factor: f64,
        max_position_embeddings: usize,
    },
    Llama3 {
        factor: f64,
        low_freq_factor: f64,
        high_freq_factor: f64,
        original_max_position_embeddings: usize,
    },
    Yarn {
        factor: f64,
        original_max_position_embeddings: usize,
        beta_fast: f64,
        beta_slow: f64,
        mscale: Option<f64>,
        mscale_all_dim: Option<f64>,
        attention_factor: Option<f64>,
        truncate: bool,
    },
    /// LongRoPE (Phi-3): the inverse frequencies are divided per channel by `short_factor`, or by
    /// `long_factor` once the longest position seen passes `original_max_position_embeddings`
    /// (`dynamic_rope_update`'s `longrope_frequency_update`); cos and sin are multiplied by
    /// `attention_factor` (resolved: see [`RopeScaling::longrope`]).
    LongRope {
        short_factor: Vec<f64>,
        long_factor: Vec<f64>,
        original_max_position_embeddings: usize,
        attention_factor: f64,
    },
    /// Gemma 4's proportional rope: over the whole head (`dim`), the first
    /// `int(partial_rotary_factor * dim // 2)` channel pairs at the default frequencies, the
    /// others at frequency 0 (left as they are), every frequency divided by `factor`.
    Proportional {
        factor: f64,
        partial_rotary_factor: f64,
    },
}

impl RopeScaling {
    /// `longrope` as `_compute_longrope_parameters` resolves it: `factor` is the config's
    /// `factor`, else `max_position_embeddings / original_max_position_embeddings` (the caller
    /// picks); without an explicit `attention_factor` it is `sqrt(1 + ln(factor) / ln(original))`,
    /// or 1 when `factor <= 1`.
    pub fn longrope(
        short_factor: Vec<f64>,
        long_factor: Vec<f64>,
        original_max_position_embeddings: usize,
        factor: f64,
        attention_factor: Option<f64>,
    ) -> RopeScaling {
        let attention_factor = attention_factor.unwrap_or_else(|| {
            if factor <= 1.0 {
                1.0
            } else {
                (1.0 + factor.ln() / (original_max_position_embeddings as f64).ln()).sqrt()
            }
        });
        RopeScaling::LongRope { short_factor, long_factor, original_max_position_embeddings, attention_factor }
    }
}

/// Everything needed to compute cos/sin for a rotary embedding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RopeConfig {
    pub theta: f64,
    /// Number of rotated channels (the head dim for the Llama family).
    pub dim: usize,
    pub scaling: RopeScaling,
}

impl RopeConfig {
    pub fn rope_type(&self) -> &'static str {
        match self.scaling {
            RopeScaling::Default => "default",
            RopeScaling::Linear { .. } => "linear",
            RopeScaling::Dynamic { .. } => "dynamic",
            RopeScaling::Llama3 { .. } => "llama3",
            RopeScaling::Yarn { .. } => "yarn",
            RopeScaling::LongRope { .. } => "longrope",
            RopeScaling::Proportional { .. } => "proportional",
        }
    }

    /// What shape inference checks: a longrope factor list per rotated channel pair.
    pub fn check(&self) -> Result<(), String> {
        if let RopeScaling::LongRope { short_factor, long_factor, .. } = &self.scaling {
            for (name, f) in [("short_factor", short_factor), ("long_factor", long_factor)] {
                if f.len() != self.dim / 2 {
                    return Err(format!(
                        "longrope {name} has {} values, rotary dim {} needs {}",
                        f.len(),
                        self.dim,
                        self.dim / 2
                    ));
                }
            }
        }
        Ok(())
    }

    /// `base ** (arange(0, dim, 2) / dim)` in f32, as transformers computes it.
    fn pos_freqs(&self, base: f32) -> Vec<f32> {
        let dim = self.dim as f32;
        (0..self.dim).step_by(2).map(|i| base.powf(i as f32 / dim)).collect()
    }

    /// The inverse frequencies (`dim / 2` values) at init time, i.e. for positions within
    /// `max_position_embeddings` (for `dynamic` this is the unscaled set, for `longrope` the
    /// short one).
    pub fn inv_freq(&self) -> Vec<f32> {
        let base = self.theta as f32;
        let plain: Vec<f32> = self.pos_freqs(base).iter().map(|p| 1.0 / p).collect();
        match &self.scaling {
            RopeScaling::Default | RopeScaling::Dynamic { .. } => plain,
            RopeScaling::Linear { factor } => plain.iter().map(|f| f / *factor as f32).collect(),
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings } => {
                llama3_inv_freq(&plain, *factor, *low_freq_factor, *high_freq_factor, *original_max_position_embeddings)
            }
            RopeScaling::Yarn { factor, original_max_position_embeddings, beta_fast, beta_slow, truncate, .. } => {
                self.yarn_inv_freq(*factor, *original_max_position_embeddings, *beta_fast, *beta_slow, *truncate)
            }
            RopeScaling::LongRope { short_factor, .. } => self.scaled_inv_freq(short_factor),
            RopeScaling::Proportional { factor, partial_rotary_factor } => {
                let rotated = (partial_rotary_factor * self.dim as f64 / 2.0).floor() as usize;
                let keep = |(i, f): (usize, &f32)| if i < rotated { *f } else { 0.0 };
                plain.iter().enumerate().map(keep).map(|f| f / *factor as f32).collect()
            }
        }
    }

    /// `1 / (ext_factors * base ** (arange(0, dim, 2) / dim))` in f32, longrope's frequencies.
    fn scaled_inv_freq(&self, ext_factors: &[f64]) -> Vec<f32> {
        let pos = self.pos_freqs(self.theta as f32);
        pos.iter().zip(ext_factors).map(|(p, e)| 1.0 / (*e as f32 * p)).collect()
    }

    /// For `longrope`: `(short, long, original_max_position_embeddings)`, the inverse frequencies
    /// used while `max(position_ids) + 1 <= original_max_position_embeddings`, those used past
    /// it, and that bound.
    pub fn longrope_inv_freqs(&self) -> Option<(Vec<f32>, Vec<f32>, usize)> {
        match &self.scaling {
            RopeScaling::LongRope { short_factor, long_factor, original_max_position_embeddings, .. } => Some((
                self.scaled_inv_freq(short_factor),
                self.scaled_inv_freq(long_factor),
                *original_max_position_embeddings,
            )),
            _ => None,
        }
    }

    /// The factor cos and sin are multiplied by (`attention_scaling` in transformers).
    pub fn attention_scaling(&self) -> f32 {
        match &self.scaling {
            RopeScaling::Yarn { factor, mscale, mscale_all_dim, attention_factor, .. } => {
                if let Some(a) = attention_factor {
                    return *a as f32;
                }
                let get = |scale: f64, m: f64| {
                    if scale <= 1.0 {
                        1.0
                    } else {
                        0.1 * m * scale.ln() + 1.0
                    }
                };
                match (mscale, mscale_all_dim) {
                    (Some(m), Some(ma)) if *m != 0.0 && *ma != 0.0 => (get(*factor, *m) / get(*factor, *ma)) as f32,
                    _ => get(*factor, 1.0) as f32,
                }
            }
            RopeScaling::LongRope { attention_factor, .. } => *attention_factor as f32,
            _ => 1.0,
        }
    }

    /// For `dynamic` rope: `(factor, max_position_embeddings, dim / (dim - 2))`, the constants of
    /// `base' = base * ((factor * L / max_pos) - (factor - 1)) ** (dim / (dim - 2))` where
    /// `L = max(max(position_ids) + 1, max_pos)`.
    pub fn dynamic_base_exponent(&self) -> Option<(f32, f32, f32)> {
        match &self.scaling {
            RopeScaling::Dynamic { factor, max_position_embeddings } => {
                Some((*factor as f32, *max_position_embeddings as f32, self.dim as f32 / (self.dim as f32 - 2.0)))
            }
            _ => None,
        }
    }

    fn yarn_inv_freq(&self, factor: f64, orig_max: usize, beta_fast: f64, beta_slow: f64, truncate: bool) -> Vec<f32> {
        let dim = self.dim as f64;
        let base = self.theta;
        let correction_dim =
            |rot: f64| (dim * (orig_max as f64 / (rot * 2.0 * std::f64::consts::PI)).ln()) / (2.0 * base.ln());
        let (mut low, mut high) = (correction_dim(beta_fast), correction_dim(beta_slow));
        if truncate {
            low = low.floor();
            high = high.ceil();
        }
        let (low, mut high) = (low.max(0.0), high.min(dim - 1.0));
        if low == high {
            high += 0.001;
        }
        let pos = self.pos_freqs(base as f32);
        pos.iter()
            .enumerate()
            .map(|(i, p)| {
                let extrapolation = 1.0 / p;
                let interpolation = 1.0 / (factor as f32 * p);
                let ramp = ((i as f32 - low as f32) / (high as f32 - low as f32)).clamp(0.0, 1.0);
                let extra_factor = 1.0 - ramp;
                interpolation * (1.0 - extra_factor) + extrapolation * extra_factor
            })
            .collect()
    }
}

fn llama3_inv_freq(plain: &[f32], factor: f64, low: f64, high: f64, old_ctx: usize) -> Vec<f32> {
    let old_ctx = old_ctx as f32;
    let (factor, low, high) = (factor as f32, low as f32, high as f32);
    let low_freq_wavelen = old_ctx / low;
    let high_freq_wavelen = old_ctx / high;
    plain
        .iter()
        .map(|&f| {
            let wavelen = 2.0 * std::f32::consts::PI / f;
            let scaled = if wavelen > low_freq_wavelen { f / factor } else { f };
            let smooth = (old_ctx / wavelen - low) / (high - low);
            let smoothed = (1.0 - smooth) * scaled / factor + smooth * scaled;
            // written as transformers writes it: `~(wavelen < high) * ~(wavelen > low)`
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            let medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
            if medium {
                smoothed
            } else {
                scaled
            }
        })
        .collect()
}
