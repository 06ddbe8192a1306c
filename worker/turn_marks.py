"""Where each turn's time goes, seen from the agent, on the host's monotonic clock.

The caller of a benchmark runs on the same machine, and `time.monotonic()` is one clock for every process
there, so the worker's marks and the caller's own (its last voiced sample, its first voiced frame heard) line
up without any clock sync. Messages go to the room as reliable data on topic `parley.marks`, JSON:

- `{"kind": "user", "mark": "vad_end"|"end_of_turn"|"stt_final", "t": …}` as they happen;
- `{"kind": "speech_start", "speech_id", "source", "t"}` when a speech's first voiced frame is handed out;
- `{"kind": "speech", "speech_id", "source": "reply"|"say", "marks": {…}, "text", "words", "spoken_s",
  "interrupted", "pieces", "answered_words"}` when a speech ends (`answered_words`: how many of the caller's
  words the reply's LLM was sent). Reply marks: `llm_request` (the reply's LLM call began: before
  the end of turn when preemptive generation started it), `llm_first_token`, `tts_text` (first text handed
  to the TTS), `tts_first_audio`, `published_first` (first frame handed to the room's audio output),
  `published_first_voiced` (the first above −50 dBFS) and `answer_published`: the first voiced frame of the
  reply's first piece that is the whole reply or holds ≥ 3 words (so a one-word opener is not the answer).

Which speech produced a frame is read from LiveKit's speech context, not guessed from time windows: a cached
filler or greeting is a `say` speech, an answer a `reply`. With `PARLEY_PROMETHEUS_PORT` set the same stages
are exported as histograms (`parley_turn_stage_seconds{stage, pipeline}`, seconds after the end-of-turn
decision; `end_of_turn` itself after the VAD's end of speech).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from livekit import rtc

from .context import callers_words
from .measurement import (
    MARKS_TOPIC,
    METRICS_TOPIC,
    SpeechReport,
    SpeechStart,
    TurnLatency,
    UserMark,
    answer_offset_s,
    mark_message,
    voiced_mask,
)

log = logging.getLogger("parley.turn_marks")

REPLY_STAGES = (
    "llm_first_token",
    "tts_text",
    "tts_first_audio",
    "published_first_voiced",
    "answer_published",
)


@dataclass
class SpeechMarks:
    """One speech (a reply, or a `say`: greeting, filler, hold line) and what happened to it."""

    speech_id: str
    source: str  # "reply" | "say"
    marks: dict[str, float] = field(default_factory=dict)
    text: str = ""
    pieces: list[tuple[str, float]] = field(default_factory=list)  # (text, seconds) per synthesised piece
    frames: list[tuple[float, float, bool]] = field(default_factory=list)  # (t, offset s, voiced) handed out
    published_s: float = 0.0
    voiced_s: float = 0.0
    offsets: dict[str, float] = field(default_factory=dict)  # seconds into the speech's audio, per mark
    interrupted: bool = False
    answered_words: int = 0
    _pauses: list[tuple[float, float]] = field(default_factory=list)
    _quiet_from: float | None = None
    _heard_voice: bool = False

    def mark_once(self, kind: str, t: float) -> None:
        self.marks.setdefault(kind, t)

    def published(self, t: float, frame: rtc.AudioFrame) -> None:
        mask = voiced_mask(frame.data, frame.sample_rate)
        voiced = bool(mask.any())
        self._track_quiet(mask)
        self.mark_once("published_first", t)
        if voiced and "published_first_voiced" not in self.marks:
            self.marks["published_first_voiced"] = t
            self.offsets["published_first_voiced"] = self.published_s
        self.frames.append((t, self.published_s, voiced))
        seconds = frame.samples_per_channel / frame.sample_rate
        self.published_s += seconds
        self.voiced_s += seconds if voiced else 0.0

    def finish(self) -> None:
        """Place the answer mark once the reply's pieces are all known."""
        if self.source != "reply":
            return
        start = answer_offset_s(self.pieces)
        for t, offset, voiced in self.frames:
            if voiced and offset + 1e-6 >= start:
                self.marks["answer_published"] = t
                self.offsets["answer_published"] = offset
                break

    def _track_quiet(self, mask: np.ndarray) -> None:
        """Note each unvoiced stretch between voiced 10 ms windows (frames can be long: a whole piece)."""
        for k, voiced in enumerate(mask):
            offset = self.published_s + k * 0.01
            if voiced:
                if self._quiet_from is not None and self._heard_voice:
                    self._pauses.append((self._quiet_from, offset - self._quiet_from))
                self._quiet_from, self._heard_voice = None, True
            elif self._quiet_from is None:
                self._quiet_from = offset

    def silences(self, min_s: float = 0.25) -> list[tuple[float, float]]:
        """(offset, seconds) of each unvoiced stretch between voiced audio in what was handed out: the
        voice's own pauses ("You're welcome. | That's…"), which a listener must not count as underruns."""
        return [(o, d) for o, d in self._pauses if d >= min_s]

    def report(self) -> SpeechReport:
        return SpeechReport(
            speech_id=self.speech_id,
            source=self.source,
            marks=dict(self.marks),
            offsets_s={k: round(v, 4) for k, v in self.offsets.items()},
            text=self.text,
            words=len(self.text.split()),
            spoken_s=round(self.voiced_s, 3),
            interrupted=self.interrupted,
            pieces=[(p, round(s, 3)) for p, s in self.pieces],
            silences_s=[(round(o, 3), round(d, 3)) for o, d in self.silences()],
            answered_words=self.answered_words,
        )

    def message(self) -> dict[str, Any]:
        return mark_message(self.report())


