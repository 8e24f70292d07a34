"""The description of one causal-LM fixture, shared by make_fixtures.py and the per-round spec
modules (decoder_fixtures.py)."""

from typing import Callable, NamedTuple


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
