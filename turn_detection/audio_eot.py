"""LiveKit's local audio end-of-turn model (turn-detector v1-mini) behind a small timestamped audio buffer.

The model ships inside the `livekit-agents` wheel as a native library (`livekit.local_inference.EOT`, ~108 MB,
no download, ~20 ms per prediction on CPU) and scores the last 1.2 s of 16 kHz audio. LiveKit asks it once
200 ms of silence have passed; so do we, on the audio that ended 200 ms after the last speech.
No livekit.agents import: this is the model edge only.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np
import soxr

logger = logging.getLogger("parley.turns")

MODEL_RATE = 16000
WINDOW_S = 1.2
TRAILING_SILENCE_S = 0.2
"""LiveKit runs its audio EOT at 200 ms of silence (MIN_SILENCE_DURATION_MS); the window ends there."""


def load_model() -> Any | None:
    """The shared native EOT model, or None (logged once) when the native library is not usable here."""
    try:
        from livekit.local_inference import EOT

        return EOT()
    except Exception as e:  # a broken native wheel must not take the call down
        logger.warning("local audio end-of-turn model unavailable, using text and silence only: %s", e)
        return None


def predict_window(model: Any, pcm16k: np.ndarray) -> float | None:
    """P(turn ended) for the last 1.2 s of int16 16 kHz mono audio; None if the model fails."""
    window = np.ascontiguousarray(pcm16k[-int(WINDOW_S * MODEL_RATE) :], dtype=np.int16)
    if window.size == 0:
        return None
    try:
        return float(model.predict(window))
    except Exception as e:
        logger.warning("audio end-of-turn prediction failed: %s", e)
        return None


class AudioTurnBuffer:
    """The last few seconds of caller audio at 16 kHz, stamped with the wall-clock time of its newest sample.

    The session taps the audio that goes to the STT into `push`; the turn detector asks for the window that
    ended shortly after the last speech.
    """

    def __init__(self, keep_s: float = 4.0) -> None:
        self._keep = int(keep_s * MODEL_RATE)
        self._buf = np.zeros(0, dtype=np.int16)
        self._end_time: float | None = None
        self._rate: int | None = None
        self._resampler: soxr.ResampleStream | None = None
        self._lock = threading.Lock()

    @property
    def end_time(self) -> float | None:
        return self._end_time

    def push(self, pcm: np.ndarray, sample_rate: int, end_time: float) -> None:
        """Append int16 mono audio whose last sample was captured at `end_time` (seconds, wall clock)."""
        if sample_rate != self._rate:
            self._rate = sample_rate
            self._resampler = (
                None
                if sample_rate == MODEL_RATE
                else soxr.ResampleStream(sample_rate, MODEL_RATE, 1, "int16")
            )
        data = pcm if self._resampler is None else self._resampler.resample_chunk(pcm)
        with self._lock:
            self._buf = np.concatenate([self._buf, data.astype(np.int16, copy=False)])[-self._keep :]
            self._end_time = end_time

    def window(self, ends_at: float) -> np.ndarray:
        """Up to 1.2 s of audio ending at wall-clock `ends_at` (or at the newest sample, if earlier)."""
        with self._lock:
            if self._end_time is None:
                return np.zeros(0, dtype=np.int16)
            cut = max(0, round((self._end_time - ends_at) * MODEL_RATE))
            end = max(0, len(self._buf) - cut)
            start = max(0, end - int(WINDOW_S * MODEL_RATE))
            return self._buf[start:end].copy()

    def clear(self) -> None:
        with self._lock:
            self._buf = np.zeros(0, dtype=np.int16)
