//! `config.json` -> [`ModelConfig`], with the defaults and semantics of transformers 5.23.
//!
//! A checkpoint's `config.json` is read the way transformers' config class for its
//! `model_type` reads it, by the schema of the family that claims the class and the
//! `model_type` (`families/`; anything else is refused as unsupported): missing keys take that
//! class's defaults,
//! the old rope form (`rope_theta` + `rope_scaling`) and the new one (`rope_parameters`) are
//! merged exactly as `convert_rope_params_to_dict` / `standardize_rope_params` do, and the
//! per-layer attention kinds are derived as each modeling class derives them.
//!
//! Everything is validated here, before a builder allocates anything: wrong types, absurd
//! sizes and unsupported settings are a [`ModelError::Config`] naming the file and the key.
//! The JSON is kept as a `serde_json::Value` and read key by key (rather than through a typed
//! serde struct) precisely so that a type error can name its key.

use std::path::{Path, PathBuf};

use hfexport_core::{DType, RopeConfig, RopeScaling, RouterScore, Routing};
use serde_json::{Map, Value};

use crate::error::{ModelError, Result};
use crate::families::{self, Architecture};
use crate::layout::{DualLayout, Layout, Pooler, TowerKind, VisionLanguage};
use crate::schema::{
    ConfigSchema, Defaults, EmbeddingScale, Flag, KvHeads, LayerRule, MoeGlu, MoeLayers, MoeSchema, NormTopK, RopeRule,
    RoutingRule, ScaleRule, SharedSize,
};

mod audio;
mod convnet;
mod dims;
mod encoder;
mod fields;
mod flags;
mod generation;
mod layer_spec;
mod layers;
mod multimodal;
mod per_layer;
mod rope;
#[cfg(test)]
mod tests;

pub use audio::{AudioConfig, AudioConv, FeatureNorm};
use convnet::*;
pub use convnet::{Backbone, ConvNetConfig, ConvNextConfig, MobileNetV2Config, ResNetConfig, SwinConfig, SwinVersion};
use dims::*;
use encoder::*;
pub use encoder::{MAX_IMAGE_SIDE, MAX_LABELS};
use fields::*;
pub use flags::ParallelMlpInput;
use flags::*;
pub use generation::GenerationConfig;
use generation::*;
use layer_spec::*;
pub use layer_spec::{
    AttentionSpec, DeltaNetSpec, GatedNorm, LatentSpec, LayerMlp, LayerSpec, Mamba2Spec, MambaSpec, Mixer, QueryScale,
    ShortConvSpec, Span,
};
use layers::*;
use multimodal::*;
use per_layer::*;
pub use per_layer::{AltUp, DenseMlp, MediaTokens};
use rope::*;

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
    /// The config's head counts and size (every layer's, until a family varies them per layer:
    /// a layer's own are in its [`AttentionSpec`]).
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    /// The epsilon of every norm (`rms_norm_eps`, GPT-2's `layer_norm_epsilon`).
    pub norm_eps: f64,
    /// The rotary embedding (of the full-attention layers when [`Self::sliding_rope`] is set);
    /// which layers apply it is in their [`AttentionSpec`].
    pub rope: RopeConfig,
    /// The sliding layers' own rotary embedding (Gemma 3's local base frequency).
    pub sliding_rope: Option<RopeConfig>,
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
    /// The LM head's bias (Phi, GPT-J; ERNIE 4.5-MoE's `use_bias`).
    pub head_bias: bool,
    /// Attention and MLP side by side off the same residual (Phi, GPT-NeoX), and what the MLP
    /// reads.
    pub parallel: Option<ParallelMlpInput>,
    /// The pre-sublayer norms are applied after each residual add instead, and there is no
    /// final norm (OPT's `do_layer_norm_before` false).
    pub post_residual_norms: bool,
    /// LayerNorms have a weight and bias (false: OPT's `layer_norm_elementwise_affine`).
    pub norm_affine: bool,
    /// The token embeddings' width where it differs from the hidden size (OPT's
    /// `word_embed_proj_dim`, ELECTRA's and ALBERT's `embedding_size`).
    pub embed_dim: Option<usize>,
    /// The layout's q/k norm is applied (Phi's `qk_layernorm`; always where a layout has one).
    pub qk_norm: bool,
    /// The MLP is gated (T5's `gated-*` `feed_forward_proj`; the layout decides elsewhere).
    pub gated_mlp: bool,
    /// T5's relative position bias (every attention of a stack adds it to its scores).
    pub relative_attention: Option<RelativeAttention>,
    /// What each layer is (`len() == num_hidden_layers`).
    pub layers: Vec<LayerSpec>,
    /// Token embeddings are multiplied by this (Gemma's `sqrt(hidden_size)`, Granite's
    /// `embedding_multiplier`).
    pub embedding_scale: Option<f64>,
    /// Sub-block outputs are multiplied by this before the residual add (Granite).
    pub residual_multiplier: Option<f64>,
    /// Logits are divided by this (Granite's `logits_scaling`; Cohere's `1 / logit_scale`).
    pub logits_scaling: Option<f64>,
    /// Falcon-H1's µP multipliers inside each layer.
    pub mup: Option<Mup>,
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
    /// The pooling, Dense projections and normalisation of a sentence-transformers checkpoint
    /// (`modules.json` beside `config.json`: [`crate::sentence`]); `None` elsewhere.
    pub sentence: Option<crate::sentence::SentenceModules>,
    /// The encoder stack of an encoder-decoder (Whisper); the fields above are its decoder's.
    pub seq2seq: Option<Seq2SeqConfig>,
    /// A convolutional vision backbone (ResNet): the model has no transformer layers.
    pub convnet: Option<ConvNetConfig>,
    /// The image side of a vision-language model (LLaVA); the fields above are its text
    /// model's (`text_config`).
    pub vision: Option<Box<VisionConfig>>,
    /// The image tower of an image-text dual encoder (CLIP); the fields above are its text
    /// tower's (`text_config`).
    pub dual: Option<Box<DualConfig>>,
    /// Per-layer embeddings (Gemma 4's PLE).
    pub per_layer_input: Option<PerLayerInput>,
    /// Token ids embedded as `pad_token_id` (Gemma 4's media placeholders, which a text-only
    /// forward replaces so: [`ConfigSchema::placeholders`]).
    pub placeholder_ids: Vec<i64>,
    /// Token ids embedded by tables of their own (Gemma 3n's media tokens).
    pub media_tokens: Vec<MediaTokens>,
    /// AltUp's residual streams (Gemma 3n).
    pub altup: Option<AltUp>,
    /// LAuReL's rank (Gemma 3n): a low-rank residual beside each attention.
    pub laurel_rank: Option<usize>,
}

