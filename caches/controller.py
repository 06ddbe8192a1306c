"""Plays cached greetings, fillers, hold lines and apologies inside a LiveKit `AgentSession`.

Why a "gate" speech: in livekit-agents 1.8.9 speeches play strictly in queue order, and a reply holds the
queue from the moment it is scheduled until its playout ends, so a filler `say()` issued once the reply is
late would only play after it. Instead, when a caller turn is committed (`Agent.on_user_turn_completed`,
which runs just before the reply is scheduled) the controller queues a *gate* speech ahead of the reply whose
audio iterator decides lazily: it yields a cached acknowledgement if the reply's first audio is not ready by
the threshold (or at once when replies are predicted late), and otherwise ends with no audio, costing the
reply a few milliseconds. The reply's LLM and TTS run while the gate waits. Reply readiness is seen by
wrapping the agent's `tts_node` output (`watch_reply_audio`) and its input (`watch_reply_text`: once the
reply's words reach the voice no filler starts); the speaking agent (worker/agent.py `ParleyAgent`) does
the hooks: speech asks the cache, never the other way round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from livekit import rtc
from livekit.agents import llm
from livekit.agents.voice import AgentSession, SpeechHandle
from livekit.agents.voice.events import (
    AgentStateChangedEvent,
    CloseEvent,
    ConversationItemAddedEvent,
    ErrorEvent,
    EventTypes,
    SpeechCreatedEvent,
    UserStateChangedEvent,
)

from .filler_policy import FillerPolicy, Plan
from .metrics import FillerMetrics, TurnRecord
from .phrase_cache import CachedPhrase, PhraseCache

log = logging.getLogger("parley.caches")


@dataclass(frozen=True)
class FillerControllerOptions:
    voice: str
    language: str
    sample_rate: int | None = None  # None = the session audio output's rate, else the clip's own rate
    fillers: bool = True  # late-reply acknowledgements (greeting/apology/hold still work when False)
    apologies: bool = True


def _speech_handle_in_context() -> SpeechHandle | None:
    """The speech whose generation is running in this task (livekit keeps it in a context variable)."""
    try:
        from livekit.agents.voice.agent_activity import _SpeechHandleContextVar
    except ImportError:  # pragma: no cover - a later livekit moved it; fall back to the latest reply
        return None
    return _SpeechHandleContextVar.get(None)


class FillerController:
    """One per call. Create after the `AgentSession` exists, call `attach()` before or after `start()`."""

    def __init__(
        self,
        session: AgentSession,
        cache: PhraseCache,
        policy: FillerPolicy | None = None,
        opts: FillerControllerOptions | None = None,
        *,
        voice: str | None = None,
        language: str | None = None,
    ) -> None:
        if opts is None:
            if voice is None or language is None:
                raise ValueError("FillerController needs opts or voice= and language=")
            opts = FillerControllerOptions(voice=voice, language=language)
        self.opts = opts
        self.session = session
        self.cache = cache
        self.policy = policy or FillerPolicy()
        self.metrics = FillerMetrics()
        self._own: set[str] = set()  # ids of speeches this controller created
        self._creating_own = False
        self._latest_reply: SpeechHandle | None = None
        self._reply_turn: dict[str, int] = {}  # reply speech id → caller turn it answers
        self._ready_ids: set[str] = set()
        self._text_ids: set[str] = set()  # replies whose first words reached the voice
        self._wake = asyncio.Event()
        self._current: TurnRecord | None = None
        self._user_stopped_at: float | None = None
        self._apologised_turn = -1
        self._failed_turn = -1  # the turn whose reply failed (LLM or TTS error): no filler for it
        self._attached = False
        self._saw_reply_audio = False  # watch_reply_audio has seen a reply: the tts_node hook is wired
        self._hook_missing = False

    # --- wiring ----------------------------------------------------------------------------------------
    def _listeners(self) -> tuple[tuple[EventTypes, Callable[[Any], None]], ...]:
        return (
            ("user_state_changed", self._on_user_state),
            ("agent_state_changed", self._on_agent_state),
            ("speech_created", self._on_speech_created),
            ("conversation_item_added", self._on_item_added),
            ("error", self._on_error),
            ("close", self._on_close),
        )

    def attach(self) -> None:
        if self._attached:
            return
        for event, listener in self._listeners():
            self.session.on(event, listener)
        self._attached = True

    def detach(self) -> None:
        if not self._attached:
            return
        for event, listener in self._listeners():
            self.session.off(event, listener)
        self._attached = False

    # --- public actions --------------------------------------------------------------------------------
    def greet(self, text: str | None = None) -> SpeechHandle | None:
        """Play a cached greeting (this exact text, or any greeting); None when nothing is cached."""
        phrase = (
            self._lookup(text) if text else self.cache.pick("greeting", self.opts.voice, self.opts.language)
        )
        if phrase is None:
            return None
        return self._say(phrase, add_to_chat_ctx=True)

    def say_cached(
        self, text: str, *, add_to_chat_ctx: bool = True, allow_interruptions: bool | None = None
    ) -> SpeechHandle | None:
        """Say `text` from cache when it is cached (no synthesis); None on a miss (use `session.say`)."""
        phrase = self._lookup(text)
        if phrase is None:
            return None
        return self._say(phrase, add_to_chat_ctx=add_to_chat_ctx, allow_interruptions=allow_interruptions)

    def apologise(self) -> SpeechHandle | None:
        """An apology line from cache (for a failed LLM or engine); at most one per turn."""
        turn = self.policy.turn
        if not self.opts.apologies or self._apologised_turn == turn:
            return None
        options = {p.text: p for p in self.cache.phrases("apology", self.opts.voice, self.opts.language)}
        text = self.policy.choose_apology(sorted(options))
        if text is None:
            return None
        self._apologised_turn = turn
        self.metrics.apologies += 1
        if self._current is not None:
            self._current.failed = True
        return self._say(options[text], add_to_chat_ctx=False)

    def tool_filler(self, step: int = 0) -> SpeechHandle | None:
        """A hold line for a running tool call; pass as `ctx.with_filler(controller.tool_filler, ...)`."""
        now_ms = time.monotonic() * 1000
        if not self.policy.allow_hold_line(user_speaking=self._user_speaking(), now_ms=now_ms):
            return None
        options = {p.text: p for p in self.cache.phrases("hold", self.opts.voice, self.opts.language)}
        text = self.policy.choose(sorted(options))
        if text is None:
            return None
        self.policy.on_filler_played(text, now_ms)
        self.metrics.hold_lines += 1
        phrase = options[text]
        return self._say_raw(phrase.text, self._hold_audio(phrase), add_to_chat_ctx=False)

    async def _hold_audio(self, phrase: CachedPhrase) -> AsyncIterator[rtc.AudioFrame]:
        first = True
        async for frame in phrase.frames(self._rate()):
            if first:
                first = False
                self._window(phrase)
            yield frame

    def _window(self, phrase: CachedPhrase) -> None:
        start = time.monotonic()
        self.metrics.filler_windows.append((start, start + phrase.duration_ms / 1000))

    def on_user_turn_completed(self) -> None:
        """Call from `Agent.on_user_turn_completed` (just before the reply is scheduled); never blocks."""
        self.policy.start_turn()
        now = time.time()
        rec = TurnRecord(self.policy.turn, user_stopped_at=self._user_stopped_at or now, committed_at=now)
        self.metrics.turns.append(rec)
        self._current = rec
        pre = self._latest_reply
        if pre is not None and not pre.done() and not pre.scheduled:
            # a preemptive reply (made before the turn was committed) answers this turn
            self._reply_turn[pre.id] = rec.index
            if pre.id in self._ready_ids:
                rec.reply_ready_at = now
        if not self.opts.fillers or self._hook_missing:
            return
        decision = self.policy.on_commit(
            user_speaking=self._user_speaking(), reply_ready=self._reply_ready(), filler_ms=self._filler_ms()
        )
        log.debug("filler decision", extra={"turn": rec.index, "plan": decision.plan.value})
        if decision.plan is Plan.SKIP:
            return
        if not self.cache.phrases("acknowledgement", self.opts.voice, self.opts.language):
            return
        chosen: asyncio.Future[CachedPhrase | None] = asyncio.get_running_loop().create_future()
        deadline = time.monotonic() + decision.deadline_ms / 1000 if decision.plan is Plan.WATCH else None
        self._say_raw(self._gate_text(chosen), self._gate_audio(rec, deadline, chosen), add_to_chat_ctx=False)

    async def watch_reply_text(self, text: AsyncIterable[str]) -> AsyncIterator[str]:
        """Wrap the agent's `tts_node` input so the gate knows when the reply's words reach the voice."""
        handle = _speech_handle_in_context()
        marked = False
        async for delta in text:
            if not marked and delta.strip():
                marked = True
                handle = handle or self._latest_reply
                if handle is not None and handle.id not in self._own:
                    self._text_ids.add(handle.id)
                    self._wake.set()
            yield delta

    async def watch_reply_audio(self, frames: AsyncIterable[rtc.AudioFrame]) -> AsyncIterator[rtc.AudioFrame]:
        """Wrap the agent's `tts_node` output so the gate knows when the reply has audio to play."""
        handle = _speech_handle_in_context()
        self._saw_reply_audio = True
        marked = False
        async for frame in frames:
            if not marked:
                marked = True
                self._mark_ready(handle)
            yield frame

    # --- gate speech -----------------------------------------------------------------------------------
    async def _gate_text(self, chosen: asyncio.Future[CachedPhrase | None]) -> AsyncIterator[str]:
        phrase = await chosen
        if phrase is not None:
            yield phrase.text

    async def _gate_audio(
        self, rec: TurnRecord, deadline: float | None, chosen: asyncio.Future[CachedPhrase | None]
    ) -> AsyncIterator[rtc.AudioFrame]:
        try:
            if deadline is not None:
                while True:
                    self._wake.clear()
                    if (
                        self._reply_ready()
                        or self._reply_synthesising()
                        or self._reply_gone()
                        or self._user_speaking()
                    ):
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), remaining)
                if self._reply_gone() or not self.policy.at_deadline(
                    user_speaking=self._user_speaking(),
                    reply_ready=self._reply_ready(),
                    reply_synthesising=self._reply_synthesising(),
                ):
                    return
            if self._current is not rec:
                return  # a newer caller turn superseded this one
            options = {
                p.text: p for p in self.cache.phrases("acknowledgement", self.opts.voice, self.opts.language)
            }
            text = self.policy.choose(sorted(options))
            if text is None:
                return
            phrase = options[text]
            self.policy.on_filler_played(text, time.monotonic() * 1000)
            rec.filler_text = text
            self.metrics.fillers += 1
            chosen.set_result(phrase)
            first = True
            async for frame in phrase.frames(self._rate()):
                if first:
                    first = False
                    rec.filler_started_at = time.time()
                    self._window(phrase)
                yield frame
        finally:
            if not chosen.done():
                chosen.set_result(None)

    def _reply_ready(self) -> bool:
        h = self._latest_reply
        return h is not None and not h.done() and h.id in self._ready_ids

    def _reply_synthesising(self) -> bool:
        h = self._latest_reply
        return h is not None and not h.done() and h.id in self._text_ids

    def _filler_ms(self) -> float:
        clips = self.cache.phrases("acknowledgement", self.opts.voice, self.opts.language)
        return max((p.duration_ms for p in clips), default=0.0)

    def _reply_gone(self) -> bool:
        """The reply for this turn failed, or ended (interrupted) without audio: nothing left to mask."""
        if self._failed_turn == self.policy.turn:
            return True
        h = self._latest_reply
        return h is not None and h.done() and h.id not in self._ready_ids and self._reply_is_current(h)

    def _reply_is_current(self, h: SpeechHandle) -> bool:
        return self._current is not None and self._reply_turn.get(h.id) == self._current.index

    def _mark_ready(self, handle: SpeechHandle | None) -> None:
        handle = handle or self._latest_reply
        if handle is None or handle.id in self._own:
            return
        self._ready_ids.add(handle.id)
        rec = self._current
        if rec is not None and rec.reply_ready_at is None and self._reply_turn.get(handle.id) == rec.index:
            rec.reply_ready_at = time.time()
        self._wake.set()

    # --- session events --------------------------------------------------------------------------------
    def _on_user_state(self, ev: UserStateChangedEvent) -> None:
        if ev.old_state == "speaking" and ev.new_state != "speaking":
            self._user_stopped_at = ev.created_at
        self._wake.set()

    def _on_agent_state(self, ev: AgentStateChangedEvent) -> None:
        self._wake.set()

    def _on_speech_created(self, ev: SpeechCreatedEvent) -> None:
        if self._creating_own or ev.speech_handle.id in self._own:
            return
        if ev.source == "generate_reply":
            h = ev.speech_handle
            self._reply_turn[h.id] = self.policy.turn
            self._latest_reply = h
            self._wake.set()

    def _on_item_added(self, ev: ConversationItemAddedEvent) -> None:
        item = ev.item
        if not isinstance(item, llm.ChatMessage) or (rec := self._current) is None:
            return
        metrics: dict[str, Any] = dict(item.metrics or {})
        if item.role == "user" and (stopped := metrics.get("stopped_speaking_at")):
            rec.user_stopped_at = float(stopped)
        elif item.role == "assistant" and (started := metrics.get("started_speaking_at")):
            if not self._saw_reply_audio and not self._hook_missing:
                # without the tts_node hook every reply looks late: fillers would delay prompt replies
                self._hook_missing = True
                log.warning(
                    "late-reply fillers off: the agent's tts_node is not wrapped (see ParleyAgent.tts_node)"
                )
            if rec.reply_started_at is None:
                rec.reply_started_at = float(started)
                if rec.reply_ms is not None:
                    self.policy.observe_reply_latency(rec.reply_ms)
            self.policy.on_reply_audio()

    def _on_error(self, ev: ErrorEvent) -> None:
        err = ev.error
        kind = getattr(err, "type", "")
        if kind in ("llm_error", "tts_error") and not getattr(err, "recoverable", True):
            log.warning("reply failed (%s); playing an apology from cache", kind)
            self._failed_turn = self.policy.turn
            self._wake.set()
            try:
                self.apologise()
            except RuntimeError:  # the session is closing; nothing can be said any more
                pass

    def _on_close(self, ev: CloseEvent) -> None:
        self.detach()

    # --- helpers ---------------------------------------------------------------------------------------
    def _lookup(self, text: str) -> CachedPhrase | None:
        return self.cache.lookup(text, self.opts.voice, self.opts.language)

    def _rate(self) -> int | None:
        if self.opts.sample_rate:
            return self.opts.sample_rate
        out = self.session.output.audio
        return out.sample_rate if out is not None else None

    def _user_speaking(self) -> bool:
        return self.session.user_state == "speaking"

    def _say(
        self, phrase: CachedPhrase, *, add_to_chat_ctx: bool, allow_interruptions: bool | None = None
    ) -> SpeechHandle:
        return self._say_raw(
            phrase.text,
            phrase.frames(self._rate()),
            add_to_chat_ctx=add_to_chat_ctx,
            allow_interruptions=allow_interruptions,
        )

    def _say_raw(
        self,
        text: str | AsyncIterable[str],
        audio: AsyncIterable[rtc.AudioFrame],
        *,
        add_to_chat_ctx: bool,
        allow_interruptions: bool | None = None,
    ) -> SpeechHandle:
        """`allow_interruptions` None: the session's own default, as for every line before the idle watch."""
        extra: dict[str, Any] = (
            {} if allow_interruptions is None else {"allow_interruptions": allow_interruptions}
        )
        self._creating_own = True
        try:
            handle = self.session.say(text, audio=audio, add_to_chat_ctx=add_to_chat_ctx, **extra)
        finally:
            self._creating_own = False
        self._own.add(handle.id)
        return handle
