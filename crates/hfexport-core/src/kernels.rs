//! Plain, correct tensor kernels for the reference evaluator.
//!
//! Clarity first, with the two things that decide speed on a real model done properly: matrix
//! products go through `matrixmultiply`'s blocked, threaded sgemm (weights are read in their
//! `[out, in]` layout through strides, never copied), and everything else walks memory once.
//! Floats compute in f32 and round to the value's dtype at the op output.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{BinaryOp, ReduceKind, UnaryOp, Window};
use crate::tensor::{Tensor, TensorData};

pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Strides of `shape` read as a broadcast to `out` (0 on broadcast and missing leading axes).
fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let st = strides(shape);
    let lead = out.len() - shape.len();
    (0..out.len()).map(|i| if i < lead || shape[i - lead] == 1 { 0 } else { st[i - lead] }).collect()
}

pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
            let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
            match (da, db) {
                (x, y) if x == y => Ok(x),
                (1, y) => Ok(y),
                (x, 1) => Ok(x),
                _ => Err(Error::Tensor(format!("shapes {a:?} and {b:?} do not broadcast"))),
            }
        })
        .collect()
}

/// Visits every index of `out` in row-major order, giving the element offset into each input.
fn walk(out: &[usize], in_strides: &[Vec<usize>], mut f: impl FnMut(&[usize])) {
    let n: usize = out.iter().product();
    let k = in_strides.len();
    let mut idx = vec![0usize; out.len()];
    let mut off = vec![0usize; k];
    for _ in 0..n {
        f(&off);
        for d in (0..out.len()).rev() {
            idx[d] += 1;
            for j in 0..k {
                off[j] += in_strides[j][d];
            }
            if idx[d] < out[d] {
                break;
            }
            for j in 0..k {
                off[j] -= in_strides[j][d] * out[d];
            }
            idx[d] = 0;
        }
    }
}

/// Gathers `x` (any storage) broadcast to `out`.
fn gather_broadcast<T: Copy>(x: &[T], shape: &[usize], out: &[usize]) -> Vec<T> {
    if shape == out {
        return x.to_vec();
    }
    let mut v = Vec::with_capacity(out.iter().product());
    walk(out, &[broadcast_strides(shape, out)], |o| v.push(x[o[0]]));
    v
}

fn zip_broadcast<A: Copy, B: Copy, R>(
    a: &[A],
    sa: &[usize],
    b: &[B],
    sb: &[usize],
    out: &[usize],
    f: impl Fn(A, B) -> R,
) -> Vec<R> {
    if sa == out && sb == out {
        return a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect();
    }
    if sa == out && b.len() == 1 {
        return a.iter().map(|&x| f(x, b[0])).collect();
    }
    let mut v = Vec::with_capacity(out.iter().product());
    walk(out, &[broadcast_strides(sa, out), broadcast_strides(sb, out)], |o| v.push(f(a[o[0]], b[o[1]])));
    v
}

pub fn unary(op: UnaryOp, x: &Tensor) -> Result<Tensor> {
    let shape = x.shape().to_vec();
    match (op, x.data()) {
        (UnaryOp::Not, TensorData::Bool(v)) => Tensor::bool(shape, v.iter().map(|b| !b).collect()),
        (UnaryOp::Neg, TensorData::Int(v)) => Tensor::int(x.dtype(), shape, v.iter().map(|a| -a).collect()),
        (_, TensorData::Float(v)) => {
            let f: fn(f32) -> f32 = match op {
                UnaryOp::Neg => |a| -a,
                UnaryOp::Exp => f32::exp,
                UnaryOp::Sqrt => f32::sqrt,
                UnaryOp::Reciprocal => f32::recip,
                UnaryOp::Tanh => f32::tanh,
                UnaryOp::Sigmoid => |a| 1.0 / (1.0 + (-a).exp()),
                UnaryOp::Cos => f32::cos,
                UnaryOp::Sin => f32::sin,
                UnaryOp::Erf => erf,
                UnaryOp::Log => f32::ln,
                UnaryOp::Not => unreachable!("Not on floats is rejected by inference"),
            };
            Tensor::float(x.dtype(), shape, v.iter().map(|&a| f(a)).collect())
        }
        _ => Err(Error::Tensor(format!("{op:?} does not take {}", x.dtype()))),
    }
}

