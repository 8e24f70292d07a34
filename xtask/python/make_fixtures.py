#!/usr/bin/env python3
"""Make the tiny random checkpoints and golden outputs under tests/fixtures/.

Usage: make_fixtures.py OUTDIR   (normally through `cargo xtask fixtures`, which first
installs the pinned [python.oracle] packages from versions.toml into .venv/).

Each fixture is a folder holding what `save_pretrained(..., safe_serialization=True)` writes
(config.json, generation_config.json, model.safetensors) plus golden.safetensors:

    single.input_ids      int64  [1, 7]        random ids in [1, vocab)
    single.attention_mask int64  [1, 7]        ones
    single.logits         f32    [1, 7, vocab] model(input_ids=..., attention_mask=...).logits
    batch.input_ids       int64  [2, 7]        row 0: 3 pad ids (0) then 4 real tokens (left padding);
                                               row 1: 7 real tokens
    batch.attention_mask  int64  [2, 7]        0 at the pads
    batch.logits          f32    [2, 7, vocab]
    greedy.prompt_ids     int64  [1, 5]
    greedy.tokens         int64  [1, 16]       the 16 new tokens of greedy model.generate(...)

Encoder fixtures (EncoderSpec: BERT, RoBERTa, XLM-RoBERTa with their task heads) hold instead,
for the cases `single` ([1, 7], no padding) and `batch` ([2, 7], row 1 right-padded by 3 with
the config's pad id): `<case>.input_ids`, `<case>.attention_mask`, `<case>.token_type_ids`
(second half of each row type 1; only when type_vocab_size > 1) and every output of the
model's forward under its transformers name (`<case>.last_hidden_state`, `<case>.logits`,
`<case>.start_logits`, ...).

Every golden is computed by a fresh model loaded from the saved folder (dynamic RoPE keeps
state between calls, and the goldens must describe the checkpoint on disk, not the model in
memory). Everything is float32 with eager attention, and fully deterministic.
"""

import inspect
import json
import shutil
import struct
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np
import safetensors
import safetensors.torch
import torch
import transformers
from decoder_fixtures import decoder_round2_specs
from fixture_spec import Spec, attention_implementation, causal_lm_class
from routing import router_gap
from ssm_fixtures import ssm_specs
from flagship_fixtures import flagship_specs
from safetensors.torch import save_file
from transformers import (
    Swinv2Config,
    Swinv2ForImageClassification,
    Swinv2Model,
    SwinConfig,
    SwinForImageClassification,
    SwinModel,
    Gemma2Config,
    Gemma2ForCausalLM,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    GemmaConfig,
    GemmaForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    GraniteConfig,
    GraniteForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    MixtralConfig,
    MixtralForCausalLM,
    Olmo2Config,
    Olmo2ForCausalLM,
    Phi3Config,
    Phi3ForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2MoeConfig,
    Qwen2MoeForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
    SmolLM3Config,
    SmolLM3ForCausalLM,
)

SEQ = 7
PAD_ID = 0
BATCH_REAL = 4  # real tokens of the left-padded row
PROMPT_LEN = 5
NEW_TOKENS = 16
STD = 0.15
# Smallest accepted top-1/top-2 logit gap at each greedy step, so float32 rounding differences
# in another implementation cannot flip a token. Prompts are redrawn (deterministically) until
# the greedy run keeps this margin.
MIN_GREEDY_MARGIN = 0.01
MIN_ROUTER_GAP = 1e-4
PROMPT_TRIES = 50
# strict_greedy fixtures: distinct tokens among the 16 greedy ones, and among the last 8.
MIN_DISTINCT = 6
MIN_DISTINCT_LATE = 3


def fixture_specs():
    """The fixtures, in manifest order."""
    specs = []

    llama_rope_scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
    }
    llama = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        # pre-v5 keyword form; transformers folds it into `rope_parameters`
        rope_theta=10000.0,
        rope_scaling=dict(llama_rope_scaling),
        attention_bias=True,
        mlp_bias=True,
        tie_word_embeddings=False,
    )

    def llama_old_form(cfg):
        # transformers 5 writes `rope_parameters`; rewrite it into the pre-v5 form
        # (top-level `rope_theta` + `rope_scaling`) so the fixture tests old-form parsing.
        out = {}
        for key, value in cfg.items():
            if key == "rope_parameters":
                rope = dict(value)
                out["rope_theta"] = rope.pop("rope_theta")
                out["rope_scaling"] = rope
            else:
                out[key] = value
        assert out["rope_scaling"] == llama_rope_scaling, out["rope_scaling"]
        return out

    specs.append(Spec("llama", 1, LlamaForCausalLM, llama, llama_old_form))

    mistral = MistralConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=32,
        sliding_window=4,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=True,
        max_position_embeddings=64,
    )
    specs.append(Spec("mistral", 2, MistralForCausalLM, mistral, None))

    qwen2 = Qwen2Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 16,
        },
        use_sliding_window=True,
        sliding_window=3,
        max_window_layers=1,
        tie_word_embeddings=True,
        max_position_embeddings=64,
    )
    specs.append(Spec("qwen2", 3, Qwen2ForCausalLM, qwen2, None))

    qwen3 = Qwen3Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=24,
        rope_parameters={"rope_type": "dynamic", "rope_theta": 1000000.0, "factor": 4.0},
        max_position_embeddings=6,
        hidden_act="gelu_pytorch_tanh",
        tie_word_embeddings=False,
    )
    specs.append(Spec("qwen3", 4, Qwen3ForCausalLM, qwen3, None))

    llama_linear_tied = LlamaConfig(
        vocab_size=200,
        hidden_size=48,
        intermediate_size=80,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=3,
        rope_parameters={"rope_type": "linear", "rope_theta": 500000.0, "factor": 2.0},
        tie_word_embeddings=True,
        rms_norm_eps=1e-5,
    )
    specs.append(Spec("llama_linear_tied", 5, LlamaForCausalLM, llama_linear_tied, None))
    specs.extend(new_family_specs())
    specs.extend(moe_specs())
    specs.extend(decoder_round2_specs())
    specs.extend(ssm_specs())
    specs.extend(flagship_specs())
    return specs


def new_family_specs():
    """Phi-3, Gemma 1/2/3, Granite, OLMo 2, SmolLM3 and GPT-2 (issue 13), each variant set so
    that it changes the logits: soft-caps that bite, windows shorter than the 7-token sequence,
    multipliers away from 1, rotary factors well apart."""
    specs = []

    # Phi-4-mini style: partial rotary, longrope. original_max_position_embeddings 4 is below the
    # 7-token forward goldens and the 5-token greedy prompt: long factors throughout (phi3_short
    # covers the short ones). A run that crosses over mid-generation is what transformers'
    # generate handles by recomputing its cache, which a cached export does not do (see
    # docs/io-contracts.md).
    phi3 = Phi3Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        original_max_position_embeddings=4,
        rope_parameters={
            "rope_type": "longrope",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.5,  # head_dim 16 -> 8 rotary dims -> 4 factors
            "short_factor": [1.0, 1.3, 1.7, 2.2],
            "long_factor": [1.5, 2.0, 2.5, 3.0],
        },
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,  # the class default 32000 is outside the vocab
    )

    def phi4_mini_form(cfg):
        # The form of Phi-3.5 / Phi-4-mini config.json files: rope_theta, partial_rotary_factor
        # and original_max_position_embeddings at the top level, the factors in `rope_scaling`
        # keyed "type".
        out = {}
        for key, value in cfg.items():
            if key == "rope_parameters":
                rope = dict(value)
                out["rope_theta"] = rope.pop("rope_theta")
                out["partial_rotary_factor"] = rope.pop("partial_rotary_factor")
                assert rope.pop("original_max_position_embeddings") == cfg["original_max_position_embeddings"]
                out["rope_scaling"] = {"type": rope.pop("rope_type"), **rope}
            else:
                out[key] = value
        return out

    specs.append(
        Spec(
            "phi3",
            6,
            Phi3ForCausalLM,
            phi3,
            phi4_mini_form,
            "fused qkv_proj/gate_up_proj, partial rotary 0.5, longrope with original_max_position_embeddings 4 "
            "(forward goldens and greedy run on the long factors), "
            "Phi-4-mini config.json form (top-level rope_theta/partial_rotary_factor, rope_scaling keyed type), "
            "untied head, kv heads 2 of 4",
            strict_greedy=True,
        )
    )

    phi3_short = Phi3Config(
        vocab_size=256,
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        max_position_embeddings=128,
        original_max_position_embeddings=32,
        rope_parameters={
            "rope_type": "longrope",
            "rope_theta": 10000.0,
            "short_factor": [1.0, 1.5, 2.0, 3.0],  # head_dim 8 -> 4 factors
            "long_factor": [4.0, 6.0, 8.0, 12.0],
        },
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    specs.append(
        Spec(
            "phi3_short",
            7,
            Phi3ForCausalLM,
            phi3_short,
            None,
            "longrope on the short factors throughout (original_max_position_embeddings 32, attention factor "
            "from max_position_embeddings 128), full rotary, rope_parameters form, tied head, kv heads 2 of 6, "
            "head_dim 8",
            strict_greedy=True,
        )
    )

    gemma = GemmaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=24,  # not hidden / heads
        hidden_act="gelu_pytorch_tanh",
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=True,
    )

    def gemma_legacy_act(cfg):
        # gemma-1.1 config.json files say hidden_act "gelu" (which GemmaConfig reads as the tanh
        # approximation) next to hidden_activation "gelu_pytorch_tanh".
        assert cfg["hidden_act"] == "gelu_pytorch_tanh"
        out = {}
        for key, value in cfg.items():
            if key == "hidden_act":
                out["hidden_act"] = "gelu"
                out["hidden_activation"] = "gelu_pytorch_tanh"
            else:
                out[key] = value
        return out

    specs.append(
        Spec(
            "gemma",
            8,
            GemmaForCausalLM,
            gemma,
            gemma_legacy_act,
            "(1 + w) RMSNorm, embedding scaled by sqrt(hidden), head_dim 24 (not hidden/heads), MQA, "
            "hidden_act gelu meaning tanh GELU (gemma-1.1 form, with hidden_activation), tied head",
            strict_greedy=True,
        )
    )

    gemma2 = Gemma2Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,  # layer_types default: sliding, full
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        query_pre_attn_scalar=24,  # attention scale 24**-0.5, not head_dim**-0.5
        sliding_window=3,
        attn_logit_softcapping=5.0,
        final_logit_softcapping=3.0,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    specs.append(
        Spec(
            "gemma2",
            9,
            Gemma2ForCausalLM,
            gemma2,
            None,
            "sandwich norms, attention soft-cap 5 and final logit soft-cap 3, query_pre_attn_scalar 24 with "
            "head_dim 16, sliding window 3 on layer 0 (layer_types sliding, full), tied head",
            strict_greedy=True,
            embed_std=0.08,
        )
    )

    gemma3 = Gemma3TextConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        query_pre_attn_scalar=32,
        sliding_window=3,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
        },
        max_position_embeddings=64,
    )
    specs.append(
        Spec(
            "gemma3",
            10,
            Gemma3ForCausalLM,
            gemma3,
            None,
            "gemma3_text, per-head q/k norm, layer_types sliding, sliding, full with window 3, per-layer-type rope "
            "(sliding: default 1e4; full: linear x2, 1e6), query_pre_attn_scalar 32 with head_dim 16, tied head",
            strict_greedy=True,
            embed_std=0.08,
        )
    )

    granite = GraniteConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        embedding_multiplier=6.0,
        attention_multiplier=0.125,  # head_dim 16: the usual scale would be 0.25
        residual_multiplier=0.4,
        logits_scaling=2.5,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        # Untied: tied to an embedding multiplied by 6, every greedy run repeats one token.
        tie_word_embeddings=False,
    )
    specs.append(
        Spec(
            "granite",
            11,
            GraniteForCausalLM,
            granite,
            None,
            "embedding_multiplier 6, attention_multiplier 0.125 as the attention scale (head_dim 16), "
            "residual_multiplier 0.4, logits_scaling 2.5, untied head",
            strict_greedy=True,
        )
    )

    olmo2 = Olmo2Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        eos_token_id=2,  # the class default 50279 is outside the vocab
        tie_word_embeddings=False,
    )
    specs.append(
        Spec(
            "olmo2",
            12,
            Olmo2ForCausalLM,
            olmo2,
            None,
            "post-norms (after attention and MLP, no pre-norm), q/k RMSNorm over the whole projection "
            "(k_norm over kv heads 2 x 16), untied head",
            strict_greedy=True,
        )
    )

    smollm3 = SmolLM3Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        # Explicit, and not what the saved no_rope_layer_interval (4) would derive ([1, 1, 1]).
        no_rope_layers=[1, 0, 1],
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 2000000.0},
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,  # the class defaults (128000-128004) are outside the vocab
        tie_word_embeddings=True,
    )
    specs.append(
        Spec(
            "smollm3",
            13,
            SmolLM3ForCausalLM,
            smollm3,
            None,
            "no rope on layer 1 (explicit no_rope_layers [1, 0, 1], which the saved no_rope_layer_interval 4 "
            "would not derive), tied head, 3 layers",
            strict_greedy=True,
        )
    )

    gpt2 = GPT2Config(
        vocab_size=256,
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_positions=64,
        n_inner=None,  # 4 * n_embd
        activation_function="gelu_new",
        tie_word_embeddings=True,
        bos_token_id=255,  # GPT-2's <|endoftext|> is its last id
        eos_token_id=255,
    )
    specs.append(
        Spec(
            "gpt2",
            14,
            GPT2LMHeadModel,
            gpt2,
            None,
            "n_embd/n_layer/n_head/n_positions keys, learned absolute positions, LayerNorm with bias, "
            "Conv1D c_attn/c_proj/c_fc (transposed layout, fused qkv), n_inner null (4 x n_embd), gelu_new, tied head",
            strict_greedy=True,
        )
    )
    return specs


