//! `config.json` -> [`ModelConfig`], with the defaults and semantics of transformers 5.23.
//!
//! A checkpoint's `config.json` is read the way transformers' config class for its
//! `model_type` reads it (Llama, Mistral, Qwen2 and Qwen3 are known; any other type gets the
//! common semantics and must spell out its sizes): missing keys take that class's defaults,
//! the old rope form (`rope_theta` + `rope_scaling`) and the new one (`rope_parameters`) are
//! merged exactly as `convert_rope_params_to_dict` / `standardize_rope_params` do, and the
//! per-layer attention kinds are derived as each modeling class derives them.
//!
//! Everything is validated here, before a builder allocates anything: wrong types, absurd
//! sizes and unsupported settings are a [`ModelError::Config`] naming the file and the key.
//! The JSON is kept as a `serde_json::Value` and read key by key (rather than through a typed
//! serde struct) precisely so that a type error can name its key.

use std::path::{Path, PathBuf};

use hfexport_core::{DType, RopeConfig, RopeScaling};
use serde_json::{Map, Value};

use crate::arch::{
    self, Architecture, Bias, ConfigSchema, Defaults, EmbeddingScale, LayerRule, NormTopK, RopeRule, ScaleRule,
    NO_DEFAULTS,
};
use crate::error::{ModelError, Result};

/// Upper bounds on sizes: far above any real model, low enough that a typo or a hostile file
/// cannot make a builder allocate absurd amounts.
pub const MAX_LAYERS: usize = 1024;
pub const MAX_HIDDEN: usize = 1 << 20;
pub const MAX_VOCAB: usize = 1 << 24;
pub const MAX_HEADS: usize = 4096;
pub const MAX_HEAD_DIM: usize = 4096;
pub const MAX_POSITIONS: usize = 1 << 24;
pub const MAX_INTERMEDIATE: usize = 1 << 22;
pub const MAX_SLIDING_WINDOW: usize = 1 << 30;
pub const MAX_EXPERTS: usize = 1 << 16;

/// A `config.json` larger than this is not a model config.
const MAX_CONFIG_BYTES: u64 = hfexport_core::limits::CONFIG_JSON;

/// The attention kind of one decoder layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LayerType {
    FullAttention,
    /// Attends to the last [`ModelConfig::sliding_window`] positions (itself included).
    SlidingAttention,
}

/// The normalised model configuration builders work from.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// `architectures[0]`, e.g. `LlamaForCausalLM`.
    pub architecture: String,
    pub model_type: Option<String>,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    /// The epsilon of every norm (`rms_norm_eps`, GPT-2's `layer_norm_epsilon`).
    pub norm_eps: f64,
    /// The rotary embedding (of the full-attention layers when [`Self::sliding_rope`] is set).
    pub rope: RopeConfig,
    /// The sliding layers' own rotary embedding (Gemma 3's local base frequency).
    pub sliding_rope: Option<RopeConfig>,
    /// Per layer: whether it applies a rotary embedding (false: SmolLM3's NoPE layers, GPT-2).
    pub rotary_layers: Vec<bool>,
    pub tie_word_embeddings: bool,
    /// Biases of the q/k/v projections, resolved as the architecture's class reads them (the
    /// `attention_bias` key, hard-wired on in Qwen2, absent in Mistral).
    pub attention_bias: bool,
    /// Bias of the attention output projection.
    pub o_bias: bool,
    /// Biases of the MLP projections (the `mlp_bias` key where the class reads it).
    pub mlp_bias: bool,
    /// Biases of the LayerNorms (always in BERT and GPT-2, ModernBERT's `norm_bias`).
    pub norm_bias: bool,
    /// The MLP is gated (T5's `gated-*` `feed_forward_proj`; the layout decides elsewhere).
    pub gated_mlp: bool,
    /// T5's relative position bias (every attention of a stack adds it to its scores).
    pub relative_attention: Option<RelativeAttention>,
    /// The window used by the sliding layers; `None` when no layer slides.
    pub sliding_window: Option<usize>,
    /// One entry per layer (`len() == num_hidden_layers`).
    pub layer_types: Vec<LayerType>,
    /// Per layer: the factor of the attention scores (`head_dim ** -0.5` in most families).
    pub attention_scales: Vec<f64>,
    /// Token embeddings are multiplied by this (Gemma's `sqrt(hidden_size)`, Granite's
    /// `embedding_multiplier`).
    pub embedding_scale: Option<f64>,
    /// Sub-block outputs are multiplied by this before the residual add (Granite).
    pub residual_multiplier: Option<f64>,
    /// Logits are divided by this (Granite's `logits_scaling`).
    pub logits_scaling: Option<f64>,
    /// `tanh(scores / c) * c` before the mask (Gemma 2's `attn_logit_softcapping`).
    pub attn_softcap: Option<f64>,
    /// `tanh(logits / c) * c` (Gemma 2/3's `final_logit_softcapping`).
    pub final_softcap: Option<f64>,
    /// The sparse mixture-of-experts MLP, for families that have one.
    pub moe: Option<MoeConfig>,
    /// `dtype` (transformers 5) or `torch_dtype` (older files).
    pub dtype: Option<DType>,
    pub bos_token_id: Option<i64>,
    pub eos_token_ids: Vec<i64>,
    pub pad_token_id: Option<i64>,
    /// An encoder's own settings (BERT, RoBERTa); `None` for a decoder.
    pub encoder: Option<EncoderConfig>,
    /// The encoder stack of an encoder-decoder (Whisper); the fields above are its decoder's.
    pub seq2seq: Option<Seq2SeqConfig>,
    /// The image side of a vision-language model (LLaVA); the fields above are its text
    /// model's (`text_config`).
    pub vision: Option<Box<VisionConfig>>,
}

/// A vision-language model's image side, resolved (LlavaConfig's keys).
#[derive(Debug, Clone, PartialEq)]
pub struct VisionConfig {
    pub entry: &'static arch::VisionLanguage,
    /// The family of `text_config.model_type`, whose blocks the text model is built from.
    pub text_family: &'static Architecture,
    /// The vision tower (`vision_config`) as an image encoder's config.
    pub tower: ModelConfig,
    /// `image_token_index` (`image_token_id`): the placeholder the image embeddings replace.
    pub image_token_id: i64,
    /// The tower's hidden states the features are taken from, concatenated in this order
    /// (`vision_feature_layer`, negative indices resolved: 0 is the embeddings after the
    /// pre-norm, `i` the output of layer `i`).
    pub feature_layers: Vec<usize>,
    /// `vision_feature_select_strategy` `full` keeps the CLS position (`default` drops it).
    pub keep_cls: bool,
    /// `projector_hidden_act`.
    pub projector_act: String,
    /// `multimodal_projector_bias`.
    pub projector_bias: bool,
    /// Qwen2-VL's patch rows and merger; `None` for a CLIP tower.
    pub merge: Option<MergeConfig>,
    /// Qwen2-VL's `mrope_section`: the rotary frequencies of the temporal, height and width
    /// position rows (summing to half the head dim); empty for a text model with plain rope.
    pub mrope_section: Vec<usize>,
}

/// A Qwen2-VL tower's patches and merger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeConfig {
    pub patch_size: usize,
    pub temporal_patch_size: usize,
    pub channels: usize,
    /// `spatial_merge_size`: each merged row is this many squared neighbouring patches.
    pub spatial_merge_size: usize,
}

impl MergeConfig {
    /// Values per patch row of `pixel_values`.
    pub fn patch_values(&self) -> usize {
        self.channels * self.temporal_patch_size * self.patch_size * self.patch_size
    }
}

/// T5's bucketed relative positions: `num_buckets` buckets, logarithmic up to `max_distance`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelativeAttention {
    pub num_buckets: usize,
    pub max_distance: usize,
}

impl RelativeAttention {
    /// The bucket of `relative` = key position - query position, as T5's
    /// `_relative_position_bucket` computes it (its logarithm in f32, as torch does): half the
    /// buckets for each direction when `bidirectional`, else only the past.
    pub fn bucket(&self, relative: i64, bidirectional: bool) -> i64 {
        let mut buckets = self.num_buckets as i64;
        let mut base = 0;
        let distance = match bidirectional {
            true => {
                buckets /= 2;
                if relative > 0 {
                    base = buckets;
                }
                relative.abs()
            }
            false => -relative.min(0),
        };
        let exact = buckets / 2;
        if distance < exact {
            return base + distance;
        }
        let ratio = (distance as f32 / exact as f32).ln() / ((self.max_distance as f64 / exact as f64).ln() as f32);
        let large = exact + (ratio * (buckets - exact) as f32) as i64;
        base + large.min(buckets - 1)
    }
}

/// An encoder-decoder's encoder, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Seq2SeqConfig {
    pub encoder_layers: usize,
    pub encoder_heads: usize,
    pub encoder_head_dim: usize,
    pub encoder_ffn: usize,
    /// The encoder's attention scale.
    pub encoder_scale: f64,
    /// Encoder positions: the encoder states' length (the input has twice as many frames;
    /// Whisper); `None`: any length of tokens (T5).
    pub source_positions: Option<usize>,
    /// Log-mel bins of the input features (Whisper).
    pub mel_bins: Option<usize>,
    pub decoder_start_token_id: i64,
}

/// An encoder config, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct EncoderConfig {
    /// Rows of the token type embedding (`token_type_ids` is an input when above 1; 0: the
    /// family has none).
    pub type_vocab_size: usize,
    /// Outputs of a classification head: `len(id2label)`, else `num_labels`, else 2 (as
    /// `PreTrainedConfig` reads them).
    pub num_labels: usize,
    /// The pooler's width (`pooler_output_size`, ViT) and activation (`pooler_act`; tanh).
    pub pooler_size: usize,
    pub pooler_act: String,
    /// What an image encoder reads (ViT).
    pub image: Option<ImageConfig>,
    pub heads: HeadsConfig,
}

/// How the task heads are configured (ModernBERT's keys; fixed in the other families).
#[derive(Debug, Clone, PartialEq)]
pub struct HeadsConfig {
    /// `classifier_activation`: the masked-LM transform's activation where the family reads it.
    pub activation: Option<String>,
    /// `classifier_bias`: whether the transform's dense has a bias (always, elsewhere).
    pub dense_bias: bool,
    /// `classifier_pooling` is `mean`: sequence classification averages the unpadded tokens
    /// instead of taking the first.
    pub mean_pooling: bool,
    /// `decoder_bias`: whether the masked-LM decoder has a bias (always, elsewhere).
    pub decoder_bias: bool,
}

/// An image encoder's input: `[batch, channels, height, width]` cut into `patch` patches.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageConfig {
    /// `[height, width]` (`image_size`, an integer or a pair).
    pub size: [usize; 2],
    pub patch: [usize; 2],
    pub channels: usize,
}

impl ImageConfig {
    /// Patches per image.
    pub fn patches(&self) -> usize {
        (self.size[0] / self.patch[0]) * (self.size[1] / self.patch[1])
    }
}

/// A mixture-of-experts config, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct MoeConfig {
    pub num_experts: usize,
    /// `num_experts_per_tok`.
    pub top_k: usize,
    /// Each expert's intermediate size.
    pub intermediate_size: usize,
    /// Whether the top-k routing weights are divided by their sum.
    pub normalize: bool,
    /// Per layer: a sparse MLP (false: the dense MLP of `intermediate_size`).
    pub sparse_layers: Vec<bool>,
    /// The shared expert's intermediate size (Qwen2-MoE).
    pub shared_expert_intermediate_size: Option<usize>,
}

impl ModelConfig {
    /// Whether layer `i` has the sparse MoE MLP.
    pub fn sparse_layer(&self, i: usize) -> bool {
        self.moe.as_ref().is_some_and(|m| m.sparse_layers.get(i).copied().unwrap_or(false))
    }

    /// Reads and validates `<dir>/config.json`.
    pub fn from_dir(dir: &Path) -> Result<ModelConfig> {
        let path = dir.join("config.json");
        let text = read_small_text(&path, MAX_CONFIG_BYTES)?;
        ModelConfig::from_json_str(&text, &path)
    }

    /// Parses and validates config text; `path` only names the file in errors.
    pub fn from_json_str(text: &str, path: &Path) -> Result<ModelConfig> {
        let value: Value = serde_json::from_str(text).map_err(|e| ModelError::json(path, &e))?;
        let Value::Object(obj) = &value else {
            return Err(ModelError::config(path, "<root>", format!("must be a JSON object, got {}", describe(&value))));
        };
        normalise(&Fields::new(obj, path, ""))
    }

    /// The encoder stack of an encoder-decoder as a config of its own: its layer count, heads
    /// and MLP width in place of the decoder's, its positions, every layer full attention
    /// without rotary; `None` for a decoder-only or encoder-only model.
    pub fn encoder_side(&self) -> Option<ModelConfig> {
        let s = self.seq2seq.as_ref()?;
        let n = s.encoder_layers;
        Some(ModelConfig {
            num_hidden_layers: n,
            num_attention_heads: s.encoder_heads,
            num_key_value_heads: s.encoder_heads,
            head_dim: s.encoder_head_dim,
            intermediate_size: s.encoder_ffn,
            max_position_embeddings: s.source_positions.unwrap_or(self.max_position_embeddings),
            rotary_layers: vec![false; n],
            layer_types: vec![LayerType::FullAttention; n],
            sliding_window: None,
            attention_scales: vec![s.encoder_scale; n],
            ..self.clone()
        })
    }

    /// The rotary embedding of `layer`, `None` for a layer without one.
    pub fn layer_rope(&self, layer: usize) -> Option<&RopeConfig> {
        if !self.rotary_layers.get(layer).copied().unwrap_or(false) {
            return None;
        }
        match (self.layer_types.get(layer), &self.sliding_rope) {
            (Some(LayerType::SlidingAttention), Some(rope)) => Some(rope),
            _ => Some(&self.rope),
        }
    }
}

/// Reads a text file that must stay small (JSON metadata), naming the file in every error.
pub(crate) fn read_small_text(path: &Path, max_bytes: u64) -> Result<String> {
    hfexport_core::limits::read_text(path, max_bytes).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData => ModelError::Json { path: path.to_path_buf(), msg: e.to_string() },
        _ => ModelError::io(path, e),
    })
}

/// The schema of a `model_type` no definition claims: common semantics, sizes spelled out.
const GENERIC: ConfigSchema = ConfigSchema {
    keys: arch::ARCHITECTURES[0].config.keys,
    defaults: NO_DEFAULTS,
    text_config: false,
    layers: LayerRule::Explicit,
    biases: arch::ARCHITECTURES[0].config.biases,
    scale: ScaleRule::HeadDim,
    embedding_scale: EmbeddingScale::None,
    rope: RopeRule::Uniform,
    partial_rotary: false,
    rope_types: None,
    rope_type_rewrites: &[],
    granite_multipliers: false,
    softcapping: arch::NO_SOFTCAPPING,
    heads_divide_hidden: false,
    moe: None,
    encoder: None,
    seq2seq: None,
};

