"""hibari wrapped as a text → int16 PCM engine. No livekit import.

hibari puts ~0.3 s of near-silence in front of every utterance; heard as latency, so it is trimmed
(pcm.trim_silence) with an RMS gate that keeps a short pre-pad (the onset of the first phoneme is never cut).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from .espeak import EspeakVoice, is_espeak_voice
from .espeak import check_voice_name as check_espeak
from .pcm import SAMPLE_RATE, CpuVoiceError, TrimOptions, speakable, to_int16, trim_silence

__all__ = [
    "SAMPLE_RATE",
    "CpuVoice",
    "CpuVoiceError",
    "TrimOptions",
    "check_voice_name",
    "open_voice",
    "speakable",
    "to_int16",
    "trim_silence",
]


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
        self.cpu_s = 0.0
        """CPU seconds spent synthesising (the synthesising thread's own time): what the voice costs a
        call, apart from the rest of its job process (benchmarks.load --livekit, `voice` part)."""

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
            began = time.thread_time()
            audio = self._model(text, seed=self._seed)
            self.cpu_s += time.thread_time() - began
        audio = np.asarray(audio, dtype=np.float32)
        if trim:
            audio = trim_silence(audio)
        return to_int16(audio)


def check_voice_name(name: str) -> None:
    """ValueError (one line) unless `name` is a hibari voice or a valid `espeak-<language>` voice."""
    if is_espeak_voice(name):
        check_espeak(name)
        return
    from hibari.voices import VOICES

    if name not in VOICES:
        raise ValueError(f"unknown CPU voice {name!r}; one of {', '.join(sorted(VOICES))}")


def open_voice(name: str) -> CpuVoice | EspeakVoice:
    """The CPU voice of that name: a hibari voice, or `espeak-<language>` for what hibari cannot say."""
    return EspeakVoice(name) if is_espeak_voice(name) else CpuVoice(name)
