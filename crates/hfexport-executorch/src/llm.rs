//! ExecuTorch's LLM-runner convention: the constant methods a generation program carries beside
//! `forward(input_ids, cache_position)`, which ExecuTorch's own `extension/llm` runner
//! (`TextLLMRunner`) and optimum-executorch's `ExecuTorchModelForCausalLM` read before they call
//! it.
//!
//! Each is a method with no inputs and no instructions whose outputs are its values, as
//! ExecuTorch's emitter writes them (`_emit_prim_getters`): an `Int` or a `Bool` each, a list as
//! one `Int` output per item (the runner reads every value as an integer scalar and aborts on
//! a `Double` or a list value). The runner requires `get_max_seq_len` (the most tokens one call
//! takes; `get_max_context_len` is the cache's slots); optimum reads it as the cache size, and
//! reads `get_eos_id` before `get_eos_ids`, so both are written.

use crate::program::{scalar_type, Method, Value};
use hfexport_core::backend::ModelFacts;
use hfexport_core::Graph;

/// The constant methods of the program whose `forward` is the decode `g` (taking
/// `cache_position`), from the checkpoint's `model` facts. A BOS the checkpoint does not name
/// is left out (the runner takes the tokenizer's).
pub fn constant_methods(g: &Graph, model: &ModelFacts) -> Vec<Method> {
    let max = |symbol: &str| g.symbols.get(symbol).map_or(1, |s| g.symbols.range(&s).max);
    // the most tokens one call takes, and the cache's slots
    let (per_call, slots) = (max("sequence"), max("cache_len"));
    let logits = g.outputs().iter().find(|o| o.name == "logits").map(|o| g.info(o.value).dtype);
    let mut out = vec![
        constant("get_max_seq_len", vec![Value::Int(per_call)]),
        constant("get_max_context_len", vec![Value::Int(slots)]),
        constant("get_max_batch_size", vec![Value::Int(1)]),
        constant("get_vocab_size", vec![Value::Int(model.vocab_size as i64)]),
        constant("use_kv_cache", vec![Value::Bool(true)]),
        constant("enable_dynamic_shape", vec![Value::Bool(per_call > 1)]),
        constant("use_sdpa_with_kv_cache", vec![Value::Bool(false)]),
    ];
    if let Some(dtype) = logits {
        out.push(constant("get_dtype", vec![Value::Int(scalar_type(dtype).into())]));
    }
    if let Some(bos) = model.bos_token_id {
        out.push(constant("get_bos_id", vec![Value::Int(bos)]));
    }
    // optimum needs one of them even with no EOS (an empty list: no stop); the runner, missing
    // `get_eos_ids`, stops at the tokenizer's
    let eos: Vec<Value> = model.eos_token_ids.iter().map(|&e| Value::Int(e)).collect();
    if !eos.is_empty() {
        out.push(constant("get_eos_ids", eos.clone()));
    }
    out.push(constant("get_eos_id", eos));
    out
}

/// A method returning `values`.
fn constant(name: &str, values: Vec<Value>) -> Method {
    let outputs = (0..values.len()).collect();
    Method { name: name.into(), values, outputs, ..Default::default() }
}
