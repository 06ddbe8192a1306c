"""Which frames to decode next for one utterance, and the leading-silence gate.

SNAC is convolutional: one code moves ≈ ±2.3 frames of audio. So a window decodes its new frames with 2 frames
of left context and (while streaming) 2 frames of look-ahead, and keeps only the new frames' samples. A window
that starts at frame 0 is exact at the left edge, so first audio leaves after 3 frames (21 tokens); the last
window ends at the last frame, so the tail is exact too. Windows tile the utterance: every frame is emitted
exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

LEFT_CONTEXT = 2
LOOKAHEAD = 2
MAX_EMIT = 4  # frames per window when a stream is ahead of playback
MAX_TAIL_EMIT = MAX_EMIT + LOOKAHEAD  # a final window may emit up to this many (its end needs no look-ahead)
MAX_WINDOW = LEFT_CONTEXT + MAX_TAIL_EMIT


class Window(NamedTuple):  # a tuple, not a frozen dataclass: one is made per decoded window
    start: int  # first frame decoded
    end: int  # one past the last frame decoded
    emit_from: int  # first frame whose samples are kept
    emit_to: int  # one past the last kept frame

    @property
    def frames(self) -> int:
        return self.end - self.start


def plan_window(emitted: int, available: int, finished: bool, max_emit: int = MAX_EMIT) -> Window | None:
    """The next window after `emitted` frames, given `available` frames; None when nothing can go yet."""
    start = max(0, emitted - LEFT_CONTEXT)
    remaining = available - emitted
    if remaining <= 0:
        return None
    if finished and remaining <= max(max_emit, 1) + LOOKAHEAD:
        return Window(start, available, emitted, available)
    ready = remaining - LOOKAHEAD
    if ready < 1:
        return None
    k = min(ready, max(1, max_emit))
    return Window(start, emitted + k + LOOKAHEAD, emitted, emitted + k)


def decodable_frames(emitted: np.ndarray, available: np.ndarray, finished: np.ndarray) -> np.ndarray:
    """Vectorised: how many frames each utterance could emit now."""
    rem = available - emitted
    return np.where(finished, rem, np.maximum(rem - LOOKAHEAD, 0))


@dataclass(frozen=True)
class GateOptions:
    threshold_dbfs: float = -50.0  # a 10 ms block above this counts as sound
    block_ms: float = 10.0
    pre_pad_ms: float = 30.0  # kept before the first sound so the onset is not clipped
    max_trim_ms: float = 1000.0  # never trim more than this; after it audio flows regardless


class LeadingSilenceGate:
    """Drops leading near-silence of a stream (the model's ~0.4 s of breath/noise), keeps a pre-pad."""

    def __init__(self, sample_rate: int, options: GateOptions = GateOptions()) -> None:
        self._block = max(1, int(sample_rate * options.block_ms / 1000))
        self._pre_pad = int(sample_rate * options.pre_pad_ms / 1000)
        self._max_trim = int(sample_rate * options.max_trim_ms / 1000)
        self._threshold = 32768.0 * 10 ** (options.threshold_dbfs / 20)
        self._held = np.zeros(0, dtype=np.int16)
        self.trimmed = 0
        self.open = False

    def process(self, pcm: np.ndarray) -> np.ndarray:
        """int16 samples in; what may be sent out (possibly empty) — once open, everything passes."""
        if self.open:
            return pcm
        n_blocks = pcm.size // self._block
        if n_blocks:
            blocks = pcm[: n_blocks * self._block].astype(np.float32).reshape(n_blocks, self._block)
            rms = np.sqrt((blocks * blocks).mean(axis=1))
            loud = np.flatnonzero(rms > self._threshold)
        else:
            loud = np.zeros(0, dtype=np.int64)
        if loud.size == 0 and self.trimmed + pcm.size <= self._max_trim:
            self._held = np.concatenate([self._held, pcm])[-self._pre_pad :] if self._pre_pad else self._held
            self.trimmed += pcm.size
            return pcm[:0]
        first = int(loud[0]) * self._block if loud.size else 0
        cut = min(first, max(0, self._max_trim - self.trimmed))
        head = np.concatenate([self._held, pcm[:cut]])[-self._pre_pad :] if self._pre_pad else pcm[:0]
        self.trimmed += cut
        self.open = True
        self._held = np.zeros(0, dtype=np.int16)
        return np.concatenate([head, pcm[cut:]])

    def finish(self) -> np.ndarray:
        """End of stream while still closed: nothing audible was produced; send nothing."""
        self.open = True
        return np.zeros(0, dtype=np.int16)