fn normalise(top: &Fields) -> Result<ModelConfig> {
    let architecture = architecture(top)?;
    let model_type = top.string("model_type")?.map(str::to_string);
    if let Some(entry) = arch::vision_language(model_type.as_deref(), &architecture) {
        return vision_language(top, entry, architecture, model_type);
    }
    let family = arch::detect(model_type.as_deref(), &architecture);
    check_class_matches(top, family, &architecture, model_type.as_deref())?;
    let schema = family.map_or(&GENERIC, |a| &a.config);
    let nested;
    let f = match (schema.text_config, top.raw("text_config")) {
        (true, Some(Value::Object(obj))) => {
            nested = Fields::new(obj, top.path, "text_config.");
            &nested
        }
        (true, Some(v)) if !v.is_null() => {
            return Err(top.err("text_config", format!("must be an object, got {}", describe(v))))
        }
        _ => top,
    };
    model_config(top, f, schema, architecture, model_type)
}

/// A config read from `f` by `schema`; `top` holds the keys a nested config leaves at the top
/// (`dtype`, `tie_word_embeddings`).
fn model_config(
    top: &Fields,
    f: &Fields,
    schema: &ConfigSchema,
    architecture: String,
    model_type: Option<String>,
) -> Result<ModelConfig> {
    let d = &schema.defaults;
    let dims = Dims::parse(f, schema)?;
    if schema.heads_divide_hidden && !dims.hidden_size.is_multiple_of(dims.num_attention_heads) {
        return Err(f.err(
            schema.keys.hidden_size,
            format!("{} is not a multiple of num_attention_heads ({})", dims.hidden_size, dims.num_attention_heads),
        ));
    }
    let (layer_types, sliding_window) = parse_layers(f, schema, dims.num_hidden_layers)?;
    let (rope, sliding_rope) = parse_ropes(f, schema, &dims)?;
    let rotary_layers = rotary_layers(f, schema, dims.num_hidden_layers)?;
    let (attention_bias, o_bias, mlp_bias, norm_bias) = parse_biases(f, schema)?;
    let (bos_token_id, eos_token_ids, pad_token_id) = parse_token_ids(f, d)?;
    let (residual_multiplier, granite_logits) = granite_multipliers(f, schema)?;
    let logits_scaling = granite_logits.or(t5_output_scale(top, schema, dims.hidden_size)?);
    let (attn_softcap, final_softcap) = softcaps(f, schema)?;
    if f.raw("use_bidirectional_attention").is_some_and(|v| !v.is_null())
        && f.bool("use_bidirectional_attention")? == Some(true)
    {
        return Err(f.err("use_bidirectional_attention", "bidirectional attention (an encoder use) is not supported"));
    }
    Ok(ModelConfig {
        architecture,
        model_type,
        vocab_size: dims.vocab_size,
        hidden_size: dims.hidden_size,
        intermediate_size: dims.intermediate_size,
        num_hidden_layers: dims.num_hidden_layers,
        num_attention_heads: dims.num_attention_heads,
        num_key_value_heads: dims.num_key_value_heads,
        head_dim: dims.head_dim,
        hidden_act: activation(f, schema)?,
        max_position_embeddings: dims.max_position_embeddings,
        norm_eps: parse_eps(f, schema)?,
        rope,
        sliding_rope,
        rotary_layers,
        // T5Config ties the head always (a stored `lm_head` still wins)
        tie_word_embeddings: schema.seq2seq.is_some_and(|s| s.t5) || tie_word_embeddings(top, d)?,
        attention_bias,
        o_bias,
        mlp_bias,
        norm_bias,
        gated_mlp: schema.seq2seq.is_some_and(|s| s.t5) && feed_forward_proj(f)?.1,
        relative_attention: relative_attention(f, schema)?,
        sliding_window,
        layer_types,
        attention_scales: attention_scales(f, schema, &dims)?,
        embedding_scale: embedding_scale(f, schema, &dims)?,
        residual_multiplier,
        logits_scaling,
        attn_softcap,
        final_softcap,
        moe: parse_moe(f, schema, &dims)?,
        dtype: parse_dtype(top)?,
        bos_token_id,
        eos_token_ids,
        pad_token_id,
        encoder: parse_encoder(f, schema, dims.hidden_size)?,
        seq2seq: parse_seq2seq(f, schema, &dims, pad_token_id)?,
        vision: None,
    })
}

/// A vision-language config (LlavaConfig): the text model from `text_config` by the family its
/// `model_type` names, the vision tower from `vision_config`, and the keys that join them.
fn vision_language(
    top: &Fields,
    entry: &'static arch::VisionLanguage,
    architecture: String,
    model_type: Option<String>,
) -> Result<ModelConfig> {
    if !entry.classes.contains(&architecture.as_str()) {
        return Err(top.err(
            "architectures",
            format!(
                "`{architecture}` cannot read a `{}` config; valid: {}",
                entry.model_types[0],
                entry.classes.join(", ")
            ),
        ));
    }
    let empty = Map::new();
    let sub = |key: &str| match top.raw(key) {
        Some(Value::Object(obj)) => Ok(Some(obj)),
        None | Some(Value::Null) if key == "text_config" => Ok(None),
        None | Some(Value::Null) => Err(top.err(key, "is missing (the vision tower's config)")),
        Some(v) => Err(top.err(key, format!("must be an object, got {}", describe(v)))),
    };
    let text = match sub("text_config")? {
        Some(obj) => Fields::new(obj, top.path, "text_config."),
        // Qwen2-VL's hub files keep the text keys at the top
        None if entry.flat_text => Fields::new(top.obj, top.path, ""),
        None => Fields::new(&empty, top.path, "text_config."),
    };
    let text_type =
        text.string("model_type")?.filter(|t| !entry.model_types.contains(t)).unwrap_or(entry.default_text_type);
    let family = arch::ARCHITECTURES
        .iter()
        .find(|a| a.model_types.contains(&text_type) && a.layout.encoder.is_none() && a.layout.encoder_stack.is_none())
        .ok_or_else(|| {
            text.err("model_type", format!("`{text_type}` is not a supported causal language model family"))
        })?;
    if family.config.text_config || family.layout.position_embed.is_some() {
        return Err(
            text.err("model_type", format!("`{text_type}` is not supported as the text model of {architecture}"))
        );
    }
    let mut cfg = model_config(top, &text, &family.config, architecture.clone(), model_type)?;
    // the class ties the head when either it or its text config says so
    cfg.tie_word_embeddings |= text.bool("tie_word_embeddings")?.unwrap_or(family.config.defaults.tie_word_embeddings);
    let vision = Fields::new(sub("vision_config")?.unwrap_or(&empty), top.path, "vision_config.");
    let vision_type = vision.string("model_type")?.unwrap_or(entry.vision_types[0]);
    if !entry.vision_types.contains(&vision_type) {
        return Err(vision
            .err("model_type", format!("`{vision_type}` is not supported; valid: {}", entry.vision_types.join(", "))));
    }
    let (schema, merged) = match entry.vision.kind {
        arch::TowerKind::Clip => (&arch::CLIP_VISION.config, false),
        arch::TowerKind::Merged { .. } => (&arch::QWEN2_VL_VISION.config, true),
    };
    let class = if merged { "Qwen2VisionTransformerPretrainedModel" } else { "CLIPVisionModel" };
    let mut tower = model_config(&vision, &vision, schema, class.into(), Some(vision_type.into()))?;
    let (merge, mrope_section) = match merged {
        false => (None, vec![]),
        true => merged_tower(&vision, &text, &mut tower, &cfg)?,
    };
    if merged {
        let v = VisionConfig {
            entry,
            text_family: family,
            feature_layers: vec![tower.num_hidden_layers],
            tower,
            image_token_id: top.int("image_token_id")?.unwrap_or(151655),
            keep_cls: false,
            projector_act: "gelu".into(),
            projector_bias: true,
            merge,
            mrope_section,
        };
        if v.image_token_id < 0 {
            return Err(top.err("image_token_id", format!("{} is not a token id", v.image_token_id)));
        }
        cfg.vision = Some(Box::new(v));
        return Ok(cfg);
    }
    let image_token_id = match (top.int("image_token_index")?, top.int("image_token_id")?) {
        (Some(id), _) | (None, Some(id)) => id,
        (None, None) => 32000,
    };
    if image_token_id < 0 {
        return Err(top.err("image_token_index", format!("{image_token_id} is not a token id")));
    }
    let keep_cls = match top.string("vision_feature_select_strategy")?.unwrap_or("default") {
        "default" => false,
        "full" => true,
        other => {
            return Err(top.err("vision_feature_select_strategy", format!("`{other}` is not one of: default, full")))
        }
    };
    let layers = tower.num_hidden_layers as i64;
    let raw_layers = match top.raw("vision_feature_layer") {
        None | Some(Value::Null) => vec![-2],
        Some(Value::Array(list)) if !list.is_empty() => {
            list.iter()
                .map(|v| v.as_i64())
                .collect::<Option<Vec<i64>>>()
                .ok_or_else(|| top.err("vision_feature_layer", "must be an integer or a list of integers"))?
        }
        Some(v) => vec![v.as_i64().ok_or_else(|| {
            top.err("vision_feature_layer", format!("must be an integer or a list of integers, got {}", describe(v)))
        })?],
    };
    let feature_layers = raw_layers
        .iter()
        .map(|&l| {
            let i = if l < 0 { layers + 1 + l } else { l };
            match (0..=layers).contains(&i) {
                true => Ok(i as usize),
                false => Err(top.err(
                    "vision_feature_layer",
                    format!(
                        "{l} is outside the tower's {} hidden states (its {layers} layers and the embeddings)",
                        layers + 1
                    ),
                )),
            }
        })
        .collect::<Result<Vec<usize>>>()?;
    let projector_act = top.string("projector_hidden_act")?.unwrap_or("gelu").to_string();
    let projector_bias = top.bool("multimodal_projector_bias")?.unwrap_or(true);
    cfg.vision = Some(Box::new(VisionConfig {
        entry,
        text_family: family,
        tower,
        image_token_id,
        feature_layers,
        keep_cls,
        projector_act,
        projector_bias,
        merge: None,
        mrope_section: vec![],
    }));
    Ok(cfg)
}

/// A Qwen2-VL tower's own keys: the MLP width (`embed_dim x mlp_ratio`), the patches and merger,
/// the 2-D rotary (`rope_parameters.rope_theta`, 10000) over the whole head; and the text model's
/// `mrope_section`. The merger must end in the text width (`vision_config.hidden_size`).
fn merged_tower(
    vision: &Fields,
    text: &Fields,
    tower: &mut ModelConfig,
    cfg: &ModelConfig,
) -> Result<(Option<MergeConfig>, Vec<usize>)> {
    let ratio = vision.size("mlp_ratio", Some(4), 64)?;
    tower.intermediate_size = tower.hidden_size * ratio;
    let n = tower.num_hidden_layers;
    let theta = match vision.raw("rope_parameters") {
        Some(Value::Object(m)) => m.get("rope_theta").and_then(Value::as_f64).unwrap_or(10000.0),
        _ => 10000.0,
    };
    tower.rope = RopeConfig { theta, dim: tower.head_dim, scaling: RopeScaling::Default };
    tower.rotary_layers = vec![true; n];
    let channels = match vision.raw("in_channels") {
        Some(v) if !v.is_null() => vision.size("in_channels", Some(3), 64)?,
        _ => vision.size("in_chans", Some(3), 64)?,
    };
    let merge = MergeConfig {
        patch_size: vision.size("patch_size", Some(14), MAX_IMAGE_SIDE)?,
        temporal_patch_size: vision.size("temporal_patch_size", Some(2), 64)?,
        channels,
        spatial_merge_size: vision.size("spatial_merge_size", Some(2), 64)?,
    };
    let out = vision.size("hidden_size", Some(3584), MAX_HIDDEN)?;
    if out != cfg.hidden_size {
        return Err(
            vision.err("hidden_size", format!("{out} differs from the text model's hidden size {}", cfg.hidden_size))
        );
    }
    let section = match rope_dict(text)?.and_then(|(_, m)| m.get("mrope_section")) {
        None | Some(Value::Null) => {
            return Err(text.err("rope_parameters", "has no `mrope_section` (the multimodal rotary's split)"))
        }
        Some(Value::Array(list)) => list.iter().map(|v| v.as_u64().map(|x| x as usize)).collect::<Option<Vec<usize>>>(),
        Some(_) => None,
    };
    let section = section.filter(|s| s.len() == 3 && s.iter().sum::<usize>() * 2 == cfg.rope.dim).ok_or_else(|| {
        text.err(
            "rope_parameters",
            format!("`mrope_section` must be 3 sizes summing to half the rotary dim ({})", cfg.rope.dim / 2),
        )
    })?;
    Ok((Some(merge), section))
}

/// T5 scales the decoder's output by `d_model ** -0.5` before the head (the logits divided by
/// `sqrt(d_model)`) unless `scale_decoder_outputs` is false, or, in a file without that key,
/// `tie_word_embeddings` is (T5 v1.1, Flan-T5).
fn t5_output_scale(top: &Fields, schema: &ConfigSchema, hidden: usize) -> Result<Option<f64>> {
    if !schema.seq2seq.is_some_and(|s| s.t5) {
        return Ok(None);
    }
    let scaled = match top.bool("scale_decoder_outputs")? {
        Some(v) => v,
        None => top.bool("tie_word_embeddings")? != Some(false),
    };
    Ok(scaled.then(|| (hidden as f64).sqrt()))
}

/// T5's `relative_attention_num_buckets` and `relative_attention_max_distance`.
fn relative_attention(f: &Fields, schema: &ConfigSchema) -> Result<Option<RelativeAttention>> {
    if !schema.seq2seq.is_some_and(|s| s.t5) {
        return Ok(None);
    }
    let num_buckets = f.size("relative_attention_num_buckets", Some(32), 1 << 16)?;
    let max_distance = f.size("relative_attention_max_distance", Some(128), MAX_POSITIONS)?;
    // the decoder's exact range is half the buckets (the encoder's a quarter)
    let exact = num_buckets / 2;
    if num_buckets < 4 || max_distance <= exact {
        return Err(f.err(
            "relative_attention_max_distance",
            format!("{max_distance} with {num_buckets} buckets leaves no logarithmic buckets (needs at least 4 buckets and max_distance > num_buckets / 2)"),
        ));
    }
    Ok(Some(RelativeAttention { num_buckets, max_distance }))
}

