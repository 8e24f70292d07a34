//! A family's checkpoint-name map and block kinds: where each tensor is stored and which block
//! variant reads it (norm kind and placement, fused or separate projections, q/k norms, MLP and
//! MoE kinds, encoder heads, vision towers). `blocks.rs` and the builders interpret them.

/// Tensor names and block kinds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layout {
    /// Prefixes of the text model, tried in order (the first under which the embedding exists
    /// wins): a multimodal checkpoint nests it (`model.language_model.`), GPT-2 files exist
    /// with and without `transformer.`.
    pub roots: &'static [&'static str],
    /// Names of an untied output head, tried in order.
    pub heads: &'static [&'static str],
    /// The rotary embedding pairs channels `(2i, 2i + 1)` (GPT-J's rotate-every-two) rather than
    /// `(i, i + dim/2)`: the q and k projections' rows are read reordered so the rotate-half
    /// rotary applies (scores are unchanged by one reordering of both q and k channels).
    pub interleaved_rotary: bool,
    pub embed: &'static str,
    /// Other names of the token table, tried in order when `embed` is not stored (BART's
    /// `shared`, which a file may store as the encoder's or decoder's `embed_tokens` instead).
    pub embed_aliases: &'static [&'static str],
    /// Learned absolute position embeddings (GPT-2 `wpe`).
    pub position_embed: Option<&'static str>,
    /// The position table when `position_embed` is not stored: computed, as the family's
    /// modeling code computes it (Marian's, which no file stores; Pegasus').
    pub sinusoid: Option<Sinusoid>,
    /// What every position id is offset by in the learned table, which has that many more
    /// rows (OPT: 2).
    pub position_offset: usize,
    /// A forward pass numbers its tokens over the attention mask (`cumsum(mask) - 1`, OPT)
    /// rather than `0..sequence`, so left padding does not shift them.
    pub positions_from_mask: bool,
    /// Positions count the tokens of `input_ids` that are not the padding id, and the table is
    /// read from row `pad_token_id + 1` on, a padding token reading row `pad_token_id` (fairseq's
    /// `make_positions`: M2M100's encoder; its decoder reads `position_ids` at that offset).
    pub positions_from_ids: bool,
    /// Linears from the token embeddings' width to the hidden size and back before the head
    /// (OPT's `project_in`, `project_out`, when `word_embed_proj_dim` differs).
    pub embed_projections: Option<[&'static str; 2]>,
    /// A norm over the token embeddings (Bloom's `word_embeddings_layernorm`); an encoder's,
    /// after its token types, is [`EncoderLayout::embed_norm`].
    pub embed_norm: Option<&'static str>,
    pub layers: &'static str,
    pub final_norm: &'static str,
    pub norm: NormKind,
    pub norms: LayerNorms,
    pub attention: AttentionLayout,
    pub mlp: MlpLayout,
    /// The sparse MLP of the layers [`crate::schema::MoeSchema`] selects.
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
    /// Multi-head latent attention's projections under the attention prefix (DeepSeek), read
    /// when the config's layers are [`Mixer::LatentAttention`](crate::config::Mixer); the
    /// output projection is the attention layout's `out`.
    pub latent: Option<LatentLayout>,
    /// The state-space mixer's block name under each layer (Mamba's `mixer`), read when the
    /// config's layers are [`Mixer::Mamba`](crate::config::Mixer); its tensors carry the
    /// names of transformers' `MambaMixer`.
    pub ssm: Option<&'static str>,
    /// The vision tower and projector in front of the text model of a vision-language
    /// checkpoint (LLaVA); set by the vision-language config (`config/multimodal.rs`), never in a text family's own layout.
    pub vision: Option<&'static VisionLayout>,
    /// Per-layer embeddings (Gemma 4's PLE), read where the config has them.
    pub per_layer_inputs: Option<PerLayerInputLayout>,
    /// A stored factor `[1]` under each layer that its output is multiplied by (Gemma 4's
    /// `layer_scalar`).
    pub layer_scalar: Option<&'static str>,
    /// AltUp's residual streams (Gemma 3n), read where the config has them.
    pub altup: Option<AltUpLayout>,
    /// LAuReL's low-rank residual beside each attention (Gemma 3n).
    pub laurel: Option<LaurelLayout>,
    /// The tables of the schema's `media_tokens`, in its order (full names from the checkpoint's
    /// top, not under the text model's root).
    pub media_embedders: &'static [MediaEmbedderLayout],
    /// A stored bias added to the logits beside the head (BART's `final_logits_bias`, `[1,
    /// vocab]`); none when the file lacks it, as transformers then leaves it zero.
    pub logits_bias: Option<&'static str>,
    /// Per-channel scales `[hidden]` of the attention's and the MLP's outputs before their
    /// residual adds, under the layer (DINOv2's `layer_scale1.lambda1`, `layer_scale2.lambda1`).
    pub layer_scales: Option<[&'static str; 2]>,
    /// An image-text dual encoder (CLIP, SigLIP): this layout is its text tower's, and this
    /// its image tower and the head joining the two (`crate::dual`).
    pub dual: Option<&'static DualLayout>,
}

/// A position table computed rather than stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sinusoid {
    /// Row `p`: `sin(p / 10000^(2i / d))` for `i < ceil(d / 2)`, then `cos(p / 10000^(2i / d))`
    /// for `i < d / 2` (Marian's and Pegasus' `create_weight`, in float64 then rounded).
    SplitHalves,
    /// fairseq's (M2M100's `get_embedding`), in float32 as torch computes it: with `h = d / 2`,
    /// `sin(p * f_i)` then `cos(p * f_i)` for `f_i = exp(-i * ln(10000) / (h - 1))`, a zero
    /// channel last when `d` is odd, and the padding row all zeros.
    Fairseq,
}