/// The error function in f32 (`f64::erf` is not stable Rust): [`erf64`] rounded. Checked
/// within half an f32 ulp of Python's `math.erf` on a 1601-point grid over [-5, 5].
pub fn erf(x: f32) -> f32 {
    erf64(x as f64) as f32
}

/// The error function: its Maclaurin series summed in f64 (alternating; below |x| = 4 the
/// largest term is about 1e5, so f64 keeps ~1e-11), and ±1 from |x| = 4 on, where erf is
/// within 1.6e-8 of ±1.
pub fn erf64(x: f64) -> f64 {
    if x.abs() >= 4.0 {
        return x.signum();
    }
    let (x2, mut term, mut sum) = (x * x, x, x);
    for n in 1..200 {
        // term = (-1)^n x^(2n+1) / n!, summed as term / (2n + 1)
        term *= -x2 / n as f64;
        let t = term / (2 * n + 1) as f64;
        sum += t;
        if t.abs() <= 1e-17 * sum.abs() {
            break;
        }
    }
    sum * std::f64::consts::FRAC_2_SQRT_PI
}

/// The predicate of a comparison op, for floats and integers alike.
fn comparison<T: PartialOrd>(op: BinaryOp) -> fn(T, T) -> bool {
    match op {
        BinaryOp::Equal => |p, q| p == q,
        BinaryOp::Less => |p, q| p < q,
        BinaryOp::LessEqual => |p, q| p <= q,
        BinaryOp::Greater => |p, q| p > q,
        _ => |p, q| p >= q,
    }
}

pub fn binary(op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    use BinaryOp::*;
    let out = broadcast_shape(a.shape(), b.shape())?;
    let (sa, sb) = (a.shape(), b.shape());
    match (a.data(), b.data()) {
        (TensorData::Float(x), TensorData::Float(y)) => {
            if op.is_comparison() {
                return Tensor::bool(out.clone(), zip_broadcast(x, sa, y, sb, &out, comparison(op)));
            }
            let f: fn(f32, f32) -> f32 = match op {
                Add => |p, q| p + q,
                Sub => |p, q| p - q,
                Mul => |p, q| p * q,
                Div => |p, q| p / q,
                Pow => f32::powf,
                Max => f32::max,
                Min => f32::min,
                _ => return Err(Error::Tensor(format!("{op:?} does not take floats"))),
            };
            Tensor::float(a.dtype(), out.clone(), zip_broadcast(x, sa, y, sb, &out, f))
        }
        (TensorData::Int(x), TensorData::Int(y)) => {
            if op.is_comparison() {
                return Tensor::bool(out.clone(), zip_broadcast(x, sa, y, sb, &out, comparison(op)));
            }
            let f: fn(i64, i64) -> i64 = match op {
                Add => i64::wrapping_add,
                Sub => i64::wrapping_sub,
                Mul => i64::wrapping_mul,
                Div => |p, q| if q == 0 { 0 } else { p.div_euclid(q) },
                Max => i64::max,
                Min => i64::min,
                _ => return Err(Error::Tensor(format!("{op:?} does not take integers"))),
            };
            Tensor::int(a.dtype(), out.clone(), zip_broadcast(x, sa, y, sb, &out, f))
        }
        (TensorData::Bool(x), TensorData::Bool(y)) => {
            let f: fn(bool, bool) -> bool = match op {
                And => |p, q| p && q,
                Or => |p, q| p || q,
                Equal => |p, q| p == q,
                _ => return Err(Error::Tensor(format!("{op:?} does not take bools"))),
            };
            Tensor::bool(out.clone(), zip_broadcast(x, sa, y, sb, &out, f))
        }
        _ => Err(Error::Tensor(format!("{op:?} on {} and {}", a.dtype(), b.dtype()))),
    }
}