fn parse_seq2seq(f: &Fields, schema: &ConfigSchema, dims: &Dims, pad: Option<i64>) -> Result<Option<Seq2SeqConfig>> {
    let Some(s) = schema.seq2seq else { return Ok(None) };
    let hidden = dims.hidden_size;
    let encoder_heads = f.size(s.heads.0, Some(s.heads.1), MAX_HEADS)?;
    // Whisper's heads split the hidden size; T5's have their own size (`d_kv`)
    let encoder_head_dim = match s.t5 {
        true => dims.head_dim,
        false if hidden.is_multiple_of(encoder_heads) => hidden / encoder_heads,
        false => return Err(f.err(s.heads.0, format!("{encoder_heads} does not divide the hidden size {hidden}"))),
    };
    let decoder_start_token_id = match (f.int("decoder_start_token_id")?, s.decoder_start_token_id.or(pad)) {
        (Some(id), _) if id >= 0 => id,
        (Some(id), _) => return Err(f.err("decoder_start_token_id", format!("must be a token id, got {id}"))),
        (None, Some(id)) => id,
        (None, None) => return Err(f.err("decoder_start_token_id", "is missing and so is pad_token_id")),
    };
    let optional = |key: Option<(&str, usize)>, max: usize| key.map(|(k, d)| f.size(k, Some(d), max)).transpose();
    Ok(Some(Seq2SeqConfig {
        encoder_layers: f.size(s.layers.0, Some(s.layers.1), MAX_LAYERS)?,
        encoder_heads,
        encoder_head_dim,
        encoder_ffn: f.size(s.ffn.0, Some(s.ffn.1), MAX_INTERMEDIATE)?,
        encoder_scale: if s.t5 { 1.0 } else { (encoder_head_dim as f64).powf(-0.5) },
        source_positions: optional(s.source_positions, MAX_POSITIONS)?,
        mel_bins: optional(s.mel_bins, MAX_HIDDEN)?,
        decoder_start_token_id,
    }))
}

/// Upper bound on a token type vocabulary and on classification labels.
pub const MAX_LABELS: usize = 1 << 20;

fn parse_encoder(f: &Fields, schema: &ConfigSchema, hidden: usize) -> Result<Option<EncoderConfig>> {
    let Some(enc) = schema.encoder else { return Ok(None) };
    // a BERT-like config may turn its model into a causal decoder or give it cross-attention,
    // which this encoder graph does not compute
    for key in ["is_decoder", "add_cross_attention"] {
        if f.raw(key).is_some_and(|v| !v.is_null()) && f.bool(key)? == Some(true) {
            return Err(f.err(key, "is true, but only the encoder (bidirectional, no cross-attention) is supported"));
        }
    }
    let type_vocab_size = match enc.type_vocab_size {
        Some(default) => f.size("type_vocab_size", Some(default), MAX_LABELS)?,
        None => 0,
    };
    let num_labels = match f.raw("id2label") {
        Some(Value::Object(map)) if !map.is_empty() => f.check_count("id2label", map.len() as u64, MAX_LABELS)?,
        _ => f.size("num_labels", Some(2), MAX_LABELS)?,
    };
    let pooler_size = match f.raw("pooler_output_size") {
        None | Some(Value::Null) => hidden,
        Some(_) => f.size("pooler_output_size", None, MAX_HIDDEN)?,
    };
    let pooler_act = f.string("pooler_act")?.unwrap_or("tanh").to_string();
    let image = match enc.image {
        None => None,
        Some(d) => {
            let size = pair(f, "image_size", d.image_size)?;
            let patch = pair(f, "patch_size", d.patch_size)?;
            if size[0] % patch[0] != 0 || size[1] % patch[1] != 0 {
                return Err(f.err("image_size", format!("{size:?} is not a multiple of patch_size {patch:?}")));
            }
            Some(ImageConfig { size, patch, channels: f.size("num_channels", Some(d.num_channels), 64)? })
        }
    };
    let heads = match enc.head_keys {
        false => HeadsConfig { activation: None, dense_bias: true, mean_pooling: false, decoder_bias: true },
        true => HeadsConfig {
            activation: Some(f.string("classifier_activation")?.unwrap_or("gelu").to_string()),
            dense_bias: f.bool("classifier_bias")?.unwrap_or(false),
            mean_pooling: match f.string("classifier_pooling")?.unwrap_or("cls") {
                "cls" => false,
                "mean" => true,
                other => return Err(f.err("classifier_pooling", format!("`{other}` is not one of: cls, mean"))),
            },
            decoder_bias: f.bool("decoder_bias")?.unwrap_or(true),
        },
    };
    Ok(Some(EncoderConfig { type_vocab_size, num_labels, pooler_size, pooler_act, image, heads }))
}

/// An image size key: an integer (square) or `[height, width]`.
fn pair(f: &Fields, key: &str, default: usize) -> Result<[usize; 2]> {
    match f.raw(key) {
        Some(Value::Array(list)) if list.len() == 2 => {
            let side = |v: &Value| {
                v.as_u64().filter(|&n| n > 0 && n <= MAX_IMAGE_SIDE as u64).map(|n| n as usize).ok_or_else(|| {
                    f.err(key, format!("must hold two positive integers up to {MAX_IMAGE_SIDE}, got {}", describe(v)))
                })
            };
            Ok([side(&list[0])?, side(&list[1])?])
        }
        _ => {
            let n = f.size(key, Some(default), MAX_IMAGE_SIDE)?;
            Ok([n, n])
        }
    }
}

/// Upper bound on an image side in pixels.
pub const MAX_IMAGE_SIDE: usize = 1 << 14;

/// A class of another family than the config's `model_type` (a GPT-2 class over a Llama
/// config) would read keys its config class does not have.
fn check_class_matches(f: &Fields, family: Option<&Architecture>, class: &str, model_type: Option<&str>) -> Result<()> {
    let (Some(family), Ok(owner)) = (family, arch::lookup(class)) else { return Ok(()) };
    if std::ptr::eq(family, owner) {
        return Ok(());
    }
    Err(f.err(
        "architectures",
        format!(
            "`{class}` is a {} model but model_type is `{}`; they must name the same family",
            owner.model_types[0],
            model_type.unwrap_or(family.model_types[0])
        ),
    ))
}

fn architecture(f: &Fields) -> Result<String> {
    let first = match f.raw("architectures") {
        Some(Value::Array(list)) => list.first(),
        None => return Err(f.err("architectures", "is missing (a list such as [\"LlamaForCausalLM\"])")),
        Some(v) => return Err(f.err("architectures", format!("must be a list of class names, got {}", describe(v)))),
    };
    match first {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(v) => Err(f.err("architectures", format!("first entry must be a class name, got {}", describe(v)))),
        None => Err(f.err("architectures", "is an empty list")),
    }
}

/// The activation, from the first of the schema's keys present, as the config class rewrites
/// it.
fn activation(f: &Fields, schema: &ConfigSchema) -> Result<String> {
    if schema.seq2seq.is_some_and(|s| s.t5) {
        return Ok(feed_forward_proj(f)?.0);
    }
    let mut name = schema.defaults.activation;
    for key in schema.keys.activation {
        if let Some(value) = f.string(key)? {
            name = value;
            break;
        }
    }
    let rewritten = schema.keys.activation_rewrites.iter().find(|(from, _)| *from == name);
    Ok(rewritten.map_or(name, |(_, to)| to).to_string())
}

/// T5's `feed_forward_proj`: `act` or `gated-act` (`gated-gelu` is `gelu_new`), as
/// `T5Config` splits it: the activation and whether the MLP is gated.
fn feed_forward_proj(f: &Fields) -> Result<(String, bool)> {
    let key = "feed_forward_proj";
    let value = f.string(key)?.unwrap_or("relu");
    let parts: Vec<&str> = value.split('-').collect();
    match parts[..] {
        ["gated", "gelu"] => Ok(("gelu_new".into(), true)),
        ["gated", act] => Ok((act.into(), true)),
        [act] => Ok((act.into(), false)),
        _ => Err(f.err(key, format!("`{value}` is not `ACT` or `gated-ACT` (e.g. relu, gated-gelu)"))),
    }
}

/// `tie_word_embeddings` of the top-level config (the model class that owns the head reads
/// it there, also in a multimodal checkpoint), else the class default.
fn tie_word_embeddings(top: &Fields, d: &Defaults) -> Result<bool> {
    Ok(top.bool("tie_word_embeddings")?.unwrap_or(d.tie_word_embeddings))
}

// ---------------------------------------------------------------------------------------------
// Sizes

struct Dims {
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: usize,
    head_dim: usize,
    max_position_embeddings: usize,
}

impl Dims {
    fn parse(f: &Fields, schema: &ConfigSchema) -> Result<Dims> {
        let (k, d) = (&schema.keys, &schema.defaults);
        let hidden_size = f.size(k.hidden_size, d.hidden_size, MAX_HIDDEN)?;
        let num_attention_heads = f.size(k.num_attention_heads, d.num_attention_heads, MAX_HEADS)?;
        let intermediate_size = match (f.raw(k.intermediate_size), d.intermediate_times_hidden) {
            (None | Some(Value::Null), Some(times)) => times * hidden_size,
            _ => f.size(k.intermediate_size, d.intermediate_size, MAX_INTERMEDIATE)?,
        };
        let dims = Dims {
            vocab_size: f.size("vocab_size", d.vocab_size, MAX_VOCAB)?,
            hidden_size,
            intermediate_size,
            num_hidden_layers: match (f.raw(k.num_hidden_layers), k.layers_fallback) {
                (None | Some(Value::Null), Some(other)) => f.size(other, d.num_hidden_layers, MAX_LAYERS)?,
                _ => f.size(k.num_hidden_layers, d.num_hidden_layers, MAX_LAYERS)?,
            },
            num_attention_heads,
            num_key_value_heads: kv_heads(f, d, num_attention_heads)?,
            head_dim: head_dim(f, k.head_dim, d, hidden_size, num_attention_heads, schema.rope != RopeRule::None)?,
            max_position_embeddings: f.size(k.max_position_embeddings, d.max_position_embeddings, MAX_POSITIONS)?,
        };
        Ok(dims)
    }
}

/// `num_key_value_heads`: null means "as many as attention heads" in every class.
fn kv_heads(f: &Fields, d: &Defaults, heads: usize) -> Result<usize> {
    let kv = match f.raw("num_key_value_heads") {
        Some(Value::Null) => heads,
        None => d.num_key_value_heads.unwrap_or(heads),
        Some(_) => f.size("num_key_value_heads", None, MAX_HEADS)?,
    };
    if !heads.is_multiple_of(kv) {
        return Err(f.err(
            "num_key_value_heads",
            format!("num_attention_heads ({heads}) is not a multiple of num_key_value_heads ({kv})"),
        ));
    }
    Ok(kv)
}

/// `head_dim`: the key if set, else `hidden_size // num_attention_heads`; rope needs it even
/// (transformers' `validate_rope` lets tiny odd test dims <= 4 through, and so do we).
fn head_dim(f: &Fields, key: &str, d: &Defaults, hidden: usize, heads: usize, rotary: bool) -> Result<usize> {
    let derived = || (hidden / heads, format!("hidden_size / num_attention_heads = {hidden} / {heads}"));
    let (dim, origin) = match f.raw(key) {
        Some(Value::Null) => derived(),
        None => match d.head_dim {
            Some(v) => (v, format!("the default of {v}")),
            None => derived(),
        },
        Some(_) => (f.size(key, None, MAX_HEAD_DIM)?, "config value".to_string()),
    };
    if dim == 0 || dim > MAX_HEAD_DIM {
        return Err(f.err(key, format!("{dim} (from {origin}) is outside 1..={MAX_HEAD_DIM}")));
    }
    if rotary && dim > 4 && dim % 2 == 1 {
        return Err(f.err(key, format!("{dim} is odd; rotary embeddings need an even head dim")));
    }
    Ok(dim)
}

fn parse_eps(f: &Fields, schema: &ConfigSchema) -> Result<f64> {
    let key = schema.keys.norm_eps;
    let eps = f.number(key)?.unwrap_or(schema.defaults.norm_eps);
    if eps < 0.0 {
        return Err(f.err(key, format!("must not be negative, got {eps}")));
    }
    Ok(eps)
}

/// The attention score factor of each layer.
fn attention_scales(f: &Fields, schema: &ConfigSchema, dims: &Dims) -> Result<Vec<f64>> {
    let n = dims.num_hidden_layers;
    let inv_sqrt = |x: f64| x.powf(-0.5);
    Ok(match schema.scale {
        ScaleRule::HeadDim => vec![inv_sqrt(dims.head_dim as f64); n],
        ScaleRule::QueryPreAttnScalar => {
            let key = "query_pre_attn_scalar";
            let s = match f.raw(key) {
                None => schema.defaults.query_pre_attn_scalar.unwrap_or(dims.head_dim as f64),
                Some(_) => f.required_positive(key, "any")?,
            };
            vec![inv_sqrt(s); n]
        }
        ScaleRule::AttentionMultiplier => vec![f.number("attention_multiplier")?.unwrap_or(1.0); n],
        ScaleRule::One => vec![1.0; n],
        ScaleRule::Gpt2 => {
            let base = if f.bool("scale_attn_weights")?.unwrap_or(true) { inv_sqrt(dims.head_dim as f64) } else { 1.0 };
            let by_layer = f.bool("scale_attn_by_inverse_layer_idx")?.unwrap_or(false);
            (0..n).map(|i| if by_layer { base / (i + 1) as f64 } else { base }).collect()
        }
    })
}

/// The factor of the token embeddings.
fn embedding_scale(f: &Fields, schema: &ConfigSchema, dims: &Dims) -> Result<Option<f64>> {
    Ok(match schema.embedding_scale {
        EmbeddingScale::None => None,
        EmbeddingScale::SqrtHidden => Some((dims.hidden_size as f64).sqrt()),
        EmbeddingScale::Multiplier => f.number("embedding_multiplier")?.or(Some(1.0)),
    })
}

/// Granite's `residual_multiplier` and `logits_scaling` (1.0 by default).
fn granite_multipliers(f: &Fields, schema: &ConfigSchema) -> Result<(Option<f64>, Option<f64>)> {
    if !schema.granite_multipliers {
        return Ok((None, None));
    }
    let residual = f.number("residual_multiplier")?.unwrap_or(1.0);
    let logits = match f.raw("logits_scaling") {
        None | Some(Value::Null) => 1.0,
        Some(_) => f.required_positive("logits_scaling", "any")?,
    };
    Ok((Some(residual), Some(logits)))
}

/// Gemma 2/3's soft-capping of attention scores and final logits (null: none).
fn softcaps(f: &Fields, schema: &ConfigSchema) -> Result<(Option<f64>, Option<f64>)> {
    let cap = |key: &str, honoured: bool, default: Option<f64>| -> Result<Option<f64>> {
        match f.raw(key) {
            _ if !honoured => Ok(None),
            None => Ok(default),
            Some(Value::Null) => Ok(None),
            Some(_) => f.required_positive(key, "any").map(Some),
        }
    };
    let (s, d) = (schema.softcapping, &schema.defaults);
    Ok((
        cap("attn_logit_softcapping", s.attention, d.attn_softcap)?,
        cap("final_logit_softcapping", s.logits, d.final_softcap)?,
    ))
}

// ---------------------------------------------------------------------------------------------
// Rope (modeling_rope_utils.py: convert_rope_params_to_dict, standardize_rope_params,
// _validate_*_rope_parameters, _compute_*_parameters)

const SUPPORTED_ROPE_TYPES: &str = "default, linear, dynamic, llama3, yarn, longrope";
const DEFAULT_THETA: f64 = 10_000.0;
const LAYER_TYPE_KEYS: [&str; 2] = ["full_attention", "sliding_attention"];

