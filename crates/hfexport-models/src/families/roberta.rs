//! `RobertaModel` and its heads: BERT's layers, positions after the padding id, RoBERTa's LM and
//! classification heads.

use super::bert::{BERT_ENCODER, BERT_LAYOUT, BERT_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

/// `RobertaConfig` / `XLMRobertaConfig`: BERT's, with the padding id 1 and BOS/EOS 0/2.
pub const ROBERTA_DEFAULTS: Defaults =
    Defaults { pad_token_id: Some(1), bos_token_id: Some(0), eos_token_id: Some(2), ..BERT_SCHEMA.defaults };

pub const BERT_SCHEMA_ROBERTA_DEFAULTS: ConfigSchema = ConfigSchema { defaults: ROBERTA_DEFAULTS, ..BERT_SCHEMA };

pub const ROBERTA_LAYOUT: Layout = Layout {
    roots: &["roberta.", ""],
    encoder: Some(EncoderLayout {
        positions: EncoderPositions::AfterPadding,
        mlm: MlmHead {
            dense: "lm_head.dense",
            act: HeadActivation::Gelu,
            norm: "lm_head.layer_norm",
            decoder: "lm_head.decoder",
            bias: "lm_head.bias",
        },
        classifier: ClassifierHead::Dense { dense: "classifier.dense", act: HeadAct::Tanh, out: "classifier.out_proj" },
        ..BERT_ENCODER
    }),
    ..BERT_LAYOUT
};

pub const ROBERTA_ENCODER: EncoderLayout = match ROBERTA_LAYOUT.encoder {
    Some(e) => e,
    None => panic!("ROBERTA_LAYOUT has an encoder"),
};

pub const FAMILY: Architecture = Architecture {
    classes: &[
        "RobertaModel",
        "RobertaForMaskedLM",
        "RobertaForSequenceClassification",
        "RobertaForTokenClassification",
        "RobertaForQuestionAnswering",
    ],
    model_types: &["roberta"],
    config: ConfigSchema { defaults: Defaults { vocab_size: Some(50265), ..ROBERTA_DEFAULTS }, ..BERT_SCHEMA },
    layout: ROBERTA_LAYOUT,
};
