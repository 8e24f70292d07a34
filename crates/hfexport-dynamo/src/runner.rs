//! The libtorch runner (cargo feature `tch`): runs a program of a `.pt2` archive from Rust the
//! way `load_pt2(path).exported_programs[name].module()(*args)` runs it in Python (for a
//! forward export, `torch.export.load(path)`: the program `model`) — the program's ATen graph
//! is interpreted node by node with libtorch's own kernels (tch 0.26 over the torch 2.13 wheel).
//!
//! The archive is read with [`Pt2Archive`] (zip-slip, bounds, CRC), the program parsed once
//! into slots and typed arguments (an operator the table does not know is an error at load,
//! naming the node), and its parameters and lifted constants loaded from their raw files;
//! programs loaded together ([`Pt2Runner::load_programs`]) share the tensors of the files they
//! share, so a weight stored once for several components is in memory once.
//!
//! [`Pt2Runner::call`] has `module()`'s semantics: positional inputs in `forward_arg_names`
//! order, the user outputs returned, and every `user_input_mutation` written back into the
//! caller's tensor. A static-cache `index_copy` whose input is mutated and read by nothing
//! else runs in place (`index_copy_`), so a decode step writes its new slots straight into
//! the caller's cache and copies nothing else. Intermediate tensors are dropped after their
//! last use.

use crate::archive::{ArchiveError, Pt2Archive};
use hfexport_aten::lower::python_name;
use hfexport_core::backend::{Runner, Runtime};
use hfexport_core::generation::Generator;
use hfexport_core::metadata::Component;
use hfexport_core::{DType, ExportConfig, Tensor};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
pub use tch;
use tch::{Device, Kind, TchError};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// The program uses something this runner does not interpret (or is malformed).
    #[error("{}: {msg}", path.display())]
    Program { path: PathBuf, msg: String },
    /// libtorch refused a call.
    #[error("{}: node `{node}` ({target}): libtorch: {msg}", path.display())]
    Torch { path: PathBuf, node: String, target: String, msg: String },
    #[error("{}: {msg}", path.display())]
    Input { path: PathBuf, msg: String },
}

pub type Result<T> = std::result::Result<T, RunError>;

impl From<RunError> for hfexport_core::Error {
    fn from(e: RunError) -> hfexport_core::Error {
        hfexport_core::Error::Source(Box::new(e))
    }
}

/// `libtorch <version>`: what a runner and a generator report.
pub(crate) fn runtime_label() -> String {
    format!("libtorch {}", linked_version())
}

/// libtorch behind the core [`Runtime`] interface.
pub struct LibtorchRuntime;

impl Runtime for LibtorchRuntime {
    fn open_runner(
        &self,
        dir: &Path,
        component: &Component,
        _cfg: &ExportConfig,
    ) -> hfexport_core::Result<Box<dyn Runner>> {
        let runner = Pt2Runner::load(dir.join(component.file(".pt2")?), component.name())?;
        let outputs = component.outputs.iter().map(|p| p.name.clone()).collect();
        let aliases = component.aliases.iter().map(|a| (a.output.clone(), a.input.clone())).collect();
        Ok(Box::new(LibtorchComponent { runner, outputs, aliases }))
    }

    fn open_generator(&self, dir: &Path) -> hfexport_core::Result<Box<dyn Generator>> {
        Ok(Box::new(crate::generate::Pt2Generator::load(dir)?))
    }
}

/// A [`Pt2Runner`] behind the [`Runner`] interface: outputs named after the graph's, a static
/// cache's output is its input updated in place.
struct LibtorchComponent {
    runner: Pt2Runner,
    outputs: Vec<String>,
    aliases: BTreeMap<String, String>,
}

impl Runner for LibtorchComponent {
    fn runtime(&self) -> String {
        runtime_label()
    }

    fn run(&mut self, inputs: &BTreeMap<String, Tensor>) -> hfexport_core::Result<BTreeMap<String, Tensor>> {
        Ok(self.runner.run(inputs, &self.outputs, &self.aliases)?)
    }
}

/// The torch version of the libtorch this runner was built against (`2.13.0+cu130`).
pub fn linked_version() -> &'static str {
    option_env!("HFEXPORT_LIBTORCH_VERSION").unwrap_or("(unknown version)")
}

/// A SymInt operand: a constant or a slot holding one.
#[derive(Debug, Clone, Copy)]
enum Sym {
    Int(i64),
    Slot(usize),
}

/// A parsed argument.
#[derive(Debug, Clone)]
enum A {
    T(usize),
    Ts(Vec<usize>),
    OptTs(Vec<Option<usize>>),
    Int(i64),
    Ints(Vec<i64>),
    Sym(Sym),
    Syms(Vec<Sym>),
    Float(f64),
    Bool(bool),
    Kind(Kind),
    None,
}

/// The operators interpreted (the targets `hfexport-aten` emits, plus the SymInt arithmetic
/// torch itself writes).
#[derive(Debug, Clone, Copy)]
enum Target {
    SymSize,
    SymMul,
    SymAdd,
    SymSub,
    SymFloorDiv,
    Unary(fn(&tch::Tensor) -> std::result::Result<tch::Tensor, TchError>),
    Binary(fn(&tch::Tensor, &tch::Tensor) -> std::result::Result<tch::Tensor, TchError>),
    AddTensor,
    SubTensor,
    Where,
    ToCopy,
    Sum,
    Mean,
    Amax,
    Softmax,
    CumSum,
    Reshape,
    Permute,
    Expand,
    Cat,
    Slice,
    Index,
    Arange,
    Linear,
    LayerNorm,
    Convolution,
    ConstantPad,
    IndexCopy,
    Sdpa,
}

