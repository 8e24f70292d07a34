//! The architecture registry: `architectures[0]` of `config.json` -> what the decoder builder
//! needs to know about that family. A new Llama-like architecture is one row here.

use crate::error::{ModelError, Result};

/// Where a projection's bias comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bias {
    /// `config.attention_bias` (attention projections) or `config.mlp_bias` (MLP).
    FromConfig,
    Always,
    Never,
}

impl Bias {
    pub fn resolve(self, config_flag: bool) -> bool {
        match self {
            Bias::FromConfig => config_flag,
            Bias::Always => true,
            Bias::Never => false,
        }
    }
}

/// How one architecture differs from the plain Llama decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchSpec {
    /// The Hugging Face class name (`architectures[0]`).
    pub name: &'static str,
    pub qkv_bias: Bias,
    pub o_bias: Bias,
    pub mlp_bias: Bias,
    /// RMSNorm on each head of q and k before rotary (Qwen3).
    pub qk_norm: bool,
    /// Whether `layer_types` / `sliding_window` of the config are honoured.
    pub sliding_window: bool,
}

pub const ARCHITECTURES: &[ArchSpec] = &[
    ArchSpec {
        name: "LlamaForCausalLM",
        qkv_bias: Bias::FromConfig,
        o_bias: Bias::FromConfig,
        mlp_bias: Bias::FromConfig,
        qk_norm: false,
        sliding_window: false,
    },
    ArchSpec {
        name: "MistralForCausalLM",
        qkv_bias: Bias::Never,
        o_bias: Bias::Never,
        mlp_bias: Bias::Never,
        qk_norm: false,
        sliding_window: true,
    },
    // What AutoModel builds for a Mistral config with `layer_types`; same flags as Mistral.
    ArchSpec {
        name: "MinistralForCausalLM",
        qkv_bias: Bias::Never,
        o_bias: Bias::Never,
        mlp_bias: Bias::Never,
        qk_norm: false,
        sliding_window: true,
    },
    ArchSpec {
        name: "Qwen2ForCausalLM",
        qkv_bias: Bias::Always,
        o_bias: Bias::Never,
        mlp_bias: Bias::Never,
        qk_norm: false,
        sliding_window: true,
    },
    ArchSpec {
        name: "Qwen3ForCausalLM",
        qkv_bias: Bias::FromConfig,
        o_bias: Bias::FromConfig,
        mlp_bias: Bias::Never,
        qk_norm: true,
        sliding_window: true,
    },
];

pub fn supported() -> Vec<String> {
    ARCHITECTURES.iter().map(|a| a.name.to_string()).collect()
}

pub fn lookup(name: &str) -> Result<&'static ArchSpec> {
    ARCHITECTURES
        .iter()
        .find(|a| a.name == name)
        .ok_or_else(|| ModelError::UnknownArchitecture { name: name.to_string(), supported: supported() })
}
