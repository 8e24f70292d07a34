//! XNNPACK delegate payloads (`backend: xnnpack`): each `Linear` of a method becomes one
//! delegate call whose payload is an XNNPACK graph of one `FullyConnected` node, each
//! symmetric `QuantLinear` one of a `Convert` to per-token int8 and a `FullyConnected` over
//! `qbint4`/`qcint8` weights (8da4w / 8da8w), and each `permute` one of a `StaticTranspose`.
//!
//! Payload layout (`backends/xnnpack/serialization/xnnpack_graph_serialize.py` of executorch
//! 1.5.1): a 30-byte `XH00` header padded to 32 (`u32 0`, `XH00`, `u16 30`, flatbuffer offset
//! and size, constant data offset, `u64` constant data size), then the `XN01` flatbuffer of
//! `schema/xnnpack.fbs` padded to 16. The payload holds no weight bytes (constant data size 0):
//! every `constant_data` entry but the placeholder 0 names its weight with `named_key`
//! (`offset` `u64::MAX`, `size` its bytes), and the runtime reads it from the program's named
//! data (`XNNCompiler.cpp: getConstantDataPtr`), where each distinct weight is stored once for
//! every delegate of every method ([`crate::pte`]) — as EXIR's named data store writes it. Value
//! 0 is the delegate's external input, the last one its external output; sizes are the upper
//! bounds and the runtime reshapes per call.

use crate::generated::xnnpack::fb_xnnpack as xf;
use crate::plan::align;
use crate::program::{ConstSource, TensorValue};
use hfexport_core::DType;

/// Alignment of the payload's flatbuffer.
const ALIGN: u64 = 16;
const HEADER_LEN: usize = 30;
const INVALID_ID: u32 = u32::MAX;
const EXTERNAL_INPUT: u32 = 1;
const EXTERNAL_OUTPUT: u32 = 2;

/// The graph of one delegate, serialized once the program knows its weights' keys.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// `output = input @ weight.T + bias`, weight `[out, in]`.
    FullyConnected {
        dtype: DType,
        input: Vec<i64>,
        weight: Vec<i64>,
        bias: Option<Vec<i64>>,
        output: Vec<i64>,
    },
    Transpose {
        dtype: DType,
        input: Vec<i64>,
        perm: Vec<u32>,
        output: Vec<i64>,
    },
    /// `output = dequantize(input as int8 per token) @ dequantize(weight).T + bias`, float32 in
    /// and out: a `Convert` to `qdint8` then a FullyConnected over the integer weight.
    QuantFullyConnected {
        input: Vec<i64>,
        weight: Vec<i64>,
        /// `Some(group)`: `qbint4` with bfloat16 block scales; `None`: `qcint8` per row.
        group: Option<usize>,
        bias: Option<Vec<i64>>,
        output: Vec<i64>,
    },
}

/// The integer weight of a quantized FullyConnected and where its bytes come from.
pub enum QuantFilter {
    /// 4-bit values `q + 8` packed two per byte (low nibble first) per row, bfloat16 scales
    /// `[out, in / group]`.
    Blockwise { values: ConstSource, scales: ConstSource, group: usize },
    /// int8 values, float32 scales `[out]` (or `[out, 1]`).
    Channelwise { values: ConstSource, scales: ConstSource },
}

/// One delegate: its graph and the weights it reads (constant buffers 1.. in order, with
/// their byte sizes).
#[derive(Debug, Clone, PartialEq)]
pub struct Delegate {
    node: Node,
    pub weights: Vec<(ConstSource, u64)>,
}

/// The XNNPACK datatype of a dtype, if XNNPACK's FullyConnected takes it.
pub fn datatype(d: DType) -> Option<xf::XNNDatatype> {
    match d {
        DType::F32 => Some(xf::XNNDatatype::xnn_datatype_fp32),
        DType::F16 => Some(xf::XNNDatatype::xnn_datatype_fp16),
        _ => None,
    }
}

