"""The offline call harness: a scripted caller talks to a real AgentSession through a scripted microphone and
a real-time loudspeaker (no server), and everything that happens is stamped on one wall clock.

Used by `benchmarks.call`, `make demo`, the load benchmark and the integration tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from livekit.agents import llm
from livekit.agents.metrics import EOUMetrics, LLMMetrics, TTSMetrics
from livekit.agents.voice import Agent, AgentSession, ModelSettings

from .audio_io import Loudspeaker, ScriptedMic, load_turn
from .call_plan import TurnPlan

log = logging.getLogger("parley.harness")


@dataclass
class Mark:
    kind: str  # speech_start|end, endpoint, stt_final, llm_request|first_token|text, tts_text|piece, …
    t: float
    info: str = ""


@dataclass
class TurnResult:
    file: str
    speech_start: float
    speech_end: float
    v2v_ms: float | None = None
    first_audible_ms: float | None = None
    stt_final_ms: float | None = None
    llm_ttft_ms: float | None = None
    tts_ttfb_ms: float | None = None
    llm_to_tts_request_ms: float | None = None
    endpoint_ms: float | None = None
    user_text: str = ""
    reply_text: str = ""
    error: str = ""
    start: str = "after_reply"  # how the turn was started (call_plan.TurnPlan.start)
    marks: dict[str, float] = field(default_factory=dict)  # ms after the caller's last voiced sample
    reply_words: int | None = None
    spoken_s: float | None = None  # voiced seconds of the agent after this turn, before the next
    problem: str = ""  # "apology" | "repeat_request" (both count as errors) | ""
    agent_stop_ms: float | None = None
    """A turn said over the agent: its first voiced sample -> the agent's last voiced sample the caller
    heard before a silence (room runs; None where the agent was not speaking)."""
    answered_words: int | None = None
    """Words of the caller's turn the reply's LLM was sent (worker marks; None without them)."""
    spoke_over_ms: float | None = None
    """The agent's voiced audio the caller heard while still in this turn (between its first and last voiced
    samples): the agent took the turn before the caller finished (room runs, turns said after a reply)."""
    backchannel: bool = False
    """The call plan says this turn is a backchannel said over the agent (call_plan.TurnPlan)."""
    completed_reply: str | None = None
    """The text of the last reply speech after this turn that played to its end (room runs with the
    worker's marks; None without them): what a listener should hear in full."""
    heard: dict[str, Any] | None = None
    """What a listener heard of the reply at the caller (benchmarks/heard.py; None where none listened)."""

    def as_json(self) -> dict[str, Any]:
        """Every field but the two clock times; milliseconds to 0.1, spoken seconds to 0.01."""
        out = asdict(self)
        del out["speech_start"], out["speech_end"]
        out.update({k: _r(v) for k, v in out.items() if k.endswith("_ms")})
        out["marks"] = {k: _r(v) for k, v in self.marks.items()}
        out["spoken_s"] = None if self.spoken_s is None else round(self.spoken_s, 2)
        return out


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


@dataclass
class CallResult:
    pipeline: str
    t0: float
    greeting_first_audio_ms: float | None
    turns: list[TurnResult]
    marks: list[Mark]
    mic: ScriptedMic
    speaker: Loudspeaker
    filler_windows: list[tuple[float, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    end: float = 0.0


class Recorder:
    """Collects marks from session events and from the instrumented agent/TTS."""

    def __init__(self) -> None:
        self.marks: list[Mark] = []
        self.user_finals: list[tuple[float, str]] = []
        self.replies: list[tuple[float, str]] = []
        self.agent_state = "initializing"
        self.errors: list[str] = []

    def mark(self, kind: str, info: str = "") -> None:
        self.marks.append(Mark(kind, time.monotonic(), info))

    def attach(self, session: AgentSession) -> None:
        @session.on("user_input_transcribed")
        def _on_transcript(ev: Any) -> None:
            if ev.is_final:
                self.user_finals.append((time.monotonic(), ev.transcript))
                self.mark("stt_final")

        @session.on("metrics_collected")
        def _on_metrics(ev: Any) -> None:
            m = ev.metrics
            if isinstance(m, EOUMetrics):
                self.mark("endpoint")
            elif isinstance(m, LLMMetrics):
                self.mark("llm_metrics", f"{m.ttft:.4f}")
            elif isinstance(m, TTSMetrics):
                self.mark("tts_metrics", f"{m.ttfb:.4f}")

        @session.on("conversation_item_added")
        def _on_item(ev: Any) -> None:
            item = ev.item
            if getattr(item, "role", None) == "assistant" and item.text_content:
                self.replies.append((time.monotonic(), item.text_content))

        @session.on("user_state_changed")
        def _on_user_state(ev: Any) -> None:
            if ev.old_state == "speaking" and ev.new_state != "speaking":
                self.mark("vad_end")

        @session.on("agent_state_changed")
        def _on_state(ev: Any) -> None:
            self.agent_state = ev.new_state

        @session.on("error")
        def _on_error(ev: Any) -> None:
            self.errors.append(f"{type(ev.error).__name__}: {str(ev.error)[:200]}")


async def _as_aiter(obj: Any) -> AsyncIterator[Any]:
    if inspect.isawaitable(obj):
        obj = await obj
    if obj is None:
        return
    if isinstance(obj, str | llm.ChatChunk):
        yield obj
        return
    async for x in obj:
        yield x


def instrument(agent: Agent, rec: Recorder) -> Agent:
    """Wrap the agent's LLM and TTS nodes to stamp first token / first TTS text / first audio frame."""
    cls = type(agent)
    orig_llm = cls.llm_node
    orig_tts = cls.tts_node

    async def llm_node(
        self: Agent, chat_ctx: Any, tools: Any, model_settings: ModelSettings
    ) -> AsyncIterator[Any]:
        first = True
        rec.mark("llm_request")
        async for chunk in _as_aiter(orig_llm(self, chat_ctx, tools, model_settings)):
            text = (
                chunk
                if isinstance(chunk, str)
                else (chunk.delta.content if getattr(chunk, "delta", None) else "")
            )
            if text:
                if first:
                    first = False
                    rec.mark("llm_first_token")
                rec.mark("llm_text")
            yield chunk

    async def tts_node(
        self: Agent, text: AsyncIterable[str], model_settings: ModelSettings
    ) -> AsyncIterator[Any]:
        async def tap() -> AsyncIterator[str]:
            first = True
            async for t in text:
                if first and t.strip():
                    first = False
                    rec.mark("tts_text")
                yield t

        first_frame = True
        async for frame in _as_aiter(orig_tts(self, tap(), model_settings)):
            if first_frame:
                first_frame = False
                rec.mark("tts_first_frame")
            yield frame

    agent.llm_node = llm_node.__get__(agent)  # type: ignore[method-assign]
    agent.tts_node = tts_node.__get__(agent)  # type: ignore[method-assign]
    return agent


@dataclass(frozen=True)
class CallOptions:
    reply_timeout_s: float = 25.0
    settle_s: float = 0.6  # quiet time after the agent finishes before the caller speaks again
    greeting_timeout_s: float = 10.0
    mic_rate: int = 16_000  # the caller's device rate (8 kHz telephony, 48 kHz browsers)


async def _wait_idle(rec: Recorder, speaker: Loudspeaker, timeout: float, since: float) -> bool:
    """True once the agent has finished a reply (an assistant message after `since`; fillers add none)
    and is back to listening with its audio drained. since=0: any speech at all (the greeting)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        replied = any(t > since for t, _ in rec.replies)
        if replied and rec.agent_state in ("listening", "idle") and speaker.idle.is_set():
            return True
        await asyncio.sleep(0.05)
    return False


def _stall_state(rec: Recorder, speaker: Loudspeaker, since: float) -> str:
    """Where a turn stalled: heard or not, answered or not, still speaking or not."""
    finals = sum(1 for t, _ in rec.user_finals if t > since)
    replies = sum(1 for t, _ in rec.replies if t > since)
    endpoints = sum(1 for m in rec.marks if m.kind == "endpoint" and m.t > since)
    return (
        f"finals={finals} endpoints={endpoints} replies={replies} state={rec.agent_state} "
        f"speaker_idle={speaker.idle.is_set()}"
    )


async def _wait_first_audio(speaker: Loudspeaker, since: float, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if speaker.track.first_voiced_after(since) is not None:
            return True
        await asyncio.sleep(0.02)
    return False


async def run_call(
    pipeline: str,
    session: AgentSession,
    agent: Agent,
    turns: Sequence[Path | TurnPlan],
    opt: CallOptions | None = None,
    tts_hooks: Callable[[Recorder], None] | None = None,
) -> CallResult:
    """Play `turns` (16 kHz WAVs) into the session one by one: each after the agent's previous reply, or
    (a `TurnPlan` starting `during_reply`) over it, `delay_ms` after that reply's first audio."""
    opt = opt or CallOptions()
    plan = [t if isinstance(t, TurnPlan) else TurnPlan(t) for t in turns]
    rec = Recorder()
    rec.attach(session)
    if tts_hooks:
        tts_hooks(rec)
    listeners = getattr(session.tts, "piece_listeners", None)

    def on_piece(*_piece: object) -> None:  # Parley's voices pass (text), the stock TTS (text, seconds)
        rec.mark("tts_piece")

    if listeners is not None:
        listeners.append(on_piece)
    mic = ScriptedMic(sample_rate=opt.mic_rate)
    speaker = Loudspeaker()
    session.input.audio = mic
    session.output.audio = speaker
    instrument(agent, rec)

    t0 = time.monotonic()
    await session.start(agent, record=False)
    greeting_ms = None
    if await _wait_idle(rec, speaker, opt.greeting_timeout_s, since=t0):
        first = speaker.track.first_voiced_after(t0)
        greeting_ms = (first - t0) * 1000 if first else None
    await asyncio.sleep(opt.settle_s)

    results: list[TurnResult] = []
    for i, item in enumerate(plan):
        if i > 0:
            prev = results[-1]
            if item.start == "during_reply":
                if not await _wait_first_audio(speaker, prev.speech_end, opt.reply_timeout_s):
                    prev.error = "no reply audio to speak over within timeout"
                await asyncio.sleep((item.delay_ms or 0.0) / 1000)
            else:
                await _after_reply(rec, speaker, prev, opt, item.delay_ms)
        path = item.path
        pcm = load_turn(path, opt.mic_rate)
        rec.mark("speech_start", path.name)
        start = time.monotonic()
        end = await mic.play(pcm)
        rec.marks.append(Mark("speech_end", end, path.name))
        results.append(TurnResult(file=path.name, speech_start=start, speech_end=end, start=item.start))
    if results:
        await _after_reply(rec, speaker, results[-1], opt, None)

    end_t = time.monotonic()
    mic.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(session.aclose(), 10)
    await speaker.aclose()
    if listeners is not None:
        listeners.remove(on_piece)
    fillers = getattr(agent, "fillers", None)
    result = CallResult(
        pipeline=pipeline,
        t0=t0,
        greeting_first_audio_ms=greeting_ms,
        turns=results,
        marks=sorted(rec.marks, key=lambda m: m.t),
        mic=mic,
        speaker=speaker,
        errors=rec.errors,
        end=end_t,
        filler_windows=list(fillers.metrics.filler_windows) if fillers is not None else [],
    )
    _fill_turn_metrics(result, rec)
    return result


async def _after_reply(
    rec: Recorder, speaker: Loudspeaker, prev: TurnResult, opt: CallOptions, delay_ms: float | None
) -> None:
    if not await _wait_idle(rec, speaker, opt.reply_timeout_s, since=prev.speech_end):
        prev.error = f"no complete reply within timeout ({_stall_state(rec, speaker, prev.speech_end)})"
    await asyncio.sleep(opt.settle_s if delay_ms is None else delay_ms / 1000)


def _first(marks: list[Mark], kind: str, lo: float, hi: float) -> float | None:
    for m in marks:
        if m.kind == kind and lo <= m.t < hi:
            return m.t
    return None


def _fill_turn_metrics(res: CallResult, rec: Recorder) -> None:
    for i, tr in enumerate(res.turns):
        hi = res.turns[i + 1].speech_start if i + 1 < len(res.turns) else res.end + 1
        lo = tr.speech_start
        audio = _first_agent_audio(res, tr.speech_end, hi, include_fillers=False)
        audible = _first_agent_audio(res, tr.speech_end, hi, include_fillers=True)
        tr.v2v_ms = (audio - tr.speech_end) * 1000 if audio else None
        tr.first_audible_ms = (audible - tr.speech_end) * 1000 if audible else None
        fin = _first(res.marks, "stt_final", lo, hi)
        tr.stt_final_ms = (fin - tr.speech_end) * 1000 if fin else None
        ep = _first(res.marks, "endpoint", lo, hi)
        tr.endpoint_ms = (ep - tr.speech_end) * 1000 if ep else None
        # the LLM request that produced the reply: the last one started before the first reply audio
        tok = _last_before(res.marks, "llm_first_token", lo, audio or hi)
        req = _last_before(res.marks, "llm_request", lo, tok) if tok is not None else None
        if tok is not None and ep is not None:
            tr.llm_ttft_ms = (tok - max(ep, lo)) * 1000 if tok >= ep else 0.0
        tts_txt = _last_before(res.marks, "tts_text", lo, audio or hi)
        tts_piece = _last_before(res.marks, "tts_piece", lo, audio or hi)
        tts_frame = _first(res.marks, "tts_first_frame", tts_txt or lo, hi)
        if tts_frame is not None:
            start = tts_piece or tts_txt
            tr.tts_ttfb_ms = (tts_frame - start) * 1000 if start else None
        if tok is not None and (tts_piece or tts_txt):
            tr.llm_to_tts_request_ms = ((tts_piece or tts_txt) - tok) * 1000  # type: ignore[operator]
        tr.user_text = next((t for ts, t in rec.user_finals if lo <= ts < hi), "")
        tr.reply_text = " ".join(t for ts, t in rec.replies if lo <= ts < hi)
        stamps = {
            "vad_end": _first(res.marks, "vad_end", tr.speech_end, hi),
            "end_of_turn": ep,
            "stt_final": fin,
            "llm_request": req,
            "llm_first_token": tok,
            "tts_text": tts_txt,
            "tts_first_audio": tts_frame,
            "caller_first_voiced": audio,
        }
        tr.marks = {k: (v - tr.speech_end) * 1000 for k, v in stamps.items() if v is not None}
        judge_reply(tr, res, hi)


def judge_reply(tr: TurnResult, res: CallResult, hi: float) -> None:
    """Reply words, spoken seconds and whether the reply was an apology or a repeat-request."""
    from .audio_io import voiced_seconds
    from .call_plan import agent_fixed_lines, reply_problem

    tr.reply_words = len(tr.reply_text.split()) if tr.reply_text else 0
    tr.spoken_s = voiced_seconds(res.speaker.track, tr.speech_end, hi)
    tr.problem = reply_problem(tr.reply_text, agent_fixed_lines())


def _last_before(marks: list[Mark], kind: str, lo: float, hi: float) -> float | None:
    found = None
    for m in marks:
        if m.kind == kind and lo <= m.t <= hi:
            found = m.t
    return found


def _first_agent_audio(res: CallResult, after: float, before: float, include_fillers: bool) -> float | None:
    from .audio_io import first_voiced_sample

    for start, pcm in res.speaker.track.chunks:
        if start + len(pcm) / res.speaker.rate < after or start >= before:
            continue
        if not include_fillers and any(a <= start < b for a, b in res.filler_windows):
            continue
        idx = first_voiced_sample(pcm, res.speaker.rate)
        if idx is not None:
            t = start + idx / res.speaker.rate
            if t >= after:
                return t
    return None


def write_stereo(res: CallResult, path: Path, rate: int = 24_000) -> None:
    dur = res.end - res.t0 + 1.0
    left = res.mic.track.render(res.t0, rate, dur)
    right = res.speaker.track.render(res.t0, rate, dur)
    n = max(len(left), len(right))
    stereo = np.zeros((n, 2), np.float32)
    stereo[: len(left), 0] = left
    stereo[: len(right), 1] = right
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), np.clip(stereo, -1, 1), rate, subtype="PCM_16")
