//! The `.pte` file of an export: one program whose methods are the export's components
//! (`forward` for a forward export, `prefill` and `decode` for a generation export), each weight
//! stored once for all of them.
//!
//! The layout (`_program.py: serialize_pte_binary` of executorch 1.5.1): the `program.fbs`
//! flatbuffer (identifier `ET12`), the 32-byte `eh00` extended header at offset 8 when there are
//! segments, then the segments from a 128-aligned base, each 128-aligned:
//!
//! - segment 0, the program-wide constant segment: each distinct constant the kernels read, 16-byte
//!   aligned (`offsets[0]` is the empty placeholder); every method's tensors point at the same
//!   `data_buffer_idx` for the same weight, so the runtime loads it once;
//! - one segment per XNNPACK delegate payload of every method, in method order (graphs only);
//! - one segment per distinct weight the delegates read, listed in `Program.named_data` under the
//!   key the payloads name it by ([`crate::xnnpack`]).
//!
//! Weights are identified by their [`WeightExpr`] ([`WeightTable`]), lifted constants by their
//! bytes. Every offset is known from the sizes alone, so the flatbuffer is written first and the
//! weights are streamed after it, one tensor at a time.

use crate::generated::program::executorch_flatbuffer as fb;
use crate::plan::align;
use crate::program::{scalar_type, Call, ConstSource, Data, Method, Value};
use crate::{EtError, Result};
use flatbuffers::{FlatBufferBuilder, WIPOffset};
use hfexport_core::backend::WeightTable;
use hfexport_core::{DType, Tensor, WeightExpr};
use std::collections::HashMap;

/// Segment base alignment, and the alignment of every segment.
pub const SEGMENT_ALIGN: u64 = 128;
/// Alignment of each constant in the constant segment.
pub const CONSTANT_ALIGN: u64 = 16;
/// Bytes of the extended header.
pub const HEADER_LEN: usize = 32;

/// The backend id of XNNPACK delegates.
pub const XNNPACK_ID: &str = "XnnpackBackend";

/// The bytes of a constant, resolved to what identifies them across methods.
#[derive(Debug, Clone, PartialEq)]
pub enum Blob {
    /// A checkpoint weight: its graph name (progress) and its expression (identity).
    Weight { name: String, expr: WeightExpr },
    /// A lifted constant.
    Tensor(Tensor),
}

impl Blob {
    pub fn name(&self) -> String {
        match self {
            Blob::Weight { name, .. } => name.clone(),
            Blob::Tensor(t) => format!("{}{:?} constant", t.dtype().name(), t.shape()),
        }
    }
}

/// Distinct blobs, each placed once: weights by expression, lifted constants by bytes.
#[derive(Debug, Default)]
struct Store {
    weights: WeightTable<usize>,
    tensors: HashMap<(DType, Vec<usize>, Vec<u8>), usize>,
    blobs: Vec<(Blob, u64)>,
}

impl Store {
    /// The index of `blob` in the store, added the first time.
    fn place(&mut self, blob: Blob, size: u64) -> Result<usize> {
        let Store { weights, tensors, blobs } = self;
        let mut add = |blob: Blob| {
            blobs.push((blob, size));
            blobs.len() - 1
        };
        let i = match &blob {
            Blob::Weight { expr, .. } => weights.place(expr, || Ok::<_, EtError>(add(blob.clone())))?,
            Blob::Tensor(t) => {
                let key = (t.dtype(), t.shape().to_vec(), t.to_le_bytes());
                *tensors.entry(key).or_insert_with(|| add(blob.clone()))
            }
        };
        if self.blobs[i].1 != size {
            return Err(EtError::Plan(format!(
                "constant `{}` is read as {} bytes and as {size}",
                blob.name(),
                self.blobs[i].1
            )));
        }
        Ok(i)
    }
}

/// One named data blob: the key the delegates name it by, what it is, its bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Named {
    pub key: String,
    pub blob: Blob,
    pub size: u64,
}

