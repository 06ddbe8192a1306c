"""Speech gate: turns a continuous 16 kHz stream into utterances so Whisper never sees pure silence or noise.

The session feeds the STT every frame, silence included, and only says where a turn ends (flush). The gate
runs a per-window speech probability (Silero VAD in production, any callable in tests), keeps a short pre-roll
so first syllables are not clipped, and reports when speech starts, pauses, resumes and ends. Windows below an
energy floor are silence without asking the model. Pure logic: no livekit, no Whisper.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

SAMPLE_RATE = 16000
WINDOW = 512  # 32 ms, Silero's window at 16 kHz


class GateEvent(enum.Enum):
    STARTED = "started"
    PAUSED = "paused"
    RESUMED = "resumed"
    ENDED = "ended"


@dataclass(frozen=True)
class GateOptions:
    activation: float = 0.5
    """Speech probability that opens speech."""
    deactivation: float = 0.35
    """Speech continues until the probability drops below this (hysteresis)."""
    min_speech_s: float = 0.09
    """Consecutive speech needed before an utterance starts (ignores clicks)."""
    pause_s: float = 0.16
    """Silence after speech that counts as a pause: the transcript is finalised speculatively."""
    end_s: float = 2.0
    """Silence that ends the utterance when no flush came (keeps memory bounded without a session)."""
    preroll_s: float = 0.3
    tail_s: float = 0.2
    """Audio kept after the last speech window when decoding (word endings fade under the threshold)."""
    energy_floor_dbfs: float = -55.0


SpeechProb = Callable[[np.ndarray], float]


class SpeechGate:
    """Feeds speech-probability windows and keeps the current utterance's audio."""

    def __init__(self, speech_prob: SpeechProb, options: GateOptions = GateOptions()) -> None:
        self._prob = speech_prob
        self.options = options
        self._floor = (10 ** (options.energy_floor_dbfs / 20)) ** 2
        self._pending = np.zeros(0, dtype=np.float32)
        self._min_speech = max(1, round(options.min_speech_s * SAMPLE_RATE / WINDOW))
        # the pre-roll holds the windows that opened the gate plus `preroll_s` before them
        preroll = round(options.preroll_s * SAMPLE_RATE / WINDOW) + self._min_speech
        self._preroll: deque[np.ndarray] = deque(maxlen=preroll)
        self._pause = max(1, round(options.pause_s * SAMPLE_RATE / WINDOW))
        self._end = max(self._pause + 1, round(options.end_s * SAMPLE_RATE / WINDOW))
        self._tail = round(options.tail_s * SAMPLE_RATE)
        self.samples_in = 0
        """Samples pushed since the gate was made (stream clock)."""
        self.revision = 0
        """Bumped whenever speech is added (never reset), so callers can tell whether a decode is current."""
        self._reset_utterance()

    def _reset_utterance(self) -> None:
        self._chunks: list[np.ndarray] = []
        self._length = 0
        self._cached: np.ndarray | None = None
        self.active = False
        self.paused = False
        self._run = 0  # consecutive speech windows before opening
        self._silent = 0  # consecutive non-speech windows while active
        self.speech_end = 0
        """Utterance sample index just after the last speech window."""
        self.speech_samples = 0
        self.start_sample = 0
        """Stream clock of the utterance's first sample (the pre-roll's)."""
        self.voice_start = 0
        """Stream clock of the first speech window (after the pre-roll): where the caller's voice began."""

    @property
    def length(self) -> int:
        return self._length

    @property
    def silence_s(self) -> float:
        """Silence since the last speech window of the active utterance."""
        return self._silent * WINDOW / SAMPLE_RATE

    @property
    def speech_s(self) -> float:
        return self.speech_samples / SAMPLE_RATE

    def push(self, pcm: np.ndarray) -> list[GateEvent]:
        """Feed float32 mono samples in [-1, 1]; returns what happened, in order."""
        events: list[GateEvent] = []
        data = (
            np.concatenate([self._pending, pcm.astype(np.float32, copy=False)]) if len(self._pending) else pcm
        )
        n = len(data) // WINDOW * WINDOW
        for i in range(0, n, WINDOW):
            ev = self._window(data[i : i + WINDOW])
            if ev is not None:
                events.append(ev)
        self._pending = np.array(data[n:], dtype=np.float32)
        return events

    def _is_speech(self, w: np.ndarray) -> bool:
        if float(np.mean(w * w)) < self._floor:
            return False
        p = self._prob(w)
        return p >= (
            self.options.deactivation if self.active and not self.paused else self.options.activation
        )

    def _window(self, w: np.ndarray) -> GateEvent | None:
        self.samples_in += WINDOW
        speech = self._is_speech(w)
        if not self.active:
            self._preroll.append(w.copy())
            self._run = self._run + 1 if speech else 0
            if self._run < self._min_speech:
                return None
            self.active = True
            for chunk in self._preroll:
                self._append(chunk)
            self._preroll.clear()
            self.start_sample = self.samples_in - self._length
            self.voice_start = self.samples_in - self._run * WINDOW
            self.speech_samples = self._run * WINDOW
            self.speech_end = self._length
            self.revision += 1
            return GateEvent.STARTED
        self._append(w.copy())
        if speech:
            self.speech_samples += WINDOW
            self.speech_end = self._length
            self._silent = 0
            self.revision += 1
            if self.paused:
                self.paused = False
                return GateEvent.RESUMED
            return None
        self._silent += 1
        if self._silent == self._pause:
            self.paused = True
            return GateEvent.PAUSED
        if self._silent == self._end:
            return GateEvent.ENDED
        return None

    def _append(self, chunk: np.ndarray) -> None:
        self._chunks.append(chunk)
        self._length += len(chunk)
        self._cached = None

    def audio(self) -> np.ndarray:
        """The utterance so far, cut `tail_s` after the last speech (trailing silence is not decoded)."""
        if self._cached is None:
            self._cached = np.concatenate(self._chunks) if self._chunks else np.zeros(0, dtype=np.float32)
            self._chunks = [self._cached] if len(self._cached) else []
        return self._cached[: min(self._length, self.speech_end + self._tail)]

    def trim(self, n_samples: int) -> None:
        """Drop the first n samples of the utterance (committed text); indices shift accordingly."""
        self.audio()
        full = self._cached if self._cached is not None else np.zeros(0, dtype=np.float32)
        n = max(0, min(n_samples, self._length))
        rest = full[n:].copy()
        self._chunks = [rest] if len(rest) else []
        self._cached = None
        self._length = len(rest)
        self.speech_end = max(0, self.speech_end - n)
        self.start_sample += n
        self.voice_start = max(self.voice_start, self.start_sample)
        self.revision += 1

    def finish(self) -> None:
        """Forget the utterance (after its FINAL); the gate keeps listening."""
        self._reset_utterance()