/// Per-layer embeddings: `size` channels per layer from a table of `vocab` tokens
/// (`hidden_size_per_layer_input`, `vocab_size_per_layer_input`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerLayerInput {
    pub size: usize,
    pub vocab: usize,
}

/// Falcon-H1's µP multipliers (`FalconH1Config`, every one 1.0 by default): the factor of the
/// keys, of the attention's input and output, of the Mamba2 mixer's input and output, of the
/// five parts of its input projection (`ssm_multipliers`: gate, x, B, C, dt; transformers'
/// `mup_vector`), and of the MLP's gate projection and output (`mlp_multipliers`).
#[derive(Debug, Clone, PartialEq)]
pub struct Mup {
    pub key: f64,
    pub attention_in: f64,
    pub attention_out: f64,
    pub ssm_in: f64,
    pub ssm_out: f64,
    pub ssm: [f64; 5],
    pub mlp: [f64; 2],
}

/// An image-text dual encoder's image side (CLIPConfig's keys).
#[derive(Debug, Clone, PartialEq)]
pub struct DualConfig {
    /// The image tower (`vision_config`) as an image encoder's config.
    pub vision: ModelConfig,
    /// CLIP's `projection_dim`: the width of the shared space both towers are projected into;
    /// `None` where each tower's own head ends in it (SigLIP).
    pub projection_dim: Option<usize>,
}

/// A vision-language model's image side, resolved (LlavaConfig's keys).
#[derive(Debug, Clone, PartialEq)]
pub struct VisionConfig {
    pub entry: &'static VisionLanguage,
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

/// Bucketed relative positions (T5, MPNet): `num_buckets` buckets, logarithmic up to
/// `max_distance`, looked up in a bias table of `table_rows` rows (T5: the buckets; MPNet
/// buckets into 32 whatever its `relative_attention_num_buckets`, the table's rows, says).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelativeAttention {
    pub num_buckets: usize,
    pub max_distance: usize,
    pub table_rows: usize,
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
    /// ALBERT's shared layers; `None`: one set of weights per layer.
    pub layer_groups: Option<LayerGroups>,
    /// Learned absolute positions are added to the embeddings (DeBERTa-v2's
    /// `position_biased_input`; always elsewhere).
    pub absolute_positions: bool,
    /// DeBERTa-v2's disentangled attention, when `relative_attention` is on.
    pub disentangled: Option<Disentangled>,
    /// What a raw-audio encoder reads (wav2vec2, HuBERT).
    pub audio: Option<AudioConfig>,
    /// BEiT's relative position biases, layer scales and pooling.
    pub beit: Option<BeitSettings>,
}