/// An `XNNTensorValue` of `datatype`: constant buffer `constant` (0: none), external
/// `(id, flags)` or internal, value id `id`.
fn xtensor<'a>(
    b: &mut flatbuffers::FlatBufferBuilder<'a>,
    datatype: xf::XNNDatatype,
    dims: &[i64],
    constant: u32,
    external: Option<(u32, u32)>,
    id: u32,
) -> flatbuffers::WIPOffset<xf::XNNTensorValue<'a>> {
    let d: Vec<u32> = dims.iter().map(|&x| x as u32).collect();
    let dims = b.create_vector(&d);
    let (external_id, flags) = external.unwrap_or((INVALID_ID, 0));
    xf::XNNTensorValue::create(
        b,
        &xf::XNNTensorValueArgs {
            datatype,
            num_dims: d.len() as u32,
            dims: Some(dims),
            constant_buffer_idx: constant,
            external_id,
            flags,
            id_out: id,
        },
    )
}

fn tensor_value<'a>(
    b: &mut flatbuffers::FlatBufferBuilder<'a>,
    dtype: DType,
    dims: &[i64],
    constant: u32,
    external: Option<(u32, u32)>,
    id: u32,
) -> flatbuffers::WIPOffset<xf::XValue<'a>> {
    let datatype = datatype(dtype).expect("the caller checked the dtype");
    let t = xtensor(b, datatype, dims, constant, external, id);
    xf::XValue::create(
        b,
        &xf::XValueArgs { xvalue_union_type: xf::XValueUnion::XNNTensorValue, xvalue_union: Some(t.as_union_value()) },
    )
}

/// An internal quantized value: `datatype` with quantization parameters `params`.
fn quantized_value<'a>(
    b: &mut flatbuffers::FlatBufferBuilder<'a>,
    tensor: flatbuffers::WIPOffset<xf::XNNTensorValue<'a>>,
    params: (xf::XNNQuantParams, flatbuffers::WIPOffset<flatbuffers::UnionWIPOffset>),
) -> flatbuffers::WIPOffset<xf::XValue<'a>> {
    let q = xf::XNNQuantizedTensorValue::create(
        b,
        &xf::XNNQuantizedTensorValueArgs {
            tensor_value: Some(tensor),
            quant_params_type: params.0,
            quant_params: Some(params.1),
        },
    );
    xf::XValue::create(
        b,
        &xf::XValueArgs {
            xvalue_union_type: xf::XValueUnion::XNNQuantizedTensorValue,
            xvalue_union: Some(q.as_union_value()),
        },
    )
}

/// The delegate of `output = linear(input, weight, bias)`; `weight` is [out, in] (torch's
/// layout, which XNNPACK's FullyConnected takes without a transpose flag).
pub fn fully_connected(
    input: &TensorValue,
    weight: (ConstSource, &[i64]),
    bias: Option<(ConstSource, &[i64])>,
    output: &TensorValue,
) -> Delegate {
    let dtype = input.dtype;
    assert!(datatype(dtype).is_some(), "the caller checked the dtype");
    let numel = |dims: &[i64]| dims.iter().product::<i64>() as u64 * dtype.size() as u64;
    let mut weights = vec![(weight.0, numel(weight.1))];
    if let Some((src, dims)) = &bias {
        weights.push((src.clone(), numel(dims)));
    }
    let node = Node::FullyConnected {
        dtype,
        input: input.bound.clone(),
        weight: weight.1.to_vec(),
        bias: bias.map(|(_, d)| d.to_vec()),
        output: output.bound.clone(),
    };
    Delegate { node, weights }
}

