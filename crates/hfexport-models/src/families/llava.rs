//! `LlavaForConditionalGeneration`: a CLIP tower, a two-linear projector, and any registered text family
//! from `text_config`.

use super::clip::CLIP_VISION_LAYOUT;
use crate::layout::*;

/// LLaVA's image side: CLIP, then `multi_modal_projector` (`linear_1`, activation, `linear_2`).
pub const LLAVA_VISION: VisionLayout = VisionLayout {
    tower: &CLIP_VISION_LAYOUT,
    kind: TowerKind::Clip,
    projector_roots: &["model.multi_modal_projector.", "multi_modal_projector."],
    projector: ["linear_1", "linear_2"],
};

/// The hub's names (`language_model.model.`, `language_model.lm_head`, `vision_tower.` or
/// `vision_tower.vision_model.`) and the module names (`model.language_model.`, `lm_head`,
/// `model.vision_tower.vision_model.`) are both read.
pub const LLAVA: VisionLanguage = VisionLanguage {
    classes: &["LlavaForConditionalGeneration"],
    model_types: &["llava"],
    default_text_type: "llama",
    flat_text: false,
    vision_types: &["clip_vision_model"],
    text_roots: &["language_model.model.", "model.language_model."],
    heads: &["lm_head", "language_model.lm_head"],
    vision: &LLAVA_VISION,
};
