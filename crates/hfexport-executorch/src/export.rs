//! The `.pte` exporter: core passes (every high-level op but `Linear`, `CacheUpdate` and relu
//! decomposed: ExecuTorch's kernel libraries register no attention, silu or index_copy), the
//! shared ATen lowering, an ExecuTorch method per component ([`crate::program`]) with its own
//! memory plan ([`crate::plan`]), and one file for all of them ([`crate::pte`]: `model.pte`,
//! each distinct weight stored once), weights streamed after the program.

use crate::program::{build, Alloc, Backend, ConstSource, Data, Method, Value};
use crate::{plan, pte, EtError, Result};
use hfexport_aten::lower;
use hfexport_core::backend::{
    compiled_in, Backend as HfBackend, DefaultBounds, Lowering, ModelFacts, Runtime, WeightProgress,
};
use hfexport_core::config::{ExecutorchBackend, ExecutorchConfig, ExportFormat};
use hfexport_core::metadata::Component;
use hfexport_core::plan::{ComponentSpec, Planned, Positions, Role};
use hfexport_core::sink::WeightSink;
use hfexport_core::{Activation, DType, ExportConfig, Graph, Op, QuantForm, QuantRecipe, TensorSource};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

/// The runtime the exports are built and checked for.
pub fn runtime_pins() -> BTreeMap<String, String> {
    BTreeMap::from([("executorch".to_string(), "1.5.1".to_string())])
}

/// The largest arena the plan accepts: ExecuTorch allocates it whole when the method loads.
pub const MAX_ARENA: u64 = 8 << 30;