class StageHistograms:
    """Prometheus histograms of the agent-side stages (one label set per pipeline)."""

    def __init__(self, pipeline: str) -> None:
        from prometheus_client import REGISTRY, Histogram

        name = "parley_turn_stage_seconds"
        existing = REGISTRY._names_to_collectors.get(name)  # one per process, however many calls
        self.hist: Any = existing or Histogram(
            name,
            "Agent-side turn stages: seconds after the end-of-turn decision (end_of_turn: after VAD end)",
            ["stage", "pipeline"],
            buckets=(0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.65, 0.8, 1.0, 1.5, 2.0, 3.0, 5.0),
        )
        self.pipeline = pipeline

    def observe(self, stage: str, seconds: float) -> None:
        if seconds >= 0:
            self.hist.labels(stage=stage, pipeline=self.pipeline).observe(seconds)


def _speech_in_context() -> Any:
    try:
        from livekit.agents.voice.agent_activity import _SpeechHandleContextVar
    except ImportError:  # pragma: no cover - a later livekit moved it
        return None
    return _SpeechHandleContextVar.get(None)


async def _as_aiter(obj: Any) -> AsyncIterator[Any]:
    if inspect.isawaitable(obj):
        obj = await obj
    if obj is None:
        return
    if isinstance(obj, str | rtc.AudioFrame) or not hasattr(obj, "__aiter__"):
        yield obj
        return
    async for x in obj:
        yield x