pub fn where_(c: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let out = broadcast_shape(&broadcast_shape(c.shape(), a.shape())?, b.shape())?;
    let cond = gather_broadcast(c.as_bool()?, c.shape(), &out);
    let pick = |x: Tensor, y: Tensor| -> Result<Tensor> {
        let (x, y) = (x, y);
        match (x.data(), y.data()) {
            (TensorData::Float(p), TensorData::Float(q)) => Tensor::float(
                x.dtype(),
                out.clone(),
                cond.iter().zip(p.iter().zip(q)).map(|(&c, (&p, &q))| if c { p } else { q }).collect(),
            ),
            (TensorData::Int(p), TensorData::Int(q)) => Tensor::int(
                x.dtype(),
                out.clone(),
                cond.iter().zip(p.iter().zip(q)).map(|(&c, (&p, &q))| if c { p } else { q }).collect(),
            ),
            (TensorData::Bool(p), TensorData::Bool(q)) => Tensor::bool(
                out.clone(),
                cond.iter().zip(p.iter().zip(q)).map(|(&c, (&p, &q))| if c { p } else { q }).collect(),
            ),
            _ => Err(Error::Tensor("Where branches differ in dtype".into())),
        }
    };
    pick(expand(a, &out)?, expand(b, &out)?)
}

pub fn expand(x: &Tensor, out: &[usize]) -> Result<Tensor> {
    if broadcast_shape(x.shape(), out)? != out {
        return Err(Error::Tensor(format!("cannot expand {:?} to {out:?}", x.shape())));
    }
    let shape = out.to_vec();
    match x.data() {
        TensorData::Float(v) => Tensor::float(x.dtype(), shape, gather_broadcast(v, x.shape(), out)),
        TensorData::Int(v) => Tensor::int(x.dtype(), shape, gather_broadcast(v, x.shape(), out)),
        TensorData::Bool(v) => Tensor::bool(shape, gather_broadcast(v, x.shape(), out)),
    }
}

/// `c[m, n] = a[m, k] · b[k, n]` with arbitrary element strides (row, column) for a and b.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    rsa: usize,
    csa: usize,
    b: &[f32],
    rsb: usize,
    csb: usize,
    c: &mut [f32],
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c.iter_mut().for_each(|x| *x = 0.0);
        return;
    }
    // SAFETY: the callers pass slices holding at least the strided extents described by
    // (m, k, rsa, csa), (k, n, rsb, csb) and a contiguous m*n output.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            rsa as isize,
            csa as isize,
            b.as_ptr(),
            rsb as isize,
            csb as isize,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (sa, sb) = (a.shape(), b.shape());
    let (ra, rb) = (sa.len(), sb.len());
    let (m, k, n) = (sa[ra - 2], sa[ra - 1], sb[rb - 1]);
    if sb[rb - 2] != k {
        return Err(Error::Tensor(format!("matmul inner dims differ: {sa:?} x {sb:?}")));
    }
    let batch = broadcast_shape(&sa[..ra - 2], &sb[..rb - 2])?;
    let (x, y) = (a.as_f32()?, b.as_f32()?);
    let nb: usize = batch.iter().product();
    let mut out = vec![0f32; nb * m * n];
    let mut offs = Vec::with_capacity(nb);
    let sta: Vec<usize> = broadcast_strides(&sa[..ra - 2], &batch).iter().map(|s| s * m * k).collect();
    let stb: Vec<usize> = broadcast_strides(&sb[..rb - 2], &batch).iter().map(|s| s * k * n).collect();
    walk(&batch, &[sta, stb], |o| offs.push((o[0], o[1])));
    for (i, (oa, ob)) in offs.into_iter().enumerate() {
        sgemm(m, k, n, &x[oa..oa + m * k], k, 1, &y[ob..ob + k * n], n, 1, &mut out[i * m * n..(i + 1) * m * n]);
    }
    let mut shape = batch;
    shape.extend([m, n]);
    Tensor::float(a.dtype(), shape, out)
}

/// `x [..., k] · w[n, k]ᵀ + bias[n]`, reading `w` in place through strides.
pub fn linear(x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let (n, k) = (w.shape()[0], w.shape()[1]);
    let xs = x.as_f32()?;
    let m = xs.len() / k.max(1);
    let mut out = vec![0f32; m * n];
    sgemm(m, k, n, xs, k, 1, w.as_f32()?, 1, k, &mut out);
    if let Some(b) = bias {
        let bv = b.as_f32()?;
        out.chunks_mut(n).for_each(|row| row.iter_mut().zip(bv).for_each(|(o, b)| *o += b));
    }
    let mut shape = x.shape().to_vec();
    *shape.last_mut().expect("rank >= 1") = n;
    Tensor::float(x.dtype(), shape, out)
}

