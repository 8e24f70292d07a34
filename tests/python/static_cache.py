"""What the Python generation loops over static-cache exports share (generate_seq2seq.py,
generate_vision.py): OpenVINO's exact-check settings, the per-call feeds of the static-cache
contract (docs/io-contracts.md) and the empty caches."""
import numpy as np

# f32 inference and caches, and no dynamic quantization of activations (AVX512-VNNI CPUs)
OV_CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}


def feeds(tokens, pos, slots):
    """`tokens` at positions pos..pos+q: `input_ids`, `attention_mask` (bool [1, 1, q, slots],
    slot j visible to query i iff j <= pos + i) and `position_ids`."""
    q = len(tokens)
    mask = np.arange(slots)[None, :] <= (pos + np.arange(q))[:, None]
    return {
        "input_ids": np.array([tokens], np.int64),
        "attention_mask": np.ascontiguousarray(mask[None, None]),
        "position_ids": np.arange(pos, pos + q, dtype=np.int64)[None],
    }


def zeros(port, slots):
    """An empty cache of export.json's `port`, `cache_len` set to `slots`."""
    return np.zeros([slots if d == "cache_len" else int(d) for d in port["shape"]], np.float32)
