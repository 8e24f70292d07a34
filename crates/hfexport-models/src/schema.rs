//! How a family's `config.json` is read: the schema types a family module fills in (key names,
//! transformers' class defaults, the rules that derive layer kinds, biases, scales and ropes),
//! and the presets most families start from. `config/` interprets them.

pub use hfexport_core::RouterScore;

/// How a family's `config.json` is read: the config class of its `model_type`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfigSchema {
    pub keys: Keys,
    pub defaults: Defaults,
    /// A multimodal checkpoint whose text model is read from `text_config` (Gemma 3).
    pub text_config: bool,
    /// Top-level keys (with their class defaults) of media placeholder tokens that the model
    /// embeds as the padding token when no media come with them (Gemma 4's image, video and
    /// audio tokens: `llm_input_ids` in its text-only forward).
    pub placeholders: &'static [(&'static str, i64)],
    /// Token ids past the text vocabulary's own that a multimodal checkpoint embeds with tables
    /// of their own (Gemma 3n's `embed_vision`, `embed_audio`), read from its sub-configs; in the
    /// order of the layout's [`crate::layout::Layout::media_embedders`].
    pub media_tokens: &'static [MediaTokenKeys],
    pub layers: LayerRule,
    pub biases: Biases,
    pub scale: ScaleRule,
    pub embedding_scale: EmbeddingScale,
    pub rope: RopeRule,
    /// `partial_rotary_factor` as the modeling code honours it: the class default when the key
    /// is absent (Phi-3: 1.0, Phi: 0.5); `None`: only 1.0 is accepted (rotary over the whole head).
    pub partial_rotary: Option<f64>,
    /// Attention and MLP side by side off the same residual (Phi, GPT-NeoX, StableLM); `None`:
    /// one after the other.
    pub parallel: Option<Parallel>,
    /// Whether the layout's q/k norm is there (Phi's `qk_layernorm`); `Flag::Always` for the
    /// families whose layout has one unconditionally.
    pub qk_norm: Flag,
    /// The rope types the config class accepts (`None`: every type transformers knows), after
    /// its legacy renames (Phi-3 reads `su` and `yarn` as `longrope`).
    pub rope_types: Option<&'static [&'static str]>,
    pub rope_type_rewrites: &'static [(&'static str, &'static str)],
    /// Granite's `residual_multiplier` and `logits_scaling`.
    pub granite_multipliers: bool,
    /// A factor the logits are multiplied by: its key and class default (Cohere's
    /// `logit_scale`).
    pub logit_scale: Option<(&'static str, f64)>,
    /// Which of `attn_logit_softcapping` / `final_logit_softcapping` the modeling code applies.
    pub softcapping: Softcapping,
    /// `LlamaConfig.validate_architecture`: hidden size a multiple of the heads.
    pub heads_divide_hidden: bool,
    /// How the KV-head count is read.
    pub kv_heads: KvHeads,
    /// Keys whose setting we do not build: a value other than null or false is refused naming
    /// the key (OLMoE's `clip_qkv`).
    pub refused: &'static [&'static str],
    /// `(key, alias)`: the config class also reads `alias` as `key` (its `attribute_map`, or a
    /// legacy keyword such as Bloom's `n_embed`); the alias wins when both are set, as
    /// transformers sets it last.
    pub aliases: &'static [(&'static str, &'static str)],
    /// Attention with linear biases in place of rotary (Bloom always, Falcon with `alibi`).
    pub alibi: Option<AlibiRule>,
    /// Falcon's `new_decoder_architecture`: when the key is set, grouped KV heads from
    /// `num_kv_heads` and always a parallel block, each half with its own norm (the layout's
    /// `LayerNorms::own_parallel`) unless `num_ln_in_parallel_attn` is 1; unset, `kv_heads`
    /// and `parallel` apply.
    pub falcon_new_decoder: bool,
    /// Whether the layout's `pre_attention` and `pre_mlp` norms come before their sublayer (and
    /// the final norm is there); false: after each residual add, with no final norm (OPT's
    /// `do_layer_norm_before`).
    pub pre_norms: Flag,
    /// Whether the LayerNorms have a weight and bias (OPT's `layer_norm_elementwise_affine`).
    pub norm_affine: Flag,
    /// The key of the token embeddings' own width, projected to and from the hidden size where
    /// it differs (OPT's `word_embed_proj_dim`: the layout's `embed_projections`; ELECTRA's and
    /// ALBERT's `embedding_size`: the encoder layout's `embed_projection`).
    pub embed_dim: Option<&'static str>,
    /// The rope dict (JSON) the config class sets when a file has neither `rope_parameters`
    /// nor `rope_scaling` (GPT-OSS: yarn); `None`: the default rope over `rope_theta`.
    pub default_rope: Option<&'static str>,
    /// Multi-head latent attention in every layer (DeepSeek-V2/V3), its keys' class defaults.
    pub latent: Option<LatentRule>,
    /// A sparse mixture-of-experts MLP in the layers it selects (Qwen3-MoE, Mixtral, Qwen2-MoE).
    pub moe: Option<MoeSchema>,
    /// An encoder's config keys (BERT, RoBERTa): `type_vocab_size` and its class default.
    pub encoder: Option<EncoderSchema>,
    /// An encoder-decoder's encoder keys (Whisper); the decoder's are [`Keys`].
    pub seq2seq: Option<Seq2SeqSchema>,
    /// State-space layers in place of attention (Mamba): how their keys are read.
    pub ssm: Option<SsmRule>,
    /// A convolutional vision backbone in place of every layer (ResNet): which config class's
    /// keys describe it.
    pub convnet: Option<ConvNetKind>,
    /// LFM2's `block_auto_adjust_ff_dim`: when set (class default true), the MLP's width is
    /// `int(2 * intermediate_size / 3)`, times `block_ffn_dim_multiplier` (1.0; null: no
    /// rounding) rounded up to a multiple of `block_multiple_of` (256).
    pub ffn_auto_adjust: bool,
    /// The boolean key that makes every MLP a SwiGLU (DINOv2's `use_swiglu_ffn`): gated, SiLU,
    /// `(2 * width / 3 + 7) / 8 * 8` wide, over the layout's `MlpKind::SwiGluIf` weights.
    pub swiglu: Option<&'static str>,
    /// Falcon-H1's µP multipliers (`key_multiplier`, `attention_in_multiplier`,
    /// `attention_out_multiplier`, `ssm_in_multiplier`, `ssm_out_multiplier`,
    /// `ssm_multipliers`, `mlp_multipliers`): [`crate::config::Mup`].
    pub mup: bool,
    /// Attention shapes that differ by layer (Gemma 4): transformers' `per_layer_config`, else
    /// the full-attention layers' head size and KV heads from their own keys.
    pub per_layer_heads: Option<PerLayerHeads>,
    /// The boolean key under which the full-attention layers' values are their keys'
    /// projection (Gemma 4's `attention_k_eq_v`: no `v_proj`), unnormed and without rotary.
    pub values_from_keys: Option<&'static str>,
    /// The last layers reuse the keys and values of an earlier layer (Gemma 4, Gemma 3n).
    pub kv_sharing: Option<KvSharing>,
    /// Per-layer embeddings (Gemma 4's PLE): the keys of their width and vocabulary, with the
    /// class defaults.
    pub per_layer_inputs: Option<PerLayerInputKeys>,
    /// MLP widths and gates that differ by layer (Gemma 3n): `intermediate_size` may be a list
    /// (one per layer), and some layers' gates are sparsified.
    pub per_layer_mlp: Option<PerLayerMlp>,
    /// Residual streams beside the one the layers compute on (Gemma 3n's AltUp).
    pub altup: Option<AltUpKeys>,
    /// A low-rank residual beside each attention (Gemma 3n's LAuReL): the key of its rank and
    /// the class default.
    pub laurel: Option<(&'static str, usize)>,
}