/// Whether ExecuTorch lowers `op` natively (else core decomposes it first). Every variant is
/// listed, so a new op does not compile until it is decided here.
pub fn native(op: &Op) -> bool {
    match op {
        Op::Constant(_)
        | Op::Unary(_)
        | Op::Binary(_)
        | Op::Where
        | Op::Cast(_)
        | Op::MatMul
        | Op::Reduce { .. }
        | Op::Softmax { .. }
        | Op::CumSum { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Expand { .. }
        | Op::Concat { .. }
        | Op::Slice { .. }
        | Op::Gather { .. }
        | Op::Iota { .. } => true,
        // `Linear`: an XNNPACK FullyConnected delegate (or `linear.out`); `CacheUpdate`: an
        // in-place `index_put_` into the cache input
        Op::Linear | Op::CacheUpdate => true,
        // `relu.out`; the wheel's `gelu.out` takes a string argument (no EValue here carries one)
        // and nothing registers silu or quick_gelu
        Op::Activate(act) => match act {
            Activation::Relu => true,
            Activation::Gelu | Activation::GeluTanh | Activation::Silu | Activation::QuickGelu => false,
        },
        // the wheel's kernel libraries register no attention, RMS norm, rotary or silu, and layer
        // norm only as `native_layer_norm.out`, whose three outputs a call here cannot have; a
        // `ScatterSlots` (an OpenVINO patch's, never in a .pte graph) is not tied to a cache
        // input, so the in-place `index_put_` that `CacheUpdate` becomes would not be safe for it
        Op::Attention { .. }
        | Op::RmsNorm { .. }
        | Op::LayerNorm { .. }
        | Op::RotaryCosSin { .. }
        | Op::ApplyRotary
        | Op::GatedMlp { .. }
        | Op::ScatterSlots => false,
        // decomposed like `.pt2` (the shared ATen lowering has no top-k or MoE call); the
        // gathered experts run as portable `index_select` + `bmm`
        Op::TopK { .. } | Op::Moe { .. } => false,
        // int8 constants dequantized by portable kernels feeding `linear` / `index_select`
        // (a symmetric `QuantLinear` is an XNNPACK delegate instead: [`HfBackend::lowering`])
        Op::QuantLinear { .. } | Op::QuantGather { .. } => false,
        // unrolled over a static sequence by core (the program has no loop)
        Op::SelectiveScan | Op::DeltaScan => false,
        // portable `convolution.out` (and `constant_pad_nd.out`); max pooling decomposed like
        // `.pt2`'s
        Op::Conv { .. } => true,
        Op::MaxPool { .. } => false,
    }
}

/// Whether XNNPACK runs `QuantLinear` as a dynamically quantized FullyConnected (int8
/// activations per token; `qbint4` block-wise or `qcint8` per-channel weights, no zero point).
/// [`Executorch::quant_scales`] refuses the recipes it could not hold.
fn xnnpack_quant_linear(op: &Op, cfg: &ExportConfig) -> bool {
    let xnnpack = matches!(cfg, ExportConfig::Executorch(c) if c.backend == ExecutorchBackend::Xnnpack);
    xnnpack && matches!(op, Op::QuantLinear { bits: 4 | 8, zero_point: false, .. })
}

/// The `.pte` backend (`export_format: "executorch"`).
pub struct Executorch;

/// The one instance the facade lists.
pub static BACKEND: Executorch = Executorch;

pub(crate) fn executorch_config(cfg: &ExportConfig) -> hfexport_core::Result<&ExecutorchConfig> {
    match cfg {
        ExportConfig::Executorch(c) => Ok(c),
        other => Err(hfexport_core::Error::Config(format!(
            "the executorch backend got a {} config",
            other.format().as_str()
        ))),
    }
}

impl HfBackend for Executorch {
    fn format(&self) -> ExportFormat {
        ExportFormat::Executorch
    }

    fn lowering(&self, op: &Op, cfg: &ExportConfig) -> Lowering {
        if native(op) || xnnpack_quant_linear(op, cfg) {
            Lowering::Native
        } else {
            Lowering::Decompose
        }
    }

    fn runtime_pins(&self) -> BTreeMap<String, String> {
        runtime_pins()
    }

    /// XNNPACK's dynamically quantized linears take symmetric weights with positive scales
    /// only (torchao's convention), int8 per channel and int4 in blocks with bfloat16 scales
    /// (rounded before quantizing, as torchao's 8da4w does); the portable backend
    /// dequantizes anything.
    fn quant_form(&self, recipe: &QuantRecipe, cfg: &ExportConfig) -> hfexport_core::Result<QuantForm> {
        if executorch_config(cfg)?.backend != ExecutorchBackend::Xnnpack {
            return Ok(QuantForm::default());
        }
        let linears = [("weights", Some(recipe.weights)), ("lm_head", recipe.lm_head)];
        for (key, scheme) in linears.iter().filter_map(|(k, s)| s.map(|s| (k, s))) {
            let refused = match (scheme.symmetric, scheme.bits, scheme.group) {
                (false, _, _) => "XNNPACK's quantized linears have no zero points",
                (true, 8, Some(_)) => "XNNPACK's int8 linears are per channel (group_size \"channel\")",
                _ => continue,
            };
            return Err(hfexport_core::Error::Config(format!(
                "quantizer.{key} = {}: {refused}; use a symmetric recipe, or the portable backend \
                 (`\"backend\": \"portable\"`), which dequantizes every call",
                scheme.label()
            )));
        }
        Ok(QuantForm { group_scales: Some(DType::BF16), positive_scales: true })
    }

    fn write(
        &self,
        components: &[Planned],
        src: &dyn TensorSource,
        model: &ModelFacts,
        dir: &Path,
        cfg: &ExportConfig,
        progress: WeightProgress,
    ) -> hfexport_core::Result<Vec<hfexport_core::backend::Written>> {
        let cfg = executorch_config(cfg)?;
        let graphs: Vec<(&str, &Graph)> = components.iter().map(|c| (method_name(&c.spec), &c.graph)).collect();
        let arenas = export_program(&graphs, src, model, dir, cfg, progress)?;
        Ok(graphs
            .iter()
            .zip(arenas)
            .map(|((method, g), arena)| {
                let bounds: Vec<String> = g.symbols.iter().map(|(s, r)| format!("{} <= {}", s.name(), r.max)).collect();
                let at = match bounds.is_empty() {
                    true => String::new(),
                    false => format!(" at {}", bounds.join(", ")),
                };
                let note = format!("{FILE}, method `{method}`: memory plan of {}{at}", crate::bounds::mib(arena));
                hfexport_core::backend::Written { files: vec![FILE.to_string()], note: Some(note) }
            })
            .collect())
    }

    fn default_bounds(
        &self,
        components: &[Planned],
        open: &[BTreeSet<String>],
        cfg: &ExportConfig,
    ) -> hfexport_core::Result<DefaultBounds> {
        if open.iter().all(BTreeSet::is_empty) {
            return Ok(DefaultBounds::default());
        }
        let (prepared, _) = hfexport_core::backend::prepare(&BACKEND, cfg, components)?;
        Ok(crate::bounds::default_bounds(&prepared, open, executorch_config(cfg)?)?)
    }

    /// The stateful (default) generation export is called as ExecuTorch's LLM runners call a
    /// program: `forward(input_ids, cache_position)`, the cache in the program.
    fn slot_positions(&self, cfg: &ExportConfig) -> bool {
        executorch_config(cfg).is_ok_and(|c| c.stateful)
    }

    /// A decode called at `cache_position` keeps its caches as the program's mutable buffers:
    /// states, not ports.
    fn describe(&self, planned: &Planned, files: Vec<String>, _cfg: &ExportConfig) -> Component {
        let c = Component::from_planned(planned, files);
        match planned.spec.positions {
            Positions::Slots => c.fold_cache_pairs_into_states(),
            _ => c,
        }
    }

    fn runtime(&self) -> hfexport_core::Result<&'static dyn Runtime> {
        compiled_in(
            crate::RUNTIME,
            "running .pte exports needs the ExecuTorch runner, which is not compiled into this build: build \
             hfexport with the cargo feature `executorch-runtime` (hfexport-cli: `executorch-runtime`; it builds \
             against the executorch==1.5.1 wheel in .venv/)",
        )
    }

    fn runtime_name(&self) -> &'static str {
        "executorch"
    }
}