pub fn reduce(kind: ReduceKind, x: &Tensor, axes: &[usize], keep_dims: bool) -> Result<Tensor> {
    let shape = x.shape();
    let kept: Vec<usize> = shape.iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect();
    let out_strides: Vec<usize> = {
        let st = strides(&kept);
        (0..shape.len()).map(|i| if axes.contains(&i) { 0 } else { st[i] }).collect()
    };
    let n_out: usize = kept.iter().product();
    let count = (shape.iter().product::<usize>() / n_out.max(1)).max(1);
    let final_shape: Vec<usize> = if keep_dims {
        kept.clone()
    } else {
        shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect()
    };
    match x.data() {
        TensorData::Float(v) => {
            let init = if kind == ReduceKind::Max { f64::NEG_INFINITY } else { 0.0 };
            let mut acc = vec![init; n_out];
            let mut i = 0;
            walk(shape, &[out_strides], |o| {
                let a = &mut acc[o[0]];
                *a = if kind == ReduceKind::Max { a.max(v[i] as f64) } else { *a + v[i] as f64 };
                i += 1;
            });
            if kind == ReduceKind::Mean {
                acc.iter_mut().for_each(|a| *a /= count as f64);
            }
            Tensor::float(x.dtype(), final_shape, acc.into_iter().map(|a| a as f32).collect())
        }
        TensorData::Int(v) if kind != ReduceKind::Mean => {
            let init = if kind == ReduceKind::Max { i64::MIN } else { 0 };
            let mut acc = vec![init; n_out];
            let mut i = 0;
            walk(shape, &[out_strides], |o| {
                let a = &mut acc[o[0]];
                *a = if kind == ReduceKind::Max { (*a).max(v[i]) } else { a.wrapping_add(v[i]) };
                i += 1;
            });
            Tensor::int(x.dtype(), final_shape, acc)
        }
        _ => Err(Error::Tensor(format!("{kind:?} does not take {}", x.dtype()))),
    }
}

/// (outer, axis length, inner) of a shape around `axis`.
fn split_at_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (shape[..axis].iter().product(), shape[axis], shape[axis + 1..].iter().product())
}

pub fn softmax(x: &Tensor, axis: usize) -> Result<Tensor> {
    let (outer, n, inner) = split_at_axis(x.shape(), axis);
    let v = x.as_f32()?;
    let mut out = vec![0f32; v.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| o * n * inner + j * inner + i;
            let max = (0..n).map(|j| v[at(j)]).fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f32;
            for j in 0..n {
                let e = (v[at(j)] - max).exp();
                out[at(j)] = e;
                sum += e;
            }
            for j in 0..n {
                out[at(j)] /= sum;
            }
        }
    }
    Tensor::float(x.dtype(), x.shape().to_vec(), out)
}

/// The running sum of `x` (f32 or i64) along `axis`.
pub fn cumsum(x: &Tensor, axis: usize) -> Result<Tensor> {
    fn run<T: Copy + std::ops::Add<Output = T>>(v: &[T], (outer, n, inner): (usize, usize, usize)) -> Vec<T> {
        let mut out = v.to_vec();
        for o in 0..outer {
            for i in 0..inner {
                for j in 1..n {
                    let at = |j: usize| o * n * inner + j * inner + i;
                    out[at(j)] = out[at(j - 1)] + v[at(j)];
                }
            }
        }
        out
    }
    let split = split_at_axis(x.shape(), axis);
    match x.data() {
        TensorData::Float(v) => Tensor::float(x.dtype(), x.shape().to_vec(), run(v, split)),
        TensorData::Int(v) => Tensor::int(x.dtype(), x.shape().to_vec(), run(v, split)),
        _ => Err(Error::Tensor(format!("CumSum does not take {}", x.dtype()))),
    }
}

/// A tensor of `shape` whose element i is `x`'s element `src[i]`.
fn select(x: &Tensor, shape: Vec<usize>, src: &[usize]) -> Result<Tensor> {
    match x.data() {
        TensorData::Float(v) => Tensor::float(x.dtype(), shape, src.iter().map(|&i| v[i]).collect()),
        TensorData::Int(v) => Tensor::int(x.dtype(), shape, src.iter().map(|&i| v[i]).collect()),
        TensorData::Bool(v) => Tensor::bool(shape, src.iter().map(|&i| v[i]).collect()),
    }
}

