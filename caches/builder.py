"""Build a phrase cache by synthesising every phrase through any livekit `tts.TTS`.

A phrase whose key (normalised text, voice, language, model fingerprint, sample rate) is already in the
manifest with an intact file is reused; anything else is synthesised. Entries of the same voice and language
that no longer match (another model, another rate, a phrase removed from the set) are stale and pruned.
The manifest is rewritten after every phrase, so a build that dies half way resumes where it stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from livekit.agents import tts

from plugins.pronunciation import Pronunciations

from .phrases import Phrase
from .store import CacheKey, CacheStore, ManifestEntry

log = logging.getLogger("parley.caches")


@dataclass(frozen=True)
class BuildOptions:
    voice: str
    language: str
    fingerprint: str  # identifies the model that made the audio (see tts_fingerprint)
    prune_stale: bool = True
    # the list the TTS reads with; a phrase it respells records which respelling (plugins/pronunciation.py)
    pronunciations: Pronunciations = field(default_factory=Pronunciations)

    def key(self, text: str, sample_rate: int) -> CacheKey:
        fingerprint = self.fingerprint + self.pronunciations.tag(text)
        return CacheKey.for_text(text, self.voice, self.language, fingerprint, sample_rate)


@dataclass
class BuildReport:
    synthesised: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # entries replaced or pruned
    failed: list[tuple[str, str]] = field(default_factory=list)  # (text, one-line reason)

    @property
    def ok(self) -> bool:
        return not self.failed


def tts_fingerprint(engine: tts.TTS, extra: str = "") -> str:
    """A string that changes when the model behind `engine` changes (the TTS may define `fingerprint`)."""
    own = getattr(engine, "fingerprint", None)
    base = own if isinstance(own, str) and own else f"{engine.provider}/{engine.model}"
    return f"{base}|{extra}" if extra else base


async def synthesize_pcm(engine: tts.TTS, text: str) -> np.ndarray:
    """Whole-utterance synthesis → int16 mono PCM at `engine.sample_rate`."""
    parts: list[np.ndarray] = []
    async with engine.synthesize(text) as stream:
        async for ev in stream:
            frame = ev.frame
            if frame.sample_rate != engine.sample_rate:
                raise RuntimeError(f"TTS produced {frame.sample_rate} Hz, declared {engine.sample_rate} Hz")
            pcm = np.frombuffer(frame.data, dtype=np.int16)
            if frame.num_channels > 1:
                pcm = pcm.reshape(-1, frame.num_channels)[:, 0]
            parts.append(pcm)
    return np.concatenate(parts) if parts else np.zeros(0, np.int16)


async def build_cache(
    store: CacheStore,
    engine: tts.TTS,
    phrases: Sequence[Phrase],
    opts: BuildOptions,
    *,
    on_progress: Callable[[Phrase, str], None] | None = None,
) -> BuildReport:
    """Make sure every phrase is cached for (voice, language, fingerprint, engine rate); see module doc."""
    report = BuildReport()
    with store.locked():
        entries = store.read_manifest()
        wanted: dict[str, Phrase] = {}
        for p in phrases:
            wanted.setdefault(opts.key(p.text, engine.sample_rate).digest, p)

        for digest, phrase in wanted.items():
            entry = entries.get(digest)
            if entry is not None and store.is_intact(entry):
                report.reused.append(phrase.text)
                _progress(on_progress, phrase, "reused")
                continue
            if entry is not None:
                report.stale.append(phrase.text)  # file missing or altered
            key = opts.key(phrase.text, engine.sample_rate)
            try:
                pcm = await synthesize_pcm(engine, phrase.text)
                if pcm.size == 0:
                    raise RuntimeError("the voice produced no audio")
            except Exception as e:  # one bad phrase must not stop the build
                reason = str(e).splitlines()[0] if str(e) else type(e).__name__
                report.failed.append((phrase.text, reason))
                log.warning("phrase synthesis failed: %s", reason)
                _progress(on_progress, phrase, "failed")
                continue
            entries[digest] = store.write_audio(key, phrase.text, phrase.kind, pcm)
            store.write_manifest(entries)
            report.synthesised.append(phrase.text)
            _progress(on_progress, phrase, "synthesised")

        if opts.prune_stale:
            stale = [d for d, e in entries.items() if _same_scope(e, opts) and d not in wanted]
            for d in stale:
                report.stale.append(entries.pop(d).source_text)
        store.write_manifest(entries)
        store.remove_unreferenced(entries)
    return report


def _same_scope(entry: ManifestEntry, opts: BuildOptions) -> bool:
    return entry.key.voice == opts.voice and entry.key.language == opts.language


def _progress(cb: Callable[[Phrase, str], None] | None, phrase: Phrase, what: str) -> None:
    if cb is not None:
        cb(phrase, what)
