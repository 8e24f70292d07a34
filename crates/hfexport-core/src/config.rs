//! Export configs, mirroring the Python `transformers.exporters` dataclasses field for field,
//! so a dict written for one works for the other; [`AutoExportConfig`] picks the config from
//! `export_format`. Unknown keys and values are errors that list the valid ones.

use crate::error::{Error, Result};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExportFormat {
    Dynamo,
    Onnx,
    Executorch,
    Openvino,
}

impl ExportFormat {
    pub const ALL: [ExportFormat; 4] =
        [ExportFormat::Dynamo, ExportFormat::Onnx, ExportFormat::Executorch, ExportFormat::Openvino];

    pub fn as_str(self) -> &'static str {
        match self {
            ExportFormat::Dynamo => "dynamo",
            ExportFormat::Onnx => "onnx",
            ExportFormat::Executorch => "executorch",
            ExportFormat::Openvino => "openvino",
        }
    }

    pub fn parse(s: &str) -> Result<ExportFormat> {
        ExportFormat::ALL.into_iter().find(|f| f.as_str() == s).ok_or_else(|| {
            Error::Config(format!(
                "export_format `{s}` is unknown; valid: {}",
                names(&ExportFormat::ALL.map(|f| f.as_str()))
            ))
        })
    }
}

fn names(v: &[&str]) -> String {
    v.join(", ")
}

/// One axis of `dynamic_shapes`: a named symbolic dim with optional bounds, or `"auto"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AxisSpec {
    Auto,
    Dim { name: String, min: Option<i64>, max: Option<i64> },
}

/// `dynamic_shapes`: input name -> axis -> spec (axes not listed are static).
pub type DynamicShapes = BTreeMap<String, BTreeMap<usize, AxisSpec>>;

/// Fields every format shares (Python `DynamoConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommonConfig {
    pub dynamic: bool,
    /// Accepted for compatibility with the Python dicts; graphs are built, not traced, so it
    /// changes nothing here.
    pub strict: bool,
    pub dynamic_shapes: Option<DynamicShapes>,
    pub prefer_deferred_runtime_asserts_over_guards: bool,
    /// Weight quantization (`"quantizer"`: `"int4"`, `"int8"` or a recipe object; see
    /// [`crate::quant::QuantRecipe::from_json`]); `None` exports float weights.
    pub quantizer: Option<crate::quant::QuantRecipe>,
    /// How multi-head latent attention is computed (`"latent_attention"`; DeepSeek-V2/V3).
    pub latent_attention: LatentForm,
    /// `[height, width]` of the images an image model's graph takes (`"image_size"`: an
    /// integer or a pair); `None`: the config's `image_size`.
    pub image_size: Option<[usize; 2]>,
}

/// The two forms of multi-head latent attention (hfexport-models' `latent.rs`), equal in value: `Expanded`
/// turns the latent of every key position into each head's keys and values before attending,
/// `Absorbed` folds that expansion into the queries and the output instead and attends over
/// the latent itself. The expansion costs `kv_lora_rank x heads x (nope + v)` multiply-adds
/// per key position per call, the absorbed attention `heads x (2 kv_lora_rank + rope)` per
/// key position per query: absorbed wins by far when few queries meet a long cache (a decode
/// step), expanded when the queries are as many as the keys (a prompt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LatentForm {
    /// Absorbed in the decode components of a generation export, expanded elsewhere.
    #[default]
    Auto,
    Expanded,
    Absorbed,
}