impl Sinusoid {
    /// The table of `rows` positions of `width` channels, row-major; `padding_row` zeroed.
    pub fn table(self, rows: usize, width: usize, padding_row: Option<usize>) -> Vec<f32> {
        let mut table = self.rows(rows, width);
        if let Some(r) = padding_row.filter(|&r| r < rows) {
            table[r * width..(r + 1) * width].fill(0.0);
        }
        table
    }

    fn rows(self, rows: usize, width: usize) -> Vec<f32> {
        match self {
            Sinusoid::Fairseq => {
                let half = width / 2;
                let step = (10000f64.ln() / (half as f64 - 1.0)) as f32;
                let freqs: Vec<f32> = (0..half).map(|i| (i as f32 * -step).exp()).collect();
                (0..rows)
                    .flat_map(|p| {
                        let angles: Vec<f32> = freqs.iter().map(|f| p as f32 * f).collect();
                        let sines: Vec<f32> = angles.iter().map(|a| a.sin()).collect();
                        let cosines: Vec<f32> = angles.iter().map(|a| a.cos()).collect();
                        sines.into_iter().chain(cosines).chain((width % 2 == 1).then_some(0.0))
                    })
                    .collect()
            }
            Sinusoid::SplitHalves => {
                let angle = |p: usize, i: usize| p as f64 / 10000f64.powf((2 * i) as f64 / width as f64);
                let (sines, cosines) = (width.div_ceil(2), width / 2);
                (0..rows)
                    .flat_map(|p| {
                        let s = (0..sines).map(move |i| angle(p, i).sin() as f32);
                        s.chain((0..cosines).map(move |i| angle(p, i).cos() as f32))
                    })
                    .collect()
            }
        }
    }
}

/// One media-token table (Gemma 3n's `Gemma3nMultimodalEmbedder`): `post_norm(projection(
/// norm(embedding[id - offset])))`, `post_norm` without a weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaEmbedderLayout {
    pub prefix: &'static str,
    pub embedding: &'static str,
    pub norm: &'static str,
    pub projection: &'static str,
}