/// The rope of full-attention layers, and the sliding layers' own where the family has one.
fn parse_ropes(f: &Fields, schema: &ConfigSchema, dims: &Dims) -> Result<(RopeConfig, Option<RopeConfig>)> {
    let empty = Map::new();
    let (key, dict) = rope_dict(f)?.unwrap_or(("rope_parameters", &empty));
    let theta = schema.defaults.rope_theta;
    let RopeRule::PerLayerType { global_theta, local_theta } = schema.rope else {
        let prefix = format!("{key}.");
        let d = Fields::new(dict, f.path, &prefix);
        reject_nested_rope(&d)?;
        return Ok((parse_rope(f, &d, schema, dims, theta)?, None));
    };
    // `rope_parameters` keyed by layer type, or the flat legacy form: the global rope (its
    // theta under `global_theta` where the family names it so), plus `local_theta` for the
    // sliding layers.
    let legacy_theta = |key: &str, default: f64| match f.raw(key) {
        None | Some(Value::Null) => Ok(default),
        Some(_) => f.required_positive(key, "any"),
    };
    let theta = match global_theta {
        Some(key) => legacy_theta(key, theta)?,
        None => theta,
    };
    let nested = LAYER_TYPE_KEYS.iter().any(|k| dict.contains_key(*k));
    let prefixes = [format!("{key}."), format!("{key}.full_attention."), format!("{key}.sliding_attention.")];
    let none = Fields::new(&empty, f.path, "");
    let full = match nested {
        true => layer_type_rope(f, dict, "full_attention", &prefixes[1])?,
        false => Some(Fields::new(dict, f.path, &prefixes[0])),
    };
    let full = parse_rope(f, full.as_ref().unwrap_or(&none), schema, dims, theta)?;
    let local_theta = legacy_theta(local_theta, DEFAULT_THETA)?;
    let sliding = match if nested { layer_type_rope(f, dict, "sliding_attention", &prefixes[2])? } else { None } {
        Some(d) => parse_rope(&none, &d, schema, dims, local_theta)?,
        None => RopeConfig { theta: local_theta, dim: full.dim, scaling: RopeScaling::Default },
    };
    Ok((full, Some(sliding)))
}

/// The rope dict of one layer type inside `dict` (`prefix` names it in errors).
fn layer_type_rope<'b>(
    f: &Fields<'b>,
    dict: &'b Map<String, Value>,
    layer_type: &str,
    prefix: &'b str,
) -> Result<Option<Fields<'b>>> {
    match dict.get(layer_type) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(Fields::new(m, f.path, prefix))),
        Some(v) => Err(f.err(prefix.trim_end_matches('.'), format!("must be an object, got {}", describe(v)))),
    }
}

/// One rope from its dict `d` (keys prefixed as in the file), with `f` the config top level
/// for the keys transformers also reads there; `default_theta` when neither sets `rope_theta`.
fn parse_rope(f: &Fields, d: &Fields, schema: &ConfigSchema, dims: &Dims, default_theta: f64) -> Result<RopeConfig> {
    let dim = rotary_dim(f, d, schema, dims.head_dim)?;
    let theta = rope_theta(f, d, default_theta)?;
    let rope_type = rope_type(d)?;
    let rope_type = match schema.rope_type_rewrites.iter().find(|(from, _)| *from == rope_type) {
        Some((_, to)) => to.to_string(),
        None => rope_type,
    };
    let type_key = if d.raw("rope_type").is_some() { "rope_type" } else { "type" };
    if let Some(allowed) = schema.rope_types.filter(|a| !a.contains(&rope_type.as_str())) {
        return Err(d.err(
            type_key,
            format!("rope type `{rope_type}` is not accepted by this architecture (accepted: {})", allowed.join(", ")),
        ));
    }
    let max_pos = dims.max_position_embeddings;
    let scaling = match rope_type.as_str() {
        "default" => RopeScaling::Default,
        "linear" => RopeScaling::Linear { factor: d.required_positive("factor", &rope_type)? },
        "dynamic" => dynamic_scaling(d, dims)?,
        "llama3" => llama3_scaling(f, d, max_pos)?,
        "yarn" => yarn_scaling(f, d, theta, max_pos)?,
        "longrope" => longrope_scaling(f, d, dim, max_pos)?,
        other => {
            return Err(
                d.err(type_key, format!("rope type `{other}` is not supported (supported: {SUPPORTED_ROPE_TYPES})"))
            )
        }
    };
    Ok(RopeConfig { theta, dim, scaling })
}

/// `self.rope_parameters = rope_scaling or self.rope_parameters`: a non-empty `rope_scaling`
/// (old files) wins over `rope_parameters`.
fn rope_dict<'a>(f: &Fields<'a>) -> Result<Option<(&'static str, &'a Map<String, Value>)>> {
    for key in ["rope_scaling", "rope_parameters"] {
        match f.raw(key) {
            None | Some(Value::Null) => continue,
            Some(Value::Object(m)) if m.is_empty() => continue,
            Some(Value::Object(m)) => return Ok(Some((key, m))),
            Some(v) => return Err(f.err(key, format!("must be an object, got {}", describe(v)))),
        }
    }
    Ok(None)
}

fn reject_nested_rope(d: &Fields) -> Result<()> {
    for layer_type in ["full_attention", "sliding_attention"] {
        if d.raw(layer_type).is_some() {
            return Err(d.err(layer_type, "per-layer-type rope parameters are not supported"));
        }
    }
    Ok(())
}

/// The rope dict's `rope_theta`, else the top-level `rope_theta`, else `default_theta`.
fn rope_theta(f: &Fields, d: &Fields, default_theta: f64) -> Result<f64> {
    let (src, key) = if d.raw("rope_theta").is_some() { (d, "rope_theta") } else { (f, "rope_theta") };
    let theta = match src.raw(key) {
        None => default_theta,
        Some(_) => src.required_positive(key, "any")?,
    };
    Ok(theta)
}

/// The rotated channels: `int(head_dim * partial_rotary_factor)` (the rope dict's factor, else
/// the top-level one) for a family whose modeling code honours it; others need 1.0.
fn rotary_dim(f: &Fields, d: &Fields, schema: &ConfigSchema, head_dim: usize) -> Result<usize> {
    let key = "partial_rotary_factor";
    let src = if d.raw(key).is_some() { d } else { f };
    let Some(p) = src.number(key)? else { return Ok(head_dim) };
    if p == 1.0 {
        return Ok(head_dim);
    }
    if !schema.partial_rotary {
        return Err(src.err(
            key,
            format!("{p} is not supported by this architecture (only 1.0, rotary embeddings over the whole head)"),
        ));
    }
    let dim = (head_dim as f64 * p) as usize;
    if !(p > 0.0 && p < 1.0) || dim < 2 || dim % 2 == 1 {
        return Err(src.err(
            key,
            format!(
                "{p} gives {dim} rotated channels of head_dim {head_dim}; need an even number >= 2 (0 < factor <= 1)"
            ),
        ));
    }
    Ok(dim)
}

/// `rope_type`, falling back to the old `type` key, then to `default`.
fn rope_type(d: &Fields) -> Result<String> {
    for key in ["rope_type", "type"] {
        match d.raw(key) {
            None => continue,
            Some(Value::String(s)) => return Ok(s.clone()),
            Some(v) => {
                return Err(d.err(key, format!("must be one of {SUPPORTED_ROPE_TYPES}, got {}", describe(v))));
            }
        }
    }
    Ok("default".to_string())
}

fn dynamic_scaling(d: &Fields, dims: &Dims) -> Result<RopeScaling> {
    if dims.head_dim == 2 {
        return Err(d.err("rope_type", "dynamic rope needs head_dim > 2 (it divides by head_dim - 2)"));
    }
    Ok(RopeScaling::Dynamic {
        factor: d.required_positive("factor", "dynamic")?,
        max_position_embeddings: dims.max_position_embeddings,
    })
}

fn llama3_scaling(f: &Fields, d: &Fields, max_pos: usize) -> Result<RopeScaling> {
    Ok(RopeScaling::Llama3 {
        factor: d.required_positive("factor", "llama3")?,
        low_freq_factor: d.required_positive("low_freq_factor", "llama3")?,
        high_freq_factor: d.required_positive("high_freq_factor", "llama3")?,
        original_max_position_embeddings: original_max_positions(f, d, max_pos)?,
    })
}

fn yarn_scaling(f: &Fields, d: &Fields, theta: f64, max_pos: usize) -> Result<RopeScaling> {
    if theta == 1.0 {
        return Err(d.err("rope_theta", "yarn needs rope_theta != 1 (it divides by log(rope_theta))"));
    }
    let original = original_max_positions(f, d, max_pos)?;
    // `factor` must be present; an explicit null means max_position_embeddings / original.
    let factor = match d.raw("factor") {
        Some(Value::Null) => max_pos as f64 / original as f64,
        _ => d.required_positive("factor", "yarn")?,
    };
    // `get("beta_fast") or 32`: null and 0 both take the default.
    let or_default =
        |key: &str, default: f64| -> Result<f64> { Ok(d.number(key)?.filter(|v| *v != 0.0).unwrap_or(default)) };
    Ok(RopeScaling::Yarn {
        factor,
        original_max_position_embeddings: original,
        beta_fast: or_default("beta_fast", 32.0)?,
        beta_slow: or_default("beta_slow", 1.0)?,
        mscale: d.number("mscale")?,
        mscale_all_dim: d.number("mscale_all_dim")?,
        attention_factor: d.number("attention_factor")?,
        truncate: yarn_truncate(d)?,
    })
}

/// `rope_parameters.get("truncate", True)`: absent means true, an explicit null false.
fn yarn_truncate(d: &Fields) -> Result<bool> {
    match d.raw("truncate") {
        None => Ok(true),
        Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(d.err("truncate", format!("must be true or false, got {}", describe(v)))),
    }
}

/// Longrope (Phi-3.5, Phi-4-mini): short factors up to `original_max_position_embeddings`,
/// long ones past it, each list `dim / 2` long; the attention factor defaults to
/// `sqrt(1 + ln(factor) / ln(original))` with `factor = max_position_embeddings / original`.
fn longrope_scaling(f: &Fields, d: &Fields, dim: usize, max_pos: usize) -> Result<RopeScaling> {
    let original = match original_max_positions_opt(f, d)? {
        Some(v) => v,
        None => return Err(d.err("original_max_position_embeddings", "is missing (required by rope_type `longrope`)")),
    };
    let factors = |key: &str| -> Result<Vec<f64>> {
        let list = match d.raw(key) {
            Some(Value::Array(list)) => list,
            None | Some(Value::Null) => return Err(d.err(key, "is missing (required by rope_type `longrope`)")),
            Some(v) => return Err(d.err(key, format!("must be a list of numbers, got {}", describe(v)))),
        };
        if list.len() != dim / 2 {
            return Err(d.err(key, format!("has {} entries; the {dim} rotated channels need {}", list.len(), dim / 2)));
        }
        list.iter()
            .enumerate()
            .map(|(i, v)| match v.as_f64() {
                Some(x) if x.is_finite() && x > 0.0 => Ok(x),
                _ => Err(d.err(key, format!("entry {i} must be a positive number, got {}", describe(v)))),
            })
            .collect()
    };
    let factor = match d.number("factor")? {
        Some(x) => x,
        None => max_pos as f64 / original as f64,
    };
    let attention_factor = match d.number("attention_factor")? {
        Some(a) => a,
        None if factor <= 1.0 => 1.0,
        None => (1.0 + factor.ln() / (original as f64).ln()).sqrt(),
    };
    Ok(RopeScaling::LongRope {
        short_factor: factors("short_factor")?,
        long_factor: factors("long_factor")?,
        original_max_position_embeddings: original,
        attention_factor,
    })
}

/// For llama3 and yarn: a top-level `original_max_position_embeddings` wins (the Phi3 case in
/// `standardize_rope_params`), then the rope dict's, then `max_position_embeddings`.
fn original_max_positions(f: &Fields, d: &Fields, max_pos: usize) -> Result<usize> {
    Ok(original_max_positions_opt(f, d)?.unwrap_or(max_pos))
}

