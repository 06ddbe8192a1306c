"""Ducking: while the caller's voice holds the agent's reply paused, the reply goes on quieter instead of
stopping dead.

LiveKit pauses a reply at the caller's first voiced sample and resumes it when their words turn out to be a
backchannel ("mm-hmm") or no words at all. Stopped dead, every backchannel left a hole in the agent's line
as long as the recogniser took to read it (p50 ~0.7 s, issue 65). Ducked, the caller hears the agent yield at
once and nothing is missing when it comes back up; a real interruption still cuts the reply when its words
arrive.

A caller who goes on talking is not listening: once their voice has outlasted a backchannel (`hold_s`) the
reply is silenced as LiveKit would have, unless the words written so far are a backchannel ("okay, sure"), so
an interruption whose words the recogniser has not written yet does not have the agent murmuring under it.
Words that take the floor silence it at once, from the first interim that reads so (`silence_now`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np
from livekit import rtc


def gain_of(db: float) -> float:
    """Amplitude factor of a level in dB (0 dB = unchanged)."""
    return float(10.0 ** (db / 20.0))


class OverlapReader(Protocol):
    """What the turn hooks (turn_detection.TurnHooks) read of the caller's words over the agent."""

    floor_listeners: list[Callable[[], None]]

    def heard_listening_since(self, t: float) -> bool: ...

    def floor_taken(self) -> bool: ...


class Duck:
    """The reply's gain: full, or the ducked level while paused. A change ramps linearly over the next frame,
    so the step makes no click. With a `reader`, words that take the floor silence the reply at once and
    words that read as listening keep it ducked past the hold."""

    def __init__(
        self, level_db: float, hold_s: float | None = None, reader: OverlapReader | None = None
    ) -> None:
        if not -60.0 <= level_db <= 0.0:
            raise ValueError(f"duck level must be within [-60, 0] dB, got {level_db}")
        self.level = gain_of(level_db)
        self.hold_s = hold_s
        self._gain = 1.0
        self._target = 1.0
        self.ducked = False
        self.started_at = 0.0
        """Wall time of the last duck."""
        self._timer: asyncio.TimerHandle | None = None
        self._silence: Callable[[], None] | None = None
        self._reader = reader
        if reader is not None:
            reader.floor_listeners.append(self.silence_now)

    def set(self, ducked: bool) -> None:
        self.ducked = ducked
        self._target = self.level if ducked else 1.0

    def start(self, silence: Callable[[], None], caller_speaking: Callable[[], bool]) -> None:
        """Duck now; `hold_s` later, `silence` the reply if the caller is still talking and it is ducked."""
        if self.ducked:
            return
        self.set(True)
        self.started_at = time.time()
        self._silence = silence
        if self._reader is not None and self._reader.floor_taken():  # words came before the voice's pause
            self.silence_now()
        elif self.hold_s is not None:
            self._timer = asyncio.get_running_loop().call_later(
                self.hold_s, self._held, silence, caller_speaking
            )

    def silence_now(self) -> None:
        """The caller's words take the floor: a ducked reply goes silent now, not at the hold."""
        if self.ducked and self._silence is not None:
            silence, self._silence = self._silence, None
            self._cancel_timer()
            silence()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def stop(self) -> None:
        """Back to full level (a resume, a cleared reply)."""
        self._cancel_timer()
        self._silence = None
        self.set(False)

    def _held(self, silence: Callable[[], None], caller_speaking: Callable[[], bool]) -> None:
        self._timer = None
        listening = self._reader is not None and self._reader.heard_listening_since(self.started_at)
        if self.ducked and caller_speaking() and not listening and self._silence is not None:
            self._silence = None
            silence()

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