impl LatentForm {
    pub const NAMES: [&'static str; 3] = ["auto", "expanded", "absorbed"];

    pub fn parse(s: &str) -> Option<LatentForm> {
        [LatentForm::Auto, LatentForm::Expanded, LatentForm::Absorbed].into_iter().find(|f| f.name() == s)
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The form a component builds: `Auto` resolved by whether it is a decode component.
    pub fn in_component(self, decode: bool) -> LatentForm {
        match (self, decode) {
            (LatentForm::Auto, true) => LatentForm::Absorbed,
            (LatentForm::Auto, false) => LatentForm::Expanded,
            (form, _) => form,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrtFusions {
    Cpu,
    Cuda,
    Webgpu,
    Dml,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnnxConfig {
    pub common: CommonConfig,
    pub opset_version: Option<u32>,
    pub optimize: bool,
    pub ort_fusions: Option<OrtFusions>,
    /// How quantized weights are written (`"quant_ops"`).
    pub quant_ops: OnnxQuantOps,
    /// Also write `genai_config.json`, so that ONNX Runtime GenAI loads a generation export
    /// with a growing cache as it is (`"genai"`; see docs/io-contracts.md).
    pub genai: bool,
}

/// The ops an ONNX export's quantized weights use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnnxQuantOps {
    /// ONNX Runtime's `com.microsoft.MatMulNBits` / `GatherBlockQuantized` (the default).
    Contrib,
    /// Standard ONNX: `DequantizeLinear` with `block_size` over int4/uint4/int8/uint8
    /// initializers (opset 21+), feeding `MatMul` / `Gather`; ONNX Runtime fuses the
    /// 4-bit linears into `MatMulNBits` when it loads the model.
    Standard,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutorchBackend {
    Xnnpack,
    Portable,
    Cuda,
    Mlx,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorchConfig {
    pub common: CommonConfig,
    pub backend: ExecutorchBackend,
    pub alloc_graph_input: bool,
    pub alloc_graph_output: bool,
    pub alloc_mutable_buffers: bool,
    /// A text decoder's generation export keeps its static cache in the program as mutable
    /// buffers and is one method `forward(input_ids, cache_position)` with the LLM runner's
    /// constant methods (ExecuTorch's `extension/llm` runner, optimum-executorch). `false`: the
    /// caches are method inputs and outputs, bound zero-copy by the caller.
    pub stateful: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenvinoConfig {
    pub common: CommonConfig,
    pub compress_to_fp16: bool,
    pub stateful: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportConfig {
    Dynamo(CommonConfig),
    Onnx(OnnxConfig),
    Executorch(ExecutorchConfig),
    Openvino(OpenvinoConfig),
}

const COMMON_KEYS: [&str; 8] = [
    "export_format",
    "dynamic",
    "strict",
    "dynamic_shapes",
    "prefer_deferred_runtime_asserts_over_guards",
    "quantizer",
    "latent_attention",
    "image_size",
];
pub const ONNX_OPSETS: std::ops::RangeInclusive<u32> = 17..=24;
const ORT_FUSIONS: [&str; 4] = ["cpu", "cuda", "webgpu", "dml"];
const QUANT_OPS: [&str; 2] = ["contrib", "standard"];
const ET_BACKENDS: [&str; 4] = ["xnnpack", "portable", "cuda", "mlx"];

/// Picks and parses the config of the format named by `export_format`.
pub struct AutoExportConfig;

impl AutoExportConfig {
    pub fn from_dict(v: &Value) -> Result<ExportConfig> {
        let obj = v.as_object().ok_or_else(|| Error::Config(format!("expected a JSON object, got {v}")))?;
        let fmt = match obj.get("export_format") {
            Some(Value::String(s)) => ExportFormat::parse(s)?,
            Some(other) => return Err(Error::Config(format!("export_format must be a string, got {other}"))),
            None => {
                return Err(Error::Config(format!(
                    "export_format is missing; valid: {}",
                    names(&ExportFormat::ALL.map(|f| f.as_str()))
                )))
            }
        };
        let own: &[&str] = match fmt {
            ExportFormat::Dynamo => &[],
            ExportFormat::Onnx => &["opset_version", "optimize", "ort_fusions", "quant_ops", "genai"],
            ExportFormat::Executorch => {
                &["backend", "alloc_graph_input", "alloc_graph_output", "alloc_mutable_buffers", "stateful"]
            }
            ExportFormat::Openvino => &["compress_to_fp16", "stateful"],
        };
        let valid: Vec<&str> = COMMON_KEYS.iter().chain(own).copied().collect();
        if let Some(k) = obj.keys().find(|k| !valid.contains(&k.as_str())) {
            return Err(Error::Config(format!(
                "unknown key `{k}` for export_format `{}`; valid keys: {}",
                fmt.as_str(),
                names(&valid)
            )));
        }
        let common = parse_common(obj)?;
        Ok(match fmt {
            ExportFormat::Dynamo => ExportConfig::Dynamo(common),
            ExportFormat::Onnx => {
                let optimize = get_bool(obj, "optimize", true)?;
                let ort_fusions = match get_str(obj, "ort_fusions")? {
                    None => None,
                    Some("cpu") => Some(OrtFusions::Cpu),
                    Some("cuda") => Some(OrtFusions::Cuda),
                    Some("webgpu") => Some(OrtFusions::Webgpu),
                    Some("dml") => Some(OrtFusions::Dml),
                    Some(s) => return Err(bad_value("ort_fusions", s, &ORT_FUSIONS)),
                };
                if ort_fusions.is_some() && !optimize {
                    return Err(Error::Config("`ort_fusions` requires `optimize=true`".into()));
                }
                let opset_version = match obj.get("opset_version") {
                    None | Some(Value::Null) => None,
                    Some(v) => {
                        let n = v
                            .as_u64()
                            .ok_or_else(|| Error::Config(format!("opset_version must be an integer, got {v}")))?;
                        let n = u32::try_from(n).ok().filter(|n| ONNX_OPSETS.contains(n)).ok_or_else(|| {
                            Error::Config(format!(
                                "opset_version {n} is not supported; valid: {}..={}",
                                ONNX_OPSETS.start(),
                                ONNX_OPSETS.end()
                            ))
                        })?;
                        Some(n)
                    }
                };
                let quant_ops = match get_str(obj, "quant_ops")?.unwrap_or("contrib") {
                    "contrib" => OnnxQuantOps::Contrib,
                    "standard" => OnnxQuantOps::Standard,
                    s => return Err(bad_value("quant_ops", s, &QUANT_OPS)),
                };
                if quant_ops == OnnxQuantOps::Standard && opset_version.is_some_and(|o| o < 21) {
                    return Err(Error::Config(
                        "`quant_ops: \"standard\"` needs opset_version 21 or later (DequantizeLinear with block_size \
                         and 4-bit types)"
                            .into(),
                    ));
                }
                let genai = get_bool(obj, "genai", false)?;
                ExportConfig::Onnx(OnnxConfig { common, opset_version, optimize, ort_fusions, quant_ops, genai })
            }
            ExportFormat::Executorch => {
                let backend = match get_str(obj, "backend")?.unwrap_or("xnnpack") {
                    "xnnpack" => ExecutorchBackend::Xnnpack,
                    "portable" => ExecutorchBackend::Portable,
                    "cuda" => ExecutorchBackend::Cuda,
                    "mlx" => ExecutorchBackend::Mlx,
                    s => return Err(bad_value("backend", s, &ET_BACKENDS)),
                };
                ExportConfig::Executorch(ExecutorchConfig {
                    common,
                    backend,
                    alloc_graph_input: get_bool(obj, "alloc_graph_input", true)?,
                    alloc_graph_output: get_bool(obj, "alloc_graph_output", true)?,
                    alloc_mutable_buffers: get_bool(obj, "alloc_mutable_buffers", true)?,
                    stateful: get_bool(obj, "stateful", true)?,
                })
            }
            ExportFormat::Openvino => ExportConfig::Openvino(OpenvinoConfig {
                common,
                compress_to_fp16: get_bool(obj, "compress_to_fp16", false)?,
                stateful: get_bool(obj, "stateful", true)?,
            }),
        })
    }

    pub fn from_json_str(s: &str) -> Result<ExportConfig> {
        let v: Value = serde_json::from_str(s).map_err(|e| Error::Config(format!("invalid JSON: {e}")))?;
        Self::from_dict(&v)
    }

    pub fn from_file(path: &std::path::Path) -> Result<ExportConfig> {
        let text = crate::limits::read_text(path, crate::limits::CONFIG_JSON)
            .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        Self::from_json_str(&text).map_err(|e| Error::Config(format!("{}: {e}", path.display())))
    }
}

fn bad_value(key: &str, got: &str, valid: &[&str]) -> Error {
    Error::Config(format!("{key} `{got}` is not valid; valid: {}", names(valid)))
}

fn get_bool(obj: &Map<String, Value>, key: &str, default: bool) -> Result<bool> {
    match obj.get(key) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(Error::Config(format!("{key} must be true or false, got {v}"))),
    }
}

fn get_str<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(Error::Config(format!("{key} must be a string, got {v}"))),
    }
}

/// The largest image side `image_size` takes.
pub const MAX_IMAGE_SIDE: usize = 1 << 14;

/// `image_size`: a positive integer (square) or `[height, width]`.
fn parse_image_size(v: Option<&Value>) -> Result<Option<[usize; 2]>> {
    let side = |v: &Value| {
        v.as_u64().filter(|&n| n > 0 && n <= MAX_IMAGE_SIDE as u64).map(|n| n as usize).ok_or_else(|| {
            Error::Config(format!("image_size must hold positive integers up to {MAX_IMAGE_SIDE}, got {v}"))
        })
    };
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(hw)) if hw.len() == 2 => Ok(Some([side(&hw[0])?, side(&hw[1])?])),
        Some(v @ Value::Number(_)) => side(v).map(|n| Some([n, n])),
        Some(v) => Err(Error::Config(format!("image_size must be an integer or [height, width], got {v}"))),
    }
}

fn parse_common(obj: &Map<String, Value>) -> Result<CommonConfig> {
    let quantizer = match obj.get("quantizer") {
        None | Some(Value::Null) => None,
        Some(v) => Some(crate::quant::QuantRecipe::from_json(v)?),
    };
    let latent_attention = match get_str(obj, "latent_attention")? {
        None => LatentForm::Auto,
        Some(s) => LatentForm::parse(s).ok_or_else(|| bad_value("latent_attention", s, &LatentForm::NAMES))?,
    };
    Ok(CommonConfig {
        quantizer,
        latent_attention,
        image_size: parse_image_size(obj.get("image_size"))?,
        dynamic: get_bool(obj, "dynamic", false)?,
        strict: get_bool(obj, "strict", false)?,
        dynamic_shapes: match obj.get("dynamic_shapes") {
            None | Some(Value::Null) => None,
            Some(v) => Some(parse_dynamic_shapes(v)?),
        },
        prefer_deferred_runtime_asserts_over_guards: get_bool(
            obj,
            "prefer_deferred_runtime_asserts_over_guards",
            false,
        )?,
    })
}

/// `{"input_ids": {"0": {"name": "batch", "min": 1, "max": 8}, "1": "auto"}}`, or per input a
/// list with one entry per axis (`null` = static), as `torch.export` accepts.
pub fn parse_dynamic_shapes(v: &Value) -> Result<DynamicShapes> {
    let obj = v
        .as_object()
        .ok_or_else(|| Error::Config(format!("dynamic_shapes must be an object of input names, got {v}")))?;
    let mut out = DynamicShapes::new();
    for (input, axes) in obj {
        let mut m = BTreeMap::new();
        let entries: Vec<(usize, &Value)> = match axes {
            Value::Object(a) => a
                .iter()
                .map(|(k, spec)| {
                    k.parse::<usize>().map(|i| (i, spec)).map_err(|_| {
                        Error::Config(format!("dynamic_shapes.{input}: axis `{k}` is not a non-negative integer"))
                    })
                })
                .collect::<Result<_>>()?,
            Value::Array(a) => a.iter().enumerate().filter(|(_, s)| !s.is_null()).collect(),
            other => {
                return Err(Error::Config(format!("dynamic_shapes.{input} must be an object or a list, got {other}")))
            }
        };
        for (axis, spec) in entries {
            m.insert(axis, parse_axis(&format!("dynamic_shapes.{input}.{axis}"), spec)?);
        }
        out.insert(input.clone(), m);
    }
    Ok(out)
}

fn parse_axis(at: &str, spec: &Value) -> Result<AxisSpec> {
    match spec {
        Value::String(s) if s == "auto" => Ok(AxisSpec::Auto),
        Value::Object(o) => {
            if let Some(k) = o.keys().find(|k| !["name", "min", "max"].contains(&k.as_str())) {
                return Err(Error::Config(format!("{at}: unknown key `{k}`; valid keys: name, min, max")));
            }
            let name = match o.get("name") {
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                other => return Err(Error::Config(format!("{at}.name must be a non-empty string, got {other:?}"))),
            };
            let bound = |k: &str| -> Result<Option<i64>> {
                match o.get(k) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => v
                        .as_i64()
                        .filter(|n| *n >= 0)
                        .map(Some)
                        .ok_or_else(|| Error::Config(format!("{at}.{k} must be a non-negative integer, got {v}"))),
                }
            };
            let (min, max) = (bound("min")?, bound("max")?);
            if let (Some(a), Some(b)) = (min, max) {
                if a > b {
                    return Err(Error::Config(format!("{at}: min {a} is greater than max {b}")));
                }
            }
            Ok(AxisSpec::Dim { name, min, max })
        }
        other => Err(Error::Config(format!("{at} must be \"auto\" or {{name, min, max}}, got {other}"))),
    }
}

impl ExportConfig {
    pub fn format(&self) -> ExportFormat {
        match self {
            ExportConfig::Dynamo(_) => ExportFormat::Dynamo,
            ExportConfig::Onnx(_) => ExportFormat::Onnx,
            ExportConfig::Executorch(_) => ExportFormat::Executorch,
            ExportConfig::Openvino(_) => ExportFormat::Openvino,
        }
    }

    pub fn common(&self) -> &CommonConfig {
        match self {
            ExportConfig::Dynamo(c) => c,
            ExportConfig::Onnx(c) => &c.common,
            ExportConfig::Executorch(c) => &c.common,
            ExportConfig::Openvino(c) => &c.common,
        }
    }

    /// The config as the dict `AutoExportConfig::from_dict` reads (recorded in export.json).
    pub fn to_dict(&self) -> Value {
        let c = self.common();
        let mut m = json!({
            "export_format": self.format().as_str(),
            "dynamic": c.dynamic,
            "strict": c.strict,
            "dynamic_shapes": c.dynamic_shapes.as_ref().map(dynamic_shapes_to_json),
            "prefer_deferred_runtime_asserts_over_guards": c.prefer_deferred_runtime_asserts_over_guards,
            "quantizer": c.quantizer.as_ref().map(|r| r.to_json()),
            "latent_attention": c.latent_attention.name(),
            "image_size": c.image_size,
        });
        let extra = match self {
            ExportConfig::Dynamo(_) => json!({}),
            ExportConfig::Onnx(o) => json!({
                "opset_version": o.opset_version,
                "optimize": o.optimize,
                "ort_fusions": o.ort_fusions.map(|f| ORT_FUSIONS[f as usize]),
                "quant_ops": QUANT_OPS[o.quant_ops as usize],
                "genai": o.genai,
            }),
            ExportConfig::Executorch(e) => json!({
                "backend": ET_BACKENDS[e.backend as usize],
                "alloc_graph_input": e.alloc_graph_input,
                "alloc_graph_output": e.alloc_graph_output,
                "alloc_mutable_buffers": e.alloc_mutable_buffers,
                "stateful": e.stateful,
            }),
            ExportConfig::Openvino(o) => {
                json!({"compress_to_fp16": o.compress_to_fp16, "stateful": o.stateful})
            }
        };
        if let (Some(m), Value::Object(e)) = (m.as_object_mut(), extra) {
            m.extend(e);
        }
        m
    }
}

fn dynamic_shapes_to_json(d: &DynamicShapes) -> Value {
    let mut out = Map::new();
    for (input, axes) in d {
        let mut a = Map::new();
        for (axis, spec) in axes {
            let v = match spec {
                AxisSpec::Auto => json!("auto"),
                AxisSpec::Dim { name, min, max } => json!({"name": name, "min": min, "max": max}),
            };
            a.insert(axis.to_string(), v);
        }
        out.insert(input.clone(), Value::Object(a));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(v: Value) -> String {
        AutoExportConfig::from_dict(&v).unwrap_err().to_string()
    }

    #[test]
    fn picks_the_config_from_export_format() {
        let c = AutoExportConfig::from_dict(&json!({"export_format": "onnx", "dynamic": true})).unwrap();
        let ExportConfig::Onnx(o) = &c else { panic!("expected onnx, got {c:?}") };
        assert!(o.common.dynamic && o.optimize && o.opset_version.is_none());
        let c = AutoExportConfig::from_dict(&json!({"export_format": "executorch"})).unwrap();
        assert_eq!(
            c,
            ExportConfig::Executorch(ExecutorchConfig {
                common: CommonConfig::default(),
                backend: ExecutorchBackend::Xnnpack,
                alloc_graph_input: true,
                alloc_graph_output: true,
                alloc_mutable_buffers: true,
                stateful: true,
            })
        );
        let c = AutoExportConfig::from_dict(&json!({"export_format": "openvino", "stateful": false})).unwrap();
        assert_eq!(
            c,
            ExportConfig::Openvino(OpenvinoConfig {
                common: CommonConfig::default(),
                compress_to_fp16: false,
                stateful: false
            })
        );
    }

    #[test]
    fn round_trips_through_to_dict() {
        for d in [
            json!({"export_format": "onnx", "opset_version": 18, "ort_fusions": "cpu",
                   "dynamic_shapes": {"input_ids": {"0": {"name": "batch", "min": 1, "max": 8}, "1": "auto"}}}),
            json!({"export_format": "executorch", "backend": "portable", "alloc_graph_output": false}),
            json!({"export_format": "dynamo", "prefer_deferred_runtime_asserts_over_guards": true}),
            json!({"export_format": "openvino", "latent_attention": "expanded"}),
            json!({"export_format": "onnx", "image_size": [192, 160]}),
        ] {
            let c = AutoExportConfig::from_dict(&d).unwrap();
            assert_eq!(AutoExportConfig::from_dict(&c.to_dict()).unwrap(), c);
        }
    }

    #[test]
    fn image_size_is_a_side_or_a_pair() {
        let size = |v: Value| AutoExportConfig::from_dict(&json!({"export_format": "onnx", "image_size": v}));
        assert_eq!(size(json!(224)).unwrap().common().image_size, Some([224, 224]));
        assert_eq!(size(json!([192, 160])).unwrap().common().image_size, Some([192, 160]));
        assert_eq!(size(Value::Null).unwrap().common().image_size, None);
        for bad in [json!(0), json!([1, 2, 3]), json!("224"), json!([16, -1])] {
            let e = size(bad.clone()).unwrap_err().to_string();
            assert!(e.contains("image_size"), "{bad}: {e}");
        }
    }

    #[test]
    fn unknown_keys_and_values_name_the_valid_ones() {
        let e = err(json!({"export_format": "onnx", "opset": 18}));
        assert!(e.contains("`opset`") && e.contains("opset_version"), "{e}");
        let e = err(json!({"export_format": "openvino", "backend": "xnnpack"}));
        assert!(e.contains("`backend`") && e.contains("stateful"), "{e}");
        let e = err(json!({"export_format": "tflite"}));
        assert!(e.contains("tflite") && e.contains("executorch"), "{e}");
        let e = err(json!({"export_format": "onnx", "quant_ops": "qdq"}));
        assert!(e.contains("qdq") && e.contains("standard") && e.contains("contrib"), "{e}");
        let e = err(json!({"export_format": "onnx", "quant_ops": "standard", "opset_version": 18}));
        assert!(e.contains("opset_version 21"), "{e}");
        let e = err(json!({"export_format": "onnx", "latent_attention": "fused"}));
        assert!(e.contains("latent_attention `fused`") && e.contains("absorbed"), "{e}");
        let e = err(json!({"export_format": "executorch", "backend": "vulkan"}));
        assert!(e.contains("vulkan") && e.contains("portable"), "{e}");
        let e = err(json!({"export_format": "onnx", "opset_version": 12}));
        assert!(e.contains("12") && e.contains("17..=24"), "{e}");
        let e = err(json!({"export_format": "onnx", "ort_fusions": "cpu", "optimize": false}));
        assert!(e.contains("optimize"), "{e}");
        let e = err(json!({"dynamic": true}));
        assert!(e.contains("export_format is missing"), "{e}");
        let e = err(json!({"export_format": "onnx", "dynamic": "yes"}));
        assert!(e.contains("dynamic must be true or false"), "{e}");
        let e = err(json!({"export_format": "onnx", "quantizer": {"weights": "int3"}}));
        assert!(e.contains("quantizer.weights") && e.contains("int3"), "{e}");
        let e = err(json!({"export_format": "onnx", "quantizer": {"weights": "int4", "group_size": 48}}));
        assert!(e.contains("group_size") && e.contains("48"), "{e}");
        let e = err(json!({"export_format": "onnx", "quantizer": {"weights": "int4", "group_size": "channel"}}));
        assert!(e.contains("int4 weights need a group_size"), "{e}");
        let e = err(json!({"export_format": "onnx", "quantizer": {"weights": "int4", "bits": 4}}));
        assert!(e.contains("quantizer.bits"), "{e}");
    }

    #[test]
    fn quantizer_recipes() {
        use crate::quant::{QuantRecipe, QuantScheme};
        let q = |v| AutoExportConfig::from_dict(&v).unwrap().common().quantizer.clone().unwrap();
        assert_eq!(q(json!({"export_format": "onnx", "quantizer": "int4"})), QuantRecipe::preset("int4").unwrap());
        let r =
            q(json!({"export_format": "onnx", "quantizer": {"weights": "int8", "group_size": 64, "symmetric": false,
            "lm_head": null, "embeddings": "int8", "exclude": ["model.layers.0.mlp"]}}));
        assert_eq!(r.weights, QuantScheme::new(8, Some(64), false));
        assert_eq!((r.lm_head, r.embeddings), (None, Some(QuantScheme::INT8)));
        assert!(r.excludes("model.layers.0.mlp.down_proj") && !r.excludes("model.layers.0.mlpx"));
        assert_eq!(QuantRecipe::from_json(&r.to_json()).unwrap(), r);
    }

    #[test]
    fn dynamic_shapes_are_validated() {
        let e = err(json!({"export_format": "onnx", "dynamic_shapes": {"input_ids": {"x": "auto"}}}));
        assert!(e.contains("axis `x`"), "{e}");
        let e = err(
            json!({"export_format": "onnx", "dynamic_shapes": {"input_ids": {"0": {"name": "b", "min": 9, "max": 2}}}}),
        );
        assert!(e.contains("min 9 is greater than max 2"), "{e}");
        let e =
            err(json!({"export_format": "onnx", "dynamic_shapes": {"input_ids": {"0": {"name": "b", "maximum": 2}}}}));
        assert!(e.contains("`maximum`"), "{e}");
        let c = AutoExportConfig::from_dict(&json!({"export_format": "onnx",
            "dynamic_shapes": {"input_ids": [null, {"name": "seq", "max": 64}]}}))
        .unwrap();
        let ds = c.common().dynamic_shapes.clone().unwrap();
        assert_eq!(ds["input_ids"][&1], AxisSpec::Dim { name: "seq".into(), min: None, max: Some(64) });
        assert!(!ds["input_ids"].contains_key(&0));
    }
}
