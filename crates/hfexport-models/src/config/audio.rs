//! The keys of the speech encoders over raw audio (wav2vec2, HuBERT, WavLM, Data2VecAudio): the
//! convolutional feature encoder and the positional convolution, with the defaults their config
//! classes share (where the layers' norms sit, `do_stable_layer_norm`, is the schema's
//! `pre_norms`: `ModelConfig::post_residual_norms`). What the graph does not compute (the
//! adapter, HuBERT's batch-normed positional convolution) is refused by key.

use super::convnet::sizes;
use super::*;
use crate::schema::AudioKind;
use hfexport_core::ops::Activation;

/// A raw-audio encoder's front: `input_values` through `convs` into frames, a projection to
/// the hidden size, a grouped positional convolution added, then the library's layers.
#[derive(Debug, Clone, PartialEq)]
pub struct AudioConfig {
    /// Each feature-encoder convolution: `conv_dim`, `conv_kernel`, `conv_stride` entries.
    pub convs: Vec<AudioConv>,
    pub conv_bias: bool,
    pub norm: FeatureNorm,
    /// `feat_extract_activation`, after every feature convolution and the positional one.
    pub act: Activation,
    /// `num_conv_pos_embeddings` (kernel) and `num_conv_pos_embedding_groups`; Data2VecAudio's
    /// kernel is `conv_pos_kernel_size`.
    pub pos_kernel: usize,
    pub pos_groups: usize,
    /// Data2VecAudio's stack of `num_conv_pos_embeddings` positional convolutions (each with a
    /// weightless LayerNorm); `None`: one weight-normed convolution (wav2vec2).
    pub pos_layers: Option<usize>,
    /// A LayerNorm before the feature projection (HuBERT's `feat_proj_layer_norm`; always in
    /// wav2vec2, whose config has no such key).
    pub projection_norm: bool,
    /// The sequence classifier's projector width (`classifier_proj_size`).
    pub classifier_proj_size: usize,
    /// `use_weighted_layer_sum`: the classifier reads a learned mix of every layer's states.
    pub weighted_layer_sum: bool,
    /// WavLM's relative position bias: `num_buckets` (320) over distances up to
    /// `max_bucket_distance` (800), bucketed both ways as T5's encoder does.
    pub relative_bias: Option<RelativeAttention>,
    /// The checkpoint's feature extractor returns an `attention_mask` (`preprocessor_config.json`:
    /// `return_attention_mask`, as the layer-normed "lv60" and large checkpoints' do): the graph
    /// takes it, and padded samples are masked out of every layer as transformers does.
    pub attention_mask: bool,
}

/// One feature-encoder convolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AudioConv {
    pub channels: usize,
    pub kernel: usize,
    pub stride: usize,
}

/// `feat_extract_norm`: where the feature encoder normalises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureNorm {
    /// A GroupNorm with one group per channel after the first convolution only.
    Group,
    /// A LayerNorm over the channels after every convolution.
    Layer,
}

impl AudioConfig {
    /// Samples of the shortest input that gives one frame: the receptive field of the
    /// convolutions.
    pub fn receptive_field(&self) -> usize {
        self.convs.iter().rev().fold(1, |field, c| (field - 1) * c.stride + c.kernel)
    }
}

/// Upper bound on a feature convolution's channels, kernel and stride.
const MAX_CONV: usize = 1 << 16;

