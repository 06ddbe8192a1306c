"""A microphone and a loudspeaker for driving a real AgentSession without a room, both in real time.

It supports pause (so LiveKit's false-interruption resume is on), reports playback start and finish to the
session, and notes what a barge-in measurement needs: when the agent's audio first stopped (paused or cut)
and how long it stood paused. With a `Duck` (worker/duck.py) a pause ducks the audio instead, as the worker's
room output does: the speaker then notes when it ducked and for how long. Used by benchmarks.bargein and the
turn-taking session tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable

import numpy as np
from livekit import rtc
from livekit.agents.voice import io

from worker.duck import Duck

MIC_RATE = 16000


class RealTimeMic(io.AudioInput):
    """Plays a 16 kHz track (float in [-1, 1] or int16) in 10 ms frames at real-time pace, then silence;
    `clock()` is the track's time."""

    def __init__(self, audio: np.ndarray) -> None:
        super().__init__(label="real-time-mic")
        if audio.dtype != np.int16:
            audio = (np.clip(audio, -1, 1) * 32767).astype(np.int16)
        self._pcm = audio
        self._i = 0
        self._t0: float | None = None

    def clock(self) -> float:
        return 0.0 if self._t0 is None else time.monotonic() - self._t0

    async def __anext__(self) -> rtc.AudioFrame:
        n = MIC_RATE // 100
        if self._t0 is None:
            self._t0 = time.monotonic()
        self._i += n
        wait = self._t0 + self._i / MIC_RATE - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        chunk = self._pcm[self._i - n : self._i]
        if len(chunk) < n:
            chunk = np.zeros(n, dtype=np.int16)
        return rtc.AudioFrame(chunk.tobytes(), MIC_RATE, 1, n)


class PacedSpeaker(io.AudioOutput):
    def __init__(
        self,
        sample_rate: int = 24000,
        clock: Callable[[], float] = time.monotonic,
        duck: Duck | None = None,
        caller_speaking: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__(
            label="paced-speaker",
            capabilities=io.AudioOutputCapabilities(pause=True),
            sample_rate=sample_rate,
        )
        self._clock = clock
        self._queue: deque[rtc.AudioFrame | None] = deque()  # None marks the end of a segment
        self._wake = asyncio.Event()
        self._playing = asyncio.Event()
        self._playing.set()
        self._in_segment = False
        self._position = 0.0
        self._paused_at: float | None = None
        self.pauses = 0
        self.resumes = 0
        self.paused_s = 0.0
        """Time the audio stood paused in all (a resumed pause is a gap in the agent's line)."""
        self.first_stop: float | None = None
        """Clock time of the first pause or cut (with a duck: the first cut)."""
        self._duck = duck
        self._caller_speaking = caller_speaking
        self._ducked_at: float | None = None
        self.ducks = 0
        self.ducked_s = 0.0
        """Time the audio went on ducked in all."""
        self.first_duck: float | None = None
        """Clock time of the first duck."""
        self.finished: list[tuple[float, bool]] = []
        """(playback position, interrupted) of each finished segment."""
        self._task = asyncio.create_task(self._run())

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        self._queue.append(frame)
        self._wake.set()

    def flush(self) -> None:
        super().flush()
        self._queue.append(None)
        self._wake.set()

    def clear_buffer(self) -> None:
        self._end_duck()
        self._queue.clear()
        if self._in_segment:
            self._stopped()
            self._finish(interrupted=True)

    def pause(self) -> None:
        self.pauses += 1
        if self._duck is not None:
            if not self._duck.ducked:
                self.ducks += 1
                self._ducked_at = self._clock()
                if self.first_duck is None:
                    self.first_duck = self._ducked_at
            self._duck.start(self._silence, self._caller_speaking)
            return
        self._silence()

    def _silence(self) -> None:
        self._end_duck(unduck=False)
        self._stopped()
        if self._paused_at is None:
            self._paused_at = self._clock()
        self._playing.clear()

    def resume(self) -> None:
        if not self._playing.is_set() or (self._duck is not None and self._duck.ducked):
            self.resumes += 1
        self._end_duck()
        self._end_pause()
        self._playing.set()

    def _stopped(self) -> None:
        if self.first_stop is None:
            self.first_stop = self._clock()

    def _end_duck(self, unduck: bool = True) -> None:
        if self._duck is not None and unduck:
            self._duck.stop()
        if self._ducked_at is not None:
            self.ducked_s += self._clock() - self._ducked_at
            self._ducked_at = None

    def _end_pause(self) -> None:
        if self._paused_at is not None:
            self.paused_s += self._clock() - self._paused_at
            self._paused_at = None

    def _finish(self, *, interrupted: bool) -> None:
        self._in_segment = False
        position, self._position = self._position, 0.0
        self.finished.append((position, interrupted))
        self.on_playback_finished(playback_position=position, interrupted=interrupted)

    async def _run(self) -> None:
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._playing.wait()
            if not self._queue:
                continue
            item = self._queue.popleft()
            if item is None:
                if self._in_segment:
                    self._finish(interrupted=False)
                continue
            if not self._in_segment:
                self._in_segment = True
                self.on_playback_started(created_at=time.time())
            await asyncio.sleep(item.duration)
            if self._in_segment:
                self._position += item.duration

    async def aclose(self) -> None:
        self._end_duck()
        self._end_pause()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