fn target_of(name: &str) -> Option<Target> {
    use Target::*;
    let name = name.strip_prefix("torch.ops.").unwrap_or(name);
    Some(match name {
        "aten.sym_size.int" => SymSize,
        "_operator.mul" => SymMul,
        "_operator.add" => SymAdd,
        "_operator.sub" => SymSub,
        "_operator.floordiv" => SymFloorDiv,
        "aten.neg.default" => Unary(tch::Tensor::f_neg),
        "aten.exp.default" => Unary(tch::Tensor::f_exp),
        "aten.sqrt.default" => Unary(tch::Tensor::f_sqrt),
        "aten.rsqrt.default" => Unary(tch::Tensor::f_rsqrt),
        "aten.reciprocal.default" => Unary(tch::Tensor::f_reciprocal),
        "aten.tanh.default" => Unary(tch::Tensor::f_tanh),
        "aten.sigmoid.default" => Unary(tch::Tensor::f_sigmoid),
        "aten.silu.default" => Unary(tch::Tensor::f_silu),
        "aten.cos.default" => Unary(tch::Tensor::f_cos),
        "aten.sin.default" => Unary(tch::Tensor::f_sin),
        "aten.erf.default" => Unary(tch::Tensor::f_erf),
        "aten.log.default" => Unary(tch::Tensor::f_log),
        "aten.relu.default" => Unary(tch::Tensor::f_relu),
        // exact GELU; a program passing `approximate` (a string) is refused at load
        "aten.gelu.default" => Unary(|x| x.f_gelu("none")),
        "aten.logical_not.default" => Unary(tch::Tensor::f_logical_not),
        "aten.add.Tensor" => AddTensor,
        "aten.sub.Tensor" => SubTensor,
        "aten.mul.Tensor" => Binary(tch::Tensor::f_mul),
        "aten.div.Tensor" => Binary(tch::Tensor::f_div),
        "aten.floor_divide.default" => Binary(tch::Tensor::f_floor_divide),
        "aten.pow.Tensor_Tensor" => Binary(tch::Tensor::f_pow),
        "aten.maximum.default" => Binary(tch::Tensor::f_maximum),
        "aten.minimum.default" => Binary(tch::Tensor::f_minimum),
        "aten.eq.Tensor" => Binary(tch::Tensor::f_eq_tensor),
        "aten.lt.Tensor" => Binary(tch::Tensor::f_lt_tensor),
        "aten.le.Tensor" => Binary(tch::Tensor::f_le_tensor),
        "aten.gt.Tensor" => Binary(tch::Tensor::f_gt_tensor),
        "aten.ge.Tensor" => Binary(tch::Tensor::f_ge_tensor),
        "aten.logical_and.default" => Binary(tch::Tensor::f_logical_and),
        "aten.logical_or.default" => Binary(tch::Tensor::f_logical_or),
        "aten.matmul.default" => Binary(tch::Tensor::f_matmul),
        "aten.where.self" => Where,
        "aten._to_copy.default" => ToCopy,
        "aten.sum.dim_IntList" => Sum,
        "aten.mean.dim" => Mean,
        "aten.amax.default" => Amax,
        "aten._softmax.default" => Softmax,
        "aten.cumsum.default" => CumSum,
        "aten.reshape.default" | "aten.view.default" => Reshape,
        "aten.permute.default" => Permute,
        "aten.expand.default" => Expand,
        "aten.cat.default" => Cat,
        "aten.slice.Tensor" => Slice,
        "aten.index.Tensor" => Index,
        "aten.arange.start_step" => Arange,
        "aten.linear.default" => Linear,
        "aten.layer_norm.default" => LayerNorm,
        "aten.convolution.default" => Convolution,
        "aten.constant_pad_nd.default" => ConstantPad,
        "aten.index_copy.default" => IndexCopy,
        "aten.scaled_dot_product_attention.default" => Sdpa,
        _ => return None,
    })
}

/// One call of the program.
#[derive(Debug, Clone)]
struct Node {
    name: String,
    target_name: String,
    target: Target,
    args: HashMap<String, A>,
    outputs: Vec<usize>,
    /// Run as `index_copy_` into its `self` (a mutated user input nothing else reads).
    in_place: bool,
}

/// What the program returns at each output position.
#[derive(Debug, Clone)]
enum OutSpec {
    /// The new contents of the user input at this position of `forward_arg_names`.
    Mutation {
        slot: usize,
        input: usize,
    },
    User(usize),
}

/// A user input of the program.
#[derive(Debug, Clone)]
pub struct InputInfo {
    /// The value name (`input_ids`, `input_cache_layers_0_keys`).
    pub name: String,
    pub dtype: Option<DType>,
    slot: usize,
}

/// A `.pt2` program loaded for libtorch — see the module docs.
pub struct Pt2Runner {
    path: PathBuf,
    /// The program's name in the archive (`model`, or a component: `prefill`, `decode`).
    program: String,
    inputs: Vec<InputInfo>,
    /// Parameters and lifted constants: (slot, tensor).
    state: Vec<(usize, tch::Tensor)>,
    nodes: Vec<Node>,
    outputs: Vec<OutSpec>,
    /// For each node, the slots whose last use it is.
    frees: Vec<Vec<usize>>,
    num_slots: usize,
}

/// The tch kind of a schema ScalarType number.
fn kind_of(st: i64) -> Option<Kind> {
    Some(match st {
        1 => Kind::Uint8,
        2 => Kind::Int8,
        4 => Kind::Int,
        5 => Kind::Int64,
        6 => Kind::Half,
        7 => Kind::Float,
        12 => Kind::Bool,
        13 => Kind::BFloat16,
        _ => return None,
    })
}