pub(super) fn parse_audio(f: &Fields, hidden: usize, kind: AudioKind) -> Result<AudioConfig> {
    for (key, what) in [
        ("add_adapter", "the adapter after the encoder"),
        ("conv_pos_batch_norm", "a batch-normed positional convolution"),
    ] {
        if f.bool(key)? == Some(true) {
            return Err(f.err(key, format!("is true: {what} is not supported")));
        }
    }
    if f.raw("adapter_attn_dim").is_some_and(|v| !v.is_null()) {
        return Err(f.err("adapter_attn_dim", "is set: the attention adapters of the layers are not supported"));
    }
    let dims = sizes(f, "conv_dim", &[512; 7])?;
    let kernels = sizes(f, "conv_kernel", &[10, 3, 3, 3, 3, 2, 2])?;
    let strides = sizes(f, "conv_stride", &[5, 2, 2, 2, 2, 2, 2])?;
    if kernels.len() != dims.len() || strides.len() != dims.len() {
        return Err(f.err(
            "conv_dim",
            format!(
                "has {} entries, conv_kernel {} and conv_stride {}: they must agree",
                dims.len(),
                kernels.len(),
                strides.len()
            ),
        ));
    }
    if let Some(v) = dims.iter().chain(&kernels).chain(&strides).find(|&&v| v > MAX_CONV) {
        return Err(f.err("conv_dim", format!("{v} is above {MAX_CONV}")));
    }
    let convs =
        (0..dims.len()).map(|i| AudioConv { channels: dims[i], kernel: kernels[i], stride: strides[i] }).collect();
    let norm = match (kind, f.string("feat_extract_norm")?.unwrap_or("group")) {
        (AudioKind::Data2Vec, _) => FeatureNorm::Layer,
        (_, "group") => FeatureNorm::Group,
        (_, "layer") => FeatureNorm::Layer,
        (_, other) => return Err(f.err("feat_extract_norm", format!("`{other}` is not one of: group, layer"))),
    };
    let act_name = f.string("feat_extract_activation")?.unwrap_or("gelu");
    let act = Activation::from_hf(act_name).ok_or_else(|| {
        f.err(
            "feat_extract_activation",
            format!("`{act_name}` is not supported; valid: {}", Activation::NAMES.join(", ")),
        )
    })?;
    let (pos_kernel, pos_layers) = match kind {
        AudioKind::Data2Vec => (
            f.size("conv_pos_kernel_size", Some(19), MAX_CONV)?,
            Some(f.size("num_conv_pos_embeddings", Some(5), MAX_LAYERS)?),
        ),
        _ => (f.size("num_conv_pos_embeddings", Some(128), MAX_CONV)?, None),
    };
    let pos_groups = f.size("num_conv_pos_embedding_groups", Some(16), MAX_CONV)?;
    if !hidden.is_multiple_of(pos_groups) {
        return Err(
            f.err("num_conv_pos_embedding_groups", format!("{pos_groups} does not divide the hidden size {hidden}"))
        );
    }
    Ok(AudioConfig {
        convs,
        conv_bias: f.bool("conv_bias")?.unwrap_or(false),
        norm,
        act,
        pos_kernel,
        pos_groups,
        pos_layers,
        projection_norm: f.bool("feat_proj_layer_norm")?.unwrap_or(true),
        classifier_proj_size: f.size("classifier_proj_size", Some(256), MAX_HIDDEN)?,
        weighted_layer_sum: f.bool("use_weighted_layer_sum")?.unwrap_or(false),
        relative_bias: match kind {
            AudioKind::Wav2Vec2 | AudioKind::Data2Vec => None,
            // bucketed both ways: each way's exact range is a quarter of the buckets
            AudioKind::WavLm => {
                Some(super::encoder::bucketed(f, [("num_buckets", 320), ("max_bucket_distance", 800)], 4)?)
            }
        },
        attention_mask: false,
    })
}

/// The feature extractor's `return_attention_mask` (false where the folder has no
/// `preprocessor_config.json` or it omits the key, as `Wav2Vec2FeatureExtractor`'s default).
pub(super) fn returns_attention_mask(dir: &Path) -> Result<bool> {
    let path = dir.join("preprocessor_config.json");
    if !path.is_file() {
        return Ok(false);
    }
    let text = read_small_text(&path, MAX_CONFIG_BYTES)?;
    let v: Value = serde_json::from_str(&text).map_err(|e| ModelError::config(&path, "<root>", e.to_string()))?;
    match v.get("return_attention_mask") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => {
            Err(ModelError::config(&path, "return_attention_mask", format!("must be true or false, got {other}")))
        }
    }
}
