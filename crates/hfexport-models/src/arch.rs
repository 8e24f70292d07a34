//! Architectures as data: everything that makes a family what it is, in one [`Architecture`]
//! value per family ([`ARCHITECTURES`]).
//!
//! A definition says which `architectures[0]` classes and `model_type`s it answers to, how its
//! `config.json` is read ([`ConfigSchema`]: key names, class defaults, how layer kinds, biases,
//! attention scale and multipliers are derived) and what its blocks are ([`Layout`]: tensor
//! names, norm kind and placement, projections fused or separate, q/k norms, MLP kind). The
//! config reader (`config.rs`) and the block library (`blocks.rs`) interpret these values; a new
//! family whose blocks already exist is one more entry here, with no builder change.

use crate::error::{ModelError, Result};

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

/// How a family's `config.json` is read: the config class of its `model_type`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfigSchema {
    pub keys: Keys,
    pub defaults: Defaults,
    /// A multimodal checkpoint whose text model is read from `text_config` (Gemma 3).
    pub text_config: bool,
    pub layers: LayerRule,
    pub biases: Biases,
    pub scale: ScaleRule,
    pub embedding_scale: EmbeddingScale,
    pub rope: RopeRule,
    /// Whether `partial_rotary_factor` < 1 is honoured by the modeling code (Phi-3).
    pub partial_rotary: bool,
    /// The rope types the config class accepts (`None`: every type transformers knows), after
    /// its legacy renames (Phi-3 reads `su` and `yarn` as `longrope`).
    pub rope_types: Option<&'static [&'static str]>,
    pub rope_type_rewrites: &'static [(&'static str, &'static str)],
    /// Granite's `residual_multiplier` and `logits_scaling`.
    pub granite_multipliers: bool,
    /// Which of `attn_logit_softcapping` / `final_logit_softcapping` the modeling code applies.
    pub softcapping: Softcapping,
    /// `LlamaConfig.validate_architecture`: hidden size a multiple of the heads.
    pub heads_divide_hidden: bool,
    /// A sparse mixture-of-experts MLP in the layers it selects (Qwen3-MoE, Mixtral, Qwen2-MoE).
    pub moe: Option<MoeSchema>,
    /// An encoder's config keys (BERT, RoBERTa): `type_vocab_size` and its class default.
    pub encoder: Option<EncoderSchema>,
    /// An encoder-decoder's encoder keys (Whisper); the decoder's are [`Keys`].
    pub seq2seq: Option<Seq2SeqSchema>,
}

/// The encoder stack of an encoder-decoder: each key with its class default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seq2SeqSchema {
    pub layers: (&'static str, usize),
    pub heads: (&'static str, usize),
    pub ffn: (&'static str, usize),
    /// Encoder positions (Whisper's `max_source_positions`: the input has twice as many frames);
    /// `None`: the encoder reads tokens of any length (T5).
    pub source_positions: Option<(&'static str, usize)>,
    /// Log-mel bins of the input features (`num_mel_bins`).
    pub mel_bins: Option<(&'static str, usize)>,
    /// The default of `decoder_start_token_id`; `None`: the padding id (T5).
    pub decoder_start_token_id: Option<i64>,
    /// T5's keys: `feed_forward_proj` (`relu`, `gated-gelu`, …) gives the activation and whether
    /// the MLP is gated; `relative_attention_num_buckets` / `_max_distance`; the head always tied
    /// when not stored, its input scaled by `d_model ** -0.5` unless `scale_decoder_outputs` (or
    /// an older file's `tie_word_embeddings`) is false.
    pub t5: bool,
}

/// How an encoder's own keys are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderSchema {
    /// The class default of `type_vocab_size`; `None`: the family has no token types.
    pub type_vocab_size: Option<usize>,
    /// `image_size`, `patch_size` and `num_channels` with their class defaults (ViT).
    pub image: Option<ImageDefaults>,
    /// ModernBERT's head keys: `classifier_activation` (gelu), `classifier_bias` (false),
    /// `classifier_pooling` (cls) and `decoder_bias` (true); without them the heads' linears
    /// all have biases.
    pub head_keys: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageDefaults {
    pub image_size: usize,
    pub patch_size: usize,
    pub num_channels: usize,
}

/// How a mixture-of-experts config is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoeSchema {
    /// Expert-count keys, first present wins (an `attribute_map` makes `num_experts` and
    /// `num_local_experts` the same key in Qwen3-MoE and Mixtral).
    pub experts_keys: &'static [&'static str],
    pub default_experts: usize,
    pub default_top_k: usize,
    /// Each expert's intermediate size: its key and class default (`moe_intermediate_size`);
    /// `None`: the dense `intermediate_size` (Mixtral).
    pub intermediate: Option<(&'static str, usize)>,
    pub normalize: NormTopK,
    /// Qwen's `decoder_sparse_step` and `mlp_only_layers` choose the sparse layers (the others
    /// keep a dense MLP of `intermediate_size`); false: every layer is sparse (Mixtral).
    pub sparse_step: bool,
    /// The default of `shared_expert_intermediate_size` when the family has a shared expert
    /// (Qwen2-MoE).
    pub shared_expert: Option<usize>,
}

/// Whether the top-k routing weights are divided by their sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormTopK {
    /// `norm_topk_prob`, with the class default.
    Key(bool),
    /// Always (Mixtral's router).
    Always,
}

/// The soft-capping keys a class honours (Gemma 2 both; Gemma 3's causal LM the final one,
/// its conditional-generation model neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Softcapping {
    pub attention: bool,
    pub logits: bool,
}

pub const NO_SOFTCAPPING: Softcapping = Softcapping { attention: false, logits: false };

/// Config key names of the common quantities (GPT-2 spells them `n_embd`, `n_layer`, …).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Keys {
    pub hidden_size: &'static str,
    pub intermediate_size: &'static str,
    pub num_hidden_layers: &'static str,
    pub num_attention_heads: &'static str,
    pub max_position_embeddings: &'static str,
    pub norm_eps: &'static str,
    /// Activation keys, first present wins (Gemma 2/3 read `hidden_activation` only).
    pub activation: &'static [&'static str],
    /// Activation values the config class rewrites (Gemma's legacy `gelu` means the tanh form).
    pub activation_rewrites: &'static [(&'static str, &'static str)],
    /// The layer count's key when `num_hidden_layers`' is absent (T5's `num_decoder_layers`
    /// defaults to `num_layers`).
    pub layers_fallback: Option<&'static str>,
    /// The head size key (T5: `d_kv`).
    pub head_dim: &'static str,
}

const KEYS: Keys = Keys {
    hidden_size: "hidden_size",
    intermediate_size: "intermediate_size",
    num_hidden_layers: "num_hidden_layers",
    num_attention_heads: "num_attention_heads",
    max_position_embeddings: "max_position_embeddings",
    norm_eps: "rms_norm_eps",
    activation: &["hidden_act"],
    activation_rewrites: &[],
    layers_fallback: None,
    head_dim: "head_dim",
};

/// Class defaults; `None` sizes are required keys.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Defaults {
    pub vocab_size: Option<usize>,
    pub hidden_size: Option<usize>,
    pub intermediate_size: Option<usize>,
    /// `intermediate_size` absent or null: this many times the hidden size (GPT-2's `n_inner`).
    pub intermediate_times_hidden: Option<usize>,
    pub num_hidden_layers: Option<usize>,
    pub num_attention_heads: Option<usize>,
    pub max_position_embeddings: Option<usize>,
    /// `None`: as many as attention heads.
    pub num_key_value_heads: Option<usize>,
    /// `None`: `hidden_size / num_attention_heads`.
    pub head_dim: Option<usize>,
    pub norm_eps: f64,
    pub activation: &'static str,
    pub tie_word_embeddings: bool,
    pub rope_theta: f64,
    /// `query_pre_attn_scalar` (Gemma 2/3: 256, whatever the head dim).
    pub query_pre_attn_scalar: Option<f64>,
    /// `attn_logit_softcapping` / `final_logit_softcapping` when the keys are absent.
    pub attn_softcap: Option<f64>,
    pub final_softcap: Option<f64>,
    pub bos_token_id: Option<i64>,
    pub eos_token_id: Option<i64>,
    pub pad_token_id: Option<i64>,
}

/// The defaults of a config class that must spell out its sizes (an unknown `model_type`).
pub const NO_DEFAULTS: Defaults = Defaults {
    vocab_size: None,
    hidden_size: None,
    intermediate_size: None,
    intermediate_times_hidden: None,
    num_hidden_layers: None,
    num_attention_heads: None,
    max_position_embeddings: None,
    num_key_value_heads: None,
    head_dim: None,
    norm_eps: 1e-6,
    activation: "silu",
    tie_word_embeddings: false,
    rope_theta: 10_000.0,
    query_pre_attn_scalar: None,
    attn_softcap: None,
    final_softcap: None,
    bos_token_id: None,
    eos_token_id: None,
    pad_token_id: None,
};