def moe_specs():
    """Qwen3-MoE, Mixtral and Qwen2-MoE (issue 14): top-1 and top-2, with and without
    renormalisation, a shared expert, sparse layers mixed with dense MLP layers."""
    qwen3_moe = Qwen3MoeConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        moe_intermediate_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_experts=8,
        num_experts_per_tok=2,
        norm_topk_prob=True,
        decoder_sparse_step=1,
        mlp_only_layers=[1],
        tie_word_embeddings=False,
    )
    mixtral = MixtralConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=1,
        sliding_window=4,
        tie_word_embeddings=False,
    )
    qwen2_moe = Qwen2MoeConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        moe_intermediate_size=24,
        shared_expert_intermediate_size=40,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_experts=6,
        num_experts_per_tok=2,
        norm_topk_prob=False,
        decoder_sparse_step=2,
        tie_word_embeddings=False,
    )
    return [
        Spec(
            "qwen3_moe",
            15,
            Qwen3MoeForCausalLM,
            qwen3_moe,
            None,
            "8 experts top-2 renormalised, layer 1 dense (mlp_only_layers), q/k norm, 3 layers",
            strict_greedy=True,
        ),
        Spec(
            "mixtral",
            16,
            MixtralForCausalLM,
            mixtral,
            None,
            "4 experts top-1 (w1/w3/w2 under block_sparse_moe), sliding window 4",
            strict_greedy=True,
        ),
        Spec(
            "qwen2_moe",
            17,
            Qwen2MoeForCausalLM,
            qwen2_moe,
            None,
            "6 experts top-2 not renormalised, shared expert with sigmoid gate, decoder_sparse_step 2 "
            "(layers 0 and 2 dense), qkv bias",
            strict_greedy=True,
        ),
    ]


def is_norm_weight(name):
    """RMSNorm / LayerNorm scales (GPT-2 names its LayerNorms ln_1, ln_2, ln_f), and the factors
    that multiply like one (Gemma 4's router.scale and router.per_expert_scale)."""
    factor = name.endswith(("router.scale", "router.per_expert_scale"))
    return factor or (name.endswith(".weight") and ("norm" in name or ".ln_" in name))


# Family-specific config.json keys the summary prints when present.
FAMILY_KEYS = [
    "partial_rotary_factor",
    "original_max_position_embeddings",
    "hidden_act",
    "hidden_activation",
    "activation_function",
    "query_pre_attn_scalar",
    "attn_logit_softcapping",
    "final_logit_softcapping",
    "embedding_multiplier",
    "attention_multiplier",
    "residual_multiplier",
    "logits_scaling",
    "no_rope_layers",
    "no_rope_layer_interval",
    "n_inner",
]


def widen_weights(model, embed_std=None):
    """std ~0.15 everywhere (norm weights around 1), so greedy tokens are not decided by noise."""
    embedding = None
    if embed_std is not None:  # a ViT's embedding is a convolution, a ResNet has none
        embedding = getattr(model.get_input_embeddings(), "weight", None)
    # a batch-normed convolutional net (ResNet, MobileNet) keeps its input's signal through its
    # depth only with convolutions of He's scale (at STD the outputs stop depending on the image)
    batch_normed = any(n.endswith("running_var") for n, _ in model.named_buffers())
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied parameters are listed once
            std = (2.0 / p[0].numel()) ** 0.5 if batch_normed and p.dim() == 4 else STD
            noise = torch.randn_like(p) * std
            if is_norm_weight(name):
                p.copy_(1.0 + noise)
            elif embed_std is not None and p is embedding:
                p.copy_(noise * (embed_std / STD))
            else:
                p.copy_(noise)
        # batch norms' running statistics (ResNet's, MobileNet's): means around 0, variances
        # within 20% of 1 (further off, a deep net's signal vanishes or explodes)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn_like(b) * STD)
            elif name.endswith("running_var"):
                b.copy_(0.8 + 0.4 * torch.rand_like(b))