pub fn transpose(x: &Tensor, perm: &[usize]) -> Result<Tensor> {
    let st = strides(x.shape());
    let out: Vec<usize> = perm.iter().map(|&p| x.shape()[p]).collect();
    let in_strides: Vec<usize> = perm.iter().map(|&p| st[p]).collect();
    let mut src = Vec::with_capacity(x.numel());
    walk(&out, &[in_strides], |o| src.push(o[0]));
    select(x, out, &src)
}

pub fn slice(x: &Tensor, axis: usize, start: usize, end: usize) -> Result<Tensor> {
    let (outer, n, inner) = split_at_axis(x.shape(), axis);
    if start > end || end > n {
        return Err(Error::Tensor(format!("slice {start}..{end} out of range for axis {axis} of size {n}")));
    }
    let mut shape = x.shape().to_vec();
    shape[axis] = end - start;
    let mut src = Vec::with_capacity(outer * (end - start) * inner);
    for o in 0..outer {
        src.extend(o * n * inner + start * inner..o * n * inner + end * inner);
    }
    select(x, shape, &src)
}

pub fn concat(xs: &[&Tensor], axis: usize) -> Result<Tensor> {
    let first = xs[0];
    let (outer, _, inner) = split_at_axis(first.shape(), axis);
    let mut shape = first.shape().to_vec();
    shape[axis] = xs.iter().map(|x| x.shape()[axis]).sum();
    // each part contributes a block of `n_i * inner` elements per outer index
    let blocks: Vec<usize> = xs.iter().map(|x| x.shape()[axis] * inner).collect();
    fn join<T: Copy>(parts: Vec<&[T]>, blocks: &[usize], outer: usize) -> Vec<T> {
        let mut out = Vec::with_capacity(blocks.iter().sum::<usize>() * outer);
        for o in 0..outer {
            for (p, &b) in parts.iter().zip(blocks) {
                out.extend_from_slice(&p[o * b..(o + 1) * b]);
            }
        }
        out
    }
    match first.data() {
        TensorData::Float(_) => {
            let parts = xs.iter().map(|x| x.as_f32()).collect::<Result<_>>()?;
            Tensor::float(first.dtype(), shape, join(parts, &blocks, outer))
        }
        TensorData::Int(_) => {
            let parts = xs.iter().map(|x| x.as_i64()).collect::<Result<_>>()?;
            Tensor::int(first.dtype(), shape, join(parts, &blocks, outer))
        }
        TensorData::Bool(_) => {
            let parts = xs.iter().map(|x| x.as_bool()).collect::<Result<_>>()?;
            Tensor::bool(shape, join(parts, &blocks, outer))
        }
    }
}

/// `data.index_select(axis, indices)`; an index outside the axis is an error naming it.
pub fn gather(data: &Tensor, idx: &Tensor, axis: usize) -> Result<Tensor> {
    let (outer, n, inner) = split_at_axis(data.shape(), axis);
    let ids = idx.as_i64()?;
    if let Some(bad) = ids.iter().find(|&&i| i < 0 || i as usize >= n) {
        return Err(Error::Tensor(format!("index {bad} is out of range for an axis of size {n}")));
    }
    let mut shape = data.shape()[..axis].to_vec();
    shape.extend_from_slice(idx.shape());
    shape.extend_from_slice(&data.shape()[axis + 1..]);
    let mut src = Vec::with_capacity(outer * ids.len() * inner);
    for o in 0..outer {
        for &i in ids {
            let base = o * n * inner + i as usize * inner;
            src.extend(base..base + inner);
        }
    }
    select(data, shape, &src)
}

/// A window over one or two spatial axes seen as two (a 1-D one as a plane of height 1), with
/// its input's and output's spatial sizes: one loop nest serves `conv1d` and `conv2d`.
struct Plane {
    size: [usize; 2],
    out: [usize; 2],
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pad: [usize; 2],
}

