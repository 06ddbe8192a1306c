"""hibari wrapped as a text → int16 PCM engine. No livekit import.

hibari puts ~0.3 s of near-silence in front of every utterance; heard as latency, so it is trimmed here
with an RMS gate that keeps a short pre-pad (the onset of the first phoneme is never cut).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .espeak import EspeakVoice

SAMPLE_RATE = 24_000


class CpuVoiceError(RuntimeError):
    """The CPU voice cannot be loaded or cannot speak this text."""


@dataclass(frozen=True)
class TrimOptions:
    gate_dbfs: float = -45.0  # a 10 ms window louder than this counts as voiced
    window_ms: float = 10.0
    pre_pad_ms: float = 20.0  # kept before the first voiced window
    post_pad_ms: float = 60.0  # kept after the last voiced window


def trim_silence(
    pcm: np.ndarray, sample_rate: int = SAMPLE_RATE, opt: TrimOptions | None = None
) -> np.ndarray:
    """Cut leading and trailing near-silence from float32 audio in [-1, 1]."""
    opt = opt or TrimOptions()
    win = max(1, int(sample_rate * opt.window_ms / 1000))
    n = len(pcm) // win
    if n == 0:
        return pcm
    frames = pcm[: n * win].reshape(n, win).astype(np.float64)
    rms = np.sqrt(np.mean(frames * frames, axis=1) + 1e-12)
    voiced = np.flatnonzero(20 * np.log10(rms) > opt.gate_dbfs)
    if voiced.size == 0:
        return pcm[:0]
    start = max(0, voiced[0] * win - int(sample_rate * opt.pre_pad_ms / 1000))
    end = min(len(pcm), (voiced[-1] + 1) * win + int(sample_rate * opt.post_pad_ms / 1000))
    return pcm[start:end]


def to_int16(pcm: np.ndarray) -> np.ndarray:
    return (np.clip(pcm, -1.0, 1.0) * 32767.0).astype(np.int16)


class CpuVoice:
    """One hibari model per process; `synthesize` is thread-safe (calls are serialised)."""

    sample_rate = SAMPLE_RATE

    def __init__(self, voice: str = "heart", threads: int = 1, seed: int | None = 0) -> None:
        try:
            from hibari import Hibari
            from hibari.voices import VOICES
        except ImportError as e:  # pragma: no cover - dependency missing
            raise CpuVoiceError(f"hibari-tts is not installed ({e})") from None
        if voice not in VOICES:
            raise CpuVoiceError(f"unknown CPU voice {voice!r}; known: {', '.join(sorted(VOICES))}")
        try:
            self._model = Hibari(voice=voice, threads=threads)
        except Exception as e:
            raise CpuVoiceError(f"CPU voice {voice!r} could not be loaded: {e}") from None
        self.voice = voice
        self._seed = seed
        self._lock = threading.Lock()

    def pieces(self, text: str) -> list[str]:
        """The model's own sentence split (it cannot take arbitrarily long input at once)."""
        return [s for s in self._model.split_sentences(text) if s.strip()]

    def phonemes(self, text: str) -> str:
        """The sounds this voice makes for `text` (hibari's own phoneme string, stress marked)."""
        with self._lock:
            return " ".join(self._model.phonemize(speakable(text)))

    def synthesize(self, text: str, trim: bool = True) -> np.ndarray:
        """Text → int16 mono PCM at 24 kHz; empty array when the text has nothing speakable."""
        text = speakable(text)
        if not text:
            return np.zeros(0, np.int16)
        with self._lock:
            audio = self._model(text, seed=self._seed)
        audio = np.asarray(audio, dtype=np.float32)
        if trim:
            audio = trim_silence(audio)
        return to_int16(audio)


def speakable(text: str) -> str:
    """Drop control characters and emotive tags the CPU voice cannot perform."""
    import re

    text = "".join(ch if ch.isprintable() or ch in " \n" else " " for ch in text)
    text = re.sub(r"<[a-z]+>", " ", text)
    return " ".join(text.split())


def check_voice_name(name: str) -> None:
    """ValueError (one line) unless `name` is a hibari voice or a valid `espeak-<language>` voice."""
    from .espeak import check_voice_name as check_espeak
    from .espeak import is_espeak_voice

    if is_espeak_voice(name):
        check_espeak(name)
        return
    from hibari.voices import VOICES

    if name not in VOICES:
        raise ValueError(f"unknown CPU voice {name!r}; one of {', '.join(sorted(VOICES))}")


def open_voice(name: str) -> CpuVoice | EspeakVoice:
    """The CPU voice of that name: a hibari voice, or `espeak-<language>` for what hibari cannot say."""
    from .espeak import EspeakVoice, is_espeak_voice

    return EspeakVoice(name) if is_espeak_voice(name) else CpuVoice(name)
