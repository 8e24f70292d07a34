//! The `.pte` exporter of one component: core passes (every high-level op but `Linear` and
//! `CacheUpdate` decomposed: ExecuTorch's kernel libraries register no attention, silu or
//! index_copy), the shared ATen lowering, the ExecuTorch method ([`crate::program`]), its memory
//! plan ([`crate::plan`]) and the file ([`crate::pte`]), weights streamed after the program.

use crate::program::{build, Alloc, Backend, ConstSource, Data, Method, Value};
use crate::{plan, pte, EtError, Result};
use hfexport_aten::lower;
use hfexport_core::config::{ExecutorchBackend, ExecutorchConfig, ExportFormat};
use hfexport_core::passes::{Pass, PassManager, PatchRegistry, Stage};
use hfexport_core::{Graph, Op, TensorSource};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// The runtime the exports are built and checked for.
pub fn runtime_pins() -> BTreeMap<String, String> {
    BTreeMap::from([("executorch".to_string(), "1.5.1".to_string())])
}

/// The largest arena the plan accepts: ExecuTorch allocates it whole when the method loads.
pub const MAX_ARENA: u64 = 8 << 30;

pub type Progress<'a> = &'a mut dyn FnMut(usize, usize, &str);

/// What one component export produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub files: Vec<String>,
    pub patches_applied: Vec<String>,
    /// Bytes of the planned arena.
    pub arena: u64,
}

fn decompose_for_executorch(op: &Op) -> bool {
    op.is_high_level() && !matches!(op, Op::Linear | Op::CacheUpdate)
}

/// The method of a graph: passes, ATen lowering, kernels and memory plan; with the graph the
/// passes made (whose weights the constants name) and the patches applied.
pub fn method(graph: &Graph, cfg: &ExecutorchConfig) -> Result<(Method, Graph, Vec<String>)> {
    let backend = match cfg.backend {
        ExecutorchBackend::Portable => Backend::Portable,
        ExecutorchBackend::Xnnpack => Backend::Xnnpack,
        ExecutorchBackend::Cuda | ExecutorchBackend::Mlx => {
            return Err(EtError::Backend(format!(
                "backend `{}` needs an ExecuTorch runtime built with that backend (the executorch 1.5.1 wheel has \
                 neither CUDA nor MLX); hfexport writes `xnnpack` and `portable` programs",
                if cfg.backend == ExecutorchBackend::Cuda { "cuda" } else { "mlx" }
            )))
        }
    };
    let mut pm = PassManager::new(PatchRegistry::builtin(), runtime_pins());
    pm.add(Pass::Patches { stage: Stage::Build, format: None })
        .add(Pass::FoldSlidingWindows)
        .add(Pass::Decompose { name: "executorch", select: decompose_for_executorch })
        .add(Pass::Patches { stage: Stage::Backend, format: Some(ExportFormat::Executorch) });
    let (g, report) = pm.run(graph.clone())?;
    let aten = lower(&g)?;
    let alloc = Alloc {
        graph_input: cfg.alloc_graph_input,
        graph_output: cfg.alloc_graph_output,
        mutable_buffers: cfg.alloc_mutable_buffers,
    };
    let mut m = build(&aten, &g.symbols, alloc, backend)?;
    plan::plan(&mut m);
    if m.arena > MAX_ARENA {
        return Err(EtError::Plan(arena_message(&m, &g)));
    }
    Ok((m, g, report.patches_applied))
}

/// Why the arena is too large: its size, the largest tensors and the symbols' maxima.
fn arena_message(m: &Method, g: &Graph) -> String {
    let mut big: Vec<(u64, String)> = m
        .values
        .iter()
        .filter_map(|v| match v {
            Value::Tensor(t) if matches!(t.data, Data::Planned(_)) => {
                Some((t.nbytes(), format!("{} {:?}", t.name, t.bound)))
            }
            _ => None,
        })
        .collect();
    big.sort_by_key(|b| std::cmp::Reverse(b.0));
    let symbols: Vec<String> = g.symbols.iter().map(|(s, r)| format!("{} <= {}", s.name(), r.max)).collect();
    format!(
        "the memory plan needs {:.1} GiB (limit {} GiB) at the upper bounds {}; largest: {}. ExecuTorch reserves \
         every tensor at its bound: give smaller maxima in dynamic_shapes (or a smaller --static-cache)",
        m.arena as f64 / (1u64 << 30) as f64,
        MAX_ARENA >> 30,
        symbols.join(", "),
        big.iter()
            .take(3)
            .map(|(b, n)| format!("{n} ({:.1} MiB)", *b as f64 / (1u64 << 20) as f64))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

pub fn export_component(
    graph: &Graph,
    src: &dyn TensorSource,
    dir: &Path,
    component: &str,
    cfg: &ExecutorchConfig,
    progress: Progress,
) -> Result<Written> {
    let (m, g, patches_applied) = method(graph, cfg)?;
    let file = format!("{component}.pte");
    let path = dir.join(&file);
    let io = |source: std::io::Error| EtError::Io { path: path.clone(), source };
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).map_err(io)?);
    let (head, seg) = pte::program_bytes(&m);
    out.write_all(&head).map_err(io)?;
    // bytes written since the segment base
    let mut at = 0u64;
    let pad_to = |out: &mut dyn Write, at: &mut u64, to: u64| -> std::io::Result<()> {
        out.write_all(&vec![0u8; (to - *at) as usize])?;
        *at = to;
        Ok(())
    };
    let n = m.constants.len() + m.delegates.iter().map(|d| d.weights.len()).sum::<usize>();
    let mut done = 0;
    let mut stream = |out: &mut dyn Write, c: &ConstSource, expected: u64, buffer: usize| -> Result<u64> {
        let written = match c {
            ConstSource::Weight(w) => {
                let w = &g.weights()[*w];
                progress(done, n, &w.name);
                w.expr.stream_le_bytes(src, &mut |b| out.write_all(b))?
            }
            ConstSource::Tensor(t) => {
                let b = t.to_le_bytes();
                out.write_all(&b).map_err(io)?;
                b.len() as u64
            }
        };
        done += 1;
        if written != expected {
            return Err(EtError::WeightSize { buffer, expected, actual: written });
        }
        Ok(written)
    };
    for (i, (c, size)) in m.constants.iter().enumerate() {
        pad_to(&mut out, &mut at, seg.constants[i + 1]).map_err(io)?;
        at += stream(&mut out, c, *size, i + 1)?;
    }
    for (d, &(offset, _)) in m.delegates.iter().zip(&seg.delegates) {
        pad_to(&mut out, &mut at, offset).map_err(io)?;
        out.write_all(&d.head).map_err(io)?;
        at += d.head.len() as u64;
        for (c, within, size) in &d.weights {
            pad_to(&mut out, &mut at, offset + within).map_err(io)?;
            at += stream(&mut out, c, *size, 0)?;
        }
    }
    out.flush().map_err(io)?;
    Ok(Written { files: vec![file], patches_applied, arena: m.arena })
}
