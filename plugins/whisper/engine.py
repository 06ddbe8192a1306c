"""The host speech engine's scheduler: one Whisper model for every call on the host, decoding in batches.

Job processes send decodes (engine_server.py); this queue decides what runs next:
- the most urgent request leads (final, then pause/settle, then partial; oldest first within a priority),
  and every queued request of its kind (finals and settles together, partials together) that can share its
  encode joins it, up to `max_batch` (batch.py): a caller waiting on a final never waits for partials'
  share of a batch, and with two workers a partial batch runs beside it;
- a partial still queued when a newer request from the same stream arrives is dropped (`superseded`): the
  newer one covers more audio, and the stream would discard the older answer anyway;
- a request cancelled before it starts (its client left, or its stream moved on) costs nothing.
No livekit import; thread-based, so the server's event loop never waits on the model.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from .batch import BatchKey, batch_key
from .model import PRIORITY_PARTIAL, DecodeRequest, DecodeResult, WhisperModelRunner
from .torch_runner import TorchWhisperRunner

log = logging.getLogger("parley.stt.engine")


class DecodeDropped(RuntimeError):
    """A request the engine did not decode: `reason` is superseded, cancelled or closed."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"decode {reason}")
        self.reason = reason


@dataclass(frozen=True)
class SpeechEngineOptions:
    max_batch: int = 16
    """Most requests in one encode + generate (CPU: a few; a GPU takes far more)."""
    workers: int = 0
    """Batches that may run at the same time (0 = the model's `num_workers`): a final then need not wait
    for a batch of partials already running."""


Done = Callable[[DecodeResult | None, BaseException | None], None]


@dataclass(eq=False)  # compared by identity: the queue removes this job, never an equal one
class EngineJob:
    audio: np.ndarray
    request: DecodeRequest
    stream: str
    """Who asked (connection + stream id): a newer request of the same stream supersedes a queued partial."""
    done: Done
    """Called once, from an engine thread: (result, None) or (None, error)."""
    seq: int = 0
    submitted: float = field(default_factory=time.perf_counter)
    key: BatchKey | None = None
    state: str = "new"  # new → queued → running → finished

    def finish(self, result: DecodeResult | None, error: BaseException | None) -> None:
        if self.state == "finished":
            return
        self.state = "finished"
        try:
            self.done(result, error)
        except Exception:
            log.exception("decode callback failed")


@dataclass
class EngineStats:
    submitted: int = 0
    decoded: int = 0
    batches: int = 0
    superseded: int = 0
    cancelled: int = 0
    failed: int = 0
    max_batch_seen: int = 0