/// The delegate of a dynamically quantized linear (XNNPACK's `qd8-f32-qb4w` / `qd8-f32-qc8w`
/// kernels): float32 `input` quantized to int8 per token at run time, integer `filter` of
/// dims `weight` ([out, in]), float32 `bias`. The weights are constant buffers 1 (values),
/// 2 (scales) and 3 (bias).
pub fn quantized_fully_connected(
    input: &TensorValue,
    filter: QuantFilter,
    weight: &[i64],
    bias: Option<(ConstSource, &[i64])>,
    output: &TensorValue,
) -> Delegate {
    let numel = weight.iter().product::<i64>() as u64;
    let rows = weight[0] as u64;
    let (mut weights, group) = match filter {
        QuantFilter::Blockwise { values, scales, group } => {
            (vec![(values, numel.div_ceil(2)), (scales, numel / group as u64 * 2)], Some(group))
        }
        QuantFilter::Channelwise { values, scales } => (vec![(values, numel), (scales, rows * 4)], None),
    };
    if let Some((src, dims)) = &bias {
        weights.push((src.clone(), dims.iter().product::<i64>() as u64 * 4));
    }
    let node = Node::QuantFullyConnected {
        input: input.bound.clone(),
        weight: weight.to_vec(),
        group,
        bias: bias.map(|(_, d)| d.to_vec()),
        output: output.bound.clone(),
    };
    Delegate { node, weights }
}

/// The delegate of `output = permute(input, perm)` (XNNPACK's transpose is far faster than the
/// portable `permute_copy`, which the attention's key transpose spends most of a decode step in).
pub fn transpose(input: &TensorValue, perm: &[usize], output: &TensorValue) -> Delegate {
    assert!(datatype(input.dtype).is_some(), "the caller checked the dtype");
    let node = Node::Transpose {
        dtype: input.dtype,
        input: input.bound.clone(),
        perm: perm.iter().map(|&p| p as u32).collect(),
        output: output.bound.clone(),
    };
    Delegate { node, weights: vec![] }
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

type Graph<'a> = (Vec<flatbuffers::WIPOffset<xf::XNode<'a>>>, Vec<flatbuffers::WIPOffset<xf::XValue<'a>>>, u32);

/// Values: 0 the float input, 1 its `qdint8` form, 2 the integer filter, 3 the bias (if any),
/// then the float output; nodes: `Convert` 0 -> 1, FullyConnected.
fn quant_fully_connected_graph<'a>(
    b: &mut flatbuffers::FlatBufferBuilder<'a>,
    input: &[i64],
    weight: &[i64],
    group: Option<usize>,
    bias: Option<&[i64]>,
    output: &[i64],
) -> Graph<'a> {
    let mut values = vec![tensor_value(b, DType::F32, input, 0, Some((0, EXTERNAL_INPUT)), 0)];
    // per token: every dim but the last is a batch dim
    let dq = xf::PerTokenDynamicQuant::create(b, &xf::PerTokenDynamicQuantArgs { num_nonbatch_dims: 1 });
    let t = xtensor(b, xf::XNNDatatype::xnn_datatype_qdint8, input, 0, None, 1);
    values.push(quantized_value(b, t, (xf::XNNQuantParams::PerTokenDynamicQuant, dq.as_union_value())));
    // the scales are read from constant buffer 2 (`scale` must still be a vector: the runtime
    // reads its data pointer before it looks at `scale_buffer_idx`)
    let empty = b.create_vector::<f32>(&[]);
    let rows = weight[0] as u32;
    let (datatype, params) = match group {
        Some(g) => {
            let p = xf::PerChannelGroupQuant::create(
                b,
                &xf::PerChannelGroupQuantArgs {
                    scale: Some(empty),
                    channel_dim: 0,
                    group_size: g as i32,
                    scale_buffer_idx: 2,
                    num_scales: rows * (weight[1] as u32 / g as u32),
                },
            );
            (xf::XNNDatatype::xnn_datatype_qbint4, (xf::XNNQuantParams::PerChannelGroupQuant, p.as_union_value()))
        }
        None => {
            let p = xf::PerChannelQuant::create(
                b,
                &xf::PerChannelQuantArgs { scale: Some(empty), channel_dim: 0, scale_buffer_idx: 2, num_scales: rows },
            );
            (xf::XNNDatatype::xnn_datatype_qcint8, (xf::XNNQuantParams::PerChannelQuant, p.as_union_value()))
        }
    };
    let t = xtensor(b, datatype, weight, 1, None, 2);
    values.push(quantized_value(b, t, params));
    if let Some(dims) = bias {
        values.push(tensor_value(b, DType::F32, dims, 3, None, 3));
    }
    let out_id = values.len() as u32;
    values.push(tensor_value(b, DType::F32, output, 0, Some((1, EXTERNAL_OUTPUT)), out_id));
    let cvt = xf::_XNNNode1x1::create(b, &xf::_XNNNode1x1Args { input_id: 0, output_id: 1, flags: 0 });
    let fc = xf::XNNFullyConnected::create(
        b,
        &xf::XNNFullyConnectedArgs {
            input1_id: 1,
            filter_id: 2,
            bias_id: if bias.is_some() { 3 } else { INVALID_ID },
            output_id: out_id,
            flags: 0,
        },
    );
    let nodes = vec![
        xnode(b, xf::XNodeUnion::XNNConvert, cvt.as_union_value()),
        xnode(b, xf::XNodeUnion::XNNFullyConnected, fc.as_union_value()),
    ];
    (nodes, values, out_id)
}

