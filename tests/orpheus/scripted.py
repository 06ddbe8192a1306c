"""A real TokenBackend that plays back a fixed id sequence per request (tests only): it lets tests put exact
bad tokens, wrong stop ids and loops through the whole engine."""

from __future__ import annotations

import asyncio

import numpy as np

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.backends.base import GenRequest, TokenBackend


def frame_ids(codes: list[int]) -> list[int]:
    return [ids.audio_id(p, c) for p, c in enumerate(codes)]


def random_frames(n: int, seed: int = 0) -> list[int]:
    rng = np.random.default_rng(seed)
    return [t for _ in range(n) for t in frame_ids(rng.integers(0, 4096, 7).tolist())]


class ScriptedBackend(TokenBackend):
    name = "scripted"

    def __init__(self, script: list[int], step_s: float = 0.0, per_step: int = 7) -> None:
        super().__init__()
        self.script = script
        self.step_s = step_s
        self.per_step = per_step
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.submitted: list[GenRequest] = []

    async def start(self) -> None:
        return None

    def encode(self, text: str) -> list[int]:
        return [ids.BOS, *text.encode()[:200]]

    @property
    def active(self) -> int:
        return len(self.tasks)

    def submit(self, request: GenRequest) -> None:
        self.submitted.append(request)
        self.tasks[request.slot] = asyncio.create_task(self._play(request))

    async def _play(self, req: GenRequest) -> None:
        toks = self.script[: req.max_tokens]
        for i in range(0, len(toks), self.per_step):
            await asyncio.sleep(self.step_s)
            chunk = np.asarray(toks[i : i + self.per_step], dtype=np.int64)
            assert self.sink is not None
            self.sink.push(np.full(chunk.size, req.slot, dtype=np.int64), chunk)
        self.tasks.pop(req.slot, None)
        assert self.sink is not None
        self.sink.finish(req.slot, "stop" if ids.END_OF_SPEECH in toks else "length")

    def cancel(self, slot: int) -> None:
        task = self.tasks.pop(slot, None)
        if task is not None:
            task.cancel()
            assert self.sink is not None
            self.sink.finish(slot, "cancelled")
