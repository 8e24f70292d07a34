//! The keys of the vision backbones built at one image size (ResNet, ConvNeXt, MobileNetV2, and
//! Swin's windowed transformer): channels, the image size a graph is built for, and each
//! backbone's stage widths and depths, with their config classes' defaults.

use super::*;
use crate::schema::ConvNetKind;
use hfexport_core::ops::Activation;

/// A convolutional backbone's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvNetConfig {
    /// `num_channels` of `pixel_values`.
    pub channels: usize,
    /// `[height, width]` of the images the graph takes (`image_size`; the class's own default, or
    /// 224 where the config class has no such key: what the checkpoints' image processors crop
    /// to).
    pub image: [usize; 2],
    pub backbone: Backbone,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Backbone {
    ResNet(ResNetConfig),
    ConvNext(ConvNextConfig),
    MobileNetV2(MobileNetV2Config),
    Swin(SwinConfig),
}

/// `ResNetConfig`: a 7x7 stem of `embedding_size` channels and a max pool, then one stage per
/// entry of `hidden_sizes` / `depths` of basic (two 3x3) or bottleneck (1x1, 3x3, 1x1 at a
/// quarter of the width) residual layers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResNetConfig {
    pub embedding_size: usize,
    pub hidden_sizes: Vec<usize>,
    pub depths: Vec<usize>,
    pub bottleneck: bool,
    pub downsample_in_first_stage: bool,
    pub downsample_in_bottleneck: bool,
}

/// `ConvNextConfig` / `ConvNextV2Config`: a `patch_size` stem (convolution and a norm over
/// the channels), then `num_stages` stages of `depths` blocks at `hidden_sizes` channels, each
/// stage after the first opening with a norm and a 2x2 stride-2 convolution; a block is a 7x7
/// depthwise convolution, a norm, a 4x MLP over the channels (V2: with global response
/// normalisation), scaled by `layer_scale_init_value`'s parameter when that is positive (V1).
#[derive(Debug, Clone, PartialEq)]
pub struct ConvNextConfig {
    pub patch: [usize; 2],
    pub hidden_sizes: Vec<usize>,
    pub depths: Vec<usize>,
    /// V1's per-channel layer scale (`layer_scale_init_value > 0`).
    pub layer_scale: bool,
    /// V2's global response normalisation in each block's MLP.
    pub grn: bool,
}

/// `MobileNetV2Config`: a stem and 16 inverted residual layers over channel counts scaled by
/// `depth_multiplier` (rounded as `make_divisible` does by `depth_divisible_by`, at least
/// `min_depth`), expanded `expand_ratio` times inside each layer, then a 1x1 convolution;
/// strides beyond `output_stride` become dilations; TensorFlow's "SAME" padding where
/// `tf_padding`; batch norms of epsilon `layer_norm_eps`.
#[derive(Debug, Clone, PartialEq)]
pub struct MobileNetV2Config {
    pub depth_multiplier: f64,
    pub divisible_by: usize,
    pub min_depth: usize,
    pub expand_ratio: f64,
    pub output_stride: usize,
    pub first_layer_is_expansion: bool,
    pub finegrained_output: bool,
    pub tf_padding: bool,
    pub norm_eps: f64,
    /// `hidden_act`: ReLU6 (`None`, the class default) or an activation of the IR.
    pub act: Option<Activation>,
}

/// `SwinConfig`: a `patch_size` convolution to `embed_dim` channels and a norm (plus a learned
/// position per patch where `use_absolute_embeddings`), then one stage per entry of `depths`:
/// pre-LN layers attending within `window_size` windows (every second layer's windows shifted by
/// half a window), `num_heads` heads at stage `s`'s width `embed_dim * 2^s`, an MLP of
/// `mlp_ratio` times that width; each stage but the last ends in a patch merging (2x2 patches
/// to one, twice as wide).
#[derive(Debug, Clone, PartialEq)]
pub struct SwinConfig {
    pub patch: [usize; 2],
    pub embed_dim: usize,
    pub depths: Vec<usize>,
    pub heads: Vec<usize>,
    pub window: usize,
    pub mlp_ratio: f64,
    pub qkv_bias: bool,
    pub absolute_positions: bool,
    pub version: SwinVersion,
}

/// Swin, or Swinv2: post-norm layers, cosine attention with a learned per-head logit scale, a
/// relative position bias computed by a small MLP from log-spaced offsets (normalised by the
/// window each stage was pretrained at, its `pretrained_window_sizes` entry, or its own where 0),
/// windows and shifts fixed from the configured image size, and the patch merging's norm after
/// its reduction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwinVersion {
    V1,
    V2 { pretrained_windows: Vec<usize> },
}