/// A sub-config (`vision_config`) whose hard tokens have their own table: ids from its
/// `vocab_offset` to the next such offset (the last: on), each read at `id - vocab_offset` of
/// `vocab_size` rows of `hidden_size`, normed (`rms_norm_eps`), projected to the text model's
/// width and normed without a weight. The class defaults beside the key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MediaTokenKeys {
    pub config: &'static str,
    pub offset: i64,
    pub vocab: usize,
    pub hidden: usize,
    pub eps: f64,
}

/// How per-layer MLP shapes are read (`Gemma3nTextConfig`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerLayerMlp {
    /// The list of each layer's target sparsity of its gate (`activation_sparsity_pattern`);
    /// absent or null: `default_sparsity` on the first `default_layers` layers when there are
    /// more than that many, the others dense.
    pub sparsity: &'static str,
    pub default_layers: usize,
    pub default_sparsity: f64,
}

/// The keys of AltUp's streams (`Gemma3nTextConfig`), each with its class default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AltUpKeys {
    /// `altup_num_inputs`: the streams, the first the embeddings' own.
    pub streams: (&'static str, usize),
    /// `altup_active_idx`: the stream the layers compute on.
    pub active: (&'static str, usize),
    /// `altup_correct_scale`: the active stream's correction is scaled before it feeds the
    /// per-layer embeddings.
    pub correct_scale: (&'static str, bool),
}

/// How the attention shapes of each layer are read (`Gemma4TextConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerLayerHeads {
    /// Without `per_layer_config`, the full-attention layers' head size: the key and its class
    /// default (`global_head_dim`, 512).
    pub global_head_dim: (&'static str, usize),
    /// ... and their KV heads (`num_global_key_value_heads`; null or absent: the config's),
    /// read only where `values_from_keys` is set.
    pub global_kv_heads: &'static str,
}

/// Keys and values shared by the last layers (`kv_sharing_modes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvSharing {
    /// How many of the last layers reuse (`num_kv_shared_layers`) and the class default (Gemma
    /// 4: 0, Gemma 3n: 15): each the keys and values of the last earlier layer of its
    /// attention kind.
    pub layers: (&'static str, usize),
    /// The boolean key that doubles those layers' MLP width (`use_double_wide_mlp`).
    pub wide_mlp: Option<&'static str>,
}

/// The keys of per-layer embeddings, each with its class default; a width of 0 or null means
/// none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerLayerInputKeys {
    pub size: (&'static str, usize),
    pub vocab: (&'static str, usize),
}

/// The convolutional backbones, each read from its config class's keys
/// (`crate::config::ConvNetConfig`) and built by `crate::convnet`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvNetKind {
    /// `ResNetConfig`: `embedding_size`, `hidden_sizes`, `depths`, `layer_type`,
    /// `downsample_in_first_stage`, `downsample_in_bottleneck`.
    ResNet,
    /// `ConvNextConfig` (`layer_scale_init_value`) or, `v2`, `ConvNextV2Config`: `patch_size`,
    /// `num_stages`, `hidden_sizes`, `depths`.
    ConvNext { v2: bool },
    /// `MobileNetV2Config`: `depth_multiplier`, `depth_divisible_by`, `min_depth`,
    /// `expand_ratio`, `output_stride`, `first_layer_is_expansion`, `finegrained_output`,
    /// `tf_padding`, `layer_norm_eps` (the batch norms'), `hidden_act` (`relu6`).
    MobileNetV2,
    /// `SwinConfig`: `patch_size`, `embed_dim`, `depths`, `num_heads` (a list: one per stage),
    /// `window_size`, `mlp_ratio`, `qkv_bias`, `use_absolute_embeddings` (and, `v2`,
    /// `Swinv2Config`'s `pretrained_window_sizes`): a hierarchical transformer over shifted
    /// windows, built like the convolutional backbones at one image size.
    Swin { v2: bool },
}

/// Where a family's state-space layers are and how their mixer keys are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SsmRule {
    pub mixer: SsmMixer,
    pub layers: SsmLayers,
}

/// Which layers have the state-space mixer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SsmLayers {
    /// Every layer (Mamba, Mamba2).
    Every,
    /// The layers `layer_types` names `kind` (Granite 4.0: `linear_attention`, legacy `mamba`;
    /// LFM2: `conv`); the others attend (`full_attention`, legacy `attention`). Without
    /// `layer_types`: the layers the `attention` key does not list (LFM2's `full_attn_idxs`;
    /// absent too: every layer attends), or with no such key every layer (Granite 4.0).
    LayerTypes { kind: &'static str, attention: Option<&'static str> },
    /// Every layer has attention and the mixer side by side off the same normed input, their
    /// outputs summed (Falcon-H1).
    Parallel,
    /// As `LayerTypes` (`full_attention` attends, `kind` has the mixer); without `layer_types`,
    /// every `interval`-th layer attends (the key and its class default: Qwen3-Next's
    /// `full_attention_interval`, 4).
    Interval { kind: &'static str, interval: (&'static str, usize) },
}

