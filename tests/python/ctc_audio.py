#!/usr/bin/env python3
"""A WAV and transformers' greedy CTC transcript of it, for crates/hfexport-cli/tests/encoders.rs.

Usage: ctc_audio.py OUTDIR FIXTURE_DIR

Writes into OUTDIR: speech.wav (0.3 s, 16 kHz mono 16-bit PCM of tones and noise), rate8k.wav (what
the model cannot take), and transcript.json: for FIXTURE_DIR's Wav2Vec2ForCTC over speech.wav as its
processor reads it, the ids (per-frame argmax, repeats merged, the pad blank dropped) and the text
`processor.batch_decode` gives (special tokens kept, as transformers' speech-recognition pipeline decodes
CTC output).
"""

import json
import sys
from itertools import groupby
from pathlib import Path

import numpy as np
import torch
import transformers

from whisper_audio import RATE, read_wav, write_wav


def main():
    transformers.utils.logging.disable_progress_bar()
    out, fixture = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    t = np.arange(int(0.3 * RATE)) / RATE
    speech = 0.4 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 3 * t) + 0.1 * rng.standard_normal(t.shape)
    write_wav(out / "speech.wav", speech)
    write_wav(out / "rate8k.wav", speech[::2], rate=8000)
    processor = transformers.Wav2Vec2Processor.from_pretrained(fixture)
    model = transformers.Wav2Vec2ForCTC.from_pretrained(fixture, attn_implementation="eager").eval()
    inputs = processor(read_wav(out / "speech.wav"), sampling_rate=RATE, return_tensors="pt")
    with torch.no_grad():
        logits = model(inputs.input_values).logits
    best = logits.argmax(-1)[0].tolist()
    ids = [k for k, _ in groupby(best) if k != model.config.pad_token_id]
    # special tokens kept, as the speech-recognition pipeline decodes CTC output
    text = processor.batch_decode(logits.argmax(-1))[0]
    (out / "transcript.json").write_text(json.dumps({"ids": ids, "text": text, "frames": len(best)}) + "\n")


if __name__ == "__main__":
    main()
