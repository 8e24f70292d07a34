//! `CamembertModel` and its heads: RoBERTa's layout and defaults (`CamembertConfig` differs
//! from `RobertaConfig` only in its default vocabulary, which a checkpoint's config states).

use super::roberta::{BERT_SCHEMA_ROBERTA_DEFAULTS, ROBERTA_LAYOUT};
use super::Architecture;

pub const FAMILY: Architecture = Architecture {
    classes: &[
        "CamembertModel",
        "CamembertForMaskedLM",
        "CamembertForSequenceClassification",
        "CamembertForTokenClassification",
        "CamembertForQuestionAnswering",
    ],
    model_types: &["camembert"],
    config: BERT_SCHEMA_ROBERTA_DEFAULTS,
    layout: ROBERTA_LAYOUT,
};
