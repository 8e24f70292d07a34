//! State-space mixers (transformers' `MambaMixer` and `Mamba2Mixer`): layers that keep a
//! fixed-size state instead of every position's keys and values.
//!
//! Both project the input to the scan's channels and a gate, run a causal depthwise
//! convolution over channels (its last `conv_kernel - 1` inputs carried from call to call),
//! derive each position's step size `dt` and input/output matrices `B`, `C`, and run the
//! selective scan ([`Op::SelectiveScan`]) from the carried state. Mamba derives `dt`, `B`, `C`
//! from the convolution's output (`x_proj`, `dt_proj`) with a decay per channel and state;
//! Mamba2 convolves them with the input (one `in_proj`), decays per head, shares B and C within
//! each of `n_groups` groups of heads, and ends with a gated RMS norm per group. The
//! convolution is `conv_kernel` shifted slices of the carried inputs and this call's, each
//! times its tap (as Whisper's convolutions are written), so no convolution op has to be
//! lowered in four backends; the scan is one op, whose decomposition is the recurrence itself.
//!
//! A generation graph's cache holds, per layer, `conv` `[1, channels, conv_kernel - 1]` and
//! `ssm` (`[1, inner, state]` for Mamba, `[1, heads, head_dim, state]` for Mamba2), as
//! [`crate::config::LayerSpec::cache`] says; the forward graph starts both at zero, as
//! transformers does without a cache.

use hfexport_core::ops::{Activation, BinaryOp, ReduceKind, UnaryOp};
use hfexport_core::{DType, Dim, Op, Tensor, ValueId};

use crate::config::{DeltaNetSpec, GatedNorm, Mamba2Spec, MambaSpec, ShortConvSpec};
use crate::decoder::{Decoder, Kv, LayerInputs, Vb};
use crate::error::{ModelError, Result};
use crate::schema::DeltaNetProjections;

/// `torch.nn.functional.softplus`'s default threshold: above it, softplus is the input.
const SOFTPLUS_THRESHOLD: f32 = 20.0;

/// The convolution of a mixer: its channels, taps and bias, whether the config's activation
/// follows (Mamba's; LFM2's has none), and whether its output's padding positions are zeroed
/// (Mamba's: the scan reads them).
#[derive(Debug, Clone, Copy)]
struct Conv {
    channels: usize,
    kernel: usize,
    bias: bool,
    activated: bool,
}