/// Where everything of a program goes, relative to the segment base.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// The distinct constants of segment 0, buffer `i + 1` each, with their sizes.
    pub constants: Vec<(Blob, u64)>,
    /// Their offsets in segment 0 (`[0]` is the empty placeholder).
    pub constant_offsets: Vec<u64>,
    pub constants_size: u64,
    /// Per method: the program buffer of each of its constants (`[local] = global`, `[0] = 0`).
    pub buffers: Vec<Vec<u32>>,
    /// Per method, per delegate: the payload and its (offset, size) (segments 1.. in order).
    pub delegates: Vec<Vec<(Vec<u8>, u64, u64)>>,
    /// The distinct weights of the delegates and their (offset, size), after the payloads.
    pub named: Vec<(Named, u64)>,
    /// Bytes from the base to the end of the last segment.
    pub total: u64,
}

impl Layout {
    /// The layout of `methods`; `blob` resolves a constant of method `m`.
    pub fn of(methods: &[Method], blob: impl Fn(usize, &ConstSource) -> Blob) -> Result<Layout> {
        let (mut constants, mut named) = (Store::default(), Store::default());
        let mut buffers = vec![];
        let mut keys: Vec<Vec<Vec<usize>>> = vec![];
        for (m, method) in methods.iter().enumerate() {
            let mut map = vec![0u32];
            for (c, size) in &method.constants {
                map.push(constants.place(blob(m, c), *size)? as u32 + 1);
            }
            buffers.push(map);
            let mut per = vec![];
            for d in &method.delegates {
                per.push(d.weights.iter().map(|(c, size)| named.place(blob(m, c), *size)).collect::<Result<_>>()?);
            }
            keys.push(per);
        }
        // keys: a weight's expression (unique among weights), a constant's place
        let mut taken = std::collections::HashSet::new();
        let named: Vec<Named> = named
            .blobs
            .into_iter()
            .enumerate()
            .map(|(i, (blob, size))| {
                let mut key = match &blob {
                    Blob::Weight { expr, .. } => expr.to_string(),
                    Blob::Tensor(_) => format!("constant.{i}"),
                };
                if !taken.insert(key.clone()) {
                    key = format!("{key}#{i}");
                    taken.insert(key.clone());
                }
                Named { key, blob, size }
            })
            .collect();
        let mut constant_offsets = vec![0u64];
        let mut at = 0u64;
        for (i, (_, size)) in constants.blobs.iter().enumerate() {
            if i > 0 {
                at = align(at, CONSTANT_ALIGN);
            }
            constant_offsets.push(at);
            at += size;
        }
        let constants_size = at;
        let mut end = constants_size;
        let mut place = |size: u64| {
            let at = align(end, SEGMENT_ALIGN);
            end = at + size;
            at
        };
        let delegates = methods
            .iter()
            .zip(&keys)
            .map(|(method, keys)| {
                method
                    .delegates
                    .iter()
                    .zip(keys)
                    .map(|(d, k)| {
                        let names: Vec<String> = k.iter().map(|&i| named[i].key.clone()).collect();
                        let payload = d.payload(&names);
                        let len = payload.len() as u64;
                        (payload, place(len), len)
                    })
                    .collect()
            })
            .collect();
        let named = named.into_iter().map(|n| (place(n.size), n)).map(|(at, n)| (n, at)).collect();
        Ok(Layout {
            constants: constants.blobs,
            constant_offsets,
            constants_size,
            buffers,
            delegates,
            named,
            total: end,
        })
    }

    pub fn any(&self) -> bool {
        self.total > 0 || self.delegates.iter().any(|d| !d.is_empty()) || !self.named.is_empty()
    }

    /// Number of stored blobs (constants and named data).
    pub fn blobs(&self) -> usize {
        self.constants.len() + self.named.len()
    }
}

