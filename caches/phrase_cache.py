"""The in-memory, read-only phrase cache a job process loads once (at prewarm) and shares between calls."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from livekit import rtc

from plugins.pronunciation import Pronunciations, tag_of

from .frames import FRAME_MS, iter_frames, resample_pcm
from .keys import phrase_key as normalise_text
from .metrics import CacheMetrics
from .store import CacheStore

log = logging.getLogger("parley.caches")


@dataclass(frozen=True, eq=False)
class CachedPhrase:
    """One cached clip. `pcm` is read-only; resampled copies are made once per rate and kept."""

    text: str
    kind: str
    voice: str
    language: str
    fingerprint: str
    sample_rate: int
    pcm: np.ndarray
    _by_rate: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def duration_ms(self) -> float:
        return 1000.0 * len(self.pcm) / self.sample_rate

    def pcm_at(self, sample_rate: int | None = None) -> np.ndarray:
        rate = sample_rate or self.sample_rate
        if rate == self.sample_rate:
            return self.pcm
        got = self._by_rate.get(rate)
        if got is None:
            with self._lock:
                got = self._by_rate.get(rate)
                if got is None:
                    got = resample_pcm(self.pcm, self.sample_rate, rate)
                    got.flags.writeable = False
                    self._by_rate[rate] = got
        return got

    def frames(
        self, sample_rate: int | None = None, frame_ms: int = FRAME_MS
    ) -> AsyncGenerator[rtc.AudioFrame, None]:
        """A fresh async iterator of `frame_ms` frames (default 20 ms) at `sample_rate` (default: native)."""
        rate = sample_rate or self.sample_rate
        return iter_frames(self.pcm_at(rate), rate, frame_ms)


class PhraseCache:
    """Lookups by (text, voice, language) with the build's normalisation; counts hits for metrics."""

    def __init__(self, phrases: Iterable[CachedPhrase] = ()) -> None:
        self._by_key: dict[tuple[str, str, str], CachedPhrase] = {}
        for p in phrases:
            self._by_key.setdefault((normalise_text(p.text), p.voice, p.language), p)
        self.metrics = CacheMetrics()

    @classmethod
    def load(
        cls,
        root: Path | str,
        *,
        voice: str | None = None,
        language: str | None = None,
        fingerprint: str | None = None,
        sample_rates: Iterable[int] = (),
        pronunciations: Pronunciations | None = None,
    ) -> PhraseCache:
        """Read every intact entry matching the filters; damaged or missing files are skipped and logged.

        Pass the current TTS's `fingerprint` so audio made by another model is never served. `sample_rates`
        are prepared up front, so the first call at that rate does no resampling. With `pronunciations`,
        a clip made with another respelling of its words (or none) is left out: it is spoken live instead.
        """
        store = CacheStore(root)
        entries = store.read_manifest(strict=True)
        # newest first, so of two clips for one phrase (different fingerprints) the newest wins
        ordered = sorted(entries.values(), key=lambda e: e.created_at, reverse=True)
        phrases: list[CachedPhrase] = []
        skipped = 0
        for e in ordered:
            k = e.key
            if (voice and k.voice != voice) or (language and k.language != language):
                continue
            said = tag_of(k.fingerprint)
            if fingerprint and k.fingerprint.removesuffix(said) != fingerprint:
                continue
            if pronunciations is not None and said != pronunciations.tag(e.source_text):
                continue
            pcm = store.load_audio(e)
            if pcm is None:
                skipped += 1
                continue
            pcm.flags.writeable = False
            phrase = CachedPhrase(
                e.source_text, e.kind, k.voice, k.language, k.fingerprint, k.sample_rate, pcm
            )
            for rate in sample_rates:
                phrase.pcm_at(rate)
            phrases.append(phrase)
        if skipped:
            log.warning("skipped %d damaged phrase-cache files; run `python -m caches build`", skipped)
        cache = cls(phrases)
        if not cache:
            log.warning("phrase cache at %s holds nothing for this voice; run `python -m caches build`", root)
        log.info("phrase cache loaded", extra={"phrases": len(cache), "dir": str(root)})
        return cache

    def __len__(self) -> int:
        return len(self._by_key)

    def lookup(self, text: str, voice: str, language: str) -> CachedPhrase | None:
        hit = self._by_key.get((normalise_text(text), voice, language))
        self.metrics.record_lookup(hit is not None)
        return hit

    def contains(self, text: str, voice: str, language: str) -> bool:
        """Whether `text` is cached (not counted as a lookup in the metrics)."""
        return (normalise_text(text), voice, language) in self._by_key

    def texts(self, voice: str, language: str) -> list[str]:
        """Every cached line for this voice and language."""
        return [p.text for (_, v, lang), p in self._by_key.items() if v == voice and lang == language]

    def frames_for(
        self, text: str, voice: str, language: str, sample_rate: int | None = None
    ) -> AsyncGenerator[rtc.AudioFrame, None] | None:
        """20 ms frames of `text` from cache, or None on a miss (then synthesise as usual)."""
        hit = self.lookup(text, voice, language)
        return hit.frames(sample_rate) if hit is not None else None

    def phrases(self, kind: str, voice: str, language: str) -> list[CachedPhrase]:
        """Every cached phrase of one kind for this voice and language (file order is not kept)."""
        return [
            p
            for (_, v, lang), p in self._by_key.items()
            if p.kind == kind and v == voice and lang == language
        ]

    def pick(
        self, kind: str, voice: str, language: str, rng: random.Random | None = None
    ) -> CachedPhrase | None:
        """Any one phrase of a kind (e.g. the greeting), or None when none is cached."""
        found = self.phrases(kind, voice, language)
        return (rng or random).choice(found) if found else None