/// The state-space mixer of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SsmMixer {
    /// `MambaConfig`: `state_size` (16), `expand` (2: the inner width is `expand *
    /// hidden_size`, whatever `intermediate_size` says), `conv_kernel` (4), `time_step_rank`
    /// (`"auto"`: `ceil(hidden_size / 16)`), `use_conv_bias` (true), `use_bias` (false).
    Mamba,
    /// Mamba2's (and Bamba's) mixer, its keys and their class defaults; `time_step_limit`
    /// (`(0, inf)`) in every class.
    Mamba2(&'static Mamba2Keys),
    /// LFM2's gated short convolution: `conv_L_cache` taps (3), `conv_bias` (false).
    ShortConv,
    /// The gated DeltaNet of Qwen3-Next and Qwen3.5 (`linear_num_key_heads`,
    /// `linear_num_value_heads`, `linear_key_head_dim`, `linear_value_head_dim`,
    /// `linear_conv_kernel_dim` with their class defaults, the same in both), its projections
    /// stored as `projections` says.
    GatedDeltaNet(DeltaNetProjections),
}

/// How a gated DeltaNet's input projections are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaNetProjections {
    /// Qwen3-Next: `in_proj_qkvz` (per key head: `[q dk | k dk | v r * dv | z r * dv]`, `r` the
    /// value heads per key head) and `in_proj_ba` (per key head: `[b r | a r]`).
    Fused,
    /// Qwen3.5: `in_proj_qkv` (`[q | k | v]`), `in_proj_z`, `in_proj_b`, `in_proj_a`.
    Separate,
}