fn dtype_of(k: Kind) -> Option<DType> {
    Some(match k {
        Kind::Uint8 => DType::U8,
        Kind::Int8 => DType::I8,
        Kind::Int => DType::I32,
        Kind::Int64 => DType::I64,
        Kind::Half => DType::F16,
        Kind::Float => DType::F32,
        Kind::Bool => DType::Bool,
        Kind::BFloat16 => DType::BF16,
        _ => return None,
    })
}

pub(crate) fn kind_of_dtype(d: DType) -> Kind {
    match d {
        DType::U8 => Kind::Uint8,
        DType::I8 => Kind::Int8,
        DType::I32 => Kind::Int,
        DType::I64 => Kind::Int64,
        DType::F16 => Kind::Half,
        DType::F32 => Kind::Float,
        DType::Bool => Kind::Bool,
        DType::BF16 => Kind::BFloat16,
    }
}

/// A core tensor as a libtorch tensor (copied).
pub fn to_torch(t: &Tensor) -> std::result::Result<tch::Tensor, TchError> {
    let shape: Vec<i64> = t.shape().iter().map(|&d| d as i64).collect();
    tch::Tensor::f_from_data_size(&t.to_le_bytes(), &shape, kind_of_dtype(t.dtype()))
}

/// A libtorch tensor as a core tensor (copied).
pub fn from_torch(t: &tch::Tensor) -> std::result::Result<Tensor, String> {
    let kind = t.f_kind().map_err(|e| e.to_string())?;
    let dtype = dtype_of(kind)
        .ok_or_else(|| format!("libtorch returned a {kind:?} tensor, which hfexport has no dtype for"))?;
    let n = t.numel();
    let mut bytes = vec![0u8; n * dtype.size()];
    t.f_copy_data_u8(&mut bytes, n).map_err(|e| e.to_string())?;
    let shape = t.size().iter().map(|&d| d as usize).collect();
    Tensor::from_le_bytes(dtype, shape, &bytes).map_err(|e| e.to_string())
}

/// Interned value names.
#[derive(Default)]
struct Slots {
    ids: HashMap<String, usize>,
}

impl Slots {
    fn of(&mut self, name: &str) -> usize {
        let n = self.ids.len();
        *self.ids.entry(name.to_string()).or_insert(n)
    }
}

/// A JSON field as a string, or an error naming where.
fn str_at<'a>(v: &'a Value, what: &str) -> std::result::Result<&'a str, String> {
    v.as_str().ok_or_else(|| format!("{what} is not a string"))
}

fn parse_sym(v: &Value, slots: &mut Slots) -> std::result::Result<Sym, String> {
    if let Some(i) = v.get("as_int").and_then(Value::as_i64) {
        return Ok(Sym::Int(i));
    }
    match v.get("as_name").and_then(Value::as_str) {
        Some(n) => Ok(Sym::Slot(slots.of(n))),
        None => Err(format!("a SymInt that is neither as_int nor as_name: {v}")),
    }
}

fn tensor_name(v: &Value) -> std::result::Result<&str, String> {
    v.get("as_tensor")
        .and_then(|t| t.get("name"))
        .or_else(|| v.get("name"))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("not a tensor reference: {v}"))
}

fn parse_arg(v: &Value, slots: &mut Slots) -> std::result::Result<A, String> {
    let (key, body) = v
        .as_object()
        .and_then(|o| o.iter().next())
        .ok_or_else(|| format!("an argument that is not a one-key object: {v}"))?;
    let ints = |b: &Value| -> std::result::Result<Vec<i64>, String> {
        b.as_array()
            .and_then(|a| a.iter().map(Value::as_i64).collect::<Option<Vec<_>>>())
            .ok_or_else(|| format!("{key} is not a list of integers"))
    };
    let list = |b: &Value| b.as_array().cloned().ok_or_else(|| format!("{key} is not a list"));
    Ok(match key.as_str() {
        "as_tensor" => A::T(slots.of(tensor_name(v)?)),
        "as_tensors" => A::Ts(
            list(body)?.iter().map(|t| tensor_name(t).map(|n| slots.of(n))).collect::<std::result::Result<_, _>>()?,
        ),
        "as_optional_tensors" => A::OptTs(
            list(body)?
                .iter()
                .map(|t| if t.get("as_none").is_some() { Ok(None) } else { tensor_name(t).map(|n| Some(slots.of(n))) })
                .collect::<std::result::Result<_, _>>()?,
        ),
        "as_int" => A::Int(body.as_i64().ok_or("as_int is not an integer")?),
        "as_ints" => A::Ints(ints(body)?),
        "as_sym_int" => A::Sym(parse_sym(body, slots)?),
        "as_sym_ints" => {
            A::Syms(list(body)?.iter().map(|s| parse_sym(s, slots)).collect::<std::result::Result<_, _>>()?)
        }
        "as_float" => A::Float(body.as_f64().ok_or("as_float is not a number")?),
        "as_bool" => A::Bool(body.as_bool().ok_or("as_bool is not a boolean")?),
        "as_scalar_type" => {
            let st = body.as_i64().ok_or("as_scalar_type is not an integer")?;
            A::Kind(kind_of(st).ok_or_else(|| format!("ScalarType {st} is not supported"))?)
        }
        "as_none" => A::None,
        other => return Err(format!("argument kind `{other}` is not supported")),
    })
}

/// The slot named by an input/output spec's `arg` (`{"name": …}` or `{"as_tensor": …}`).
fn spec_slot(spec: &Value, slots: &mut Slots) -> std::result::Result<usize, String> {
    Ok(slots.of(tensor_name(&spec["arg"])?))
}

