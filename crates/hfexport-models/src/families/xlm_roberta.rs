//! `XLMRobertaModel` and its heads: RoBERTa's layout with `XLMRobertaConfig`'s defaults.

use super::roberta::{BERT_SCHEMA_ROBERTA_DEFAULTS, ROBERTA_LAYOUT};
use super::Architecture;

pub const FAMILY: Architecture = Architecture {
    classes: &[
        "XLMRobertaModel",
        "XLMRobertaForMaskedLM",
        "XLMRobertaForSequenceClassification",
        "XLMRobertaForTokenClassification",
        "XLMRobertaForQuestionAnswering",
    ],
    model_types: &["xlm-roberta"],
    config: BERT_SCHEMA_ROBERTA_DEFAULTS,
    layout: ROBERTA_LAYOUT,
};
