#!/usr/bin/env python3
"""WAV files and transformers' WhisperFeatureExtractor features of them, for crates/hfexport-cli/tests/seq2seq.rs.

Usage: whisper_audio.py OUTDIR FIXTURE_DIR

Writes into OUTDIR: speech.wav (1.5 s) and long.wav (4.2 s), 16 kHz mono 16-bit PCM of tones and
noise; stereo.wav and rate8k.wav (what the model cannot take); one folder per feature extractor
config (fe-fixture: FIXTURE_DIR's preprocessor_config.json; fe-default: 80 bins, 30 s chunks;
fe-128: 128 bins as Whisper large-v3; fe-odd: n_fft 512, hop 320, 20 bins) with its
preprocessor_config.json; and golden.safetensors with `<config>.<wav>.input_features` for every
config and WAV, and `fixture.speech.tokens`: 16 tokens of plain greedy decoding by FIXTURE_DIR's
model on speech.wav's features (no cache, from decoder_start_token_id).
"""

import sys
import wave
from pathlib import Path

import numpy as np
import torch
import transformers
from safetensors.torch import save_file

RATE = 16000


def write_wav(path, samples, rate=RATE, channels=1):
    pcm = np.clip(np.round(samples * 32767), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())


def read_wav(path):
    with wave.open(str(path), "rb") as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def signal(seconds, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    tones = sum(0.2 * np.sin(2 * np.pi * f * t) for f in (220.0, 523.25, 1800.0, 4100.0))
    return (tones * np.exp(-t) + 0.05 * rng.standard_normal(t.shape)).astype(np.float32)


def main():
    out, fixture = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    transformers.utils.logging.set_verbosity_error()
    torch.set_num_threads(1)
    write_wav(out / "speech.wav", signal(1.5, 1))
    write_wav(out / "long.wav", signal(4.2, 2))
    write_wav(out / "stereo.wav", np.repeat(signal(0.5, 3), 2), channels=2)
    write_wav(out / "rate8k.wav", signal(0.5, 4), rate=8000)
    FE = transformers.WhisperFeatureExtractor
    configs = {
        "fixture": FE.from_pretrained(fixture),
        "default": FE(),
        "128": FE(feature_size=128),
        "odd": FE(feature_size=20, n_fft=512, hop_length=320, chunk_length=2),
    }
    golden = {}
    for name, fe in configs.items():
        fe.save_pretrained(out / f"fe-{name}")
        for wav in ("speech", "long"):
            feats = fe(read_wav(out / f"{wav}.wav"), sampling_rate=RATE, return_tensors="pt").input_features
            golden[f"{name}.{wav}.input_features"] = feats.contiguous()
    model = transformers.WhisperForConditionalGeneration.from_pretrained(fixture, attn_implementation="eager").eval()
    feats = golden["fixture.speech.input_features"]
    ids = torch.tensor([[model.config.decoder_start_token_id]])
    with torch.no_grad():
        for _ in range(16):
            logits = model(input_features=feats, decoder_input_ids=ids, use_cache=False).logits
            ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    golden["fixture.speech.tokens"] = ids[0, 1:].contiguous()
    save_file(golden, str(out / "golden.safetensors"))


if __name__ == "__main__":
    main()