/// The sizes of a 7B-class decoder most config classes default to.
const SEVEN_B: Defaults = Defaults {
    vocab_size: Some(32000),
    hidden_size: Some(4096),
    intermediate_size: Some(11008),
    num_hidden_layers: Some(32),
    num_attention_heads: Some(32),
    max_position_embeddings: Some(2048),
    ..NO_DEFAULTS
};

/// How the attention kind of each layer (full or sliding window) is derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerRule {
    /// Every layer attends to everything; window keys are ignored (Llama, Gemma, GPT-2, …).
    Full,
    /// `sliding_window` (default given) applies to every layer; a `layer_types` key makes the
    /// config Ministral's, where it says which layers slide (Mistral).
    Mistral { default_window: Option<usize> },
    /// `use_sliding_window` + `sliding_window` + `max_window_layers`, or `layer_types` (Qwen2/3).
    Qwen,
    /// `layer_types`, else every `period`-th layer (1-based) full and the others sliding;
    /// `pattern_keys` may override the period (Gemma 2: 2, Gemma 3: 6).
    Pattern { period: usize, pattern_keys: &'static [&'static str], default_window: usize },
    /// `layer_types` when given, else full; `sliding_window` only with `use_sliding_window`
    /// (SmolLM3).
    UseSlidingWindow,
    /// `layer_types` when given, else full; `sliding_window` as given (unknown families).
    Explicit,
    /// Every layer slides when `use_sliding_window` and `sliding_window` (default given) are
    /// set; `layer_types` is not read (Qwen3-MoE).
    UniformWhenUsed { default_window: usize },
    /// `layer_types`, else the even layers (0-based) below `max_window_layers` slide when
    /// `use_sliding_window` (Qwen2-MoE).
    EvenBelowMaxWindow,
    /// `layer_types`, else every `global_attn_every_n_layers`-th layer (0-based, from layer 0)
    /// full and the others local; the window (`sliding_window`) is half of `local_attention`,
    /// on both sides of a token (ModernBERT).
    LocalGlobal { default_every: usize, default_local: usize },
}

/// Where a projection's bias comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bias {
    /// The named boolean config key (default false).
    Key(&'static str),
    /// The named boolean config key with its class default (Qwen2-MoE's `qkv_bias`, true).
    KeyDefault(&'static str, bool),
    Always,
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Biases {
    pub qkv: Bias,
    pub o: Bias,
    pub mlp: Bias,
    /// LayerNorm bias (GPT-2's LayerNorms always have one; ModernBERT's `norm_bias`).
    pub norm: Bias,
}

const LLAMA_BIASES: Biases = Biases {
    qkv: Bias::Key("attention_bias"),
    o: Bias::Key("attention_bias"),
    mlp: Bias::Key("mlp_bias"),
    norm: Bias::Never,
};
const NO_BIASES: Biases = Biases { qkv: Bias::Never, o: Bias::Never, mlp: Bias::Never, norm: Bias::Never };
const ATTENTION_BIASES: Biases =
    Biases { qkv: Bias::Key("attention_bias"), o: Bias::Key("attention_bias"), mlp: Bias::Never, norm: Bias::Never };

/// The attention's score scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleRule {
    /// `head_dim ** -0.5`.
    HeadDim,
    /// `query_pre_attn_scalar ** -0.5` (Gemma 2/3; the key defaults to `head_dim`).
    QueryPreAttnScalar,
    /// `attention_multiplier` (Granite).
    AttentionMultiplier,
    /// `head_dim ** -0.5` when `scale_attn_weights`, divided by `layer + 1` when
    /// `scale_attn_by_inverse_layer_idx` (GPT-2).
    Gpt2,
    /// No scaling (T5: the scale is folded into its initialisation).
    One,
}

/// What the token embeddings are multiplied by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingScale {
    None,
    /// `sqrt(hidden_size)`, rounded to the graph's dtype (Gemma).
    SqrtHidden,
    /// `embedding_multiplier` (Granite).
    Multiplier,
}

/// How rotary embeddings are configured per layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeRule {
    /// One rope for every layer.
    Uniform,
    /// Sliding layers have their own rope: `rope_parameters` keyed by layer type, or the
    /// legacy flat keys: the full layers' theta under `global_theta` (`None`: `rope_theta`),
    /// the sliding layers' under `local_theta` (Gemma 3: `rope_local_base_freq`; ModernBERT:
    /// `global_rope_theta` and `local_rope_theta`).
    PerLayerType { global_theta: Option<&'static str>, local_theta: &'static str },
    /// Layers listed 0 in `no_rope_layers` (default: every `no_rope_layer_interval`-th) have
    /// no rotary embedding (SmolLM3).
    NoRopeLayers,
    /// No rotary embedding; learned absolute positions instead (GPT-2).
    None,
}

/// Tensor names and block kinds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layout {
    /// Prefixes of the text model, tried in order (the first under which the embedding exists
    /// wins): a multimodal checkpoint nests it (`model.language_model.`), GPT-2 files exist
    /// with and without `transformer.`.
    pub roots: &'static [&'static str],
    /// Names of an untied output head, tried in order.
    pub heads: &'static [&'static str],
    pub embed: &'static str,
    /// Learned absolute position embeddings (GPT-2 `wpe`).
    pub position_embed: Option<&'static str>,
    pub layers: &'static str,
    pub final_norm: &'static str,
    pub norm: NormKind,
    pub norms: LayerNorms,
    pub attention: AttentionLayout,
    pub mlp: MlpLayout,
    /// The sparse MLP of the layers [`MoeSchema`] selects.
    pub moe: Option<MoeLayout>,
    /// What an encoder adds: its embeddings' extras, pooler and task heads (BERT, RoBERTa).
    pub encoder: Option<EncoderLayout>,
    /// Attention over the encoder's states after each layer's self-attention (Whisper's
    /// decoder).
    pub cross_attention: Option<CrossAttentionLayout>,
    /// The encoder stack in front of the decoder of an encoder-decoder (Whisper, T5).
    pub encoder_stack: Option<EncoderStack>,
    /// The relative position bias table `[num_buckets, heads]` under the first layer, shared by
    /// every layer of the stack (T5).
    pub relative_bias: Option<&'static str>,
    /// The vision tower and projector in front of the text model of a vision-language
    /// checkpoint (LLaVA); set by [`resolve`], never in a text family's own layout.
    pub vision: Option<&'static VisionLayout>,
}

/// A vision-language model's image side: a vision tower whose features a projector maps into
/// the text model's hidden size (LLaVA: CLIP, then `multi_modal_projector`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VisionLayout {
    /// The tower's own layout (its roots are the tower's, tried in order).
    pub tower: &'static Layout,
    pub kind: TowerKind,
    /// Prefixes of the projector, tried in order.
    pub projector_roots: &'static [&'static str],
    /// The projector's two linears (an activation between them).
    pub projector: [&'static str; 2],
}

/// How a vision tower reads its images and hands its features on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TowerKind {
    /// CLIP (LLaVA): `pixel_values` `[batch, channels, size, size]`, a CLS token and learned
    /// positions; the features of `vision_feature_layer` go to a projector component.
    Clip,
    /// Qwen2-VL: rows of flattened patches (`[patches, channels x temporal x patch x patch]`,
    /// the processor's order), a 2-D rotary embedding of each patch's row and column,
    /// attention within each frame; the PatchMerger (the norm `merger_norm`, then the
    /// projector's two linears over `spatial_merge_size`^2 neighbours, exact GELU between)
    /// closes the `image_encoder` itself.
    Merged { merger_norm: &'static str },
}

/// A vision-language class: its text model is the family `text_config.model_type` names,
/// stored under `text_roots`, with `vision` in front.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VisionLanguage {
    pub classes: &'static [&'static str],
    pub model_types: &'static [&'static str],
    /// The `model_type` of a `text_config` that names none (LlavaConfig: `llama`).
    pub default_text_type: &'static str,
    /// Without `text_config`, the text keys are read from the top level (Qwen2-VL's hub
    /// files); else an absent `text_config` means the text config class's defaults (LLaVA).
    pub flat_text: bool,
    /// The vision config's `model_type`s the tower reads.
    pub vision_types: &'static [&'static str],
    pub text_roots: &'static [&'static str],
    pub heads: &'static [&'static str],
    pub vision: &'static VisionLayout,
}

/// A decoder layer's attention over the encoder states: `h + attn(norm(h), enc)`, its
/// projections named as the self-attention's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrossAttentionLayout {
    pub prefix: &'static str,
    pub norm: &'static str,
}

/// An encoder-decoder's encoder: layers of the decoder's kinds laid out as `layout` names them
/// (its roots, layers, norms, MLP and final norm; no cross-attention), over `input`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EncoderStack {
    pub layout: &'static Layout,
    pub input: StackInput,
}

