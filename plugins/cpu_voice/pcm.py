"""What both CPU voices (hibari in voice.py, espeak-ng in espeak.py) share: the output rate, the error, the
text they can say and the trimming of the silence around an utterance."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

SAMPLE_RATE = 24_000


class CpuVoiceError(RuntimeError):
    """The CPU voice cannot be loaded or cannot speak this text."""


@dataclass(frozen=True)
class TrimOptions:
    gate_dbfs: float = -45.0  # a 10 ms window louder than this counts as voiced
    window_ms: float = 10.0
    pre_pad_ms: float = 20.0  # kept before the first voiced window
    post_pad_ms: float = 60.0  # kept after the last voiced window


def trim_silence(
    pcm: np.ndarray, sample_rate: int = SAMPLE_RATE, opt: TrimOptions | None = None
) -> np.ndarray:
    """Cut leading and trailing near-silence from float32 audio in [-1, 1]."""
    opt = opt or TrimOptions()
    win = max(1, int(sample_rate * opt.window_ms / 1000))
    n = len(pcm) // win
    if n == 0:
        return pcm
    frames = pcm[: n * win].reshape(n, win).astype(np.float64)
    rms = np.sqrt(np.mean(frames * frames, axis=1) + 1e-12)
    voiced = np.flatnonzero(20 * np.log10(rms) > opt.gate_dbfs)
    if voiced.size == 0:
        return pcm[:0]
    start = max(0, voiced[0] * win - int(sample_rate * opt.pre_pad_ms / 1000))
    end = min(len(pcm), (voiced[-1] + 1) * win + int(sample_rate * opt.post_pad_ms / 1000))
    return pcm[start:end]


def to_int16(pcm: np.ndarray) -> np.ndarray:
    return (np.clip(pcm, -1.0, 1.0) * 32767.0).astype(np.int16)


def speakable(text: str) -> str:
    """Drop control characters and emotive tags the CPU voice cannot perform."""
    text = "".join(ch if ch.isprintable() or ch in " \n" else " " for ch in text)
    text = re.sub(r"<[a-z]+>", " ", text)
    return " ".join(text.split())
