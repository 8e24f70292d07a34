//! The memory plan: every planned tensor gets an offset in one arena (memory id 1), at its
//! upper-bound size, so that no two tensors alive at the same time overlap.
//!
//! A tensor lives from the instruction that writes it (inputs: from the start) to the last
//! instruction that reads it, directly or through a list (outputs: to the end). Tensors are
//! placed largest first at the lowest 16-byte aligned offset free over their whole lifetime
//! (greedy by size, as ExecuTorch's own `MemoryPlanningPass`), so a decode step's attention
//! scratch reuses the bytes of the previous layer's.

use crate::program::{Data, Method, Value};
use hfexport_core::SymbolScope;

/// Alignment of every planned tensor (ExecuTorch's default).
pub const ALIGN: u64 = 16;

pub fn align(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// EValue indices a value refers to (itself, or a list's items).
fn refs(m: &Method, v: usize, out: &mut Vec<usize>) {
    match &m.values[v] {
        Value::Tensor(_) => out.push(v),
        Value::TensorList(items) => out.extend(items),
        Value::OptTensorList(items) => out.extend(items.iter().flatten()),
        _ => {}
    }
}

/// Sets every tensor's upper-bound sizes from the ranges of `scope` (to plan the same method
/// at other bounds, as [`crate::bounds`] does).
pub fn rebound(m: &mut Method, scope: &SymbolScope) {
    for v in &mut m.values {
        if let Value::Tensor(t) = v {
            t.bound = t.sizes.iter().map(|d| d.bounds(scope).1).collect();
        }
    }
}

/// Assigns offsets to every planned tensor of `m` and sets `m.arena`.
pub fn plan(m: &mut Method) {
    let n = m.values.len();
    let end = m.instrs.len();
    // (first, last) instruction of each tensor's life
    let mut life: Vec<Option<(usize, usize)>> = vec![None; n];
    let touch = |life: &mut Vec<Option<(usize, usize)>>, v: usize, at: usize| {
        let l = life[v].get_or_insert((at, at));
        l.0 = l.0.min(at);
        l.1 = l.1.max(at);
    };
    for &i in &m.inputs {
        touch(&mut life, i, 0);
    }
    for (at, ins) in m.instrs.iter().enumerate() {
        let mut vs = vec![];
        for &a in &ins.args {
            refs(m, a, &mut vs);
        }
        for v in vs {
            touch(&mut life, v, at);
        }
    }
    for &o in &m.outputs {
        touch(&mut life, o, end);
    }
    for &b in &m.buffers {
        touch(&mut life, b, 0);
        touch(&mut life, b, end);
    }
    // a view's base lives as long as the view; a view comes after its base, so going backwards
    // carries a view of a view down to the tensor that owns the memory
    for v in (0..n).rev() {
        if let Value::Tensor(t) = &m.values[v] {
            if let (Data::Alias(base), Some((_, last))) = (&t.data, life[v]) {
                touch(&mut life, *base, last);
            }
        }
    }
    let mut order: Vec<(usize, u64, (usize, usize))> = (0..n)
        .filter_map(|v| match &m.values[v] {
            Value::Tensor(t) if matches!(t.data, Data::Planned(_)) => {
                Some((v, align(t.nbytes().max(1), ALIGN), life[v].unwrap_or((0, 0))))
            }
            _ => None,
        })
        .collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut placed: Vec<(u64, u64, (usize, usize))> = vec![];
    let mut arena = 0u64;
    for (v, size, (first, last)) in order {
        // the live neighbours, by offset
        let mut busy: Vec<(u64, u64)> =
            placed.iter().filter(|(_, _, (f, l))| *f <= last && first <= *l).map(|(o, s, _)| (*o, *s)).collect();
        busy.sort();
        let mut offset = 0u64;
        for (o, s) in busy {
            if offset + size <= o {
                break;
            }
            offset = offset.max(align(o + s, ALIGN));
        }
        placed.push((offset, size, (first, last)));
        arena = arena.max(offset + size);
        if let Value::Tensor(t) = &mut m.values[v] {
            t.data = Data::Planned(Some(offset));
        }
    }
    m.arena = arena;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{Call, Instr, TensorValue};
    use hfexport_core::{DType, Dim};

    fn t(bytes: i64) -> Value {
        Value::Tensor(TensorValue {
            dtype: DType::U8,
            sizes: vec![Dim::konst(bytes)],
            bound: vec![bytes],
            data: Data::Planned(None),
            name: String::new(),
        })
    }

    fn offset(m: &Method, v: usize) -> u64 {
        match &m.tensor(v).unwrap().data {
            Data::Planned(Some(o)) => *o,
            other => panic!("{other:?}"),
        }
    }

    /// The same method planned at a smaller range of its symbol reserves less.
    #[test]
    fn rebound_plans_the_method_at_other_ranges() {
        let mut scope = SymbolScope::default();
        let s = scope.declare("sequence", 1, 1024).unwrap();
        let planned = Value::Tensor(TensorValue {
            dtype: DType::F32,
            sizes: vec![Dim::sym(&s), Dim::konst(8)],
            bound: vec![],
            data: Data::Planned(None),
            name: String::new(),
        });
        let mut m = Method { values: vec![planned], inputs: vec![0], outputs: vec![0], ..Default::default() };
        rebound(&mut m, &scope);
        plan(&mut m);
        assert_eq!(m.arena, 1024 * 8 * 4);
        scope.set_range(&s, 1, 10);
        rebound(&mut m, &scope);
        plan(&mut m);
        assert_eq!((m.tensor(0).unwrap().bound.clone(), m.arena), (vec![10, 8], 320));
    }

    /// x -> a -> b -> c: `a` and `c` never live together, so `c` reuses `a`'s bytes; `b`
    /// overlaps both.
    #[test]
    fn dead_tensors_are_reused_and_live_ones_never_overlap() {
        let mut m = Method {
            values: vec![t(64), t(100), t(32), t(100)],
            inputs: vec![0],
            outputs: vec![3],
            ..Default::default()
        };
        m.operators.push(("aten::neg".into(), "out".into()));
        m.instrs = vec![
            Instr { call: Call::Kernel(0), args: vec![0, 1, 1] },
            Instr { call: Call::Kernel(0), args: vec![1, 2, 2] },
            Instr { call: Call::Kernel(0), args: vec![2, 3, 3] },
        ];
        plan(&mut m);
        let span = |v: usize| (offset(&m, v), offset(&m, v) + align(m.tensor(v).unwrap().nbytes(), ALIGN));
        let overlap = |a: usize, b: usize| span(a).0 < span(b).1 && span(b).0 < span(a).1;
        assert!(!overlap(0, 1) && !overlap(1, 2) && !overlap(2, 3));
        assert_eq!(offset(&m, 1), offset(&m, 3), "c reuses a's bytes");
        assert!(m.arena <= 112 + 64, "arena {}", m.arena);
        assert!((0..4).all(|v| offset(&m, v).is_multiple_of(ALIGN)));
    }
}