fn evalue<'a>(b: &mut FlatBufferBuilder<'a>, v: &Value, constants: &[u32]) -> WIPOffset<fb::EValue<'a>> {
    let (val_type, val) = match v {
        Value::Null => (fb::KernelTypes::Null, fb::Null::create(b, &fb::NullArgs {}).as_union_value()),
        Value::Int(i) => (fb::KernelTypes::Int, fb::Int::create(b, &fb::IntArgs { int_val: *i }).as_union_value()),
        Value::Bool(x) => (fb::KernelTypes::Bool, fb::Bool::create(b, &fb::BoolArgs { bool_val: *x }).as_union_value()),
        Value::Double(d) => {
            (fb::KernelTypes::Double, fb::Double::create(b, &fb::DoubleArgs { double_val: *d }).as_union_value())
        }
        Value::IntList(items) => {
            let items: Vec<i64> = items.iter().map(|&i| i as i64).collect();
            let items = b.create_vector(&items);
            (fb::KernelTypes::IntList, fb::IntList::create(b, &fb::IntListArgs { items: Some(items) }).as_union_value())
        }
        Value::TensorList(items) => {
            let items: Vec<i32> = items.iter().map(|&i| i as i32).collect();
            let items = b.create_vector(&items);
            let t = fb::TensorList::create(b, &fb::TensorListArgs { items: Some(items) });
            (fb::KernelTypes::TensorList, t.as_union_value())
        }
        Value::OptTensorList(items) => {
            let items: Vec<i32> = items.iter().map(|i| i.map_or(-1, |i| i as i32)).collect();
            let items = b.create_vector(&items);
            let t = fb::OptionalTensorList::create(b, &fb::OptionalTensorListArgs { items: Some(items) });
            (fb::KernelTypes::OptionalTensorList, t.as_union_value())
        }
        Value::Tensor(t) => {
            let sizes: Vec<i32> = t.bound.iter().map(|&d| d as i32).collect();
            let sizes = b.create_vector(&sizes);
            let order: Vec<u8> = (0..t.bound.len() as u8).collect();
            let dim_order = b.create_vector(&order);
            let (data_buffer_idx, allocation_info) = match t.data {
                Data::Constant(i) => (constants[i], None),
                Data::Planned(offset) => {
                    let o = offset.expect("the plan placed every planned tensor");
                    let a = fb::AllocationDetails::create(
                        b,
                        &fb::AllocationDetailsArgs {
                            memory_id: 1,
                            memory_offset_low: o as u32,
                            memory_offset_high: (o >> 32) as u32,
                        },
                    );
                    (0, Some(a))
                }
                Data::Unplanned | Data::Alias(_) => (0, None),
            };
            let shape_dynamism =
                if t.dynamic() { fb::TensorShapeDynamism::DYNAMIC_BOUND } else { fb::TensorShapeDynamism::STATIC };
            let x = fb::Tensor::create(
                b,
                &fb::TensorArgs {
                    scalar_type: fb::ScalarType(scalar_type(t.dtype)),
                    sizes: Some(sizes),
                    dim_order: Some(dim_order),
                    data_buffer_idx,
                    allocation_info,
                    shape_dynamism,
                    ..Default::default()
                },
            );
            (fb::KernelTypes::Tensor, x.as_union_value())
        }
    };
    fb::EValue::create(b, &fb::EValueArgs { val_type, val: Some(val) })
}