impl Plane {
    fn of(w: &Window, spatial: &[usize]) -> Result<Plane> {
        let out = (0..w.rank())
            .map(|i| w.out_len(i, spatial[i]))
            .collect::<Option<Vec<_>>>()
            .filter(|_| spatial.len() == w.rank())
            .ok_or_else(|| Error::Tensor(format!("spatial shape {spatial:?} does not fit the window {w:?}")))?;
        let two = |v: &[usize], fill: usize| match v {
            [a] => [fill, *a],
            [a, b] => [*a, *b],
            _ => unreachable!("a window has 1 or 2 axes"),
        };
        Ok(Plane {
            size: two(spatial, 1),
            out: two(&out, 1),
            kernel: two(&w.kernel, 1),
            stride: two(&w.stride, 1),
            dilation: two(&w.dilation, 1),
            pad: two(&w.pads_begin, 0),
        })
    }

    /// The input row or column that tap `k` of output position `o` reads on axis `a`, `None`
    /// in the padding.
    fn at(&self, a: usize, o: usize, k: usize) -> Option<usize> {
        (o * self.stride[a] + k * self.dilation[a]).checked_sub(self.pad[a]).filter(|&i| i < self.size[a])
    }

    /// Every (output position, tap) pair with the input offset it reads, within one plane.
    fn taps(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        let [oh, ow] = self.out;
        let [kh, kw] = self.kernel;
        (0..oh * ow).flat_map(move |o| {
            (0..kh * kw).filter_map(move |k| {
                let y = self.at(0, o / ow, k / kw)?;
                let x = self.at(1, o % ow, k % kw)?;
                Some((o, k, y * self.size[1] + x))
            })
        })
    }

    fn out_shape(&self, lead: [usize; 2], rank: usize) -> Vec<usize> {
        let spatial = &self.out[2 - rank..];
        lead.iter().chain(spatial).copied().collect()
    }
}

/// `conv1d` / `conv2d` ([`crate::Op::Conv`]) directly, accumulating in f32.
pub fn conv(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, window: &Window, groups: usize) -> Result<Tensor> {
    let (xs, ws) = (x.as_f32()?, w.as_f32()?);
    let bias = bias.map(Tensor::as_f32).transpose()?;
    let (n, cin, cout) = (x.shape()[0], x.shape()[1], w.shape()[0]);
    let p = Plane::of(window, &x.shape()[2..])?;
    let (cg, og) = (cin / groups, cout / groups);
    let (plane_in, plane_out, taps) = (p.size[0] * p.size[1], p.out[0] * p.out[1], p.kernel[0] * p.kernel[1]);
    let mut y = vec![0f32; n * cout * plane_out];
    for b in 0..n {
        for o in 0..cout {
            let out = &mut y[(b * cout + o) * plane_out..][..plane_out];
            out.fill(bias.map_or(0.0, |bs| bs[o]));
            for c in 0..cg {
                let xin = &xs[(b * cin + (o / og) * cg + c) * plane_in..][..plane_in];
                let wk = &ws[(o * cg + c) * taps..][..taps];
                for (at, k, from) in p.taps() {
                    out[at] += xin[from] * wk[k];
                }
            }
        }
    }
    Tensor::float(x.dtype(), p.out_shape([n, cout], window.rank()), y)
}

/// `max_pool1d` / `max_pool2d` ([`crate::Op::MaxPool`]): the largest input in each window.
pub fn max_pool(x: &Tensor, window: &Window) -> Result<Tensor> {
    let xs = x.as_f32()?;
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let p = Plane::of(window, &x.shape()[2..])?;
    let (plane_in, plane_out) = (p.size[0] * p.size[1], p.out[0] * p.out[1]);
    let mut y = vec![f32::NEG_INFINITY; n * c * plane_out];
    for (plane, out) in y.chunks_mut(plane_out).enumerate() {
        let xin = &xs[plane * plane_in..][..plane_in];
        for (at, _, from) in p.taps() {
            out[at] = out[at].max(xin[from]);
        }
    }
    Tensor::float(x.dtype(), p.out_shape([n, c], window.rank()), y)
}

pub fn iota(len: usize) -> Result<Tensor> {
    Tensor::i64(vec![len], (0..len as i64).collect())
}

/// Float storage of `x` as f32 values in a fresh tensor of dtype `F32`.
pub fn to_f32(x: &Tensor) -> Tensor {
    if x.dtype() == DType::F32 {
        x.clone()
    } else {
        x.cast(DType::F32)
    }
}