impl Pt2Runner {
    /// Loads the program `program` of a `.pt2` written by hfexport (or by `torch.export.save`,
    /// for the operators the table knows), like `load_pt2(path).exported_programs[program]`: an
    /// export's component (`model` for a forward export, `prefill`, `decode`…; for an archive of
    /// unknown programs, [`Pt2Archive::default_program`] names the one `torch.export.load`
    /// returns). Errors name the file and the node or entry at fault.
    pub fn load(path: impl AsRef<Path>, program: &str) -> Result<Pt2Runner> {
        Ok(Self::load_programs(path, &[program])?.pop().expect("one program asked for"))
    }

    /// Loads several programs of one archive, in the order asked; a payload file they share
    /// (a weight stored once for several components) is loaded once and shared read-only.
    pub fn load_programs(path: impl AsRef<Path>, programs: &[&str]) -> Result<Vec<Pt2Runner>> {
        let archive = Pt2Archive::open(path.as_ref())?;
        let mut shared = HashMap::new();
        programs.iter().map(|p| Self::from_archive(&archive, p, &mut shared)).collect()
    }

    /// Parses program `program` of a checked archive and loads its payloads (`shared`: the
    /// payloads loaded so far, by file, dtype and sizes).
    fn from_archive(
        archive: &Pt2Archive,
        program: &str,
        shared: &mut HashMap<String, tch::Tensor>,
    ) -> Result<Pt2Runner> {
        let path = archive.path.clone();
        let json = archive.program(program)?;
        // an archive of several programs: messages name the one at fault
        let label = if archive.programs.len() > 1 { format!("program `{program}`: ") } else { String::new() };
        let bad = |msg: String| RunError::Program { path: path.clone(), msg: format!("{label}{msg}") };
        let gm = &json["graph_module"];
        let graph = &gm["graph"];
        let mut slots = Slots::default();

        let mut nodes = vec![];
        for (i, n) in
            graph["nodes"].as_array().ok_or_else(|| bad("the program has no node list".into()))?.iter().enumerate()
        {
            let name = n["name"].as_str().map(str::to_string).unwrap_or_else(|| format!("#{i}"));
            let target_name =
                str_at(&n["target"], "target").map_err(|e| bad(format!("node `{name}`: {e}")))?.to_string();
            let target = target_of(&target_name).ok_or_else(|| {
                bad(format!("node `{name}` calls `{target_name}`, which the libtorch runner does not interpret"))
            })?;
            let mut args = HashMap::new();
            for a in n["inputs"].as_array().ok_or_else(|| bad(format!("node `{name}` has no inputs list")))? {
                let an = str_at(&a["name"], "argument name").map_err(|e| bad(format!("node `{name}`: {e}")))?;
                let av = parse_arg(&a["arg"], &mut slots)
                    .map_err(|e| bad(format!("node `{name}`, argument `{an}`: {e}")))?;
                args.insert(an.to_string(), av);
            }
            let mut outputs = vec![];
            for o in n["outputs"].as_array().ok_or_else(|| bad(format!("node `{name}` has no outputs list")))? {
                let slot = match o.get("as_sym_int") {
                    Some(s) => match parse_sym(s, &mut slots) {
                        Ok(Sym::Slot(s)) => s,
                        _ => return Err(bad(format!("node `{name}`: an output SymInt without a name"))),
                    },
                    None => slots.of(tensor_name(o).map_err(|e| bad(format!("node `{name}` output: {e}")))?),
                };
                outputs.push(slot);
            }
            if outputs.len() != 1 {
                return Err(bad(format!(
                    "node `{name}` has {} outputs; the runner's operators have one",
                    outputs.len()
                )));
            }
            nodes.push(Node { name, target_name, target, args, outputs, in_place: false });
        }

        // the signature: parameters, constants, user inputs (in order) and outputs
        let sig = &gm["signature"];
        let mut param_slots: Vec<(String, usize)> = vec![];
        let mut const_slots: Vec<(String, usize)> = vec![];
        let mut user_slots: Vec<usize> = vec![];
        for spec in sig["input_specs"].as_array().ok_or_else(|| bad("the signature has no input_specs".into()))? {
            let (kind, body) =
                spec.as_object().and_then(|o| o.iter().next()).ok_or_else(|| bad(format!("bad input spec {spec}")))?;
            let slot = spec_slot(body, &mut slots).map_err(|e| bad(format!("input spec {kind}: {e}")))?;
            match kind.as_str() {
                "parameter" | "buffer" => {
                    let fqn = body.get("parameter_name").or_else(|| body.get("buffer_name")).and_then(Value::as_str);
                    param_slots
                        .push((fqn.ok_or_else(|| bad(format!("input spec {spec} has no name")))?.to_string(), slot));
                }
                "tensor_constant" => {
                    let n = body["tensor_constant_name"]
                        .as_str()
                        .ok_or_else(|| bad(format!("input spec {spec} has no name")))?;
                    const_slots.push((n.to_string(), slot));
                }
                "user_input" => user_slots.push(slot),
                other => return Err(bad(format!("input spec kind `{other}` is not supported by the libtorch runner"))),
            }
        }
        let metas = &graph["tensor_values"];
        let inverse: HashMap<usize, String> = slots.ids.iter().map(|(k, &v)| (v, k.clone())).collect();
        let inputs: Vec<InputInfo> = user_slots
            .iter()
            .map(|&slot| {
                let name = inverse[&slot].clone();
                let dtype = metas[&name]["dtype"].as_i64().and_then(kind_of).and_then(dtype_of);
                InputInfo { name, dtype, slot }
            })
            .collect();
        let mut outputs = vec![];
        for spec in sig["output_specs"].as_array().ok_or_else(|| bad("the signature has no output_specs".into()))? {
            let (kind, body) =
                spec.as_object().and_then(|o| o.iter().next()).ok_or_else(|| bad(format!("bad output spec {spec}")))?;
            let slot = spec_slot(body, &mut slots).map_err(|e| bad(format!("output spec {kind}: {e}")))?;
            outputs.push(match kind.as_str() {
                "user_output" => OutSpec::User(slot),
                "user_input_mutation" => {
                    let target = body["user_input_name"]
                        .as_str()
                        .ok_or_else(|| bad(format!("output spec {spec} names no input")))?;
                    let input = inputs
                        .iter()
                        .position(|i| i.name == target)
                        .ok_or_else(|| bad(format!("a mutation of `{target}`, which is not a user input")))?;
                    OutSpec::Mutation { slot, input }
                }
                other => {
                    return Err(bad(format!("output spec kind `{other}` is not supported by the libtorch runner")))
                }
            });
        }

        let mut state = vec![];
        let mut load_payload = |config_entry: &str, dir: &str, names: &[(String, usize)]| -> Result<()> {
            if names.is_empty() {
                return Ok(());
            }
            let config: Value = serde_json::from_slice(&archive.entry(config_entry)?)
                .map_err(|e| bad(format!("{config_entry} is not JSON: {e}")))?;
            for (name, slot) in names {
                let entry = &config["config"][name];
                let file = entry["path_name"]
                    .as_str()
                    .ok_or_else(|| bad(format!("{config_entry} has no entry for `{name}`")))?;
                let t = load_tensor(archive, &format!("{dir}/{file}"), &entry["tensor_meta"], shared)
                    .map_err(|msg| bad(format!("`{name}`: {msg}")))?;
                state.push((*slot, t));
            }
            Ok(())
        };
        load_payload(&format!("data/weights/{program}_weights_config.json"), "data/weights", &param_slots)?;
        load_payload(&format!("data/constants/{program}_constants_config.json"), "data/constants", &const_slots)?;

        let num_slots = slots.ids.len();
        mark_in_place(&mut nodes, &inputs, &outputs);
        let frees = last_uses(&nodes, &outputs, num_slots);
        Ok(Pt2Runner { path, program: program.to_string(), inputs, state, nodes, outputs, frees, num_slots })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The program's name in its archive.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The user inputs, in call order.
    pub fn inputs(&self) -> &[InputInfo] {
        &self.inputs
    }

    /// Number of user outputs `call` returns.
    pub fn num_user_outputs(&self) -> usize {
        self.outputs.iter().filter(|o| matches!(o, OutSpec::User(_))).count()
    }

    /// `module()(*args)`: runs the program on `args` (in [`inputs`](Self::inputs) order),
    /// writes each mutated input's new contents into the caller's tensor and returns the user
    /// outputs.
    pub fn call(&self, args: &mut [tch::Tensor]) -> Result<Vec<tch::Tensor>> {
        if args.len() != self.inputs.len() {
            return Err(RunError::Input {
                path: self.path.clone(),
                msg: format!(
                    "program `{}` takes {} inputs ({}), {} were given",
                    self.program,
                    self.inputs.len(),
                    self.inputs.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", "),
                    args.len()
                ),
            });
        }
        let _guard = tch::no_grad_guard();
        let mut env: Vec<Option<V>> = (0..self.num_slots).map(|_| None).collect();
        for (slot, t) in &self.state {
            env[*slot] = Some(V::T(t.shallow_clone()));
        }
        for (info, t) in self.inputs.iter().zip(args.iter()) {
            if let Some(want) = info.dtype.map(kind_of_dtype) {
                let got = t.f_kind().map_err(|e| self.input_err(format!("`{}`: {e}", info.name)))?;
                if got != want {
                    return Err(self
                        .input_err(format!("`{}` is {got:?}; program `{}` takes {want:?}", info.name, self.program)));
                }
            }
            env[info.slot] = Some(V::T(t.shallow_clone()));
        }
        for (node, frees) in self.nodes.iter().zip(&self.frees) {
            let v = self.exec(node, &env).map_err(|msg| RunError::Torch {
                path: self.path.clone(),
                node: node.name.clone(),
                target: node.target_name.clone(),
                msg,
            })?;
            env[node.outputs[0]] = Some(v);
            for &s in frees {
                env[s] = None;
            }
        }
        let mut user = vec![];
        for o in &self.outputs {
            match *o {
                OutSpec::User(slot) => user.push(self.take_tensor(&env, slot)?),
                OutSpec::Mutation { slot, input } => {
                    let new = self.take_tensor(&env, slot)?;
                    let dst = &mut args[input];
                    if new.data_ptr() != dst.data_ptr() {
                        dst.f_copy_(&new).map_err(|e| {
                            self.input_err(format!("updating `{}` in place: {e}", self.inputs[input].name))
                        })?;
                    }
                }
            }
        }
        Ok(user)
    }