/// What an encoder stack reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackInput {
    /// Log-mel `input_features` through two convolutions (kernel 3, padding 1, strides 1 and 2,
    /// each followed by exact GELU), the learned `positions` of every frame added (Whisper).
    Speech { convs: [&'static str; 2], positions: &'static str },
    /// `input_ids` through the layout's token embedding, with an `attention_mask` (T5).
    Tokens,
}

/// The parts of an encoder family beyond its layers (see `encoder.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderLayout {
    /// Tokens (text encoders) or image patches (ViT).
    pub input: EncoderInput,
    /// Token type embeddings (`token_type_ids`), under the root (DistilBERT has none).
    pub token_type_embed: Option<&'static str>,
    /// The norm over the summed embeddings, under the root (ViT has none).
    pub embed_norm: Option<&'static str>,
    pub positions: EncoderPositions,
    /// `tanh(dense(h[:, 0]))`, under the root, when the family and the checkpoint have it.
    pub pooler: Option<&'static str>,
    pub mlm: MlmHead,
    pub classifier: ClassifierHead,
    /// The per-token classifier (`token-classification`).
    pub token_classifier: &'static str,
    /// The span head `[2, hidden]` (`question-answering`).
    pub qa: &'static str,
    /// The masked-LM transform (dense, activation, norm) also precedes the token classifier
    /// and the span head: ModernBERT shares one prediction head among its task heads.
    pub shared_transform: bool,
}

/// What an encoder reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncoderInput {
    /// `input_ids` (and `token_type_ids`) through the layout's word embeddings.
    Tokens,
    /// `pixel_values` `[batch, channels, height, width]` cut into patches by the convolution at
    /// the layout's `embed` (kernel = stride = patch; with a bias when `patch_bias`), a learned
    /// `cls` token in front, learned `positions` added: ViT stores them `[1, 1, hidden]` and
    /// `[1, patches + 1, hidden]`, CLIP (`flat`) `[hidden]` and an embedding table
    /// `[patches + 1, hidden]`. The layout's `embed_norm` follows (CLIP's `pre_layrnorm`).
    Patches { cls: &'static str, positions: &'static str, patch_bias: bool, flat: bool },
}

/// How an encoder numbers its positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncoderPositions {
    /// `0..sequence` (BERT).
    FromZero,
    /// RoBERTa's `create_position_ids_from_input_ids`: tokens other than `pad_token_id` are
    /// numbered from `pad_token_id + 1`; padding tokens get `pad_token_id`.
    AfterPadding,
}

/// The masked-LM head: `decoder(norm(act(dense(h)))) + bias`, the decoder tied to the word
/// embeddings unless stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlmHead {
    pub dense: &'static str,
    pub act: HeadActivation,
    pub norm: &'static str,
    pub decoder: &'static str,
    /// The output bias; also read as `<decoder>.bias` when stored there.
    pub bias: &'static str,
}

/// The sequence-classification head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassifierHead {
    /// `out(pooler_output)` (BERT).
    Pooled { out: &'static str },
    /// `out(h[:, 0])` (ViT's image classifier, after the final norm).
    FirstToken { out: &'static str },
    /// `out(act(dense(h[:, 0])))` (RoBERTa's classification head: tanh; DistilBERT's
    /// `pre_classifier`: relu).
    Dense { dense: &'static str, act: HeadAct, out: &'static str },
    /// `out(transform(pool(h)))`, pooled as `classifier_pooling` says (the first token, or the
    /// mean over the unpadded tokens), through the masked-LM transform (ModernBERT).
    Pooling { out: &'static str },
}

/// The activation of a masked-LM transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadActivation {
    /// The layers' `hidden_act` (BERT, DistilBERT).
    Hidden,
    /// Exact GELU whatever `hidden_act` says (RoBERTa's head).
    Gelu,
    /// `classifier_activation` (ModernBERT's prediction head).
    Classifier,
}

/// The activation between a classification head's two linears.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadAct {
    Tanh,
    Relu,
}

/// Tensor names of a mixture-of-experts block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoeLayout {
    /// The block under the layer (`mlp`, Mixtral's `block_sparse_moe`).
    pub prefix: &'static str,
    /// The router linear `[experts, hidden]`.
    pub router: &'static str,
    pub experts: &'static str,
    /// Each expert's linears, as checkpoints store them (`experts.<e>.<gate>.weight`).
    pub gate: &'static str,
    pub up: &'static str,
    pub down: &'static str,
    /// Where transformers 5's in-memory form keeps the stacked experts
    /// (`<fused_prefix>.experts.gate_up_proj [E, 2 * inter, hidden]`, `.down_proj
    /// [E, hidden, inter]`), read when the per-expert tensors are absent.
    pub fused_prefix: &'static str,
    pub shared: Option<SharedExpert>,
}

/// A dense gated MLP every token takes, scaled by `sigmoid(gate(x))` (Qwen2-MoE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedExpert {
    pub mlp: &'static str,
    pub gate: &'static str,
}

const QWEN_MOE_LAYOUT: MoeLayout = MoeLayout {
    prefix: "mlp",
    router: "gate",
    experts: "experts",
    gate: "gate_proj",
    up: "up_proj",
    down: "down_proj",
    fused_prefix: "mlp",
    shared: None,
};

/// The normalisation every norm of a family uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormKind {
    /// `w * x / rms(x)`.
    Rms,
    /// `(1 + w) * x / rms(x)` (Gemma).
    RmsOnePlus,
    /// LayerNorm with weight and (per [`Biases::norm`]) bias (GPT-2).
    Layer,
}

/// Norm placement in a layer, by tensor name: pre-norm (Llama), post-norm (OLMo 2), both
/// around each sub-block (Gemma 2/3's sandwich), or over the residual stream after each add
/// (BERT's post-LN: `norm(h + attention(h))`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerNorms {
    pub pre_attention: Option<&'static str>,
    pub post_attention: Option<&'static str>,
    pub pre_mlp: Option<&'static str>,
    pub post_mlp: Option<&'static str>,
    /// Over the sum of the residual and the attention output.
    pub attention_residual: Option<&'static str>,
    /// Over the sum of the residual and the MLP output.
    pub mlp_residual: Option<&'static str>,
    /// Layer 0 has no `pre_attention` norm (ModernBERT: the embeddings' norm precedes it).
    pub first_without_pre_attention: bool,
}

const NO_NORMS: LayerNorms = LayerNorms {
    pre_attention: None,
    post_attention: None,
    pre_mlp: None,
    post_mlp: None,
    attention_residual: None,
    mlp_residual: None,
    first_without_pre_attention: false,
};

