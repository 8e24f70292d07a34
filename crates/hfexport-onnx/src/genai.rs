//! ONNX Runtime GenAI folders (`"genai": true`, `hfexport export --genai`).
//!
//! ONNX Runtime GenAI (`onnxruntime_genai`, 0.18) drives one decoder graph for the prompt and
//! every later step, with a 2-D `attention_mask` over all tokens so far, `position_ids`, and a
//! past cache it feeds back from the previous call's presents. A growing-cache `decode`
//! component is exactly that graph (docs/io-contracts.md: it takes any number of tokens, and a
//! past of length 0 for the prompt), so the folder needs no other ONNX file: `genai_config.json`
//! names `decode.onnx` as the decoder and maps GenAI's inputs and outputs onto our port names.
//!
//! GenAI's shared past/present buffer mode is not used: it feeds the 2-D mask of the tokens so
//! far with a cache of `max_length` slots, while our in-place cache takes the 4-D visibility
//! mask over every slot, so the static export cannot be driven by it unchanged.

use crate::error::OnnxError;
use hfexport_core::backend::ModelFacts;
use hfexport_core::cache_ports;
use hfexport_core::metadata::Component;
use hfexport_core::plan::{CacheMode, Planned, Role};
use hfexport_core::{Error, Result};
use serde_json::{json, Value};
use std::path::Path;

/// The opset of a GenAI folder when the config names none. GenAI 0.18 runs ONNX Runtime 1.32,
/// whose CPU kernels for opset 23's `Attention`, `RotaryEmbedding` and `RMSNormalization` decode
/// a Qwen3-0.6B-shaped int4 model in 72 ms/token where the opset-21 decomposition takes 105
/// (`cargo xtask bench genai`).
pub const GENAI_OPSET: u32 = 23;

/// The file ONNX Runtime GenAI reads the model from.
pub const CONFIG_FILE: &str = "genai_config.json";

/// `model_type`s ONNX Runtime GenAI 0.18 drives as a plain decoder-only LLM under their own
/// name (its `ModelType::IsLLM` list, the ones with a family here).
const GENAI_LLM_TYPES: [&str; 9] =
    ["gemma", "gemma2", "granite", "llama", "mistral", "phi3", "qwen2", "qwen3", "smollm3"];

/// The GenAI model type for a checkpoint's `model_type`. GenAI uses it only to pick the
/// decoder-only pipeline (every family-specific computation is in our graph), so a family
/// it has no name for is run as `llama`, the generic decoder-only LLM.
pub fn genai_model_type(model_type: &str) -> &'static str {
    match model_type {
        "gemma3" | "gemma3_text" => "gemma3_text",
        t => GENAI_LLM_TYPES.iter().find(|k| **k == t).copied().unwrap_or("llama"),
    }
}

/// The refusal for an export GenAI cannot drive, before anything is written: it needs the
/// generation components over a growing cache whose keys and values have one shape (its cache
/// has one head size: not DeepSeek's latent cache).
pub fn check_components(components: &[Planned]) -> Result<()> {
    let decode = components.iter().find(|c| c.spec.role == Role::Decode && c.spec.cache == CacheMode::Growing);
    if let Some(decode) = decode {
        let g = &decode.graph;
        let shape = |name: &str| g.inputs().iter().find(|p| p.name == name).map(|p| g.info(p.value).shape.clone());
        let is_key =
            |p: &&hfexport_core::graph::Port| cache_ports::cache_of_past(&p.name).is_some_and(|c| c.ends_with(".key"));
        let keys: Vec<_> = g.inputs().iter().filter(is_key).collect();
        let heads = |p: &&hfexport_core::graph::Port| {
            let s = g.info(p.value).shape.clone();
            (s[1].clone(), s[3].clone())
        };
        if let Some(p) = keys.iter().find(|p| heads(p) != heads(&keys[0])) {
            return Err(Error::Config(format!(
                "`genai` (ONNX Runtime GenAI) has one KV-head count and head size for every layer, but `{}` and \
                 `{}` differ (per-layer heads): export without genai",
                keys[0].name, p.name
            )));
        }
        for p in keys.iter().copied() {
            let values = p.name.trim_end_matches(".key").to_string() + ".value";
            if shape(&values).is_some_and(|v| v != g.info(p.value).shape) {
                return Err(Error::Config(format!(
                    "`genai` (ONNX Runtime GenAI) keeps keys and values of one shape, but `{}` and `{values}` \
                     differ (a latent-attention cache): export without genai",
                    p.name
                )));
            }
        }
        return Ok(());
    }
    Err(Error::Config(
        "`genai` (ONNX Runtime GenAI) needs a generation export with a growing cache: add --for-generation and \
         leave out --static-cache (GenAI feeds a 2-D attention mask and grows the cache itself)"
            .into(),
    ))
}

