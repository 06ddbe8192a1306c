"""The phone line a SIP caller is heard through: the 300-3400 Hz voice band at 8 kHz, G.711 mu-law.

One definition for the turn corpus's telephony files (scripts/make_turn_corpus.py, whose WAV writer does the
mu-law coding) and for the barge-in benchmark's phone callers (benchmarks.bargein --profile telephony).
"""

from __future__ import annotations

import numpy as np
import soxr

PHONE_RATE = 8000
MU = 255.0


def voice_band(audio: np.ndarray, rate: int) -> np.ndarray:
    """`audio` at `rate` Hz -> 8 kHz, everything outside 300-3400 Hz removed, clipped to [-1, 1]."""
    low = soxr.resample(audio, rate, PHONE_RATE)
    spectrum = np.fft.rfft(low)
    freqs = np.fft.rfftfreq(len(low), 1 / PHONE_RATE)
    spectrum[(freqs < 300) | (freqs > 3400)] = 0
    return np.clip(np.fft.irfft(spectrum, len(low)), -1, 1)


def phone_line(audio: np.ndarray, rate: int) -> np.ndarray:
    """`audio` as the far end hears it: the voice band, 8-bit mu-law, back at `rate` Hz (float32)."""
    band = voice_band(audio, rate)
    code = np.round(np.sign(band) * np.log1p(MU * np.abs(band)) / np.log1p(MU) * 127) / 127  # 8 bits
    coded = np.sign(code) * np.expm1(np.abs(code) * np.log1p(MU)) / MU
    return soxr.resample(coded, PHONE_RATE, rate).astype(np.float32)
