"""The faster-whisper model: how it is loaded and how decodes are scheduled (weights.py finds its files).

No livekit import here. Streams talk to the model only through the `Transcriber` protocol, so moving the
model into the host engine (GPU batching across job processes) later means swapping `WhisperModelRunner`
for a client of that engine, nothing else.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .decoding import (
    FRAMES_PER_S,
    HOP,
    PRIORITY_FINAL,
    PRIORITY_PARTIAL,
    PRIORITY_PAUSE,
    SAMPLE_RATE,
    WINDOW_PAD_S,
    Backend,
    DecodeRequest,
    DecodeResult,
    DecodeStat,
    Device,
    ModelOptions,
    Segment,
    Transcriber,
    auto_cpu_threads,
    encoder_frames,
    max_new_tokens,
)
from .weights import BUNDLED_MODEL, WhisperModelError, resolve_model_path

# re-exported: these lived here before weights.py
from .weights import MULTILINGUAL_MODEL as MULTILINGUAL_MODEL
from .weights import bundled_model_path as bundled_model_path
from .weights import default_model as default_model
from .weights import download_model as download_model
from .words import Word, words_of

# what a decode is asked and returns moved to decoding.py; importers of this module still find it here
__all__ = [
    "FRAMES_PER_S",
    "HOP",
    "PRIORITY_FINAL",
    "PRIORITY_PARTIAL",
    "PRIORITY_PAUSE",
    "SAMPLE_RATE",
    "WINDOW_PAD_S",
    "Backend",
    "DecodeRequest",
    "DecodeResult",
    "DecodeStat",
    "Device",
    "ModelOptions",
    "Segment",
    "Transcriber",
    "auto_cpu_threads",
    "encoder_frames",
    "max_new_tokens",
]

logger = logging.getLogger("parley.stt")

_window = threading.local()


def _short_window_model_class() -> type:
    """faster-whisper's model, encoding a per-thread window length instead of always 30 s.

    faster-whisper pads the log-mel features with zeros to 3000 frames before `encode`; CTranslate2 accepts
    shorter inputs, so the window is cut to the length set for this thread. The padding is refilled with the
    features' floor (what digital silence gives, as in OpenAI's Whisper): zero padding in a short window
    makes tiny.en loop on its own sentence.
    """
    from faster_whisper import WhisperModel

    class ShortWindowWhisperModel(WhisperModel):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.model = _ScoredGenerate(self.model)  # type: ignore[has-type]

        def encode(self, features: np.ndarray) -> object:
            frames = getattr(_window, "frames", None)
            content = getattr(_window, "content", 0)
            if frames and 0 < content < frames <= features.shape[-1]:
                features = np.array(features[..., :frames], dtype=np.float32, copy=True)
                features[..., content:] = features[..., :content].min()
            return super().encode(features)

    return ShortWindowWhisperModel


class _ScoredGenerate:
    """CTranslate2's Whisper with `generate` asked for its per-step log-probs, so a decode through
    faster-whisper's transcribe can give its last words' probabilities (words.py); everything else passes
    through. The calling thread's latest generation is kept for `take_words` unless it set
    `_window.want_words` to False (a partial decode: nobody reads its words)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        if "return_logits_vocab" in kwargs:  # the caller reads the results itself (batch.py)
            return self._inner.generate(*args, **kwargs)
        want = bool(getattr(_window, "want_words", True))
        results = self._inner.generate(*args, return_logits_vocab=want, **kwargs)
        if want:
            _window.generation = results[0] if results else None
        return results


def take_words(tokenizer: Any) -> tuple[Word, ...]:
    """The words of this thread's latest generation since the last call (for a faster-whisper model made by
    `_short_window_model_class`), with their probabilities; () when none."""
    last = getattr(_window, "generation", None)
    _window.generation = None
    return () if last is None else words_of(last, tokenizer)


def faster_whisper_model(path: str, **kwargs: Any) -> Any:
    """faster-whisper's WhisperModel as the runner loads it (short windows, word probabilities), for tools
    that call `transcribe` themselves (benchmarks); `take_words` reads its words after each decode."""
    return _short_window_model_class()(path, **kwargs)