/// AltUp (Gemma 3n): the residual is `n` streams, the first the token embeddings, the others
/// their projections (`projections`, each rescaled to the embeddings' RMS); a layer computes on
/// the active stream of a prediction mixing all streams, and a correction spreads what it added
/// over the others. After the last layer the others are projected back (`unembed`, rescaled
/// to the first's RMS) and the streams averaged. The first two names are under the root, the
/// block `prefix` under each layer, the others under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AltUpLayout {
    pub projections: &'static str,
    pub unembed: &'static str,
    pub prefix: &'static str,
    /// `[n]`-wide linear of the normed (`router_norm`) active stream over `hidden` (`1 / hidden`
    /// scaled), whose `tanh` weighs the streams in the prediction and the correction.
    pub router: &'static str,
    pub router_norm: &'static str,
    /// `[n * n, n]`: the prediction's mixing matrix per token from the router's weights.
    pub prediction: &'static str,
    /// `[n, n]`: each stream's share of the layer's innovation.
    pub correction: &'static str,
    /// `[hidden]`: the factor of the active stream's correction before the per-layer
    /// embeddings read it.
    pub output_scale: &'static str,
}

/// LAuReL: `x + norm(right(left(x)))` over the attention's normed input `x`, added to the
/// attention's residual and the sum divided by `sqrt(2)`; the names under the block `prefix`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaurelLayout {
    pub prefix: &'static str,
    pub left: &'static str,
    pub right: &'static str,
    pub norm: &'static str,
}

/// Per-layer embeddings: a second token embedding of `layers * size` channels (`embed`, scaled
/// by `sqrt(size)`) added to a projection of the token embeddings (`projection`, scaled by
/// `hidden ** -0.5`, RMS-normed per layer by `projection_norm`), the sum times `2 ** -0.5`;
/// each layer then adds `norm(up(act(gate(h)) * its slice))` to its output. The first three
/// names are under the root, the last three under each layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerLayerInputLayout {
    pub embed: &'static str,
    pub projection: &'static str,
    pub projection_norm: &'static str,
    pub gate: &'static str,
    pub up: &'static str,
    pub norm: &'static str,
}

/// An image-text dual encoder's image tower and the head scoring images against texts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DualLayout {
    /// The image tower: its config schema (read from `vision_config`) and its layout, under
    /// its own root (`vision_model.`); its encoder's `pooler` pools it.
    pub vision: &'static crate::families::Architecture,
    /// The scalar whose exponential scales the cosine similarities.
    pub logit_scale: &'static str,
    /// The scalar added to them (SigLIP).
    pub logit_bias: Option<&'static str>,
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
    /// The linear from the embeddings' own width to the hidden size, applied where the widths
    /// differ or the checkpoint stores it.
    pub embed_projection: Option<EmbedProjection>,
    /// ALBERT's shared layers: the config's `LayerGroups` under these names; `None`: layer
    /// `i` at the layout's `layers.<i>`.
    pub layer_groups: Option<LayerGroupNames>,
    /// MPNet's relative position bias table `[rows, heads]` under the root, shared by every
    /// layer (the config's `RelativeAttention`).
    pub relative_bias: Option<&'static str>,
    /// DeBERTa-v2's disentangled attention, read where the config turns it on.
    pub disentangled: Option<DisentangledLayout>,
    pub positions: EncoderPositions,
    /// What gives `pooler_output`, when the family has one.
    pub pooler: Option<Pooler>,
    /// The pooled state projected, in place of `pooler_output`, where the checkpoint stores the
    /// projection (CLIP's `…WithProjection`; a dual encoder's towers always).
    pub projection: Option<PooledProjection>,
    pub mlm: MlmHead,
    pub classifier: ClassifierHead,
    /// Each token attends only to the unpadded tokens up to itself (CLIP's text model).
    pub causal: bool,
    /// The per-token classifier (`token-classification`).
    pub token_classifier: &'static str,
    /// The span head `[2, hidden]` (`question-answering`).
    pub qa: &'static str,
    /// The masked-LM transform (dense, activation, norm) also precedes the token classifier
    /// and the span head: ModernBERT shares one prediction head among its task heads.
    pub shared_transform: bool,
    /// BEiT's relative position bias tables, read where the config has them.
    pub relative_tables: Option<RelativeTables>,
}

