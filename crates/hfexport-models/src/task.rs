//! The tasks a graph is built for, how a checkpoint class picks one, which families can be built
//! for which, and the table of supported classes with their tasks that `hfexport inspect
//! --supported` prints and `docs/supported.md` holds.

use crate::config::ModelConfig;
use crate::families::{self, Architecture, SupportedClass};
use crate::layout::{EncoderInput, StackInput};

/// The task a graph is built for: a decoder's `causal-lm`, or an encoder's (see `encoder.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    CausalLm,
    /// `last_hidden_state`, and `pooler_output` where the checkpoint has a pooler.
    FeatureExtraction,
    /// `last_hidden_state` `[batch, sequence, hidden]` and `sentence_embedding` `[batch, dim]`:
    /// a sentence-transformers checkpoint's pooling (and normalisation) over the encoder, as
    /// `SentenceTransformer.encode` computes it (`crate::sentence`).
    SentenceEmbedding,
    /// `logits` `[batch, sequence, vocab]` of the masked-LM head.
    FillMask,
    /// `logits` `[batch, num_labels]`.
    SequenceClassification,
    /// `logits` `[batch, sequence, num_labels]`.
    TokenClassification,
    /// `start_logits`, `end_logits` `[batch, sequence]`.
    QuestionAnswering,
    /// `logits` `[batch, num_labels]` of an image encoder.
    ImageClassification,
    /// Text from speech: an encoder over log-mel frames and a decoder generating tokens over
    /// its states (Whisper), exported for generation only; or a raw-audio encoder's per-frame
    /// CTC `logits` `[batch, frames, vocab]` (wav2vec2), one forward graph.
    SpeechRecognition,
    /// Text from text: an encoder over tokens and a decoder generating tokens over its states
    /// (T5); exported for generation only.
    Text2TextGeneration,
    /// Text from images and text: a vision tower (and projector) whose image embeddings replace
    /// the prompt's image placeholders in a causal LM (LLaVA, Qwen2-VL); exported for
    /// generation only.
    ImageTextToText,
    /// Images scored against texts by an image-text dual encoder (CLIP): `logits_per_image`
    /// `[images, texts]`, `logits_per_text` and both normalised embeddings (`crate::dual`).
    ZeroShotImageClassification,
}

impl Task {
    pub const ALL: [Task; 12] = [
        Task::CausalLm,
        Task::FeatureExtraction,
        Task::SentenceEmbedding,
        Task::FillMask,
        Task::SequenceClassification,
        Task::TokenClassification,
        Task::QuestionAnswering,
        Task::ImageClassification,
        Task::SpeechRecognition,
        Task::Text2TextGeneration,
        Task::ImageTextToText,
        Task::ZeroShotImageClassification,
    ];