    fn input_err(&self, msg: String) -> RunError {
        RunError::Input { path: self.path.clone(), msg }
    }

    fn take_tensor(&self, env: &[Option<V>], slot: usize) -> Result<tch::Tensor> {
        match &env[slot] {
            Some(V::T(t)) => Ok(t.shallow_clone()),
            _ => Err(RunError::Program { path: self.path.clone(), msg: format!("output slot {slot} holds no tensor") }),
        }
    }

    /// Runs one node on the environment.
    fn exec(&self, n: &Node, env: &[Option<V>]) -> std::result::Result<V, String> {
        let r = Args { n, env };
        let te = |e: TchError| e.to_string().lines().next().unwrap_or_default().to_string();
        use Target::*;
        let t = match n.target {
            SymSize => {
                let x = r.tensor("self")?;
                let size = x.size();
                let d = r.int("dim")?;
                let i = if d < 0 { d + size.len() as i64 } else { d };
                return size
                    .get(i as usize)
                    .map(|&s| V::I(s))
                    .ok_or_else(|| format!("dim {d} of a rank-{} tensor", size.len()));
            }
            SymMul | SymAdd | SymSub | SymFloorDiv => {
                let (a, b) = (r.sym("a")?, r.sym("b")?);
                return Ok(V::I(match n.target {
                    SymMul => a * b,
                    SymAdd => a + b,
                    SymSub => a - b,
                    _ if b == 0 => return Err("floordiv by zero".into()),
                    _ => a.div_euclid(b),
                }));
            }
            Unary(f) => f(r.tensor("self")?).map_err(te)?,
            Binary(f) => {
                let second = if n.args.contains_key("exponent") { "exponent" } else { "other" };
                f(r.tensor("self")?, r.tensor(second)?).map_err(te)?
            }
            AddTensor | SubTensor => {
                let (a, mut b) = (r.tensor("self")?, r.tensor("other")?.shallow_clone());
                if let Some(alpha) = r.opt_float("alpha")?.filter(|&x| x != 1.0) {
                    b = b.f_mul_scalar(alpha).map_err(te)?;
                }
                if matches!(n.target, AddTensor) { a.f_add(&b) } else { a.f_sub(&b) }.map_err(te)?
            }
            Where => r.tensor("self")?.f_where_self(r.tensor("condition")?, r.tensor("other")?).map_err(te)?,
            ToCopy => {
                let x = r.tensor("self")?;
                let k = match n.args.get("dtype") {
                    Some(A::Kind(k)) => *k,
                    _ => x.f_kind().map_err(te)?,
                };
                x.f_to_dtype(k, false, true).map_err(te)?
            }
            Sum => r
                .tensor("self")?
                .f_sum_dim_intlist(r.ints("dim")?.as_slice(), r.bool_or("keepdim", false)?, None::<Kind>)
                .map_err(te)?,
            Mean => r
                .tensor("self")?
                .f_mean_dim(r.ints("dim")?.as_slice(), r.bool_or("keepdim", false)?, None::<Kind>)
                .map_err(te)?,
            Amax => r.tensor("self")?.f_amax(r.ints("dim")?.as_slice(), r.bool_or("keepdim", false)?).map_err(te)?,
            Softmax => r.tensor("self")?.f_internal_softmax(r.int("dim")?, false).map_err(te)?,
            CumSum => r.tensor("self")?.f_cumsum(r.int("dim")?, None::<Kind>).map_err(te)?,
            Reshape => {
                let key = if n.args.contains_key("shape") { "shape" } else { "size" };
                r.tensor("self")?.f_reshape(r.syms(key)?).map_err(te)?
            }
            Permute => r.tensor("self")?.f_permute(r.ints("dims")?).map_err(te)?,
            Expand => r.tensor("self")?.f_expand(r.syms("size")?, false).map_err(te)?,
            Cat => {
                let ts = r.tensors("tensors")?;
                tch::Tensor::f_cat(&ts, r.int_or("dim", 0)?).map_err(te)?
            }
            Slice => {
                let x = r.tensor("self")?;
                x.f_slice(r.int_or("dim", 0)?, r.opt_sym("start")?, r.opt_sym("end")?, r.opt_sym("step")?.unwrap_or(1))
                    .map_err(te)?
            }
            Index => {
                let idx = r.opt_tensors("indices")?;
                r.tensor("self")?.f_index(&idx).map_err(te)?
            }
            Arange => {
                let k = match n.args.get("dtype") {
                    Some(A::Kind(k)) => *k,
                    _ => Kind::Int64,
                };
                tch::Tensor::f_arange_start_step(
                    r.sym("start")?,
                    r.sym("end")?,
                    r.opt_sym("step")?.unwrap_or(1),
                    (k, Device::Cpu),
                )
                .map_err(te)?
            }
            Linear => r.tensor("input")?.f_linear(r.tensor("weight")?, r.opt_tensor("bias")?).map_err(te)?,
            LayerNorm => r
                .tensor("input")?
                .f_layer_norm(
                    r.syms("normalized_shape")?.as_slice(),
                    r.opt_tensor("weight")?,
                    r.opt_tensor("bias")?,
                    r.opt_float("eps")?.unwrap_or(1e-5),
                    r.bool_or("cudnn_enable", true)?,
                )
                .map_err(te)?,
            Convolution => r
                .tensor("input")?
                .f_convolution(
                    r.tensor("weight")?,
                    r.opt_tensor("bias")?,
                    r.ints("stride")?.as_slice(),
                    r.ints("padding")?.as_slice(),
                    r.ints("dilation")?.as_slice(),
                    r.bool_or("transposed", false)?,
                    r.ints("output_padding")?.as_slice(),
                    r.int_or("groups", 1)?,
                )
                .map_err(te)?,
            ConstantPad => {
                let value = r.opt_float("value")?.unwrap_or(0.0);
                r.tensor("self")?.f_pad(r.ints("pad")?.as_slice(), "constant", value).map_err(te)?
            }
            IndexCopy => {
                let (x, dim, index, source) =
                    (r.tensor("self")?, r.int("dim")?, r.tensor("index")?, r.tensor("source")?);
                if n.in_place {
                    let mut alias = x.shallow_clone();
                    alias.f_index_copy_(dim, index, source).map_err(te)?
                } else {
                    x.f_index_copy(dim, index, source).map_err(te)?
                }
            }
            Sdpa => tch::Tensor::f_scaled_dot_product_attention(
                r.tensor("query")?,
                r.tensor("key")?,
                r.tensor("value")?,
                r.opt_tensor("attn_mask")?,
                r.opt_float("dropout_p")?.unwrap_or(0.0),
                r.bool_or("is_causal", false)?,
                r.opt_float("scale")?,
                r.bool_or("enable_gqa", false)?,
            )
            .map_err(te)?,
        };
        Ok(V::T(t))
    }