/// How an encoder pools its final states into `pooler_output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooler {
    /// `act(dense(h[:, 0]))` of the dense under the root (`pooler_act`: tanh unless the config
    /// says otherwise), when the checkpoint stores it (BERT, ViT).
    Dense(&'static str),
    /// `h[:, 0]` itself, no dense (DINOv2).
    FirstToken,
    /// The state at each row's first end-of-text id (the config's `eos_token_id`; with the
    /// legacy id 2, at the row's largest id), as CLIP's text model pools.
    EndOfText,
    /// The state at the last position, then the dense `head` (SigLIP's text model; as wide as
    /// the config's pooler size, `projection_size`).
    LastToken { head: &'static str },
    /// The class token through the norm under the root (CLIP's image tower, `post_layernorm`).
    NormedFirstToken { norm: &'static str },
    /// BEiT's: the mean of the patch tokens (the class token left out) through the norm under
    /// the root where the config's `use_mean_pooling`, else the class token.
    PatchMeanIf { norm: &'static str },
    /// SigLIP's image pooling under `head`: a learned probe attends over the states
    /// (`torch.nn.MultiheadAttention`), then a norm and a residual MLP.
    Probe { head: &'static str },
}

/// A tower class's projection of its pooled state into a shared space (CLIP's
/// `…WithProjection`): the linear at the top (no bias, the config's pooler size wide,
/// `projection_dim`) and the output it gives in place of `pooler_output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PooledProjection {
    pub linear: &'static str,
    pub output: &'static str,
}

/// An encoder's projection of its embeddings to the hidden size, under the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbedProjection {
    pub name: &'static str,
    pub bias: bool,
    /// Before the embedding norm, which is then as wide as the layers (DeBERTa-v2's
    /// `embed_proj`); else after it (ELECTRA's `embeddings_project`, ALBERT's
    /// `encoder.embedding_hidden_mapping_in`).
    pub before_norm: bool,
}

/// DeBERTa-v2's tensors beyond BERT's: the relative embeddings `[2 * span, hidden]` and their
/// norm under the root, each layer's position projections under its attention prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DisentangledLayout {
    pub rel_embeddings: &'static str,
    pub rel_norm: &'static str,
    pub pos_key: &'static str,
    pub pos_query: &'static str,
}

/// Where ALBERT keeps its shared layers: `<groups>.<g>.<inner>.<j>` under the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerGroupNames {
    pub groups: &'static str,
    pub inner: &'static str,
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
    /// `[patches + 1, hidden]`. The layout's `embed_norm` follows (CLIP's `pre_layrnorm`). DeiT
    /// has a learned `distillation` token `[1, 1, hidden]` after the `cls` one (positions
    /// `[1, patches + 2, hidden]`); SigLIP no `cls` (positions `[patches, hidden]`).
    Patches {
        cls: Option<&'static str>,
        distillation: Option<&'static str>,
        positions: &'static str,
        patch_bias: bool,
        flat: bool,
    },
    /// `pixel_values` through the convolutional backbone the config describes
    /// (`crate::config::ConvNetConfig`, built by `crate::convnet`) in place of any layer:
    /// `last_hidden_state` `[batch, channels, height, width]`, averaged over its positions into
    /// `pooler_output` `[batch, channels, 1, 1]`, which the classifier's linear at `classifier`
    /// reads.
    ConvNet { classifier: &'static str },
    /// `input_values` `[batch, samples]` (raw audio, float32) through the feature encoder and
    /// positional convolution of [`AudioLayout`] into frames, then the layers (wav2vec2,
    /// HuBERT; `crate::audio`).
    Audio(&'static AudioLayout),
}

/// Tensor names of a raw-audio encoder's front and CTC head, under the root; the layers are
/// the layout's own, pre-norm or (`post_residual_norms`) post-norm as the config says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AudioLayout {
    /// `<conv_layers>.<i>.conv` and its `layer_norm` (GroupNorm or LayerNorm).
    pub conv_layers: &'static str,
    /// `layer_norm` (where the config has it) and `projection` from the last convolution's
    /// channels to the hidden size.
    pub projection: &'static str,
    /// The grouped positional convolution, weight-normed over its kernel axis: `weight_g`
    /// and `weight_v`, or `parametrizations.weight.original0` / `original1`.
    pub pos_conv: &'static str,
    /// The encoder's norm: before the layers, or after them (the layout's `final_norm`) when
    /// the layers are pre-norm.
    pub encoder_norm: &'static str,
    /// The CTC head at the top: per-frame logits over the vocabulary.
    pub ctc_head: &'static str,
    /// WavLM's gated relative position bias, where the config has one.
    pub gated_bias: Option<GatedBiasLayout>,
}

/// WavLM's relative position bias: the table `[num_buckets, heads]` under the root (layer 0's,
/// which every layer reuses), and each layer's gate under its attention prefix: the linear
/// `[8, head_dim]` over each head's slice of the attention's input, and the constant
/// `[1, heads, 1, 1]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatedBiasLayout {
    pub table: &'static str,
    pub linear: &'static str,
    pub constant: &'static str,
}