class SpeechEngine:
    def __init__(
        self,
        runner: WhisperModelRunner | TorchWhisperRunner,
        options: SpeechEngineOptions = SpeechEngineOptions(),
    ) -> None:
        if options.max_batch < 1:
            raise ValueError(f"max_batch must be >= 1 (got {options.max_batch})")
        self.runner = runner
        self.options = options
        self.stats = EngineStats()
        self._pending: list[EngineJob] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._running = 0
        self._progress_at = time.perf_counter()
        self._batch_s: deque[float] = deque(maxlen=20)  # the last batches' decode times
        self.ready = False

    @property
    def model_name(self) -> str:
        return self.runner.model_name

    @property
    def multilingual(self) -> bool:
        return self.runner.multilingual

    def start(self) -> None:
        """Load and warm the model, then start decoding (blocking; call it off the event loop)."""
        self.runner.load()
        self.runner.warmup(self.options.max_batch)
        workers = self.options.workers or self.runner.options.num_workers
        with self._cond:
            while len(self._threads) < workers:
                t = threading.Thread(target=self._work, name=f"stt-engine-{len(self._threads)}", daemon=True)
                t.start()
                self._threads.append(t)
            self.ready = True

    def submit(self, job: EngineJob) -> None:
        """Queue a decode; a queued partial of the same stream is superseded by it."""
        job.key = batch_key(len(job.audio), job.request)
        with self._cond:
            if self._closed:
                dropped: list[EngineJob] = [job]
            else:
                job.seq = next(self._seq)
                dropped = [
                    j
                    for j in self._pending
                    if j.stream == job.stream and j.request.priority == PRIORITY_PARTIAL
                ]
                for j in dropped:
                    self._pending.remove(j)
                if not self._pending and not self._running:
                    self._progress_at = time.perf_counter()  # idle until now: the clock starts here
                self._pending.append(job)
                job.state = "queued"
                self.stats.submitted += 1
                self.stats.superseded += len(dropped)
                self._cond.notify()
        for j in dropped:
            j.finish(None, DecodeDropped("closed" if j is job else "superseded"))

    def cancel(self, job: EngineJob) -> bool:
        """Drop a queued request (True); one already running finishes, and its answer goes nowhere."""
        with self._cond:
            if job.state != "queued":
                return False
            self._pending.remove(job)
            self.stats.cancelled += 1
        job.finish(None, DecodeDropped("cancelled"))
        return True

    def queued(self) -> int:
        with self._cond:
            return len(self._pending)

    def queue_delay_s(self) -> float:
        """How long the oldest decode still waiting for a decoder has waited (0 when none waits): the
        worker's headroom reads it (worker/headroom.py)."""
        with self._cond:
            if not self._pending:
                return 0.0
            return time.perf_counter() - min(j.submitted for j in self._pending)

    def stalled_s(self) -> float:
        """How long the engine has had work without finishing any (0 when idle): the worker's keeper
        restarts an engine whose decoders hang while its socket still answers (worker/speech_engine.py)."""
        with self._cond:
            if not self._pending and not self._running:
                return 0.0
            return time.perf_counter() - self._progress_at

    def _take(self) -> list[EngineJob] | None:
        with self._cond:
            while not self._pending and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            lead = min(self._pending, key=lambda j: (j.request.priority, j.seq))
            batch = [lead]
            if lead.key is not None:
                urgent = lead.request.priority < PRIORITY_PARTIAL
                mates = sorted(
                    (
                        j
                        for j in self._pending
                        if j is not lead
                        and j.key == lead.key
                        and (j.request.priority < PRIORITY_PARTIAL) == urgent
                    ),
                    key=lambda j: (j.request.priority, j.seq),
                )
                batch += mates[: self.options.max_batch - 1]
            for j in batch:
                self._pending.remove(j)
                j.state = "running"
            self._running += len(batch)
            return batch

    def _work(self) -> None:
        while (batch := self._take()) is not None:
            picked = time.perf_counter()
            try:
                if len(batch) == 1 and batch[0].key is None:
                    results = [self.runner.decode(batch[0].audio, batch[0].request)]
                else:
                    results = self.runner.decode_batch([(j.audio, j.request) for j in batch])
            except Exception as e:
                with self._cond:
                    self._done(batch, picked)
                    self.stats.failed += len(batch)
                first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                log.warning("batch decode failed", extra={"size": len(batch), "error": first[:200]})
                for j in batch:
                    j.finish(None, e)
                continue
            with self._cond:
                self._done(batch, picked)
                self.stats.batches += 1
                self.stats.decoded += len(batch)
                self.stats.max_batch_seen = max(self.stats.max_batch_seen, len(batch))
            for j, r in zip(batch, results, strict=True):
                j.finish(replace(r, queued_s=picked - j.submitted), None)

    def _done(self, batch: list[EngineJob], picked: float) -> None:
        self._running -= len(batch)
        self._progress_at = time.perf_counter()
        self._batch_s.append(self._progress_at - picked)

    def slowest_batch_s(self) -> float:
        """The slowest of the last 20 batches: on a host this busy, a decode this long is no stall."""
        with self._cond:
            return max(self._batch_s, default=0.0)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            pending, self._pending = self._pending, []
            self._cond.notify_all()
        for j in pending:
            j.finish(None, DecodeDropped("closed"))
        for t in self._threads:
            t.join(5.0)
        self._threads.clear()
        self.runner.close()