impl Decoder<'_> {
    /// The Mamba mixer of layer `layer` (its mixer `Vb`) over `x` `[b, s, hidden]`.
    pub(crate) fn mamba_mixer(
        &mut self,
        vb: &Vb,
        layer: usize,
        m: &MambaSpec,
        x: ValueId,
        s: &LayerInputs,
    ) -> Result<ValueId> {
        let hidden = self.cfg.hidden_size;
        let x = self.mask_padding(&vb.name("masked_input"), x, s)?;
        let proj = self.linear(&vb.pp("in_proj"), 2 * m.inner, hidden, m.bias, x)?;
        let hs = self.cut(vb, "hidden_part", proj, 0, m.inner)?;
        let gate = self.cut(vb, "gate_part", proj, m.inner, m.inner)?;
        let gate = self.op(&vb.name("gate.channels"), Op::Transpose { perm: vec![0, 2, 1] }, &[gate])?;
        let [conv_state, ssm_state] = self.recurrent_states(vb, layer, hs)?;
        let conv = Conv { channels: m.inner, kernel: m.conv_kernel, bias: m.conv_bias, activated: true };
        let (rows, new_conv) = self.causal_conv(&vb.pp("conv1d"), conv, hs, conv_state, s)?;
        let (dt, b, c) = self.mamba_scan_inputs(vb, m, rows)?;
        let a_log = self.weight(vb, "A_log", &[m.inner, m.state])?;
        let a = self.decay_rates(vb, a_log)?;
        let hs = self.op(&vb.name("x.channels"), Op::Transpose { perm: vec![0, 2, 1] }, &[rows])?;
        let (y, new_ssm) = self.scan(vb, [hs, dt, a, b, c], ssm_state)?;
        self.keep_states(layer, vec![new_conv, new_ssm])?;
        // `y + x * D`, gated by `silu(z)`, in f32 (transformers' `D.float()`), back to the dtype
        let d = self.weight(vb, "D", &[m.inner])?;
        let y = self.skip(vb, y, hs, d, m.inner)?;
        let gate = self.cast(&vb.name("gate.f32"), gate, DType::F32)?;
        let z = self.op(&vb.name("gate.silu"), Op::Activate(Activation::Silu), &[gate])?;
        let y = self.op(&vb.name("gated"), Op::Binary(BinaryOp::Mul), &[y, z])?;
        let y = self.op(&vb.name("gated.rows"), Op::Transpose { perm: vec![0, 2, 1] }, &[y])?;
        let y = self.cast(&vb.name("gated.dtype"), y, self.opts.dtype)?;
        self.linear(&vb.pp("out_proj"), hidden, m.inner, m.bias, y)
    }

    /// The Mamba2 mixer of layer `layer` over `x` `[b, s, hidden]`.
    pub(crate) fn mamba2_mixer(
        &mut self,
        vb: &Vb,
        layer: usize,
        m: &Mamba2Spec,
        x: ValueId,
        s: &LayerInputs,
    ) -> Result<ValueId> {
        let (hidden, inner, channels) = (self.cfg.hidden_size, m.inner(), m.conv_channels());
        let mut x = self.mask_padding(&vb.name("masked_input"), x, s)?;
        if let Some(mup) = &self.cfg.mup {
            x = self.scale(&vb.name("input_scaled"), x, mup.ssm_in)?;
        }
        let mut proj = self.linear(&vb.pp("in_proj"), inner + channels + m.heads, hidden, m.bias, x)?;
        if let Some(mup) = self.cfg.mup.clone() {
            proj = self.mup_scaled(vb, m, proj, mup.ssm)?;
        }
        let gate = self.cut(vb, "gate_part", proj, 0, inner)?;
        let xbc = self.cut(vb, "conv_part", proj, inner, channels)?;
        let dt = self.cut(vb, "dt_part", proj, inner + channels, m.heads)?;
        let [conv_state, ssm_state] = self.recurrent_states(vb, layer, xbc)?;
        let conv = Conv { channels, kernel: m.conv_kernel, bias: m.conv_bias, activated: true };
        let (rows, new_conv) = self.causal_conv(&vb.pp("conv1d"), conv, xbc, conv_state, s)?;
        let hs = self.cut(vb, "x_part", rows, 0, inner)?;
        let gn = m.groups * m.state;
        let [b, c] = [("B", inner), ("C", inner + gn)].map(|(name, from)| -> Result<ValueId> {
            let v = self.cut(vb, name, rows, from, gn)?;
            self.by_group(vb, name, v, m.groups, m.state)
        });
        let dt = self.mamba2_steps(vb, m, dt)?;
        // A per head (`-exp(A_log)`), the same for each of its channels and states
        let a_log = self.weight(vb, "A_log", &[m.heads])?;
        let a = self.decay_rates(vb, a_log)?;
        let a = self.per_channel(vb, "A", a, m, Dim::from(m.state))?;
        let hs = self.op(&vb.name("x.channels"), Op::Transpose { perm: vec![0, 2, 1] }, &[hs])?;
        let (y, new_ssm) = self.scan(vb, [hs, dt, a, b?, c?], ssm_state)?;
        self.keep_states(layer, vec![new_conv, new_ssm])?;
        let d = self.weight(vb, "D", &[m.heads])?;
        let d = self.cast(&vb.name("D.f32"), d, DType::F32)?;
        let d = self.per_channel(vb, "D", d, m, Dim::konst(1))?;
        let d = self.op(&vb.name("D.flat"), Op::Reshape { shape: vec![Dim::from(inner)] }, &[d])?;
        let y = self.skip(vb, y, hs, d, inner)?;
        let y = self.op(&vb.name("y.rows"), Op::Transpose { perm: vec![0, 2, 1] }, &[y])?;
        let y = self.gated_group_norm(&vb.pp("norm"), m, y, gate)?;
        let y = self.cast(&vb.name("y.dtype"), y, self.opts.dtype)?;
        self.linear(&vb.pp("out_proj"), hidden, inner, m.out_bias, y)
    }

    /// Falcon-H1's `mup_vector`: the input projection's output `[b, s, inner + channels +
    /// heads]` times `[gate, x, B, C, dt]`'s multipliers, each over its part.
    fn mup_scaled(&mut self, vb: &Vb, m: &Mamba2Spec, proj: ValueId, factors: [f64; 5]) -> Result<ValueId> {
        let (inner, gn) = (m.inner(), m.groups * m.state);
        let widths = [inner, inner, gn, gn, m.heads];
        let values: Vec<f32> =
            widths.iter().zip(factors).flat_map(|(&w, f)| std::iter::repeat_n(f as f32, w)).collect();
        let n = values.len();
        let t = Tensor::float(self.opts.dtype, vec![n], values)?;
        let v = self.op(&vb.name("mup_vector"), Op::Constant(t), &[])?;
        self.op(&vb.name("in_proj.mup"), Op::Binary(BinaryOp::Mul), &[proj, v])
    }

    /// LFM2's gated short convolution of layer `layer` (its `conv` `Vb`) over `x`
    /// `[b, s, hidden]`: `in_proj` gives B, C and x (in that order), `B * x` is convolved after
    /// the carried inputs (no activation), times C, through `out_proj`.
    pub(crate) fn short_conv_mixer(
        &mut self,
        vb: &Vb,
        layer: usize,
        c: &ShortConvSpec,
        x: ValueId,
        s: &LayerInputs,
    ) -> Result<ValueId> {
        let h = c.channels;
        let x = self.mask_padding(&vb.name("masked_input"), x, s)?;
        let bcx = self.linear(&vb.pp("in_proj"), 3 * h, h, c.bias, x)?;
        let [b, gate, x] = [("B", 0), ("C", h), ("x", 2 * h)].map(|(n, from)| self.cut(vb, n, bcx, from, h));
        let bx = self.op(&vb.name("Bx"), Op::Binary(BinaryOp::Mul), &[b?, x?])?;
        let [state] = self.recurrent_states(vb, layer, bx)?;
        let conv = Conv { channels: h, kernel: c.kernel, bias: c.bias, activated: false };
        let (rows, new_state) = self.causal_conv(&vb.pp("conv"), conv, bx, state, s)?;
        self.keep_states(layer, vec![new_state])?;
        let y = self.op(&vb.name("gated"), Op::Binary(BinaryOp::Mul), &[gate?, rows])?;
        self.linear(&vb.pp("out_proj"), h, h, c.bias, y)
    }

    /// The gated DeltaNet of layer `layer` (its `linear_attn` `Vb`) over `x` `[b, s, hidden]`, as
    /// transformers' `Qwen3NextGatedDeltaNet`: q, k, v through a causal convolution (SiLU), q and
    /// k L2-normalised per head (q also scaled by `key_dim ** -0.5`) and repeated to the value
    /// heads, `beta = sigmoid(b)`, `g = -exp(A_log) * softplus(a + dt_bias)`, the delta rule
    /// ([`Op::DeltaScan`]) from the carried state, then per value head the RMS norm times
    /// `silu(z)` and `out_proj`.
    pub(crate) fn gated_delta_net(
        &mut self,
        vb: &Vb,
        layer: usize,
        d: &DeltaNetSpec,
        x: ValueId,
        s: &LayerInputs,
    ) -> Result<ValueId> {
        let (hidden, keys, values, hv) = (self.cfg.hidden_size, d.keys(), d.values(), d.value_heads);
        let x = self.mask_padding(&vb.name("masked_input"), x, s)?;
        let [qkv, z, b, a] = self.delta_net_projections(vb, d, x)?;
        let [conv_state, ssm_state] = self.recurrent_states(vb, layer, qkv)?;
        let conv = Conv { channels: d.conv_channels(), kernel: d.conv_kernel, bias: false, activated: true };
        let (rows, new_conv) = self.causal_conv(&vb.pp("conv1d"), conv, qkv, conv_state, s)?;
        let q = self.cut(vb, "q_part", rows, 0, keys)?;
        let k = self.cut(vb, "k_part", rows, keys, keys)?;
        let v = self.cut(vb, "v_part", rows, 2 * keys, values)?;
        let q = self.delta_net_keys(&vb.pp("q"), d, q, Some((d.key_dim as f64).powf(-0.5)))?;
        let k = self.delta_net_keys(&vb.pp("k"), d, k, None)?;
        let v = self.per_head_f32(&vb.pp("v"), v, [hv, d.value_dim])?;
        let beta = self.cast(&vb.name("b.f32"), b, DType::F32)?;
        let beta = self.op(&vb.name("beta"), Op::Unary(UnaryOp::Sigmoid), &[beta])?;
        let beta = self.op(&vb.name("beta.heads"), Op::Transpose { perm: vec![0, 2, 1] }, &[beta])?;
        let g = self.delta_net_decay(vb, hv, a)?;
        let out = self.g.add_node(&vb.name("delta_rule"), Op::DeltaScan, &[q, k, v, g, beta, ssm_state])?;
        self.keep_states(layer, vec![new_conv, out[1]])?;
        // [b, hv, s, dv] -> [b, s, hv, dv] in the graph's dtype; the norm per head, gated
        let o = self.op(&vb.name("o.rows"), Op::Transpose { perm: vec![0, 2, 1, 3] }, &[out[0]])?;
        let o = self.cast(&vb.name("o.dtype"), o, self.opts.dtype)?;
        let zs = self.g.info(z).shape.clone();
        let heads = vec![zs[0].clone(), zs[1].clone(), Dim::from(hv), Dim::from(d.value_dim)];
        let z = self.op(&vb.name("z.heads"), Op::Reshape { shape: heads }, &[z])?;
        let norm = vb.pp("norm");
        let w = self.weight(&norm, "weight", &[d.value_dim])?;
        let eps = self.cfg.norm_eps as f32;
        let o = self.op(&norm.name("rms"), Op::RmsNorm { eps }, &[o, w])?;
        let z = self.cast(&vb.name("z.f32"), z, DType::F32)?;
        let z = self.op(&vb.name("z.silu"), Op::Activate(Activation::Silu), &[z])?;
        let o = self.cast(&vb.name("o.f32"), o, DType::F32)?;
        let o = self.op(&vb.name("gated"), Op::Binary(BinaryOp::Mul), &[o, z])?;
        let o = self.cast(&vb.name("gated.dtype"), o, self.opts.dtype)?;
        let o = self.op(&vb.name("gated.flat"), Op::Reshape { shape: zs }, &[o])?;
        self.linear(&vb.pp("out_proj"), hidden, values, false, o)
    }

    /// `[q | k | v]` `[b, s, 2 * keys + values]`, `z` `[b, s, values]`, `b` and `a` `[b, s,
    /// value_heads]` from the stored projections: Qwen3.5's four linears, or Qwen3-Next's two
    /// fused ones read with their rows regrouped (per key head `[q | k | v | z]` and `[b | a]`,
    /// to all q, all k, ...).
    fn delta_net_projections(&mut self, vb: &Vb, d: &DeltaNetSpec, x: ValueId) -> Result<[ValueId; 4]> {
        let (hidden, keys, values, hv) = (self.cfg.hidden_size, d.keys(), d.values(), d.value_heads);
        match d.projections {
            DeltaNetProjections::Separate => Ok([
                self.linear(&vb.pp("in_proj_qkv"), 2 * keys + values, hidden, false, x)?,
                self.linear(&vb.pp("in_proj_z"), values, hidden, false, x)?,
                self.linear(&vb.pp("in_proj_b"), hv, hidden, false, x)?,
                self.linear(&vb.pp("in_proj_a"), hv, hidden, false, x)?,
            ]),
            DeltaNetProjections::Fused => {
                let (kh, r) = (d.key_heads, hv / d.key_heads);
                let (dk, dv) = (d.key_dim, d.value_dim);
                let group = 2 * dk + 2 * r * dv;
                // the rows of part `(offset, len)` of every key head's group, head by head
                let part = |group: usize, (offset, len): (usize, usize)| {
                    (0..kh).flat_map(move |h| (h * group + offset)..(h * group + offset + len))
                };
                let parts = [(0, dk), (dk, dk), (2 * dk, r * dv), (2 * dk + r * dv, r * dv)];
                let order: Vec<usize> = parts.iter().flat_map(|&p| part(group, p)).collect();
                let qkvz =
                    self.reordered_linear(&vb.pp("in_proj_qkvz"), [kh * group, hidden], false, Some(&order), x)?;
                let order: Vec<usize> = [(0, r), (r, r)].iter().flat_map(|&p| part(2 * r, p)).collect();
                let ba = self.reordered_linear(&vb.pp("in_proj_ba"), [2 * hv, hidden], false, Some(&order), x)?;
                Ok([
                    self.cut(vb, "qkv_part", qkvz, 0, 2 * keys + values)?,
                    self.cut(vb, "z_part", qkvz, 2 * keys + values, values)?,
                    self.cut(vb, "b_part", ba, 0, hv)?,
                    self.cut(vb, "a_part", ba, hv, hv)?,
                ])
            }
        }
    }

    /// `x` `[b, s, heads * d]` as `[b, heads, s, d]` in f32.
    fn per_head_f32(&mut self, vb: &Vb, x: ValueId, [heads, d]: [usize; 2]) -> Result<ValueId> {
        let x = self.split_heads(vb, x, [heads, d], None)?;
        self.cast(&vb.name("f32"), x, DType::F32)
    }

    /// DeltaNet queries or keys `[b, s, key_heads * key_dim]` as the rule reads them: per head
    /// L2-normalised in f32 (`x * rsqrt(sum(x^2) + 1e-6)`), times `scale` (the queries'), each
    /// key head repeated for its value heads: `[b, value_heads, s, key_dim]`.
    fn delta_net_keys(&mut self, vb: &Vb, d: &DeltaNetSpec, x: ValueId, scale: Option<f64>) -> Result<ValueId> {
        let x = self.per_head_f32(vb, x, [d.key_heads, d.key_dim])?;
        let sq = self.op(&vb.name("square"), Op::Binary(BinaryOp::Mul), &[x, x])?;
        let sum = Op::Reduce { kind: ReduceKind::Sum, axes: vec![3], keep_dims: true };
        let sum = self.op(&vb.name("sum"), sum, &[sq])?;
        let eps = self.op(&vb.name("eps"), Op::Constant(Tensor::scalar_float(DType::F32, 1e-6)), &[])?;
        let sum = self.op(&vb.name("sum_eps"), Op::Binary(BinaryOp::Add), &[sum, eps])?;
        let root = self.op(&vb.name("root"), Op::Unary(UnaryOp::Sqrt), &[sum])?;
        let inv = self.op(&vb.name("rsqrt"), Op::Unary(UnaryOp::Reciprocal), &[root])?;
        let mut x = self.op(&vb.name("l2"), Op::Binary(BinaryOp::Mul), &[x, inv])?;
        if let Some(scale) = scale {
            let c = self.op(&vb.name("scale"), Op::Constant(Tensor::scalar_float(DType::F32, scale as f32)), &[])?;
            x = self.op(&vb.name("scaled"), Op::Binary(BinaryOp::Mul), &[x, c])?;
        }
        let r = d.value_heads / d.key_heads;
        if r == 1 {
            return Ok(x);
        }
        // head i of the values reads key head i / r (`repeat_interleave`)
        let s = self.g.info(x).shape.clone();
        let (kh, dk) = (Dim::from(d.key_heads), Dim::from(d.key_dim));
        let one = vec![s[0].clone(), kh.clone(), Dim::konst(1), s[2].clone(), dk.clone()];
        let x = self.op(&vb.name("heads.column"), Op::Reshape { shape: one }, &[x])?;
        let wide = vec![s[0].clone(), kh, Dim::from(r), s[2].clone(), dk.clone()];
        let x = self.op(&vb.name("heads.repeated"), Op::Expand { shape: wide }, &[x])?;
        let flat = vec![s[0].clone(), Dim::from(d.value_heads), s[2].clone(), dk];
        self.op(&vb.name("heads.values"), Op::Reshape { shape: flat }, &[x])
    }

    /// The log decay `g = -exp(A_log) * softplus(a + dt_bias)` per value head, `[b, heads, s]`
    /// in f32, from `a` `[b, s, heads]`.
    fn delta_net_decay(&mut self, vb: &Vb, heads: usize, a: ValueId) -> Result<ValueId> {
        let a = self.cast(&vb.name("a.f32"), a, DType::F32)?;
        let bias = self.weight(vb, "dt_bias", &[heads])?;
        let bias = self.cast(&vb.name("dt_bias.f32"), bias, DType::F32)?;
        let a = self.op(&vb.name("a.biased"), Op::Binary(BinaryOp::Add), &[a, bias])?;
        let step = self.softplus(&vb.name("a"), a)?;
        let a_log = self.weight(vb, "A_log", &[heads])?;
        let rate = self.decay_rates(vb, a_log)?;
        let g = self.op(&vb.name("g"), Op::Binary(BinaryOp::Mul), &[rate, step])?;
        self.op(&vb.name("g.heads"), Op::Transpose { perm: vec![0, 2, 1] }, &[g])
    }

    /// Channels `from..from + len` of `x` `[b, s, w]` (a part of a fused projection).
    fn cut(&mut self, vb: &Vb, name: &str, x: ValueId, from: usize, len: usize) -> Result<ValueId> {
        let slice = Op::Slice { axis: 2, start: Dim::from(from), end: Dim::from(from + len) };
        self.op(&vb.name(name), slice, &[x])
    }

    /// `-exp(A_log)` in f32.
    fn decay_rates(&mut self, vb: &Vb, a_log: ValueId) -> Result<ValueId> {
        let a_log = self.cast(&vb.name("A_log.f32"), a_log, DType::F32)?;
        let a = self.op(&vb.name("A.exp"), Op::Unary(UnaryOp::Exp), &[a_log])?;
        self.op(&vb.name("A"), Op::Unary(UnaryOp::Neg), &[a])
    }

    /// A per-head vector `[heads]` as one row per channel `[heads * head_dim, last]`.
    fn per_channel(&mut self, vb: &Vb, name: &str, v: ValueId, m: &Mamba2Spec, last: Dim) -> Result<ValueId> {
        let heads = Dim::from(m.heads);
        let v = self.op(
            &vb.name(format!("{name}.heads")),
            Op::Reshape { shape: vec![heads.clone(), Dim::konst(1), Dim::konst(1)] },
            &[v],
        )?;
        let full = vec![heads, Dim::from(m.head_dim), last.clone()];
        let v = self.op(&vb.name(format!("{name}.expanded")), Op::Expand { shape: full }, &[v])?;
        self.op(&vb.name(format!("{name}.channels")), Op::Reshape { shape: vec![Dim::from(m.inner()), last] }, &[v])
    }

    /// The scan (in f32) of `[x, dt, A, B, C]` (B and C by group, f32) from the carried `state` (the cache's layout
    /// and dtype, viewed as `[b, channels, n]`): `y` `[b, channels, s]` in f32 and the new
    /// state in the cache's layout and dtype.
    fn scan(&mut self, vb: &Vb, ins: [ValueId; 5], state: ValueId) -> Result<(ValueId, ValueId)> {
        let [x, dt, a, b, c] = ins;
        let x = self.cast(&vb.name("x.f32"), x, DType::F32)?;
        let layout = self.g.info(state).clone();
        let xs = self.g.info(x).shape.clone();
        let n = self.g.info(a).shape[1].clone();
        let flat = vec![xs[0].clone(), xs[1].clone(), n];
        let h0 = self.op(&vb.name("state.channels"), Op::Reshape { shape: flat }, &[state])?;
        let h0 = self.cast(&vb.name("state.f32"), h0, DType::F32)?;
        let out = self.g.add_node(&vb.name("scan"), Op::SelectiveScan, &[x, dt, a, b, c, h0])?;
        let h = self.op(&vb.name("next_ssm"), Op::Reshape { shape: layout.shape }, &[out[1]])?;
        Ok((out[0], self.cast(&vb.name("next_ssm.dtype"), h, layout.dtype)?))
    }

    /// B or C `[b, s, groups * state]` as the scan reads it: `[b, s, groups, state]`, f32.
    fn by_group(&mut self, vb: &Vb, name: &str, v: ValueId, groups: usize, state: usize) -> Result<ValueId> {
        let shape = self.g.info(v).shape.clone();
        let grouped = vec![shape[0].clone(), shape[1].clone(), Dim::from(groups), Dim::from(state)];
        let v = self.op(&vb.name(format!("{name}.groups")), Op::Reshape { shape: grouped }, &[v])?;
        self.cast(&vb.name(format!("{name}.f32")), v, DType::F32)
    }

    /// `y + x * D` over `[b, channels, s]` in f32 (`D` `[channels]`).
    fn skip(&mut self, vb: &Vb, y: ValueId, x: ValueId, d: ValueId, channels: usize) -> Result<ValueId> {
        let d = self.cast(&vb.name("D.f32"), d, DType::F32)?;
        let column = Op::Reshape { shape: vec![Dim::from(channels), Dim::konst(1)] };
        let d = self.op(&vb.name("D.column"), column, &[d])?;
        let x = self.cast(&vb.name("x.skip"), x, DType::F32)?;
        let skip = self.op(&vb.name("skip"), Op::Binary(BinaryOp::Mul), &[x, d])?;
        self.op(&vb.name("with_skip"), Op::Binary(BinaryOp::Add), &[y, skip])
    }

    /// Mamba2's step sizes `[b, heads * head_dim, s]` (f32): `softplus(dt + dt_bias)` per head,
    /// clamped to `time_step_limit`, the same for each of the head's channels.
    fn mamba2_steps(&mut self, vb: &Vb, m: &Mamba2Spec, dt: ValueId) -> Result<ValueId> {
        let dt = self.cast(&vb.name("dt.f32"), dt, DType::F32)?;
        let bias = self.weight(vb, "dt_bias", &[m.heads])?;
        let bias = self.cast(&vb.name("dt_bias.f32"), bias, DType::F32)?;
        let dt = self.op(&vb.name("dt.biased"), Op::Binary(BinaryOp::Add), &[dt, bias])?;
        let mut dt = self.softplus(&vb.name("dt"), dt)?;
        let (lo, hi) = m.dt_limit;
        if lo > 0.0 {
            let c = self.op(&vb.name("dt.min"), Op::Constant(Tensor::scalar_float(DType::F32, lo as f32)), &[])?;
            dt = self.op(&vb.name("dt.clamp_low"), Op::Binary(BinaryOp::Max), &[dt, c])?;
        }
        if hi.is_finite() {
            let c = self.op(&vb.name("dt.max"), Op::Constant(Tensor::scalar_float(DType::F32, hi as f32)), &[])?;
            dt = self.op(&vb.name("dt.clamp_high"), Op::Binary(BinaryOp::Min), &[dt, c])?;
        }
        // [b, s, heads] -> [b, heads, 1, s] -> [b, heads, head_dim, s] -> [b, channels, s]
        let shape = self.g.info(dt).shape.clone();
        let (batch, seq) = (shape[0].clone(), shape[1].clone());
        let dt = self.op(&vb.name("dt.heads"), Op::Transpose { perm: vec![0, 2, 1] }, &[dt])?;
        let one = vec![batch.clone(), Dim::from(m.heads), Dim::konst(1), seq.clone()];
        let dt = self.op(&vb.name("dt.column"), Op::Reshape { shape: one }, &[dt])?;
        let full = vec![batch.clone(), Dim::from(m.heads), Dim::from(m.head_dim), seq.clone()];
        let dt = self.op(&vb.name("dt.expanded"), Op::Expand { shape: full }, &[dt])?;
        self.op(&vb.name("dt.channels"), Op::Reshape { shape: vec![batch, Dim::from(m.inner()), seq] }, &[dt])
    }

    /// The gate and the gated RMS norm as `m.norm` places them (`y` and `gate` `[b, s, heads *
    /// head_dim]`, `y` f32): `MambaRMSNormGated` normalises `y * silu(gate)`, Falcon-H1 may
    /// gate the normed `y` or not norm at all; f32 out.
    fn gated_group_norm(&mut self, vb: &Vb, m: &Mamba2Spec, y: ValueId, gate: ValueId) -> Result<ValueId> {
        let gate = self.cast(&vb.name("gate.f32"), gate, DType::F32)?;
        let z = self.op(&vb.name("gate.silu"), Op::Activate(Activation::Silu), &[gate])?;
        match m.norm {
            GatedNorm::AfterGate => {
                let y = self.op(&vb.name("gated"), Op::Binary(BinaryOp::Mul), &[y, z])?;
                self.group_rms_norm(vb, m, y)
            }
            GatedNorm::BeforeGate => {
                let y = self.group_rms_norm(vb, m, y)?;
                self.op(&vb.name("gated"), Op::Binary(BinaryOp::Mul), &[y, z])
            }
            GatedNorm::None => self.op(&vb.name("gated"), Op::Binary(BinaryOp::Mul), &[y, z]),
        }
    }

    /// `y` `[b, s, inner]` (f32) RMS-normed within each group's channels, times the weight.
    fn group_rms_norm(&mut self, vb: &Vb, m: &Mamba2Spec, y: ValueId) -> Result<ValueId> {
        let inner = m.inner();
        let shape = self.g.info(y).shape.clone();
        let size = inner / m.groups;
        let grouped = vec![shape[0].clone(), shape[1].clone(), Dim::from(m.groups), Dim::from(size)];
        let y = self.op(&vb.name("groups"), Op::Reshape { shape: grouped }, &[y])?;
        let sq = self.op(&vb.name("square"), Op::Binary(BinaryOp::Mul), &[y, y])?;
        let mean = Op::Reduce { kind: ReduceKind::Mean, axes: vec![3], keep_dims: true };
        let var = self.op(&vb.name("variance"), mean, &[sq])?;
        let eps = Tensor::scalar_float(DType::F32, self.cfg.norm_eps as f32);
        let eps = self.op(&vb.name("eps"), Op::Constant(eps), &[])?;
        let var = self.op(&vb.name("variance_eps"), Op::Binary(BinaryOp::Add), &[var, eps])?;
        let root = self.op(&vb.name("root"), Op::Unary(UnaryOp::Sqrt), &[var])?;
        let inv = self.op(&vb.name("rsqrt"), Op::Unary(UnaryOp::Reciprocal), &[root])?;
        let y = self.op(&vb.name("normed"), Op::Binary(BinaryOp::Mul), &[y, inv])?;
        let y = self.op(&vb.name("flat"), Op::Reshape { shape: shape.clone() }, &[y])?;
        let w = self.weight(vb, "weight", &[inner])?;
        let w = self.cast(&vb.name("weight.f32"), w, DType::F32)?;
        self.op(&vb.name("scaled"), Op::Binary(BinaryOp::Mul), &[y, w])
    }

    /// `x [b, s, w] * attention_mask[..., None]` in a forward graph (transformers zeroes the
    /// padding positions' inputs); `x` itself where there is no padding mask.
    fn mask_padding(&mut self, name: &str, x: ValueId, s: &LayerInputs) -> Result<ValueId> {
        let Some(mask) = s.padding else { return Ok(x) };
        let shape = self.g.info(x).shape.clone();
        let m = self.cast(&format!("{name}.mask"), mask, self.g.info(x).dtype)?;
        let column = vec![shape[0].clone(), shape[1].clone(), Dim::konst(1)];
        let m = self.op(&format!("{name}.column"), Op::Reshape { shape: column }, &[m])?;
        self.op(name, Op::Binary(BinaryOp::Mul), &[x, m])
    }

    /// The layer's carried states (the convolution's inputs, the scan's state), the last `N`
    /// tensors its `LayerSpec::cache` lists (an attention beside the mixer has the first two):
    /// the cache's in a generation graph, zeros of the cache's shapes (at `x`'s batch) in a
    /// forward one.
    fn recurrent_states<const N: usize>(&mut self, vb: &Vb, layer: usize, x: ValueId) -> Result<[ValueId; N]> {
        let states = match &self.kv {
            Kv::StaticCache { inputs, .. } => inputs[layer][inputs[layer].len().saturating_sub(N)..].to_vec(),
            Kv::Tokens => {
                let batch = self.g.info(x).shape[0].clone();
                let shapes = self.cfg.layers[layer].cache(&Dim::konst(0));
                let mut states = vec![];
                for (name, shape) in shapes.into_iter().rev().take(N).rev() {
                    let dims: Vec<usize> = shape.iter().map(|d| d.as_const().unwrap_or(1) as usize).collect();
                    let zeros = Tensor::float(self.opts.dtype, dims.clone(), vec![0.0; dims.iter().product()])?;
                    let z = self.op(&vb.name(format!("{name}_state.zeros")), Op::Constant(zeros), &[])?;
                    let mut at_batch = shape;
                    at_batch[0] = batch.clone();
                    states.push(self.op(&vb.name(format!("{name}_state")), Op::Expand { shape: at_batch }, &[z])?);
                }
                states
            }
            Kv::Growing { .. } => return Err(self.needs_static_cache()),
        };
        let found = states.len();
        states.try_into().map_err(|_| ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: format!("layer {layer} keeps {found} cache tensors, its mixer {N}"),
        })
    }

    /// The refusal of a growing cache, which a fixed-size state has no use for.
    pub(crate) fn needs_static_cache(&self) -> ModelError {
        ModelError::Config {
            path: "config.json".into(),
            key: "architectures".into(),
            msg: format!(
                "{} keeps a fixed-size recurrent state, not a growing cache: export for generation with \
                 --static-cache N",
                self.cfg.architecture
            ),
        }
    }

    /// Records the layer's updated states as the cache outputs of a generation graph.
    fn keep_states(&mut self, layer: usize, states: Vec<ValueId>) -> Result<()> {
        match &mut self.kv {
            Kv::StaticCache { outputs, .. } => {
                crate::builder::record_cache(outputs, layer, states);
                Ok(())
            }
            Kv::Tokens => Ok(()),
            Kv::Growing { .. } => Err(self.needs_static_cache()),
        }
    }

    /// The causal depthwise convolution of `x` `[b, s, channels]` after the carried inputs
    /// `state` `[b, channels, k - 1]`, as rows `[b, s, channels]` (activated, with the padding
    /// positions zeroed, for a scan); and the new carried inputs (the last `k - 1` of the two
    /// together).
    fn causal_conv(
        &mut self,
        vb: &Vb,
        conv: Conv,
        x: ValueId,
        state: ValueId,
        s: &LayerInputs,
    ) -> Result<(ValueId, ValueId)> {
        let (k, channels) = (conv.kernel, Dim::from(conv.channels));
        let hs = self.op(&vb.name("channels"), Op::Transpose { perm: vec![0, 2, 1] }, &[x])?;
        let seq = self.g.info(hs).shape[2].clone();
        let all = self.op(&vb.name("window"), Op::Concat { axis: 2 }, &[state, hs])?;
        let kept = Op::Slice { axis: 2, start: seq.clone(), end: seq.add(&Dim::from(k - 1)) };
        let new_state = self.op(&vb.name("next_state"), kept, &[all])?;
        let w = self.weight(vb, "weight", &[conv.channels, 1, k])?;
        let w = self.op(&vb.name("taps"), Op::Reshape { shape: vec![channels.clone(), Dim::from(k)] }, &[w])?;
        let mut out = None;
        for j in 0..k {
            let shifted = Op::Slice { axis: 2, start: Dim::from(j), end: seq.add(&Dim::from(j)) };
            let x = self.op(&vb.name(format!("shift.{j}")), shifted, &[all])?;
            let tap = Op::Slice { axis: 1, start: Dim::from(j), end: Dim::from(j + 1) };
            let t = self.op(&vb.name(format!("tap.{j}")), tap, &[w])?;
            let term = self.op(&vb.name(format!("term.{j}")), Op::Binary(BinaryOp::Mul), &[x, t])?;
            out = Some(match out {
                None => term,
                Some(acc) => self.op(&vb.name(format!("sum.{j}")), Op::Binary(BinaryOp::Add), &[acc, term])?,
            });
        }
        let mut y = out.expect("at least two taps");
        if conv.bias {
            let b = self.weight(vb, "bias", &[conv.channels])?;
            let b = self.op(&vb.name("bias.column"), Op::Reshape { shape: vec![channels, Dim::konst(1)] }, &[b])?;
            y = self.op(&vb.name("biased"), Op::Binary(BinaryOp::Add), &[y, b])?;
        }
        if conv.activated {
            let act = self.activation()?;
            y = self.op(&vb.name("act"), Op::Activate(act), &[y])?;
        }
        let rows = self.op(&vb.name("rows"), Op::Transpose { perm: vec![0, 2, 1] }, &[y])?;
        match conv.activated {
            // the scan reads the convolution's output with padding positions zeroed
            true => Ok((self.mask_padding(&vb.name("masked"), rows, s)?, new_state)),
            false => Ok((rows, new_state)),
        }
    }

    /// Mamba's `dt` `[b, inner, s]` (f32, `softplus(dt_proj(time_step) + bias)`), `B` and `C`
    /// `[b, s, 1, state]` (f32, one group) from the convolution's output `rows` `[b, s, inner]`
    /// (`x_proj`).
    fn mamba_scan_inputs(&mut self, vb: &Vb, m: &MambaSpec, rows: ValueId) -> Result<(ValueId, ValueId, ValueId)> {
        let (r, n) = (m.dt_rank, m.state);
        let params = self.linear(&vb.pp("x_proj"), r + 2 * n, m.inner, false, rows)?;
        let step = self.cut(vb, "time_step", params, 0, r)?;
        let b = self.cut(vb, "B", params, r, n)?;
        let c = self.cut(vb, "C", params, r + n, n)?;
        let (b, c) = (self.by_group(vb, "B", b, 1, n)?, self.by_group(vb, "C", c, 1, n)?);
        let dt = self.linear(&vb.pp("dt_proj"), m.inner, r, false, step)?;
        let dt = self.op(&vb.name("dt.channels"), Op::Transpose { perm: vec![0, 2, 1] }, &[dt])?;
        let dt = self.cast(&vb.name("dt.f32"), dt, DType::F32)?;
        let bias = self.weight(&vb.pp("dt_proj"), "bias", &[m.inner])?;
        let bias = self.cast(&vb.name("dt_bias.f32"), bias, DType::F32)?;
        let column = Op::Reshape { shape: vec![Dim::from(m.inner), Dim::konst(1)] };
        let bias = self.op(&vb.name("dt_bias.column"), column, &[bias])?;
        let dt = self.op(&vb.name("dt.biased"), Op::Binary(BinaryOp::Add), &[dt, bias])?;
        Ok((self.softplus(&vb.name("dt"), dt)?, b, c))
    }

    /// `x` in `dtype` (itself when it already is).
    fn cast(&mut self, name: &str, x: ValueId, dtype: DType) -> Result<ValueId> {
        match self.g.info(x).dtype == dtype {
            true => Ok(x),
            false => self.op(name, Op::Cast(dtype), &[x]),
        }
    }

    /// `softplus(x)` as torch computes it: `log(1 + exp(x))`, `x` itself above the threshold.
    fn softplus(&mut self, name: &str, x: ValueId) -> Result<ValueId> {
        let dtype = self.g.info(x).dtype;
        let one = self.op(&format!("{name}.one"), Op::Constant(Tensor::scalar_float(dtype, 1.0)), &[])?;
        let limit = Tensor::scalar_float(dtype, SOFTPLUS_THRESHOLD);
        let limit = self.op(&format!("{name}.threshold"), Op::Constant(limit), &[])?;
        let e = self.op(&format!("{name}.exp"), Op::Unary(UnaryOp::Exp), &[x])?;
        let e = self.op(&format!("{name}.exp_plus_one"), Op::Binary(BinaryOp::Add), &[e, one])?;
        let soft = self.op(&format!("{name}.log"), Op::Unary(UnaryOp::Log), &[e])?;
        let above = self.op(&format!("{name}.above"), Op::Binary(BinaryOp::Greater), &[x, limit])?;
        self.op(&format!("{name}.softplus"), Op::Where, &[above, x, soft])
    }
}