/// How an encoder numbers its positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncoderPositions {
    /// `0..sequence` (BERT).
    FromZero,
    /// RoBERTa's `create_position_ids_from_input_ids`: tokens other than `pad_token_id` are
    /// numbered from `pad_token_id + 1`; padding tokens get `pad_token_id`.
    AfterPadding,
    /// The same after a padding id the family's embeddings fix whatever `pad_token_id` says
    /// (MPNet's `padding_idx = 1`).
    AfterFixedPadding(i64),
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
    /// `out(pooler_output)` of the encoder layout's pooler (BERT's dense pooler, BEiT's).
    Pooled { out: &'static str },
    /// `out(pooler(h))` through the head's own pooler at the top level, configured as the
    /// encoder's would be (DeBERTa-v2's `ContextPooler`: `pooler_hidden_act`).
    OwnPooler { pooler: &'static str, out: &'static str },
    /// `out(h[:, 0])` (ViT's image classifier, after the final norm).
    FirstToken { out: &'static str },
    /// `out(concat(h[:, 0], mean(h[:, 1:])))`: the class token beside the patches' mean
    /// (DINOv2's image classifier, `[labels, 2 * hidden]`).
    ClassAndPatchMean { out: &'static str },
    /// DeiT's: `out(h[:, 0])`, or where the checkpoint stores the teacher class's two heads
    /// (`DeiTForImageClassificationWithTeacher`), `(cls(h[:, 0]) + distillation(h[:, 1])) / 2`.
    Distillable { out: &'static str, cls: &'static str, distillation: &'static str },
    /// `out(act(dense(h[:, 0])))` (RoBERTa's classification head: tanh; DistilBERT's
    /// `pre_classifier`: relu; ELECTRA's: gelu).
    Dense { dense: &'static str, act: HeadAct, out: &'static str },
    /// `out(transform(pool(h)))`, pooled as `classifier_pooling` says (the first token, or the
    /// mean over the unpadded tokens), through the masked-LM transform (ModernBERT).
    Pooling { out: &'static str },
    /// `out(mean(projector(h)))` over every frame (wav2vec2's audio classifier: the projector
    /// `classifier_proj_size` wide).
    MeanProjected { projector: &'static str, out: &'static str },
}

/// BEiT's relative position bias tables `[(2 * rows - 1) * (2 * cols - 1) + 3, heads]` of a
/// `rows x cols` patch grid (the last three rows: class token to patch, patch to class token,
/// class token to itself): each layer's under its attention prefix, the shared one under the
/// root; which the config uses is its `BeitSettings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelativeTables {
    pub per_layer: &'static str,
    pub shared: &'static str,
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
    /// Exact GELU (ELECTRA's classification head).
    Gelu,
}

/// Tensor names of a mixture-of-experts block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoeLayout {
    /// The block under the layer (`mlp`, Mixtral's `block_sparse_moe`).
    pub prefix: &'static str,
    /// The router linear `[experts, hidden]`, names tried in order.
    pub router: &'static [&'static str],
    /// The routing correction `[experts]` under the block (DeepSeek-V3's
    /// `gate.e_score_correction_bias`, ERNIE 4.5's `moe_statics.e_score_correction_bias`), for
    /// the routings that read one.
    pub correction: Option<&'static str>,
    pub experts: &'static str,
    /// Each expert's linears, as checkpoints store them (`experts.<e>.<gate>.weight`).
    pub gate: &'static str,
    pub up: &'static str,
    pub down: &'static str,
    /// Where stacked experts are kept when the per-expert tensors are absent: under
    /// `<fused_prefix>.`, the `[gate_up, down]` names tried in order (transformers 5's
    /// in-memory `experts.gate_up_proj [E, 2 * inter, hidden]` and `experts.down_proj
    /// [E, hidden, inter]`; GraniteMoe's files: `input_linear.weight`, `output_linear.weight`).
    pub fused_prefix: &'static str,
    pub fused: &'static [[&'static str; 2]],
    pub form: StackedForm,
    pub shared: Option<SharedExpert>,
    /// How experts beside a dense MLP are routed and combined (Gemma 4), names under the layer.
    pub beside: Option<BesideDense>,
}