impl From<EtError> for hfexport_core::Error {
    fn from(e: EtError) -> hfexport_core::Error {
        match e {
            EtError::Core(c) => c,
            other => hfexport_core::Error::Source(Box::new(other)),
        }
    }
}

/// The method of a prepared graph: ATen lowering, kernels and memory plan.
pub fn method(g: &Graph, cfg: &ExecutorchConfig) -> Result<Method> {
    let mut m = unplanned_method(g, cfg)?;
    plan::plan(&mut m);
    if m.arena > MAX_ARENA {
        return Err(EtError::Plan(arena_message(&m, g)));
    }
    Ok(m)
}

/// The method of a prepared graph before its memory plan: ATen lowering and kernels.
pub fn unplanned_method(g: &Graph, cfg: &ExecutorchConfig) -> Result<Method> {
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
    let aten = lower(g)?;
    let alloc = Alloc {
        graph_input: cfg.alloc_graph_input,
        graph_output: cfg.alloc_graph_output,
        mutable_buffers: cfg.alloc_mutable_buffers,
    };
    Ok(build(&aten, g.weights(), &g.symbols, alloc, backend)?)
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

/// The file of every export: one program, a method per component.
pub const FILE: &str = "model.pte";

/// The method of a component in the program: `forward` for the forward graph and for a decode
/// called at `cache_position` (what upstream loaders and LLM runners call), else the
/// component's name (`prefill`, `decode`).
pub fn method_name(spec: &ComponentSpec) -> &str {
    match (spec.role, spec.positions) {
        (Role::Forward, _) | (Role::Decode, Positions::Slots) => "forward",
        _ => &spec.name,
    }
}

/// Writes [`FILE`]: a method per component (`(method name, prepared graph)`), each distinct
/// weight once for all of them, streamed one tensor at a time, and the LLM runner's constant
/// methods when one is its `forward` ([`crate::llm`], from the checkpoint's `model` facts).
/// Returns each component's arena.
pub fn export_program(
    components: &[(&str, &Graph)],
    src: &dyn TensorSource,
    model: &ModelFacts,
    dir: &Path,
    cfg: &ExecutorchConfig,
    progress: WeightProgress,
) -> Result<Vec<u64>> {
    let mut methods = vec![];
    for (name, g) in components {
        if methods.iter().any(|m: &Method| m.name == *name) {
            return Err(EtError::Plan(format!("two components are both method `{name}`")));
        }
        let mut m = method(g, cfg)?;
        m.name = name.to_string();
        methods.push(m);
    }
    let arenas: Vec<u64> = methods.iter().map(|m| m.arena).collect();
    // the method keeping its caches as buffers is the LLM runner's `forward`
    if let Some(i) = methods.iter().position(|m| !m.buffers.is_empty()) {
        methods.extend(crate::llm::constant_methods(components[i].1, model));
    }
    let layout = pte::Layout::of(&methods, |m, c| match c {
        ConstSource::Weight(w) => {
            let w = &components[m].1.weights()[*w];
            pte::Blob::Weight { name: w.name.clone(), expr: w.expr.clone() }
        }
        ConstSource::Tensor(t) => pte::Blob::Tensor(t.clone()),
        ConstSource::Derived { name, expr } => pte::Blob::Weight { name: name.clone(), expr: expr.clone() },
    })?;
    let path = dir.join(FILE);
    let io = |source: std::io::Error| EtError::Io { path: path.clone(), source };
    let mut out = WeightSink::create(&path).map_err(io)?;
    out.write_all(&pte::program_bytes(&methods, &layout)).map_err(io)?;
    // segment offsets count from the segment base, which follows the program
    let base = out.position();
    let n = layout.blobs();
    let mut done = 0;
    let mut stream = |out: &mut WeightSink, blob: &pte::Blob, expected: u64| -> Result<u64> {
        progress(done, n, &blob.name()).map_err(io)?;
        let written = match blob {
            pte::Blob::Weight { expr, .. } => expr.stream_le_bytes(src, &mut |b| out.write_all(b))?,
            pte::Blob::Tensor(t) => {
                let b = t.to_le_bytes();
                out.write_all(&b).map_err(io)?;
                b.len() as u64
            }
        };
        done += 1;
        if written != expected {
            return Err(EtError::WeightSize { name: blob.name(), expected, actual: written });
        }
        Ok(written)
    };
    for ((blob, size), &offset) in layout.constants.iter().zip(&layout.constant_offsets[1..]) {
        out.pad_to(base + offset).map_err(io)?;
        stream(&mut out, blob, *size)?;
    }
    for (payload, offset, _) in layout.delegates.iter().flatten() {
        out.pad_to(base + offset).map_err(io)?;
        out.write_all(payload).map_err(io)?;
    }
    for (named, offset) in &layout.named {
        out.pad_to(base + offset).map_err(io)?;
        stream(&mut out, &named.blob, named.size)?;
    }
    out.finish().map_err(io)?;
    Ok(arenas)
}