/// The refusal of a model whose generation stops at no token: GenAI takes `eos_token_id` in
/// `[0, vocab_size)` only and, without one, stops at token 0, where transformers' `generate`
/// goes on. No config can say "never": the checkpoint must name its EOS.
pub fn check_model(model: &ModelFacts) -> Result<()> {
    if model.shared_kv_layers > 0 {
        return Err(Error::Config(format!(
            "`genai` (ONNX Runtime GenAI) keeps a key/value cache for every layer, but {} of the {} layers reuse an \
             earlier layer's keys and values (num_kv_shared_layers): export without genai",
            model.shared_kv_layers, model.num_layers
        )));
    }
    match model.eos_token_ids.is_empty() {
        true => Err(Error::Config(
            "`genai`: the checkpoint names no eos_token_id (in generation_config.json, or config.json when it has \
             none), so transformers' generate stops at no token, which ONNX Runtime GenAI cannot express (it stops \
             at token 0 without one): add eos_token_id to generation_config.json, or export without genai"
                .into(),
        )),
        false => Ok(()),
    }
}

/// `genai_config.json` for the export's components, as ONNX Runtime GenAI 0.18 reads it.
pub fn genai_config(components: &[Component], model: &ModelFacts) -> Result<Value> {
    let decode = components
        .iter()
        .find(|c| c.spec.role == Role::Decode && c.spec.cache == CacheMode::Growing)
        .ok_or_else(|| Error::Config("genai: the export has no growing-cache `decode` component".into()))?;
    let filename = decode.file(".onnx")?;
    for name in ["input_ids", "attention_mask", "position_ids"] {
        if !decode.inputs.iter().any(|p| p.name == name) {
            return Err(Error::Config(format!("genai: `decode` has no input `{name}`")));
        }
    }
    let cache = |ports: &[hfexport_core::metadata::Port], side: fn(&str) -> String, kind: &str| -> Result<String> {
        let pattern = side(&cache_ports::layer_cache_pattern(kind));
        for i in 0..model.num_layers {
            let name = pattern.replace("%d", &i.to_string());
            if !ports.iter().any(|p| p.name == name) {
                return Err(Error::Config(format!("genai: `decode` has no port `{name}`")));
            }
        }
        Ok(pattern)
    };
    let first_eos = model.eos_token_ids.first().copied();
    let eos = match model.eos_token_ids.as_slice() {
        [] => None,
        [one] => Some(json!(one)),
        many => Some(json!(many)),
    };
    let mut search = json!({
        "diversity_penalty": 0.0,
        "do_sample": false,
        "early_stopping": true,
        "length_penalty": 1.0,
        "max_length": model.context_length,
        "min_length": 0,
        "no_repeat_ngram_size": 0,
        // greedy, GenAI's default (the decode takes any batch, so beams would run too)
        "num_beams": 1,
        "num_return_sequences": 1,
        "past_present_share_buffer": false,
        "repetition_penalty": 1.0,
        "temperature": 1.0,
        "top_k": 50,
        "top_p": 1.0,
    });
    for (key, value) in &model.sampling {
        search[key.as_str()] = value.clone();
    }
    let mut config = json!({
        "model": {
            "context_length": model.context_length,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": filename,
                "head_size": model.head_dim,
                "hidden_size": model.hidden_size,
                "inputs": {
                    "input_ids": "input_ids",
                    "attention_mask": "attention_mask",
                    "position_ids": "position_ids",
                    "past_key_names": cache(&decode.inputs, cache_ports::past, "key")?,
                    "past_value_names": cache(&decode.inputs, cache_ports::past, "value")?,
                },
                "outputs": {
                    "logits": "logits",
                    "present_key_names": cache(&decode.outputs, cache_ports::present, "key")?,
                    "present_value_names": cache(&decode.outputs, cache_ports::present, "value")?,
                },
                "num_attention_heads": model.num_heads,
                "num_hidden_layers": model.num_layers,
                "num_key_value_heads": model.num_kv_heads,
            },
            "type": genai_model_type(&model.model_type),
            "vocab_size": model.vocab_size,
        },
        "search": search,
    });
    // GenAI reads these as numbers: a token the checkpoint does not name is left out
    let tokens = [
        ("bos_token_id", model.bos_token_id.or(first_eos).map(|t| json!(t))),
        ("eos_token_id", eos),
        ("pad_token_id", model.pad_token_id.or(first_eos).map(|t| json!(t))),
    ];
    for (key, value) in tokens {
        if let Some(v) = value {
            config["model"][key] = v;
        }
    }
    Ok(config)
}

/// Writes `genai_config.json` into `dir`.
pub fn write_config(components: &[Component], model: &ModelFacts, dir: &Path) -> Result<()> {
    let text = serde_json::to_string_pretty(&genai_config(components, model)?).expect("JSON values serialize");
    let path = dir.join(CONFIG_FILE);
    std::fs::write(&path, text).map_err(|source| OnnxError::Io { path, source }.into())
}