/// Experts beside the layer's dense MLP, both reading the residual stream `h` (Gemma 4): the
/// router's input is `h` RMS-normed without weight, times `router_scale` `[hidden]` and
/// `hidden ** -0.5`; the experts read `pre_norm(h)`, each expert's output weighed by its
/// `expert_scale` `[experts]` too; the layer's MLP output is `dense_norm(dense) +
/// experts_norm(experts)`, then the layout's `post_mlp` norm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BesideDense {
    pub router_scale: &'static str,
    pub expert_scale: &'static str,
    pub pre_norm: &'static str,
    pub dense_norm: &'static str,
    pub experts_norm: &'static str,
}

/// How stacked experts lay out their projections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackedForm {
    /// `gate_up [E, 2 * inter, hidden]`, the gate's rows first, and `down [E, hidden, inter]`.
    GateRowsFirst,
    /// GPT-OSS's: `gate_up [E, hidden, 2 * inter]` whose columns alternate gate and up,
    /// `down [E, inter, hidden]`, each with a `<name>_bias` (`[E, 2 * inter]`, `[E, hidden]`);
    /// or, in an MXFP4 checkpoint, `<name>_blocks` / `<name>_scales` of the `[out, in]` rows
    /// (transformers' `Mxfp4GptOssExperts`).
    TransposedInterleaved,
    /// Llama 4's: `gate_up [E, hidden, 2 * inter]` whose first `inter` columns are the gate's,
    /// `down [E, inter, hidden]`, no biases.
    TransposedGateFirst,
}

/// A dense gated MLP every token takes (GraniteMoeShared's `shared_mlp`), scaled by
/// `sigmoid(gate(x))` where it has a gate (Qwen2-MoE). Names are under the layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedExpert {
    pub mlp: MlpLayout,
    pub gate: Option<&'static str>,
}

/// transformers 5's in-memory names of stacked experts.
pub const STACKED_EXPERTS: [&str; 2] = ["experts.gate_up_proj", "experts.down_proj"];

/// The normalisation every norm of a family uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormKind {
    /// `w * x / rms(x)`.
    Rms,
    /// `(1 + w) * x / rms(x)` (Gemma).
    RmsOnePlus,
    /// LayerNorm with weight and (per [`crate::schema::Biases::norm`]) bias (GPT-2).
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
    /// The attention's and the MLP's norms of a parallel block in which each half has its own,
    /// where they are not `pre_attention` and `pre_mlp` (Falcon's new decoder: `ln_attn`,
    /// `ln_mlp`).
    pub own_parallel: Option<[&'static str; 2]>,
}

