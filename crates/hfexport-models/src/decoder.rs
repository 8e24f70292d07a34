//! The state one graph is built in: the checkpoint's weights (behind [`Weights`]), the build
//! options, the [`Decoder`] that the graph plans (`builder.rs`), the block library (`blocks.rs`),
//! the encoders (`encoder.rs`, `seq2seq.rs`) and the vision towers (`vision.rs`) all extend with
//! methods, the per-layer inputs they share, and [`Vb`], the prefix-carrying weight handle. It
//! sits below all of them, so none of them imports another to reach it.

use hfexport_core::ops::Activation;
use hfexport_core::{DType, Graph, RopeConfig, TensorInfo, ValueId};

use crate::alibi::AlibiKind;
use crate::config::{AttentionSpec, ModelConfig};
use crate::error::{ModelError, Result};
use crate::families::Architecture;

/// What a builder can ask of a weight store: a float tensor of a given shape, or an error
/// naming the tensor and the file; and whether a tensor exists (to pick between the layouts a
/// family is stored in).
pub trait Weights {
    fn expect(&self, name: &str, shape: &[usize]) -> Result<TensorInfo>;
    /// A u8 tensor of a given shape (MXFP4 blocks and scales); a store of float weights only
    /// has none.
    fn expect_bytes(&self, name: &str, _shape: &[usize]) -> Result<TensorInfo> {
        Err(ModelError::MissingTensor { tensor: name.to_string(), path: std::path::PathBuf::new() })
    }
    fn has(&self, name: &str) -> bool;
    /// Dtype and shape of `name` when it exists (a GPTQ/AWQ module's parts among them).
    fn info(&self, _name: &str) -> Option<TensorInfo> {
        None
    }
}

impl Weights for crate::Checkpoint {
    fn expect(&self, name: &str, shape: &[usize]) -> Result<TensorInfo> {
        self.expect_tensor(name, shape)
    }
    fn expect_bytes(&self, name: &str, shape: &[usize]) -> Result<TensorInfo> {
        crate::Checkpoint::expect_bytes(self, name, shape)
    }
    fn has(&self, name: &str) -> bool {
        self.tensor_info(name).is_some()
    }
    fn info(&self, name: &str) -> Option<TensorInfo> {
        self.tensor_info(name)
    }
}

/// Largest batch the symbolic `batch` dim admits by default.
pub const DEFAULT_MAX_BATCH: i64 = 4096;

#[derive(Debug, Clone, PartialEq)]
pub struct BuildOptions {
    /// Dtype of the graph's float values and weights (weights are cast lazily).
    pub dtype: DType,
    pub max_batch: i64,
    /// How multi-head latent attention is computed (DeepSeek-V2/V3).
    pub latent: hfexport_core::LatentForm,
    /// The format runs a recurrence over a run-time sequence (it lowers
    /// [`hfexport_core::Op::SelectiveScan`] and `DeltaScan` natively: ONNX's `Scan`, OpenVINO's
    /// `TensorIterator`): a recurrent model's
    /// generation export then has a prefill or multi-token decode like any other; without, its
    /// one decode takes one token per call.
    pub sequence_loops: bool,
    /// `[height, width]` of an image model's `pixel_values` where not the config's
    /// `image_size` (a convolutional family takes any; a patch family only its own).
    pub image_size: Option<[usize; 2]>,
    /// A text decoder's static cache takes `cache_position` (`Positions::Slots`) in place of
    /// `attention_mask` and `position_ids`: the format keeps the cache inside its program and
    /// is called as ExecuTorch's LLM runners call it.
    pub slot_positions: bool,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            dtype: DType::F32,
            max_batch: DEFAULT_MAX_BATCH,
            latent: hfexport_core::LatentForm::Auto,
            sequence_loops: false,
            image_size: None,
            slot_positions: false,
        }
    }
}

/// The longest sequence the model accepts: `max_position_embeddings`, times the factor for
/// dynamic-NTK rope, whose point is to run past it.
pub fn max_context(cfg: &ModelConfig) -> i64 {
    let base = cfg.max_position_embeddings as f64;
    match cfg.rope.scaling {
        hfexport_core::RopeScaling::Dynamic { factor, .. } => (base * factor.max(1.0)).floor() as i64,
        _ => base as i64,
    }
}

