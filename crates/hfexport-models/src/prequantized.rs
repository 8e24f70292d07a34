//! Checkpoints quantized on the hub (GPTQ, AWQ, GPT-OSS's MXFP4 experts): which layout
//! `config.json` declares.
//!
//! The layouts, their unpacking and the graph rewrite that keeps such modules quantized are
//! `hfexport-quant`'s (`import.rs`); [`Checkpoint`](crate::Checkpoint) answers for each
//! quantized module `P`'s virtual tensors with them: `P.weight` (dequantized, so builders and
//! the reference evaluator see an ordinary linear) and `P.qweight:values`, `:zeros`, `:scales`.

use serde_json::Value;

use crate::error::{ModelError, Result};
pub use hfexport_quant::import::{Method, PreQuant, SCALES, VALUES, ZEROS};

/// `quant_method` of a checkpoint whose MoE experts are MXFP4 blocks, which the family's
/// stacked experts read in place of float weights (`blocks.rs`), so no module is virtual.
pub const MXFP4: &str = "mxfp4";

/// The `quant_method` of `quantization_config`, when there is one.
pub fn method(config: &Value) -> Option<&str> {
    let q = config.get("quantization_config").filter(|v| !v.is_null())?;
    Some(q.get("quant_method").and_then(Value::as_str).unwrap_or(""))
}

/// Reads `quantization_config` (absent, or MXFP4 experts: `None`); an unsupported layout is
/// an error naming the key.
pub fn from_config(config: &Value, path: &std::path::Path) -> Result<Option<PreQuant>> {
    let Some(q) = config.get("quantization_config").filter(|v| !v.is_null()) else { return Ok(None) };
    let bad = |key: &str, msg: String| ModelError::config(path, &format!("quantization_config.{key}"), msg);
    let method = q.get("quant_method").and_then(Value::as_str).unwrap_or("");
    if method == MXFP4 {
        return Ok(None);
    }
    let bits = q.get("bits").or_else(|| q.get("w_bit")).and_then(Value::as_u64);
    if bits != Some(4) {
        return Err(bad("bits", format!("only 4-bit {method} checkpoints are read, got {:?}", bits)));
    }
    let group = q.get("group_size").or_else(|| q.get("q_group_size")).and_then(Value::as_i64).unwrap_or(128);
    if group <= 0 {
        return Err(bad(
            "group_size",
            format!("must be a positive group size (per-column -1 is not read), got {group}"),
        ));
    }
    let method = match method {
        "gptq" => {
            if q.get("desc_act").and_then(Value::as_bool) == Some(true) {
                return Err(bad(
                    "desc_act",
                    "true (activation-order permutation through g_idx) is not supported; export the model with \
                     desc_act false"
                        .into(),
                ));
            }
            let format = q.get("checkpoint_format").and_then(Value::as_str).unwrap_or("gptq");
            Method::Gptq { zeros_minus_one: format != "gptq_v2" }
        }
        "awq" => {
            let version = q.get("version").and_then(Value::as_str).unwrap_or("gemm").to_lowercase();
            if version != "gemm" {
                return Err(bad("version", format!("only the AWQ GEMM layout is read, got `{version}`")));
            }
            Method::Awq
        }
        other => return Err(bad("quant_method", format!("`{other}` is not read (valid: gptq, awq, mxfp4)"))),
    };
    Ok(Some(PreQuant { method, group: group as usize }))
}
