//! `GPTBigCodeForCausalLM` (StarCoder, SantaCoder): GPT-2's block and learned positions with
//! `nn.Linear` projections (no Conv1D), and multi-query attention: `c_attn` is `[q; k; v]` with
//! a single KV head when `multi_query` (the default), else its rows are grouped per head
//! (`[heads, 3, head_dim]`).

use super::gpt2::FAMILY as GPT2;
use super::Architecture;
use crate::layout::*;
use crate::schema::*;

pub const FAMILY: Architecture = Architecture {
    classes: &["GPTBigCodeForCausalLM"],
    model_types: &["gpt_bigcode"],
    config: ConfigSchema {
        defaults: Defaults { activation: "gelu_pytorch_tanh", ..GPT2.config.defaults },
        scale: ScaleRule::Gpt2 { by_layer_key: false },
        kv_heads: KvHeads::MultiQuery("multi_query", true),
        heads_divide_hidden: true,
        ..GPT2.config
    },
    layout: Layout {
        attention: AttentionLayout { qkv: Projections::FusedPerKvGroup("c_attn"), ..GPT2.layout.attention },
        mlp: MlpLayout { kind: MlpKind::Plain("c_fc"), ..GPT2.layout.mlp },
        ..GPT2.layout
    },
};