/// Per-layer activations shared by every layer: rotary tables, mask and positions.
#[derive(Clone)]
pub(crate) struct LayerInputs {
    /// `(rope, cos, sin)` for each distinct rope the layers use.
    pub(crate) ropes: Vec<(RopeConfig, ValueId, ValueId)>,
    pub(crate) mask: ValueId,
    /// The mask of the sliding layers where it differs from `mask` by more than the window
    /// the attention op applies (an encoder's bidirectional windows).
    pub(crate) sliding_mask: Option<ValueId>,
    /// `mask` within each query's chunk, when a layer is chunked (`Decoder::chunked_mask`).
    pub(crate) chunked_mask: Option<ValueId>,
    /// Per decoder layer: the encoder's cross-attention keys and values (Whisper's decode).
    pub(crate) cross: Vec<(ValueId, ValueId)>,
    /// The encoder positions the cross-attention sees, `[batch, 1, 1, encoder positions]`
    /// (a padded text encoder's); every one when `None`.
    pub(crate) cross_mask: Option<ValueId>,
    /// Positions of the queries and of the keys (the same in a forward pass; cache slots when
    /// the keys come from a static cache), for sliding windows.
    pub(crate) positions: ValueId,
    pub(crate) key_positions: ValueId,
    /// The tokens' `position_ids` where they differ from `positions` (a growing-cache decode,
    /// whose masks go by cache slot): what learned position tables read.
    pub(crate) token_positions: Option<ValueId>,
    /// `mask` with each ALiBi layer kind's biases ([`crate::alibi`]), one per distinct kind.
    pub(crate) alibi: Vec<(AlibiKind, ValueId)>,
    /// The `attention_mask` (int64, 0 = padding): a forward graph's `[batch, seq]`, which a
    /// state-space layer multiplies its inputs by, or a growing-cache decode's
    /// `[batch, past + seq]`; chunked layers count positions over it.
    pub(crate) padding: Option<ValueId>,
    /// The per-layer embeddings `[b, s, layers, size]` (Gemma 4's PLE), when the model has them.
    pub(crate) per_layer: Option<ValueId>,
    /// DeBERTa-v2's relative embeddings and gather indices, when its attention is disentangled.
    pub(crate) disentangled: Option<DisentangledInputs>,
    /// WavLM's relative position bias `[1, heads, q, k]` before each layer gates it.
    pub(crate) gated_bias: Option<ValueId>,
    /// BEiT's per-layer relative position bias (each layer's table read through it).
    pub(crate) relative_index: Option<crate::patch_bias::RelativeBias>,
}

/// What every disentangled attention layer reads (`crate::encoder`): the relative embeddings
/// `[2 * span, hidden]` (normed where the config says) and, for each (query `i`, key `j`), the
/// flat index `[q, k]` of its content-to-position score in the `[q * 2 * span]` row of query
/// scores (`i * 2span + clamp(bucket(i - j) + span)`) and of its position-to-content score in
/// the key scores (`j * 2span + clamp(span - bucket(j - i))`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DisentangledInputs {
    pub(crate) rel: ValueId,
    pub(crate) c2p: ValueId,
    pub(crate) p2c: ValueId,
}

impl LayerInputs {
    /// The inputs of layers without a rotary embedding (an encoder's).
    pub(crate) fn without_rope(mask: ValueId, positions: ValueId) -> LayerInputs {
        LayerInputs::new(vec![], mask, positions, positions)
    }

    /// A decoder's inputs: rotary tables, the mask, query and key positions.
    pub(crate) fn new(
        ropes: Vec<(RopeConfig, ValueId, ValueId)>,
        mask: ValueId,
        positions: ValueId,
        key_positions: ValueId,
    ) -> LayerInputs {
        LayerInputs {
            ropes,
            mask,
            sliding_mask: None,
            chunked_mask: None,
            cross: vec![],
            cross_mask: None,
            positions,
            token_positions: None,
            key_positions,
            alibi: vec![],
            padding: None,
            per_layer: None,
            disentangled: None,
            gated_bias: None,
            relative_index: None,
        }
    }

    /// The mask an attention layer adds to its scores: `mask`, with its linear biases when it
    /// has ALiBi.
    pub(crate) fn mask_of(&self, a: &AttentionSpec) -> ValueId {
        match AlibiKind::of(a) {
            Some(kind) => {
                let (_, m) = self.alibi.iter().find(|(k, _)| *k == kind).expect("made for every layer's kind");
                *m
            }
            None => self.mask,
        }
    }

