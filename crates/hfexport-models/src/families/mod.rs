//! The family registry: one module per model family, one table that lists them.
//!
//! A family module (`llama.rs`, `gemma3.rs`, …) holds everything that makes the family what it
//! is, as data: the classes (`architectures[0]`) and `model_type`s it answers to, how its
//! `config.json` is read ([`ConfigSchema`]: key names, transformers' class defaults, how layer
//! kinds, biases, attention scale and multipliers are derived) and its checkpoint-name map and
//! block kinds ([`Layout`]). A family is written as the difference from the family it derives
//! from (Mistral from Llama, Gemma 3 from Gemma 2's norms), the way transformers'
//! `modular_<name>.py` files are: `..LLAMA_SCHEMA` keeps what is not said.
//!
//! Everything that lists families is generated from [`ARCHITECTURES`] and [`VISION_LANGUAGE`]:
//! `hfexport inspect --supported`, `docs/supported.md` (checked by a test) and the error for a
//! class or `model_type` this build does not export ([`unsupported`]). The config reader
//! (`config/`) and the block library (`blocks.rs`) interpret the values; a family whose blocks
//! exist is one new module and one line in the table, with no builder change.

use crate::error::{ModelError, Result};
use crate::layout::{Layout, VisionLanguage};
use crate::schema::ConfigSchema;

pub mod albert;
pub mod bart;
pub mod beit;
pub mod bert;
pub mod bloom;
pub mod camembert;
pub mod clip;
pub mod cohere;
pub mod convnext;
pub mod data2vec_audio;
pub mod deberta_v2;
pub mod deepseek;
pub mod deit;
pub mod dinov2;
pub mod distilbert;
pub mod electra;
pub mod ernie4_5;
pub mod falcon;
pub mod falcon_h1;
pub mod gemma;
pub mod gemma2;
pub mod gemma3;
pub mod gemma3n;
pub mod gemma4;
pub mod glm;
pub mod glm4_moe;
pub mod gpt2;
pub mod gpt_bigcode;
pub mod gpt_neox;
pub mod gpt_oss;
pub mod gptj;
pub mod granite;
pub mod granite_moe;
pub mod granite_moe_hybrid;
pub mod hubert;
pub mod lfm2;
pub mod llama;
pub mod llama4;
pub mod llava;
pub mod mamba;
pub mod mamba2;
pub mod mistral;
pub mod mistral4;
pub mod mixtral;
pub mod mobilenet_v2;
pub mod modernbert;
pub mod mpnet;
pub mod olmo2;
pub mod olmoe;
pub mod opt;
pub mod phi;
pub mod phi3;
pub mod qwen2;
pub mod qwen2_moe;
pub mod qwen2_vl;
pub mod qwen3;
pub mod qwen3_5;
pub mod qwen3_5_moe;
pub mod qwen3_moe;
pub mod qwen3_next;
pub mod resnet;
pub mod roberta;
pub mod siglip;
pub mod smollm3;
pub mod stablelm;
pub mod starcoder2;
pub mod swin;
pub mod t5;
pub mod vit;
pub mod wav2vec2;
pub mod wavlm;
pub mod whisper;
pub mod xlm_roberta;
pub mod xlm_roberta_xl;

/// One model family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Architecture {
    /// The Hugging Face classes (`architectures[0]`) built with this definition.
    pub classes: &'static [&'static str],
    /// The `model_type`s whose config class this schema reads (AutoConfig's key).
    pub model_types: &'static [&'static str],
    pub config: ConfigSchema,
    pub layout: Layout,
}

