"""One async interface for every token generator: submit a request, receive its ids, cancel it.

Backends deliver ids to a `TokenSink` on the event loop thread. A batched backend delivers one generation step
for all its requests in a single `push(slots, tokens)` call (numpy arrays), so the engine handles a step for
all streams in one vectorised pass. `finish(slot, reason)` is called exactly once per request — after a cancel
too — and no id for that request follows it; only then may the engine reuse the slot.
`token_stream()` wraps any backend as "start a request → async iterator of ids" for tools and tests.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.5
    top_p: float = 0.9
    repetition_penalty: float = 1.1
    seed: int | None = None


@dataclass
class GenRequest:
    slot: int
    prompt_ids: list[int]
    max_tokens: int
    sampling: Sampling = field(default_factory=Sampling)


class TokenSink(Protocol):
    def push(self, slots: np.ndarray, tokens: np.ndarray) -> None: ...

    def finish(self, slot: int, reason: str, error: str | None = None) -> None: ...


class TokenBackend(ABC):
    """Lifecycle: `bind(sink)`, `await start()`, many `submit`/`cancel`, `await close()`."""

    name = "base"

    def __init__(self) -> None:
        self.sink: TokenSink | None = None

    def bind(self, sink: TokenSink) -> None:
        self.sink = sink

    @abstractmethod
    async def start(self) -> None:
        """Load the model and warm it up."""

    @abstractmethod
    def submit(self, request: GenRequest) -> None:
        """Begin generating; ids arrive through the sink."""

    @abstractmethod
    def cancel(self, slot: int) -> None:
        """Stop a request at once; `finish(slot, "cancelled")` follows."""

    @abstractmethod
    def encode(self, text: str) -> list[int]:
        """The model's tokenizer (prompt text → ids)."""

    async def close(self) -> None:
        return None

    @property
    def active(self) -> int:
        return 0


class _QueueSink:
    def __init__(self) -> None:
        self.queues: dict[int, asyncio.Queue[int | BaseException | None]] = {}

    def push(self, slots: np.ndarray, tokens: np.ndarray) -> None:
        for s, t in zip(slots.tolist(), tokens.tolist(), strict=True):
            q = self.queues.get(s)
            if q is not None:
                q.put_nowait(t)

    def finish(self, slot: int, reason: str, error: str | None = None) -> None:
        q = self.queues.get(slot)
        if q is not None:
            q.put_nowait(RuntimeError(error) if error else None)


async def token_stream(
    backend: TokenBackend,
    prompt_ids: Sequence[int],
    max_tokens: int,
    sampling: Sampling = Sampling(),
    slot: int = 0,
) -> AsyncIterator[int]:
    """Standalone use of a backend: yields generated ids until the request finishes. Cancels on exit."""
    sink = backend.sink if isinstance(backend.sink, _QueueSink) else _QueueSink()
    backend.bind(sink)
    q: asyncio.Queue[int | BaseException | None] = asyncio.Queue()
    sink.queues[slot] = q
    backend.submit(GenRequest(slot, list(prompt_ids), max_tokens, sampling))
    finished = False
    try:
        while True:
            item = await q.get()
            if item is None:
                finished = True
                return
            if isinstance(item, BaseException):
                finished = True
                raise item
            yield item
    finally:
        if not finished:
            backend.cancel(slot)
        sink.queues.pop(slot, None)