impl SwinConfig {
    /// Stage `s`'s width.
    pub fn width(&self, s: usize) -> usize {
        self.embed_dim << s
    }

    /// The hidden width of stage `s`'s MLPs: `int(mlp_ratio * width)`, as transformers sizes it.
    pub fn mlp_width(&self, s: usize) -> usize {
        (self.mlp_ratio * self.width(s) as f64) as usize
    }
}

/// The image side a convolutional family is built for when its config names none.
const DEFAULT_IMAGE_SIDE: usize = 224;

/// Upper bound on a convolutional stage's channels and on its layer count.
const MAX_CHANNELS: usize = 1 << 16;

pub(super) fn parse_convnet(f: &Fields, schema: &ConfigSchema) -> Result<Option<ConvNetConfig>> {
    let Some(kind) = schema.convnet else { return Ok(None) };
    let channels = f.size("num_channels", Some(3), 64)?;
    let image = pair(f, "image_size", DEFAULT_IMAGE_SIDE)?;
    let backbone = match kind {
        ConvNetKind::ResNet => Backbone::ResNet(resnet(f)?),
        ConvNetKind::ConvNext { v2 } => Backbone::ConvNext(convnext(f, v2)?),
        ConvNetKind::MobileNetV2 => Backbone::MobileNetV2(mobilenet_v2(f)?),
        ConvNetKind::Swin { v2 } => Backbone::Swin(swin(f, v2)?),
    };
    Ok(Some(ConvNetConfig { channels, image, backbone }))
}

fn resnet(f: &Fields) -> Result<ResNetConfig> {
    let bottleneck = match f.string("layer_type")?.unwrap_or("bottleneck") {
        "bottleneck" => true,
        "basic" => false,
        other => return Err(f.err("layer_type", format!("`{other}` is not supported; valid: basic, bottleneck"))),
    };
    let hidden_sizes = sizes(f, "hidden_sizes", &[256, 512, 1024, 2048])?;
    let depths = sizes(f, "depths", &[3, 4, 6, 3])?;
    if hidden_sizes.len() != depths.len() {
        return Err(f.err("depths", format!("has {} stages, hidden_sizes {}", depths.len(), hidden_sizes.len())));
    }
    if bottleneck {
        if let Some(w) = hidden_sizes.iter().find(|&&w| w < 4) {
            return Err(f.err("hidden_sizes", format!("{w} leaves a bottleneck layer (a quarter of it) no channels")));
        }
    }
    Ok(ResNetConfig {
        embedding_size: f.size("embedding_size", Some(64), MAX_CHANNELS)?,
        hidden_sizes,
        depths,
        bottleneck,
        downsample_in_first_stage: f.bool("downsample_in_first_stage")?.unwrap_or(false),
        downsample_in_bottleneck: f.bool("downsample_in_bottleneck")?.unwrap_or(false),
    })
}

fn convnext(f: &Fields, v2: bool) -> Result<ConvNextConfig> {
    let hidden_sizes = sizes(f, "hidden_sizes", &[96, 192, 384, 768])?;
    let depths = sizes(f, "depths", &[3, 3, 9, 3])?;
    let stages = f.size("num_stages", Some(4), 64)?;
    // the final norm is as wide as the last width listed, the last stage as its own entry
    if hidden_sizes.len() != stages || depths.len() != stages {
        return Err(f.err(
            "num_stages",
            format!("is {stages}, but hidden_sizes has {} entries and depths {}", hidden_sizes.len(), depths.len()),
        ));
    }
    let layer_scale = !v2 && f.number("layer_scale_init_value")?.unwrap_or(1e-6) > 0.0;
    Ok(ConvNextConfig { patch: pair(f, "patch_size", 4)?, hidden_sizes, depths, layer_scale, grn: v2 })
}

fn mobilenet_v2(f: &Fields) -> Result<MobileNetV2Config> {
    let positive = |key: &str, default: f64| -> Result<f64> {
        match f.number(key)?.unwrap_or(default) {
            x if x > 0.0 && x <= 64.0 => Ok(x),
            x => Err(f.err(key, format!("must be a number in (0, 64], got {x}"))),
        }
    };
    let output_stride = f.size("output_stride", Some(32), 1 << 10)?;
    let act = match f.string("hidden_act")?.unwrap_or("relu6") {
        "relu6" => None,
        name => Some(Activation::from_hf(name).ok_or_else(|| {
            f.err("hidden_act", format!("`{name}` is not supported; valid: relu6, {}", Activation::NAMES.join(", ")))
        })?),
    };
    Ok(MobileNetV2Config {
        depth_multiplier: positive("depth_multiplier", 1.0)?,
        divisible_by: f.size("depth_divisible_by", Some(8), MAX_CHANNELS)?,
        min_depth: f.size("min_depth", Some(8), MAX_CHANNELS)?,
        expand_ratio: positive("expand_ratio", 6.0)?,
        output_stride,
        first_layer_is_expansion: f.bool("first_layer_is_expansion")?.unwrap_or(true),
        finegrained_output: f.bool("finegrained_output")?.unwrap_or(true),
        tf_padding: f.bool("tf_padding")?.unwrap_or(true),
        norm_eps: f.number("layer_norm_eps")?.unwrap_or(1e-3),
        act,
    })
}

