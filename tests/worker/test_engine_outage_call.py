"""A whole call through a real AgentSession while its host speech engine is killed mid-call: the worker's
keeper restarts it, the caller hears one hold line, and the words said meanwhile are still transcribed."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from benchmarks.call import OfflineBuilder, warm_stt
from simulator.offline import run_call
from tests.conftest import SHORT_REPLIES
from worker.settings import load_settings
from worker.speech_engine import HostSpeechEngine, HostSpeechEngineOptions
from worker.stt_hold import HOLD

pytestmark = pytest.mark.slow


async def test_engine_killed_as_the_caller_starts_speaking(
    embedded_llm_url: str, speech_audio: Path, tmp_path: Path
) -> None:
    # the keeper waits 4 s before restarting it: the caller (3–4 s of speech) finishes while it is down
    options = HostSpeechEngineOptions(address=f"unix://{tmp_path}/stt.sock", workers=1, restart_delay_s=4.0)
    engine = HostSpeechEngine(options)
    engine.start()
    try:
        settings = load_settings(**SHORT_REPLIES).model_copy(
            update={"stt_engine": "host", "stt_engine_address": engine.address, "stt_engine_wait_s": 30.0}
        )
        turns = sorted((speech_audio / "conversation").glob("*.wav"))[:2]
        session, agent, stt_model = OfflineBuilder(settings, embedded_llm_url).build("parley")
        await warm_stt(stt_model, turns[0])
        killed: list[int] = []

        def on_user_state(ev: Any) -> None:
            if ev.new_state == "speaking" and not killed and engine.pid is not None:
                killed.append(engine.pid)
                os.kill(engine.pid, signal.SIGKILL)

        session.on("user_state_changed", on_user_state)
        await run_call("parley", session, agent, turns)
    finally:
        engine.close()
    assert killed and engine.restarts == 1
    said = [(m.role, m.text_content or "") for m in agent.chat_ctx.items if m.type == "message"]
    user = " ".join(text.lower() for role, text in said if role == "user")
    assert "cleaning" in user and "wednesday" in user  # said during the outage and after: both transcribed
    replies = [text for role, text in said if role == "assistant"]
    assert sum(HOLD["en"] in text for text in replies) == 1, replies  # one hold line for the one outage
    hold = next(i for i, text in enumerate(replies) if HOLD["en"] in text)
    assert len(replies) > hold + 1  # and the call went on: the agent answered after it


async def test_engine_stopped_as_the_caller_starts_speaking(
    embedded_llm_url: str, speech_audio: Path, tmp_path: Path
) -> None:
    """SIGSTOP, not a kill: the engine is there but answers nothing. The caller still hears one hold line
    soon after their turn ends, the keeper restarts the frozen engine, and the turn is transcribed."""
    import time

    options = HostSpeechEngineOptions(address=f"unix://{tmp_path}/stt.sock", workers=1, stall_s=2.0)
    engine = HostSpeechEngine(options)
    engine.start()
    try:
        settings = load_settings(**SHORT_REPLIES).model_copy(
            update={"stt_engine": "host", "stt_engine_address": engine.address, "stt_engine_wait_s": 30.0}
        )
        turns = sorted((speech_audio / "conversation").glob("*.wav"))[:2]
        session, agent, stt_model = OfflineBuilder(settings, embedded_llm_url).build("parley")
        await warm_stt(stt_model, turns[0])
        stopped: list[int] = []
        ends: list[float] = []
        holds: list[float] = []
        stt_model.transcriber.add_listener(lambda down: holds.append(time.monotonic()) if down else None)

        def on_user_state(ev: Any) -> None:
            if ev.new_state == "speaking" and not stopped and engine.pid is not None:
                stopped.append(engine.pid)
                os.kill(engine.pid, signal.SIGSTOP)
            elif ev.old_state == "speaking" and stopped and not ends:
                ends.append(time.monotonic())

        session.on("user_state_changed", on_user_state)
        await run_call("parley", session, agent, turns)
    finally:
        engine.close()
    assert stopped and engine.restarts == 1 and engine.pid != stopped[0]
    assert holds and ends and holds[0] - ends[0] <= 1.5, (holds, ends)  # hold line within 1.5 s of the turn
    said = [(m.role, m.text_content or "") for m in agent.chat_ctx.items if m.type == "message"]
    user = " ".join(text.lower() for role, text in said if role == "user")
    assert "cleaning" in user and "wednesday" in user
    replies = [text for role, text in said if role == "assistant"]
    # one hold line for the one outage; the caller's next words may cut it before it plays, and then it is
    # not in the transcript (seen on a quiet machine, 2026-12-07), so the count there is at most one
    assert len(holds) == 1 and sum(HOLD["en"] in text for text in replies) <= 1, (holds, replies)