    /// The cos/sin tables of `rope` (made for every rope a layer uses).
    pub(crate) fn tables(&self, rope: &RopeConfig) -> (ValueId, ValueId) {
        let (_, cos, sin) =
            self.ropes.iter().find(|(r, ..)| r == rope).expect("tables are made for every layer's rope");
        (*cos, *sin)
    }
}

/// Where the keys and values of each layer come from. Inputs and outputs hold, per layer, the
/// tensors of its [`LayerSpec::cache`](crate::config::LayerSpec::cache) in that order.
pub(crate) enum Kv {
    /// This call's tokens only (the forward graph).
    Tokens,
    /// A growing cache: `past_key_values.` keys/values of the past tokens, concatenated with
    /// this call's (the `present.` values are one call longer).
    Growing { inputs: Vec<Vec<ValueId>>, outputs: Vec<Vec<ValueId>> },
    /// A static cache per layer (`past_key_values.` keys, values), written at `positions` by
    /// `CacheUpdate`; the updated caches become `present.` values.
    StaticCache { inputs: Vec<Vec<ValueId>>, outputs: Vec<Vec<ValueId>> },
}

/// The builder of one graph: the plan methods here, the blocks in [`crate::blocks`].
pub(crate) struct Decoder<'a> {
    pub(crate) cfg: &'a ModelConfig,
    pub(crate) arch: &'a Architecture,
    pub(crate) weights: &'a dyn Weights,
    pub(crate) opts: &'a BuildOptions,
    pub(crate) g: Graph,
    pub(crate) kv: Kv,
    /// A vision-language decode's `image_embeds` input, merged at the image placeholders.
    pub(crate) image: Option<ValueId>,
    /// Each attention layer's keys and values as it attended over them (cache included), for
    /// the layers that reuse them ([`crate::config::AttentionSpec::kv_source`]).
    pub(crate) layer_kv: std::collections::HashMap<usize, (ValueId, ValueId)>,
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(
        cfg: &'a ModelConfig,
        arch: &'a Architecture,
        weights: &'a dyn Weights,
        opts: &'a BuildOptions,
        name: &str,
    ) -> Decoder<'a> {
        Decoder {
            cfg,
            arch,
            weights,
            opts,
            g: Graph::new(name),
            kv: Kv::Tokens,
            image: None,
            layer_kv: Default::default(),
        }
    }

    /// This decoder writing into `g` (a component built from two configs: Whisper's encoder).
    pub(crate) fn continuing(self, g: Graph) -> Decoder<'a> {
        Decoder { g, ..self }
    }

    /// The prefix the text model is stored under: the first of the layout's roots whose
    /// embedding table exists (the first root when none does, so the error names it).
    pub(crate) fn root(&self) -> Vb {
        let layout = &self.arch.layout;
        let root = layout
            .roots
            .iter()
            .find(|r| self.weights.has(&Vb::root(r).pp(layout.embed).name("weight")))
            .unwrap_or(&layout.roots[0]);
        Vb::root(root)
    }

    pub(crate) fn activation(&self) -> Result<Activation> {
        let name = &self.cfg.hidden_act;
        Activation::from_hf(name).ok_or_else(|| ModelError::Config {
            path: "config.json".into(),
            key: self.arch.config.keys.activation[0].into(),
            msg: format!("`{name}` is not supported; valid: {}", Activation::NAMES.join(", ")),
        })
    }
}

/// The name prefix of the block being built (`model.layers.3.self_attn`).
#[derive(Debug, Clone)]
pub(crate) struct Vb {
    prefix: String,
}

impl Vb {
    /// A root such as `model.` or `` (the trailing dot is dropped).
    pub(crate) fn root(prefix: &str) -> Vb {
        Vb { prefix: prefix.trim_end_matches('.').to_string() }
    }

    /// The child block `name` (this block itself for an empty name: a layout whose MLP sits
    /// right under the layer).
    pub(crate) fn pp(&self, name: impl std::fmt::Display) -> Vb {
        let name = name.to_string();
        match name.is_empty() {
            true => self.clone(),
            false => Vb { prefix: self.name(name) },
        }
    }

    /// The prefix itself (the name of the block's node).
    pub(crate) fn path(&self) -> &str {
        &self.prefix
    }

    /// The full name of `leaf` under this prefix.
    pub(crate) fn name(&self, leaf: impl std::fmt::Display) -> String {
        if self.prefix.is_empty() {
            leaf.to_string()
        } else {
            format!("{}.{leaf}", self.prefix)
        }
    }
}
