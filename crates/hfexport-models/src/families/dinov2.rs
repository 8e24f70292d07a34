//! `Dinov2Model` / `Dinov2ForImageClassification`: ViT's patches and pre-LN layers with
//! per-channel layer scales on both sub-blocks (`layer_scale1`, `layer_scale2`), the MLP width
//! from `mlp_ratio`, the class token as `pooler_output`, and a classifier over the class token
//! beside the patches' mean; the giant checkpoints' SwiGLU MLP (`use_swiglu_ffn`: `weights_in`
//! split into gate and up, SiLU, `weights_out`).

use super::vit::{VIT_ENCODER, VIT_LAYOUT, VIT_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["Dinov2Model", "Dinov2ForImageClassification"],
    model_types: &["dinov2"],
    config: ConfigSchema {
        keys: Keys { intermediate_size: "", mlp_ratio: "mlp_ratio", ..VIT_SCHEMA.keys },
        defaults: Defaults { intermediate_times_hidden: Some(4), norm_eps: 1e-6, ..VIT_SCHEMA.defaults },
        encoder: match VIT_SCHEMA.encoder {
            Some(e) => Some(EncoderSchema {
                image: Some(ImageDefaults { image_size: 224, patch_size: 14, num_channels: 3 }),
                ..e
            }),
            None => None,
        },
        swiglu: Some("use_swiglu_ffn"),
        ..VIT_SCHEMA
    },
    layout: Layout {
        roots: &["dinov2.", ""],
        norms: LayerNorms { pre_attention: Some("norm1"), pre_mlp: Some("norm2"), ..NO_NORMS },
        mlp: MlpLayout {
            prefix: "mlp",
            kind: MlpKind::SwiGluIf { fused: "weights_in", down: "weights_out", plain: "fc1" },
            down: "fc2",
        },
        layer_scales: Some(["layer_scale1.lambda1", "layer_scale2.lambda1"]),
        encoder: Some(EncoderLayout {
            pooler: Some(Pooler::FirstToken),
            classifier: ClassifierHead::ClassAndPatchMean { out: "classifier" },
            ..VIT_ENCODER
        }),
        ..VIT_LAYOUT
    },
};