/// BEiT's switches over ViT's graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeitSettings {
    /// `use_relative_position_bias`: each layer adds the bias of its own table.
    pub layer_bias: bool,
    /// `use_shared_relative_position_bias`: every layer adds the bias of one table.
    pub shared_bias: bool,
    /// `layer_scale_init_value > 0`: each sub-block's output is scaled by the layer's
    /// `lambda_1` / `lambda_2` (none are stored otherwise).
    pub layer_scale: bool,
    /// `use_mean_pooling`: `pooler_output` is the normed mean of the patch tokens and there is
    /// no final norm; else the class token after the final `layernorm`.
    pub mean_pooling: bool,
}

/// DeBERTa-v2's disentangled attention: each layer's scores gain the content-to-position term
/// (`c2p`: the query against the relative embedding of its distance to the key) and the
/// position-to-content term (`p2c`), the relative embeddings `[2 * span, hidden]` projected by
/// the layer's own `pos_key_proj` / `pos_query_proj` or, with `share_att_key`, its key and query
/// projections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disentangled {
    /// Relative distances are `-span..span` (`position_buckets`, else `max_relative_positions`,
    /// else `max_position_embeddings`).
    pub span: usize,
    /// `(position_buckets, max_relative_positions)` when distances are log-bucketed.
    pub buckets: Option<(usize, usize)>,
    pub c2p: bool,
    pub p2c: bool,
    pub share_att_key: bool,
    /// `norm_rel_ebd` has `layer_norm`: the relative embeddings pass the encoder's LayerNorm.
    pub norm_rel_embeddings: bool,
}

impl Disentangled {
    /// The bucketed relative position of `relative` = query - key, as transformers'
    /// `make_log_bucket_position` computes it (its logarithms in f32, as torch does); the
    /// distance itself without buckets.
    pub fn bucket(&self, relative: i64) -> i64 {
        let Some((size, max_position)) = self.buckets else { return relative };
        let mid = (size / 2) as i64;
        let abs = if relative < mid && relative > -mid { mid - 1 } else { relative.abs() };
        if abs <= mid {
            return relative;
        }
        let ratio = (abs as f32 / mid as f32).ln() / (((max_position - 1) as f64 / mid as f64) as f32).ln();
        let log_pos = (ratio * (mid - 1) as f32).ceil() as i64 + mid;
        log_pos * relative.signum()
    }
}

/// ALBERT's layer sharing: `groups` groups of `inner` layers each; layer `i` of
/// `num_hidden_layers` runs all layers of group `i / (num_hidden_layers / groups)` (in floating
/// point and truncated, as `AlbertTransformer` computes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerGroups {
    pub groups: usize,
    pub inner: usize,
}

impl LayerGroups {
    /// The group run at layer `i` of `layers`.
    pub fn group_of(self, i: usize, layers: usize) -> usize {
        (i as f64 / (layers as f64 / self.groups as f64)) as usize
    }
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
    /// How each token's experts are chosen and weighed.
    pub routing: Routing,
    /// The shared expert's intermediate size (Qwen2-MoE); 0: only its down projection's bias
    /// (a DeepSeek config with `n_shared_experts` 0).
    pub shared_expert_intermediate_size: Option<usize>,
    /// GPT-OSS's clamped SwiGLU `(alpha, limit)` in place of `act(gate) * up`.
    pub clamped_swiglu: Option<(f64, f64)>,
    /// The router and the experts' projections have biases (GPT-OSS).
    pub biased: bool,
    /// The routing weights scale the chosen experts' input, not their output (Llama 4).
    pub weigh_input: bool,
}

impl MoeConfig {
    /// Whether the chosen experts' weights are divided by their sum.
    pub fn normalize(&self) -> bool {
        match self.routing {
            Routing::Softmax { normalize } | Routing::Grouped { normalize, .. } => normalize,
        }
    }
}