    /// The name recorded in `export.json` (and `--task`'s value).
    pub fn name(self) -> &'static str {
        match self {
            Task::CausalLm => "causal-lm",
            Task::FeatureExtraction => "feature-extraction",
            Task::SentenceEmbedding => "sentence-embedding",
            Task::FillMask => "fill-mask",
            Task::SequenceClassification => "sequence-classification",
            Task::TokenClassification => "token-classification",
            Task::QuestionAnswering => "question-answering",
            Task::ImageClassification => "image-classification",
            Task::SpeechRecognition => "automatic-speech-recognition",
            Task::Text2TextGeneration => "text2text-generation",
            Task::ImageTextToText => "image-text-to-text",
            Task::ZeroShotImageClassification => "zero-shot-image-classification",
        }
    }

    /// The other names `--task` takes for this task: those of transformers' pipelines.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Task::CausalLm => &["text-generation"],
            Task::SequenceClassification => &["text-classification"],
            Task::TokenClassification => &["ner"],
            Task::SpeechRecognition => &["speech-recognition", "asr"],
            _ => &[],
        }
    }

    /// A task by its name, or one of its [`Task::aliases`].
    pub fn parse(s: &str) -> Result<Task, String> {
        Task::ALL.into_iter().find(|t| t.name() == s || t.aliases().contains(&s)).ok_or_else(|| {
            let names: Vec<&str> = Task::ALL.iter().map(|t| t.name()).collect();
            format!("task `{s}` is not supported; valid: {}", names.join(", "))
        })
    }

    /// The task of a checkpoint class (`architectures[0]`): its head's, or feature extraction
    /// for a bare encoder (`BertModel`).
    pub fn of_class(class: &str) -> Task {
        if families::VISION_LANGUAGE.iter().any(|v| v.classes.contains(&class)) {
            return Task::ImageTextToText;
        }
        let family = families::lookup(class).ok();
        if family.is_some_and(|f| f.layout.dual.is_some()) {
            return Task::ZeroShotImageClassification;
        }
        // an encoder-decoder's task is its encoder's input: speech (Whisper) or text (T5, BART)
        let stack = family.and_then(|f| f.layout.encoder_stack);
        match stack.map(|s| s.input) {
            Some(StackInput::Speech { .. }) => return Task::SpeechRecognition,
            Some(StackInput::Tokens) => return Task::Text2TextGeneration,
            None => {}
        }
        let heads = [
            ("ForCausalLM", Task::CausalLm),
            ("ForCTC", Task::SpeechRecognition),
            ("LMHeadModel", Task::CausalLm),
            ("ForConditionalGeneration", Task::CausalLm),
            ("ForMaskedLM", Task::FillMask),
            ("ForSequenceClassification", Task::SequenceClassification),
            ("ForTokenClassification", Task::TokenClassification),
            ("ForQuestionAnswering", Task::QuestionAnswering),
            ("ForImageClassification", Task::ImageClassification),
            ("ForImageClassificationWithTeacher", Task::ImageClassification),
        ];
        heads.iter().find(|(suffix, _)| class.ends_with(suffix)).map_or(Task::FeatureExtraction, |(_, t)| *t)
    }

    /// The task a checkpoint is exported for by default: its class's ([`Task::of_class`]),
    /// except that a bare encoder in a sentence-transformers folder (`modules.json`, read into
    /// [`ModelConfig::sentence`]) gives its sentence embedding, as optimum's exporter reads such
    /// a folder: what `SentenceTransformer.encode` computes, not the token states alone.
    pub fn of_model(config: &ModelConfig) -> Task {
        match Task::of_class(&config.architecture) {
            Task::FeatureExtraction if config.sentence.is_some() => Task::SentenceEmbedding,
            task => task,
        }
    }

    /// Whether a family can be built for this task at all (the checkpoint must still hold the
    /// head's weights).
    pub fn fits(self, arch: &Architecture) -> bool {
        if arch.layout.dual.is_some() {
            return matches!(self, Task::ZeroShotImageClassification | Task::FeatureExtraction);
        }
        let stack = arch.layout.encoder_stack.map(|s| s.input);
        match (self, arch.layout.encoder.map(|e| e.input)) {
            (Task::CausalLm, None) => stack.is_none(),
            (Task::SpeechRecognition, None) => matches!(stack, Some(StackInput::Speech { .. })),
            (Task::Text2TextGeneration, None) => stack == Some(StackInput::Tokens),
            (Task::ImageTextToText, None) => arch.layout.vision.is_some(),
            (Task::ZeroShotImageClassification, _) => false,
            (Task::FeatureExtraction, Some(_)) => true,
            (Task::SentenceEmbedding, Some(EncoderInput::Tokens)) => true,
            (Task::ImageClassification, Some(EncoderInput::Patches { .. } | EncoderInput::ConvNet { .. })) => true,
            (Task::SpeechRecognition | Task::SequenceClassification, Some(EncoderInput::Audio(_))) => true,
            (
                Task::FillMask | Task::SequenceClassification | Task::TokenClassification | Task::QuestionAnswering,
                Some(EncoderInput::Tokens),
            ) => true,
            _ => false,
        }
    }

    /// Whether the task is exported for generation (components, caches) rather than as one
    /// forward graph, for a family that fits it (a raw-audio encoder's speech recognition is
    /// one graph).
    pub fn generates(self, arch: &Architecture) -> bool {
        match self {
            Task::CausalLm | Task::Text2TextGeneration | Task::ImageTextToText => true,
            Task::SpeechRecognition => arch.layout.encoder.is_none(),
            _ => false,
        }
    }
}

/// Every class this build exports with the task it is exported for by default, in registry
/// order.
pub fn supported_tasks() -> Vec<(SupportedClass, Task)> {
    families::supported_classes().into_iter().map(|c| (c.clone(), Task::of_class(c.class))).collect()
}

/// The Markdown table of [`supported_tasks`]: `docs/supported.md` is this text (a test checks),
/// printed by `hfexport inspect --supported --markdown`.
pub fn supported_markdown() -> String {
    let mut out = String::from(
        "<!-- generated by `hfexport inspect --supported --markdown` from the family registry \
         (crates/hfexport-models/src/families/mod.rs); do not edit -->\n\n# Supported classes\n\n\
         | class | model_type | default task |\n|---|---|---|\n",
    );
    for (c, task) in supported_tasks() {
        out.push_str(&format!("| `{}` | `{}` | {} |\n", c.class, c.model_type, task.name()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_supported_md_is_the_registry() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/supported.md");
        if std::env::var_os("HFEXPORT_UPDATE_DOCS").is_some() {
            std::fs::write(path, supported_markdown()).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == supported_markdown(),
            "{path} is not what the family registry says: regenerate it with \
             `cargo run -p hfexport-cli -- inspect --supported --markdown > docs/supported.md` (or run this \
             test with HFEXPORT_UPDATE_DOCS=1)"
        );
    }

    #[test]
    fn every_family_class_fits_its_default_task() {
        for a in families::ARCHITECTURES {
            for class in a.classes {
                let task = Task::of_class(class);
                assert!(task.fits(a), "{class} cannot be built for its default task {}", task.name());
            }
        }
    }
}
