//! The keys of the convolutional vision families (ResNet): channels, the image size a graph is
//! built for, and each backbone's stage widths and depths, with their config classes' defaults.

use super::*;
use crate::schema::ConvNetKind;

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

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backbone {
    ResNet(ResNetConfig),
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

/// A non-empty list of positive integers, `default` when absent.
fn sizes(f: &Fields, key: &str, default: &[usize]) -> Result<Vec<usize>> {
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