fn swin(f: &Fields, v2: bool) -> Result<SwinConfig> {
    let embed_dim = f.size("embed_dim", Some(96), MAX_CHANNELS)?;
    let depths = sizes(f, "depths", &[2, 2, 6, 2])?;
    let heads = sizes(f, "num_heads", &[3, 6, 12, 24])?;
    if heads.len() != depths.len() {
        return Err(f.err("num_heads", format!("has {} stages, depths {}", heads.len(), depths.len())));
    }
    if depths.len() > 16 || embed_dim << (depths.len() - 1) > MAX_CHANNELS {
        return Err(f.err("depths", format!("{} stages from embed_dim {embed_dim} are too wide", depths.len())));
    }
    for (s, &h) in heads.iter().enumerate() {
        if (embed_dim << s) % h != 0 {
            let width = embed_dim << s;
            return Err(f.err("num_heads", format!("{h} heads do not divide stage {s}'s width {width}")));
        }
    }
    let mlp_ratio = match f.number("mlp_ratio")?.unwrap_or(4.0) {
        r if r > 0.0 && r <= 64.0 && (r * embed_dim as f64) >= 1.0 => r,
        r => return Err(f.err("mlp_ratio", format!("must be a number in (0, 64] leaving the MLP a channel, got {r}"))),
    };
    let absolute_positions = f.bool("use_absolute_embeddings")?.unwrap_or(false);
    if v2 && absolute_positions {
        let why =
            "is true: unsupported for Swinv2, whose table has a row more than the patches (transformers fails on it)";
        return Err(f.err("use_absolute_embeddings", why));
    }
    Ok(SwinConfig {
        patch: pair(f, "patch_size", 4)?,
        embed_dim,
        heads,
        window: f.size("window_size", Some(7), 1 << 10)?,
        mlp_ratio,
        qkv_bias: f.bool("qkv_bias")?.unwrap_or(true),
        absolute_positions,
        version: match v2 {
            true => SwinVersion::V2 { pretrained_windows: pretrained_windows(f, depths.len())? },
            false => SwinVersion::V1,
        },
        depths,
    })
}

/// Swinv2's `pretrained_window_sizes`: one window side (0: none) per stage, at least as many as
/// `stages` (transformers reads one per stage; the class default has four zeros).
fn pretrained_windows(f: &Fields, stages: usize) -> Result<Vec<usize>> {
    let key = "pretrained_window_sizes";
    let list = match f.raw(key) {
        None | Some(Value::Null) => vec![0; 4],
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| match v.as_u64() {
                // a side of 1 would normalise the offsets by 0
                Some(n) if n != 1 && n <= 1 << 10 => Ok(n as usize),
                _ => Err(f.err(key, format!("must hold window sides of 2 or more (0 for none), got {}", describe(v)))),
            })
            .collect::<Result<_>>()?,
        Some(v) => Err(f.err(key, format!("must be a list of window sides, got {}", describe(v))))?,
    };
    match list.len() >= stages {
        true => Ok(list),
        false => Err(f.err(key, format!("has {} entries for {stages} stages", list.len()))),
    }
}

/// A non-empty list of positive integers, `default` when absent.
pub(super) fn sizes(f: &Fields, key: &str, default: &[usize]) -> Result<Vec<usize>> {
    match f.raw(key) {
        None | Some(Value::Null) => Ok(default.to_vec()),
        Some(Value::Array(list)) if !list.is_empty() => list
            .iter()
            .map(|v| match v.as_u64() {
                Some(n) if n > 0 && n <= MAX_CHANNELS as u64 => Ok(n as usize),
                _ => Err(f.err(key, format!("must hold positive integers up to {MAX_CHANNELS}, got {}", describe(v)))),
            })
            .collect(),
        Some(v) => Err(f.err(key, format!("must be a non-empty list of positive integers, got {}", describe(v)))),
    }
}