def canonical_metadata_order(path):
    """safetensors writes `__metadata__` in hash-map order, which changes from run to run:
    rewrite the header with sorted metadata keys so regenerated fixtures are byte-identical."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= n, "canonical header is longer than the original"
    path.write_bytes(raw[:8] + text.ljust(n, b" ") + raw[8 + n :])


def load(folder):
    model = causal_lm_class(folder).from_pretrained(
        folder, dtype=torch.float32, attn_implementation=attention_implementation(folder)
    )
    return model.eval()


def random_ids(gen, shape, vocab):
    return torch.randint(1, vocab, shape, generator=gen, dtype=torch.int64)


def forward_logits(folder, input_ids, attention_mask):
    with torch.no_grad():
        out = load(folder)(input_ids=input_ids, attention_mask=attention_mask).logits
    return out.to(torch.float32).contiguous()


def greedy(folder, prompt):
    model = load(folder)
    with torch.no_grad():
        out = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=PAD_ID,
        )
    assert out.shape == (1, PROMPT_LEN + NEW_TOKENS), f"generate stopped early: {tuple(out.shape)}"
    return out[:, PROMPT_LEN:].contiguous()


def greedy_by_hand(folder, prompt):
    """Plain argmax loop with transformers' own cache: must equal generate() (no logits processor).

    Returns the new tokens and the smallest top-1/top-2 logit gap over the steps.

    Phi-3's generate drops its KV cache once, when the sequence first grows past
    original_max_position_embeddings (longrope switches to the long factors, and the cached keys
    were rotated with the short ones), and runs the whole sequence again: so does this loop."""
    model = load(folder)
    recompute_at = model.config.original_max_position_embeddings + 1 if isinstance(model, Phi3ForCausalLM) else None
    recurrent = "cache_params" in inspect.signature(model.forward).parameters
    ids = prompt
    past = None
    new = []
    margin = float("inf")
    with torch.no_grad():
        step_ids = prompt
        for _ in range(NEW_TOKENS):
            if past is not None and ids.shape[1] == recompute_at:
                past, step_ids = None, ids
            if recurrent:
                # a state-space model's cache is `cache_params`, and it takes no positions
                out = model(input_ids=step_ids, cache_params=past, use_cache=True)
                past = out.cache_params
            else:
                out = model(
                    input_ids=step_ids,
                    attention_mask=torch.ones_like(ids),
                    position_ids=torch.arange(ids.shape[1] - step_ids.shape[1], ids.shape[1]).unsqueeze(0),
                    past_key_values=past,
                    use_cache=True,
                )
                past = out.past_key_values
            last = out.logits[:, -1]
            top2 = last.topk(2, dim=-1).values
            margin = min(margin, (top2[:, 0] - top2[:, 1]).min().item())
            nxt = last.argmax(-1, keepdim=True)
            new.append(nxt)
            ids = torch.cat([ids, nxt], dim=1)
            step_ids = nxt
    return torch.cat(new, dim=1), margin


def greedy_no_cache(folder, prompt):
    """Argmax loop that recomputes the whole sequence every step (no KV cache).

    Returns the new tokens and the smallest top-1/top-2 logit gap over the steps."""
    model = load(folder)
    ids = prompt
    margin = float("inf")
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            last = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[:, -1]
            top2 = last.topk(2, dim=-1).values
            margin = min(margin, (top2[:, 0] - top2[:, 1]).min().item())
            ids = torch.cat([ids, last.argmax(-1, keepdim=True)], dim=1)
    return ids[:, PROMPT_LEN:], margin


def config_semantics(config):
    """The config as a dict, without the keys that only say where and how it was saved."""
    d = config.to_dict()
    for key in ("transformers_version", "_name_or_path", "architectures", "dtype", "torch_dtype", "output_attentions"):
        d.pop(key, None)
    # An old-form file keyed "type" keeps that key next to the "rope_type" read from it.
    rope = d.get("rope_parameters")
    if isinstance(rope, dict):
        rope = {k: v for k, v in rope.items() if k != "type"}
        d["rope_parameters"] = {
            k: ({kk: vv for kk, vv in v.items() if kk != "type"} if isinstance(v, dict) else v) for k, v in rope.items()
        }
    return d


def make_fixture(outdir, spec):
    name, seed, model_cls, config, post_edit = spec.name, spec.seed, spec.model_cls, spec.config, spec.post_edit
    folder = outdir / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)

    torch.manual_seed(seed)
    config._attn_implementation = "eager"
    model = model_cls(config).to(torch.float32).eval()
    widen_weights(model, spec.embed_std)
    model.save_pretrained(folder, safe_serialization=True)
    built = config_semantics(model.config)

    cfg_path = folder / "config.json"
    cfg = json.loads(cfg_path.read_text())
    if post_edit is not None:
        cfg = post_edit(cfg)
        cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
    del model
    if spec.post_save is not None:
        spec.post_save(folder)
    if post_edit is not None:
        # A post-edit changes the form only: what transformers reads back is what was built.
        loaded = config_semantics(load(folder).config)
        diff = {k: (v, loaded.get(k, "<absent>")) for k, v in built.items() if loaded.get(k, "<absent>") != v}
        assert not diff, f"{name}: the config.json post-edit changed the config transformers reads: {diff}"

    gen = torch.Generator().manual_seed(1000 + seed)
    vocab = config.get_text_config().vocab_size  # a multimodal checkpoint's text model's

    single_ids = random_ids(gen, (1, SEQ), vocab)
    single_mask = torch.ones_like(single_ids)

    batch_ids = random_ids(gen, (2, SEQ), vocab)
    batch_ids[0, : SEQ - BATCH_REAL] = PAD_ID
    batch_mask = torch.ones_like(batch_ids)
    batch_mask[0, : SEQ - BATCH_REAL] = 0

    eos = config.get_text_config().eos_token_id
    eos = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
    for attempt in range(PROMPT_TRIES):
        prompt = random_ids(gen, (1, PROMPT_LEN), vocab)
        by_hand, margin = greedy_by_hand(folder, prompt)
        if margin < MIN_GREEDY_MARGIN:
            continue
        # `hfexport generate` stops at an EOS token, as users want: the golden tokens hold none
        if eos & set(by_hand[0].tolist()):
            continue
        if spec.strict_greedy:
            tokens = by_hand[0].tolist()
            if len(set(tokens)) < MIN_DISTINCT or len(set(tokens[NEW_TOKENS // 2 :])) < MIN_DISTINCT_LATE:
                continue
            no_cache_tokens, no_cache_margin = greedy_no_cache(folder, prompt)
            if not torch.equal(no_cache_tokens, by_hand) or no_cache_margin < MIN_GREEDY_MARGIN:
                continue
            margin = min(margin, no_cache_margin)
        break
    else:
        extra = (
            f" (the same without KV cache, {MIN_DISTINCT} distinct tokens, {MIN_DISTINCT_LATE} in the second half)"
            if spec.strict_greedy
            else ""
        )
        raise SystemExit(f"{name}: no prompt with greedy margin >= {MIN_GREEDY_MARGIN}{extra} in {PROMPT_TRIES} tries")

    single_logits = forward_logits(folder, single_ids, single_mask)
    batch_logits = forward_logits(folder, batch_ids, batch_mask)
    tokens = greedy(folder, prompt)
    assert torch.equal(by_hand, tokens), f"{name}: generate {tokens.tolist()} != argmax loop {by_hand.tolist()}"
    no_cache, _ = greedy_no_cache(folder, prompt)

    # The batch row without padding must match an unpadded forward of the same tokens.
    row1 = forward_logits(folder, batch_ids[1:], batch_mask[1:])
    row1_diff = (row1 - batch_logits[1:]).abs().max().item()

    gap = router_gap(load(folder), [(single_ids, single_mask), (batch_ids, batch_mask)])
    if gap is not None:
        assert gap > MIN_ROUTER_GAP, f"{name}: routing near a tie (gap {gap:.2e}); change the seed"
        print(f"   router gap:      {gap:.2e} (k-th vs next probability, every token of every sparse layer)")

    for key, t in (("single.logits", single_logits), ("batch.logits[real]", batch_logits[batch_mask.bool()])):
        assert torch.isfinite(t).all(), f"{name}: non-finite values in {key}"

    goldens = {
        "single.input_ids": single_ids,
        "single.attention_mask": single_mask,
        "single.logits": single_logits,
        "batch.input_ids": batch_ids,
        "batch.attention_mask": batch_mask,
        "batch.logits": batch_logits,
        "greedy.prompt_ids": prompt,
        "greedy.tokens": tokens,
    }
    goldens = {k: v.contiguous() for k, v in goldens.items()}
    for k, v in goldens.items():
        expect = torch.float32 if k.endswith("logits") else torch.int64
        assert v.dtype == expect, f"{name}: {k} is {v.dtype}"
    golden_path = folder / "golden.safetensors"
    metadata = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "generator": "xtask/python/make_fixtures.py",
    }
    save_file(goldens, str(golden_path), metadata=metadata)
    canonical_metadata_order(golden_path)
    with safetensors.safe_open(golden_path, "pt") as f:
        assert f.metadata() == metadata
        assert all(torch.equal(f.get_tensor(k), v) for k, v in goldens.items())

    # Summary, from the (text) config as transformers reads the saved folder.
    full = load(folder).config
    loaded = full.get_text_config()
    size = sum(f.stat().st_size for f in folder.iterdir())
    print(f"== {name}  ({model_cls.__name__}, seed {seed}, {size / 1024:.0f} KiB)")
    print(f"   files:           {sorted(f.name for f in folder.iterdir())}")
    print(f"   saved rope keys: { {k: cfg[k] for k in ('rope_parameters', 'rope_scaling', 'rope_theta') if k in cfg} }")
    print(f"   rope_parameters: {getattr(loaded, 'rope_parameters', None)}")
    print(f"   layer_types:     {getattr(loaded, 'layer_types', None)}")
    print(f"   sliding_window:  {getattr(loaded, 'sliding_window', None)}")
    head_dim = cfg.get("head_dim")  # the file's: a heterogeneous config (Gemma 4) refuses the global one
    print(f"   head_dim:        {head_dim}  tie_word_embeddings: {full.tie_word_embeddings}")
    family = {k: cfg[k] for k in FAMILY_KEYS if k in cfg}
    if family:
        print(f"   family keys:     {family}")
    print(f"   bos/eos/pad:     {loaded.bos_token_id}/{loaded.eos_token_id}/{loaded.pad_token_id}")
    print(f"   logits std:      single {single_logits.std().item():.3f}")
    top2 = single_logits[0].topk(2, dim=-1).values
    print(f"   top1-top2 gap:   min {(top2[:, 0] - top2[:, 1]).min().item():.4f} over single positions")
    print(f"   unpadded row vs alone: max |diff| {row1_diff:.2e}")
    both = ", with and without KV cache" if spec.strict_greedy else ""
    print(f"   prompt:          {prompt.tolist()[0]}  (draw {attempt + 1}, min greedy margin {margin:.4f}{both})")
    print(f"   greedy tokens:   {tokens.tolist()[0]}")
    if not torch.equal(no_cache, tokens):
        print(f"   NOTE: without KV cache greedy differs: {no_cache.tolist()[0]}")


# ---- encoders ---------------------------------------------------------------------------------


class EncoderSpec(NamedTuple):
    name: str
    seed: int
    model_cls: type
    config: object
    task: str
    outputs: tuple  # the forward's output names the goldens keep
    covers: str = ""
    # task sentence-embedding: the Pooling module's config.json, the Dense modules after it (the
    # keyword arguments of sentence-transformers' Dense, its weights drawn from the seed), and
    # whether a Normalize follows (the goldens are then SentenceTransformer's own forward over
    # the saved folder)
    pooling: dict = None
    dense: tuple = ()
    normalize: bool = False


def encoder_config(cls, **kw):
    base = dict(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=40,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    base.update(kw)
    return cls(**base)


# CLIPModel's zero-shot outputs, then its towers' (get_text_features, get_image_features)
CLIP_OUTPUTS = ("logits_per_image", "logits_per_text", "text_embeds", "image_embeds", "text_model.text_embeds",
                "text_model.last_hidden_state", "vision_model.image_embeds", "vision_model.last_hidden_state")


def encoder_specs():
    from transformers import (
        BeitConfig,
        BeitForImageClassification,
        BeitModel,
        Data2VecVisionConfig,
        Data2VecVisionForImageClassification,
        Data2VecAudioConfig,
        Data2VecAudioForCTC,
        HubertConfig,
        HubertForSequenceClassification,
        Wav2Vec2Config,
        Wav2Vec2ForCTC,
        Wav2Vec2Model,
        WavLMConfig,
        WavLMForCTC,
        CLIPConfig,
        CLIPModel,
        CLIPTextConfig,
        CLIPTextModel,
        CLIPTextModelWithProjection,
        CLIPVisionConfig,
        CLIPVisionModel,
        CLIPVisionModelWithProjection,
        SiglipConfig,
        SiglipModel,
        SiglipTextConfig,
        SiglipTextModel,
        SiglipVisionConfig,
        SiglipVisionModel,
        ViTConfig,
        ViTForImageClassification,
        DeiTConfig,
        Dinov2Config,
        Dinov2ForImageClassification,
        Dinov2Model,
        DeiTForImageClassificationWithTeacher,
        DeiTModel,
        ResNetConfig,
        ResNetForImageClassification,
        ResNetModel,
        ConvNextConfig,
        ConvNextForImageClassification,
        ConvNextModel,
        ConvNextV2Config,
        ConvNextV2ForImageClassification,
        MobileNetV2Config,
        MobileNetV2ForImageClassification,
        MobileNetV2Model,
        ViTModel,
        BertConfig,
        DistilBertConfig,
        DistilBertForMaskedLM,
        DistilBertForSequenceClassification,
        BertForMaskedLM,
        BertForQuestionAnswering,
        BertForSequenceClassification,
        BertModel,
        RobertaConfig,
        RobertaModel,
        RobertaForSequenceClassification,
        RobertaForTokenClassification,
        XLMRobertaConfig,
        XLMRobertaForMaskedLM,
        CamembertConfig,
        CamembertForQuestionAnswering,
        XLMRobertaXLConfig,
        XLMRobertaXLForMaskedLM,
        ElectraConfig,
        ElectraForMaskedLM,
        ElectraForSequenceClassification,
        AlbertConfig,
        AlbertModel,
        MPNetConfig,
        MPNetForMaskedLM,
        DebertaV2Config,
        DebertaV2ForMaskedLM,
        DebertaV2ForSequenceClassification,
        ModernBertConfig,
        ModernBertForMaskedLM,
        ModernBertForSequenceClassification,
        ModernBertForTokenClassification,
        ModernBertModel,
    )

    return [
        EncoderSpec(
            "bert", 101, BertModel, encoder_config(BertConfig), "feature-extraction",
            ("last_hidden_state", "pooler_output"), "BertModel with pooler, gelu, 2 token types",
        ),
        EncoderSpec(
            "bert_mlm", 102, BertForMaskedLM, encoder_config(BertConfig, hidden_act="gelu_new", type_vocab_size=3),
            "fill-mask", ("logits",), "masked-LM head tied to the word embeddings, gelu_new, 3 token types",
        ),
        EncoderSpec(
            "bert_cls", 103, BertForSequenceClassification, encoder_config(BertConfig, num_labels=3),
            "sequence-classification", ("logits",), "pooler + classifier, 3 labels",
        ),
        EncoderSpec(
            "bert_qa", 104, BertForQuestionAnswering, encoder_config(BertConfig, layer_norm_eps=1e-5),
            "question-answering", ("start_logits", "end_logits"), "span head, layer_norm_eps 1e-5",
        ),
        EncoderSpec(
            "roberta_tok", 105, RobertaForTokenClassification,
            encoder_config(RobertaConfig, num_labels=5, type_vocab_size=1, pad_token_id=1),
            "token-classification", ("logits",), "positions after the padding id, 1 token type, 5 labels",
        ),
        EncoderSpec(
            "roberta_cls", 106, RobertaForSequenceClassification,
            encoder_config(RobertaConfig, type_vocab_size=1, pad_token_id=1, num_attention_heads=2),
            "sequence-classification", ("logits",), "dense-tanh classification head on <s>, head_dim 16",
        ),
        EncoderSpec(
            "xlm_roberta_mlm", 107, XLMRobertaForMaskedLM,
            encoder_config(XLMRobertaConfig, type_vocab_size=1, pad_token_id=1, tie_word_embeddings=False),
            "fill-mask", ("logits",), "untied masked-LM decoder, exact gelu head",
        ),
        EncoderSpec(
            "camembert_qa", 118, CamembertForQuestionAnswering,
            encoder_config(CamembertConfig, type_vocab_size=1, pad_token_id=1),
            "question-answering", ("start_logits", "end_logits"), "CamemBERT: RoBERTa's layout, span head",
        ),
        EncoderSpec(
            "xlm_roberta_xl_mlm", 119, XLMRobertaXLForMaskedLM,
            encoder_config(XLMRobertaXLConfig, type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5),
            "fill-mask", ("logits",), "XLM-R XL: pre-LN layers, no embedding norm, final encoder LayerNorm",
        ),
        EncoderSpec(
            "electra_mlm", 120, ElectraForMaskedLM, encoder_config(ElectraConfig, embedding_size=16),
            "fill-mask", ("logits",),
            "ELECTRA generator: 16-wide embeddings projected to 32, gelu head back to 16, tied decoder with its bias",
        ),
        EncoderSpec(
            "electra_cls", 121, ElectraForSequenceClassification,
            encoder_config(ElectraConfig, embedding_size=32, num_labels=3, hidden_act="gelu_new"),
            "sequence-classification", ("logits",), "embeddings as wide as the layers (no projection), gelu head",
        ),
        EncoderSpec(
            "albert", 122, AlbertModel,
            encoder_config(AlbertConfig, embedding_size=16, num_hidden_layers=3, num_hidden_groups=2,
                           inner_group_num=2),
            "feature-extraction", ("last_hidden_state", "pooler_output"),
            "ALBERT: 16-wide embeddings, 3 layers over 2 groups of 2 shared layers (groups 0, 0, 1), pooler",
        ),
        EncoderSpec(
            "mpnet_mlm", 123, MPNetForMaskedLM,
            encoder_config(MPNetConfig, relative_attention_num_buckets=40, pad_token_id=1),
            "fill-mask", ("logits",),
            "MPNet: relative position bias (a 40-row table, bucketed 32 ways), positions after index 1, tied decoder",
        ),
        EncoderSpec(
            "deberta_v3_cls", 124, DebertaV2ForSequenceClassification,
            encoder_config(DebertaV2Config, relative_attention=True, position_buckets=8, pos_att_type="p2c|c2p",
                           share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False,
                           type_vocab_size=0, num_labels=3, layer_norm_eps=1e-7),
            "sequence-classification", ("logits",),
            "DeBERTa-v3: c2p and p2c through the shared key/query projections, 8 log buckets (distances beyond 4 "
            "bucketed), normed relative embeddings, no absolute positions or token types, gelu context pooler",
        ),
        EncoderSpec(
            "deberta_v2_mlm", 125, DebertaV2ForMaskedLM,
            encoder_config(DebertaV2Config, relative_attention=True, max_relative_positions=4, pos_att_type=["c2p"],
                           embedding_size=16, type_vocab_size=2, hidden_act="gelu_new"),
            "fill-mask", ("logits",),
            "DeBERTa-v2: c2p only through its own pos_key_proj, distances clamped at 4, 16-wide embeddings projected "
            "before the norm, absolute positions and 2 token types, legacy cls head back to 16",
        ),
        EncoderSpec(
            "distilbert_mlm", 108, DistilBertForMaskedLM, distilbert_config(DistilBertConfig),
            "fill-mask", ("logits",), "DistilBERT names, no token types, tied vocab_projector with its own bias",
        ),
        EncoderSpec(
            "distilbert_cls", 109, DistilBertForSequenceClassification,
            distilbert_config(DistilBertConfig, num_labels=4, sinusoidal_pos_embds=True, activation="relu"),
            "sequence-classification", ("logits",), "pre_classifier + relu, sinusoidal positions, relu MLP, 4 labels",
        ),
        EncoderSpec(
            "vit", 110, ViTModel,
            ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37, image_size=16,
                      patch_size=4, num_channels=3),
            "feature-extraction", ("last_hidden_state", "pooler_output"), "16x16 RGB, 4x4 patches, pooler",
        ),
        EncoderSpec(
            "vit_cls", 111, ViTForImageClassification,
            ViTConfig(hidden_size=24, num_hidden_layers=2, num_attention_heads=2, intermediate_size=30,
                      image_size=[12, 8], patch_size=[4, 2], num_channels=2, qkv_bias=False, num_labels=3,
                      hidden_act="gelu_new", layer_norm_eps=1e-6),
            "image-classification", ("logits",), "12x8 two-channel images, 4x2 patches, no qkv bias, 3 labels",
        ),
        EncoderSpec(
            "deit", 137, DeiTModel,
            DeiTConfig(hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=40, image_size=12,
                       patch_size=4, num_channels=3, hidden_act="gelu_new"),
            "feature-extraction", ("last_hidden_state", "pooler_output"),
            "class and distillation tokens before 9 patches, pooler",
        ),
        EncoderSpec(
            "deit_distilled", 138, DeiTForImageClassificationWithTeacher,
            DeiTConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=24,
                       image_size=[8, 12], patch_size=[4, 2], num_channels=2, qkv_bias=False, num_labels=3),
            "image-classification", ("logits",),
            "the teacher class: the class and distillation classifiers averaged, 8x12 images, 4x2 patches",
        ),
        EncoderSpec(
            "dinov2", 139, Dinov2Model,
            Dinov2Config(hidden_size=24, num_hidden_layers=2, num_attention_heads=3, mlp_ratio=3, image_size=12,
                         patch_size=4, layerscale_value=0.5),
            "feature-extraction", ("last_hidden_state", "pooler_output"),
            "layer scales, MLP 3x wide by mlp_ratio, the class token as pooler_output",
        ),
        EncoderSpec(
            "wav2vec2_ctc", 160, Wav2Vec2ForCTC,
            audio_config(Wav2Vec2Config),
            "automatic-speech-recognition", ("logits",),
            "group-normed feature encoder (kernels 10/3/3, strides 5/2/2, no conv bias), post-norm layers, an even "
            "positional kernel (its last frame dropped), 20 CTC labels",
        ),
        EncoderSpec(
            "wav2vec2_stable", 161, Wav2Vec2Model,
            audio_config(Wav2Vec2Config, feat_extract_norm="layer", do_stable_layer_norm=True, conv_bias=True,
                         conv_dim=[6, 10, 12, 12], conv_kernel=[7, 4, 3, 2], conv_stride=[3, 3, 2, 2],
                         num_conv_pos_embeddings=5, num_conv_pos_embedding_groups=2, hidden_act="relu"),
            "feature-extraction", ("last_hidden_state",),
            "the large checkpoints' form: LayerNorm after every convolution (with biases), pre-norm layers and the "
            "encoder's norm after them, an odd positional kernel in 2 groups, relu layers",
        ),
        EncoderSpec(
            "hubert_cls", 162, HubertForSequenceClassification,
            audio_config(HubertConfig, feat_proj_layer_norm=False, num_labels=3, classifier_proj_size=10,
                         feat_extract_activation="relu"),
            "sequence-classification", ("logits",),
            "HuBERT without the norm before its feature projection, relu feature encoder, the projector (10) "
            "averaged over every frame, 3 labels",
        ),
        EncoderSpec(
            "beit", 170, BeitModel,
            BeitConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=24, image_size=12,
                       patch_size=4, use_relative_position_bias=True, layer_scale_init_value=0.1),
            "feature-extraction", ("last_hidden_state", "pooler_output"),
            "a relative position bias per layer over a 3x3 grid, layer scales, the normed patch mean as pooler "
            "(no final norm), no key bias, no absolute positions",
        ),
        EncoderSpec(
            "beit_cls", 171, BeitForImageClassification,
            BeitConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=20, image_size=8,
                       patch_size=4, use_shared_relative_position_bias=True, use_absolute_position_embeddings=True,
                       use_mean_pooling=False, layer_scale_init_value=0.0, num_labels=3, hidden_act="gelu_new"),
            "image-classification", ("logits",),
            "one shared relative position bias, absolute positions, no layer scales, the class token after the final "
            "norm, 3 labels",
        ),
        EncoderSpec(
            "data2vec_vision_cls", 172, Data2VecVisionForImageClassification,
            Data2VecVisionConfig(hidden_size=12, num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
                                 image_size=[8, 12], patch_size=4, use_relative_position_bias=True,
                                 use_shared_relative_position_bias=True, num_labels=2),
            "image-classification", ("logits",),
            "Data2VecVision: per-layer and shared relative biases over a 2x3 grid (whose stored table transformers "
            "resamples as a 5x3 one), mean pooling",
        ),
        EncoderSpec(
            "data2vec_audio_ctc", 164, Data2VecAudioForCTC,
            audio_config(Data2VecAudioConfig, num_conv_pos_embeddings=2, conv_pos_kernel_size=4),
            "automatic-speech-recognition", ("logits",),
            "Data2VecAudio: layer-normed feature convolutions, two plain positional convolutions of an even kernel "
            "each normed without weights, post-norm layers, a masked batch",
        ),
        EncoderSpec(
            "wavlm_ctc", 163, WavLMForCTC,
            audio_config(WavLMConfig, num_buckets=16, max_bucket_distance=12, do_stable_layer_norm=True,
                         feat_extract_norm="layer", num_hidden_layers=3),
            "automatic-speech-recognition", ("logits",),
            "WavLM's gated relative position bias (16 buckets up to distance 12, so 29 frames reach the logarithmic "
            "and saturated buckets), pre-norm layers, layer-normed feature encoder",
        ),
        EncoderSpec(
            "dinov2_swiglu", 150, Dinov2Model,
            Dinov2Config(hidden_size=20, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=3, image_size=12,
                         patch_size=3, use_swiglu_ffn=True),
            "feature-extraction", ("last_hidden_state", "pooler_output"),
            "the giant checkpoints' SwiGLU MLP: weights_in split into gate and up, SiLU, width 60 -> 40 (rounded up to 8)",
        ),
        EncoderSpec(
            "dinov2_cls", 140, Dinov2ForImageClassification,
            Dinov2Config(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, image_size=10, patch_size=2,
                         num_channels=2, qkv_bias=False, hidden_act="gelu_new", layer_norm_eps=1e-5, num_labels=3),
            "image-classification", ("logits",),
            "the classifier over the class token beside the 25 patches' mean, no qkv bias",
        ),
        EncoderSpec(
            "resnet", 130, ResNetModel,
            ResNetConfig(embedding_size=8, hidden_sizes=[8, 12, 16], depths=[2, 1, 2], layer_type="basic",
                         image_size=[20, 14], num_channels=3),
            "feature-extraction", ("last_hidden_state", "pooler_output"),
            "basic layers, 20x14 images, stages 8 (no shortcut), 12 and 16 (strided 1x1 shortcuts), "
            "max-pooled 7x7 stem",
        ),
        EncoderSpec(
            "resnet_cls", 131, ResNetForImageClassification,
            ResNetConfig(embedding_size=6, hidden_sizes=[8, 12], depths=[2, 2], layer_type="bottleneck",
                         downsample_in_first_stage=True, downsample_in_bottleneck=True, hidden_act="gelu",
                         image_size=17, num_channels=2, num_labels=3),
            "image-classification", ("logits",),
            "bottleneck layers downsampling in the first 1x1 and in the first stage, gelu, 17x17 two-channel "
            "images (odd sizes through every stride), 3 labels",
        ),
        EncoderSpec(
            "convnext", 132, ConvNextModel,
            ConvNextConfig(num_stages=3, hidden_sizes=[8, 12, 16], depths=[1, 2, 1], patch_size=2,
                           layer_scale_init_value=0.5, layer_norm_eps=1e-5, image_size=[19, 15]),
            "feature-extraction", ("last_hidden_state", "pooler_output"),
            "3 stages, 2x2 patches over 19x15 images, layer scale, final norm eps 1e-5",
        ),
        EncoderSpec(
            "convnext_cls", 133, ConvNextForImageClassification,
            ConvNextConfig(num_stages=2, hidden_sizes=[6, 10], depths=[2, 1], patch_size=3, layer_scale_init_value=0.0,
                           hidden_act="gelu_new", image_size=16, num_channels=2, num_labels=4),
            "image-classification", ("logits",),
            "no layer scale, tanh GELU, 3x3 patches over 16x16 two-channel images, 4 labels",
        ),
        EncoderSpec(
            "convnextv2_cls", 134, ConvNextV2ForImageClassification,
            ConvNextV2Config(num_stages=2, hidden_sizes=[8, 8], depths=[1, 2], patch_size=4, image_size=[20, 24],
                             num_labels=3),
            "image-classification", ("logits",),
            "V2: global response norms, equal widths (the second stage still downsamples), 20x24 images",
        ),
        EncoderSpec(
            "mobilenet_v2", 135, MobileNetV2Model,
            MobileNetV2Config(depth_multiplier=0.1, depth_divisible_by=4, min_depth=4, expand_ratio=2.0,
                              finegrained_output=False, image_size=[19, 23]),
            "feature-extraction", ("last_hidden_state", "pooler_output"),
            "TensorFlow SAME padding over odd sizes, relu6, widths x0.1 rounded to multiples of 4, expansion 2",
        ),
        EncoderSpec(
            "mobilenet_v2_cls", 136, MobileNetV2ForImageClassification,
            MobileNetV2Config(depth_multiplier=0.15, depth_divisible_by=8, min_depth=4, expand_ratio=1.5,
                              output_stride=8, first_layer_is_expansion=False, tf_padding=False,
                              layer_norm_eps=1e-5, hidden_act="silu", image_size=16, num_channels=2,
                              num_labels=3),
            "image-classification", ("logits",),
            "output stride 8 (dilated depthwise layers), a stem expansion, torch padding, silu, fine-grained "
            "1280-wide output",
        ),
        EncoderSpec(
            "swin", 173, SwinModel,
            SwinConfig(image_size=[30, 26], patch_size=4, embed_dim=8, depths=[2, 3], num_heads=[2, 2], window_size=3),
            "feature-extraction", ("last_hidden_state", "pooler_output"),
            "30x26 images padded to whole 4x4 patches, an 8x7 grid padded to 3x3 windows, shifted every second "
            "layer in both stages (a 4x4 grid after the odd-sided merging)",
        ),
        EncoderSpec(
            "swin_cls", 174, SwinForImageClassification,
            SwinConfig(image_size=24, patch_size=2, num_channels=2, embed_dim=6, depths=[1, 2, 2], num_heads=[1, 2, 4],
                       window_size=3, mlp_ratio=2.5, qkv_bias=False, hidden_act="gelu_new", layer_norm_eps=1e-6,
                       use_absolute_embeddings=True, num_labels=3),
            "image-classification", ("logits",),
            "3 stages over 12x12, 6x6 and 3x3 grids: the last one window, which no longer shifts; no qkv bias, MLP "
            "ratio 2.5, tanh GELU, absolute positions, 3 labels",
        ),
        EncoderSpec(
            "swinv2", 175, Swinv2Model,
            Swinv2Config(image_size=[30, 26], patch_size=4, embed_dim=8, depths=[2, 3], num_heads=[2, 2], window_size=3,
                         pretrained_window_sizes=[4, 0]),
            "feature-extraction", ("last_hidden_state", "pooler_output"),
            "V2: post-norm layers, cosine attention, the MLP position bias (offsets normalised by a pretrained window "
            "of 4, then by its own), 30x26 images padded to whole patches, windows fixed from the configured 7x6 grid "
            "(the second stage one window, unshifted)",
        ),
        EncoderSpec(
            "swinv2_cls", 176, Swinv2ForImageClassification,
            Swinv2Config(image_size=24, patch_size=2, num_channels=2, embed_dim=6, depths=[1, 2, 2],
                         num_heads=[1, 2, 3], window_size=4, mlp_ratio=2.5, qkv_bias=False, hidden_act="gelu_new",
                         layer_norm_eps=1e-6, pretrained_window_sizes=[0, 3, 2],
                         num_labels=3),
            "image-classification", ("logits",),
            "V2 over 12x12, 6x6 and 3x3 grids: the last window clamped to 3, pretrained windows 3 and 2, no qkv "
            "bias, MLP ratio 2.5, tanh GELU, 3 labels",
        ),
        EncoderSpec(
            "modernbert", 112, ModernBertModel, modernbert_config(ModernBertConfig),
            "feature-extraction", ("last_hidden_state",),
            "rotary (160000 full, 10000 local), layers full/local/local, window 2 each side, GeGLU, no biases",
        ),
        EncoderSpec(
            "modernbert_mlm", 113, ModernBertForMaskedLM,
            modernbert_config(ModernBertConfig, global_attn_every_n_layers=2, local_attention=6, norm_bias=True,
                              attention_bias=True, mlp_bias=True, classifier_bias=True, classifier_activation="silu",
                              hidden_activation="gelu_new", global_rope_theta=500.0, local_rope_theta=50.0),
            "fill-mask", ("logits",), "every bias on, silu head, rope thetas 500 full / 50 local, tied decoder with its bias",
        ),
        EncoderSpec(
            "modernbert_cls", 114, ModernBertForSequenceClassification,
            modernbert_config(ModernBertConfig, classifier_pooling="mean", num_labels=3, num_attention_heads=2),
            "sequence-classification", ("logits",), "mean pooling over the unpadded tokens, head_dim 16, 3 labels",
        ),
        EncoderSpec(
            "bert_st", 116, BertModel, encoder_config(BertConfig, num_hidden_layers=1), "sentence-embedding",
            ("last_hidden_state", "sentence_embedding"),
            "sentence-transformers folder as the hub keeps all-MiniLM-L6-v2: legacy pooling_mode_mean_tokens, Normalize",
            pooling={"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
                     "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False},
            normalize=True,
        ),
        EncoderSpec(
            "roberta_st", 117, RobertaModel,
            encoder_config(RobertaConfig, type_vocab_size=1, pad_token_id=1, num_hidden_layers=1, hidden_size=16,
                           num_attention_heads=2),
            "sentence-embedding", ("last_hidden_state", "sentence_embedding"),
            "sentence-transformers 5+ pooling_mode list: every mode concatenated (cls, max, mean, mean_sqrt_len_tokens, "
            "weightedmean, lasttoken), then three Dense modules (tanh 96 -> 24; identity with the input added; GELU "
            "without bias, its residual projected 24 -> 12), no Normalize",
            pooling={"embedding_dimension": 16, "include_prompt": True,
                     "pooling_mode": ["cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"]},
            dense=(
                {"in_features": 96, "out_features": 24},
                {"in_features": 24, "out_features": 24, "activation_function": torch.nn.Identity(), "use_residual": True},
                {"in_features": 24, "out_features": 12, "bias": False, "activation_function": torch.nn.GELU(),
                 "use_residual": True},
            ),
        ),
        EncoderSpec(
            "clip", 141, CLIPModel,
            CLIPConfig(
                text_config=dict(vocab_size=99, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                                 num_attention_heads=4, max_position_embeddings=16, bos_token_id=0, eos_token_id=98,
                                 pad_token_id=1),
                vision_config=dict(hidden_size=24, intermediate_size=30, num_hidden_layers=2, num_attention_heads=2,
                                   image_size=12, patch_size=4, num_channels=3),
                projection_dim=16, logit_scale_init_value=1.5),
            "zero-shot-image-classification", CLIP_OUTPUTS,
            "causal text pooled at its end-of-text id 98, 12x12 images in 4x4 patches, 16-wide projections; 2 texts "
            "against 3 images",
        ),
        EncoderSpec(
            "clip_legacy", 142, CLIPModel,
            CLIPConfig(
                text_config=dict(vocab_size=60, hidden_size=24, intermediate_size=40, num_hidden_layers=1,
                                 num_attention_heads=3, max_position_embeddings=12, eos_token_id=2,
                                 hidden_act="gelu", layer_norm_eps=1e-6),
                vision_config=dict(hidden_size=16, intermediate_size=20, num_hidden_layers=2, num_attention_heads=4,
                                   image_size=8, patch_size=2, num_channels=2, hidden_act="gelu_new"),
                projection_dim=12),
            "zero-shot-image-classification", CLIP_OUTPUTS,
            "legacy eos_token_id 2: the text pooled at its largest id; 8x8 two-channel images in 2x2 patches, exact and tanh GELU",
        ),
        EncoderSpec(
            "siglip", 144, SiglipModel,
            SiglipConfig(
                text_config=dict(vocab_size=99, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                                 num_attention_heads=4, max_position_embeddings=16, eos_token_id=98, pad_token_id=1,
                                 projection_size=24),
                vision_config=dict(hidden_size=24, intermediate_size=30, num_hidden_layers=2, num_attention_heads=3,
                                   image_size=12, patch_size=4, num_channels=3)),
            "zero-shot-image-classification", CLIP_OUTPUTS,
            "bidirectional text pooled at its last position through a 32 -> 24 head, no class token, the image "
            "pooled by a 3-head attention probe, logit bias; 2 texts against 3 images",
        ),
        EncoderSpec(
            "clip_text", 143, CLIPTextModel,
            CLIPTextConfig(vocab_size=20, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                           num_attention_heads=2, max_position_embeddings=10, eos_token_id=4, pad_token_id=1),
            "feature-extraction", ("last_hidden_state", "pooler_output"),
            "the text tower alone, its tensors at the top as transformers 5 saves them: causal over the unpadded "
            "tokens, pooled at its end-of-text id (4 of 20: in one row, absent from the others, which pool position 0)",
        ),
        EncoderSpec(
            "clip_text_projected", 145, CLIPTextModelWithProjection,
            CLIPTextConfig(vocab_size=30, hidden_size=12, intermediate_size=20, num_hidden_layers=1,
                           num_attention_heads=3, max_position_embeddings=9, eos_token_id=2, projection_dim=10),
            "feature-extraction", ("text_embeds", "last_hidden_state"),
            "the text tower projected (10 wide) as text_embeds, pooled at its largest id (legacy eos 2)",
        ),
        EncoderSpec(
            "clip_vision", 146, CLIPVisionModel,
            CLIPVisionConfig(hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2,
                             image_size=8, patch_size=4, num_channels=3),
            "feature-extraction", ("last_hidden_state", "pooler_output"),
            "the image tower alone: pre-norm, the class token through post_layernorm as pooler_output",
        ),
        EncoderSpec(
            "clip_vision_projected", 147, CLIPVisionModelWithProjection,
            CLIPVisionConfig(hidden_size=12, intermediate_size=18, num_hidden_layers=1, num_attention_heads=3,
                             image_size=6, patch_size=3, num_channels=2, projection_dim=7, hidden_act="gelu"),
            "feature-extraction", ("image_embeds", "last_hidden_state"),
            "the image tower projected (7 wide) as image_embeds, two-channel 6x6 images in 3x3 patches",
        ),
        EncoderSpec(
            "siglip_text", 148, SiglipTextModel,
            SiglipTextConfig(vocab_size=40, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                             num_attention_heads=2, max_position_embeddings=10, projection_size=6),
            "feature-extraction", ("last_hidden_state", "pooler_output"),
            "the text tower alone: bidirectional, the last position (padding in a padded row) through a 16 -> 6 head",
        ),
        EncoderSpec(
            "siglip_vision", 149, SiglipVisionModel,
            SiglipVisionConfig(hidden_size=16, intermediate_size=20, num_hidden_layers=2, num_attention_heads=4,
                               image_size=8, patch_size=2, num_channels=3),
            "feature-extraction", ("last_hidden_state", "pooler_output"),
            "the image tower alone: no class token, post_layernorm over every state, a 4-head attention probe",
        ),
        EncoderSpec(
            "modernbert_tok", 115, ModernBertForTokenClassification,
            modernbert_config(ModernBertConfig, num_labels=5, local_attention=2, decoder_bias=False),
            "token-classification", ("logits",), "prediction head before the classifier, window 1 each side",
        ),
    ]


def audio_config(cls, **kw):
    """A tiny raw-audio encoder: 3 convolutions (receptive field 50 samples, stride 20), 2 layers of width 32."""
    base = dict(vocab_size=20, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                conv_dim=[8, 8, 12], conv_kernel=[10, 3, 3], conv_stride=[5, 2, 2], num_conv_pos_embeddings=6,
                num_conv_pos_embedding_groups=4, layer_norm_eps=1e-5, pad_token_id=0)
    base.update(kw)
    return cls(**base)


# samples of the audio fixtures' clips: not a multiple of any stride product
AUDIO_SAMPLES = 613


def modernbert_config(cls, **kw):
    """local_attention 4 (2 each side) so that windows cut the 7-token inputs; ids in the vocab."""
    base = dict(vocab_size=99, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37,
                max_position_embeddings=40, local_attention=4, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                cls_token_id=1, sep_token_id=2)
    base.update(kw)
    return cls(**base)


def distilbert_config(cls, **kw):
    base = dict(vocab_size=99, dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=40,
                dropout=0.0, attention_dropout=0.0)
    base.update(kw)
    return cls(**base)


def encoder_inputs(gen, spec, config, rows, pad):
    """ids avoiding the special ids below 3 (RoBERTa's pad is 1), row 1 right-padded by `pad`."""
    ids = torch.randint(3, config.vocab_size, (rows, SEQ), generator=gen, dtype=torch.int64)
    mask = torch.ones_like(ids)
    if pad:
        ids[1, SEQ - pad :] = config.pad_token_id
        mask[1, SEQ - pad :] = 0
    inputs = {"input_ids": ids, "attention_mask": mask}
    if getattr(config, "type_vocab_size", 0) > 1:
        types = torch.zeros_like(ids)
        types[:, SEQ // 2 :] = 1
        inputs["token_type_ids"] = types
    return inputs


def fresh_model(outdir, spec):
    """An empty fixture folder and the spec's model, seeded, eager attention, weights widened."""
    folder = outdir / spec.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    torch.manual_seed(spec.seed)
    spec.config._attn_implementation = "eager"
    model = spec.model_cls(spec.config).to(torch.float32).eval()
    widen_weights(model)
    return folder, model


def write_sentence_transformers_folder(folder, spec):
    """The files sentence-transformers keeps beside a checkpoint (as the hub's all-MiniLM-L6-v2
    has them): modules.json, the Pooling module's config, each Dense module (saved by
    sentence-transformers: config.json and model.safetensors), an empty Normalize folder, and a
    small WordPiece tokenizer (SentenceTransformer loads one; the goldens feed ids)."""
    from sentence_transformers.sentence_transformer.modules import Dense
    from transformers import BertTokenizerFast

    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    gen = torch.Generator().manual_seed(2000 + spec.seed)
    for kwargs in spec.dense:
        i = len(modules)
        dense = Dense(**kwargs)
        with torch.no_grad():
            for p in dense.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
        (folder / f"{i}_Dense").mkdir()
        dense.save(str(folder / f"{i}_Dense"))
        modules.append({"idx": i, "name": str(i), "path": f"{i}_Dense", "type": "sentence_transformers.models.Dense"})
    if spec.normalize:
        i = len(modules)
        modules.append({"idx": i, "name": str(i), "path": f"{i}_Normalize", "type": "sentence_transformers.models.Normalize"})
        (folder / f"{i}_Normalize").mkdir()
    (folder / "1_Pooling").mkdir()
    (folder / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(spec.pooling, indent=2) + "\n")
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32, "do_lower_case": False}) + "\n")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words += [f"w{i}" for i in range(spec.config.vocab_size - len(words))]
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(words) + "\n")
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(folder)