    /// Runs the program on named core tensors: inputs by graph port name (`input_ids`,
    /// `past_key_values.0.key`) or value name; returns the outputs named after
    /// `output_names` (the graph's outputs, in order), where an output in `aliases`
    /// (output → input port) is the new contents of that input.
    pub fn run(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        output_names: &[String],
        aliases: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, Tensor>> {
        let by_value: BTreeMap<String, (&String, &Tensor)> =
            inputs.iter().map(|(k, v)| (python_name(k), (k, v))).collect();
        let mut args = vec![];
        let mut ports = vec![];
        for info in &self.inputs {
            let (port, t) =
                by_value.get(&info.name).ok_or_else(|| self.input_err(format!("missing input `{}`", info.name)))?;
            args.push(to_torch(t).map_err(|e| self.input_err(format!("`{port}`: {e}")))?);
            ports.push(port.to_string());
        }
        let user_names: Vec<&String> = output_names.iter().filter(|o| !aliases.contains_key(*o)).collect();
        if user_names.len() != self.num_user_outputs() {
            return Err(self.input_err(format!(
                "the program returns {} outputs, the caller names {} ({})",
                self.num_user_outputs(),
                user_names.len(),
                user_names.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
        let user = self.call(&mut args)?;
        let convert =
            |t: &tch::Tensor, name: &str| from_torch(t).map_err(|e| self.input_err(format!("output `{name}`: {e}")));
        let mut out = BTreeMap::new();
        for (name, t) in user_names.iter().zip(&user) {
            out.insert(name.to_string(), convert(t, name)?);
        }
        for (output, input) in aliases {
            let i = ports
                .iter()
                .position(|p| p == input)
                .ok_or_else(|| self.input_err(format!("output `{output}` aliases `{input}`, which is not an input")))?;
            out.insert(output.clone(), convert(&args[i], output)?);
        }
        Ok(out)
    }
}

/// A runtime value.
enum V {
    T(tch::Tensor),
    I(i64),
}

/// Typed argument lookups of one node.
struct Args<'a> {
    n: &'a Node,
    env: &'a [Option<V>],
}

impl<'a> Args<'a> {
    fn get(&self, name: &str) -> std::result::Result<&'a A, String> {
        self.n.args.get(name).ok_or_else(|| format!("argument `{name}` is missing"))
    }

    fn slot_tensor(&self, s: usize) -> std::result::Result<&'a tch::Tensor, String> {
        match &self.env[s] {
            Some(V::T(t)) => Ok(t),
            _ => Err(format!("slot {s} holds no tensor (used before it is computed)")),
        }
    }

    fn slot_int(&self, s: usize) -> std::result::Result<i64, String> {
        match &self.env[s] {
            Some(V::I(i)) => Ok(*i),
            _ => Err(format!("slot {s} holds no SymInt (used before it is computed)")),
        }
    }

    fn tensor(&self, name: &str) -> std::result::Result<&'a tch::Tensor, String> {
        match self.get(name)? {
            A::T(s) => self.slot_tensor(*s),
            other => Err(format!("argument `{name}` is {other:?}, not a tensor")),
        }
    }

    fn opt_tensor(&self, name: &str) -> std::result::Result<Option<&'a tch::Tensor>, String> {
        match self.n.args.get(name) {
            None | Some(A::None) => Ok(None),
            Some(_) => self.tensor(name).map(Some),
        }
    }