const PRE_NORMS: LayerNorms = LayerNorms {
    pre_attention: Some("input_layernorm"),
    post_attention: None,
    pre_mlp: Some("post_attention_layernorm"),
    post_mlp: None,
    attention_residual: None,
    mlp_residual: None,
    first_without_pre_attention: false,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionLayout {
    pub prefix: &'static str,
    pub qkv: Projections,
    pub out: &'static str,
    pub qk_norm: QkNorm,
    /// The key projection has no bias whatever the others have (Whisper).
    pub unbiased_key: bool,
}

/// The q, k and v projections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Projections {
    Separate {
        q: &'static str,
        k: &'static str,
        v: &'static str,
    },
    /// One `[q; k; v]` linear (Phi-3 `qkv_proj`).
    Fused(&'static str),
    /// One `[q, k, v]` Conv1D, weights stored `[in, out]` (GPT-2 `c_attn`); the output
    /// projection is a Conv1D too.
    FusedConv1d(&'static str),
}

/// Normalisation of queries and keys before the rotary embedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QkNorm {
    None,
    /// Per head over `head_dim` (Qwen3, Gemma 3).
    PerHead,
    /// Over the whole projection (OLMo 2).
    Whole,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlpLayout {
    pub prefix: &'static str,
    pub kind: MlpKind,
    pub down: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MlpKind {
    /// `down(act(gate(x)) * up(x))`.
    Gated { gate: &'static str, up: &'static str },
    /// The same with one `[gate; up]` linear (Phi-3 `gate_up_proj`).
    GatedFused(&'static str),
    /// `down(act(fc(x)))` with Conv1D weights (GPT-2 `c_fc`, `c_proj`).
    PlainConv1d(&'static str),
    /// `down(act(fc(x)))` with linear weights (BERT `intermediate.dense`, `output.dense`).
    Plain(&'static str),
    /// `Gated { gate, up }` when the config's MLP is gated (T5's `gated-*` `feed_forward_proj`),
    /// else `Plain(plain)`.
    GatedIf { gate: &'static str, up: &'static str, plain: &'static str },
}

const LLAMA_LAYOUT: Layout = Layout {
    roots: &["model."],
    heads: &["lm_head"],
    embed: "embed_tokens",
    position_embed: None,
    layers: "layers",
    final_norm: "norm",
    norm: NormKind::Rms,
    norms: PRE_NORMS,
    attention: AttentionLayout {
        prefix: "self_attn",
        qkv: Projections::Separate { q: "q_proj", k: "k_proj", v: "v_proj" },
        out: "o_proj",
        qk_norm: QkNorm::None,
        unbiased_key: false,
    },
    mlp: MlpLayout { prefix: "mlp", kind: MlpKind::Gated { gate: "gate_proj", up: "up_proj" }, down: "down_proj" },
    moe: None,
    encoder: None,
    cross_attention: None,
    encoder_stack: None,
    relative_bias: None,
    vision: None,
};

const LLAMA_SCHEMA: ConfigSchema = ConfigSchema {
    keys: KEYS,
    defaults: Defaults { bos_token_id: Some(1), eos_token_id: Some(2), ..SEVEN_B },
    text_config: false,
    layers: LayerRule::Full,
    biases: LLAMA_BIASES,
    scale: ScaleRule::HeadDim,
    embedding_scale: EmbeddingScale::None,
    rope: RopeRule::Uniform,
    partial_rotary: false,
    rope_types: None,
    rope_type_rewrites: &[],
    granite_multipliers: false,
    softcapping: NO_SOFTCAPPING,
    heads_divide_hidden: false,
    moe: None,
    encoder: None,
    seq2seq: None,
};

const QWEN_DEFAULTS: Defaults = Defaults {
    vocab_size: Some(151936),
    intermediate_size: Some(22016),
    max_position_embeddings: Some(32768),
    num_key_value_heads: Some(32),
    bos_token_id: None,
    eos_token_id: None,
    ..SEVEN_B
};

const GEMMA_DEFAULTS: Defaults = Defaults {
    vocab_size: Some(256000),
    hidden_size: Some(3072),
    intermediate_size: Some(24576),
    num_hidden_layers: Some(28),
    num_attention_heads: Some(16),
    max_position_embeddings: Some(8192),
    num_key_value_heads: Some(16),
    head_dim: Some(256),
    activation: "gelu_pytorch_tanh",
    tie_word_embeddings: true,
    query_pre_attn_scalar: Some(256.0),
    bos_token_id: Some(2),
    eos_token_id: Some(1),
    pad_token_id: Some(0),
    ..NO_DEFAULTS
};

const GEMMA_LAYOUT: Layout = Layout { norm: NormKind::RmsOnePlus, ..LLAMA_LAYOUT };

const SANDWICH_NORMS: LayerNorms = LayerNorms {
    pre_attention: Some("input_layernorm"),
    post_attention: Some("post_attention_layernorm"),
    pre_mlp: Some("pre_feedforward_layernorm"),
    post_mlp: Some("post_feedforward_layernorm"),
    attention_residual: None,
    mlp_residual: None,
    first_without_pre_attention: false,
};

const GEMMA3_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys { activation: &["hidden_activation"], ..KEYS },
    defaults: Defaults {
        vocab_size: Some(262208),
        hidden_size: Some(2304),
        intermediate_size: Some(9216),
        num_hidden_layers: Some(26),
        num_attention_heads: Some(8),
        num_key_value_heads: Some(4),
        max_position_embeddings: Some(131072),
        rope_theta: 1_000_000.0,
        ..GEMMA_DEFAULTS
    },
    layers: LayerRule::Pattern {
        period: 6,
        pattern_keys: &["sliding_window_pattern", "_sliding_window_pattern"],
        default_window: 4096,
    },
    biases: ATTENTION_BIASES,
    scale: ScaleRule::QueryPreAttnScalar,
    embedding_scale: EmbeddingScale::SqrtHidden,
    rope: RopeRule::PerLayerType { global_theta: None, local_theta: "rope_local_base_freq" },
    softcapping: Softcapping { attention: false, logits: true },
    heads_divide_hidden: true,
    ..LLAMA_SCHEMA
};

const GEMMA3_LAYOUT: Layout = Layout {
    norms: SANDWICH_NORMS,
    attention: AttentionLayout { qk_norm: QkNorm::PerHead, ..LLAMA_LAYOUT.attention },
    ..GEMMA_LAYOUT
};

/// `BertConfig`: post-LN encoder layers with biases everywhere and learned positions.
const BERT_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys { norm_eps: "layer_norm_eps", ..KEYS },
    defaults: Defaults {
        vocab_size: Some(30522),
        hidden_size: Some(768),
        intermediate_size: Some(3072),
        num_hidden_layers: Some(12),
        num_attention_heads: Some(12),
        max_position_embeddings: Some(512),
        norm_eps: 1e-12,
        activation: "gelu",
        tie_word_embeddings: true,
        pad_token_id: Some(0),
        ..NO_DEFAULTS
    },
    biases: Biases { qkv: Bias::Always, o: Bias::Always, mlp: Bias::Always, norm: Bias::Always },
    rope: RopeRule::None,
    heads_divide_hidden: true,
    encoder: Some(EncoderSchema { type_vocab_size: Some(2), image: None, head_keys: false }),
    ..LLAMA_SCHEMA
};

/// `RobertaConfig` / `XLMRobertaConfig`: BERT's, with the padding id 1 and BOS/EOS 0/2.
const ROBERTA_DEFAULTS: Defaults =
    Defaults { pad_token_id: Some(1), bos_token_id: Some(0), eos_token_id: Some(2), ..BERT_SCHEMA.defaults };

const BERT_SCHEMA_ROBERTA_DEFAULTS: ConfigSchema = ConfigSchema { defaults: ROBERTA_DEFAULTS, ..BERT_SCHEMA };

const BERT_LAYOUT: Layout = Layout {
    roots: &["bert.", ""],
    heads: &[],
    embed: "embeddings.word_embeddings",
    position_embed: Some("embeddings.position_embeddings"),
    layers: "encoder.layer",
    final_norm: "",
    norm: NormKind::Layer,
    norms: LayerNorms {
        attention_residual: Some("attention.output.LayerNorm"),
        mlp_residual: Some("output.LayerNorm"),
        ..NO_NORMS
    },
    attention: AttentionLayout {
        prefix: "attention",
        qkv: Projections::Separate { q: "self.query", k: "self.key", v: "self.value" },
        out: "output.dense",
        qk_norm: QkNorm::None,
        unbiased_key: false,
    },
    mlp: MlpLayout { prefix: "", kind: MlpKind::Plain("intermediate.dense"), down: "output.dense" },
    moe: None,
    cross_attention: None,
    encoder_stack: None,
    relative_bias: None,
    vision: None,
    encoder: Some(EncoderLayout {
        input: EncoderInput::Tokens,
        token_type_embed: Some("embeddings.token_type_embeddings"),
        embed_norm: Some("embeddings.LayerNorm"),
        positions: EncoderPositions::FromZero,
        pooler: Some("pooler.dense"),
        mlm: MlmHead {
            dense: "cls.predictions.transform.dense",
            act: HeadActivation::Hidden,
            norm: "cls.predictions.transform.LayerNorm",
            decoder: "cls.predictions.decoder",
            bias: "cls.predictions.bias",
        },
        classifier: ClassifierHead::Pooled { out: "classifier" },
        token_classifier: "classifier",
        qa: "qa_outputs",
        shared_transform: false,
    }),
};

const ROBERTA_LAYOUT: Layout = Layout {
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

const BERT_ENCODER: EncoderLayout = match BERT_LAYOUT.encoder {
    Some(e) => e,
    None => panic!("BERT_LAYOUT has an encoder"),
};

/// `ViTConfig`: pre-LN layers with biases (`qkv_bias`), a final LayerNorm, patches in.
const VIT_SCHEMA: ConfigSchema = ConfigSchema {
    biases: Biases { qkv: Bias::KeyDefault("qkv_bias", true), o: Bias::Always, mlp: Bias::Always, norm: Bias::Always },
    defaults: Defaults { vocab_size: Some(0), max_position_embeddings: Some(0), ..BERT_SCHEMA.defaults },
    encoder: Some(EncoderSchema {
        type_vocab_size: None,
        image: Some(ImageDefaults { image_size: 224, patch_size: 16, num_channels: 3 }),
        head_keys: false,
    }),
    ..BERT_SCHEMA
};

const VIT_LAYOUT: Layout = Layout {
    roots: &["vit.", ""],
    embed: "embeddings.patch_embeddings.projection",
    position_embed: None,
    final_norm: "layernorm",
    norms: LayerNorms { pre_attention: Some("layernorm_before"), pre_mlp: Some("layernorm_after"), ..NO_NORMS },
    attention: AttentionLayout {
        prefix: "attention",
        qkv: Projections::Separate { q: "attention.query", k: "attention.key", v: "attention.value" },
        out: "output.dense",
        qk_norm: QkNorm::None,
        unbiased_key: false,
    },
    encoder: Some(EncoderLayout {
        input: EncoderInput::Patches {
            cls: "embeddings.cls_token",
            positions: "embeddings.position_embeddings",
            patch_bias: true,
            flat: false,
        },
        token_type_embed: None,
        embed_norm: None,
        classifier: ClassifierHead::FirstToken { out: "classifier" },
        ..BERT_ENCODER
    }),
    ..BERT_LAYOUT
};

/// `CLIPVisionConfig`: the vision tower of LLaVA (`vision_config`), pre-LN layers with biases,
/// `quick_gelu`, patches in; read through [`resolve`]'s vision-language entry, never as a class
/// of its own.
pub const CLIP_VISION: Architecture = Architecture {
    classes: &[],
    model_types: &["clip_vision_model"],
    config: ConfigSchema {
        keys: Keys { norm_eps: "layer_norm_eps", ..KEYS },
        defaults: Defaults {
            vocab_size: Some(0),
            hidden_size: Some(768),
            intermediate_size: Some(3072),
            num_hidden_layers: Some(12),
            num_attention_heads: Some(12),
            max_position_embeddings: Some(0),
            norm_eps: 1e-5,
            activation: "quick_gelu",
            ..NO_DEFAULTS
        },
        encoder: Some(EncoderSchema {
            type_vocab_size: None,
            image: Some(ImageDefaults { image_size: 224, patch_size: 32, num_channels: 3 }),
            head_keys: false,
        }),
        ..BERT_SCHEMA
    },
    layout: CLIP_VISION_LAYOUT,
};

const CLIP_VISION_LAYOUT: Layout = Layout {
    roots: &["vision_tower.", "vision_tower.vision_model.", "model.vision_tower.vision_model.", "model.vision_tower."],
    embed: "embeddings.patch_embedding",
    position_embed: None,
    layers: "encoder.layers",
    final_norm: "",
    norms: LayerNorms { pre_attention: Some("layer_norm1"), pre_mlp: Some("layer_norm2"), ..NO_NORMS },
    attention: AttentionLayout {
        prefix: "self_attn",
        qkv: Projections::Separate { q: "q_proj", k: "k_proj", v: "v_proj" },
        out: "out_proj",
        qk_norm: QkNorm::None,
        unbiased_key: false,
    },
    mlp: MlpLayout { prefix: "mlp", kind: MlpKind::Plain("fc1"), down: "fc2" },
    encoder: Some(EncoderLayout {
        input: EncoderInput::Patches {
            cls: "embeddings.class_embedding",
            positions: "embeddings.position_embedding.weight",
            patch_bias: false,
            flat: true,
        },
        embed_norm: Some("pre_layrnorm"),
        pooler: None,
        ..VIT_ENCODER
    }),
    ..VIT_LAYOUT
};

const VIT_ENCODER: EncoderLayout = match VIT_LAYOUT.encoder {
    Some(e) => e,
    None => panic!("VIT_LAYOUT has an encoder"),
};

/// LLaVA's image side: CLIP, then `multi_modal_projector` (`linear_1`, activation, `linear_2`).
const LLAVA_VISION: VisionLayout = VisionLayout {
    tower: &CLIP_VISION_LAYOUT,
    kind: TowerKind::Clip,
    projector_roots: &["model.multi_modal_projector.", "multi_modal_projector."],
    projector: ["linear_1", "linear_2"],
};

/// The vision-language classes. The text side is resolved from `text_config` at load time;
/// both key layouts are read: what `save_pretrained` writes (`language_model.model.`,
/// `language_model.lm_head`, `vision_tower.` or the hub's `vision_tower.vision_model.`) and the
/// module names (`model.language_model.`, `lm_head`, `model.vision_tower.vision_model.`).
pub const VISION_LANGUAGE: &[VisionLanguage] = &[
    QWEN2_VL,
    VisionLanguage {
        classes: &["LlavaForConditionalGeneration"],
        model_types: &["llava"],
        default_text_type: "llama",
        flat_text: false,
        vision_types: &["clip_vision_model"],
        text_roots: &["language_model.model.", "model.language_model."],
        heads: &["lm_head", "language_model.lm_head"],
        vision: &LLAVA_VISION,
    },
];

/// `Qwen2VLVisionConfig`: pre-LN blocks (LayerNorm eps fixed at 1e-6), a fused `qkv` with bias,
/// `quick_gelu`, MLP width `embed_dim x mlp_ratio`; read through [`resolve`]'s vision-language
/// entry.
pub const QWEN2_VL_VISION: Architecture = Architecture {
    classes: &[],
    model_types: &["qwen2_vl_vision", "qwen2_vl"],
    config: ConfigSchema {
        keys: Keys {
            hidden_size: "embed_dim",
            num_hidden_layers: "depth",
            num_attention_heads: "num_heads",
            norm_eps: "",
            ..KEYS
        },
        defaults: Defaults {
            vocab_size: Some(0),
            hidden_size: Some(1280),
            intermediate_size: Some(0),
            num_hidden_layers: Some(32),
            num_attention_heads: Some(16),
            max_position_embeddings: Some(0),
            norm_eps: 1e-6,
            activation: "quick_gelu",
            ..NO_DEFAULTS
        },
        encoder: None,
        // the 2-D rotary is built in vision.rs from `rope_theta`
        rope_type_rewrites: &[("axial", "default")],
        ..BERT_SCHEMA
    },
    layout: QWEN2_VL_VISION_LAYOUT,
};

const QWEN2_VL_VISION_LAYOUT: Layout = Layout {
    roots: &["visual.", "model.visual."],
    embed: "patch_embed.proj",
    layers: "blocks",
    norms: LayerNorms { pre_attention: Some("norm1"), pre_mlp: Some("norm2"), ..NO_NORMS },
    attention: AttentionLayout {
        prefix: "attn",
        qkv: Projections::Fused("qkv"),
        out: "proj",
        qk_norm: QkNorm::None,
        unbiased_key: false,
    },
    encoder: None,
    ..CLIP_VISION_LAYOUT
};

/// Qwen2-VL's image side: its tower, closed by the PatchMerger.
const QWEN2_VL_IMAGE: VisionLayout = VisionLayout {
    tower: &QWEN2_VL_VISION_LAYOUT,
    kind: TowerKind::Merged { merger_norm: "merger.ln_q" },
    projector_roots: &["visual.merger.", "model.visual.merger."],
    projector: ["mlp.0", "mlp.2"],
};

/// `Qwen2VLForConditionalGeneration`: the hub's layout (`visual.`, `model.`, `lm_head`) and the
/// module names (`model.visual.`, `model.language_model.`).
const QWEN2_VL: VisionLanguage = VisionLanguage {
    classes: &["Qwen2VLForConditionalGeneration"],
    model_types: &["qwen2_vl"],
    default_text_type: "qwen2_vl_text",
    flat_text: true,
    vision_types: &["qwen2_vl_vision", "qwen2_vl"],
    text_roots: &["model.language_model.", "model."],
    heads: &["lm_head"],
    vision: &QWEN2_VL_IMAGE,
};

/// The vision-language entry of a `model_type` (else of a class), if any.
pub fn vision_language(model_type: Option<&str>, class: &str) -> Option<&'static VisionLanguage> {
    VISION_LANGUAGE.iter().find(|v| match model_type {
        Some(t) => v.model_types.contains(&t),
        None => v.classes.contains(&class),
    })
}

/// `DistilBertConfig`: BERT's layers under other names, no token types, no pooler, every norm's
/// epsilon fixed at 1e-12 by the modeling code (no key read).
const DISTILBERT_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys {
        hidden_size: "dim",
        intermediate_size: "hidden_dim",
        num_hidden_layers: "n_layers",
        num_attention_heads: "n_heads",
        max_position_embeddings: "max_position_embeddings",
        norm_eps: "",
        activation: &["activation"],
        activation_rewrites: &[],
        layers_fallback: None,
        head_dim: "head_dim",
    },
    defaults: Defaults { num_hidden_layers: Some(6), ..BERT_SCHEMA.defaults },
    encoder: Some(EncoderSchema { type_vocab_size: None, image: None, head_keys: false }),
    ..BERT_SCHEMA
};

const DISTILBERT_LAYOUT: Layout = Layout {
    roots: &["distilbert.", ""],
    layers: "transformer.layer",
    norms: LayerNorms {
        attention_residual: Some("sa_layer_norm"),
        mlp_residual: Some("output_layer_norm"),
        ..NO_NORMS
    },
    attention: AttentionLayout {
        prefix: "attention",
        qkv: Projections::Separate { q: "q_lin", k: "k_lin", v: "v_lin" },
        out: "out_lin",
        qk_norm: QkNorm::None,
        unbiased_key: false,
    },
    mlp: MlpLayout { prefix: "ffn", kind: MlpKind::Plain("lin1"), down: "lin2" },
    encoder: Some(EncoderLayout {
        token_type_embed: None,
        pooler: None,
        mlm: MlmHead {
            dense: "vocab_transform",
            act: HeadActivation::Hidden,
            norm: "vocab_layer_norm",
            decoder: "vocab_projector",
            bias: "vocab_projector.bias",
        },
        classifier: ClassifierHead::Dense { dense: "pre_classifier", act: HeadAct::Relu, out: "classifier" },
        ..BERT_ENCODER
    }),
    ..BERT_LAYOUT
};

/// Every family this build exports.
const MODERNBERT_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys { norm_eps: "norm_eps", activation: &["hidden_activation"], ..KEYS },
    defaults: Defaults {
        vocab_size: Some(50368),
        hidden_size: Some(768),
        intermediate_size: Some(1152),
        num_hidden_layers: Some(22),
        num_attention_heads: Some(12),
        max_position_embeddings: Some(8192),
        norm_eps: 1e-5,
        activation: "gelu",
        tie_word_embeddings: true,
        rope_theta: 160_000.0,
        bos_token_id: Some(50281),
        eos_token_id: Some(50282),
        pad_token_id: Some(50283),
        ..NO_DEFAULTS
    },
    layers: LayerRule::LocalGlobal { default_every: 3, default_local: 128 },
    biases: Biases {
        qkv: Bias::Key("attention_bias"),
        o: Bias::Key("attention_bias"),
        mlp: Bias::Key("mlp_bias"),
        norm: Bias::Key("norm_bias"),
    },
    rope: RopeRule::PerLayerType { global_theta: Some("global_rope_theta"), local_theta: "local_rope_theta" },
    encoder: Some(EncoderSchema { type_vocab_size: None, image: None, head_keys: true }),
    ..BERT_SCHEMA
};

const MODERNBERT_LAYOUT: Layout = Layout {
    roots: &["model.", ""],
    embed: "embeddings.tok_embeddings",
    position_embed: None,
    layers: "layers",
    final_norm: "final_norm",
    norms: LayerNorms {
        pre_attention: Some("attn_norm"),
        pre_mlp: Some("mlp_norm"),
        first_without_pre_attention: true,
        ..NO_NORMS
    },
    attention: AttentionLayout {
        prefix: "attn",
        qkv: Projections::Fused("Wqkv"),
        out: "Wo",
        qk_norm: QkNorm::None,
        unbiased_key: false,
    },
    mlp: MlpLayout { prefix: "mlp", kind: MlpKind::GatedFused("Wi"), down: "Wo" },
    encoder: Some(EncoderLayout {
        token_type_embed: None,
        embed_norm: Some("embeddings.norm"),
        pooler: None,
        mlm: MlmHead {
            dense: "head.dense",
            act: HeadActivation::Classifier,
            norm: "head.norm",
            decoder: "decoder",
            bias: "decoder.bias",
        },
        classifier: ClassifierHead::Pooling { out: "classifier" },
        token_classifier: "classifier",
        qa: "classifier",
        shared_transform: true,
        ..BERT_ENCODER
    }),
    ..BERT_LAYOUT
};

const WHISPER_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys {
        hidden_size: "d_model",
        intermediate_size: "decoder_ffn_dim",
        num_hidden_layers: "decoder_layers",
        num_attention_heads: "decoder_attention_heads",
        max_position_embeddings: "max_target_positions",
        // nn.LayerNorm's default epsilon, not configurable
        norm_eps: "",
        activation: &["activation_function"],
        activation_rewrites: &[],
        layers_fallback: None,
        head_dim: "head_dim",
    },
    defaults: Defaults {
        vocab_size: Some(51865),
        hidden_size: Some(384),
        intermediate_size: Some(1536),
        num_hidden_layers: Some(4),
        num_attention_heads: Some(6),
        max_position_embeddings: Some(448),
        norm_eps: 1e-5,
        activation: "gelu",
        tie_word_embeddings: true,
        bos_token_id: Some(50256),
        eos_token_id: Some(50256),
        pad_token_id: Some(50256),
        ..NO_DEFAULTS
    },
    biases: Biases { qkv: Bias::Always, o: Bias::Always, mlp: Bias::Always, norm: Bias::Always },
    rope: RopeRule::None,
    heads_divide_hidden: true,
    seq2seq: Some(Seq2SeqSchema {
        layers: ("encoder_layers", 4),
        heads: ("encoder_attention_heads", 6),
        ffn: ("encoder_ffn_dim", 1536),
        source_positions: Some(("max_source_positions", 1500)),
        mel_bins: Some(("num_mel_bins", 80)),
        decoder_start_token_id: Some(50257),
        t5: false,
    }),
    ..LLAMA_SCHEMA
};

const WHISPER_BASE: Layout = Layout {
    roots: &["model.decoder."],
    heads: &["proj_out"],
    embed: "embed_tokens",
    position_embed: Some("embed_positions"),
    layers: "layers",
    final_norm: "layer_norm",
    norm: NormKind::Layer,
    norms: LayerNorms { pre_attention: Some("self_attn_layer_norm"), pre_mlp: Some("final_layer_norm"), ..NO_NORMS },
    attention: AttentionLayout {
        prefix: "self_attn",
        qkv: Projections::Separate { q: "q_proj", k: "k_proj", v: "v_proj" },
        out: "out_proj",
        qk_norm: QkNorm::None,
        unbiased_key: true,
    },
    mlp: MlpLayout { prefix: "", kind: MlpKind::Plain("fc1"), down: "fc2" },
    moe: None,
    encoder: None,
    cross_attention: None,
    encoder_stack: None,
    relative_bias: None,
    vision: None,
};

const WHISPER_ENCODER: Layout = Layout { roots: &["model.encoder."], ..WHISPER_BASE };

const WHISPER_LAYOUT: Layout = Layout {
    cross_attention: Some(CrossAttentionLayout { prefix: "encoder_attn", norm: "encoder_attn_layer_norm" }),
    encoder_stack: Some(EncoderStack {
        layout: &WHISPER_ENCODER,
        input: StackInput::Speech { convs: ["conv1", "conv2"], positions: "embed_positions" },
    }),
    ..WHISPER_BASE
};

const T5_SCHEMA: ConfigSchema = ConfigSchema {
    keys: Keys {
        hidden_size: "d_model",
        intermediate_size: "d_ff",
        num_hidden_layers: "num_decoder_layers",
        num_attention_heads: "num_heads",
        // relative positions: `n_positions` only bounds the exported lengths
        max_position_embeddings: "n_positions",
        norm_eps: "layer_norm_epsilon",
        activation: &["feed_forward_proj"],
        activation_rewrites: &[],
        layers_fallback: Some("num_layers"),
        head_dim: "d_kv",
    },
    defaults: Defaults {
        vocab_size: Some(32128),
        hidden_size: Some(512),
        intermediate_size: Some(2048),
        num_hidden_layers: Some(6),
        num_attention_heads: Some(8),
        max_position_embeddings: Some(512),
        head_dim: Some(64),
        norm_eps: 1e-6,
        activation: "relu",
        tie_word_embeddings: true,
        pad_token_id: Some(0),
        eos_token_id: Some(1),
        ..NO_DEFAULTS
    },
    biases: NO_BIASES,
    scale: ScaleRule::One,
    rope: RopeRule::None,
    seq2seq: Some(Seq2SeqSchema {
        layers: ("num_layers", 6),
        heads: ("num_heads", 8),
        ffn: ("d_ff", 2048),
        source_positions: None,
        mel_bins: None,
        decoder_start_token_id: None,
        t5: true,
    }),
    ..LLAMA_SCHEMA
};

const T5_BASE: Layout = Layout {
    roots: &[""],
    heads: &["lm_head"],
    embed: "shared",
    position_embed: None,
    layers: "decoder.block",
    final_norm: "decoder.final_layer_norm",
    norm: NormKind::Rms,
    norms: LayerNorms { pre_attention: Some("layer.0.layer_norm"), pre_mlp: Some("layer.2.layer_norm"), ..NO_NORMS },
    attention: AttentionLayout {
        prefix: "layer.0.SelfAttention",
        qkv: Projections::Separate { q: "q", k: "k", v: "v" },
        out: "o",
        qk_norm: QkNorm::None,
        unbiased_key: false,
    },
    mlp: MlpLayout {
        prefix: "layer.2.DenseReluDense",
        kind: MlpKind::GatedIf { gate: "wi_0", up: "wi_1", plain: "wi" },
        down: "wo",
    },
    moe: None,
    encoder: None,
    cross_attention: None,
    encoder_stack: None,
    relative_bias: Some("layer.0.SelfAttention.relative_attention_bias"),
    vision: None,
};

const T5_ENCODER: Layout = Layout {
    layers: "encoder.block",
    final_norm: "encoder.final_layer_norm",
    norms: LayerNorms { pre_mlp: Some("layer.1.layer_norm"), ..T5_BASE.norms },
    mlp: MlpLayout { prefix: "layer.1.DenseReluDense", ..T5_BASE.mlp },
    ..T5_BASE
};

const T5_LAYOUT: Layout = Layout {
    cross_attention: Some(CrossAttentionLayout { prefix: "layer.1.EncDecAttention", norm: "layer.1.layer_norm" }),
    encoder_stack: Some(EncoderStack { layout: &T5_ENCODER, input: StackInput::Tokens }),
    ..T5_BASE
};

pub const ARCHITECTURES: &[Architecture] = &[
    Architecture {
        classes: &["LlamaForCausalLM"],
        model_types: &["llama"],
        config: ConfigSchema { heads_divide_hidden: true, ..LLAMA_SCHEMA },
        layout: LLAMA_LAYOUT,
    },
    // Ministral is Mistral with per-layer `layer_types` (same weights, same defaults).
    Architecture {
        classes: &["MistralForCausalLM", "MinistralForCausalLM"],
        model_types: &["mistral", "ministral"],
        config: ConfigSchema {
            defaults: Defaults {
                intermediate_size: Some(14336),
                max_position_embeddings: Some(4096 * 32),
                num_key_value_heads: Some(8),
                ..LLAMA_SCHEMA.defaults
            },
            layers: LayerRule::Mistral { default_window: Some(4096) },
            biases: NO_BIASES,
            ..LLAMA_SCHEMA
        },
        layout: LLAMA_LAYOUT,
    },
    Architecture {
        classes: &["Qwen2ForCausalLM"],
        model_types: &["qwen2"],
        config: ConfigSchema {
            defaults: QWEN_DEFAULTS,
            layers: LayerRule::Qwen,
            biases: Biases { qkv: Bias::Always, ..NO_BIASES },
            ..LLAMA_SCHEMA
        },
        layout: LLAMA_LAYOUT,
    },
    // `Qwen2VLTextConfig`: Qwen2's blocks with its own defaults, the text model of Qwen2-VL (no
    // class of its own: read through the vision-language entry); its `mrope` rope type is the
    // default rope per row of the multimodal positions (`mrope_section`, see vision.rs).
    Architecture {
        classes: &[],
        model_types: &["qwen2_vl_text"],
        config: ConfigSchema {
            defaults: Defaults {
                vocab_size: Some(152064),
                hidden_size: Some(8192),
                intermediate_size: Some(29568),
                num_hidden_layers: Some(80),
                num_attention_heads: Some(64),
                num_key_value_heads: Some(8),
                max_position_embeddings: Some(32768),
                norm_eps: 1e-5,
                rope_theta: 1_000_000.0,
                bos_token_id: Some(151643),
                eos_token_id: Some(151645),
                ..QWEN_DEFAULTS
            },
            layers: LayerRule::Qwen,
            biases: Biases { qkv: Bias::Always, ..NO_BIASES },
            rope_type_rewrites: &[("mrope", "default")],
            ..LLAMA_SCHEMA
        },
        layout: LLAMA_LAYOUT,
    },
    Architecture {
        classes: &["Qwen3ForCausalLM"],
        model_types: &["qwen3"],
        config: ConfigSchema {
            defaults: Defaults { head_dim: Some(128), ..QWEN_DEFAULTS },
            layers: LayerRule::Qwen,
            biases: ATTENTION_BIASES,
            ..LLAMA_SCHEMA
        },
        layout: Layout {
            attention: AttentionLayout { qk_norm: QkNorm::PerHead, ..LLAMA_LAYOUT.attention },
            ..LLAMA_LAYOUT
        },
    },
    Architecture {
        classes: &["Phi3ForCausalLM"],
        model_types: &["phi3"],
        config: ConfigSchema {
            defaults: Defaults {
                vocab_size: Some(32064),
                hidden_size: Some(3072),
                intermediate_size: Some(8192),
                max_position_embeddings: Some(4096),
                norm_eps: 1e-5,
                bos_token_id: Some(1),
                eos_token_id: Some(32000),
                pad_token_id: Some(32000),
                ..SEVEN_B
            },
            layers: LayerRule::Mistral { default_window: None },
            biases: NO_BIASES,
            partial_rotary: true,
            rope_types: Some(&["default", "longrope"]),
            rope_type_rewrites: &[("su", "longrope"), ("yarn", "longrope")],
            ..LLAMA_SCHEMA
        },
        layout: Layout {
            attention: AttentionLayout { qkv: Projections::Fused("qkv_proj"), ..LLAMA_LAYOUT.attention },
            mlp: MlpLayout { kind: MlpKind::GatedFused("gate_up_proj"), ..LLAMA_LAYOUT.mlp },
            ..LLAMA_LAYOUT
        },
    },
    Architecture {
        classes: &["GemmaForCausalLM"],
        model_types: &["gemma"],
        config: ConfigSchema {
            keys: Keys { activation_rewrites: &[("gelu", "gelu_pytorch_tanh")], ..KEYS },
            defaults: GEMMA_DEFAULTS,
            biases: ATTENTION_BIASES,
            embedding_scale: EmbeddingScale::SqrtHidden,
            ..LLAMA_SCHEMA
        },
        layout: GEMMA_LAYOUT,
    },
    Architecture {
        classes: &["Gemma2ForCausalLM"],
        model_types: &["gemma2"],
        config: ConfigSchema {
            keys: Keys { activation: &["hidden_activation"], ..KEYS },
            defaults: Defaults {
                hidden_size: Some(2304),
                intermediate_size: Some(9216),
                num_hidden_layers: Some(26),
                num_attention_heads: Some(8),
                num_key_value_heads: Some(4),
                attn_softcap: Some(50.0),
                final_softcap: Some(30.0),
                ..GEMMA_DEFAULTS
            },
            layers: LayerRule::Pattern { period: 2, pattern_keys: &[], default_window: 4096 },
            biases: ATTENTION_BIASES,
            scale: ScaleRule::QueryPreAttnScalar,
            embedding_scale: EmbeddingScale::SqrtHidden,
            softcapping: Softcapping { attention: true, logits: true },
            ..LLAMA_SCHEMA
        },
        layout: Layout { norms: SANDWICH_NORMS, ..GEMMA_LAYOUT },
    },
    Architecture {
        classes: &["Gemma3ForCausalLM"],
        model_types: &["gemma3_text"],
        config: GEMMA3_SCHEMA,
        layout: GEMMA3_LAYOUT,
    },
    // The text model of a multimodal Gemma 3 checkpoint: read from `text_config`, stored under
    // `language_model.model.` (what 5.23 still saves) or `model.language_model.` (its in-memory
    // names), with no logit soft-capping (only the causal LM class applies it).
    Architecture {
        classes: &["Gemma3ForConditionalGeneration"],
        model_types: &["gemma3"],
        config: ConfigSchema { text_config: true, softcapping: NO_SOFTCAPPING, ..GEMMA3_SCHEMA },
        layout: Layout {
            roots: &[
                "language_model.model.",
                "model.language_model.model.",
                "language_model.model.model.",
                "model.language_model.",
            ],
            heads: &["lm_head", "language_model.lm_head"],
            ..GEMMA3_LAYOUT
        },
    },
    Architecture {
        classes: &["Qwen3MoeForCausalLM"],
        model_types: &["qwen3_moe"],
        config: ConfigSchema {
            defaults: Defaults {
                hidden_size: Some(2048),
                intermediate_size: Some(6144),
                num_hidden_layers: Some(24),
                num_key_value_heads: Some(4),
                ..QWEN_DEFAULTS
            },
            layers: LayerRule::UniformWhenUsed { default_window: 4096 },
            biases: ATTENTION_BIASES,
            moe: Some(MoeSchema {
                experts_keys: &["num_local_experts", "num_experts"],
                default_experts: 128,
                default_top_k: 8,
                intermediate: Some(("moe_intermediate_size", 768)),
                normalize: NormTopK::Key(false),
                sparse_step: true,
                shared_expert: None,
            }),
            ..LLAMA_SCHEMA
        },
        layout: Layout {
            attention: AttentionLayout { qk_norm: QkNorm::PerHead, ..LLAMA_LAYOUT.attention },
            moe: Some(QWEN_MOE_LAYOUT),
            ..LLAMA_LAYOUT
        },
    },
    Architecture {
        classes: &["MixtralForCausalLM"],
        model_types: &["mixtral"],
        config: ConfigSchema {
            defaults: Defaults {
                intermediate_size: Some(14336),
                max_position_embeddings: Some(4096 * 32),
                num_key_value_heads: Some(8),
                rope_theta: 1_000_000.0,
                norm_eps: 1e-5,
                ..LLAMA_SCHEMA.defaults
            },
            layers: LayerRule::Mistral { default_window: None },
            biases: NO_BIASES,
            moe: Some(MoeSchema {
                experts_keys: &["num_local_experts", "num_experts"],
                default_experts: 8,
                default_top_k: 2,
                intermediate: None,
                normalize: NormTopK::Always,
                sparse_step: false,
                shared_expert: None,
            }),
            ..LLAMA_SCHEMA
        },
        layout: Layout {
            moe: Some(MoeLayout { prefix: "block_sparse_moe", gate: "w1", up: "w3", down: "w2", ..QWEN_MOE_LAYOUT }),
            ..LLAMA_LAYOUT
        },
    },
    Architecture {
        classes: &["Qwen2MoeForCausalLM"],
        model_types: &["qwen2_moe"],
        config: ConfigSchema {
            defaults: Defaults {
                hidden_size: Some(2048),
                intermediate_size: Some(5632),
                num_hidden_layers: Some(24),
                num_attention_heads: Some(16),
                num_key_value_heads: Some(16),
                ..QWEN_DEFAULTS
            },
            layers: LayerRule::EvenBelowMaxWindow,
            biases: Biases { qkv: Bias::KeyDefault("qkv_bias", true), ..NO_BIASES },
            moe: Some(MoeSchema {
                experts_keys: &["num_experts"],
                default_experts: 60,
                default_top_k: 4,
                intermediate: Some(("moe_intermediate_size", 1408)),
                normalize: NormTopK::Key(false),
                sparse_step: true,
                shared_expert: Some(5632),
            }),
            ..LLAMA_SCHEMA
        },
        layout: Layout {
            moe: Some(MoeLayout {
                shared: Some(SharedExpert { mlp: "shared_expert", gate: "shared_expert_gate" }),
                ..QWEN_MOE_LAYOUT
            }),
            ..LLAMA_LAYOUT
        },
    },
    Architecture {
        classes: &["GraniteForCausalLM"],
        model_types: &["granite"],
        config: ConfigSchema {
            defaults: Defaults { bos_token_id: Some(1), eos_token_id: Some(2), ..SEVEN_B },
            scale: ScaleRule::AttentionMultiplier,
            embedding_scale: EmbeddingScale::Multiplier,
            granite_multipliers: true,
            ..LLAMA_SCHEMA
        },
        layout: LLAMA_LAYOUT,
    },
    Architecture {
        classes: &["Olmo2ForCausalLM"],
        model_types: &["olmo2"],
        config: ConfigSchema {
            defaults: Defaults {
                vocab_size: Some(50304),
                norm_eps: 1e-5,
                bos_token_id: None,
                eos_token_id: Some(50279),
                pad_token_id: Some(1),
                ..SEVEN_B
            },
            biases: ATTENTION_BIASES,
            ..LLAMA_SCHEMA
        },
        layout: Layout {
            norms: LayerNorms {
                pre_attention: None,
                post_attention: Some("post_attention_layernorm"),
                pre_mlp: None,
                post_mlp: Some("post_feedforward_layernorm"),
                ..NO_NORMS
            },
            attention: AttentionLayout { qk_norm: QkNorm::Whole, ..LLAMA_LAYOUT.attention },
            ..LLAMA_LAYOUT
        },
    },
    Architecture {
        classes: &["SmolLM3ForCausalLM"],
        model_types: &["smollm3"],
        config: ConfigSchema {
            defaults: Defaults {
                vocab_size: Some(128256),
                hidden_size: Some(2048),
                num_hidden_layers: Some(36),
                num_attention_heads: Some(16),
                num_key_value_heads: Some(4),
                max_position_embeddings: Some(32768),
                tie_word_embeddings: true,
                rope_theta: 2_000_000.0,
                bos_token_id: Some(128000),
                eos_token_id: Some(128001),
                pad_token_id: Some(128004),
                ..SEVEN_B
            },
            layers: LayerRule::UseSlidingWindow,
            rope: RopeRule::NoRopeLayers,
            ..LLAMA_SCHEMA
        },
        layout: LLAMA_LAYOUT,
    },
    Architecture {
        classes: &["GPT2LMHeadModel"],
        model_types: &["gpt2"],
        config: ConfigSchema {
            keys: Keys {
                hidden_size: "n_embd",
                intermediate_size: "n_inner",
                num_hidden_layers: "n_layer",
                num_attention_heads: "n_head",
                max_position_embeddings: "n_positions",
                norm_eps: "layer_norm_epsilon",
                activation: &["activation_function"],
                activation_rewrites: &[],
                layers_fallback: None,
                head_dim: "head_dim",
            },
            defaults: Defaults {
                vocab_size: Some(50257),
                hidden_size: Some(768),
                intermediate_size: None,
                intermediate_times_hidden: Some(4),
                num_hidden_layers: Some(12),
                num_attention_heads: Some(12),
                max_position_embeddings: Some(1024),
                norm_eps: 1e-5,
                activation: "gelu_new",
                tie_word_embeddings: true,
                bos_token_id: Some(50256),
                eos_token_id: Some(50256),
                ..NO_DEFAULTS
            },
            biases: Biases { qkv: Bias::Always, o: Bias::Always, mlp: Bias::Always, norm: Bias::Always },
            scale: ScaleRule::Gpt2,
            rope: RopeRule::None,
            ..LLAMA_SCHEMA
        },
        layout: Layout {
            roots: &["transformer.", ""],
            heads: &["lm_head"],
            embed: "wte",
            position_embed: Some("wpe"),
            layers: "h",
            final_norm: "ln_f",
            norm: NormKind::Layer,
            norms: LayerNorms { pre_attention: Some("ln_1"), post_attention: None, pre_mlp: Some("ln_2"), ..NO_NORMS },
            attention: AttentionLayout {
                prefix: "attn",
                qkv: Projections::FusedConv1d("c_attn"),
                out: "c_proj",
                qk_norm: QkNorm::None,
                unbiased_key: false,
            },
            mlp: MlpLayout { prefix: "mlp", kind: MlpKind::PlainConv1d("c_fc"), down: "c_proj" },
            moe: None,
            encoder: None,
            cross_attention: None,
            encoder_stack: None,
            relative_bias: None,
            vision: None,
        },
    },
    Architecture {
        classes: &[
            "BertModel",
            "BertForMaskedLM",
            "BertForSequenceClassification",
            "BertForTokenClassification",
            "BertForQuestionAnswering",
        ],
        model_types: &["bert"],
        config: BERT_SCHEMA,
        layout: BERT_LAYOUT,
    },
    Architecture {
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
    },
    Architecture {
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
    },
    Architecture {
        classes: &[
            "DistilBertModel",
            "DistilBertForMaskedLM",
            "DistilBertForSequenceClassification",
            "DistilBertForTokenClassification",
            "DistilBertForQuestionAnswering",
        ],
        model_types: &["distilbert"],
        config: DISTILBERT_SCHEMA,
        layout: DISTILBERT_LAYOUT,
    },
    Architecture {
        classes: &["ViTModel", "ViTForImageClassification"],
        model_types: &["vit"],
        config: VIT_SCHEMA,
        layout: VIT_LAYOUT,
    },
    Architecture {
        classes: &[
            "ModernBertModel",
            "ModernBertForMaskedLM",
            "ModernBertForSequenceClassification",
            "ModernBertForTokenClassification",
            "ModernBertForQuestionAnswering",
        ],
        model_types: &["modernbert"],
        config: MODERNBERT_SCHEMA,
        layout: MODERNBERT_LAYOUT,
    },
    Architecture {
        classes: &["WhisperForConditionalGeneration"],
        model_types: &["whisper"],
        config: WHISPER_SCHEMA,
        layout: WHISPER_LAYOUT,
    },
    Architecture {
        classes: &["T5ForConditionalGeneration"],
        model_types: &["t5"],
        config: T5_SCHEMA,
        layout: T5_LAYOUT,
    },
];

/// The class names this build exports.
pub fn supported() -> Vec<String> {
    let text = ARCHITECTURES.iter().flat_map(|a| a.classes.iter());
    text.chain(VISION_LANGUAGE.iter().flat_map(|v| v.classes.iter())).map(|c| c.to_string()).collect()
}

/// The definition of class `name`.
pub fn lookup(name: &str) -> Result<&'static Architecture> {
    ARCHITECTURES
        .iter()
        .find(|a| a.classes.contains(&name))
        .ok_or_else(|| ModelError::UnknownArchitecture { name: name.to_string(), supported: supported() })
}

/// The architecture a config builds: its class's, or for a vision-language checkpoint its
/// text family's blocks under the multimodal roots, with the vision side attached.
pub fn resolve(cfg: &crate::config::ModelConfig) -> Result<Architecture> {
    let Some(v) = &cfg.vision else { return lookup(&cfg.architecture).copied() };
    let text = v.text_family;
    Ok(Architecture {
        layout: Layout { roots: v.entry.text_roots, heads: v.entry.heads, vision: Some(v.entry.vision), ..text.layout },
        ..*text
    })
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
}
