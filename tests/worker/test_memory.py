"""The allocator hygiene the worker applies between calls really hands memory back to the kernel."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from worker.memory import _libc, release_free_memory, tune_allocator

pytestmark = pytest.mark.skipif(_libc() is None, reason="needs glibc (mallopt/malloc_trim)")

# A fragmented heap like the calls process after a few turns: one large buffer freed (which, by default,
# raises glibc's mmap threshold), then 200 MB of 5 MB encoder buffers freed, with small long-lived objects
# between them so the heap top cannot shrink by itself.
_FRAGMENT = textwrap.dedent(
    """
    import ctypes, json, sys
    import psutil
    from worker.memory import release_free_memory, tune_allocator
    if sys.argv[1] == "tuned":
        tune_allocator()
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    rss = lambda: psutil.Process().memory_info().rss / 1e6
    libc.free(libc.malloc(16_000_000))
    start = rss()
    big, keep = [], []
    for _ in range(40):
        p = libc.malloc(5_000_000)
        ctypes.memset(p, 1, 5_000_000)
        big.append(p)
        keep.append(libc.malloc(100_000))  # too big for any free bin: it lands right after the buffer
    for p in big:
        libc.free(p)
    freed = rss() - start
    release_free_memory()
    print(json.dumps({"freed_but_resident": freed, "after_trim": rss() - start}))
    """
)


def _run(mode: str) -> dict[str, float]:
    import json

    out = subprocess.run(
        [sys.executable, "-c", _FRAGMENT, mode], capture_output=True, text=True, check=True, timeout=60
    )
    return json.loads(out.stdout)


def test_trim_returns_the_pages_of_freed_buffers() -> None:
    r = _run("default")
    assert r["freed_but_resident"] > 150, r  # glibc kept ~200 MB of freed buffers
    assert r["after_trim"] < 50, r


def test_tuned_thresholds_free_large_buffers_without_a_trim() -> None:
    r = _run("tuned")
    assert r["freed_but_resident"] < 50, r  # 5 MB buffers went to mmap and back to the kernel on free


def test_calls_are_safe_to_repeat() -> None:
    assert tune_allocator() is True and tune_allocator() is True
    release_free_memory()
    release_free_memory()
    r = _run("default")  # and the trim still works in a fresh process
    assert r["after_trim"] < 50, r
