"""The Orpheus engine: many concurrent text streams in, int16 PCM 24 kHz out, one model instance per process.

Data moves one way: text pieces → cleaned speakable pieces → prompt ids → token backend → (one vectorised
pass per generation step) frames → windows due for decoding → the shared SNAC batcher → PCM per stream.
A stream speaks its pieces in order, each piece an utterance with its own generation slot; the next piece
starts generating while the current one is still being decoded, so sentence seams cost no extra latency.
No livekit import: the server and the LiveKit plugin sit on top of this.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.backends.base import GenRequest, Sampling, TokenBackend
from plugins.orpheus.engine.batcher import BatcherOptions, DecodeBatcher, DecodeItem, Decoder
from plugins.orpheus.engine.frames import REASON_LOOP, REASON_NAMES, FrameAssembler
from plugins.orpheus.engine.text import (
    TextError,
    TextOptions,
    clean_text,
    has_words,
    max_tokens_for,
    prompt_ids,
    validate_voice,
)
from plugins.orpheus.engine.windows import (
    MAX_EMIT,
    GateOptions,
    LeadingSilenceGate,
    decodable_frames,
    plan_window,
)
from plugins.text_chunker import SpeechChunker

log = logging.getLogger("parley.orpheus.engine")


class EngineFull(RuntimeError):
    """Admission refused: the engine already serves its configured maximum of streams."""


class StreamSink(Protocol):
    """Where a stream's output goes (the server connection, a test, the synth CLI). Called on the loop."""

    def on_audio(self, pcm: bytes) -> None: ...

    def on_event(self, event: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class EngineOptions:
    max_streams: int = 32
    text: TextOptions = field(default_factory=TextOptions)
    sampling: Sampling = field(default_factory=Sampling)
    batcher: BatcherOptions = field(default_factory=BatcherOptions)
    gate: GateOptions = field(default_factory=GateOptions)
    low_water_ms: float = 300.0  # keep at least this much audio queued at the client when generation allows
    loop_frames: int = 36  # frames repeating in a 1..4-frame cycle for this long (~3 s) = a token loop
    trim_leading_silence: bool = True


@dataclass
class _Utterance:
    stream: EngineStream
    text: str
    slot: int = -1
    epoch: int = 0
    emitted: int = 0
    gen_done: bool = False  # no more frames will come
    backend_done: bool = False  # the backend reported finish: the slot may be reused
    reason: str = ""
    inflight: bool = False
    group: int = 0  # which flush of its stream this text came before (for the stream's `mark` events)


class OrpheusEngine:
    """Owns the backend, the frame assembler, the batcher and every stream. Use from one event loop."""

    def __init__(
        self, backend: TokenBackend, decoder: Decoder, options: EngineOptions = EngineOptions()
    ) -> None:
        self.backend = backend
        self.decoder = decoder
        self.options = options
        slots = max(2, 2 * options.max_streams)
        max_frames = options.text.max_tokens_cap // ids.FRAME_TOKENS + 1
        self.assembler = FrameAssembler(slots, max_frames, options.loop_frames)
        self._utt: list[_Utterance | None] = [None] * slots
        self._free: deque[int] = deque(range(slots))
        self._epochs = itertools.count(1)
        # per-slot scheduling state, read by the batcher in one vectorised pass
        self._eligible = np.zeros(slots, dtype=bool)  # head utterance of a live stream
        self._inflight = np.zeros(slots, dtype=bool)
        self._emitted = np.zeros(slots, dtype=np.int64)
        self._gen_done = np.zeros(slots, dtype=bool)
        self._started = np.zeros(slots, dtype=bool)  # its stream already sent audio
        self._deadline = np.full(slots, -np.inf)
        self._pending_slots: list[np.ndarray] = []
        self._pending_tokens: list[np.ndarray] = []
        self._pending_finish: list[tuple[int, str, str | None]] = []
        self._inbox = asyncio.Event()
        self.streams: dict[int, EngineStream] = {}
        self._stream_ids = itertools.count(1)
        self._waiting: deque[EngineStream] = deque()  # streams waiting for a slot or readiness
        self.ready = False
        self.tokens_total = 0
        self.frames_total = 0
        self.clock: Callable[[], float] = time.monotonic
        self.on_stream_done: Callable[[EngineStream, dict[str, Any]], None] | None = None
        self.observe_batch: Callable[[int, float, float], None] | None = None
        self._batcher = DecodeBatcher(decoder, self, options.batcher, self.clock, self._observe)
        self._pump_task: asyncio.Task[None] | None = None
        backend.bind(self)

    # -- lifecycle ------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Load and warm up both model stages, then serve. Streams opened before this queue."""
        self._pump_task = asyncio.create_task(self._pump(), name="orpheus-pump")
        self._batcher.start()
        # SNAC first: its CUDA graphs are captured before the LLM takes most free memory for its KV cache
        await asyncio.to_thread(self.decoder.warm_up)
        await self.backend.start()
        self.ready = True
        log.info(
            "orpheus engine ready (backend=%s, max_streams=%d)", self.backend.name, self.options.max_streams
        )
        self._schedule_waiting()

    async def close(self) -> None:
        for s in list(self.streams.values()):
            s.cancel()
        if self._pump_task:
            self._pump_task.cancel()
        await self._batcher.close()
        await self.backend.close()

    def capacity(self) -> dict[str, Any]:
        active = len(self.streams)
        cap = self.options.max_streams
        return {
            "ready": self.ready,
            "active_streams": active,
            "max_streams": cap,
            "free": max(0, cap - active),
            "load": active / cap if cap else 1.0,
            "backend": self.backend.name,
        }

    # -- streams --------------------------------------------------------------------------------------
    def open_stream(
        self, sink: StreamSink, voice: str = "tara", language: str | None = None, request_id: str = ""
    ) -> EngineStream:
        """Admit a stream or raise EngineFull / TextError (unknown voice)."""
        lang = language or self.options.text.language
        validate_voice(voice, lang)
        if len(self.streams) >= self.options.max_streams:
            raise EngineFull(f"engine full: {len(self.streams)}/{self.options.max_streams} streams active")
        stream = EngineStream(self, next(self._stream_ids), sink, voice, lang, request_id)
        self.streams[stream.id] = stream
        return stream

    async def synthesize(self, text: str, voice: str = "tara", language: str | None = None) -> np.ndarray:
        """Whole text → int16 samples (synth CLI, tests). Raises TextError / EngineFull / RuntimeError."""
        done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        chunks: list[bytes] = []

        class _Collect:
            def on_audio(self, pcm: bytes) -> None:
                chunks.append(pcm)

            def on_event(self, event: dict[str, Any]) -> None:
                if event["type"] in ("done", "error") and not done.done():
                    done.set_result(event)

        stream = self.open_stream(_Collect(), voice, language)
        try:
            stream.push_text(text, strict=True)
            stream.end()
        except TextError:
            stream.cancel()
            raise
        event = await done
        if event["type"] == "error":
            raise RuntimeError(event["message"])
        return np.frombuffer(b"".join(chunks), dtype=np.int16)

    # -- TokenSink (called by the backend on the loop) --------------------------------------------------
    def push(self, slots: np.ndarray, tokens: np.ndarray) -> None:
        self._pending_slots.append(slots)
        self._pending_tokens.append(tokens)
        self._inbox.set()

    def finish(self, slot: int, reason: str, error: str | None = None) -> None:
        self._pending_finish.append((slot, reason, error))
        self._inbox.set()

    async def _pump(self) -> None:
        """Drain everything the backend delivered since the last pass and handle it in one go."""
        while True:
            await self._inbox.wait()
            self._inbox.clear()
            try:
                self._drain()
            except Exception:
                log.exception("engine pump failed on a step; continuing")

    def _drain(self) -> None:
        if self._pending_slots:
            if len(self._pending_slots) == 1:
                slots, tokens = self._pending_slots[0], self._pending_tokens[0]
            else:
                slots, tokens = np.concatenate(self._pending_slots), np.concatenate(self._pending_tokens)
            self._pending_slots.clear()
            self._pending_tokens.clear()
            before = int(self.assembler.nframes.sum())
            res = self.assembler.push(slots, tokens)
            self.tokens_total += int(slots.size)
            self.frames_total += int(self.assembler.nframes.sum()) - before
            for slot, why in zip(res.ended.tolist(), res.reasons.tolist(), strict=True):
                utt = self._utt[slot]
                if utt is None:
                    continue
                self._generation_ended(utt, REASON_NAMES.get(why, "stop"))
                if why == REASON_LOOP or not utt.backend_done:
                    self.backend.cancel(slot)  # loop or frame cap: stop the generator now
            if res.gained.size or res.ended.size:
                self._batcher.notify()
        if self._pending_finish:
            finishes, self._pending_finish = self._pending_finish, []
            for slot, reason, error in finishes:
                utt = self._utt[slot]
                if utt is None:
                    continue
                utt.backend_done = True
                if error:
                    utt.stream._fail("generation_failed", error)
                if not utt.gen_done:
                    self.assembler.close(slot)
                    self._generation_ended(utt, reason)
                self._maybe_release(utt)
            self._batcher.notify()

    def _generation_ended(self, utt: _Utterance, reason: str) -> None:
        if utt.gen_done:
            return
        utt.gen_done = True
        utt.reason = reason
        self._gen_done[utt.slot] = True
        if reason == "loop":
            log.warning("token loop detected; utterance cut (stream %d)", utt.stream.id)
        utt.stream._generation_finished(utt)
        self._check_complete(utt)

    # -- slots ----------------------------------------------------------------------------------------
    def _acquire(self, utt: _Utterance) -> bool:
        if not self._free:
            return False
        slot = self._free.popleft()
        utt.slot, utt.epoch = slot, next(self._epochs)
        self._utt[slot] = utt
        self._eligible[slot] = False
        self._inflight[slot] = False
        self._emitted[slot] = 0
        self._gen_done[slot] = False
        self._started[slot] = utt.stream.first_audio_at is not None
        self._deadline[slot] = utt.stream.deadline()
        return True

    def _maybe_release(self, utt: _Utterance) -> None:
        slot = utt.slot
        if slot < 0 or self._utt[slot] is not utt or not utt.backend_done or utt.inflight:
            return
        if not (utt.stream.closed or (utt.gen_done and utt.emitted >= self.assembler.nframes[slot])):
            return
        self._utt[slot] = None
        self._eligible[slot] = False
        self.assembler.close(slot)
        self._free.append(slot)
        self._schedule_waiting()

    def _schedule_waiting(self) -> None:
        while self._waiting and self._free and self.ready:
            stream = self._waiting.popleft()
            stream._waiting = False
            stream._start_next()

    def _submit(self, utt: _Utterance, prompt: list[int]) -> None:
        max_tokens = max_tokens_for(utt.text, self.options.text)
        self.assembler.open(utt.slot, max_tokens)
        self.backend.submit(GenRequest(utt.slot, prompt, max_tokens, self.options.sampling))

    # -- WorkSource (called by the batcher) -------------------------------------------------------------
    def collect(self, now: float, decode_estimate_s: float, max_items: int) -> tuple[list[DecodeItem], float]:
        cand = np.flatnonzero(self._eligible & ~self._inflight)
        if cand.size == 0:
            return [], float("inf")
        nframes = self.assembler.nframes[cand]
        emitted = self._emitted[cand]
        gen_done = self._gen_done[cand]
        dec = decodable_frames(emitted, nframes, gen_done)
        has = dec >= 1
        if not has.any():
            return [], float("inf")
        due_at = self._deadline[cand] - decode_estimate_s - self.options.low_water_ms / 1000.0
        due = has & (~self._started[cand] | gen_done | (dec >= MAX_EMIT) | (due_at <= now))
        if not due.any():
            return [], float(due_at[has].min())
        picked = cand[due]
        order = np.argsort(due_at[due], kind="stable")[:max_items]
        # a stream's first window is 1 frame (smallest decode, soonest first audio); after that a window
        # takes everything decodable up to 4 frames, so a stream that fell behind catches up in one decode
        # (1-frame windows for every low stream left it one frame per batch behind, and cost a window each)
        low = (~self._started[cand])[due][order]
        items = []
        for slot, d_at, is_low in zip(
            picked[order].tolist(), due_at[due][order].tolist(), low.tolist(), strict=True
        ):
            utt = self._utt[slot]
            assert utt is not None
            max_emit = 1 if is_low else MAX_EMIT
            win = plan_window(utt.emitted, int(self.assembler.nframes[slot]), utt.gen_done, max_emit)
            if win is None:
                continue
            codes = self.assembler.codes(slot, win.start, win.end).copy()
            utt.inflight = True
            self._inflight[slot] = True
            items.append(DecodeItem((utt, utt.epoch, win), codes, max(d_at, -1e18)))
        return items, float("inf")

    def deliver(self, items: list[DecodeItem], results: list[np.ndarray | Exception]) -> None:
        for item, result in zip(items, results, strict=True):
            utt, epoch, win = item.key
            utt.inflight = False
            if utt.slot >= 0 and self._utt[utt.slot] is utt:
                self._inflight[utt.slot] = False
            if utt.epoch != epoch or utt.stream.closed:
                self._maybe_release(utt)
                continue
            if isinstance(result, Exception):
                utt.stream._fail("decode_failed", f"SNAC decode failed: {result}")
                self._maybe_release(utt)
                continue
            a = (win.emit_from - win.start) * ids.FRAME_SAMPLES
            b = (win.emit_to - win.start) * ids.FRAME_SAMPLES
            utt.emitted = win.emit_to
            self._emitted[utt.slot] = win.emit_to
            utt.stream._emit(result[a:b])
            self._check_complete(utt)
        self._batcher.notify()

    def _check_complete(self, utt: _Utterance) -> None:
        if utt.gen_done and not utt.inflight and utt.emitted >= int(self.assembler.nframes[utt.slot]):
            utt.stream._utterance_complete(utt)
            self._maybe_release(utt)

    def _observe(self, size: int, seconds: float, wait: float) -> None:
        if self.observe_batch:
            self.observe_batch(size, seconds, wait)

    def _set_head(self, utt: _Utterance) -> None:
        self._eligible[utt.slot] = True
        self._started[utt.slot] = utt.stream.first_audio_at is not None
        self._deadline[utt.slot] = utt.stream.deadline()
        self._batcher.notify()


class EngineStream:
    """One voice conversation turn stream: push text pieces, flush, end or cancel; audio goes to the sink."""

    def __init__(
        self,
        engine: OrpheusEngine,
        stream_id: int,
        sink: StreamSink,
        voice: str,
        language: str,
        request_id: str,
    ) -> None:
        self.engine = engine
        self.id = stream_id
        self.sink = sink
        self.voice = voice
        self.language = language
        self.request_id = request_id
        self._chunker = SpeechChunker(engine.options.text.chunker)
        self._text_opts = dataclasses.replace(engine.options.text, language=language)
        self._pieces: deque[str] = deque()
        self._piece_groups: deque[int] = deque()  # per queued piece: the flush it belongs to (1-based)
        self._flushes = 0
        self._marked = 0  # `mark` events sent: every flush up to this one is fully spoken
        self._utts: deque[_Utterance] = deque()  # generating or still being decoded, in speaking order
        self._generating: _Utterance | None = None
        self._waiting = False
        self.ended = False
        self.closed = False
        self.opened_at = engine.clock()
        self.first_text_at: float | None = None
        self.first_audio_at: float | None = None
        self.sent_samples = 0
        self.frames = 0
        self.bad_tokens = 0
        self.dropped_partials = 0
        self.utterances = 0
        self.dropped_pieces = 0
        self.loops = 0
        gate_on = engine.options.trim_leading_silence
        self._gate = LeadingSilenceGate(ids.SAMPLE_RATE, engine.options.gate) if gate_on else None

    # -- input ----------------------------------------------------------------------------------------
    def push_text(self, text: str, strict: bool = False) -> None:
        """Add text; complete sentences/clauses start generating at once. strict: unspeakable → TextError."""
        if self.closed or self.ended:
            raise TextError("stream already ended")
        if not isinstance(text, str):
            raise TextError("text must be a string")
        if strict:
            from plugins.orpheus.engine.text import speakable_pieces

            for piece in speakable_pieces(text, self._text_opts):
                self._queue_piece(piece, cleaned=True)
            return
        for piece in self._chunker.push(text):
            self._queue_piece(piece)

    def flush(self) -> None:
        """Speak whatever text is buffered now, without waiting for a sentence end. Once all text up to this
        flush has been sent as audio, a `mark` event says so (`flushes`: how many flushes are spoken), so a
        client that loses the engine mid-reply knows which text the listener has heard in full."""
        for piece in self._chunker.flush():
            self._queue_piece(piece)
        self._flushes += 1
        self._emit_marks()

    def end(self) -> None:
        """No more text: finish speaking what is queued, then a `done` event."""
        if self.closed or self.ended:
            return
        self.flush()
        self.ended = True
        self._maybe_done()

    def cancel(self) -> None:
        """Stop at once: generation is aborted and no more audio is sent."""
        if self.closed:
            return
        self._close({"type": "done", "reason": "cancelled"})

    def _queue_piece(self, piece: str, cleaned: bool = False) -> None:
        if not cleaned:
            try:
                piece = clean_text(piece, self._text_opts)
            except TextError as e:
                self.dropped_pieces += 1
                log.info("stream %d: piece skipped: %s", self.id, e)
                return
            if not has_words(piece):
                self.dropped_pieces += 1
                return
        if self.first_text_at is None:
            self.first_text_at = self.engine.clock()
        self._pieces.append(piece)
        self._piece_groups.append(self._flushes + 1)
        self._start_next()

    # -- generation -----------------------------------------------------------------------------------
    def _start_next(self) -> None:
        """Start generating the next piece if none is generating and the stream holds < 2 slots."""
        eng = self.engine
        if self.closed or self._generating is not None or not self._pieces or len(self._utts) >= 2:
            return
        if not eng.ready or not eng._free:
            if not self._waiting:
                self._waiting = True
                eng._waiting.append(self)
            return
        text = self._pieces.popleft()
        utt = _Utterance(self, text, group=self._piece_groups.popleft())
        eng._acquire(utt)
        try:
            prompt = prompt_ids(self.voice, text, eng.backend.encode)
        except Exception as e:
            utt.backend_done = utt.gen_done = True
            eng._maybe_release(utt)
            self._fail("bad_text", f"tokenizer failed: {e}")
            return
        self._generating = utt
        self._utts.append(utt)
        self.utterances += 1
        eng._submit(utt, prompt)
        if self._utts[0] is utt:
            eng._set_head(utt)

    def _generation_finished(self, utt: _Utterance) -> None:
        slot = utt.slot
        self.bad_tokens += int(self.engine.assembler.bad_tokens[slot])
        self.dropped_partials += int(self.engine.assembler.dropped_partials[slot])
        if utt.reason == "loop":
            self.loops += 1
        if self._generating is utt:
            self._generating = None
        self._start_next()

    def _utterance_complete(self, utt: _Utterance) -> None:
        if utt in self._utts:
            self._utts.remove(utt)
            self.frames += utt.emitted
        if self._utts:
            self.engine._set_head(self._utts[0])
        self._start_next()
        self._emit_marks()
        self._maybe_done()

    def _emit_marks(self) -> None:
        """A `mark` for every flush whose text is all spoken (none of it queued, generating or decoding)."""
        if self.closed:
            return
        pending = [u.group for u in self._utts] + list(self._piece_groups)
        spoken = min(min(pending, default=self._flushes + 1) - 1, self._flushes)
        while self._marked < spoken:
            self._marked += 1
            self.sink.on_event({"type": "mark", "flushes": self._marked})

    # -- output ---------------------------------------------------------------------------------------
    def deadline(self) -> float:
        """When this stream's client runs out of audio if played in real time (−inf before first audio)."""
        if self.first_audio_at is None:
            return -np.inf
        return self.first_audio_at + self.sent_samples / ids.SAMPLE_RATE

    def _emit(self, pcm: np.ndarray) -> None:
        if self.closed:
            return
        if self._gate is not None and not self._gate.open:
            pcm = self._gate.process(pcm)
        if pcm.size == 0:
            return
        now = self.engine.clock()
        if self.first_audio_at is None:
            self.first_audio_at = now
            ref = self.first_text_at if self.first_text_at is not None else self.opened_at
            self.sink.on_event(
                {
                    "type": "first_audio",
                    "ttfb_ms": round((now - ref) * 1000, 2),
                    "trimmed_ms": self._trimmed_ms(),
                }
            )
        self.sent_samples += pcm.size
        head = self._utts[0] if self._utts else None
        if head is not None and head.slot >= 0:
            self.engine._started[head.slot] = True
            self.engine._deadline[head.slot] = self.deadline()
        self.sink.on_audio(pcm.tobytes())

    def _trimmed_ms(self) -> float:
        return round(self._gate.trimmed / ids.SAMPLE_RATE * 1000, 1) if self._gate else 0.0

    def _maybe_done(self) -> None:
        if self.closed or not self.ended or self._pieces or self._utts or self._generating:
            return
        audio_s = self.sent_samples / ids.SAMPLE_RATE
        now = self.engine.clock()
        ref = self.first_text_at if self.first_text_at is not None else self.opened_at
        self._close(
            {
                "type": "done",
                "reason": "completed",
                "audio_ms": round(audio_s * 1000, 1),
                "frames": self.frames,
                "utterances": self.utterances,
                "bad_tokens": self.bad_tokens,
                "dropped_partial_frames": self.dropped_partials,
                "dropped_pieces": self.dropped_pieces,
                "loops_cut": self.loops,
                "trimmed_ms": self._trimmed_ms(),
                "rtf": round((now - ref) / audio_s, 4) if audio_s > 0 else None,
            }
        )

    def _fail(self, code: str, message: str) -> None:
        if self.closed:
            return
        log.warning("stream %d failed: %s", self.id, code)
        self._close({"type": "error", "code": code, "message": message})

    def _close(self, event: dict[str, Any]) -> None:
        self.closed = True
        eng = self.engine
        for utt in list(self._utts):
            if utt.slot >= 0:
                eng._eligible[utt.slot] = False
                if not utt.backend_done:
                    eng.backend.cancel(utt.slot)
                eng._maybe_release(utt)
        self._utts.clear()
        self._pieces.clear()
        self._piece_groups.clear()
        self._generating = None
        if self._waiting:
            try:
                eng._waiting.remove(self)
            except ValueError:
                pass
        eng.streams.pop(self.id, None)
        if eng.on_stream_done:
            eng.on_stream_done(self, event)
        self.sink.on_event(event)
        eng._schedule_waiting()
