//! XNNPACK delegate payloads (`backend: xnnpack`): each `Linear` of the method becomes one
//! delegate call whose payload is an XNNPACK graph of one `FullyConnected` node, its weight (and
//! bias) inside the payload, and each `permute` one of a `StaticTranspose` node.
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
    let mut values = vec![
        tensor_value(&mut b, dtype, &input.bound, 0, Some((0, EXTERNAL_INPUT)), 0),
        tensor_value(&mut b, dtype, weight.1, 1, None, 1),
    ];
    let mut consts = vec![(weight.0, numel(weight.1))];
    if let Some((src, dims)) = bias {
        values.push(tensor_value(&mut b, dtype, dims, 2, None, 2));
        consts.push((src, numel(dims)));
    }
    let out_id = values.len() as u32;
    values.push(tensor_value(&mut b, dtype, &output.bound, 0, Some((1, EXTERNAL_OUTPUT)), out_id));
    let fc = xf::XNNFullyConnected::create(
        &mut b,
        &xf::XNNFullyConnectedArgs {
            input1_id: 0,
            filter_id: 1,
            bias_id: if consts.len() > 1 { 2 } else { INVALID_ID },
            output_id: out_id,
            flags: 0,
        },
    );
    let node = xnode(&mut b, xf::XNodeUnion::XNNFullyConnected, fc.as_union_value());
    finish(b, vec![node], values, consts, out_id)
}

/// The payload of `output = permute(input, perm)` (XNNPACK's transpose is far faster than the
/// portable `permute_copy`, which the attention's key transpose spends most of a decode step in).
pub fn transpose(input: &TensorValue, perm: &[usize], output: &TensorValue) -> Delegate {
    let dtype = datatype(input.dtype).expect("the caller checked the dtype");
    let mut b = flatbuffers::FlatBufferBuilder::with_capacity(512);
    let values = vec![
        tensor_value(&mut b, dtype, &input.bound, 0, Some((0, EXTERNAL_INPUT)), 0),
        tensor_value(&mut b, dtype, &output.bound, 0, Some((1, EXTERNAL_OUTPUT)), 1),
    ];
    let p: Vec<u32> = perm.iter().map(|&x| x as u32).collect();
    let perm = b.create_vector(&p);
    let t = xf::XNNStaticTranspose::create(
        &mut b,
        &xf::XNNStaticTransposeArgs { num_dims: p.len() as u32, perm: Some(perm), input_id: 0, output_id: 1, flags: 0 },
    );
    let node = xnode(&mut b, xf::XNodeUnion::XNNStaticTranspose, t.as_union_value());
    finish(b, vec![node], values, vec![], 1)
}

fn xnode<'a>(
    b: &mut flatbuffers::FlatBufferBuilder<'a>,
    kind: xf::XNodeUnion,
    node: flatbuffers::WIPOffset<flatbuffers::UnionWIPOffset>,
) -> flatbuffers::WIPOffset<xf::XNode<'a>> {
    xf::XNode::create(
        b,
        &xf::XNodeArgs { xnode_union_type: kind, xnode_union: Some(node), debug_handle: 0, output_min_max: None },
    )
}

/// The graph of one delegate (external input 0, external output `out_id`; `consts` are
/// constant buffers 1.. in order) behind its header, with the constants' places after it.
fn finish<'a>(
    mut b: flatbuffers::FlatBufferBuilder<'a>,
    xnodes: Vec<flatbuffers::WIPOffset<xf::XNode<'a>>>,
    values: Vec<flatbuffers::WIPOffset<xf::XValue<'a>>>,
    consts: Vec<(ConstSource, u64)>,
    out_id: u32,
) -> Delegate {
    let xnodes = b.create_vector(&xnodes);
    let xvalues = b.create_vector(&values);
    // entry 0 is the placeholder of "no constant"
    let mut entries = vec![xf::ConstantDataOffset::create(&mut b, &xf::ConstantDataOffsetArgs::default())];
    let mut offsets = vec![];
    let mut at = 0u64;
    for (_, size) in &consts {
        at = align(at, CONSTANT_ALIGN);
        offsets.push(at);
        entries.push(xf::ConstantDataOffset::create(
            &mut b,
            &xf::ConstantDataOffsetArgs { offset: at, size_: *size, named_key: None },
        ));
        at += size;
    }
    let data_size = at;
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
    let weights = consts.into_iter().zip(offsets).map(|((src, size), o)| (src, data_offset + o, size)).collect();
    Delegate { head, weights, len: data_offset + data_size }
}