impl Delegate {
    /// The payload, each weight `i` named `keys[i]` in the program's named data.
    pub fn payload(&self, keys: &[String]) -> Vec<u8> {
        assert_eq!(keys.len(), self.weights.len(), "a key per weight");
        let mut b = flatbuffers::FlatBufferBuilder::with_capacity(1024);
        let (xnodes, values, out_id) = match &self.node {
            Node::FullyConnected { dtype, input, weight, bias, output } => {
                let mut values = vec![
                    tensor_value(&mut b, *dtype, input, 0, Some((0, EXTERNAL_INPUT)), 0),
                    tensor_value(&mut b, *dtype, weight, 1, None, 1),
                ];
                if let Some(dims) = bias {
                    values.push(tensor_value(&mut b, *dtype, dims, 2, None, 2));
                }
                let out_id = values.len() as u32;
                values.push(tensor_value(&mut b, *dtype, output, 0, Some((1, EXTERNAL_OUTPUT)), out_id));
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
                (vec![xnode(&mut b, xf::XNodeUnion::XNNFullyConnected, fc.as_union_value())], values, out_id)
            }
            Node::QuantFullyConnected { input, weight, group, bias, output } => {
                quant_fully_connected_graph(&mut b, input, weight, *group, bias.as_deref(), output)
            }
            Node::Transpose { dtype, input, perm, output } => {
                let values = vec![
                    tensor_value(&mut b, *dtype, input, 0, Some((0, EXTERNAL_INPUT)), 0),
                    tensor_value(&mut b, *dtype, output, 0, Some((1, EXTERNAL_OUTPUT)), 1),
                ];
                let p = b.create_vector(perm);
                let t = xf::XNNStaticTranspose::create(
                    &mut b,
                    &xf::XNNStaticTransposeArgs {
                        num_dims: perm.len() as u32,
                        perm: Some(p),
                        input_id: 0,
                        output_id: 1,
                        flags: 0,
                    },
                );
                (vec![xnode(&mut b, xf::XNodeUnion::XNNStaticTranspose, t.as_union_value())], values, 1)
            }
        };
        let xnodes = b.create_vector(&xnodes);
        let xvalues = b.create_vector(&values);
        // entry 0 is the placeholder of "no constant" (no key: an empty key takes the named path)
        let mut entries = vec![xf::ConstantDataOffset::create(&mut b, &xf::ConstantDataOffsetArgs::default())];
        for ((_, size), key) in self.weights.iter().zip(keys) {
            let named_key = Some(b.create_string(key));
            entries.push(xf::ConstantDataOffset::create(
                &mut b,
                &xf::ConstantDataOffsetArgs { offset: u64::MAX, size_: *size, named_key },
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
        let header_len = align(HEADER_LEN as u64, ALIGN);
        let data_offset = header_len + align(fbuf.len() as u64, ALIGN);
        let mut out = Vec::with_capacity(data_offset as usize);
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(b"XH00");
        out.extend_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        out.extend_from_slice(&(header_len as u32).to_le_bytes());
        out.extend_from_slice(&(fbuf.len() as u32).to_le_bytes());
        out.extend_from_slice(&(data_offset as u32).to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.resize(header_len as usize, 0);
        out.extend_from_slice(fbuf);
        out.resize(data_offset as usize, 0);
        out
    }
}