fn original_max_positions_opt(f: &Fields, d: &Fields) -> Result<Option<usize>> {
    let key = "original_max_position_embeddings";
    for src in [f, d] {
        if let Some(v) = src.count_lenient(key, MAX_POSITIONS)? {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

// ---------------------------------------------------------------------------------------------
// Layer types and sliding window

/// transformers' `ALLOWED_ATTN_LAYER_TYPES`: anything else in `layer_types` is invalid there.
const ALLOWED_LAYER_TYPES: &[&str] = &[
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "window_attention",
    "indexed_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",
    "minimax_m3_sparse",
    "conv",
    "moe",
    "hybrid",
    "hybrid_sliding",
    "reference_sliding_attention",
    "linear_attention",
];

/// transformers' `_LEGACY_LAYER_TYPE_REMAP`.
const LEGACY_LAYER_TYPES: &[(&str, &str)] = &[
    ("mamba", "linear_attention"),
    ("attention", "full_attention"),
    ("deepseek_sparse_attention", "indexed_attention"),
    ("qwen_sparse_attention", "indexed_attention"),
];

/// Qwen2/Qwen3 default `sliding_window` and `max_window_layers`; Mistral's default window.
const DEFAULT_SLIDING_WINDOW: usize = 4096;
const DEFAULT_MAX_WINDOW_LAYERS: i64 = 28;

fn parse_layers(f: &Fields, schema: &ConfigSchema, n: usize) -> Result<(Vec<LayerType>, Option<usize>)> {
    // transformers validates an explicit list even for classes that then ignore it.
    let explicit = explicit_layer_types(f, n)?;
    let (types, window) = match schema.layers {
        // LlamaModel, GemmaModel, GPT2Model, …: no sliding attention at all.
        LayerRule::Full => (vec![LayerType::FullAttention; n], None),
        LayerRule::Mistral { default_window } => mistral_layers(f, explicit, n, default_window)?,
        LayerRule::Qwen => qwen_layers(f, explicit, n)?,
        LayerRule::Pattern { period, pattern_keys, default_window } => {
            let window = sliding_window(f, Some(default_window))?;
            let types = match explicit {
                Some(names) => supported_layer_types(f, &names)?,
                None => {
                    let period = pattern_period(f, pattern_keys, period)?;
                    (0..n)
                        .map(|i| match (i + 1) % period {
                            0 => LayerType::FullAttention,
                            _ => LayerType::SlidingAttention,
                        })
                        .collect()
                }
            };
            (types, window)
        }
        LayerRule::UseSlidingWindow => {
            let use_sliding = f.bool("use_sliding_window")?.unwrap_or(false);
            let window = sliding_window(f, None)?.filter(|_| use_sliding);
            let types = match explicit {
                Some(names) => supported_layer_types(f, &names)?,
                None => vec![LayerType::FullAttention; n],
            };
            (types, window)
        }
        LayerRule::Explicit => {
            let types = match explicit {
                Some(names) => supported_layer_types(f, &names)?,
                None => vec![LayerType::FullAttention; n],
            };
            (types, sliding_window(f, None)?)
        }
        LayerRule::UniformWhenUsed { default_window } => {
            let use_sliding = f.bool("use_sliding_window")?.unwrap_or(false);
            match sliding_window(f, Some(default_window))?.filter(|_| use_sliding) {
                Some(w) => (vec![LayerType::SlidingAttention; n], Some(w)),
                None => (vec![LayerType::FullAttention; n], None),
            }
        }
        LayerRule::LocalGlobal { default_every, default_local } => {
            let types = match explicit {
                Some(names) => supported_layer_types(f, &names)?,
                None => {
                    let every = f.size("global_attn_every_n_layers", Some(default_every), MAX_LAYERS)?;
                    (0..n)
                        .map(|i| match i % every {
                            0 => LayerType::FullAttention,
                            _ => LayerType::SlidingAttention,
                        })
                        .collect()
                }
            };
            // `sliding_window` is a property of the class: half of `local_attention`; a
            // `sliding_window` key sets `local_attention` to twice its value
            let half = match f.raw("sliding_window") {
                Some(v) if !v.is_null() => f.size("sliding_window", None, MAX_SLIDING_WINDOW)?,
                _ => f.size("local_attention", Some(default_local), 2 * MAX_SLIDING_WINDOW)? / 2,
            };
            (types, Some(half))
        }
        LayerRule::EvenBelowMaxWindow => {
            // the config class stores 0 when `use_sliding_window` is false
            let use_sliding = f.bool("use_sliding_window")?.unwrap_or(false);
            let window = match use_sliding {
                true => sliding_window(f, Some(DEFAULT_SLIDING_WINDOW))?,
                false => None,
            };
            let types = match explicit {
                Some(names) => supported_layer_types(f, &names)?,
                None => {
                    let below = f.int("max_window_layers")?.unwrap_or(DEFAULT_MAX_WINDOW_LAYERS);
                    (0..n)
                        .map(|i| match i % 2 == 0 && (i as i64) < below && use_sliding {
                            true => LayerType::SlidingAttention,
                            false => LayerType::FullAttention,
                        })
                        .collect()
                }
            };
            (types, window)
        }
    };
    let sliding = types.contains(&LayerType::SlidingAttention);
    if sliding && window.is_none() {
        let why = match schema.layers {
            LayerRule::Qwen | LayerRule::UseSlidingWindow | LayerRule::EvenBelowMaxWindow => {
                "layer_types has sliding_attention layers but use_sliding_window is false or sliding_window is null"
            }
            _ => "layer_types has sliding_attention layers but sliding_window is not set",
        };
        return Err(f.err("sliding_window", why));
    }
    Ok((types, window.filter(|_| sliding)))
}

/// MistralModel (and Phi-3) apply `config.sliding_window` to every layer. But AutoConfig reads
/// a `mistral` config that has a `layer_types` key as `ministral`, whose layers slide only where
/// `layer_types` says so (transformers 5.23 `configuration_auto.py`).
fn mistral_layers(
    f: &Fields,
    explicit: Option<Vec<String>>,
    n: usize,
    default_window: Option<usize>,
) -> Result<(Vec<LayerType>, Option<usize>)> {
    let window = sliding_window(f, default_window)?;
    let model_type = f.string("model_type")?;
    let ministral = model_type == Some("ministral") || (model_type != Some("phi3") && f.raw("layer_types").is_some());
    if ministral && matches!(f.raw("head_dim"), None | Some(Value::Null)) {
        // MinistralAttention computes `head_dim ** -0.5` without a fallback
        return Err(f.err("head_dim", "is required when a Mistral config has `layer_types` (read as Ministral)"));
    }
    let kind = if window.is_some() { LayerType::SlidingAttention } else { LayerType::FullAttention };
    let types = match explicit {
        Some(names) if ministral => supported_layer_types(f, &names)?,
        _ => vec![kind; n],
    };
    Ok((types, window))
}

/// The sliding-window pattern of Gemma 3 (`sliding_window_pattern`, a legacy key still on the
/// Hub): every `period`-th layer is full.
fn pattern_period(f: &Fields, keys: &[&str], default: usize) -> Result<usize> {
    for key in keys {
        if let Some(p) = f.count_lenient(key, MAX_LAYERS)? {
            return Ok(p);
        }
    }
    Ok(default)
}

/// Per layer: whether it has a rotary embedding.
fn rotary_layers(f: &Fields, schema: &ConfigSchema, n: usize) -> Result<Vec<bool>> {
    match schema.rope {
        RopeRule::None => Ok(vec![false; n]),
        RopeRule::Uniform | RopeRule::PerLayerType { .. } => Ok(vec![true; n]),
        RopeRule::NoRopeLayers => {
            let key = "no_rope_layers";
            match f.raw(key) {
                None | Some(Value::Null) => {
                    let interval = f.count_lenient("no_rope_layer_interval", MAX_LAYERS)?.unwrap_or(4);
                    Ok((0..n).map(|i| (i + 1) % interval != 0).collect())
                }
                Some(Value::Array(list)) if list.len() == n => list
                    .iter()
                    .enumerate()
                    .map(|(i, v)| match v.as_i64() {
                        Some(0) => Ok(false),
                        Some(1) => Ok(true),
                        _ => Err(f.err(key, format!("entry {i} must be 0 (no rope) or 1, got {}", describe(v)))),
                    })
                    .collect(),
                Some(Value::Array(list)) => {
                    Err(f.err(key, format!("has {} entries but there are {n} layers", list.len())))
                }
                Some(v) => Err(f.err(key, format!("must be a list, got {}", describe(v)))),
            }
        }
    }
}

/// Qwen2/Qwen3: `sliding_window` only counts with `use_sliding_window`; without an explicit
/// `layer_types`, layers from `max_window_layers` on slide.
fn qwen_layers(f: &Fields, explicit: Option<Vec<String>>, n: usize) -> Result<(Vec<LayerType>, Option<usize>)> {
    let use_sliding = f.bool("use_sliding_window")?.unwrap_or(false);
    let window = sliding_window(f, Some(DEFAULT_SLIDING_WINDOW))?.filter(|_| use_sliding);
    let types = match explicit {
        Some(names) => supported_layer_types(f, &names)?,
        None => {
            let first_sliding = f.int("max_window_layers")?.unwrap_or(DEFAULT_MAX_WINDOW_LAYERS);
            (0..n)
                .map(|i| match window {
                    Some(_) if i as i64 >= first_sliding => LayerType::SlidingAttention,
                    _ => LayerType::FullAttention,
                })
                .collect()
        }
    };
    Ok((types, window))
}

/// `sliding_window`: absent takes the class default, null means none.
fn sliding_window(f: &Fields, default: Option<usize>) -> Result<Option<usize>> {
    match f.raw("sliding_window") {
        None => Ok(default),
        Some(Value::Null) => Ok(None),
        Some(_) => Ok(Some(f.size("sliding_window", None, MAX_SLIDING_WINDOW)?)),
    }
}

/// An explicit `layer_types`, checked as `PreTrainedConfig.validate_layer_type` does.
fn explicit_layer_types(f: &Fields, n: usize) -> Result<Option<Vec<String>>> {
    let list = match f.raw("layer_types") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(list)) => list,
        Some(v) => return Err(f.err("layer_types", format!("must be a list, got {}", describe(v)))),
    };
    let mut names = Vec::with_capacity(list.len().min(MAX_LAYERS));
    for (i, v) in list.iter().enumerate() {
        let Value::String(s) = v else {
            return Err(f.err("layer_types", format!("entry {i} must be a string, got {}", describe(v))));
        };
        let s = LEGACY_LAYER_TYPES.iter().find(|(old, _)| old == s).map_or(s.as_str(), |(_, new)| new);
        if !ALLOWED_LAYER_TYPES.contains(&s) {
            return Err(
                f.err("layer_types", format!("entry {i} is `{s}`; allowed: {}", ALLOWED_LAYER_TYPES.join(", ")))
            );
        }
        names.push(s.to_string());
    }
    if names.len() != n {
        return Err(f.err("layer_types", format!("has {} entries but num_hidden_layers is {n}", names.len())));
    }
    Ok(Some(names))
}

/// The layer kinds we can build.
fn supported_layer_types(f: &Fields, names: &[String]) -> Result<Vec<LayerType>> {
    names
        .iter()
        .enumerate()
        .map(|(i, s)| match s.as_str() {
            "full_attention" => Ok(LayerType::FullAttention),
            "sliding_attention" => Ok(LayerType::SlidingAttention),
            other => Err(f.err(
                "layer_types",
                format!(
                    "entry {i} is `{other}`, which is not supported (supported: full_attention, sliding_attention)"
                ),
            )),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Flags, dtype, token ids

/// The q/k/v, output and MLP biases as the family's class reads them.
fn parse_biases(f: &Fields, schema: &ConfigSchema) -> Result<(bool, bool, bool, bool)> {
    let resolve = |b: Bias| -> Result<bool> {
        Ok(match b {
            Bias::Key(key) => f.bool(key)?.unwrap_or(false),
            Bias::KeyDefault(key, default) => f.bool(key)?.unwrap_or(default),
            Bias::Always => true,
            Bias::Never => false,
        })
    };
    let b = &schema.biases;
    Ok((resolve(b.qkv)?, resolve(b.o)?, resolve(b.mlp)?, resolve(b.norm)?))
}

/// The MoE keys as the family's config class reads them. Qwen's `num_experts` of 0 (or every
/// layer listed in `mlp_only_layers`) leaves a dense model.
fn parse_moe(f: &Fields, schema: &ConfigSchema, dims: &Dims) -> Result<Option<MoeConfig>> {
    let Some(m) = schema.moe else { return Ok(None) };
    let key = m.experts_keys.iter().copied().find(|k| f.raw(k).is_some_and(|v| !v.is_null()));
    let num_experts = match key {
        Some(k) if f.int(k)? == Some(0) && m.sparse_step => 0,
        Some(k) => f.size(k, None, MAX_EXPERTS)?,
        None => m.default_experts,
    };
    let n = dims.num_hidden_layers;
    let sparse_layers: Vec<bool> = match m.sparse_step {
        false => vec![true; n],
        true => {
            let step = f.size("decoder_sparse_step", Some(1), MAX_LAYERS)?;
            let dense = mlp_only_layers(f)?;
            (0..n).map(|i| num_experts > 0 && !dense.contains(&(i as i64)) && (i + 1) % step == 0).collect()
        }
    };
    if !sparse_layers.contains(&true) {
        return Ok(None);
    }
    let experts_key = key.unwrap_or(m.experts_keys[0]);
    let top_k = f.size("num_experts_per_tok", Some(m.default_top_k), MAX_EXPERTS)?;
    if top_k > num_experts {
        return Err(
            f.err("num_experts_per_tok", format!("{top_k} is more than the {num_experts} experts ({experts_key})"))
        );
    }
    let intermediate_size = match m.intermediate {
        Some((key, default)) => f.size(key, Some(default), MAX_INTERMEDIATE)?,
        None => dims.intermediate_size,
    };
    let normalize = match m.normalize {
        NormTopK::Key(default) => f.bool("norm_topk_prob")?.unwrap_or(default),
        NormTopK::Always => true,
    };
    let shared_expert_intermediate_size = match m.shared_expert {
        Some(default) => Some(f.size("shared_expert_intermediate_size", Some(default), MAX_INTERMEDIATE)?),
        None => None,
    };
    Ok(Some(MoeConfig {
        num_experts,
        top_k,
        intermediate_size,
        normalize,
        sparse_layers,
        shared_expert_intermediate_size,
    }))
}

/// `mlp_only_layers`: null or absent is none; entries are layer indices.
fn mlp_only_layers(f: &Fields) -> Result<Vec<i64>> {
    match f.raw("mlp_only_layers") {
        None | Some(Value::Null) => Ok(vec![]),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_i64().ok_or_else(|| {
                    f.err("mlp_only_layers", format!("entry {i} must be an integer, got {}", describe(v)))
                })
            })
            .collect(),
        Some(v) => Err(f.err("mlp_only_layers", format!("must be a list, got {}", describe(v)))),
    }
}

/// `dtype` wins over the older `torch_dtype` unless it is null.
fn parse_dtype(f: &Fields) -> Result<Option<DType>> {
    for key in ["dtype", "torch_dtype"] {
        if let Some(name) = f.string(key)? {
            return match name {
                "float32" | "float" => Ok(Some(DType::F32)),
                "float16" | "half" => Ok(Some(DType::F16)),
                "bfloat16" => Ok(Some(DType::BF16)),
                other => Err(f.err(key, format!("`{other}` is not supported (supported: float32, float16, bfloat16)"))),
            };
        }
    }
    Ok(None)
}

/// What `generation_config.json` says about decoding: the special tokens (which override
/// `config.json`'s) and the sampling defaults. Every field is `None` (or empty) when the file or
/// the key is absent, so callers choose their own fallback.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerationConfig {
    pub bos_token_id: Option<i64>,
    pub eos_token_ids: Vec<i64>,
    pub pad_token_id: Option<i64>,
    pub do_sample: Option<bool>,
    pub temperature: Option<f64>,
    pub top_k: Option<usize>,
    pub top_p: Option<f64>,
    pub repetition_penalty: Option<f64>,
}

impl GenerationConfig {
    /// Reads `<dir>/generation_config.json`; the default when the folder has none.
    pub fn from_dir(dir: &Path) -> Result<GenerationConfig> {
        let path = dir.join("generation_config.json");
        if !path.is_file() {
            return Ok(GenerationConfig::default());
        }
        let text = read_small_text(&path, MAX_CONFIG_BYTES)?;
        let value: Value = serde_json::from_str(&text).map_err(|e| ModelError::json(&path, &e))?;
        let Value::Object(obj) = &value else {
            return Err(ModelError::config(
                &path,
                "<root>",
                format!("must be a JSON object, got {}", describe(&value)),
            ));
        };
        let f = Fields::new(obj, &path, "");
        let eos = match f.raw("eos_token_id") {
            Some(Value::Array(list)) => eos_list(&f, list)?,
            _ => f.int("eos_token_id")?.into_iter().collect(),
        };
        Ok(GenerationConfig {
            bos_token_id: f.int("bos_token_id")?,
            eos_token_ids: eos,
            pad_token_id: f.int("pad_token_id")?,
            do_sample: f.bool("do_sample")?,
            temperature: f.number("temperature")?,
            top_k: f.int("top_k")?.map(|k| k.max(0) as usize),
            top_p: f.number("top_p")?,
            repetition_penalty: f.number("repetition_penalty")?,
        })
    }
}

type TokenIds = (Option<i64>, Vec<i64>, Option<i64>);

/// `bos_token_id`, `eos_token_id` (an integer or a list) and `pad_token_id`; absent keys take
/// the class defaults, null means none.
fn parse_token_ids(f: &Fields, d: &Defaults) -> Result<TokenIds> {
    let one = |key: &str, default: Option<i64>| -> Result<Option<i64>> {
        match f.raw(key) {
            None => Ok(default),
            Some(_) => f.int(key),
        }
    };
    let eos = match f.raw("eos_token_id") {
        None => d.eos_token_id.into_iter().collect(),
        Some(Value::Array(list)) => eos_list(f, list)?,
        Some(_) => f.int("eos_token_id")?.into_iter().collect(),
    };
    Ok((one("bos_token_id", d.bos_token_id)?, eos, one("pad_token_id", d.pad_token_id)?))
}

fn eos_list(f: &Fields, list: &[Value]) -> Result<Vec<i64>> {
    list.iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_i64()
                .ok_or_else(|| f.err("eos_token_id", format!("entry {i} must be an integer, got {}", describe(v))))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Typed access to a JSON object, naming the key in every error

/// A JSON object plus what error messages need: the file, and the dotted prefix of nested keys.
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    path: &'a Path,
    prefix: &'a str,
}

impl<'a> Fields<'a> {
    fn new(obj: &'a Map<String, Value>, path: &'a Path, prefix: &'a str) -> Fields<'a> {
        Fields { obj, path, prefix }
    }

    fn raw(&self, key: &str) -> Option<&'a Value> {
        self.obj.get(key)
    }

    fn err(&self, key: &str, msg: impl Into<String>) -> ModelError {
        ModelError::config(PathBuf::from(self.path), &format!("{}{key}", self.prefix), msg)
    }

    /// An integer; absent or null is `None`.
    fn int(&self, key: &str) -> Result<Option<i64>> {
        match self.raw(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => {
                v.as_i64().map(Some).ok_or_else(|| self.err(key, format!("must be an integer, got {}", describe(v))))
            }
        }
    }

    /// A positive integer in `1..=max`; absent takes `default` (`None`: the key is required),
    /// null is an error.
    fn size(&self, key: &str, default: Option<usize>, max: usize) -> Result<usize> {
        let v = match self.raw(key) {
            None => return default.ok_or_else(|| self.err(key, "is missing")),
            Some(v) => v,
        };
        let n = match (v.as_u64(), v.as_i64()) {
            (Some(n), _) => n,
            (None, Some(n)) => return Err(self.err(key, format!("must be a positive integer, got {n}"))),
            _ => return Err(self.err(key, format!("must be a positive integer, got {}", describe(v)))),
        };
        self.check_count(key, n, max)
    }

    /// Like [`Fields::size`] for an optional key, also accepting integral floats (`8192.0`),
    /// as transformers does inside rope dicts.
    fn count_lenient(&self, key: &str, max: usize) -> Result<Option<usize>> {
        let v = match self.raw(key) {
            None | Some(Value::Null) => return Ok(None),
            Some(v) => v,
        };
        let n = match (v.as_u64(), v.as_f64()) {
            (Some(n), _) => n,
            (None, Some(x)) if x.fract() == 0.0 && x >= 1.0 => x as u64,
            _ => return Err(self.err(key, format!("must be a positive integer, got {}", describe(v)))),
        };
        self.check_count(key, n, max).map(Some)
    }

    fn check_count(&self, key: &str, n: u64, max: usize) -> Result<usize> {
        if n == 0 {
            return Err(self.err(key, "must be a positive integer, got 0"));
        }
        match usize::try_from(n) {
            Ok(n) if n <= max => Ok(n),
            _ => Err(self.err(key, format!("{n} is above the limit of {max}"))),
        }
    }

    /// A finite number (integer or float); absent or null is `None`.
    fn number(&self, key: &str) -> Result<Option<f64>> {
        match self.raw(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v @ Value::Number(_)) => match v.as_f64() {
                Some(x) if x.is_finite() => Ok(Some(x)),
                _ => Err(self.err(key, format!("must be a finite number, got {}", describe(v)))),
            },
            Some(v) => Err(self.err(key, format!("must be a number, got {}", describe(v)))),
        }
    }

    /// A number > 0 that `rope_type` needs (`"any"`: every rope type).
    fn required_positive(&self, key: &str, rope_type: &str) -> Result<f64> {
        let what = if rope_type == "any" { String::new() } else { format!(" (required by rope_type `{rope_type}`)") };
        match self.number(key)? {
            Some(x) if x > 0.0 => Ok(x),
            Some(x) => Err(self.err(key, format!("must be > 0, got {x}"))),
            None => Err(self.err(key, format!("is missing or null{what}"))),
        }
    }

    /// A boolean; absent is `None`, null is an error.
    fn bool(&self, key: &str) -> Result<Option<bool>> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.err(key, format!("must be true or false, got {}", describe(v)))),
        }
    }

    /// A string; absent or null is `None`.
    fn string(&self, key: &str) -> Result<Option<&'a str>> {
        match self.raw(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.err(key, format!("must be a string, got {}", describe(v)))),
        }
    }
}

