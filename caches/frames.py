"""Cached PCM → `rtc.AudioFrame`s of a fixed duration at the session's sample rate."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import numpy as np
import soxr
from livekit import rtc

FRAME_MS = 20


def resample_pcm(pcm: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """int16 mono PCM resampled with soxr (high quality); unchanged when the rates match."""
    if from_rate == to_rate or pcm.size == 0:
        return pcm
    out = soxr.resample(pcm.astype(np.float32) / 32768.0, from_rate, to_rate, quality="HQ")
    return (np.clip(out, -1.0, 32767 / 32768) * 32768.0).astype(np.int16)


def samples_per_frame(sample_rate: int, frame_ms: int = FRAME_MS) -> int:
    n = sample_rate * frame_ms // 1000
    if n <= 0 or sample_rate * frame_ms % 1000:
        raise ValueError(f"{frame_ms} ms is not a whole number of samples at {sample_rate} Hz")
    return n


async def iter_frames(
    pcm: np.ndarray, sample_rate: int, frame_ms: int = FRAME_MS
) -> AsyncGenerator[rtc.AudioFrame, None]:
    """Every frame is exactly `frame_ms` long; the last one is padded with silence."""
    spf = samples_per_frame(sample_rate, frame_ms)
    for start in range(0, len(pcm), spf):
        chunk = pcm[start : start + spf]
        if len(chunk) < spf:
            chunk = np.concatenate([chunk, np.zeros(spf - len(chunk), np.int16)])
        yield rtc.AudioFrame(chunk.tobytes(), sample_rate, 1, spf)
