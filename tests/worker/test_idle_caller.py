"""A silent caller is asked if they are still there and then hung up on; a caller who answers keeps the
call; a call at its time limit ends after a goodbye. Real AgentSessions (Parley's pipeline, the CPU voice,
the real streaming Whisper), a scripted microphone and a real-time loudspeaker; short timers so the
tests take seconds, not the production 15 s."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.call import OfflineBuilder, warm_stt
from caches import load_phrases
from simulator.audio_io import Loudspeaker, ScriptedMic
from simulator.offline import load_turn
from tests.conftest import SHORT_REPLIES
from worker.idle_caller import IdleOptions
from worker.settings import load_settings

pytestmark = pytest.mark.slow

EN = load_phrases().defaults["en"]


def agent_lines(agent: Any) -> list[str]:
    return [
        m.text_content or "" for m in agent.chat_ctx.items if m.type == "message" and m.role == "assistant"
    ]


class Call:
    """One offline call whose end (the session closing by itself) the test waits for."""

    def __init__(self, llm_url: str, **settings: Any) -> None:
        s = load_settings(**SHORT_REPLIES).model_copy(update={"stt_engine": "process", **settings})
        self.session, self.agent, self.stt = OfflineBuilder(s, llm_url).build("parley")
        self.mic, self.speaker = ScriptedMic(), Loudspeaker()
        self.closed = asyncio.Event()
        self.session.on("close", lambda _ev: self.closed.set())

    async def start(self, warm_with: Path) -> float:
        await warm_stt(self.stt, warm_with)
        self.session.input.audio, self.session.output.audio = self.mic, self.speaker
        t0 = time.monotonic()
        await self.session.start(self.agent, record=False)
        return t0

    async def wait_closed(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self.closed.wait(), timeout)
            return True
        except TimeoutError:
            return False

    async def aclose(self) -> None:
        self.mic.close()
        if not self.closed.is_set():
            await asyncio.wait_for(self.session.aclose(), 10)
        await self.speaker.aclose()


async def test_a_silent_caller_is_asked_then_hung_up_on(embedded_llm_url: str, speech_audio: Path) -> None:
    call = Call(embedded_llm_url, idle_reprompt_s=1.0, idle_reprompts=2, max_call_s=0)
    t0 = await call.start(sorted((speech_audio / "conversation").glob("*.wav"))[0])
    try:
        assert await call.wait_closed(40), f"the call never ended: {agent_lines(call.agent)}"
    finally:
        await call.aclose()
    lines = agent_lines(call.agent)
    assert [line in EN["reprompt"] for line in lines[1:]] == [True, True, False], lines
    assert lines[-1] in EN["goodbye"], lines
    # every line was heard, the goodbye last
    assert call.speaker.track.first_voiced_after(t0) is not None


async def test_a_caller_who_answers_the_reprompt_keeps_the_call(
    embedded_llm_url: str, speech_audio: Path
) -> None:
    turn = sorted((speech_audio / "conversation").glob("*.wav"))[0]
    call = Call(embedded_llm_url, idle_reprompt_s=1.5, idle_reprompts=1, max_call_s=0)
    await call.start(turn)
    try:
        deadline = time.monotonic() + 20
        while not any(line in EN["reprompt"] for line in agent_lines(call.agent)):
            assert time.monotonic() < deadline, "no reprompt within 20 s"
            await asyncio.sleep(0.05)
        await call.mic.play(load_turn(turn))  # the caller answers: the count starts again
        assert await call.wait_closed(60), f"the call never ended: {agent_lines(call.agent)}"
    finally:
        await call.aclose()
    lines = agent_lines(call.agent)
    kinds = [
        "reprompt" if x in EN["reprompt"] else "goodbye" if x in EN["goodbye"] else "reply" for x in lines
    ]
    # greeting, the first reprompt, the reply to the caller, a second reprompt (asked again after the
    # answer, not a goodbye at once), then the goodbye
    assert kinds[1] == "reprompt" and "reply" in kinds[2:-2], lines
    assert kinds[-2:] == ["reprompt", "goodbye"], lines


async def test_a_caller_who_talks_over_the_silence_goodbye_keeps_the_call(
    embedded_llm_url: str, speech_audio: Path
) -> None:
    turn = sorted((speech_audio / "conversation").glob("*.wav"))[0]
    call = Call(embedded_llm_url, idle_reprompt_s=1.0, idle_reprompts=0, max_call_s=0)
    away, speaking = asyncio.Event(), asyncio.Event()
    call.session.on("user_state_changed", lambda ev: ev.new_state == "away" and away.set())
    call.session.on(
        "agent_state_changed", lambda ev: away.is_set() and ev.new_state == "speaking" and speaking.set()
    )
    await call.start(turn)
    try:
        await asyncio.wait_for(speaking.wait(), 20)  # the goodbye has begun
        await call.mic.play(load_turn(turn))
        assert await call.wait_closed(60), f"the call never ended: {agent_lines(call.agent)}"
    finally:
        await call.aclose()
    items = [m for m in call.agent.chat_ctx.items if m.type == "message"]
    said = [(m.role, m.text_content or "") for m in items]
    callers = [i for i, m in enumerate(items) if m.role == "user"]
    assert callers, f"the caller's words never reached the agent: {said}"
    after = [text for role, text in said[callers[0] + 1 :] if role == "assistant"]
    # the call went on: a reply to the caller, and only then the goodbye that ended it
    assert len(after) >= 2 and after[0] not in EN["goodbye"] and after[-1] in EN["goodbye"], said


async def test_a_call_at_its_time_limit_ends_with_a_goodbye(
    embedded_llm_url: str, speech_audio: Path
) -> None:
    call = Call(embedded_llm_url, idle_reprompt_s=0, max_call_s=2.0)
    await call.start(sorted((speech_audio / "conversation").glob("*.wav"))[0])
    try:
        assert await call.wait_closed(20), f"the call never ended: {agent_lines(call.agent)}"
    finally:
        await call.aclose()
    lines = agent_lines(call.agent)
    assert len(lines) == 2 and lines[-1] in EN["goodbye"], lines  # the greeting, then the goodbye


def test_options_refuse_negative_values() -> None:
    with pytest.raises(ValueError, match="reprompt_after_s"):
        IdleOptions(reprompt_after_s=-1)
    with pytest.raises(ValueError, match="reprompts"):
        IdleOptions(reprompts=-1)
    assert IdleOptions(reprompt_after_s=0).user_away_timeout is None
