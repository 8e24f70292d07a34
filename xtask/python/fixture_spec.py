"""The description of one causal-LM fixture, shared by make_fixtures.py and the per-round spec
modules (decoder_fixtures.py), and how transformers is run to make goldens (also by
random_checkpoints.py)."""

import json
from pathlib import Path
from typing import Callable, NamedTuple


def attention_implementation(folder):
    """eager, except where transformers' eager path computes another model than the class's default
    implementation does: FalconAttention's eager ALiBi branch scales `scores + alibi` and then adds
    the mask FalconModel already filled with `alibi / sqrt(head_dim)`, so the bias counts twice;
    with sdpa (which the class forces by default) it counts once."""
    cfg = json.loads((Path(folder) / "config.json").read_text())
    return "sdpa" if cfg.get("model_type") == "falcon" and cfg.get("alibi") else "eager"


def without_gemma3n_towers():
    """Gemma3nModel builds its vision tower from timm (MobileNetV5, not installed here) and its
    audio tower with AutoModel; a text-only forward calls neither, so the fixtures of its text
    model (media-token tables included) get empty modules in their place and store no tower
    weights, which hfexport does not read."""
    import torch
    import transformers
    from transformers.models.gemma3n import modeling_gemma3n

    class TextOnly:
        @staticmethod
        def from_config(config, **kwargs):
            if config.model_type in ("gemma3n_vision", "gemma3n_audio"):
                return torch.nn.Module()
            return transformers.AutoModel.from_config(config, **kwargs)

    modeling_gemma3n.AutoModel = TextOnly


def causal_lm_class(folder):
    """AutoModelForCausalLM, as users load a checkpoint (it reads a `mistral` config with
    `layer_types` as Ministral's, which MistralForCausalLM itself would not); for a `model_type`
    it maps to no causal LM (Mistral4Config: its hub checkpoints are image-text ones), the class
    config.json names (`architectures[0]`)."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    cfg = json.loads((Path(folder) / "config.json").read_text())
    if cfg.get("model_type") == "gemma3n":
        without_gemma3n_towers()
    if cfg.get("model_type") in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return transformers.AutoModelForCausalLM
    return getattr(transformers, (cfg.get("architectures") or [""])[0], transformers.AutoModelForCausalLM)


class Spec(NamedTuple):
    name: str
    seed: int
    model_cls: type
    config: object
    post_edit: Callable | None  # config.json -> config.json (the same config in another form)
    covers: str = ""  # the manifest note (a note already in the manifest wins)
    # Stricter greedy golden (the first five fixtures predate it): the prompt is also redrawn
    # until greedy decoding without a KV cache (the whole sequence recomputed each step) gives
    # the same tokens with the same margin, so the golden holds for either reading, and until
    # the 16 tokens are not stuck on one token (a repeated token hides cache and window bugs).
    strict_greedy: bool = False
    # Spread of the input embedding when not STD: smaller where the embedding is scaled up
    # (Gemma's sqrt(hidden)) and tied to the head, which otherwise makes every greedy run
    # repeat one token.
    embed_std: float | None = None
    # Rewrites the saved folder into another stored form of the same model, before the goldens
    # are computed from it (GPT-OSS's experts as MXFP4 blocks: the goldens are the model
    # transformers loads from those).
    post_save: Callable | None = None
    # The layers keep a recurrent state instead of a KV cache (Mamba): the manifest says so, and
    # tests that build on attention caches (growing caches, multi-token decode) leave it out.
    recurrent: bool = False
