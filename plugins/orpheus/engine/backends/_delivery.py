"""Coalesce ids from many per-request coroutines into one vectorised push per event-loop pass.

Per-request backends (TensorRT-LLM's streaming futures, an HTTP completions stream) produce ids one
request at a time; handing each to the engine separately would cost a pass per request per step. Here
they are appended to a list and delivered together by one `call_soon` callback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from plugins.orpheus.engine.backends.base import TokenSink


class Coalescer:
    def __init__(self) -> None:
        self.sink: TokenSink | None = None
        self._slots: list[int] = []
        self._tokens: list[int] = []
        self._scheduled = False

    def add(self, slot: int, tokens: Sequence[int]) -> None:
        if not tokens:
            return
        self._slots.extend([slot] * len(tokens))
        self._tokens.extend(tokens)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if not self._slots or self.sink is None:
            return
        slots, tokens = self._slots, self._tokens
        self._slots, self._tokens = [], []
        self.sink.push(np.asarray(slots, dtype=np.int64), np.asarray(tokens, dtype=np.int64))

    def drop(self, slot: int) -> None:
        """Forget undelivered ids of a cancelled request (no id may follow its finish)."""
        if slot in self._slots:
            keep = [i for i, s in enumerate(self._slots) if s != slot]
            self._slots = [self._slots[i] for i in keep]
            self._tokens = [self._tokens[i] for i in keep]
