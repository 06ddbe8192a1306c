"""A scripted microphone and a real-time loudspeaker for driving an AgentSession with no server.

Both stamp every sample with the wall-clock time it was heard/played (time.monotonic), which is what the call
benchmark measures latency on: the caller's last voiced sample → the agent's first voiced sample, both at the
device, not at some event inside the framework.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf
from livekit import rtc
from livekit.agents.voice import io

from worker.measurement import first_voiced_sample, last_voiced_sample, voiced_windows

__all__ = [
    "Loudspeaker",
    "ScriptedMic",
    "Track",
    "first_voiced_sample",
    "last_voiced_sample",
    "load_turn",
    "voiced_seconds",
    "voiced_windows",
]


def load_turn(path: Path, rate: int = 16_000) -> np.ndarray:
    """A WAV's first channel as int16 at `rate` (resampled when the file has another)."""
    data, sr = sf.read(str(path), dtype="int16", always_2d=True)
    pcm = data[:, 0].copy()
    if sr != rate:
        import soxr

        pcm = soxr.resample(pcm, sr, rate).astype(np.int16)
    return np.asarray(pcm, np.int16)


def voiced_seconds(track: Track, lo: float, hi: float) -> float:
    """Seconds of voiced 10 ms windows in the chunks that start in [lo, hi)."""
    total = 0
    for t, pcm in track.chunks:
        if lo <= t < hi:
            total += int(voiced_windows(pcm, track.sample_rate).sum())
    return total * 0.01


@dataclass
class Track:
    """Audio with the wall time of each chunk's first sample; rendered onto one timeline later."""

    sample_rate: int
    chunks: list[tuple[float, np.ndarray]] = field(default_factory=list)

    def add(self, t: float, pcm: np.ndarray) -> None:
        self.chunks.append((t, pcm))

    def render(self, t0: float, rate: int, duration_s: float) -> np.ndarray:
        import soxr

        out = np.zeros(int(duration_s * rate) + rate, np.float32)
        for t, pcm in self.chunks:
            x = pcm.astype(np.float32) / 32768.0
            if self.sample_rate != rate:
                x = soxr.resample(x, self.sample_rate, rate)
            start = int((t - t0) * rate)
            if start < 0 or start >= len(out):
                continue
            end = min(len(out), start + len(x))
            out[start:end] += x[: end - start]
        return out

    def first_voiced_after(self, t: float) -> float | None:
        """Wall time of the first voiced 10 ms window at or after t."""
        for start, pcm in self.chunks:
            end = start + len(pcm) / self.sample_rate
            if end < t:
                continue
            idx = first_voiced_sample(pcm, self.sample_rate)
            if idx is None:
                continue
            ts = start + idx / self.sample_rate
            if ts >= t - 0.005:
                return ts
        return None


class ScriptedMic(io.AudioInput):
    """Delivers 20 ms frames in real time like a microphone: the scripted turn when one is playing,
    digital silence otherwise."""

    def __init__(self, sample_rate: int = 16_000, frame_ms: int = 20) -> None:
        super().__init__(label="scripted-mic")
        self.sample_rate = sample_rate
        self._spf = sample_rate * frame_ms // 1000
        self._frame_s = frame_ms / 1000
        self._pending: deque[np.ndarray] = deque()
        self._done: deque[tuple[int, asyncio.Future[float]]] = deque()
        self._fed = 0  # turn samples delivered so far (cumulative)
        self._queued = 0
        self._next_due: float | None = None
        self.track = Track(sample_rate)
        self._closed = False

    def play(self, pcm: np.ndarray) -> asyncio.Future[float]:
        """Queue a turn; the future resolves with the wall time of its last voiced sample once delivered."""
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        last = last_voiced_sample(pcm, self.sample_rate)
        self._pending.append(pcm.astype(np.int16))
        end_idx = self._queued + (last if last is not None else len(pcm))
        self._queued += len(pcm)
        self._done.append((end_idx, fut))
        return fut

    def close(self) -> None:
        self._closed = True

    async def __anext__(self) -> rtc.AudioFrame:
        if self._closed:
            raise StopAsyncIteration
        now = time.monotonic()
        if self._next_due is None:
            self._next_due = now
        if self._next_due > now:
            await asyncio.sleep(self._next_due - now)
        t = max(self._next_due, time.monotonic() - self._frame_s)
        self._next_due += self._frame_s
        out = np.zeros(self._spf, np.int16)
        filled = 0
        start_fed = self._fed
        while filled < self._spf and self._pending:
            head = self._pending[0]
            take = min(self._spf - filled, len(head))
            out[filled : filled + take] = head[:take]
            filled += take
            if take == len(head):
                self._pending.popleft()
            else:
                self._pending[0] = head[take:]
        self._fed += filled
        self.track.add(t, out)
        while self._done and self._done[0][0] <= self._fed:
            end_idx, fut = self._done.popleft()
            if not fut.done():
                fut.set_result(t + (end_idx - start_fed) / self.sample_rate)
        return rtc.AudioFrame(out.tobytes(), self.sample_rate, 1, self._spf)