/// Every family read from a config of its own: decoders, encoders, encoder-decoders, and the
/// text models of multimodal classes (an entry without classes is only reached through
/// [`VISION_LANGUAGE`] or a `text_config`). A `static`, not a `const`: each entry has one
/// address, which `config::family_of` compares (every use of a `const` may be a copy of its
/// own, as unoptimised builds make them).
pub static ARCHITECTURES: &[Architecture] = &[
    llama::FAMILY,
    mistral::FAMILY,
    qwen2::FAMILY,
    qwen2_vl::TEXT,
    qwen3::FAMILY,
    phi3::FAMILY,
    gemma::FAMILY,
    gemma2::FAMILY,
    gemma3::CAUSAL_LM,
    gemma3::CONDITIONAL_GENERATION,
    gemma3n::CAUSAL_LM,
    gemma3n::CONDITIONAL_GENERATION,
    gemma4::CAUSAL_LM,
    gemma4::CONDITIONAL_GENERATION,
    qwen3_moe::FAMILY,
    mixtral::FAMILY,
    qwen2_moe::FAMILY,
    olmoe::FAMILY,
    granite_moe::GRANITE_MOE,
    granite_moe::GRANITE_MOE_SHARED,
    gpt_oss::FAMILY,
    deepseek::DEEPSEEK_V2,
    deepseek::DEEPSEEK_V3,
    granite::FAMILY,
    olmo2::FAMILY,
    smollm3::FAMILY,
    starcoder2::FAMILY,
    phi::FAMILY,
    gpt_neox::FAMILY,
    gptj::FAMILY,
    cohere::FAMILY,
    cohere::COHERE2,
    stablelm::FAMILY,
    glm::GLM,
    glm::GLM4,
    glm4_moe::FAMILY,
    ernie4_5::FAMILY,
    ernie4_5::MOE,
    mistral4::FAMILY,
    llama4::CAUSAL_LM,
    llama4::CONDITIONAL_GENERATION,
    falcon::FAMILY,
    bloom::FAMILY,
    opt::FAMILY,
    gpt2::FAMILY,
    gpt_bigcode::FAMILY,
    bert::FAMILY,
    roberta::FAMILY,
    xlm_roberta::FAMILY,
    camembert::FAMILY,
    xlm_roberta_xl::FAMILY,
    distilbert::FAMILY,
    electra::FAMILY,
    albert::FAMILY,
    mpnet::FAMILY,
    deberta_v2::FAMILY,
    vit::FAMILY,
    deit::FAMILY,
    dinov2::FAMILY,
    beit::FAMILY,
    beit::DATA2VEC_VISION,
    clip::CLIP,
    clip::CLIP_TEXT,
    clip::CLIP_VISION,
    siglip::FAMILY,
    siglip::SIGLIP_TEXT,
    siglip::SIGLIP_VISION,
    resnet::FAMILY,
    convnext::CONVNEXT,
    convnext::CONVNEXT_V2,
    mobilenet_v2::FAMILY,
    swin::FAMILY,
    swin::SWINV2,
    modernbert::FAMILY,
    whisper::FAMILY,
    wav2vec2::FAMILY,
    hubert::FAMILY,
    wavlm::FAMILY,
    data2vec_audio::FAMILY,
    t5::FAMILY,
    bart::BART,
    bart::MBART,
    bart::MARIAN,
    bart::PEGASUS,
    bart::M2M100,
    mamba::FAMILY,
    mamba2::FAMILY,
    granite_moe_hybrid::FAMILY,
    falcon_h1::FAMILY,
    qwen3_next::FAMILY,
    qwen3_5::FAMILY,
    qwen3_5::CONDITIONAL_GENERATION,
    qwen3_5_moe::FAMILY,
    qwen3_5_moe::CONDITIONAL_GENERATION,
    lfm2::FAMILY,
];

/// The vision-language classes: a vision tower in front of a text family named by
/// `text_config.model_type`, resolved at load time.
pub static VISION_LANGUAGE: &[VisionLanguage] = &[qwen2_vl::QWEN2_VL, llava::LLAVA];

/// One exported class as the registry lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SupportedClass {
    pub class: &'static str,
    pub model_type: &'static str,
}

/// Every class this build exports, in table order.
pub fn supported_classes() -> Vec<SupportedClass> {
    let text = ARCHITECTURES.iter().flat_map(|a| paired(a.classes, a.model_types));
    let vision = VISION_LANGUAGE.iter().flat_map(|v| paired(v.classes, v.model_types));
    text.chain(vision).collect()
}

/// Each class with its own `model_type` where an entry lists one per class (Mistral and
/// Ministral), else the entry's first.
fn paired(classes: &'static [&'static str], types: &'static [&'static str]) -> Vec<SupportedClass> {
    let type_of = |i: usize| if classes.len() == types.len() { types[i] } else { types[0] };
    classes.iter().enumerate().map(|(i, &class)| SupportedClass { class, model_type: type_of(i) }).collect()
}

/// The class names this build exports.
pub fn supported() -> Vec<String> {
    supported_classes().into_iter().map(|c| c.class.to_string()).collect()
}

/// The definition of class `name`.
pub fn lookup(name: &str) -> Result<&'static Architecture> {
    ARCHITECTURES.iter().find(|a| a.classes.contains(&name)).ok_or_else(|| unsupported(name, None))
}

