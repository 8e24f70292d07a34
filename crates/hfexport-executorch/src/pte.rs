//! The `.pte` file of a [`Method`]: the `program.fbs` flatbuffer (identifier `ET12`), the
//! 32-byte `eh00` extended header at offset 8 when there are segments, then the segments from a
//! 128-aligned base, each 128-aligned: the constant segment (each buffer 16-byte aligned), then
//! one per XNNPACK delegate payload (`_program.py: serialize_pte_binary` of executorch 1.5.1).
//!
//! Every offset is known from the sizes alone, so the flatbuffer is written first and the
//! weights are streamed after it, one tensor at a time.

use crate::generated::program::executorch_flatbuffer as fb;
use crate::plan::align;
use crate::program::{scalar_type, Call, Data, Method, Value};
use flatbuffers::{FlatBufferBuilder, WIPOffset};

/// Segment base alignment.
pub const SEGMENT_ALIGN: u64 = 128;
/// Alignment of each constant in the constant segment.
pub const CONSTANT_ALIGN: u64 = 16;
/// Bytes of the extended header.
pub const HEADER_LEN: usize = 32;

/// The backend id of XNNPACK delegates.
pub const XNNPACK_ID: &str = "XnnpackBackend";

/// Where each segment goes, relative to the segment base.
#[derive(Debug, Clone, PartialEq)]
pub struct Segments {
    /// Constant buffer offsets in segment 0 (`[0]` is the empty placeholder).
    pub constants: Vec<u64>,
    pub constants_size: u64,
    /// (offset, size) of each delegate payload (segments 1..).
    pub delegates: Vec<(u64, u64)>,
    /// Bytes from the base to the end of the last segment.
    pub total: u64,
}

impl Segments {
    pub fn of(m: &Method) -> Segments {
        let (constants, constants_size) = constant_layout(m);
        let mut end = constants_size;
        let mut delegates = vec![];
        for d in &m.delegates {
            let at = align(end, SEGMENT_ALIGN);
            delegates.push((at, d.len));
            end = at + d.len;
        }
        Segments { constants, constants_size, delegates, total: end }
    }

    pub fn any(&self) -> bool {
        self.total > 0 || !self.delegates.is_empty()
    }
}

/// Offsets of the constant buffers in the segment (`offsets[0]` is the empty placeholder) and
/// the segment's length.
fn constant_layout(m: &Method) -> (Vec<u64>, u64) {
    let mut offsets = vec![0u64];
    let mut at = 0u64;
    for (i, (_, size)) in m.constants.iter().enumerate() {
        if i > 0 {
            at = align(at, CONSTANT_ALIGN);
        }
        offsets.push(at);
        at += size;
    }
    (offsets, at)
}

fn evalue<'a>(b: &mut FlatBufferBuilder<'a>, v: &Value) -> WIPOffset<fb::EValue<'a>> {
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
                Data::Constant(i) => (i as u32, None),
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

/// The flatbuffer of the program (no extended header yet).
fn flatbuffer(m: &Method, seg: &Segments) -> Vec<u8> {
    let mut b = FlatBufferBuilder::with_capacity(1 << 16);
    let values: Vec<_> = m.values.iter().map(|v| evalue(&mut b, v)).collect();
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
                    fb::KernelCall::create(&mut b, &fb::KernelCallArgs { op_index: op as i32, args }).as_union_value(),
                ),
                Call::Delegate(d) => (
                    fb::InstructionArguments::DelegateCall,
                    fb::DelegateCall::create(&mut b, &fb::DelegateCallArgs { delegate_index: d as i32, args })
                        .as_union_value(),
                ),
            };
            fb::Instruction::create(&mut b, &fb::InstructionArgs { instr_args_type: kind, instr_args: Some(call) })
        })
        .collect();
    let instructions = b.create_vector(&instrs);
    let chain = fb::Chain::create(&mut b, &fb::ChainArgs { instructions: Some(instructions), ..Default::default() });
    let chains = b.create_vector(&[chain]);
    let ops: Vec<_> = m
        .operators
        .iter()
        .map(|(name, overload)| {
            let name = b.create_string(name);
            let overload = b.create_string(overload);
            fb::Operator::create(&mut b, &fb::OperatorArgs { name: Some(name), overload: Some(overload) })
        })
        .collect();
    let operators = b.create_vector(&ops);
    let buffers = b.create_vector(&[0i64, m.arena as i64]);
    // the runtime requires the field, even empty
    let delegates: Vec<_> = (0..m.delegates.len())
        .map(|i| {
            let id = b.create_string(XNNPACK_ID);
            let processed = fb::BackendDelegateDataReference::create(
                &mut b,
                &fb::BackendDelegateDataReferenceArgs { location: fb::DataLocation::SEGMENT, index: i as u32 + 1 },
            );
            let compile_specs = b.create_vector::<flatbuffers::WIPOffset<fb::CompileSpec>>(&[]);
            fb::BackendDelegate::create(
                &mut b,
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
    let plan = fb::ExecutionPlan::create(
        &mut b,
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
    );
    let plans = b.create_vector(&[plan]);
    let offsets = b.create_vector(&seg.constants);
    let constant_segment =
        fb::SubsegmentOffsets::create(&mut b, &fb::SubsegmentOffsetsArgs { segment_index: 0, offsets: Some(offsets) });
    let segments = seg.any().then(|| {
        let mut all =
            vec![fb::DataSegment::create(&mut b, &fb::DataSegmentArgs { offset: 0, size_: seg.constants_size })];
        for &(offset, size_) in &seg.delegates {
            all.push(fb::DataSegment::create(&mut b, &fb::DataSegmentArgs { offset, size_ }));
        }
        b.create_vector(&all)
    });
    let program = fb::Program::create(
        &mut b,
        &fb::ProgramArgs {
            version: 0,
            execution_plan: Some(plans),
            segments,
            constant_segment: Some(constant_segment),
            ..Default::default()
        },
    );
    fb::finish_program_buffer(&mut b, program);
    b.finished_data().to_vec()
}

/// The bytes before the segment area: the flatbuffer with its extended header, padded to the
/// segment base (everything when there are no segments), and the segments' layout.
pub fn program_bytes(m: &Method) -> (Vec<u8>, Segments) {
    let seg = Segments::of(m);
    let fbuf = flatbuffer(m, &seg);
    if !seg.any() {
        return (fbuf, seg);
    }
    let segment_size = seg.total;
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
    (out, seg)
}