class TurnMarks:
    """One per call: attach to the session and agent before `session.start`, then `attach_output` after."""

    def __init__(
        self,
        send: Callable[[dict[str, Any]], None],
        histograms: StageHistograms | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._hist = histograms
        self._clock = clock
        self._session: Any = None
        self.speeches: dict[str, SpeechMarks] = {}
        self._last_vad_end: float | None = None
        self._last_eot: float | None = None

    # --- wiring ---------------------------------------------------------------------------------------

    def attach(self, session: Any, agent: Any, tts_model: Any = None) -> None:
        self._session = session
        session.on("user_state_changed", self._on_user_state)
        session.on("user_input_transcribed", self._on_transcript)
        session.on("metrics_collected", self._on_metrics)
        session.on("speech_created", self._on_speech_created)
        self._wrap_agent(agent)
        if tts_model is not None:
            tap_tts_pieces(tts_model, self._on_piece)

    def attach_output(self, session: Any) -> None:
        """Stamp every frame handed to the session's audio output (after `session.start`, which builds it)."""
        out = session.output.audio
        if out is None:
            log.warning("no audio output to mark")
            return
        orig = out.capture_frame

        async def capture_frame(frame: rtc.AudioFrame) -> None:
            speech = self._current()
            if speech is not None:
                had_voice = "published_first_voiced" in speech.marks
                speech.published(self._clock(), frame)
                if not had_voice and "published_first_voiced" in speech.marks:  # the caller may talk over it
                    t = speech.marks["published_first_voiced"]
                    self._send(mark_message(SpeechStart(speech.speech_id, speech.source, t)))
            await orig(frame)

        out.capture_frame = capture_frame

    # --- user side ----------------------------------------------------------------------------------

    def _user(self, mark: str) -> float:
        t = self._clock()
        self._send(mark_message(UserMark(mark, t)))
        return t

    def _on_user_state(self, ev: Any) -> None:
        if ev.old_state == "speaking" and ev.new_state != "speaking":
            self._last_vad_end = self._user("vad_end")

    def _on_transcript(self, ev: Any) -> None:
        if getattr(ev, "is_final", False):
            self._user("stt_final")

    def _on_metrics(self, ev: Any) -> None:
        from livekit.agents.metrics import EOUMetrics

        if isinstance(ev.metrics, EOUMetrics):
            self._last_eot = self._user("end_of_turn")
            if self._hist and self._last_vad_end is not None:
                self._hist.observe("end_of_turn", self._last_eot - self._last_vad_end)

    # --- speeches -----------------------------------------------------------------------------------

    def _on_speech_created(self, ev: Any) -> None:
        handle = ev.speech_handle
        source = "reply" if ev.source == "generate_reply" else "say"
        sm = self.speeches.setdefault(handle.id, SpeechMarks(handle.id, source))
        sm.source = source
        handle.add_done_callback(lambda h: self._on_speech_done(h))

    def _speech(self) -> SpeechMarks | None:
        handle = _speech_in_context()
        if handle is None:
            return None
        return self.speeches.setdefault(handle.id, SpeechMarks(handle.id, "reply"))

    def _current(self) -> SpeechMarks | None:
        found = self._speech()
        if found is None and self._session is not None:
            handle = self._session.current_speech
            if handle is not None:
                found = self.speeches.setdefault(handle.id, SpeechMarks(handle.id, "say"))
        return found

    def _on_piece(self, text: str, seconds: float) -> None:
        speech = self._speech()
        if speech is not None:
            speech.pieces.append((text, seconds))

    def _on_speech_done(self, handle: Any) -> None:
        sm = self.speeches.pop(handle.id, None)
        if sm is None:
            return
        sm.interrupted = bool(getattr(handle, "interrupted", False))
        sm.finish()
        if sm.source == "reply" and self._hist and self._last_eot is not None:
            for stage in REPLY_STAGES:
                t = sm.marks.get(stage)
                if t is not None:
                    self._hist.observe(stage, t - self._last_eot)
        self._send(sm.message())

    def _wrap_agent(self, agent: Any) -> None:
        """Stamp the first LLM token and the first text/audio of the TTS for the speech they belong to."""
        cls = type(agent)
        orig_llm, orig_tts = cls.llm_node, cls.tts_node
        marks = self

        async def llm_node(self: Any, chat_ctx: Any, tools: Any, model_settings: Any) -> AsyncIterator[Any]:
            speech = marks._speech()
            if speech is not None:
                speech.mark_once("llm_request", marks._clock())
                view = self.reply_context(chat_ctx) if hasattr(self, "reply_context") else chat_ctx
                speech.answered_words = callers_words(view.items)
            async for chunk in _as_aiter(orig_llm(self, chat_ctx, tools, model_settings)):
                text = (
                    chunk if isinstance(chunk, str) else getattr(getattr(chunk, "delta", None), "content", "")
                )
                if text and speech is not None:
                    speech.mark_once("llm_first_token", marks._clock())
                yield chunk

        async def tts_node(self: Any, text: AsyncIterable[str], model_settings: Any) -> AsyncIterator[Any]:
            speech = marks._speech()

            async def tap() -> AsyncIterator[str]:
                async for t in text:
                    if speech is not None:
                        if t.strip():
                            speech.mark_once("tts_text", marks._clock())
                        speech.text += t
                    yield t

            async for frame in _as_aiter(orig_tts(self, tap(), model_settings)):
                if speech is not None:
                    speech.mark_once("tts_first_audio", marks._clock())
                yield frame

        agent.llm_node = llm_node.__get__(agent)
        agent.tts_node = tts_node.__get__(agent)


def tap_tts_pieces(tts_model: Any, on_piece: Callable[[str, float], None]) -> bool:
    """Hear (text, seconds) of each synthesised piece: the stock TTS has listeners for it; the CPU voice's
    `synth_piece` is wrapped once per process. False when the TTS tells nothing (replies then count whole)."""
    listeners = getattr(tts_model, "piece_listeners", None)
    if isinstance(listeners, list) and "synth_piece" not in dir(tts_model):
        listeners.append(on_piece)
        return True
    synth = getattr(tts_model, "synth_piece", None)
    if synth is None:
        return False
    taps: list[Callable[[str, float], None]] | None = getattr(tts_model, "_parley_piece_taps", None)
    if taps is None:
        taps = []
        rate = int(getattr(tts_model, "sample_rate", 24_000))

        async def synth_piece(text: str) -> bytes:
            pcm: bytes = await synth(text)
            for tap in list(taps or ()):
                tap(text, len(pcm) / 2 / rate)
            return pcm

        tts_model.synth_piece = synth_piece
        tts_model._parley_piece_taps = taps
    taps.clear()  # one call per job process at a time: the newest call's marks listen
    taps.append(on_piece)
    return True


class RoomDataSender:
    """Sends JSON messages to the room as reliable data on one topic (fire and forget; a closed room drops
    them). The marks and the per-reply latency both go out through it."""

    def __init__(self, room: rtc.Room, topic: str = MARKS_TOPIC) -> None:
        self._room = room
        self._topic = topic
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, message: dict[str, Any]) -> None:
        self.send_bytes(json.dumps(message).encode())

    def send_bytes(self, data: bytes) -> None:
        task = asyncio.get_running_loop().create_task(self._send(data))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, data: bytes) -> None:
        if not self._room.isconnected():
            return
        try:
            await self._room.local_participant.publish_data(data, reliable=True, topic=self._topic)
        except Exception as err:
            log.warning("could not publish on %s: %s", self._topic, err)

    async def aclose(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _ms(report: Any, key: str) -> float | None:
    value = report.get(key) if report else None
    return round(float(value) * 1000, 1) if isinstance(value, int | float) else None


def turn_latency(
    turn: int, user_msg: Any | None, assistant_msg: Any, v2v_ms: float | None = None
) -> TurnLatency:
    """Combine the user message's metrics (STT, end of turn) with the reply's (LLM, TTS, e2e)."""
    user = getattr(user_msg, "metrics", None) or {}
    reply = getattr(assistant_msg, "metrics", None) or {}
    return TurnLatency(
        turn=turn,
        e2e_ms=_ms(reply, "e2e_latency"),
        stt_final_ms=_ms(user, "transcription_delay"),
        end_of_turn_ms=_ms(user, "end_of_turn_delay"),
        llm_ttft_ms=_ms(reply, "llm_node_ttft"),
        tts_ttfb_ms=_ms(reply, "tts_node_ttfb"),
        v2v_ms=v2v_ms,
        interrupted=bool(getattr(assistant_msg, "interrupted", False)),
    )


class RoomMetricsPublisher:
    """One latency message per reply (`parley.metrics`, turn 0 = the greeting) for the call page: the
    framework's own agent-side figures (`e2e_ms` is LiveKit's `e2e_latency`, which stops at the first,
    possibly silent, frame; benchmarks read the marks instead)."""

    def __init__(self, room: rtc.Room, enabled: bool = True) -> None:
        self._sender = RoomDataSender(room, METRICS_TOPIC)
        self.enabled = enabled
        self._turn = 0
        self._greeted = False
        self._last_user: Any | None = None
        self._pending_v2v: float | None = None
        self.replies: list[TurnLatency] = []  # every reply's figures, published or not (the call report)

    def attach(self, session: Any) -> None:
        """Subscribe to `conversation_item_added` on an AgentSession."""
        session.on("conversation_item_added", self._on_item)

    def note_v2v(self, v2v_ms: float) -> None:
        """The worker's own voice-to-voice for the reply being played (attached to the next message)."""
        self._pending_v2v = v2v_ms

    def _on_item(self, ev: Any) -> None:
        item = getattr(ev, "item", None)
        role = getattr(item, "role", None)
        if role == "user":
            self._last_user = item
        elif role == "assistant":
            if self._last_user is None and not self._greeted:
                turn = 0
            else:
                self._turn += 1
                turn = self._turn
            self._greeted = True
            latency = turn_latency(turn, self._last_user, item, self._pending_v2v)
            self._last_user, self._pending_v2v = None, None
            self.replies.append(latency)
            self.publish(latency)

    def publish(self, latency: TurnLatency) -> None:
        """Send one turn's figures (fire and forget; a closed room just drops it)."""
        if not self.enabled:
            return
        self._sender.send_bytes(latency.to_json())

    async def aclose(self) -> None:
        await self._sender.aclose()
