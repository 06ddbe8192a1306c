"""A whole call through a real AgentSession while its host speech engine is killed mid-call: the worker's
keeper restarts it, the caller hears one hold line, and the words said meanwhile are still transcribed."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from benchmarks.call import OfflineBuilder, _warm_stt
from benchmarks.harness import run_call
from worker.settings import load_settings
from worker.speech_engine import HostSpeechEngine, HostSpeechEngineOptions
from worker.stt_hold import HOLD

pytestmark = pytest.mark.slow


async def test_engine_killed_as_the_caller_starts_speaking(
    embedded_llm_url: str, shared_audio: Path, tmp_path: Path
) -> None:
    engine = HostSpeechEngine(HostSpeechEngineOptions(address=f"unix://{tmp_path}/stt.sock", workers=1))
    engine.start()
    try:
        settings = load_settings().model_copy(
            update={"stt_engine": "host", "stt_engine_address": engine.address, "stt_engine_wait_s": 30.0}
        )
        turns = sorted((shared_audio / "conversation").glob("*.wav"))[:2]
        session, agent, stt_model = OfflineBuilder(settings, embedded_llm_url).build("parley")
        await _warm_stt(stt_model, turns[0])
        killed: list[int] = []

        def on_user_state(ev: Any) -> None:
            if ev.new_state == "speaking" and not killed and engine.pid is not None:
                killed.append(engine.pid)
                os.kill(engine.pid, signal.SIGKILL)

        session.on("user_state_changed", on_user_state)
        res = await run_call("parley", session, agent, turns)
    finally:
        engine.close()
    assert killed and engine.restarts == 1
    heard = " ".join(t.user_text.lower() for t in res.turns)
    assert "cleaning" in heard and "wednesday" in heard  # both turns transcribed, the first after the restart
    said = " ".join(t.reply_text for t in res.turns)
    assert said.count(HOLD["en"]) == 1, said
    assert all(t.v2v_ms is not None for t in res.turns)
