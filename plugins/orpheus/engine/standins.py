"""Zero-cost stand-ins for both model stages — used ONLY by `benchmarks.tts --overhead`.

They let the benchmark measure the engine's own CPU cost per audio token (bookkeeping, batching, framing,
sockets) with the models taken out: `StandInTokenBackend` feeds valid Orpheus audio-token streams at real-time
rate (82 tokens/s per stream, one vectorised step for all streams per tick, like an in-flight-batching GPU
backend) and `StandInDecoder` returns precomputed PCM for each window. Never used to serve speech.
"""

from __future__ import annotations

import asyncio

import numpy as np

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.backends.base import GenRequest, TokenBackend


class StandInTokenBackend(TokenBackend):
    name = "standin"

    def __init__(self, tokens_per_second: float = ids.TOKENS_PER_SECOND, slots: int = 512) -> None:
        super().__init__()
        self.step_s = 1.0 / tokens_per_second
        self._active = np.zeros(slots, dtype=bool)
        self._generated = np.zeros(slots, dtype=np.int64)
        self._limit = np.zeros(slots, dtype=np.int64)
        self._codes = np.random.default_rng(1).integers(0, ids.CODEBOOK, size=4099, dtype=np.int64)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="standin-tokens")

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8")[:512])

    @property
    def active(self) -> int:
        return int(self._active.sum())

    def submit(self, request: GenRequest) -> None:
        s = request.slot
        # speak ~0.4 s per word of prompt text, ending with END_OF_SPEECH on a frame boundary
        frames = max(4, min(request.max_tokens // ids.FRAME_TOKENS - 1, len(request.prompt_ids) // 2))
        self._limit[s] = frames * ids.FRAME_TOKENS
        self._generated[s] = 0
        self._active[s] = True

    def cancel(self, slot: int) -> None:
        if self._active[slot]:
            self._active[slot] = False
            if self.sink:
                self.sink.finish(slot, "cancelled")

    async def close(self) -> None:
        if self._task:
            self._task.cancel()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        steps = 0
        while True:
            due = int((loop.time() - t0) / self.step_s) - steps
            n = max(
                1, min(due, 4)
            )  # catch up a little if the loop was late, like a backend delivering 2+ ids
            for _ in range(n):
                self._step()
            steps += n
            await asyncio.sleep(max(0.0, t0 + (steps + 1) * self.step_s - loop.time()))

    def _step(self) -> None:
        s = np.flatnonzero(self._active)
        if s.size == 0 or self.sink is None:
            return
        g = self._generated[s]
        tok = (
            ids.AUDIO_BASE
            + ids.CODEBOOK * (g % ids.FRAME_TOKENS)
            + self._codes[(g * 7 + s) % self._codes.size]
        )
        ending = g >= self._limit[s]
        tok = np.where(ending, ids.END_OF_SPEECH, tok)
        self._generated[s] = g + 1
        self.sink.push(s, tok)
        for slot in s[ending].tolist():
            self._active[slot] = False
            self.sink.finish(slot, "stop")


class StandInDecoder:
    """Returns slices of one precomputed noise buffer: no model, no math."""

    def __init__(self) -> None:
        rng = np.random.default_rng(2)
        self._pcm = (rng.standard_normal(8 * ids.FRAME_SAMPLES) * 3000).astype(np.int16)

    def warm_up(self) -> None:
        return None

    def decode(self, windows: list[np.ndarray]) -> list[np.ndarray | Exception]:
        return [self._pcm[: w.shape[0] * ids.FRAME_SAMPLES] for w in windows]