def sentence_transformers_goldens(folder, inputs):
    """SentenceTransformer's own forward over `folder`: its token_embeddings (the export's
    last_hidden_state) and sentence_embedding."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(folder), device="cpu", model_kwargs={"attn_implementation": "eager"}).eval()
    with torch.no_grad():
        out = st(dict(inputs))
    return {"last_hidden_state": out["token_embeddings"], "sentence_embedding": out["sentence_embedding"]}


def dual_encoder_goldens(model, gen, texts, pad):
    """A CLIP or SigLIP batch: `texts` rows of ids ending in the end-of-text id (row 1 right-padded by `pad`,
    as the tokenizer pads), `texts + 1` images; the forward's outputs and each tower's features."""
    t, v = model.config.text_config, model.config.vision_config
    ids = torch.randint(3, t.vocab_size - 1, (texts, SEQ), generator=gen, dtype=torch.int64)
    ids[ids == t.eos_token_id] = 3
    mask = torch.ones_like(ids)
    for r in range(texts):
        end = SEQ - (pad if r == 1 else 0)
        ids[r, end - 1] = t.eos_token_id if t.eos_token_id != 2 else t.vocab_size - 1
        ids[r, end:] = t.pad_token_id
        mask[r, end:] = 0
    h, w = (v.image_size, v.image_size) if isinstance(v.image_size, int) else v.image_size
    pixels = torch.randn((texts + 1, v.num_channels, h, w), generator=gen)
    inputs = {"input_ids": ids, "attention_mask": mask, "pixel_values": pixels}
    with torch.no_grad():
        out = model(**inputs)
        text = model.get_text_features(input_ids=ids, attention_mask=mask)
        image = model.get_image_features(pixel_values=pixels)
    outputs = {k: getattr(out, k) for k in ("logits_per_image", "logits_per_text", "text_embeds", "image_embeds")}
    outputs["text_model.text_embeds"] = text.pooler_output
    outputs["text_model.last_hidden_state"] = text.last_hidden_state
    outputs["vision_model.image_embeds"] = image.pooler_output
    outputs["vision_model.last_hidden_state"] = image.last_hidden_state
    return inputs, outputs


def make_encoder_fixture(outdir, spec):
    folder, model = fresh_model(outdir, spec)
    model.save_pretrained(folder, safe_serialization=True)
    del model
    if spec.pooling is not None:
        write_sentence_transformers_folder(folder, spec)
    if hasattr(spec.config, "conv_dim"):
        write_audio_processor(folder, spec)
    model = spec.model_cls.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    gen = torch.Generator().manual_seed(1000 + spec.seed)
    golden = {}
    for case, rows, pad in [("single", 1, 0), ("batch", 2, 3)]:
        if spec.task == "zero-shot-image-classification":
            inputs, out = dual_encoder_goldens(model, gen, rows, pad)
        elif hasattr(model.config, "conv_dim"):
            # a batch is zero-padded to one length, as the feature extractor pads (no attention mask)
            values = torch.randn((rows, AUDIO_SAMPLES), generator=gen)
            mask = torch.ones((rows, AUDIO_SAMPLES), dtype=torch.int64)
            if pad:
                values[1, AUDIO_SAMPLES - 100 * pad :] = 0.0
                mask[1, AUDIO_SAMPLES - 100 * pad :] = 0
            inputs = {"input_values": values}
            if audio_mask(model.config):
                inputs["attention_mask"] = mask
        elif spec.task == "image-classification" or hasattr(model.config, "image_size"):
            c, size = model.config.num_channels, model.config.image_size
            h, w = (size, size) if isinstance(size, int) else size
            inputs = {"pixel_values": torch.randn((rows, c, h, w), generator=gen)}
        else:
            inputs = encoder_inputs(gen, spec, model.config, rows, pad)
        if spec.task == "zero-shot-image-classification":
            pass
        elif spec.pooling is not None:
            out = sentence_transformers_goldens(folder, inputs)
        else:
            with torch.no_grad():
                out = model(**inputs)
            out = {k: getattr(out, k) for k in spec.outputs}
        for k, v in inputs.items():
            golden[f"{case}.{k}"] = v.contiguous()
        for k in spec.outputs:
            golden[f"{case}.{k}"] = out[k].to(torch.float32).contiguous().clone()  # a view (DINOv2's pooler) must not share
    save_file(golden, str(folder / "golden.safetensors"))
    for f in folder.glob("*.safetensors"):
        canonical_metadata_order(f) if f.name == "model.safetensors" else None
    stored = sorted(safetensors.safe_open(str(folder / "model.safetensors"), "pt").keys())
    print(f"== {spec.name}  ({spec.model_cls.__name__}, seed {spec.seed}, task {spec.task})")
    print(f"   outputs:  {[(k, tuple(golden['batch.' + k].shape)) for k in spec.outputs]}")
    bodies = ('bert.', 'roberta.', 'distilbert.', 'vit.', 'model.', 'embeddings', 'encoder', 'pooler', 'layers',
              'text_model.', 'vision_model.')
    print(f"   heads:    {[k for k in stored if not k.startswith(bodies)]}")


class Seq2SeqSpec(NamedTuple):
    """An encoder-decoder fixture: Whisper (speech), T5 or the BART line (text)."""
    name: str
    seed: int
    config: object
    covers: str = ""
    untied_head: bool = False  # T5: store an lm_head of its own (T5 v1.1, Flan-T5)

    @property
    def speech(self):
        return self.config.model_type == "whisper"

    @property
    def task(self):
        return "automatic-speech-recognition" if self.speech else "text2text-generation"

    @property
    def model_cls(self):
        import transformers

        return getattr(transformers, SEQ2SEQ_CLASSES[self.config.model_type])


SEQ2SEQ_CLASSES = {
    "whisper": "WhisperForConditionalGeneration",
    "t5": "T5ForConditionalGeneration",
    "bart": "BartForConditionalGeneration",
    "mbart": "MBartForConditionalGeneration",
    "marian": "MarianMTModel",
    "pegasus": "PegasusForConditionalGeneration",
    "m2m_100": "M2M100ForConditionalGeneration",
}


def seq2seq_specs():
    from transformers import (BartConfig, M2M100Config, MarianConfig, MBartConfig, PegasusConfig, T5Config,
                              WhisperConfig)

    # the BART line's shared sizes: 2 encoder / 3 decoder layers, heads 4 / 2 of width 8
    bart_sizes = dict(vocab_size=99, d_model=32, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
                      decoder_attention_heads=2, encoder_ffn_dim=37, decoder_ffn_dim=41, max_position_embeddings=40,
                      dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)

    return [
        Seq2SeqSpec(
            "whisper", 120,
            WhisperConfig(vocab_size=99, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                          decoder_attention_heads=2, encoder_ffn_dim=37, decoder_ffn_dim=41, num_mel_bins=8,
                          max_source_positions=12, max_target_positions=40, decoder_start_token_id=3,
                          pad_token_id=0, bos_token_id=1, eos_token_id=2, suppress_tokens=None,
                          begin_suppress_tokens=None),
            "8 mel bins x 24 frames, encoder heads 4 / decoder heads 2, untied ffn sizes, tied proj_out",
        ),
        Seq2SeqSpec(
            "t5", 122,
            T5Config(vocab_size=99, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4,
                     relative_attention_num_buckets=8, relative_attention_max_distance=12, dropout_rate=0.0,
                     decoder_start_token_id=0, pad_token_id=0, eos_token_id=1),
            "T5 v1.0: relu MLP, tied head with the d_model ** -0.5 scale, 8 buckets up to distance 12",
        ),
        Seq2SeqSpec(
            "t5_gated", 123,
            T5Config(vocab_size=99, d_model=32, d_kv=6, d_ff=29, num_layers=3, num_decoder_layers=2, num_heads=4,
                     relative_attention_num_buckets=16, relative_attention_max_distance=20, dropout_rate=0.0,
                     feed_forward_proj="gated-gelu", tie_word_embeddings=False, decoder_start_token_id=0,
                     pad_token_id=0, eos_token_id=1),
            "T5 v1.1 / Flan: gated-gelu, its own lm_head, no output scale, d_kv 6, 3 encoder / 2 decoder layers",
            untied_head=True,
        ),
        Seq2SeqSpec(
            "bart", 124,
            BartConfig(**bart_sizes, pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2),
            "BART: norms after the residual adds, learned positions offset by 2, layernorm_embedding, "
            "final_logits_bias, unscaled embeddings, forced BOS and EOS in generate (BART-CNN's)",
        ),
        Seq2SeqSpec(
            "mbart", 125,
            MBartConfig(**{**bart_sizes, "activation_function": "gelu_new"}, pad_token_id=1,
                        bos_token_id=0, eos_token_id=2, decoder_start_token_id=None, forced_eos_token_id=None),
            "mBART: norms before each sublayer with a final norm per stack, gelu_new, the start token from "
            "bos_token_id",
        ),
        Seq2SeqSpec(
            "marian", 126,
            MarianConfig(**bart_sizes, scale_embedding=True, pad_token_id=98, eos_token_id=0, decoder_start_token_id=98,
                         share_encoder_decoder_embeddings=False, tie_word_embeddings=False, forced_eos_token_id=None),
            "Marian: computed sinusoidal positions (never stored), post-norm, its own encoder and decoder "
            "embeddings and head, sqrt(d_model)-scaled embeddings",
        ),
        Seq2SeqSpec(
            "pegasus", 127,
            PegasusConfig(**{**bart_sizes, "d_model": 30, "encoder_attention_heads": 3, "decoder_attention_heads": 5,
                             "activation_function": "relu"},
                          scale_embedding=True, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                          tie_word_embeddings=False, forced_eos_token_id=None),
            "Pegasus: pre-norm with final norms, sinusoidal positions over d_model 30, relu, head sizes 10 / 6, "
            "its own head, scaled embeddings",
        ),
        Seq2SeqSpec(
            "m2m100", 128,
            M2M100Config(**bart_sizes, pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
                         encoder_layerdrop=0.0, decoder_layerdrop=0.0, scale_embedding=False,
                         tie_word_embeddings=False),
            "M2M100 / NLLB: fairseq's sinusoids (never stored) counted over the non-padding ids (the padded "
            "row's pads read the zero row), pre-norm, relu, its own head",
        ),
    ]


GREEDY_TOKENS = 16


def word_tokenizer(vocab_size, specials=("<pad>", "</s>", "<unk>"), template="$A </s>"):
    """A tokenizer.json for `generate --prompt`: the special tokens first (T5's `<pad>`, `</s>`,
    `<unk>`; BART's `<s>`, `<pad>`, `</s>`, `<unk>`), then words `w<n>` that are their ids n;
    `template` wraps every text as the family's tokenizer does (T5 appends `</s>`, BART adds
    `<s>` in front too)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {**{t: i for i, t in enumerate(specials)}, **{f"w{i}": i for i in range(len(specials), vocab_size)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    used = [(t, vocab[t]) for t in specials if t in template]
    tok.post_processor = processors.TemplateProcessing(single=template, special_tokens=used)
    return tok


def make_seq2seq_fixture(outdir, spec):
    """golden.safetensors: `single` [1, ...] and `batch` [2, ...] encoder inputs (Whisper's
    input_features; T5's input_ids and attention_mask, row 1 right-padded) with their
    encoder_hidden_states, and `single.tokens`: 16 tokens of plain greedy decoding (the whole
    sequence recomputed every step, no cache, from decoder_start_token_id, EOS not stopping)."""
    folder, model = fresh_model(outdir, spec)
    with torch.no_grad():  # positions of std 1 move the greedy tokens (else one token repeats)
        if spec.speech:
            model.model.decoder.embed_positions.weight.mul_(1.0 / STD)
        elif spec.config.model_type != "t5":  # the BART line
            if hasattr(model, "final_logits_bias"):  # a buffer, zero unless set
                model.final_logits_bias.normal_(0.0, STD)
            if spec.config.model_type != "m2m_100":  # a table of weights (Marian's is recomputed on load)
                model.model.decoder.embed_positions.weight.mul_(1.0 / STD)
        else:
            for stack in (model.encoder, model.decoder):
                stack.block[0].layer[0].SelfAttention.relative_attention_bias.weight.mul_(1.0 / STD)
    model.save_pretrained(folder, safe_serialization=True)
    if spec.untied_head:  # transformers ties T5's head when saving; an older file stores its own
        weights = safetensors.torch.load_file(str(folder / "model.safetensors"))
        weights["lm_head.weight"] = torch.randn(model.config.vocab_size, model.config.d_model) * STD
        save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    del model
    model = spec.model_cls.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    cfg = model.config
    gen = torch.Generator().manual_seed(1000 + spec.seed)
    golden = {}
    for case, rows in [("single", 1), ("batch", 2)]:
        if spec.speech:
            inputs = {"input_features": torch.randn((rows, cfg.num_mel_bins, 2 * cfg.max_source_positions), generator=gen)}
        else:
            inputs = encoder_inputs(gen, spec, cfg, rows, 3 if rows == 2 else 0)
        with torch.no_grad():
            states = model.get_encoder()(**inputs).last_hidden_state
        golden.update({f"{case}.{k}": v.contiguous() for k, v in inputs.items()})
        golden[f"{case}.encoder_hidden_states"] = states.contiguous()
    encoder_inputs_of = {k[len("single."):]: v for k, v in golden.items() if k.startswith("single.")
                         and not k.endswith("encoder_hidden_states")}
    # as generate: the BOS id when no start token is set (mBART)
    start = cfg.decoder_start_token_id if cfg.decoder_start_token_id is not None else cfg.bos_token_id
    ids = torch.tensor([[start]])
    with torch.no_grad():
        for _ in range(GREEDY_TOKENS):
            logits = model(**encoder_inputs_of, decoder_input_ids=ids, use_cache=False).logits
            ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    golden["single.tokens"] = ids[0, 1:].contiguous()
    save_file(golden, str(folder / "golden.safetensors"))
    canonical_metadata_order(folder / "model.safetensors")
    if spec.name == "t5":
        word_tokenizer(cfg.vocab_size).save(str(folder / "tokenizer.json"))
    if spec.name == "bart":
        # `generate` as a user calls it: forced_bos_token_id after the start token (which 5.23
        # reads only from generation_config.json, as BART-CNN's has it), forced EOS last
        model.generation_config.forced_bos_token_id = 0
        model.generation_config.save_pretrained(folder)
        with torch.no_grad():
            out = model.generate(**encoder_inputs_of, max_new_tokens=GREEDY_TOKENS, do_sample=False, num_beams=1)
        golden["generate.tokens"] = out[0, 1:].contiguous()
        save_file(golden, str(folder / "golden.safetensors"))
        word_tokenizer(cfg.vocab_size, ("<s>", "<pad>", "</s>", "<unk>"), "<s> $A </s>").save(
            str(folder / "tokenizer.json"))
    if spec.speech:
        # the feature extractor `generate --audio` reads: 24 frames of 8 bins from 3 s of 16 kHz audio
        transformers.WhisperFeatureExtractor(
            feature_size=cfg.num_mel_bins, hop_length=48000 // (2 * cfg.max_source_positions), chunk_length=3
        ).save_pretrained(folder)
    print(f"== {spec.name}  ({spec.model_cls.__name__}, seed {spec.seed})")
    print(f"   tokens:   {golden['single.tokens'].tolist()}")


# The README's demo checkpoint: it also gets a tokenizer, so `hfexport generate --prompt` on its
# exports reads and prints text.
DEMO = "qwen3"


def audio_mask(config):
    """Whether a raw-audio fixture's feature extractor returns an attention mask: the layer-normed ones, as the
    lv60 and large checkpoints' do (the group-normed base checkpoints' do not)."""
    return getattr(config, "feat_extract_norm", "layer") == "layer"


def write_audio_processor(dst, spec):
    """What a raw-audio checkpoint keeps beside its weights (as facebook/wav2vec2-base-960h):
    Wav2Vec2FeatureExtractor's preprocessor_config.json, and for CTC a character vocabulary of exactly the
    model's labels (vocab.json: the special tokens, `|` between words, then letters) for Wav2Vec2CTCTokenizer."""
    from transformers import Wav2Vec2CTCTokenizer, Wav2Vec2FeatureExtractor

    mask = audio_mask(spec.config)
    Wav2Vec2FeatureExtractor(do_normalize=True, return_attention_mask=mask).save_pretrained(dst)
    if spec.task == "automatic-speech-recognition":
        n = spec.config.vocab_size
        tokens = ["<pad>", "<s>", "</s>", "<unk>", "|"] + [chr(ord("A") + i) for i in range(n - 5)]
        (dst / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}) + "\n")
        Wav2Vec2CTCTokenizer(str(dst / "vocab.json")).save_pretrained(dst)