/// The config schema AutoConfig would pick: by `model_type`, else by the class name's stem
/// (`LlamaForCausalLM` -> `llama`) or the class itself; `None` for an unknown family.
pub fn detect(model_type: Option<&str>, class: &str) -> Option<&'static Architecture> {
    let by_type = |t: &str| ARCHITECTURES.iter().find(|a| a.model_types.contains(&t));
    match model_type {
        Some(t) => by_type(t),
        None => {
            let stem = class.split("For").next().unwrap_or_default().to_ascii_lowercase();
            by_type(&stem).or_else(|| ARCHITECTURES.iter().find(|a| a.classes.contains(&class)))
        }
    }
}

/// The vision-language entry of a `model_type` (else of a class), if any.
pub fn vision_language(model_type: Option<&str>, class: &str) -> Option<&'static VisionLanguage> {
    VISION_LANGUAGE.iter().find(|v| match model_type {
        Some(t) => v.model_types.contains(&t),
        None => v.classes.contains(&class),
    })
}

/// How many of the nearest supported classes an unsupported-class error lists.
const NEAREST: usize = 3;

/// The error for a class (and `model_type`) no entry of the registry builds: it names both,
/// says so, and lists the nearest supported classes by name (the classes of the `model_type`'s
/// family first, when only the head class is unknown: `LlamaForTokenClassification`).
pub fn unsupported(class: &str, model_type: Option<&str>) -> ModelError {
    let same_type = model_type.and_then(|t| detect(Some(t), class)).map_or(&[][..], |a| a.classes);
    let (stem, suffix) = split_class(class);
    let mut others: Vec<(bool, f64, &'static str)> = supported_classes()
        .into_iter()
        .filter(|c| !same_type.contains(&c.class))
        .map(|c| {
            let (s, x) = split_class(c.class);
            (x == suffix, strsim::jaro_winkler(&stem, &s), c.class)
        })
        .collect();
    // the closest family name first, then the same head
    others.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)).then(a.2.cmp(b.2)));
    others.dedup_by_key(|o| split_class(o.2).0);
    let nearest = same_type.iter().copied().chain(others.into_iter().map(|(_, _, c)| c)).take(NEAREST);
    ModelError::UnsupportedArchitecture {
        class: class.to_string(),
        model_type: model_type.map(str::to_string),
        nearest: nearest.map(str::to_string).collect(),
    }
}

/// A class name's family stem, lowercased, and its head (`GPT2LMHeadModel` -> `gpt2`,
/// `LMHeadModel`; `BertModel` -> `bert`, `Model`).
fn split_class(class: &str) -> (String, &str) {
    let at = ["For", "LMHeadModel", "Model"].iter().filter_map(|h| class.find(h)).min().unwrap_or(class.len());
    (class[..at].to_lowercase(), &class[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_and_model_type_is_claimed_once() {
        let mut classes: Vec<_> = ARCHITECTURES.iter().flat_map(|a| a.classes.iter()).collect();
        let mut types: Vec<_> = ARCHITECTURES.iter().flat_map(|a| a.model_types.iter()).collect();
        let (nc, nt) = (classes.len(), types.len());
        classes.sort();
        classes.dedup();
        types.sort();
        types.dedup();
        assert_eq!((classes.len(), types.len()), (nc, nt));
    }

    #[test]
    fn detection_follows_model_type_then_class() {
        assert_eq!(detect(Some("ministral"), "X").unwrap().classes[0], "MistralForCausalLM");
        assert_eq!(detect(None, "Qwen3ForCausalLM").unwrap().classes[0], "Qwen3ForCausalLM");
        assert_eq!(detect(None, "GPT2LMHeadModel").unwrap().classes[0], "GPT2LMHeadModel");
        assert!(detect(Some("foo"), "LlamaForCausalLM").is_none());
    }

    #[test]
    fn unsupported_names_class_type_and_nearest() {
        let e = unsupported("MptForCausalLM", Some("mpt")).to_string();
        assert!(e.contains("`MptForCausalLM` (model_type `mpt`) is not supported"), "{e}");
        assert!(e.contains("nearest supported: "), "{e}");
        let e = unsupported("Qwen3VLForCausalLM", None).to_string();
        assert!(e.contains("`Qwen3VLForCausalLM` is not supported"), "{e}");
        assert!(e.contains("nearest supported: "), "{e}");
        // an unknown head of a known family lists the family's own classes first
        let e = unsupported("LlamaForTokenClassification", Some("llama")).to_string();
        assert!(e.contains("nearest supported: LlamaForCausalLM, "), "{e}");
    }
}
