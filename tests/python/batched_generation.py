"""transformers' generate over a left-padded batch and with beam search, for the client tests
(tests/clients.rs): what optimum-intel's OVModelForCausalLM must reproduce over our exports.

usage: batched_generation.py OUT.json FIXTURE_DIR...
Writes {fixture_dir: {"batch": {"input_ids", "attention_mask", "tokens"}, "beams": {...}}}.

       batched_generation.py --seq2seq OUT.json CHECKPOINT_DIR...
Encoder-decoders: {checkpoint_dir: {"inputs": {name: values}, "tokens", "beams"}}: a batch of
two texts (the second padded on the right by 2, as these families' tokenizers pad) or one
speech clip, and transformers' `generate` of it (8 new tokens, greedy; a text's with two beams
too).

       batched_generation.py --onnx EXPORT_DIR FIXTURE_DIR
The growing-cache `onnx/model.onnx` of EXPORT_DIR in onnxruntime, greedy over that batch (the
prompt over an empty past, then a token per row per call, positions counted over the mask as
transformers counts them); exits non-zero, printing both, unless its tokens are transformers'.
"""

import json
import sys

import torch
import transformers

NEW_TOKENS = 8


def batch_case(model):
    """Two random prompts, row 1 two tokens shorter and padded on the left."""
    vocab = model.config.get_text_config().vocab_size
    ids = torch.randint(3, vocab, (2, 6))
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    ids[1, :2] = 0
    return ids, mask


def load(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                             attn_implementation="eager").eval()


def onnx_batch(export, folder):
    import numpy as np
    import onnxruntime as ort

    torch.manual_seed(0)
    model = load(folder)
    ids, mask = batch_case(model)
    with torch.no_grad():
        want = model.generate(ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                              do_sample=False, eos_token_id=None, pad_token_id=0)[:, ids.shape[1]:]
    s = ort.InferenceSession(f"{export}/onnx/model.onnx", providers=["CPUExecutionProvider"])
    caches = {}
    for i in s.get_inputs():
        if i.name.startswith("past_key_values."):
            shape = [2 if d == "batch" else 0 if d == "past_len" else d for d in i.shape]
            caches[i.name[len("past_key_values."):]] = np.zeros(shape, np.float32)
    step_ids, m, got = ids.numpy(), mask.numpy(), []
    for _ in range(NEW_TOKENS):
        counted = np.cumsum(m, axis=1) - 1
        positions = np.where(m == 0, 1, counted)[:, -step_ids.shape[1]:]
        feed = {"input_ids": step_ids, "attention_mask": m, "position_ids": positions}
        feed.update({f"past_key_values.{n}": v for n, v in caches.items()})
        names = [o.name for o in s.get_outputs()]
        out = dict(zip(names, s.run(names, feed)))
        caches = {n: out[f"present.{n}"] for n in caches}
        step_ids = out["logits"][:, -1].argmax(-1)[:, None].astype(np.int64)
        got.append(step_ids[:, 0])
        m = np.concatenate([m, np.ones((2, 1), np.int64)], axis=1)
    got = np.stack(got, axis=1)
    if not (got == want.numpy()).all():
        sys.exit(f"{export}: tokens {got.tolist()}, transformers' {want.tolist()}")


def seq2seq_inputs(config):
    """An encoder-decoder's inputs: speech features of one clip, or two token rows, the second
    padded on the right by 2."""
    gen = torch.Generator().manual_seed(3)
    if config.model_type == "whisper":
        features = torch.rand(1, config.num_mel_bins, 2 * config.max_source_positions, generator=gen) * 2 - 1
        return {"input_features": features}
    ids = torch.randint(3, config.vocab_size, (2, 7), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, -2:] = 0
    ids[1, -2:] = config.pad_token_id
    return {"input_ids": ids, "attention_mask": mask}


def seq2seq(out, folders):
    result = {}
    for folder in folders:
        config = transformers.AutoConfig.from_pretrained(folder)
        speech = config.model_type == "whisper"
        cls = transformers.AutoModelForSpeechSeq2Seq if speech else transformers.AutoModelForSeq2SeqLM
        model = cls.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
        inputs = seq2seq_inputs(config)
        case = {"inputs": {k: v.tolist() for k, v in inputs.items()}}
        for name, extra in [("tokens", {})] + ([] if speech else [("beams", {"num_beams": 2})]):
            with torch.no_grad():
                case[name] = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False, **extra).tolist()
        result[folder] = case
    with open(out, "w") as f:
        json.dump(result, f)


def main():
    if sys.argv[1] == "--onnx":
        return onnx_batch(sys.argv[2], sys.argv[3])
    if sys.argv[1] == "--seq2seq":
        return seq2seq(sys.argv[2], sys.argv[3:])
    out, folders = sys.argv[1], sys.argv[2:]
    torch.manual_seed(0)
    result = {}
    for folder in folders:
        model = load(folder)
        ids, mask = batch_case(model)
        cases = {"batch": (ids, mask, {}), "beams": (ids[:1], mask[:1], {"num_beams": 2})}
        result[folder] = {}
        for name, (i, m, extra) in cases.items():
            with torch.no_grad():
                tokens = model.generate(i, attention_mask=m, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                        do_sample=False, eos_token_id=None, pad_token_id=0, **extra)
            result[folder][name] = {"input_ids": i.tolist(), "attention_mask": m.tolist(),
                                    "tokens": tokens[:, i.shape[1]:].tolist()}
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