/// The execution plan of one method; its delegates are segments from `first_segment`.
fn plan<'a>(
    b: &mut FlatBufferBuilder<'a>,
    m: &Method,
    constants: &[u32],
    first_segment: u32,
) -> WIPOffset<fb::ExecutionPlan<'a>> {
    let values: Vec<_> = m.values.iter().map(|v| evalue(b, v, constants)).collect();
    let values = b.create_vector(&values);
    let ins: Vec<i32> = m.inputs.iter().map(|&i| i as i32).collect();
    let inputs = b.create_vector(&ins);
    let outs: Vec<i32> = m.outputs.iter().map(|&i| i as i32).collect();
    let outputs = b.create_vector(&outs);
    let instrs: Vec<_> = m
        .instrs
        .iter()
        .map(|ins| {
            let args: Vec<i32> = ins.args.iter().map(|&a| a as i32).collect();
            let args = Some(b.create_vector(&args));
            let (kind, call) = match ins.call {
                Call::Kernel(op) => (
                    fb::InstructionArguments::KernelCall,
                    fb::KernelCall::create(b, &fb::KernelCallArgs { op_index: op as i32, args }).as_union_value(),
                ),
                Call::Delegate(d) => (
                    fb::InstructionArguments::DelegateCall,
                    fb::DelegateCall::create(b, &fb::DelegateCallArgs { delegate_index: d as i32, args })
                        .as_union_value(),
                ),
            };
            fb::Instruction::create(b, &fb::InstructionArgs { instr_args_type: kind, instr_args: Some(call) })
        })
        .collect();
    let instructions = b.create_vector(&instrs);
    let chain = fb::Chain::create(b, &fb::ChainArgs { instructions: Some(instructions), ..Default::default() });
    let chains = b.create_vector(&[chain]);
    let ops: Vec<_> = m
        .operators
        .iter()
        .map(|(name, overload)| {
            let name = b.create_string(name);
            let overload = b.create_string(overload);
            fb::Operator::create(b, &fb::OperatorArgs { name: Some(name), overload: Some(overload) })
        })
        .collect();
    let operators = b.create_vector(&ops);
    // entry 0 is reserved; a method with nothing planned (a constant) has no arena
    let buffers = match m.arena {
        0 => b.create_vector(&[0i64]),
        arena => b.create_vector(&[0i64, arena as i64]),
    };
    // the runtime requires the field, even empty
    let delegates: Vec<_> = (0..m.delegates.len())
        .map(|i| {
            let id = b.create_string(XNNPACK_ID);
            let processed = fb::BackendDelegateDataReference::create(
                b,
                &fb::BackendDelegateDataReferenceArgs {
                    location: fb::DataLocation::SEGMENT,
                    index: first_segment + i as u32,
                },
            );
            let compile_specs = b.create_vector::<flatbuffers::WIPOffset<fb::CompileSpec>>(&[]);
            fb::BackendDelegate::create(
                b,
                &fb::BackendDelegateArgs {
                    id: Some(id),
                    processed: Some(processed),
                    compile_specs: Some(compile_specs),
                },
            )
        })
        .collect();
    let delegates = b.create_vector(&delegates);
    let name = b.create_string(&m.name);
    fb::ExecutionPlan::create(
        b,
        &fb::ExecutionPlanArgs {
            name: Some(name),
            values: Some(values),
            inputs: Some(inputs),
            outputs: Some(outputs),
            chains: Some(chains),
            operators: Some(operators),
            non_const_buffer_sizes: Some(buffers),
            delegates: Some(delegates),
            ..Default::default()
        },
    )
}

/// The flatbuffer of the program (no extended header yet).
fn flatbuffer(methods: &[Method], layout: &Layout) -> Vec<u8> {
    let mut b = FlatBufferBuilder::with_capacity(1 << 16);
    let mut next_segment = 1u32;
    let plans: Vec<_> = methods
        .iter()
        .zip(&layout.buffers)
        .map(|(m, buffers)| {
            let p = plan(&mut b, m, buffers, next_segment);
            next_segment += m.delegates.len() as u32;
            p
        })
        .collect();
    let plans = b.create_vector(&plans);
    let offsets = b.create_vector(&layout.constant_offsets);
    let constant_segment =
        fb::SubsegmentOffsets::create(&mut b, &fb::SubsegmentOffsetsArgs { segment_index: 0, offsets: Some(offsets) });
    let segments = layout.any().then(|| {
        let mut all =
            vec![fb::DataSegment::create(&mut b, &fb::DataSegmentArgs { offset: 0, size_: layout.constants_size })];
        let delegates = layout.delegates.iter().flatten().map(|(_, offset, size)| (*offset, *size));
        let named = layout.named.iter().map(|(n, offset)| (*offset, n.size));
        for (offset, size_) in delegates.chain(named) {
            all.push(fb::DataSegment::create(&mut b, &fb::DataSegmentArgs { offset, size_ }));
        }
        b.create_vector(&all)
    });
    let named_data = (!layout.named.is_empty()).then(|| {
        let first = next_segment;
        let all: Vec<_> = layout
            .named
            .iter()
            .enumerate()
            .map(|(i, (n, _))| {
                let key = b.create_string(&n.key);
                fb::NamedData::create(&mut b, &fb::NamedDataArgs { key: Some(key), segment_index: first + i as u32 })
            })
            .collect();
        b.create_vector(&all)
    });
    let program = fb::Program::create(
        &mut b,
        &fb::ProgramArgs {
            version: 0,
            execution_plan: Some(plans),
            segments,
            constant_segment: Some(constant_segment),
            named_data,
            ..Default::default()
        },
    );
    fb::finish_program_buffer(&mut b, program);
    b.finished_data().to_vec()
}