/// The keys of a Mamba2 mixer, each with its class default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mamba2Keys {
    pub heads: (&'static str, usize),
    /// `None`: `"auto"` only, `expand * hidden_size / heads`.
    pub head_dim: (&'static str, Option<usize>),
    pub groups: (&'static str, usize),
    pub state: (&'static str, usize),
    pub conv_kernel: (&'static str, usize),
    pub expand: (&'static str, usize),
    pub conv_bias: (&'static str, bool),
    pub bias: (&'static str, bool),
    /// The output projection's bias where its key differs from `bias`'s (Falcon-H1's
    /// `projectors_bias`); `None`: `bias`.
    pub out_bias: Option<(&'static str, bool)>,
    /// The key of the scan's width where it need not be `expand * hidden_size` (Falcon-H1's
    /// `mamba_d_ssm`; null there: `expand * hidden_size`); `None`: always that product.
    pub inner: Option<&'static str>,
    /// Whether the gated RMS norm is there and on which side of the gate, where the config
    /// says (Falcon-H1's `mamba_rms_norm`, `mamba_norm_before_gate`); `None`: always there,
    /// after the gate (Mamba2, Bamba).
    pub norm: Option<GatedNormKeys>,
}

/// The keys of an optional gated norm, each with its class default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatedNormKeys {
    pub enabled: (&'static str, bool),
    pub before_gate: (&'static str, bool),
}

/// `Mamba2Config`'s keys.
pub const MAMBA2_KEYS: Mamba2Keys = Mamba2Keys {
    heads: ("num_heads", 128),
    head_dim: ("head_dim", Some(64)),
    groups: ("n_groups", 8),
    state: ("state_size", 128),
    conv_kernel: ("conv_kernel", 4),
    expand: ("expand", 2),
    conv_bias: ("use_conv_bias", true),
    bias: ("use_bias", false),
    out_bias: None,
    inner: None,
    norm: None,
};

/// How multi-head latent attention is configured: the class defaults of `q_lora_rank` (`None`:
/// one query projection), `kv_lora_rank`, `qk_nope_head_dim` and `v_head_dim` (the rotary
/// channels are the head dim key's, `qk_rope_head_dim`), and whether the rotary pairs
/// neighbouring channels (V2 always; V3's `rope_interleave`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatentRule {
    pub q_lora_rank: Option<usize>,
    pub kv_lora_rank: usize,
    pub nope_head_dim: usize,
    pub v_head_dim: usize,
    pub interleave: Flag,
    /// The rope's `partial_rotary_factor` is a fraction of the whole query/key head (`nope +
    /// rope` channels), which must come to the `qk_rope_head_dim` rotary channels (Mistral 4,
    /// whose config sets it so); false: only 1.0, of the rotary channels.
    pub partial_of_head: bool,
    /// Llama 4's query scaling by position ([`crate::config::QueryScale`]), from the rope
    /// dict's `llama_4_scaling_beta` and `original_max_position_embeddings` (Mistral 4).
    pub llama4_query_scale: bool,
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
    /// What `decoder_start_token_id` is when the config does not set it.
    pub decoder_start_token_id: StartToken,
    /// A key giving the decoder a vocabulary of its own (Marian's `decoder_vocab_size`): a size
    /// other than `vocab_size` is refused (one vocabulary is built).
    pub decoder_vocab_size: Option<&'static str>,
    /// T5's keys: `feed_forward_proj` (`relu`, `gated-gelu`, …) gives the activation and whether
    /// the MLP is gated; `relative_attention_num_buckets` / `_max_distance`; the head always tied
    /// when not stored, its input scaled by `d_model ** -0.5` unless `scale_decoder_outputs` (or
    /// an older file's `tie_word_embeddings`) is false.
    pub t5: bool,
}

/// The decoder's first token when `decoder_start_token_id` is not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartToken {
    /// The class default (Whisper's 50257, BART's 2).
    Id(i64),
    /// The padding id (T5).
    Pad,
    /// The BOS id, as `generate` falls back to (mBART, whose class default is null).
    Bos,
}

/// How an encoder's own keys are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderSchema {
    /// The class default of `type_vocab_size`; `None`: the family has no token types; 0: none
    /// unless the config sets it (DeBERTa-v2).
    pub type_vocab_size: Option<usize>,
    /// `image_size`, `patch_size` and `num_channels` with their class defaults (ViT).
    pub image: Option<ImageDefaults>,
    /// ModernBERT's head keys: `classifier_activation` (gelu), `classifier_bias` (false),
    /// `classifier_pooling` (cls) and `decoder_bias` (true); without them the heads' linears
    /// all have biases.
    pub head_keys: bool,
    /// ALBERT's `num_hidden_groups` and `inner_group_num`: the layers are groups of layers
    /// shared along the depth (the encoder layout's `layer_groups`).
    pub layer_groups: bool,
    /// MPNet's relative position bias (`relative_attention_num_buckets`; the encoder layout's
    /// `relative_bias`).
    pub relative_bias: bool,
    /// DeBERTa-v2's keys: `relative_attention`, `position_buckets`, `max_relative_positions`,
    /// `pos_att_type`, `share_att_key`, `norm_rel_ebd`, `position_biased_input` (the encoder
    /// layout's `disentangled`); `conv_kernel_size` and `legacy: false` refused.
    pub disentangled: bool,
    /// The pooler's width and activation keys, and the activation's class default.
    pub pooler: PoolerKeys,
    /// The raw-audio front's keys (`conv_dim`, `feat_extract_norm`, `do_stable_layer_norm`, …:
    /// `crate::config::AudioConfig`), read for wav2vec2, HuBERT and WavLM.
    pub audio: Option<AudioKind>,
    /// BEiT's switches (`crate::config::BeitSettings`): `use_absolute_position_embeddings`
    /// (false), `use_relative_position_bias` and `use_shared_relative_position_bias` (false),
    /// `layer_scale_init_value` (0.1) and `use_mean_pooling` (true).
    pub beit: bool,
}

/// Which raw-audio encoder a config describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioKind {
    /// wav2vec2 and HuBERT: the layers attend with no position bias.
    Wav2Vec2,
    /// WavLM: a bidirectional bucketed relative position bias (`num_buckets`,
    /// `max_bucket_distance`), gated per layer, head and query.
    WavLm,
    /// Data2VecAudio: layer norms after every feature convolution (no `feat_extract_norm` key),
    /// and a stack of `num_conv_pos_embeddings` plain positional convolutions of
    /// `conv_pos_kernel_size`, each followed by a LayerNorm without weights.
    Data2Vec,
}

/// Where a config keeps its pooler's width and activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolerKeys {
    pub size: &'static str,
    /// The width's class default when the key is missing (CLIP's `projection_dim` 512);
    /// `None`: the hidden size (as when the key is null).
    pub default_size: Option<usize>,
    pub act: &'static str,
    pub default_act: &'static str,
}

/// BERT's and ViT's: `pooler_output_size`, `pooler_act` (tanh).
pub const BERT_POOLER: PoolerKeys =
    PoolerKeys { size: "pooler_output_size", default_size: None, act: "pooler_act", default_act: "tanh" };

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageDefaults {
    pub image_size: usize,
    pub patch_size: usize,
    pub num_channels: usize,
}

/// How a mixture-of-experts config is read.
#[derive(Debug, Clone, Copy, PartialEq)]
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
    /// Which layers have the sparse MLP (the others keep a dense MLP of `intermediate_size`).
    pub layers: MoeLayers,
    /// The shared expert's intermediate size, its key and class default, when the family has
    /// one (Qwen2-MoE's `shared_expert_intermediate_size`, GraniteMoeShared's
    /// `shared_intermediate_size`); 0 is none.
    pub shared_expert: Option<SharedSize>,
    pub routing: RoutingRule,
    pub glu: MoeGlu,
    /// The router and the experts' projections have biases (GPT-OSS).
    pub biased: bool,
    /// An expert count of 0 means no mixture of experts: every layer has the dense MLP
    /// (Granite 4.0's `num_local_experts`, whose dense MLP is its `shared_mlp`).
    pub zero_experts_dense: bool,
    /// The sparse layers keep their dense MLP, the experts beside it (Gemma 4; the layout's
    /// [`crate::layout::MoeLayout::beside`] says how the two are combined).
    pub beside_dense: bool,
}

/// Which layers of a MoE config have the sparse MLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoeLayers {
    /// Every layer (Mixtral).
    Every,
    /// Qwen's `decoder_sparse_step` (every step-th layer, 1-based) less `mlp_only_layers`.
    SparseStep,
    /// The layers from `first_k_dense_replace` on (its key and class default; DeepSeek).
    FirstDense(&'static str, usize),
    /// ERNIE 4.5's: layer `i` with `(i + 1) % moe_layer_interval == 0` between
    /// `moe_layer_start_index` and `moe_layer_end_index` (-1: the last layer), both included;
    /// the three class defaults.
    Interval { interval: usize, start: usize, end: i64 },
    /// Llama 4's: the layers listed in `moe_layers`, else every `interleave_moe_layer_step`-th
    /// (1-based; class default 1).
    ListedOrStep,
    /// Every layer when the boolean key is set (class default false), none otherwise (Gemma 4's
    /// `enable_moe_block`).
    WhenKey(&'static str),
}

/// The intermediate size of a shared expert; 0 is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharedSize {
    /// Its own key and class default (Qwen2-MoE's `shared_expert_intermediate_size`).
    Key(&'static str, usize),
    /// This many experts' worth, a key with its class default (DeepSeek's
    /// `n_shared_experts` times `moe_intermediate_size`); of 0 a shared MLP of width 0, whose
    /// down projection's bias (with `mlp_bias`) is still added.
    Experts(&'static str, usize),
    /// This many experts' worth, none when 0 (ERNIE 4.5's `moe_num_shared_experts`).
    ExpertsIfAny(&'static str, usize),
}

/// How a MoE config chooses each token's experts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RoutingRule {
    /// A softmax over the router logits, the top `num_experts_per_tok`, renormalised as
    /// [`MoeSchema::normalize`] says.
    Softmax,
    /// DeepSeek-V2's: `topk_method` `greedy` (over every expert) or `group_limited_greedy`
    /// (`n_group` groups, the `topk_group` with the best expert compete), softmax scores never
    /// renormalised, times `routed_scaling_factor`.
    DeepSeekV2,
    /// Group-limited as DeepSeek-V3's, scored as `score` says (V3 and GLM-4.5: sigmoid plus
    /// the router's `e_score_correction_bias`; Mistral 4: softmax) among the `topk_group` of
    /// `n_group` groups whose two best scores sum highest, renormalised by `norm_topk_prob`,
    /// times `routed_scaling_factor`; the class defaults of those three keys.
    Grouped { score: RouterScore, groups: usize, top_groups: usize, scale: f64 },
    /// ERNIE 4.5's: softmax scores, chosen by `softmax + e_score_correction_bias` (the router's
    /// `moe_statics`), weighted by the chosen probabilities always renormalised (their sum
    /// clamped at `moe_norm_min`, 1e-12: the same quotient in f32 as the +1e-20 of
    /// [`hfexport_core::Routing::Grouped`] for any sum of top-k probabilities).
    SoftmaxCorrected,
    /// Llama 4's: the `num_experts_per_tok` largest router logits, whose sigmoids scale the
    /// chosen experts' input (`hfexport_core::Op::Moe`'s `weigh_input`), never renormalised.
    SigmoidInput,
}

/// How an expert combines its gate and up projections.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MoeGlu {
    /// `act(gate) * up`, with the config's activation.
    Activation,
    /// GPT-OSS's clamped SwiGLU (`hfexport_core::Glu::Clamped`): the keys of its sigmoid gain
    /// and its clamp, with their class defaults.
    Clamped { alpha: (&'static str, f64), limit: (&'static str, f64) },
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
/// A key named `""` (no activation key: `&[]`) is one the config class does not have: its
/// value is the class default whatever a file says (Bloom's MLP is always 4 x hidden, with
/// tanh GELU).
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
    /// The top-level rope base and partial-rotary keys a rope dict's own keys override
    /// (GPT-NeoX: `rotary_emb_base`, `rotary_pct`).
    pub rope_theta: &'static str,
    pub partial_rotary_factor: &'static str,
    /// A key giving the MLP's width as a multiple of the hidden size, read where the
    /// intermediate size's key is absent (DINOv2's `mlp_ratio`: `int(hidden * ratio)`).
    pub mlp_ratio: &'static str,
}

pub const KEYS: Keys = Keys {
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
    rope_theta: "rope_theta",
    partial_rotary_factor: "partial_rotary_factor",
    mlp_ratio: "",
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
    /// The token embeddings' width when the schema's `embed_dim` key is absent (ELECTRA's and
    /// ALBERT's `embedding_size`: 128); `None`: the hidden size.
    pub embed_dim: Option<usize>,
}

/// No class defaults: every size must be spelled out; families start from it and fill in their
/// class's defaults.
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
    embed_dim: None,
};

/// The sizes of a 7B-class decoder most config classes default to.
pub const SEVEN_B: Defaults = Defaults {
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
    /// `sliding_window` (default given), when set, applies to every layer; `layer_types` is
    /// not read (Phi-3, Starcoder2).
    EveryLayer { default_window: Option<usize> },
    /// `use_sliding_window` + `sliding_window` + `max_window_layers`, or `layer_types` (Qwen2/3).
    Qwen,
    /// `layer_types`, else every `period`-th layer (1-based) full and the others sliding;
    /// `pattern_keys` may override the period (Gemma 2: 2, Gemma 3: 6).
    /// `last_full`: the last layer attends fully whatever `layer_types` says (Gemma 4's config
    /// class forces it so).
    Pattern { period: usize, pattern_keys: &'static [&'static str], default_window: usize, last_full: bool },
    /// `layer_types` when given, else the layers without rope slide; `sliding_window` only with
    /// `use_sliding_window` (SmolLM3).
    UseSlidingWindow,
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
    /// `layer_types` (`full_attention`, `chunked_attention`), else the rotary layers (as the
    /// rope rule's `no_rope_layers` says) chunked; the chunk is `attention_chunk_size` (class
    /// default given; null refused when a layer is chunked) (Llama 4).
    Chunked { default_chunk: usize },
}

/// Where a boolean setting comes from: a projection's bias, a parallel block, a q/k norm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    /// The named boolean config key (default false).
    Key(&'static str),
    /// The named boolean config key with its class default (Qwen2-MoE's `qkv_bias`, true).
    KeyDefault(&'static str, bool),
    Always,
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Biases {
    pub qkv: Flag,
    pub o: Flag,
    pub mlp: Flag,
    /// LayerNorm bias (GPT-2's LayerNorms always have one; ModernBERT's `norm_bias`).
    pub norm: Flag,
    /// The LM head's bias (Phi, GPT-J; ERNIE 4.5-MoE's `use_bias`).
    pub head: Flag,
}

pub const NO_BIASES: Biases =
    Biases { qkv: Flag::Never, o: Flag::Never, mlp: Flag::Never, norm: Flag::Never, head: Flag::Never };
pub const ATTENTION_BIASES: Biases = Biases {
    qkv: Flag::Key("attention_bias"),
    o: Flag::Key("attention_bias"),
    mlp: Flag::Never,
    norm: Flag::Never,
    head: Flag::Never,
};

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
    /// `scale_attn_by_inverse_layer_idx` is read (`by_layer_key`: GPT-2, not GPTBigCode) and set.
    Gpt2 { by_layer_key: bool },
    /// No scaling (T5: the scale is folded into its initialisation).
    One,
    /// `(head_dim * (1 + the pos_att_type terms))) ** -0.5`: DeBERTa-v2 divides the content and
    /// each position term by the same square root.
    Disentangled,
}

/// What the token embeddings are multiplied by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingScale {
    None,
    /// `sqrt(hidden_size)`, rounded to the graph's dtype (Gemma).
    SqrtHidden,
    /// `embedding_multiplier` (Granite).
    Multiplier,
    /// `sqrt(hidden_size)` where the boolean `key` (with its class default) says so (BART's
    /// `scale_embedding`).
    SqrtHiddenIf(&'static str, bool),
}

/// How a family's KV-head count is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvHeads {
    /// `num_key_value_heads`; null means as many as attention heads, absent the class default.
    Key,
    /// One KV head when the boolean key (class default given) is set, else one per attention
    /// head (GPTBigCode's `multi_query`).
    MultiQuery(&'static str, bool),
}

/// A parallel block: `h + attn(norm(h)) + mlp(x)`, where `x` is the attention's normed input
/// or the MLP's own norm of `h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallel {
    /// Whether the layers are parallel (Phi: always; GPT-NeoX and StableLM:
    /// `use_parallel_residual` with the class default).
    pub when: Flag,
    /// The MLP reads its own norm of `h` (the layout's `pre_mlp`: GPT-NeoX), else the
    /// attention's normed input (Phi, StableLM).
    pub own_mlp_norm: bool,
}

/// When a family's layers use ALiBi, and in which arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlibiRule {
    pub when: Flag,
    pub kind: Alibi,
}

/// Attention with linear biases: head `h` adds `slope_h * p` to its score of the key at
/// position `p` (counted over the attention mask), the slopes `2^(-8i/n)` of the closest power
/// of two `n` below the head count, then every other slope of `2n` for the remaining heads.
/// Softmax ignores a shift of a whole row, so this equals the paper's `slope * (p - query)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alibi {
    /// Bloom's: slopes and products in f32, added to the scaled scores as they are.
    Bloom,
    /// Falcon's: the slopes, the positions and their products rounded to bfloat16, then
    /// divided by `sqrt(head_dim)` (added to the scaled scores, so scaled like them).
    Falcon,
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
    /// [`Self::NoRopeLayers`], and with `attn_temperature_tuning` (default true) the queries
    /// of the layers without rope scaled by position: `1 + attn_scale * ln(1 + floor((p + 1) /
    /// floor_scale))` (class defaults 0.1 and 8192; Llama 4).
    NoRopeLayersTuned,
    /// No rotary embedding; learned absolute positions instead (GPT-2).
    None,
    /// Only the sliding layers are rotary; the full-attention layers have no position encoding
    /// (Cohere2).
    SlidingOnly,
    /// One rope for every layer that the config cannot change: the class's `rope_theta`, the
    /// default type, over the first `dim_key` channels of each head (its class default given,
    /// else all of them); rope keys are not read (GPT-J's fixed sinusoids).
    Fixed { dim_key: &'static str, default_dim: Option<usize> },
    /// One rope for every attention layer when `key` is `value`, none otherwise (Granite 4.0's
    /// `position_embedding_type`: `"rope"`, else no position encoding).
    WhenKey { key: &'static str, value: &'static str },
}
