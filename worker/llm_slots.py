"""Give each call its own slot of the embedded LLM, across the worker's job processes.

llama.cpp keeps one KV cache per slot and, left to itself, hands a request the idle slot whose cache looks
most like its prompt. Every Parley conversation starts with the same instructions and greeting, so a new
call often takes a slot another live call was using; that call's next turn then re-reads its whole history
(180–240 tokens, 0.6–1.1 s on 2 cores), and while it does, every other call's reply stops mid-sentence.
Pinning a call to a slot (`id_slot`) keeps each history cached where it was written.

A lease is an exclusive `flock` on one small file per slot, so job processes need no coordinator and a
crashed process frees its slot when the kernel closes its files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit


@dataclass
class SlotLease:
    """One slot, held until `release()` (or until the process exits)."""

    id: int
    _fd: int

    def release(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # closing the file drops the lock
            self._fd = -1

    @property
    def held(self) -> bool:
        return self._fd >= 0


def slot_dir(base_url: str, root: Path | None = None) -> Path:
    """Where the lock files for the LLM server at `base_url` live (removed when that server stops)."""
    where = urlsplit(base_url)
    return (root or Path(tempfile.gettempdir())) / f"parley-llm-{where.hostname or 'local'}-{where.port or 0}"


class SlotPool:
    """`n` slots of the LLM server at `base_url`; `lease()` returns a free one or None when all are held."""

    def __init__(self, base_url: str, n: int, root: Path | None = None) -> None:
        if n < 1:
            raise ValueError("a slot pool needs at least one slot")
        self.dir = slot_dir(base_url, root)
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.n = n

    def lease(self) -> SlotLease | None:
        for slot in range(self.n):
            fd = os.open(self.dir / f"slot-{slot}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return SlotLease(slot, fd)
        return None