    fn tensors(&self, name: &str) -> std::result::Result<Vec<&'a tch::Tensor>, String> {
        match self.get(name)? {
            A::Ts(v) => v.iter().map(|&s| self.slot_tensor(s)).collect(),
            other => Err(format!("argument `{name}` is {other:?}, not a tensor list")),
        }
    }

    fn opt_tensors(&self, name: &str) -> std::result::Result<Vec<Option<&'a tch::Tensor>>, String> {
        match self.get(name)? {
            A::OptTs(v) => v.iter().map(|s| s.map(|s| self.slot_tensor(s)).transpose()).collect(),
            A::Ts(v) => v.iter().map(|&s| self.slot_tensor(s).map(Some)).collect(),
            other => Err(format!("argument `{name}` is {other:?}, not an optional tensor list")),
        }
    }

    fn sym_value(&self, s: Sym) -> std::result::Result<i64, String> {
        match s {
            Sym::Int(i) => Ok(i),
            Sym::Slot(s) => self.slot_int(s),
        }
    }

    fn int(&self, name: &str) -> std::result::Result<i64, String> {
        self.sym(name)
    }

    fn int_or(&self, name: &str, default: i64) -> std::result::Result<i64, String> {
        Ok(self.opt_sym(name)?.unwrap_or(default))
    }

    fn sym(&self, name: &str) -> std::result::Result<i64, String> {
        self.opt_sym(name)?.ok_or_else(|| format!("argument `{name}` is None, not an integer"))
    }

    fn opt_sym(&self, name: &str) -> std::result::Result<Option<i64>, String> {
        match self.n.args.get(name) {
            None | Some(A::None) => Ok(None),
            Some(A::Int(i)) => Ok(Some(*i)),
            Some(A::Sym(s)) => self.sym_value(*s).map(Some),
            Some(other) => Err(format!("argument `{name}` is {other:?}, not an integer")),
        }
    }

    fn ints(&self, name: &str) -> std::result::Result<Vec<i64>, String> {
        self.syms(name)
    }

    fn syms(&self, name: &str) -> std::result::Result<Vec<i64>, String> {
        match self.get(name)? {
            A::Ints(v) => Ok(v.clone()),
            A::Syms(v) => v.iter().map(|&s| self.sym_value(s)).collect(),
            A::Int(i) => Ok(vec![*i]),
            A::Sym(s) => Ok(vec![self.sym_value(*s)?]),
            other => Err(format!("argument `{name}` is {other:?}, not an integer list")),
        }
    }

    fn bool_or(&self, name: &str, default: bool) -> std::result::Result<bool, String> {
        match self.n.args.get(name) {
            None | Some(A::None) => Ok(default),
            Some(A::Bool(b)) => Ok(*b),
            Some(other) => Err(format!("argument `{name}` is {other:?}, not a bool")),
        }
    }

    fn opt_float(&self, name: &str) -> std::result::Result<Option<f64>, String> {
        match self.n.args.get(name) {
            None | Some(A::None) => Ok(None),
            Some(A::Float(f)) => Ok(Some(*f)),
            Some(A::Int(i)) => Ok(Some(*i as f64)),
            Some(other) => Err(format!("argument `{name}` is {other:?}, not a float")),
        }
    }
}

