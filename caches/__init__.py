"""Phrase caches and latency-masking fillers.

Build once per voice (`python -m caches build`), load once per process (`PhraseCache.load`), play from memory
(`CachedPhrase.frames`), and let `FillerController` decide when a short cached line hides a late reply.
"""

from .builder import BuildOptions, BuildReport, build_cache, tts_fingerprint
from .controller import FillerController, FillerControllerOptions
from .filler_policy import Decision, FillerOptions, FillerPolicy, Plan
from .frames import FRAME_MS, iter_frames, resample_pcm
from .keys import phrase_key as normalise_text
from .metrics import CacheMetrics, FillerMetrics, TurnRecord
from .phrase_cache import CachedPhrase, PhraseCache
from .phrases import KINDS, Phrase, PhraseSet, PhraseSetError, load_phrases
from .store import CacheKey, CacheStore, CacheStoreError, ManifestEntry

__all__ = [
    "FRAME_MS",
    "KINDS",
    "BuildOptions",
    "BuildReport",
    "CacheKey",
    "CacheMetrics",
    "CacheStore",
    "CacheStoreError",
    "CachedPhrase",
    "Decision",
    "FillerController",
    "FillerControllerOptions",
    "FillerMetrics",
    "FillerOptions",
    "FillerPolicy",
    "ManifestEntry",
    "Phrase",
    "PhraseCache",
    "PhraseSet",
    "PhraseSetError",
    "Plan",
    "TurnRecord",
    "build_cache",
    "iter_frames",
    "load_phrases",
    "normalise_text",
    "resample_pcm",
    "tts_fingerprint",
]
