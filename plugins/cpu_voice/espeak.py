"""espeak-ng as a CPU voice for languages hibari cannot speak (Korean). No livekit import.

hibari reads English only, so a Korean agent on a host without an Orpheus engine had no voice at all.
espeak-ng (a Debian package `make setup` installs) speaks Korean from rules, with no model to download:
robotic, but every word is said. The voice is named `espeak-<voice>[+variant]` (`espeak-ko`,
`espeak-ko+f2`) and has the same interface as `CpuVoice`: 24 kHz int16 out, the same silence trim.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

import numpy as np

from .pcm import SAMPLE_RATE, CpuVoiceError, speakable, to_int16, trim_silence

PREFIX = "espeak-"
LANGUAGES = frozenset({"ko", "en"})
"""espeak-ng voices Parley offers (the ones its tests cover)."""
_NAME = re.compile(r"^espeak-(?P<lang>[a-z]{2})(?:\+(?P<variant>[a-z]+[0-9]*))?$")
_SENTENCE = re.compile(r"(?<=[.!?。？！])\s+")


@dataclass(frozen=True)
class EspeakOptions:
    rate_wpm: int = 165
    pitch: int = 50
    timeout_s: float = 10.0
    """A hung espeak-ng is killed: the reply goes on without that piece (one-line error)."""


def is_espeak_voice(name: str) -> bool:
    return name.startswith(PREFIX)


def check_voice_name(name: str) -> tuple[str, str | None]:
    """(language, variant) of an `espeak-…` voice name; ValueError names what is wrong in one line."""
    m = _NAME.match(name)
    if m is None or m["lang"] not in LANGUAGES:
        raise ValueError(
            f"unknown espeak voice {name!r}; "
            f"use espeak-<{'|'.join(sorted(LANGUAGES))}>[+variant], e.g. espeak-ko"
        )
    return m["lang"], m["variant"]


class EspeakVoice:
    """Runs espeak-ng once per piece (~10-30 ms for a sentence on one core); thread-safe (no shared state)."""

    sample_rate = SAMPLE_RATE

    def __init__(self, voice: str = "espeak-ko", options: EspeakOptions | None = None) -> None:
        try:
            lang, variant = check_voice_name(voice)
        except ValueError as e:
            raise CpuVoiceError(str(e)) from None
        self._binary = shutil.which("espeak-ng")
        if self._binary is None:
            raise CpuVoiceError("the espeak voice needs espeak-ng (Debian package espeak-ng; `make setup`)")
        self.voice = voice
        self._espeak_voice = lang + (f"+{variant}" if variant else "")
        self._opts = options or EspeakOptions()

    def pieces(self, text: str) -> list[str]:
        return [s for s in _SENTENCE.split(text) if s.strip()]

    def phonemes(self, text: str) -> str:
        """The sounds this voice makes for `text`, in IPA (espeak-ng's own reading, stress marked)."""
        out = self._run(["-q", "--ipa", "-v", self._espeak_voice, "--", speakable(text)])
        return " ".join(out.decode(errors="replace").split())

    def _run(self, args: list[str]) -> bytes:
        """espeak-ng with `args`; its stdout, or one-line CpuVoiceError (slow, or failed)."""
        cmd = [self._binary or "espeak-ng", *args]
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=self._opts.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise CpuVoiceError(f"espeak-ng took over {self._opts.timeout_s:.0f} s for one piece") from None
        if done.returncode != 0:
            err = done.stderr.decode(errors="replace").strip().splitlines()
            raise CpuVoiceError(
                f"espeak-ng failed ({done.returncode}): {err[-1][:160] if err else 'no message'}"
            )
        return done.stdout

    def synthesize(self, text: str, trim: bool = True) -> np.ndarray:
        """Text → int16 mono PCM at 24 kHz; empty array when the text has nothing speakable."""
        text = speakable(text)
        if not text:
            return np.zeros(0, np.int16)
        args = ["-v", self._espeak_voice, "-s", str(self._opts.rate_wpm), "-p", str(self._opts.pitch)]
        # "--": text that starts with "-" is words, not an option
        audio, rate = wav_samples(self._run([*args, "--stdout", "--", text]))
        audio = resample(audio, rate, SAMPLE_RATE)
        if trim:
            audio = trim_silence(audio)
        return to_int16(audio)


def wav_samples(wav: bytes) -> tuple[np.ndarray, int]:
    """float32 samples and rate of espeak-ng's 16-bit mono WAV. Its header, written to a pipe, gives no true
    length, so the samples are everything after the `data` chunk's header."""
    if len(wav) < 44 or wav[:4] != b"RIFF" or wav[8:12] != b"WAVE":
        raise CpuVoiceError("espeak-ng wrote no WAV audio")
    rate = int.from_bytes(wav[24:28], "little")
    at = wav.find(b"data", 12)
    if at < 0 or rate <= 0:
        raise CpuVoiceError("espeak-ng's WAV has no data chunk")
    body = wav[at + 8 :]
    body = body[: len(body) // 2 * 2]
    return np.frombuffer(body, dtype="<i2").astype(np.float32) / 32768.0, rate


def resample(audio: np.ndarray, src: int, dst: int) -> np.ndarray:
    if src == dst or audio.size == 0:
        return audio
    import soxr

    return np.asarray(soxr.resample(audio, src, dst), dtype=np.float32)