/// The bytes before the segment area: the flatbuffer of `methods` (distinct names) with its
/// extended header, padded to the segment base (everything when there are no segments), and
/// the segments' layout.
pub fn program_bytes(methods: &[Method], layout: &Layout) -> Vec<u8> {
    let fbuf = flatbuffer(methods, layout);
    if !layout.any() {
        return fbuf;
    }
    let segment_size = layout.total;
    let program_size = (fbuf.len() + HEADER_LEN) as u64;
    let base = align(program_size, SEGMENT_ALIGN);
    let mut out = Vec::with_capacity(base as usize);
    let root = u32::from_le_bytes(fbuf[0..4].try_into().expect("4 bytes")) + HEADER_LEN as u32;
    out.extend_from_slice(&root.to_le_bytes());
    out.extend_from_slice(&fbuf[4..8]);
    out.extend_from_slice(b"eh00");
    out.extend_from_slice(&(HEADER_LEN as u32).to_le_bytes());
    out.extend_from_slice(&program_size.to_le_bytes());
    out.extend_from_slice(&base.to_le_bytes());
    out.extend_from_slice(&segment_size.to_le_bytes());
    out.extend_from_slice(&fbuf[8..]);
    out.resize(base as usize, 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generated::xnnpack::fb_xnnpack as xf;
    use crate::program::TensorValue;
    use crate::xnnpack;
    use hfexport_core::Dim;

    fn tensor(dims: &[i64]) -> TensorValue {
        TensorValue {
            dtype: DType::F32,
            sizes: dims.iter().map(|&d| Dim::konst(d)).collect(),
            bound: dims.to_vec(),
            data: Data::Planned(Some(0)),
            name: String::new(),
        }
    }

    /// A method reading weight 0 in a kernel, weight `linear` in an XNNPACK linear (with bias
    /// weight 2), and a lifted scalar.
    fn method(name: &str, linear: usize) -> Method {
        let scalar = Tensor::f32(vec![], vec![0.5]).unwrap();
        let fc = xnnpack::fully_connected(
            &tensor(&[1, 4]),
            (ConstSource::Weight(linear), &[3, 4]),
            Some((ConstSource::Weight(2), &[3])),
            &tensor(&[1, 3]),
        );
        Method {
            name: name.into(),
            constants: vec![(ConstSource::Weight(0), 32), (ConstSource::Tensor(scalar), 4)],
            delegates: vec![fc],
            ..Default::default()
        }
    }

    /// Weight `i` of every method is the stored tensor `w<i>`.
    fn blob(_: usize, c: &ConstSource) -> Blob {
        match c {
            ConstSource::Weight(i) => Blob::Weight { name: format!("w{i}"), expr: WeightExpr::Stored(format!("w{i}")) },
            ConstSource::Tensor(t) => Blob::Tensor(t.clone()),
            ConstSource::Derived { name, expr } => Blob::Weight { name: name.clone(), expr: expr.clone() },
        }
    }

    fn keys(payload: &[u8]) -> Vec<(u64, u64, Option<String>)> {
        let size = u32::from_le_bytes(payload[14..18].try_into().unwrap()) as usize;
        let g = xf::root_as_xnngraph(&payload[32..32 + size]).unwrap();
        g.constant_data().unwrap().iter().map(|c| (c.offset(), c.size_(), c.named_key().map(str::to_string))).collect()
    }

    /// Two methods share every constant and every delegate weight they have in common: one
    /// constant buffer each for the weight and the lifted scalar, one named blob per distinct
    /// delegate weight; the payloads name their weights and embed none.
    #[test]
    fn methods_share_each_distinct_weight() {
        let layout = Layout::of(&[method("prefill", 1), method("decode", 1)], blob).unwrap();
        assert_eq!(layout.constants.len(), 2);
        assert_eq!(layout.constant_offsets, [0, 0, 32]);
        assert_eq!(layout.buffers, [vec![0, 1, 2], vec![0, 1, 2]]);
        let named: Vec<(&str, u64)> = layout.named.iter().map(|(n, _)| (n.key.as_str(), n.size)).collect();
        assert_eq!(named, [("w1", 48), ("w2", 12)]);
        let payloads: Vec<&Vec<u8>> = layout.delegates.iter().flatten().map(|(p, _, _)| p).collect();
        assert_eq!(payloads[0], payloads[1]);
        let want = vec![(0, 0, None), (u64::MAX, 48, Some("w1".into())), (u64::MAX, 12, Some("w2".into()))];
        assert_eq!(keys(payloads[0]), want);
        // XH00: constant data size 0, the payload ends at the (16-aligned) flatbuffer
        assert_eq!(u64::from_le_bytes(payloads[0][22..30].try_into().unwrap()), 0);
        // segments: constants, 2 payloads, 2 named blobs, each 128-aligned and in order
        let mut ends = vec![layout.constants_size];
        for (p, offset, size) in layout.delegates.iter().flatten() {
            assert_eq!((*offset % SEGMENT_ALIGN, *size), (0, p.len() as u64));
            assert!(*offset >= *ends.last().unwrap());
            ends.push(offset + size);
        }
        for (n, offset) in &layout.named {
            assert!(*offset % SEGMENT_ALIGN == 0 && *offset >= *ends.last().unwrap());
            ends.push(offset + n.size);
        }
        assert_eq!(layout.total, *ends.last().unwrap());

        // a weight only one method reads is stored for it alone
        let layout = Layout::of(&[method("prefill", 1), method("decode", 3)], blob).unwrap();
        let named: Vec<&str> = layout.named.iter().map(|(n, _)| n.key.as_str()).collect();
        assert_eq!(named, ["w1", "w2", "w3"]);
        assert_eq!(layout.blobs(), 5);
        assert_ne!(layout.delegates[0][0].0, layout.delegates[1][0].0);
    }

    /// The program lists each method by name, one constant segment, the payload segments of
    /// every method in order, then the named data.
    #[test]
    fn the_program_lists_methods_segments_and_named_data() {
        let methods = [method("prefill", 1), method("decode", 1)];
        let layout = Layout::of(&methods, blob).unwrap();
        let bytes = program_bytes(&methods, &layout);
        assert_eq!(&bytes[4..12], b"ET12eh00");
        let size = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
        let p = fb::root_as_program(&bytes[..size]).unwrap();
        let names: Vec<&str> = p.execution_plan().unwrap().iter().map(|m| m.name().unwrap()).collect();
        assert_eq!(names, ["prefill", "decode"]);
        let delegate_segments: Vec<u32> = p
            .execution_plan()
            .unwrap()
            .iter()
            .flat_map(|m| m.delegates().unwrap().iter().map(|d| d.processed().unwrap().index()).collect::<Vec<_>>())
            .collect();
        assert_eq!(delegate_segments, [1, 2]);
        let named: Vec<(&str, u32)> =
            p.named_data().unwrap().iter().map(|n| (n.key().unwrap(), n.segment_index())).collect();
        assert_eq!(named, [("w1", 3), ("w2", 4)]);
        assert_eq!(p.segments().unwrap().len(), 5);
        assert_eq!(p.constant_segment().unwrap().offsets().unwrap().iter().collect::<Vec<_>>(), [0, 0, 32]);
    }
}
