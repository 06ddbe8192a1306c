"""ONE shared, asyncio-native, deadline-driven SNAC batcher for every stream of an engine.

No fixed sleep: when the decoder is idle and any stream has work that is due, a batch fires at once with every
due window. Work is due when a stream has not started audio yet (time to first byte), when its generation has
finished (tail flush), when a full window (4 frames) is ready, or when its client's playback buffer would fall
below the low-water mark before another decode could finish. Otherwise the batcher sleeps until the earliest
such deadline, or until new frames arrive. Decoding runs in one worker thread, so the event loop keeps taking
tokens while the model works; the decode-time estimate (moving average) is learnt from real batches.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

log = logging.getLogger("parley.orpheus.batcher")


class Decoder(Protocol):
    def decode(self, windows: list[np.ndarray]) -> list[np.ndarray | Exception]: ...

    def warm_up(self) -> None: ...


@dataclass
class DecodeItem:
    """One window of one utterance: its codes and whatever the source needs to route the result."""

    key: Any
    codes: np.ndarray
    due_at: float


class WorkSource(Protocol):
    def collect(self, now: float, decode_estimate_s: float, max_items: int) -> tuple[list[DecodeItem], float]:
        """Windows due now (possibly none) and the time the next one falls due (inf if none)."""
        ...

    def deliver(self, items: list[DecodeItem], results: list[np.ndarray | Exception]) -> None: ...


@dataclass(frozen=True)
class BatcherOptions:
    max_batch: int = 64
    initial_estimate_s: float = 0.02
    ema: float = 0.2


class DecodeBatcher:
    def __init__(
        self,
        decoder: Decoder,
        source: WorkSource,
        options: BatcherOptions = BatcherOptions(),
        clock: Callable[[], float] = time.monotonic,
        observe: Callable[[int, float, float], None] | None = None,
    ) -> None:
        self.decoder = decoder
        self.source = source
        self.options = options
        self.clock = clock
        self.estimate_s = options.initial_estimate_s
        self.batches = 0
        self.items = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="orpheus-snac")
        self._observe = observe  # (batch size, decode seconds, worst queue wait seconds)
        self.busy = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="orpheus-batcher")

    def notify(self) -> None:
        """New frames (or a finished generation) somewhere: re-check what is due."""
        self._wake.set()

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._wake.clear()
            now = self.clock()
            items, next_due = self.source.collect(now, self.estimate_s, self.options.max_batch)
            if items:
                self.busy = True
                t0 = time.perf_counter()
                try:
                    results = await loop.run_in_executor(
                        self._executor, self.decoder.decode, [it.codes for it in items]
                    )
                except Exception as e:  # the decoder itself broke: fail these items, keep serving
                    log.exception("SNAC batch failed")
                    results = [e] * len(items)
                finally:
                    self.busy = False
                took = time.perf_counter() - t0
                a = self.options.ema
                self.estimate_s = (1 - a) * self.estimate_s + a * took
                self.batches += 1
                self.items += len(items)
                if self._observe:
                    wait = max(0.0, now - min(it.due_at for it in items))
                    self._observe(len(items), took, wait)
                self.source.deliver(items, results)
                continue  # decoder idle again: fire at once if more is due
            # a timer that sets the wake event, not asyncio.wait_for (a task and a timer per idle wait)
            timer = None
            if next_due != float("inf"):
                timer = loop.call_later(max(0.0, next_due - self.clock()), self._wake.set)
            await self._wake.wait()
            if timer is not None:
                timer.cancel()
