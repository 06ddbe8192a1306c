"""Keep a long-lived call process's memory flat.

Measured with memray under `benchmarks.load`: the Python and native heaps stay flat from call to call, yet
the RSS grows ~1 MB/s, because glibc keeps the pages of freed audio, mel and ONNX buffers in its arenas and
raises its mmap threshold after the first large free (so later large buffers land in the arenas too).
Pinning the thresholds makes big buffers go back to the kernel when freed, and trimming after each call
hands back what the arenas still hold. No-ops off glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from dataclasses import dataclass
from functools import cache

log = logging.getLogger("parley.memory")

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


@dataclass(frozen=True)
class AllocatorOptions:
    mmap_threshold_bytes: int = 4 * 1024 * 1024  # pinned: glibc would raise it to 32 MB after one big free
    trim_threshold_bytes: int = 256 * 1024  # give back the top of a heap once this much is free there


@cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt  # noqa: B018  (glibc only: musl and others lack these)
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    return libc


def tune_allocator(opts: AllocatorOptions | None = None) -> bool:
    """Pin glibc's thresholds for this process; True when applied."""
    libc = _libc()
    if libc is None:
        return False
    o = opts or AllocatorOptions()
    ok = bool(libc.mallopt(_M_MMAP_THRESHOLD, o.mmap_threshold_bytes)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, o.trim_threshold_bytes)
    )
    if not ok:
        log.warning("mallopt refused the allocator thresholds")
    return ok


def release_free_memory() -> bool:
    """Hand the arenas' free pages back to the kernel (blocking, a few ms: call it off the event loop)."""
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False
