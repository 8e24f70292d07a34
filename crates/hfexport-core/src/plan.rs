//! The typed export plan: what each component of an export is, so that writers, generators,
//! `--verify` and `inspect` read it instead of guessing from component names.
//!
//! A builder returns [`Planned`] components (a [`ComponentSpec`] and its graph); `export.json`
//! records the spec of every component (`role`, `entry`, `exit`, `positions`, `cache`) next to
//! its I/O. The contracts behind each variant are in `docs/io-contracts.md`.

use crate::graph::Graph;
use serde::{Deserialize, Serialize};

/// What a component does in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The whole model in one call, no cache (`model`).
    Forward,
    /// The prompt of a generation loop (fills or returns the cache).
    Prefill,
    /// The steps of a generation loop (reads and updates the cache); may serve the prompt too.
    Decode,
    /// A text or speech encoder whose states a decoder attends to.
    Encoder,
    /// A vision tower: pixel values in, image features out.
    ImageEncoder,
    /// Maps encoder features into the language model's hidden size.
    Projector,
    /// Token ids to input embeddings.
    Embedding,
    /// The decoder stack of a multimodal model: embeddings in, hidden states out.
    LanguageModel,
    /// Hidden states to logits.
    LmHead,
    /// One tower of an image-text dual encoder (CLIP's `text_model`, `vision_model`): its side's
    /// inputs to its embeddings, no cache.
    Tower,
}

/// What a component's main input is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Entry {
    /// `input_ids` int64.
    TokenIds,
    /// `inputs_embeds` float.
    Embeddings,
    /// `pixel_values` float, `[batch, channels, height, width]`.
    PixelValues,
    /// `pixel_values` float grouped by merged image row, `[image_tokens, merge², values]`, with
    /// each patch's `patch_positions` and `frame_ids` (Qwen2-VL's tower): no batch axis.
    PatchRows,
    /// `encoder_hidden_states` float.
    EncoderStates,
    /// `input_features` float: log-mel frames `[batch, mel_bins, frames]` (Whisper).
    InputFeatures,
    /// `input_values` float: raw audio `[batch, samples]` (wav2vec2, HuBERT).
    InputValues,
    /// `input_ids` and `attention_mask` `[batch, sequence]` and `pixel_values` `[image_batch,
    /// channels, height, width]`, two batches (an image-text dual encoder's `model`).
    TextAndPixels,
}

impl Entry {
    /// Whether the leading axis of the main input is the batch (a tower's patch rows are not).
    pub fn leads_with_batch(self) -> bool {
        self != Entry::PatchRows
    }
}

/// What a component's main output is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    Logits,
    HiddenStates,
    Embeddings,
}

/// How token positions reach the component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Positions {
    /// `0..sequence`, made inside the graph (the forward graph, a growing cache's prefill).
    Implicit,
    /// `position_ids` int64 `[batch, sequence]`.
    Ids,
    /// `position_ids` int64 `[3, batch, sequence]` (temporal, height, width; M-RoPE).
    MultiRow,
    /// `cache_position` int64 `[sequence]`: the static cache slots this call writes, which are
    /// its tokens' positions (one sequence); the causal mask is made inside the graph. The call
    /// ExecuTorch's LLM runners make (`forward(tokens, cache_position)`).
    Slots,
    /// The component has no positions (an image encoder's patches carry their own).
    None,
}

/// How a component holds its attention cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheMode {
    None,
    /// `cache_len` slots allocated once and updated in place (`past_key_values.<c>` aliased by `present.<c>`).
    StaticInPlace,
    /// The past comes in as `past_key_values.<c>` and the cache grown by this call goes out as `present.<c>`;
    /// the prompt comes in over an empty past.
    Growing,
    /// Keys and values of the encoder states, computed once.
    CrossAttention,
}

/// One component of an export plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentSpec {
    pub name: String,
    pub role: Role,
    pub entry: Entry,
    pub exit: Exit,
    pub positions: Positions,
    pub cache: CacheMode,
}

impl ComponentSpec {
    /// The forward graph of a causal LM: token ids in, logits out, positions from the mask.
    pub fn forward() -> ComponentSpec {
        ComponentSpec {
            name: "model".into(),
            role: Role::Forward,
            entry: Entry::TokenIds,
            exit: Exit::Logits,
            positions: Positions::Implicit,
            cache: CacheMode::None,
        }
    }

    /// A generation component of a causal LM (`prefill` or `decode`) taking `position_ids`.
    pub fn generation(role: Role, cache: CacheMode) -> ComponentSpec {
        let name = match role {
            Role::Prefill => "prefill",
            _ => "decode",
        };
        ComponentSpec {
            name: name.into(),
            role,
            entry: Entry::TokenIds,
            exit: Exit::Logits,
            positions: Positions::Ids,
            cache,
        }
    }
}

/// Whether `components` are an encoder-decoder over a growing cache: the encoder and the
/// merged decode optimum's and transformers.js's encoder-decoder classes drive, which each
/// format's writer names as its clients look for them.
pub fn merged_seq2seq(components: &[Planned]) -> bool {
    components.iter().any(|c| c.spec.role == Role::Encoder)
        && components.iter().any(|c| c.spec.role == Role::Decode && c.spec.cache == CacheMode::Growing)
}

/// A component ready for a backend: its spec and graph.
#[derive(Debug, Clone)]
pub struct Planned {
    pub spec: ComponentSpec,
    pub graph: Graph,
}
