//! A `.pte` read back and checked, and printed as readable instructions (`hfexport inspect`,
//! snapshot tests): the file identifier, the extended header and its segment bounds, the
//! flatbuffer (through the flatbuffers verifier, so a corrupt file is an error, not a crash),
//! every segment inside the file, the named data and every constant's offset inside the
//! constant segment, and each method.

use crate::generated::program::executorch_flatbuffer as fb;
use crate::program::dtype_of;
use std::fmt::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("{}: not a valid .pte program: {msg}", path.display())]
pub struct PteError {
    pub path: PathBuf,
    pub msg: String,
}

/// The checked parts of a `.pte` file (mapped, not read: a program's weights can be gigabytes
/// and only the flatbuffer at its start is parsed).
pub struct PteFile {
    pub path: PathBuf,
    pub bytes: memmap2::Mmap,
    /// Where the flatbuffer ends (the header's `program_size`, or the file's length).
    pub program_size: usize,
    pub segment_base: usize,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl PteFile {
    pub fn open(path: impl AsRef<Path>) -> Result<PteFile, PteError> {
        let path = path.as_ref().to_path_buf();
        let fail = |msg: String| PteError { path: path.clone(), msg };
        let file = std::fs::File::open(&path).map_err(|e| fail(format!("cannot open it: {e}")))?;
        // SAFETY: a read-only private map; a file truncated under us can fault, as for any
        // mmap'd checkpoint.
        let bytes = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| fail(format!("cannot map it: {e}")))?;
        if bytes.len() < 8 || &bytes[4..8] != b"ET12" {
            return Err(fail("no `ET12` file identifier at offset 4 (not an ExecuTorch program)".into()));
        }
        let (program_size, segment_base) = if bytes.len() >= 40 && &bytes[8..12] == b"eh00" {
            let header_len = u32_at(&bytes, 12) as usize;
            let (size, base, data) = (u64_at(&bytes, 16), u64_at(&bytes, 24), u64_at(&bytes, 32));
            if header_len < 32 {
                return Err(fail(format!("extended header length {header_len} < 32")));
            }
            let end = base.checked_add(data);
            if size as usize > bytes.len() || end.is_none_or(|e| e > bytes.len() as u64) || base < size {
                return Err(fail(format!(
                    "the extended header declares a program of {size} bytes and {data} segment bytes at {base}, but \
                     the file has {} bytes (truncated?)",
                    bytes.len()
                )));
            }
            (size as usize, base as usize)
        } else {
            (bytes.len(), bytes.len())
        };
        let file = PteFile { path, bytes, program_size, segment_base };
        let program = file.program()?;
        // every segment inside the file
        let segments: Vec<fb::DataSegment> = program.segments().iter().flatten().collect();
        for (i, seg) in segments.iter().enumerate() {
            let end = (file.segment_base as u64).checked_add(seg.offset()).and_then(|s| s.checked_add(seg.size_()));
            if end.is_none_or(|e| e > file.bytes.len() as u64) {
                return Err(file.fail(format!(
                    "segment {i} ({} bytes at {}) lies past the end of the file ({} bytes)",
                    seg.size_(),
                    seg.offset(),
                    file.bytes.len()
                )));
            }
        }
        let has = |i: u32| (i as usize) < segments.len();
        if let Some(cs) = program.constant_segment().filter(|_| !segments.is_empty()) {
            if !has(cs.segment_index()) {
                return Err(file.fail(format!("constant segment index {} has no segment", cs.segment_index())));
            }
        }
        for n in program.named_data().iter().flatten() {
            if !has(n.segment_index()) {
                return Err(file.fail(format!(
                    "named data `{}` is in segment {}, which does not exist",
                    n.key().unwrap_or("?"),
                    n.segment_index()
                )));
            }
        }
        Ok(file)
    }

    fn fail(&self, msg: String) -> PteError {
        PteError { path: self.path.clone(), msg }
    }