/// A short rendering of a JSON value for error messages.
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("the string {}", Value::String(s.chars().take(60).collect())),
        Value::Array(_) => "a list".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: &str = "/ckpt/config.json";

    /// A small Llama config with `extra` merged in (a `null` in `extra` removes the key).
    fn json_with(base: &str, extra: &str) -> String {
        let mut v: Value = serde_json::from_str(base).unwrap();
        let extra: Value = serde_json::from_str(extra).unwrap();
        for (k, x) in extra.as_object().unwrap() {
            if x.is_null() {
                v.as_object_mut().unwrap().remove(k);
            } else {
                v[k] = x.clone();
            }
        }
        v.to_string()
    }

    const LLAMA: &str = r#"{
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
        "torch_dtype": "bfloat16", "eos_token_id": [2, 7]
    }"#;

    fn parse(text: &str) -> Result<ModelConfig> {
        ModelConfig::from_json_str(text, Path::new(PATH))
    }

    fn llama(extra: &str) -> Result<ModelConfig> {
        parse(&json_with(LLAMA, extra))
    }

    /// The error must be a `Config` error naming the file and `key`; returns its message.
    fn config_err(result: Result<ModelConfig>, key: &str) -> String {
        let err = result.unwrap_err();
        let msg = err.to_string();
        match &err {
            ModelError::Config { key: k, .. } => assert_eq!(k, key, "{msg}"),
            other => panic!("expected a Config error for `{key}`, got {other:?}"),
        }
        assert!(msg.contains(PATH) && msg.contains(&format!("`{key}`")), "{msg}");
        msg
    }

    #[test]
    fn llama_config_normalises() {
        let c = llama("{}").unwrap();
        assert_eq!(c.architecture, "LlamaForCausalLM");
        assert_eq!((c.num_attention_heads, c.num_key_value_heads, c.head_dim), (4, 2, 16));
        assert_eq!(c.hidden_act, "silu");
        assert_eq!(c.norm_eps, 1e-5);
        assert_eq!(c.rope, RopeConfig { theta: 500000.0, dim: 16, scaling: RopeScaling::Default });
        assert_eq!(c.layer_types, vec![LayerType::FullAttention; 4]);
        assert_eq!(c.sliding_window, None);
        assert_eq!(c.dtype, Some(DType::BF16));
        assert_eq!((c.bos_token_id, c.eos_token_ids.as_slice(), c.pad_token_id), (Some(1), &[2, 7][..], None));
        assert!(!c.tie_word_embeddings && !c.attention_bias && !c.mlp_bias);
    }

    #[test]
    fn class_defaults_fill_missing_keys() {
        let c =
            llama(r#"{"num_key_value_heads": null, "rope_theta": null, "torch_dtype": null, "eos_token_id": null}"#)
                .unwrap();
        assert_eq!(c.num_key_value_heads, 4);
        assert_eq!(c.rope.theta, 10_000.0);
        assert_eq!(c.dtype, None);
        assert_eq!(c.eos_token_ids, vec![2]);
        // Qwen3's head_dim defaults to 128, not hidden_size / heads.
        let c = llama(r#"{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}"#).unwrap();
        assert_eq!(c.head_dim, 128);
        assert_eq!(c.rope.dim, 128);
        assert_eq!(c.bos_token_id, None);
    }

    #[test]
    fn dtype_wins_over_torch_dtype() {
        assert_eq!(llama(r#"{"dtype": "float16"}"#).unwrap().dtype, Some(DType::F16));
        let msg = config_err(llama(r#"{"dtype": "float64"}"#), "dtype");
        assert!(msg.contains("bfloat16"), "{msg}");
    }

    #[test]
    fn missing_config_json_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let err = ModelConfig::from_dir(dir.path()).unwrap_err();
        assert!(matches!(err, ModelError::Io { .. }));
        assert!(err.to_string().contains(&dir.path().join("config.json").display().to_string()), "{err}");
    }

    #[test]
    fn invalid_json_names_the_path_and_position() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{\n  \"hidden_size\": 64,\n}").unwrap();
        let err = ModelConfig::from_dir(dir.path()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ModelError::Json { .. }));
        assert!(msg.contains("config.json") && msg.contains("line 3"), "{msg}");
        config_err(parse("[1, 2]"), "<root>");
    }

    #[test]
    fn wrong_types_name_the_key() {
        let msg = config_err(llama(r#"{"hidden_size": "64"}"#), "hidden_size");
        assert!(msg.contains("\"64\""), "{msg}");
        let msg = config_err(llama(r#"{"num_hidden_layers": -2}"#), "num_hidden_layers");
        assert!(msg.contains("-2"), "{msg}");
        let msg = config_err(llama(r#"{"num_hidden_layers": 2.5}"#), "num_hidden_layers");
        assert!(msg.contains("2.5"), "{msg}");
        config_err(llama(r#"{"vocab_size": true}"#), "vocab_size");
        config_err(llama(r#"{"tie_word_embeddings": "yes"}"#), "tie_word_embeddings");
        config_err(llama(r#"{"rms_norm_eps": "small"}"#), "rms_norm_eps");
        config_err(llama(r#"{"hidden_act": 3}"#), "hidden_act");
        config_err(llama(r#"{"eos_token_id": [2, "x"]}"#), "eos_token_id");
        config_err(llama(r#"{"rope_parameters": 5}"#), "rope_parameters");
        config_err(llama(r#"{"rope_parameters": {"rope_type": "linear", "factor": "2"}}"#), "rope_parameters.factor");
    }

    #[test]
    fn absurd_sizes_are_refused() {
        let msg = config_err(llama(r#"{"num_hidden_layers": 1000000000}"#), "num_hidden_layers");
        assert!(msg.contains("1000000000") && msg.contains("limit"), "{msg}");
        config_err(llama(r#"{"vocab_size": 18446744073709551615}"#), "vocab_size");
        for key in ["vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "max_position_embeddings"]
        {
            config_err(llama(&format!(r#"{{"{key}": 0}}"#)), key);
        }
        config_err(llama(r#"{"head_dim": 0}"#), "head_dim");
        config_err(llama(r#"{"head_dim": 9}"#), "head_dim");
        config_err(llama(r#"{"num_attention_heads": 128}"#), "head_dim");
    }

    #[test]
    fn missing_sizes_of_unknown_families_are_required() {
        let text =
            json_with(LLAMA, r#"{"architectures": ["FooForCausalLM"], "model_type": "foo", "vocab_size": null}"#);
        let msg = config_err(parse(&text), "vocab_size");
        assert!(msg.contains("missing"), "{msg}");
        config_err(llama(r#"{"architectures": null}"#), "architectures");
        config_err(llama(r#"{"architectures": []}"#), "architectures");
    }

    #[test]
    fn heads_must_divide() {
        let msg = config_err(llama(r#"{"num_key_value_heads": 3}"#), "num_key_value_heads");
        assert!(msg.contains("(4)") && msg.contains("(3)"), "{msg}");
        // LlamaConfig.validate_architecture
        config_err(llama(r#"{"hidden_size": 66, "head_dim": 16}"#), "hidden_size");
    }

    #[test]
    fn unsupported_rope_types_name_key_and_supported_values() {
        let msg =
            config_err(llama(r#"{"rope_parameters": {"rope_type": "proportional"}}"#), "rope_parameters.rope_type");
        assert!(msg.contains("proportional") && msg.contains("longrope") && msg.contains("yarn"), "{msg}");
        let msg = config_err(
            llama(r#"{"rope_parameters": {"rope_type": "longrope", "short_factor": [1], "long_factor": [1]}}"#),
            "rope_parameters.original_max_position_embeddings",
        );
        assert!(msg.contains("missing"), "{msg}");
        let msg = config_err(
            llama(
                r#"{"rope_parameters": {"rope_type": "longrope", "original_max_position_embeddings": 16,
                    "short_factor": [1], "long_factor": [1]}}"#,
            ),
            "rope_parameters.short_factor",
        );
        assert!(msg.contains("need 8"), "{msg}");
        let msg = config_err(llama(r#"{"rope_scaling": {"type": "su", "factor": 2.0}}"#), "rope_scaling.type");
        assert!(msg.contains("`su`"), "{msg}");
        config_err(llama(r#"{"partial_rotary_factor": 0.5}"#), "partial_rotary_factor");
        config_err(
            llama(r#"{"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.25}}"#),
            "rope_parameters.partial_rotary_factor",
        );
        config_err(llama(r#"{"rope_parameters": {"rope_type": "linear"}}"#), "rope_parameters.factor");
        config_err(
            llama(r#"{"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0}}"#),
            "rope_parameters.low_freq_factor",
        );
    }

    /// The old form (top-level `rope_theta` + `rope_scaling`, possibly keyed `type`) and the new
    /// one (`rope_parameters`) give the same rope.
    #[test]
    fn old_and_new_rope_forms_agree() {
        let cases = [
            (r#"{"type": "default"}"#, RopeScaling::Default),
            (r#"{"type": "linear", "factor": 2.0}"#, RopeScaling::Linear { factor: 2.0 }),
            (
                r#"{"rope_type": "dynamic", "factor": 4}"#,
                RopeScaling::Dynamic { factor: 4.0, max_position_embeddings: 256 },
            ),
            (
                r#"{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 64}"#,
                RopeScaling::Llama3 {
                    factor: 8.0,
                    low_freq_factor: 1.0,
                    high_freq_factor: 4.0,
                    original_max_position_embeddings: 64,
                },
            ),
            (
                r#"{"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}"#,
                RopeScaling::Yarn {
                    factor: 4.0,
                    original_max_position_embeddings: 64,
                    beta_fast: 32.0,
                    beta_slow: 1.0,
                    mscale: None,
                    mscale_all_dim: None,
                    attention_factor: None,
                    truncate: true,
                },
            ),
        ];
        for (dict, scaling) in cases {
            let old = llama(&format!(r#"{{"rope_theta": 1000.0, "rope_scaling": {dict}}}"#)).unwrap().rope;
            let mut new_dict: Value = serde_json::from_str(dict).unwrap();
            new_dict["rope_theta"] = Value::from(1000.0);
            let new = llama(&format!(r#"{{"rope_theta": null, "rope_parameters": {new_dict}}}"#)).unwrap().rope;
            assert_eq!(old, new, "{dict}");
            assert_eq!(new, RopeConfig { theta: 1000.0, dim: 16, scaling }, "{dict}");
        }
    }

    #[test]
    fn rope_defaults_follow_transformers() {
        // original_max_position_embeddings defaults to max_position_embeddings (llama3, yarn).
        let c = llama(
            r#"{"rope_parameters": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4}}"#,
        )
        .unwrap();
        assert!(matches!(c.rope.scaling, RopeScaling::Llama3 { original_max_position_embeddings: 256, .. }));
        // A top-level original_max_position_embeddings wins over the dict's (standardize_rope_params).
        let c = llama(
            r#"{"original_max_position_embeddings": 128,
                "rope_scaling": {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64}}"#,
        )
        .unwrap();
        assert!(matches!(c.rope.scaling, RopeScaling::Yarn { original_max_position_embeddings: 128, .. }));
        // yarn: null factor = max_pos / original, `or` defaults for beta, null truncate = false.
        let c = llama(
            r#"{"rope_parameters": {"rope_type": "yarn", "factor": null, "original_max_position_embeddings": 64,
                "beta_fast": 0, "beta_slow": null, "truncate": null, "mscale": 0.7, "mscale_all_dim": 0.7}}"#,
        )
        .unwrap();
        let RopeScaling::Yarn { factor, beta_fast, beta_slow, truncate, mscale, .. } = c.rope.scaling else {
            panic!("{:?}", c.rope)
        };
        assert_eq!((factor, beta_fast, beta_slow, truncate, mscale), (4.0, 32.0, 1.0, false, Some(0.7)));
        assert_eq!(c.rope.theta, 500000.0);
        // A non-empty rope_scaling wins over rope_parameters; an empty one does not.
        let c =
            llama(r#"{"rope_scaling": {"type": "linear", "factor": 3}, "rope_parameters": {"rope_type": "default"}}"#)
                .unwrap();
        assert_eq!(c.rope.scaling, RopeScaling::Linear { factor: 3.0 });
        let c = llama(r#"{"rope_scaling": {}, "rope_parameters": {"rope_type": "linear", "factor": 5}}"#).unwrap();
        assert_eq!(c.rope.scaling, RopeScaling::Linear { factor: 5.0 });
        // The dict's rope_theta wins over the top-level one.
        let c = llama(r#"{"rope_parameters": {"rope_type": "default", "rope_theta": 7.0}}"#).unwrap();
        assert_eq!(c.rope.theta, 7.0);
    }

    const QWEN2: &str = r#"{
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
        "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 256, "rope_theta": 1000000.0,
        "use_sliding_window": true, "sliding_window": 32, "max_window_layers": 2
    }"#;

    #[test]
    fn qwen2_layer_types_follow_max_window_layers() {
        use LayerType::{FullAttention as F, SlidingAttention as S};
        let c = parse(QWEN2).unwrap();
        assert_eq!(c.layer_types, [F, F, S, S]);
        assert_eq!(c.sliding_window, Some(32));
        // Qwen2's q/k/v biases are hard-wired on, whatever `attention_bias` says
        assert!(c.attention_bias && !c.o_bias && !c.mlp_bias);

        // use_sliding_window false: no sliding layers, whatever sliding_window says.
        let c = parse(&json_with(QWEN2, r#"{"use_sliding_window": false}"#)).unwrap();
        assert_eq!((c.layer_types.as_slice(), c.sliding_window), (&[F; 4][..], None));
        // Default max_window_layers (28) is beyond the 4 layers.
        let c = parse(&json_with(QWEN2, r#"{"max_window_layers": null}"#)).unwrap();
        assert_eq!((c.layer_types.as_slice(), c.sliding_window), (&[F; 4][..], None));
        // Absent sliding_window takes the default 4096.
        let c = parse(&json_with(QWEN2, r#"{"sliding_window": null, "max_window_layers": 0}"#)).unwrap();
        assert_eq!((c.layer_types.as_slice(), c.sliding_window), (&[S; 4][..], Some(4096)));

        // An explicit layer_types list wins, legacy names remapped.
        let c = parse(&json_with(
            QWEN2,
            r#"{"layer_types": ["sliding_attention", "attention", "sliding_attention", "full_attention"]}"#,
        ))
        .unwrap();
        assert_eq!(c.layer_types, [S, F, S, F]);
        let msg = config_err(parse(&json_with(QWEN2, r#"{"layer_types": ["full_attention"]}"#)), "layer_types");
        assert!(msg.contains("num_hidden_layers is 4"), "{msg}");
        config_err(parse(&json_with(QWEN2, r#"{"layer_types": ["full_attention", "x", "y", "z"]}"#)), "layer_types");
        let msg = config_err(
            parse(&json_with(
                QWEN2,
                r#"{"layer_types": ["chunked_attention", "full_attention", "full_attention", "full_attention"]}"#,
            )),
            "layer_types",
        );
        assert!(msg.contains("not supported"), "{msg}");
        // Sliding layers without a window (transformers fails building the mask).
        config_err(
            parse(&json_with(
                QWEN2,
                r#"{"use_sliding_window": false, "layer_types": ["sliding_attention", "full_attention", "full_attention", "full_attention"]}"#,
            )),
            "sliding_window",
        );
    }

    #[test]
    fn mistral_sliding_window_applies_to_every_layer() {
        let mistral = json_with(LLAMA, r#"{"architectures": ["MistralForCausalLM"], "model_type": "mistral"}"#);
        let c = parse(&json_with(&mistral, r#"{"sliding_window": 16}"#)).unwrap();
        assert_eq!((c.layer_types.as_slice(), c.sliding_window), (&[LayerType::SlidingAttention; 4][..], Some(16)));
        // The class default window is 4096; an explicit null disables it.
        assert_eq!(parse(&mistral).unwrap().sliding_window, Some(4096));
        let c = parse(&mistral.replacen('{', r#"{"sliding_window": null,"#, 1)).unwrap();
        assert_eq!((c.layer_types.as_slice(), c.sliding_window), (&[LayerType::FullAttention; 4][..], None));
        config_err(parse(&json_with(&mistral, r#"{"sliding_window": -1}"#)), "sliding_window");
    }

    #[test]
    fn mistral_with_layer_types_is_read_as_ministral() {
        let mistral = json_with(LLAMA, r#"{"architectures": ["MistralForCausalLM"], "model_type": "mistral"}"#);
        let types = r#"{"sliding_window": 8, "head_dim": 16,
            "layer_types": ["full_attention", "sliding_attention", "full_attention", "sliding_attention"]}"#;
        let c = parse(&json_with(&mistral, types)).unwrap();
        use LayerType::{FullAttention as F, SlidingAttention as S};
        assert_eq!((c.layer_types.as_slice(), c.sliding_window), (&[F, S, F, S][..], Some(8)));
        // Ministral has no head_dim fallback: transformers fails on it, we say so
        let no_head_dim =
            r#"{"layer_types": ["full_attention", "full_attention", "full_attention", "full_attention"]}"#;
        config_err(parse(&json_with(&mistral, no_head_dim)), "head_dim");
    }

    #[test]
    fn llama_ignores_sliding_window() {
        let c = llama(r#"{"sliding_window": 16}"#).unwrap();
        assert_eq!((c.sliding_window, c.layer_types.len()), (None, 4));
    }

    /// A small config of `class` / `model_type` with `extra` merged in.
    fn family(class: &str, model_type: &str, extra: &str) -> Result<ModelConfig> {
        let base = format!(
            r#"{{"architectures": ["{class}"], "model_type": "{model_type}", "vocab_size": 128, "hidden_size": 64,
                "intermediate_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
                "head_dim": 16, "max_position_embeddings": 256}}"#
        );
        parse(&json_with(&base, extra))
    }

    #[test]
    fn family_defaults_and_derived_values() {
        use LayerType::{FullAttention as F, SlidingAttention as S};
        // Gemma 2: alternating windows, soft-caps and query_pre_attn_scalar from the class
        let c = family("Gemma2ForCausalLM", "gemma2", "{}").unwrap();
        assert_eq!(c.layer_types, [S, F, S, F]);
        assert_eq!((c.sliding_window, c.attn_softcap, c.final_softcap), (Some(4096), Some(50.0), Some(30.0)));
        assert_eq!(c.attention_scales[0], 256f64.powf(-0.5));
        assert!(c.tie_word_embeddings && c.embedding_scale == Some(8.0));
        // Gemma 3: a period of 6 (legacy key honoured), local rope at 1e4, global at 1e6
        let c = family("Gemma3ForCausalLM", "gemma3_text", r#"{"sliding_window_pattern": 2}"#).unwrap();
        assert_eq!(c.layer_types, [S, F, S, F]);
        assert_eq!((c.rope.theta, c.sliding_rope.as_ref().unwrap().theta), (1e6, 1e4));
        assert_eq!(c.final_softcap, None);
        // the text model of a multimodal Gemma 3, with the top level's tie flag
        let text = r#"{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
            "tie_word_embeddings": false, "text_config": {"model_type": "gemma3_text", "hidden_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 16, "vocab_size": 128}}"#;
        let c = parse(text).unwrap();
        assert_eq!((c.hidden_size, c.num_hidden_layers, c.vocab_size, c.tie_word_embeddings), (64, 2, 128, false));
        // SmolLM3: every 4th layer without rope
        let c = family("SmolLM3ForCausalLM", "smollm3", "{}").unwrap();
        assert_eq!(c.rotary_layers, [true, true, true, false]);
        // GPT-2 key names, n_inner null = 4 x n_embd, no rope, biased LayerNorms
        let gpt2 = r#"{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 48, "n_layer": 2,
            "n_head": 4, "n_positions": 32, "n_inner": null, "vocab_size": 100, "scale_attn_by_inverse_layer_idx": true}"#;
        let c = parse(gpt2).unwrap();
        assert_eq!((c.hidden_size, c.intermediate_size, c.max_position_embeddings), (48, 192, 32));
        assert_eq!(c.rotary_layers, [false, false]);
        assert_eq!(c.attention_scales, [12f64.powf(-0.5), 12f64.powf(-0.5) / 2.0]);
        // Phi-3: partial rotary, legacy `su` read as longrope with its attention factor
        let c = family(
            "Phi3ForCausalLM",
            "phi3",
            r#"{"partial_rotary_factor": 0.5, "original_max_position_embeddings": 64,
                "rope_scaling": {"type": "su", "short_factor": [1, 1, 1, 1], "long_factor": [2, 2, 2, 2]}}"#,
        )
        .unwrap();
        assert_eq!(c.rope.dim, 8);
        let RopeScaling::LongRope { attention_factor, original_max_position_embeddings, .. } = c.rope.scaling else {
            panic!("{:?}", c.rope.scaling)
        };
        assert_eq!(original_max_position_embeddings, 64);
        assert!((attention_factor - (1.0 + 4f64.ln() / 64f64.ln()).sqrt()).abs() < 1e-12);
        // Granite multipliers
        let c = family(
            "GraniteForCausalLM",
            "granite",
            r#"{"embedding_multiplier": 12.0, "attention_multiplier": 0.5, "residual_multiplier": 0.2, "logits_scaling": 4.0}"#,
        )
        .unwrap();
        assert_eq!(
            (c.embedding_scale, c.attention_scales[0], c.residual_multiplier, c.logits_scaling),
            (Some(12.0), 0.5, Some(0.2), Some(4.0))
        );
    }

    #[test]
    fn t5_configs_follow_their_class() {
        // T5Config's defaults: 6 + 6 layers of 8 heads of 64, relu, a tied head scaled by
        // d_model ** -0.5, 32 buckets up to 128, unscaled scores, start at the padding id
        let c = parse(r#"{"architectures": ["T5ForConditionalGeneration"], "model_type": "t5"}"#).unwrap();
        assert_eq!((c.hidden_size, c.head_dim, c.num_attention_heads, c.num_hidden_layers), (512, 64, 8, 6));
        assert_eq!((c.hidden_act.as_str(), c.gated_mlp, c.tie_word_embeddings), ("relu", false, true));
        assert_eq!((c.logits_scaling, c.attention_scales[0], c.norm_eps), (Some(512f64.sqrt()), 1.0, 1e-6));
        let s = c.seq2seq.clone().unwrap();
        assert_eq!(
            (s.encoder_layers, s.encoder_head_dim, s.decoder_start_token_id, s.source_positions),
            (6, 64, 0, None)
        );
        let r = c.relative_attention.unwrap();
        assert_eq!((r.num_buckets, r.max_distance), (32, 128));
        // T5's buckets (transformers' _relative_position_bucket): both ways in the encoder
        let both: Vec<i64> = [0, -1, 1, -7, -8, -12, -128, 200].iter().map(|&d| r.bucket(d, true)).collect();
        assert_eq!(both, [0, 1, 17, 7, 8, 9, 15, 31]);
        let past: Vec<i64> = [5, 0, -15, -16, -23, -127, -128].iter().map(|&d| r.bucket(d, false)).collect();
        assert_eq!(past, [0, 0, 15, 16, 18, 31, 31]);
        // v1.1 / Flan: gated-gelu is the tanh GELU, the head unscaled; num_decoder_layers apart
        let c = parse(
            r#"{"architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "feed_forward_proj": "gated-gelu",
                "tie_word_embeddings": false, "num_layers": 4, "num_decoder_layers": 2, "d_kv": 6}"#,
        )
        .unwrap();
        assert_eq!(
            (c.hidden_act.as_str(), c.gated_mlp, c.logits_scaling, c.tie_word_embeddings),
            ("gelu_new", true, None, true)
        );
        assert_eq!((c.num_hidden_layers, c.seq2seq.unwrap().encoder_layers, c.head_dim), (2, 4, 6));
        let e = parse(
            r#"{"architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "feed_forward_proj": "a-b-c"}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("feed_forward_proj"), "{e}");
    }

    #[test]
    fn modernbert_configs_follow_their_class() {
        // ModernBertConfig's defaults: 22 layers, every third global from layer 0, windows of 64
        // each side, rope 160000 global / 10000 local, no biases, heads on the first token
        let c = parse(r#"{"architectures": ["ModernBertForMaskedLM"], "model_type": "modernbert"}"#).unwrap();
        assert_eq!((c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers), (50368, 768, 1152, 22));
        assert_eq!(
            (c.norm_eps, c.hidden_act.as_str(), c.pad_token_id, c.sliding_window),
            (1e-5, "gelu", Some(50283), Some(64))
        );
        let full: Vec<usize> = (0..22).filter(|&i| c.layer_types[i] == LayerType::FullAttention).collect();
        assert_eq!(full, [0, 3, 6, 9, 12, 15, 18, 21]);
        assert_eq!((c.rope.theta, c.sliding_rope.as_ref().map(|r| r.theta)), (160_000.0, Some(10_000.0)));
        assert!(!(c.attention_bias || c.o_bias || c.mlp_bias || c.norm_bias));
        let h = c.encoder.unwrap().heads;
        assert_eq!(
            h,
            HeadsConfig { activation: Some("gelu".into()), dense_bias: false, mean_pooling: false, decoder_bias: true }
        );
        // the legacy keys: the layer period, the thetas; a `sliding_window` key sets the half window
        let c = parse(
            r#"{"architectures": ["ModernBertModel"], "model_type": "modernbert", "num_hidden_layers": 4,
                "global_attn_every_n_layers": 2, "global_rope_theta": 500.0, "local_rope_theta": 50.0,
                "local_attention": 10, "sliding_window": 3, "norm_bias": true, "classifier_pooling": "mean"}"#,
        )
        .unwrap();
        assert_eq!(c.layer_types.iter().filter(|t| **t == LayerType::SlidingAttention).count(), 2);
        assert_eq!((c.rope.theta, c.sliding_rope.map(|r| r.theta), c.sliding_window), (500.0, Some(50.0), Some(3)));
        assert!(c.norm_bias && c.encoder.unwrap().heads.mean_pooling);
        let e =
            parse(r#"{"architectures": ["ModernBertModel"], "model_type": "modernbert", "classifier_pooling": "max"}"#)
                .unwrap_err();
        assert!(e.to_string().contains("classifier_pooling") && e.to_string().contains("cls, mean"), "{e}");
    }

    #[test]
    fn encoder_configs_follow_their_classes() {
        // BertConfig's defaults, no rope, biases everywhere, two labels and two token types
        let c = parse(r#"{"architectures": ["BertForMaskedLM"], "model_type": "bert"}"#).unwrap();
        assert_eq!((c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers), (30522, 768, 3072, 12));
        assert_eq!((c.num_attention_heads, c.num_key_value_heads, c.head_dim), (12, 12, 64));
        assert_eq!((c.max_position_embeddings, c.norm_eps, c.hidden_act.as_str()), (512, 1e-12, "gelu"));
        assert_eq!(c.rotary_layers, [false; 12]);
        assert!(c.attention_bias && c.o_bias && c.mlp_bias && c.tie_word_embeddings);
        let e = c.encoder.clone().unwrap();
        assert_eq!((c.pad_token_id, e.type_vocab_size, e.num_labels, e.pooler_size), (Some(0), 2, 2, 768));
        // labels counted from id2label (as PreTrainedConfig does), RoBERTa's padding id
        let c = parse(
            r#"{"architectures": ["RobertaForSequenceClassification"], "model_type": "roberta", "type_vocab_size": 1,
                "id2label": {"0": "neg", "1": "neutral", "2": "pos"}, "num_labels": 7}"#,
        )
        .unwrap();
        assert_eq!((c.pad_token_id, c.vocab_size), (Some(1), 50265));
        assert_eq!(c.encoder.map(|e| (e.type_vocab_size, e.num_labels)), Some((1, 3)));
        let c =
            parse(r#"{"architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta", "num_labels": 4}"#).unwrap();
        assert_eq!((c.pad_token_id, c.encoder.unwrap().num_labels), (Some(1), 4));
        // BertConfig refuses a hidden size the heads do not divide; a decoder has no encoder part
        let e = parse(r#"{"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 100}"#).unwrap_err();
        assert!(e.to_string().contains("not a multiple of num_attention_heads"), "{e}");
        // a BERT made a decoder (causal, or with cross-attention) is refused, not run bidirectionally
        for key in ["is_decoder", "add_cross_attention"] {
            let text = format!(r#"{{"architectures": ["RobertaModel"], "model_type": "roberta", "{key}": true}}"#);
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains("only the encoder"), "{e}");
        }
        assert!(parse(r#"{"architectures": ["BertModel"], "model_type": "bert", "is_decoder": false}"#).is_ok());
        assert_eq!(family("LlamaForCausalLM", "llama", "{}").unwrap().encoder, None);
        // DistilBERT's key names, no token types, its modeling code's fixed epsilon
        let c = parse(
            r#"{"architectures": ["DistilBertForMaskedLM"], "model_type": "distilbert", "dim": 64, "n_heads": 4,
                "n_layers": 3, "hidden_dim": 100, "activation": "relu", "layer_norm_eps": 0.1}"#,
        )
        .unwrap();
        assert_eq!((c.hidden_size, c.num_attention_heads, c.num_hidden_layers, c.intermediate_size), (64, 4, 3, 100));
        assert_eq!((c.hidden_act.as_str(), c.norm_eps, c.vocab_size), ("relu", 1e-12, 30522));
        assert_eq!(c.encoder.map(|e| (e.type_vocab_size, e.num_labels)), Some((0, 2)));
        // ViT: image and patch sizes as integers or pairs, a pooler of its own width
        let vit = r#"{"architectures": ["ViTModel"], "model_type": "vit", "image_size": [12, 8], "patch_size": 4,
            "pooler_output_size": 20, "pooler_act": "relu"}"#;
        let e = parse(vit).unwrap().encoder.unwrap();
        let image = e.image.clone().unwrap();
        assert_eq!((image.size, image.patch, image.channels, image.patches()), ([12, 8], [4, 4], 3, 6));
        assert_eq!((e.pooler_size, e.pooler_act.as_str()), (20, "relu"));
        let c = parse(r#"{"architectures": ["ViTModel"], "model_type": "vit"}"#).unwrap();
        assert!(c.attention_bias && c.encoder.unwrap().image.unwrap().size == [224, 224]);
        let e = parse(r#"{"architectures": ["ViTModel"], "model_type": "vit", "image_size": 30}"#).unwrap_err();
        assert!(e.to_string().contains("not a multiple of patch_size"), "{e}");
    }

    #[test]
    fn family_config_errors_name_the_key() {
        config_err(
            family("Phi3ForCausalLM", "phi3", r#"{"rope_parameters": {"rope_type": "linear", "factor": 2.0}}"#),
            "rope_parameters.rope_type",
        );
        config_err(
            family(
                "Phi3ForCausalLM",
                "phi3",
                r#"{"rope_parameters": {"rope_type": "longrope", "original_max_position_embeddings": 16}}"#,
            ),
            "rope_parameters.short_factor",
        );
        config_err(family("Phi3ForCausalLM", "phi3", r#"{"partial_rotary_factor": 0.1}"#), "partial_rotary_factor");
        config_err(
            family("Gemma2ForCausalLM", "gemma2", r#"{"use_bidirectional_attention": true}"#),
            "use_bidirectional_attention",
        );
        config_err(family("Gemma2ForCausalLM", "gemma2", r#"{"query_pre_attn_scalar": 0}"#), "query_pre_attn_scalar");
        config_err(
            family("Gemma2ForCausalLM", "gemma2", r#"{"attn_logit_softcapping": -1}"#),
            "attn_logit_softcapping",
        );
        config_err(
            family("Gemma3ForCausalLM", "gemma3_text", r#"{"rope_parameters": {"sliding_attention": 3}}"#),
            "rope_parameters.sliding_attention",
        );
        config_err(family("SmolLM3ForCausalLM", "smollm3", r#"{"no_rope_layers": [1, 0]}"#), "no_rope_layers");
        config_err(family("SmolLM3ForCausalLM", "smollm3", r#"{"no_rope_layers": [1, 2, 1, 1]}"#), "no_rope_layers");
        config_err(family("GraniteForCausalLM", "granite", r#"{"logits_scaling": 0}"#), "logits_scaling");
        config_err(
            family("LlamaForCausalLM", "llama", r#"{"rope_parameters": {"full_attention": {}}}"#),
            "rope_parameters.full_attention",
        );
        config_err(
            parse(r#"{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": "wide"}"#),
            "n_embd",
        );
        config_err(
            parse(r#"{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": 1}"#),
            "text_config",
        );
        config_err(
            parse(
                r#"{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": {"hidden_size": -1}}"#,
            ),
            "text_config.hidden_size",
        );
    }

    /// The MoE keys as each class reads them: defaults, sparse layers, renormalisation, the
    /// shared expert, and errors naming the key.
    #[test]
    fn moe_configs() {
        let c = family("Qwen3MoeForCausalLM", "qwen3_moe", r#"{"decoder_sparse_step": 2, "mlp_only_layers": [3]}"#)
            .unwrap();
        let m = c.moe.as_ref().unwrap();
        assert_eq!((m.num_experts, m.top_k, m.intermediate_size, m.normalize), (128, 8, 768, false));
        assert_eq!(m.sparse_layers, [false, true, false, false]);
        assert_eq!(m.shared_expert_intermediate_size, None);
        // Qwen3-MoE slides every layer only with use_sliding_window
        let c = family("Qwen3MoeForCausalLM", "qwen3_moe", r#"{"use_sliding_window": true}"#).unwrap();
        assert_eq!((c.sliding_window, c.layer_types[3]), (Some(4096), LayerType::SlidingAttention));
        // Mixtral: every layer sparse, always renormalised, experts of intermediate_size
        let c =
            family("MixtralForCausalLM", "mixtral", r#"{"num_local_experts": 4, "norm_topk_prob": false}"#).unwrap();
        let m = c.moe.as_ref().unwrap();
        assert_eq!((m.num_experts, m.top_k, m.intermediate_size, m.normalize), (4, 2, c.intermediate_size, true));
        assert_eq!((c.norm_eps, c.rope.theta), (1e-5, 1e6));
        assert!(m.sparse_layers.iter().all(|&s| s));
        // Qwen2-MoE: shared expert, qkv bias on by default, sliding_window 0 when unused
        let c = family("Qwen2MoeForCausalLM", "qwen2_moe", r#"{"sliding_window": 0, "num_experts": 6}"#).unwrap();
        let m = c.moe.as_ref().unwrap();
        assert_eq!((m.num_experts, m.shared_expert_intermediate_size), (6, Some(5632)));
        assert!(c.attention_bias && !c.o_bias && c.sliding_window.is_none());
        // no expert at all: a dense model
        let c = family("Qwen2MoeForCausalLM", "qwen2_moe", r#"{"num_experts": 0}"#).unwrap();
        assert!(c.moe.is_none());
        let e =
            config_err(family("MixtralForCausalLM", "mixtral", r#"{"num_experts_per_tok": 9}"#), "num_experts_per_tok");
        assert!(e.contains("more than the 8 experts"), "{e}");
        config_err(family("Qwen3MoeForCausalLM", "qwen3_moe", r#"{"mlp_only_layers": ["1"]}"#), "mlp_only_layers");
        config_err(family("Qwen3MoeForCausalLM", "qwen3_moe", r#"{"decoder_sparse_step": 0}"#), "decoder_sparse_step");
    }

    const LLAVA: &str = r#"{"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
        "text_config": {"model_type": "llama", "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32,
            "num_hidden_layers": 2, "num_attention_heads": 2},
        "vision_config": {"model_type": "clip_vision_model", "hidden_size": 8, "intermediate_size": 16,
            "num_hidden_layers": 3, "num_attention_heads": 2, "image_size": 8, "patch_size": 4}"#;

    fn llava(extra: &str) -> Result<ModelConfig> {
        parse(&format!("{LLAVA}{extra}}}"))
    }

    /// LlavaConfig as transformers reads it: the text family by `text_config.model_type`, the
    /// class defaults (feature layer -2 of the tower's hidden states, `default` strategy, image
    /// token 32000, gelu projector with biases), and errors naming the key.
    #[test]
    fn llava_configs_read_both_sub_configs() {
        let c = llava("").unwrap();
        let v = c.vision.as_deref().unwrap();
        assert_eq!((c.hidden_size, c.vocab_size, v.text_family.model_types[0]), (16, 64, "llama"));
        assert_eq!((v.tower.hidden_size, v.tower.num_hidden_layers, v.tower.hidden_act.as_str()), (8, 3, "quick_gelu"));
        assert_eq!((v.feature_layers.clone(), v.keep_cls, v.image_token_id), (vec![2], false, 32000));
        assert_eq!((v.projector_act.as_str(), v.projector_bias, v.merge.clone()), ("gelu", true, None));
        let v = llava(
            r#", "vision_feature_layer": [0, -1], "vision_feature_select_strategy": "full", "image_token_index": 5"#,
        )
        .unwrap()
        .vision
        .unwrap();
        assert_eq!((v.feature_layers, v.keep_cls, v.image_token_id), (vec![0, 3], true, 5));
        config_err(llava(r#", "vision_feature_layer": -5"#), "vision_feature_layer");
        config_err(llava(r#", "vision_feature_layer": "last""#), "vision_feature_layer");
        config_err(llava(r#", "vision_feature_select_strategy": "pooled""#), "vision_feature_select_strategy");
        config_err(
            parse(r#"{"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", "text_config": {}}"#),
            "vision_config",
        );
        let bert = LLAVA.replace(r#""model_type": "llama""#, r#""model_type": "bert""#);
        config_err(parse(&format!("{bert}}}")), "text_config.model_type");
        let siglip = LLAVA.replace("clip_vision_model", "siglip_vision_model");
        config_err(parse(&format!("{siglip}}}")), "vision_config.model_type");
    }

    /// Qwen2VLConfig: nested or hub-flat text keys, `mrope` read as the default rope with its
    /// sections, the tower's keys (`in_chans`, `mlp_ratio`), and the checks tying them.
    #[test]
    fn qwen2vl_configs_read_nested_and_flat_text() {
        let vision = r#""vision_config": {"depth": 2, "embed_dim": 8, "hidden_size": 16, "num_heads": 2, "mlp_ratio": 3,
            "patch_size": 2, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_chans": 1}"#;
        let text = r#""vocab_size": 64, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1"#;
        let head = r#"{"architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl""#;
        let nested = format!(
            r#"{head}, "text_config": {{{text}, "rope_parameters": {{"rope_type": "mrope", "mrope_section": [1, 1, 2], "rope_theta": 10000.0}}}}, {vision}}}"#
        );
        let flat =
            format!(r#"{head}, {text}, "rope_scaling": {{"type": "mrope", "mrope_section": [1, 1, 2]}}, {vision}}}"#);
        for cfg in [parse(&nested).unwrap(), parse(&flat).unwrap()] {
            let v = cfg.vision.as_deref().unwrap();
            assert_eq!(
                (cfg.hidden_size, cfg.num_key_value_heads, cfg.rope.scaling.clone()),
                (16, 1, RopeScaling::Default)
            );
            assert_eq!((v.mrope_section.clone(), v.image_token_id), (vec![1, 1, 2], 151655));
            assert_eq!((v.tower.hidden_size, v.tower.intermediate_size, v.tower.head_dim), (8, 24, 4));
            let m = v.merge.as_ref().unwrap();
            assert_eq!((m.channels, m.patch_values(), m.spatial_merge_size), (1, 8, 2));
        }
        assert_eq!(parse(&flat).unwrap().rope.theta, 1_000_000.0, "Qwen2VLTextConfig's default theta");
        config_err(parse(&flat.replace("[1, 1, 2]", "[1, 1, 1]")), "rope_parameters");
        config_err(
            parse(&flat.replace(r#", "rope_scaling": {"type": "mrope", "mrope_section": [1, 1, 2]}"#, "")),
            "rope_parameters",
        );
        config_err(
            parse(&nested.replace(r#""hidden_size": 16, "num_heads""#, r#""hidden_size": 12, "num_heads""#)),
            "vision_config.hidden_size",
        );
    }
}