def _pick_device(device: Device) -> str:
    if device != "auto":
        return device
    import ctranslate2

    return "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"


@dataclass
class _Job:
    audio: np.ndarray
    request: DecodeRequest
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[DecodeResult]
    submitted: float = field(default_factory=time.perf_counter)


class WhisperModelRunner:
    """One faster-whisper model per process, decoding in worker threads, most urgent request first.

    Final and pause decodes jump ahead of partial ones from other streams; a cancelled request that has not
    started is skipped. The event loop never waits on the model.
    """

    def __init__(self, options: ModelOptions = ModelOptions()) -> None:
        if options.num_workers < 1:
            raise WhisperModelError(f"num_workers must be >= 1 (got {options.num_workers})")
        self.options = options
        self._model: object | None = None
        self._multilingual = False
        self._lock = threading.Lock()
        self._queue: queue.PriorityQueue[tuple[int, int, _Job | None]] = queue.PriorityQueue()
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.recent: deque[DecodeStat] = deque(maxlen=1000)
        """Timings of recent queued decodes (for metrics and benchmarks)."""

    @property
    def model_name(self) -> str:
        return self.options.model or BUNDLED_MODEL

    @property
    def multilingual(self) -> bool:
        self.load()
        return self._multilingual

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        """Load the weights (idempotent); call it in the worker's prewarm so the first call pays nothing."""
        with self._lock:
            if self._model is not None:
                return
            model_class = _short_window_model_class()
            path = resolve_model_path(self.options.model, self.options.download_root)
            device = _pick_device(self.options.device)
            compute = self.options.compute_type
            if compute == "default":
                compute = "float16" if device == "cuda" else "int8"
            started = time.perf_counter()
            try:
                model = model_class(
                    str(path),
                    device=device,
                    compute_type=compute,
                    cpu_threads=self.options.cpu_threads or auto_cpu_threads(),
                    num_workers=self.options.num_workers,
                    local_files_only=True,
                )
            except (RuntimeError, ValueError, OSError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise WhisperModelError(
                    f"cannot load Whisper model {str(path)!r} on {device}/{compute}: {first}"
                ) from None
            self._multilingual = bool(model.model.is_multilingual)
            self._model = model
            logger.info(
                "whisper model loaded",
                extra={
                    "model": self.model_name,
                    "device": device,
                    "compute_type": compute,
                    "load_s": round(time.perf_counter() - started, 3),
                },
            )

    def warmup(self, max_batch: int = 1) -> None:
        """One short decode so the first real request does not pay for lazy initialisation (CTranslate2
        needs no warm-up per batch size: `max_batch` is for the PyTorch runner's sake)."""
        self.decode(np.zeros(SAMPLE_RATE // 2, dtype=np.float32), DecodeRequest(language=None))

    def decode(self, audio: np.ndarray, request: DecodeRequest) -> DecodeResult:
        """Blocking decode on the calling thread (benchmarks, worker threads)."""
        self.load()
        _window.frames = encoder_frames(len(audio), request.window_s)
        _window.content = len(audio) // HOP
        model = self._model
        assert model is not None
        language = request.language
        if language is not None and not self._multilingual and language != "en":
            raise WhisperModelError(f"model {self.model_name!r} is English-only; cannot decode {language!r}")
        if language is None and not self._multilingual:
            language = "en"
        started = time.perf_counter()
        _window.generation = None
        _window.want_words = request.priority != PRIORITY_PARTIAL  # finals and pauses: the turn detector's
        segments, info = model.transcribe(  # type: ignore[attr-defined]
            audio,
            language=language,
            task="transcribe",
            beam_size=request.beam_size,
            best_of=1,
            temperature=0.0,
            without_timestamps=not request.with_timestamps,
            condition_on_previous_text=False,
            initial_prompt=request.initial_prompt,
            max_new_tokens=max_new_tokens(len(audio)),
            vad_filter=False,
            word_timestamps=False,
            suppress_blank=True,
        )
        out = tuple(
            Segment(
                text=s.text,
                start=float(s.start),
                end=float(s.end),
                no_speech_prob=float(s.no_speech_prob),
                avg_logprob=float(s.avg_logprob),
                compression_ratio=float(s.compression_ratio),
            )
            for s in segments
        )
        return DecodeResult(
            segments=out,
            language=str(info.language),
            audio_s=len(audio) / SAMPLE_RATE,
            decode_s=time.perf_counter() - started,
            words=take_words(model.hf_tokenizer) if out and _window.want_words else (),  # type: ignore[attr-defined]
        )

    def decode_batch(self, items: Sequence[tuple[np.ndarray, DecodeRequest]]) -> list[DecodeResult]:
        """Requests of one batch key in one encode + generate (batch.py)."""
        from .batch import decode_batch

        if not items:
            return []
        self.load()
        return decode_batch(self._model, self.model_name, items)

    async def transcribe(self, audio: np.ndarray, request: DecodeRequest) -> DecodeResult:
        """Queue a decode for the worker threads and wait for it without blocking the event loop."""
        if self._closed:
            raise WhisperModelError("the Whisper runner is closed")
        self._start_threads()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[DecodeResult] = loop.create_future()
        audio = np.ascontiguousarray(audio, dtype=np.float32)
        self._queue.put((request.priority, next(self._seq), _Job(audio, request, loop, fut)))
        return await fut

    def _start_threads(self) -> None:
        with self._lock:
            while len(self._threads) < self.options.num_workers:
                t = threading.Thread(target=self._work, name=f"whisper-{len(self._threads)}", daemon=True)
                t.start()
                self._threads.append(t)

    def _work(self) -> None:
        while (job := self._queue.get()[2]) is not None:
            if job.future.cancelled():
                continue
            picked = time.perf_counter()
            try:
                result = self.decode(job.audio, job.request)
                result = replace(result, queued_s=picked - job.submitted)
                self.recent.append(
                    DecodeStat(job.request.priority, result.audio_s, result.decode_s, result.queued_s)
                )
                logger.debug(
                    "decoded",
                    extra={
                        "priority": job.request.priority,
                        "audio_s": round(result.audio_s, 2),
                        "window_s": job.request.window_s,
                        "decode_ms": round(result.decode_s * 1000, 1),
                        "queued_ms": round(result.queued_s * 1000, 1),
                    },
                )
            except Exception as e:  # handed to the awaiting stream, which decides what to do
                job.loop.call_soon_threadsafe(_set_exception, job.future, e)
            else:
                job.loop.call_soon_threadsafe(_set_result, job.future, result)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the worker threads (after the decode they are running) and forget the model."""
        self._closed = True
        for _ in self._threads:
            self._queue.put((1 << 30, next(self._seq), None))
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()
        self._model = None
        with _shared_lock:
            if _shared.get(self.options) is self:
                del _shared[self.options]


def _set_result(fut: asyncio.Future[DecodeResult], result: DecodeResult) -> None:
    if not fut.done():
        fut.set_result(result)


def _set_exception(fut: asyncio.Future[DecodeResult], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)


_shared: dict[ModelOptions, WhisperModelRunner] = {}
_shared_lock = threading.Lock()


def shared_runner(options: ModelOptions = ModelOptions()) -> WhisperModelRunner:
    """The process-wide runner for these options: every stream of every session shares one model."""
    with _shared_lock:
        runner = _shared.get(options)
        if runner is None:
            runner = _shared[options] = WhisperModelRunner(options)
        return runner


def _ctranslate2_has_cuda() -> bool:
    try:
        import ctranslate2

        return ctranslate2.get_cuda_device_count() > 0
    except (ImportError, OSError, RuntimeError):
        return False


def resolve_backend(options: ModelOptions) -> str:
    """Which runtime `options` asks for once "auto" is settled."""
    if options.backend != "auto":
        return options.backend
    return "torch" if options.device == "cuda" and not _ctranslate2_has_cuda() else "ctranslate2"


def make_runner(options: ModelOptions) -> Any:
    """The engine's model for `options`: a `WhisperModelRunner` or a `TorchWhisperRunner` (same methods)."""
    if resolve_backend(options) == "torch":
        from .torch_runner import TorchWhisperRunner

        return TorchWhisperRunner(options)
    return WhisperModelRunner(options)
