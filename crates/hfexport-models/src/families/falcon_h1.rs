//! `FalconH1ForCausalLM` (Falcon-H1, `FalconH1Config`): Llama's attention and a Mamba2 mixer
//! (Bamba's, under `mamba`, its `mamba_*` keys) side by side in every layer off the same
//! `input_layernorm` ([`crate::config::Mixer::AttentionAndMamba2`]), then `pre_ff_layernorm`
//! and a SwiGLU `feed_forward`; `final_layernorm`. What it adds to both: the mixer's width may
//! be `mamba_d_ssm` rather than `mamba_expand * hidden_size`, its gated RMS norm is optional
//! (`mamba_rms_norm`) and may come before the gate (`mamba_norm_before_gate`), its output
//! projection's bias is `projectors_bias`; and µP multipliers ([`crate::config::Mup`]) on the
//! keys, both mixers' inputs and outputs, the parts of the mixer's input projection, the MLP's
//! gate and output, the embeddings (`embedding_multiplier`) and the logits
//! (`lm_head_multiplier`).

use super::granite_moe_hybrid::GRANITE_HYBRID_MAMBA;
use super::llama::{LLAMA_LAYOUT, LLAMA_SCHEMA};
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

const FALCON_H1_MAMBA: Mamba2Keys = Mamba2Keys {
    out_bias: Some(("projectors_bias", false)),
    inner: Some("mamba_d_ssm"),
    norm: Some(GatedNormKeys { enabled: ("mamba_rms_norm", false), before_gate: ("mamba_norm_before_gate", true) }),
    ..GRANITE_HYBRID_MAMBA
};

pub const FAMILY: Architecture = Architecture {
    classes: &["FalconH1ForCausalLM"],
    model_types: &["falcon_h1"],
    config: ConfigSchema {
        defaults: Defaults {
            vocab_size: Some(128_000),
            hidden_size: Some(4096),
            intermediate_size: Some(14336),
            num_hidden_layers: Some(32),
            num_attention_heads: Some(32),
            num_key_value_heads: Some(8),
            max_position_embeddings: Some(8192),
            norm_eps: 1e-5,
            tie_word_embeddings: false,
            bos_token_id: Some(1),
            eos_token_id: Some(2),
            pad_token_id: Some(0),
            ..LLAMA_SCHEMA.defaults
        },
        embedding_scale: EmbeddingScale::Multiplier,
        logit_scale: Some(("lm_head_multiplier", 1.0)),
        ssm: Some(SsmRule { mixer: SsmMixer::Mamba2(&FALCON_H1_MAMBA), layers: SsmLayers::Parallel }),
        mup: true,
        ..LLAMA_SCHEMA
    },
    layout: Layout {
        final_norm: "final_layernorm",
        norms: LayerNorms { pre_mlp: Some("pre_ff_layernorm"), ..PRE_NORMS },
        mlp: MlpLayout { prefix: "feed_forward", ..LLAMA_LAYOUT.mlp },
        ssm: Some("mamba"),
        ..LLAMA_LAYOUT
    },
};