    /// The verified flatbuffer (the header's 32 bytes are part of it, as the runtime reads it).
    pub fn program(&self) -> Result<fb::Program<'_>, PteError> {
        let buf = &self.bytes[..self.program_size];
        fb::root_as_program(buf).map_err(|e| self.fail(format!("the flatbuffer does not verify: {e}")))
    }

    /// The names of the program's methods, in file order.
    pub fn method_names(&self) -> Result<Vec<String>, PteError> {
        let p = self.program()?;
        Ok(p.execution_plan().iter().flatten().map(|m| m.name().unwrap_or("").to_string()).collect())
    }

    /// The readable dump: the named data (key, segment, bytes), then each method's operators,
    /// values (with the plan), inputs, outputs, instructions.
    pub fn dump(&self) -> Result<String, PteError> {
        let p = self.program()?;
        let mut s = String::new();
        let offsets: Vec<u64> =
            p.constant_segment().and_then(|c| c.offsets()).map(|o| o.iter().collect()).unwrap_or_default();
        let named: Vec<fb::NamedData> = p.named_data().iter().flatten().collect();
        writeln!(
            s,
            "program v{}: {} constant buffers, {} named data",
            p.version(),
            offsets.len().saturating_sub(1),
            named.len()
        )
        .unwrap();
        let segments: Vec<fb::DataSegment> = p.segments().iter().flatten().collect();
        for n in &named {
            let i = n.segment_index() as usize;
            let size = segments.get(i).map_or(0, |g| g.size_());
            writeln!(s, "  named {}: segment {i}, {size} bytes", n.key().unwrap_or("?")).unwrap();
        }
        for plan in p.execution_plan().iter().flatten() {
            let sizes: Vec<i64> = plan.non_const_buffer_sizes().map(|v| v.iter().collect()).unwrap_or_default();
            writeln!(s, "method {}: arenas {sizes:?}", plan.name().unwrap_or("?")).unwrap();
            let ops: Vec<String> = plan
                .operators()
                .iter()
                .flatten()
                .map(|o| match o.overload().unwrap_or("") {
                    "" => o.name().unwrap_or("?").to_string(),
                    ov => format!("{}.{ov}", o.name().unwrap_or("?")),
                })
                .collect();
            let delegates: Vec<String> = plan
                .delegates()
                .iter()
                .flatten()
                .map(|d| {
                    let seg = d.processed().map_or(0, |p| p.index());
                    format!("{} (segment {seg})", d.id().unwrap_or("?"))
                })
                .collect();
            let values: Vec<fb::EValue> = plan.values().iter().flatten().collect();
            writeln!(s, "  values:").unwrap();
            for (i, v) in values.iter().enumerate() {
                writeln!(s, "    %{i} = {}", value(v, &offsets)).unwrap();
            }
            let list = |v: Option<flatbuffers::Vector<i32>>| {
                v.map(|v| v.iter().map(|i| format!("%{i}")).collect::<Vec<_>>().join(", ")).unwrap_or_default()
            };
            writeln!(s, "  inputs: [{}]", list(plan.inputs())).unwrap();
            writeln!(s, "  outputs: [{}]", list(plan.outputs())).unwrap();
            for chain in plan.chains().iter().flatten() {
                writeln!(s, "  instructions:").unwrap();
                for ins in chain.instructions().iter().flatten() {
                    if let Some(k) = ins.instr_args_as_kernel_call() {
                        let op = ops.get(k.op_index() as usize).map_or("?", String::as_str);
                        writeln!(s, "    {op}({})", list(k.args())).unwrap();
                    } else if let Some(d) = ins.instr_args_as_delegate_call() {
                        let i = d.delegate_index() as usize;
                        let id = delegates.get(i).map_or("?", String::as_str);
                        writeln!(s, "    delegate#{i} {id}({})", list(d.args())).unwrap();
                    } else {
                        writeln!(s, "    (instruction kind {})", ins.instr_args_type().0).unwrap();
                    }
                }
            }
        }
        Ok(s)
    }
}

/// One EValue, readable: `f32[<=4, 8] dyn @1+256`, `const#3 @+64`, `Int 1`, `IntList[%2, %7]`.
fn value(v: &fb::EValue, offsets: &[u64]) -> String {
    let items = |it: Option<Vec<String>>| it.unwrap_or_default().join(", ");
    match v.val_type() {
        fb::KernelTypes::Null => "Null".into(),
        fb::KernelTypes::Int => format!("Int {}", v.val_as_int().map_or(0, |x| x.int_val())),
        fb::KernelTypes::Bool => format!("Bool {}", v.val_as_bool().is_some_and(|x| x.bool_val())),
        fb::KernelTypes::Double => format!("Double {}", v.val_as_double().map_or(0.0, |x| x.double_val())),
        fb::KernelTypes::IntList => format!(
            "IntList[{}]",
            items(v.val_as_int_list().and_then(|l| l.items()).map(|l| l.iter().map(|i| format!("%{i}")).collect()))
        ),
        fb::KernelTypes::TensorList => format!(
            "TensorList[{}]",
            items(v.val_as_tensor_list().and_then(|l| l.items()).map(|l| l.iter().map(|i| format!("%{i}")).collect()))
        ),
        fb::KernelTypes::OptionalTensorList => format!(
            "OptionalTensorList[{}]",
            items(
                v.val_as_optional_tensor_list()
                    .and_then(|l| l.items())
                    .map(|l| { l.iter().map(|i| if i < 0 { "None".to_string() } else { format!("%{i}") }).collect() })
            )
        ),
        fb::KernelTypes::Tensor => {
            let Some(t) = v.val_as_tensor() else { return "Tensor (missing)".into() };
            let dtype = dtype_of(t.scalar_type().0)
                .map_or_else(|| format!("scalar_type {}", t.scalar_type().0), |d| d.name().to_string());
            let dynamic = t.shape_dynamism() == fb::TensorShapeDynamism::DYNAMIC_BOUND;
            let sizes: Vec<String> = t
                .sizes()
                .map(|s| s.iter().map(|d| if dynamic { format!("<={d}") } else { d.to_string() }).collect())
                .unwrap_or_default();
            let place = match (t.data_buffer_idx(), t.allocation_info()) {
                (0, Some(a)) => {
                    let off = (a.memory_offset_high() as u64) << 32 | a.memory_offset_low() as u64;
                    format!(" @{}+{off}", a.memory_id())
                }
                (0, None) => " (unplanned)".into(),
                (i, _) => format!(" const#{i} @+{}", offsets.get(i as usize).copied().unwrap_or(u64::MAX)),
            };
            format!("{dtype}[{}]{place}", sizes.join(", "))
        }
        other => format!("(kind {})", other.0),
    }
}