impl ModelConfig {
    /// Reads and validates `<dir>/config.json`.
    pub fn from_dir(dir: &Path) -> Result<ModelConfig> {
        let path = dir.join("config.json");
        let text = read_small_text(&path, MAX_CONFIG_BYTES)?;
        let mut config = ModelConfig::from_json_str(&text, &path)?;
        if let Some(audio) = config.encoder.as_mut().and_then(|e| e.audio.as_mut()) {
            audio.attention_mask = audio::returns_attention_mask(dir)?;
        }
        Ok(ModelConfig { sentence: crate::sentence::read(dir)?, ..config })
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
        let attention = AttentionSpec {
            heads: s.encoder_heads,
            kv_heads: s.encoder_heads,
            head_dim: s.encoder_head_dim,
            span: Span::Full,
            rope: None,
            scale: s.encoder_scale,
            alibi: None,
            query_scale: None,
            kv_source: None,
            values_from_keys: false,
        };
        let dense = DenseMlp { width: s.encoder_ffn, gate_cutoff: None };
        let encoder_layer = LayerSpec { mixer: Mixer::Attention(attention), mlp: LayerMlp::Dense, dense };
        Some(ModelConfig {
            num_hidden_layers: n,
            num_attention_heads: s.encoder_heads,
            num_key_value_heads: s.encoder_heads,
            head_dim: s.encoder_head_dim,
            intermediate_size: s.encoder_ffn,
            max_position_embeddings: s.source_positions.unwrap_or(self.max_position_embeddings),
            layers: vec![encoder_layer; n],
            ..self.clone()
        })
    }

    /// The family this config is built by: its class's, or for a vision-language checkpoint its
    /// text family's blocks under the multimodal roots, with the vision side attached.
    pub fn family(&self) -> Result<Architecture> {
        let Some(v) = &self.vision else { return families::lookup(&self.architecture).copied() };
        let text = v.text_family;
        Ok(Architecture {
            layout: Layout {
                roots: v.entry.text_roots,
                heads: v.entry.heads,
                vision: Some(v.entry.vision),
                ..text.layout
            },
            ..*text
        })
    }
}

/// Reads a text file that must stay small (JSON metadata), naming the file in every error.
pub(crate) fn read_small_text(path: &Path, max_bytes: u64) -> Result<String> {
    hfexport_core::limits::read_text(path, max_bytes).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData => ModelError::Json { path: path.to_path_buf(), msg: e.to_string() },
        _ => ModelError::io(path, e),
    })
}

