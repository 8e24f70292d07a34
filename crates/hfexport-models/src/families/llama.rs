//! `LlamaForCausalLM` (`LlamaConfig`): the base decoder the other decoder families are written as deltas of
//! (pre-norm RMS, rotary, gated SiLU MLP, separate q/k/v projections).

use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const LLAMA_BIASES: Biases = Biases {
    qkv: Flag::Key("attention_bias"),
    o: Flag::Key("attention_bias"),
    mlp: Flag::Key("mlp_bias"),
    norm: Flag::Never,
    head: Flag::Never,
};

pub const LLAMA_LAYOUT: Layout = Layout {
    roots: &["model."],
    heads: &["lm_head"],
    interleaved_rotary: false,
    embed: "embed_tokens",
    position_embed: None,
    embed_norm: None,
    position_offset: 0,
    positions_from_mask: false,
    embed_projections: None,
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
        sinks: None,
        output_gate: false,
        v_norm: false,
    },
    mlp: MlpLayout { prefix: "mlp", kind: MlpKind::Gated { gate: "gate_proj", up: "up_proj" }, down: "down_proj" },
    moe: None,
    encoder: None,
    cross_attention: None,
    encoder_stack: None,
    relative_bias: None,
    latent: None,
    vision: None,
    per_layer_inputs: None,
    layer_scalar: None,
    ssm: None,
};

pub const LLAMA_SCHEMA: ConfigSchema = ConfigSchema {
    keys: KEYS,
    defaults: Defaults { bos_token_id: Some(1), eos_token_id: Some(2), ..SEVEN_B },
    text_config: false,
    layers: LayerRule::Full,
    biases: LLAMA_BIASES,
    scale: ScaleRule::HeadDim,
    embedding_scale: EmbeddingScale::None,
    rope: RopeRule::Uniform,
    partial_rotary: None,
    parallel: None,
    qk_norm: Flag::Always,
    rope_types: None,
    rope_type_rewrites: &[],
    granite_multipliers: false,
    logit_scale: None,
    softcapping: NO_SOFTCAPPING,
    heads_divide_hidden: false,
    kv_heads: KvHeads::Key,
    refused: &[],
    aliases: &[],
    alibi: None,
    falcon_new_decoder: false,
    pre_norms: Flag::Always,
    norm_affine: Flag::Always,
    embed_dim: None,
    default_rope: None,
    latent: None,
    moe: None,
    encoder: None,
    seq2seq: None,
    ssm: None,
    ffn_auto_adjust: false,
    mup: false,
    placeholders: &[],
    per_layer_heads: None,
    values_from_keys: None,
    kv_sharing: None,
    per_layer_inputs: None,
};

pub const FAMILY: Architecture = Architecture {
    classes: &["LlamaForCausalLM"],
    model_types: &["llama"],
    config: ConfigSchema { heads_divide_hidden: true, ..LLAMA_SCHEMA },
    layout: LLAMA_LAYOUT,
};