class Loudspeaker(io.AudioOutput):
    """Plays captured frames at real-time pace in 10 ms slices; supports pause (false-interruption resume)
    and clear (barge-in). Records what was actually played and when."""

    def __init__(self, sample_rate: int = 24_000) -> None:
        super().__init__(
            label="loudspeaker", capabilities=io.AudioOutputCapabilities(pause=True), sample_rate=sample_rate
        )
        self.rate = sample_rate
        self._slice = sample_rate // 100
        self._queue: deque[np.ndarray] = deque()
        self._flushed = False
        self._segment_open = False
        self._played_in_segment = 0
        self._started = False
        self._paused = asyncio.Event()
        self._paused.set()  # set = playing
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.track = Track(sample_rate)
        self.segment_starts: list[float] = []
        self.segments: list[tuple[float, list[np.ndarray]]] = []  # (first sample played, the pieces played)
        self.idle = asyncio.Event()
        self.idle.set()
        self.underruns: list[tuple[float, float]] = []  # (when, gap seconds) inside a started segment
        self._starved_since: float | None = None

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        pcm = np.frombuffer(frame.data, dtype=np.int16)
        if frame.num_channels > 1:
            pcm = pcm.reshape(-1, frame.num_channels)[:, 0].copy()
        if frame.sample_rate != self.rate:
            import soxr

            pcm = soxr.resample(pcm, frame.sample_rate, self.rate).astype(np.int16)
        for i in range(0, len(pcm), self._slice):
            self._queue.append(pcm[i : i + self._slice])
        if not self._segment_open:
            self._segment_open = True
            self._played_in_segment = 0
            self._started = False
            self._flushed = False
        self.idle.clear()
        self._ensure_task()
        self._wake.set()

    def flush(self) -> None:
        super().flush()
        if self._segment_open:
            self._flushed = True
            self._wake.set()

    def clear_buffer(self) -> None:
        self._queue.clear()
        if self._segment_open:
            self._finish(interrupted=True)

    def pause(self) -> None:
        self._paused.clear()

    def resume(self) -> None:
        self._paused.set()

    def _finish(self, interrupted: bool) -> None:
        self._segment_open = False
        self._flushed = False
        self.on_playback_finished(
            playback_position=self._played_in_segment / self.rate, interrupted=interrupted
        )
        if not self._queue:
            self.idle.set()

    def _ensure_task(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._playout(), name="loudspeaker-playout")

    async def _playout(self) -> None:
        next_t = time.monotonic()
        while True:
            if not self._queue:
                if self._segment_open and self._flushed:
                    self._finish(interrupted=False)
                elif self._segment_open and self._started and self._paused.is_set():
                    self._starved_since = next_t  # playing, not finished, nothing to play: a gap
                self._wake.clear()
                await self._wake.wait()
                next_t = time.monotonic()
                if self._starved_since is not None:
                    gap = next_t - self._starved_since
                    if gap > 0.03 and self._queue:
                        self.underruns.append((self._starved_since, gap))
                    self._starved_since = None
                continue
            await self._paused.wait()
            now = time.monotonic()
            next_t = max(next_t, now - 0.02)
            if next_t > now:
                await asyncio.sleep(next_t - now)
            if not self._queue:
                continue
            piece = self._queue.popleft()
            if not self._started:
                self._started = True
                self.segment_starts.append(next_t)
                self.segments.append((next_t, []))
                self.on_playback_started(created_at=time.time())
            self.segments[-1][1].append(piece)
            self.track.add(next_t, piece)
            self._played_in_segment += len(piece)
            next_t += len(piece) / self.rate

    @property
    def starts(self) -> list[float]:
        """When each played segment's first sample played (monotonic)."""
        return self.segment_starts

    def samples(self, i: int) -> int:
        """How many samples of segment i were played."""
        return sum(len(p) for p in self.segments[i][1])

    async def aclose(self) -> None:
        if self._task:
            self._task.cancel()