fn normalise(top: &Fields) -> Result<ModelConfig> {
    let architecture = architecture(top)?;
    let model_type = top.string("model_type")?.map(str::to_string);
    if let Some(entry) = families::vision_language(model_type.as_deref(), &architecture) {
        return vision_language(top, entry, architecture, model_type);
    }
    let family = family_of(top, &architecture, model_type.as_deref())?;
    let schema = &family.config;
    let top = &top.with_aliases(schema.aliases);
    let nested;
    let f = match (schema.text_config, top.raw("text_config")) {
        (true, Some(Value::Object(obj))) => {
            nested = Fields::new(obj, top.path, "text_config.").with_aliases(schema.aliases);
            &nested
        }
        (true, Some(v)) if !v.is_null() => {
            return Err(top.err("text_config", format!("must be an object, got {}", describe(v))))
        }
        _ => top,
    };
    let cfg = model_config(top, f, schema, architecture, model_type)?;
    match family.layout.dual {
        Some(dual) => dual_encoder(top, (family, dual), cfg),
        None => Ok(cfg),
    }
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
    let heads = layer_heads(f, schema, &dims)?;
    let (rope, sliding_rope) = parse_ropes(f, schema, &dims, kind_head_dims(f, schema, &dims, &heads)?)?;
    let (moe, sparse) = parse_moe(f, schema, &dims)?;
    let intermediate_size = adjusted_ffn(f, schema, dims.intermediate_size)?;
    let mlps = dense_mlps(f, schema, &dims, intermediate_size)?;
    let layers = layer_specs(f, schema, &dims, (&rope, sliding_rope.as_ref()), &sparse, (&heads, &mlps))?;
    let (attention_bias, o_bias, mlp_bias, norm_bias, head_bias) = parse_biases(f, schema)?;
    let (bos_token_id, eos_token_ids, pad_token_id) = parse_token_ids(f, d)?;
    let (residual_multiplier, granite_logits) = granite_multipliers(f, schema)?;
    let logits_scaling =
        granite_logits.or(t5_output_scale(top, schema, dims.hidden_size)?).or(logit_scale_divisor(f, schema)?);
    let (attn_softcap, final_softcap) = softcaps(f, schema)?;
    for key in schema.refused {
        if let Some(v) = f.raw(key).filter(|v| !v.is_null() && **v != Value::Bool(false)) {
            return Err(f.err(key, format!("{} is not supported (only null or false)", describe(v))));
        }
    }
    // Gemma 4's `"vision"` makes only image tokens attend both ways: text is causal
    let bidirectional = match f.raw("use_bidirectional_attention") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) if s == "vision" => false,
        Some(Value::String(s)) if s == "all" => true,
        Some(_) => f.bool("use_bidirectional_attention")? == Some(true),
    };
    if bidirectional {
        return Err(f.err("use_bidirectional_attention", "bidirectional attention (an encoder use) is not supported"));
    }
    Ok(ModelConfig {
        architecture,
        model_type,
        vocab_size: dims.vocab_size,
        hidden_size: dims.hidden_size,
        intermediate_size,
        num_hidden_layers: dims.num_hidden_layers,
        num_attention_heads: dims.num_attention_heads,
        num_key_value_heads: dims.num_key_value_heads,
        head_dim: dims.head_dim,
        hidden_act: activation(f, schema)?,
        max_position_embeddings: dims.max_position_embeddings,
        norm_eps: parse_eps(f, schema)?,
        rope,
        sliding_rope,
        // T5Config ties the head always (a stored `lm_head` still wins)
        tie_word_embeddings: schema.seq2seq.is_some_and(|s| s.t5) || tie_word_embeddings(top, d)?,
        attention_bias,
        o_bias,
        mlp_bias,
        norm_bias,
        head_bias,
        parallel: parallel_block(f, schema)?,
        post_residual_norms: !flag(f, schema.pre_norms)?,
        norm_affine: flag(f, schema.norm_affine)?,
        embed_dim: embed_dim(f, schema, dims.hidden_size)?,
        qk_norm: flag(f, schema.qk_norm)?,
        gated_mlp: (schema.seq2seq.is_some_and(|s| s.t5) && feed_forward_proj(f)?.1) || swiglu(f, schema)?,
        relative_attention: relative_attention(f, schema)?,
        layers,
        embedding_scale: embedding_scale(f, schema, &dims)?,
        residual_multiplier,
        logits_scaling,
        mup: mup_multipliers(f, schema)?,
        attn_softcap,
        final_softcap,
        moe,
        dtype: parse_dtype(top)?,
        bos_token_id,
        eos_token_ids,
        pad_token_id,
        encoder: parse_encoder(f, schema, &dims)?,
        sentence: None,
        seq2seq: parse_seq2seq(f, schema, &dims, (pad_token_id, bos_token_id))?,
        convnet: parse_convnet(f, schema)?,
        vision: None,
        dual: None,
        per_layer_input: per_layer_input(f, schema.per_layer_inputs)?,
        placeholder_ids: placeholder_ids(top, schema)?,
        media_tokens: media_tokens(top, schema)?,
        altup: altup(f, schema.altup)?,
        laurel_rank: laurel_rank(f, schema.laurel)?,
    })
}

/// The family a config is read by: the registry entry that claims both its class and its
/// `model_type` (the class's alone in a file without `model_type`). A class or `model_type` no
/// entry claims is refused here, before any key is read, so the error is "not supported" and
/// never a missing key of some other family's schema; a class of another family than the
/// `model_type` (a GPT-2 class over a Llama config) would read keys its config class lacks.
fn family_of(f: &Fields, class: &str, model_type: Option<&str>) -> Result<&'static Architecture> {
    let owner = families::lookup(class).map_err(|_| families::unsupported(class, model_type))?;
    let Some(t) = model_type else { return Ok(owner) };
    match families::detect(Some(t), class) {
        Some(family) if std::ptr::eq(family, owner) => Ok(owner),
        Some(_) => Err(f.err(
            "architectures",
            format!(
                "`{class}` is a {} model but model_type is `{t}`; they must name the same family",
                owner.model_types[0]
            ),
        )),
        None => Err(families::unsupported(class, model_type)),
    }
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
