//! XNNPACK delegate payloads (`backend: xnnpack`): each `Linear` of the method becomes one
//! delegate call whose payload is an XNNPACK graph of one `FullyConnected` node, its weight (and
//! bias) inside the payload.
//!
//! Payload layout (`backends/xnnpack/serialization/xnnpack_graph_serialize.py` of executorch
//! 1.5.1): a 30-byte `XH00` header padded to 32 (`u32 0`, `XH00`, `u16 30`, flatbuffer offset
//! and size, constant data offset, `u64` constant data size), the `XN01` flatbuffer of
//! `schema/xnnpack.fbs` padded to 16, then the constant data, each tensor 16-byte aligned.
//! `constant_data` entries carry no `named_key`, so the runtime reads them from the payload
//! (`XNNCompiler.cpp: getConstantDataPtr`). Value 0 is the delegate's external input, the last
//! one its external output; sizes are the upper bounds and the runtime reshapes per call.

use crate::generated::xnnpack::fb_xnnpack as xf;
use crate::plan::align;
use crate::program::{ConstSource, TensorValue};
use hfexport_core::DType;

/// The payload's constant data alignment.
pub const CONSTANT_ALIGN: u64 = 16;
const HEADER_LEN: usize = 30;
const INVALID_ID: u32 = u32::MAX;
const EXTERNAL_INPUT: u32 = 1;
const EXTERNAL_OUTPUT: u32 = 2;

/// One delegate: its payload's head (header + graph) and the weights streamed after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Delegate {
    pub head: Vec<u8>,
    /// (source, offset from the payload's start, bytes).
    pub weights: Vec<(ConstSource, u64, u64)>,
    /// Bytes of the whole payload.
    pub len: u64,
}

/// The XNNPACK datatype of a dtype, if XNNPACK's FullyConnected takes it.
pub fn datatype(d: DType) -> Option<xf::XNNDatatype> {
    match d {
        DType::F32 => Some(xf::XNNDatatype::xnn_datatype_fp32),
        DType::F16 => Some(xf::XNNDatatype::xnn_datatype_fp16),
        _ => None,
    }
}

fn tensor_value<'a>(
    b: &mut flatbuffers::FlatBufferBuilder<'a>,
    dtype: xf::XNNDatatype,
    dims: &[i64],
    constant: u32,
    external: Option<(u32, u32)>,
    id: u32,
) -> flatbuffers::WIPOffset<xf::XValue<'a>> {
    let d: Vec<u32> = dims.iter().map(|&x| x as u32).collect();
    let dims = b.create_vector(&d);
    let (external_id, flags) = external.unwrap_or((INVALID_ID, 0));
    let t = xf::XNNTensorValue::create(
        b,
        &xf::XNNTensorValueArgs {
            datatype: dtype,
            num_dims: d.len() as u32,
            dims: Some(dims),
            constant_buffer_idx: constant,
            external_id,
            flags,
            id_out: id,
        },
    );
    xf::XValue::create(
        b,
        &xf::XValueArgs { xvalue_union_type: xf::XValueUnion::XNNTensorValue, xvalue_union: Some(t.as_union_value()) },
    )
}

/// The payload of `output = linear(input, weight, bias)`; `weight` is [out, in] (torch's layout,
/// which XNNPACK's FullyConnected takes without a transpose flag).
pub fn fully_connected(
    input: &TensorValue,
    weight: (ConstSource, &[i64]),
    bias: Option<(ConstSource, &[i64])>,
    output: &TensorValue,
) -> Delegate {
    let dtype = datatype(input.dtype).expect("the caller checked the dtype");
    let elt = input.dtype.size() as u64;
    let numel = |dims: &[i64]| dims.iter().product::<i64>() as u64 * elt;
    let mut b = flatbuffers::FlatBufferBuilder::with_capacity(1024);
    let (w_bytes, b_bytes) = (numel(weight.1), bias.as_ref().map(|(_, d)| numel(d)));
    let mut values = vec![
        tensor_value(&mut b, dtype, &input.bound, 0, Some((0, EXTERNAL_INPUT)), 0),
        tensor_value(&mut b, dtype, weight.1, 1, None, 1),
    ];
    let mut consts = vec![(0u64, w_bytes)];
    if let (Some((_, dims)), Some(n)) = (&bias, b_bytes) {
        values.push(tensor_value(&mut b, dtype, dims, 2, None, 2));
        consts.push((align(w_bytes, CONSTANT_ALIGN), n));
    }
    let out_id = values.len() as u32;
    values.push(tensor_value(&mut b, dtype, &output.bound, 0, Some((1, EXTERNAL_OUTPUT)), out_id));
    let fc = xf::XNNFullyConnected::create(
        &mut b,
        &xf::XNNFullyConnectedArgs {
            input1_id: 0,
            filter_id: 1,
            bias_id: if bias.is_some() { 2 } else { INVALID_ID },
            output_id: out_id,
            flags: 0,
        },
    );
    let node = xf::XNode::create(
        &mut b,
        &xf::XNodeArgs {
            xnode_union_type: xf::XNodeUnion::XNNFullyConnected,
            xnode_union: Some(fc.as_union_value()),
            debug_handle: 0,
            output_min_max: None,
        },
    );
    let xnodes = b.create_vector(&[node]);
    let xvalues = b.create_vector(&values);
    // entry 0 is the placeholder of "no constant"
    let mut entries = vec![xf::ConstantDataOffset::create(&mut b, &xf::ConstantDataOffsetArgs::default())];
    for (offset, size) in &consts {
        entries.push(xf::ConstantDataOffset::create(
            &mut b,
            &xf::ConstantDataOffsetArgs { offset: *offset, size_: *size, named_key: None },
        ));
    }
    let constant_data = b.create_vector(&entries);
    let (inputs, outputs) = (b.create_vector(&[0u32]), b.create_vector(&[out_id]));
    let version = b.create_string("0");
    let graph = xf::XNNGraph::create(
        &mut b,
        &xf::XNNGraphArgs {
            version: Some(version),
            xnodes: Some(xnodes),
            xvalues: Some(xvalues),
            num_externs: 2,
            input_ids: Some(inputs),
            output_ids: Some(outputs),
            constant_data: Some(constant_data),
        },
    );
    xf::finish_xnngraph_buffer(&mut b, graph);
    let fbuf = b.finished_data();
    let header_len = align(HEADER_LEN as u64, CONSTANT_ALIGN);
    let fb_len = align(fbuf.len() as u64, CONSTANT_ALIGN);
    let data_offset = header_len + fb_len;
    let data_size = consts.last().map_or(0, |(o, s)| o + s);
    let mut head = Vec::with_capacity(data_offset as usize);
    head.extend_from_slice(&[0, 0, 0, 0]);
    head.extend_from_slice(b"XH00");
    head.extend_from_slice(&(HEADER_LEN as u16).to_le_bytes());
    head.extend_from_slice(&(header_len as u32).to_le_bytes());
    head.extend_from_slice(&(fbuf.len() as u32).to_le_bytes());
    head.extend_from_slice(&(data_offset as u32).to_le_bytes());
    head.extend_from_slice(&data_size.to_le_bytes());
    head.resize(header_len as usize, 0);
    head.extend_from_slice(fbuf);
    head.resize(data_offset as usize, 0);
    let mut weights = vec![(weight.0, data_offset, w_bytes)];
    if let (Some((src, _)), Some(n)) = (bias, b_bytes) {
        weights.push((src, data_offset + consts[1].0, n));
    }
    Delegate { head, weights, len: data_offset + data_size }
}