/// A payload file as a tensor of its `tensor_meta` (constant sizes; size checked); loaded once
/// per file, dtype and sizes into `shared` (the runner never writes into a payload).
fn load_tensor(
    archive: &Pt2Archive,
    entry: &str,
    meta: &Value,
    shared: &mut HashMap<String, tch::Tensor>,
) -> std::result::Result<tch::Tensor, String> {
    let st = meta["dtype"].as_i64().ok_or("its tensor_meta has no dtype")?;
    let kind = kind_of(st).ok_or_else(|| format!("ScalarType {st} is not supported"))?;
    let sizes: Vec<i64> = meta["sizes"]
        .as_array()
        .and_then(|a| a.iter().map(|s| s["as_int"].as_i64()).collect::<Option<Vec<_>>>())
        .ok_or("its tensor_meta sizes are not constants")?;
    let key = format!("{entry} {st} {sizes:?}");
    if let Some(t) = shared.get(&key) {
        return Ok(t.shallow_clone());
    }
    let bytes = archive.entry(entry).map_err(|e| e.to_string())?;
    let numel = sizes.iter().try_fold(1i64, |a, &d| if d < 0 { None } else { a.checked_mul(d) }).ok_or("bad sizes")?;
    let want = numel as usize * kind.elt_size_in_bytes();
    if bytes.len() != want {
        return Err(format!("{entry} holds {} bytes; sizes {sizes:?} of {kind:?} need {want}", bytes.len()));
    }
    let t = tch::Tensor::f_from_data_size(&bytes, &sizes, kind).map_err(|e| e.to_string())?;
    shared.insert(key, t.shallow_clone());
    Ok(t)
}

/// Marks the `index_copy` nodes that may write into their `self`: it is a user input whose
/// mutation is this node's result, and no other node reads that input.
fn mark_in_place(nodes: &mut [Node], inputs: &[InputInfo], outputs: &[OutSpec]) {
    for o in outputs {
        let OutSpec::Mutation { slot, input } = *o else { continue };
        let src = inputs[input].slot;
        let readers: Vec<usize> = nodes.iter().enumerate().filter(|(_, n)| reads(n, src)).map(|(i, _)| i).collect();
        if let [only] = readers[..] {
            let n = &mut nodes[only];
            if matches!(n.target, Target::IndexCopy)
                && n.outputs[0] == slot
                && matches!(n.args.get("self"), Some(A::T(s)) if *s == src)
            {
                n.in_place = true;
            }
        }
    }
}

fn slots_read(n: &Node) -> Vec<usize> {
    let mut v = vec![];
    for a in n.args.values() {
        match a {
            A::T(s) | A::Sym(Sym::Slot(s)) => v.push(*s),
            A::Ts(ss) => v.extend(ss),
            A::OptTs(ss) => v.extend(ss.iter().flatten()),
            A::Syms(ss) => v.extend(ss.iter().filter_map(|s| if let Sym::Slot(s) = s { Some(*s) } else { None })),
            _ => {}
        }
    }
    v
}

fn reads(n: &Node, slot: usize) -> bool {
    slots_read(n).contains(&slot)
}

/// For each node, the slots read for the last time there (never the program's outputs).
fn last_uses(nodes: &[Node], outputs: &[OutSpec], num_slots: usize) -> Vec<Vec<usize>> {
    let mut last: Vec<Option<usize>> = vec![None; num_slots];
    for (i, n) in nodes.iter().enumerate() {
        for s in slots_read(n) {
            last[s] = Some(i);
        }
    }
    let kept: HashSet<usize> = outputs
        .iter()
        .map(|o| match o {
            OutSpec::User(s) | OutSpec::Mutation { slot: s, .. } => *s,
        })
        .collect();
    let mut frees = vec![vec![]; nodes.len()];
    for (s, l) in last.iter().enumerate() {
        if let Some(i) = l.filter(|_| !kept.contains(&s)) {
            frees[i].push(s);
        }
    }
    frees
}