pub const NO_NORMS: LayerNorms = LayerNorms {
    pre_attention: None,
    post_attention: None,
    pre_mlp: None,
    post_mlp: None,
    attention_residual: None,
    mlp_residual: None,
    first_without_pre_attention: false,
    own_parallel: None,
};

pub const PRE_NORMS: LayerNorms = LayerNorms {
    pre_attention: Some("input_layernorm"),
    post_attention: None,
    pre_mlp: Some("post_attention_layernorm"),
    post_mlp: None,
    attention_residual: None,
    mlp_residual: None,
    first_without_pre_attention: false,
    own_parallel: None,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionLayout {
    pub prefix: &'static str,
    pub qkv: Projections,
    pub out: &'static str,
    pub qk_norm: QkNorm,
    /// The key projection has no bias whatever the others have (Whisper).
    pub unbiased_key: bool,
    /// Learned attention sinks `[heads]` under the attention (GPT-OSS's `sinks`): one more
    /// logit in every query's softmax whose probability is dropped.
    pub sinks: Option<&'static str>,
    /// The query projection gives each head's query and then its output gate (`[query |
    /// gate]` per head, twice the rows); the attention's output is multiplied by
    /// `sigmoid(gate)` before the output projection (Qwen3-Next, Qwen3.5).
    pub output_gate: bool,
    /// The values are RMS-normed per head without a weight (Gemma 4's `v_norm`).
    pub v_norm: bool,
}

/// The projections of multi-head latent attention: the queries through `q` (no `q_lora_rank`)
/// or `q_b(norm_q(q_a(x)))`; the compressed latent and the shared rotary key from `kv_a`, the
/// latent normed by `kv_norm`, expanded to each head's key and value channels by `kv_b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatentLayout {
    pub q: &'static str,
    pub q_a: &'static str,
    pub q_norm: &'static str,
    pub q_b: &'static str,
    pub kv_a: &'static str,
    pub kv_norm: &'static str,
    pub kv_b: &'static str,
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
    /// One linear whose rows are grouped per KV head: `[kv_heads, q_per_kv + 2, head_dim]`
    /// (GPT-NeoX's `query_key_value`, one query per group; GPTBigCode's `c_attn`, one group
    /// under multi-query attention, else one per head).
    FusedPerKvGroup(&'static str),
}

/// Normalisation of queries and keys before the rotary embedding, with the names of the q and
/// k norms under the attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QkNorm {
    None,
    /// Per head over `head_dim` (Qwen3, Gemma 3; Phi's `q_layernorm`).
    PerHead([&'static str; 2]),
    /// Over the whole projection (OLMo 2).
    Whole([&'static str; 2]),
    /// Per head over `head_dim`, a LayerNorm without bias whose weight has one row per head
    /// (`[heads, head_dim]`: Cohere's `use_qk_norm`).
    PerHeadRows([&'static str; 2]),
    /// The same with each head's row stored as its own norm, `<name>.norms.<head>.weight`
    /// (StableLM's `qk_layernorm`).
    PerHeadNorms([&'static str; 2]),
    /// Per head over `head_dim`, an RMS norm without weight, in the rotary layers only, after
    /// the rotary (Llama 4's L2 norm: it undoes the factor a yarn or longrope rope scales cos
    /// and sin by, so it cannot come first).
    UnitOnRotary,
}

/// The q/k norm names of most families.
pub const QK_NORMS: [&str; 2] = ["q_norm", "k_norm"];

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
    /// `down(act(a) * b)` over the halves `[a; b]` of the linear `fused` when the config's MLP is
    /// gated (DINOv2's `use_swiglu_ffn`: `weights_in`, `weights_out`), else `Plain(plain)` with
    /// the layout's down.
    SwiGluIf { fused: &'static str, down: &'static str, plain: &'static str },
}
