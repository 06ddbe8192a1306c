"""Ducking: while the caller's voice holds the agent's reply paused, the reply goes on quieter instead of
stopping dead.

LiveKit pauses a reply at the caller's first voiced sample and resumes it when their words turn out to be a
backchannel ("mm-hmm") or no words at all. Stopped dead, every backchannel left a hole in the agent's line
as long as the recogniser took to read it (p50 ~0.7 s, issue 65). Ducked, the caller hears the agent yield at
once and nothing is missing when it comes back up; a real interruption still cuts the reply when its words
arrive.
"""

from __future__ import annotations

import numpy as np
from livekit import rtc


def gain_of(db: float) -> float:
    """Amplitude factor of a level in dB (0 dB = unchanged)."""
    return float(10.0 ** (db / 20.0))


class Duck:
    """The reply's gain: full, or the ducked level while paused. A change ramps linearly over the next frame,
    so the step makes no click."""

    def __init__(self, level_db: float) -> None:
        if not -60.0 <= level_db <= 0.0:
            raise ValueError(f"duck level must be within [-60, 0] dB, got {level_db}")
        self.level = gain_of(level_db)
        self._gain = 1.0
        self._target = 1.0
        self.ducked = False

    def set(self, ducked: bool) -> None:
        self.ducked = ducked
        self._target = self.level if ducked else 1.0

    def apply(self, frame: rtc.AudioFrame) -> rtc.AudioFrame:
        """The frame at the current gain (a copy; the input is left alone)."""
        start, end = self._gain, self._target
        self._gain = end
        if start == 1.0 and end == 1.0:
            return frame
        pcm = np.frombuffer(frame.data, dtype=np.int16).reshape(-1, frame.num_channels)
        if start == end:
            gain: np.ndarray | float = end
        else:
            gain = np.linspace(start, end, len(pcm), dtype=np.float32)[:, None]
        out = np.clip(pcm.astype(np.float32) * gain, -32768, 32767).astype(np.int16)
        return rtc.AudioFrame(out.tobytes(), frame.sample_rate, frame.num_channels, frame.samples_per_channel)