def write_demo_tokenizer(dst, vocab_size):
    """A BPE tokenizer of exactly the model's vocabulary, trained on demo_corpus.txt (the opening
    of Lewis Carroll's Alice's Adventures in Wonderland, 1865, in the public domain), words
    marked by the metaspace as SentencePiece does."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>"], show_progress=False)
    tok.train([str(Path(__file__).parent / "demo_corpus.txt")], trainer)
    assert tok.get_vocab_size() == vocab_size, (tok.get_vocab_size(), vocab_size)
    tok.save(str(dst / "tokenizer.json"))


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: make_fixtures.py OUTDIR [NAME...]")
    outdir = Path(sys.argv[1])
    outdir.mkdir(parents=True, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    transformers.utils.logging.set_verbosity_error()  # e.g. qwen3 generating past max_position_embeddings
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    print(
        f"transformers {transformers.__version__}, torch {torch.__version__}, "
        f"safetensors {safetensors.__version__}, numpy {np.__version__}"
    )
    specs, encoders, seq2seq = fixture_specs(), encoder_specs(), seq2seq_specs()
    only = sys.argv[2:]  # regenerate only these (the manifest still lists every spec)
    for spec in specs:
        if not only or spec.name in only:
            make_fixture(outdir, spec)
            if spec.name == DEMO:
                write_demo_tokenizer(outdir / spec.name, spec.config.vocab_size)
    for spec in encoders:
        if not only or spec.name in only:
            make_encoder_fixture(outdir, spec)
    for spec in seq2seq:
        if not only or spec.name in only:
            make_seq2seq_fixture(outdir, spec)
    write_manifest(outdir, specs + encoders + seq2seq)


def write_manifest(outdir, specs):
    """tests/fixtures/manifest.json: the one fixture list every test reads (a `covers` note in the
    previous manifest wins over the spec's)."""
    path = outdir / "manifest.json"
    old = json.load(open(path)) if path.exists() else {"fixtures": []}
    covers = {f["name"]: f.get("covers", "") for f in old["fixtures"]}
    fixtures = [
        {
            "name": s.name,
            "architecture": s.model_cls.__name__,
            "task": getattr(s, "task", "causal-lm"),
            "covers": covers.get(s.name) or s.covers,
            **({"recurrent": True} if getattr(s, "recurrent", False) else {}),
            # a raw-audio encoder's speech recognition is one forward graph, not generation
            **({"audio": True} if hasattr(getattr(s, "config", None), "conv_dim") else {}),
        }
        for s in specs
    ]
    about = old.get("about", "The committed tiny checkpoints; every test reads its fixture list from here.")
    with open(path, "w") as f:
        json.dump({"about": about, "fixtures": fixtures}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
