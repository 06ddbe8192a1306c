from __future__ import annotations

import numpy as np
import pytest

from caches import CacheKey, CacheStore, ManifestEntry


def tone(ms: float, rate: int = 24_000, freq: float = 440.0, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(rate * ms / 1000)) / rate
    return (amp * 32767 * np.sin(2 * np.pi * freq * t)).astype(np.int16)


def put(
    store: CacheStore,
    text: str,
    *,
    kind: str = "acknowledgement",
    voice: str = "v",
    language: str = "en",
    fingerprint: str = "fp1",
    rate: int = 24_000,
    ms: float = 300.0,
) -> ManifestEntry:
    """Write one clip + manifest entry the way the builder does."""
    entries = store.read_manifest()
    key = CacheKey.for_text(text, voice, language, fingerprint, rate)
    entry = store.write_audio(key, text, kind, tone(ms, rate))
    entries[key.digest] = entry
    store.write_manifest(entries)
    return entry


@pytest.fixture
def store(tmp_path) -> CacheStore:
    return CacheStore(tmp_path / "cache")
