"""A frozen engine (SIGSTOP: its socket stays open, nothing answers) mid-reply, through a real engine process
(tiny random model on CPU) and the real CPU voice: the rest of that reply comes in the CPU voice within a
second, no words lost; the next reply too; once the engine runs again (SIGCONT), replies use it again."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from deploy.healthcheck import check
from plugins.cpu_voice import CpuVoiceTTS
from plugins.fallback_tts import FallbackOptions, FallbackTTS, _FallbackStream, remainder
from plugins.orpheus.tts import OrpheusOptions, OrpheusTTS

from .conftest import EngineProcess
from .test_fallback import NO_RETRY, _speak, _wait_for

REPLY = (
    "Thanks for calling the clinic. We have a cleaning slot on Tuesday at nine, and another one on "
    "Thursday afternoon at three. Doctor Morgan takes both of them. Would either of those suit you, or "
    "shall I look at next week instead? I can also put you on the list for cancellations."
)


def words(text: str) -> list[str]:
    return text.split()


def test_remainder_skips_the_voiced_prefix_whitespace_blind_and_never_drops_on_a_mismatch() -> None:
    assert remainder("Hello there.  How are you?", "Hello there.") == "How are you?"
    assert remainder("Hello there. How are you?", "Hellothere.") == "How are you?"
    assert remainder("Hello there.", "Goodbye.") == "Hello there."  # not a prefix: say it all
    assert remainder("Hi.", "") == "Hi."


@pytest.mark.slow
async def test_frozen_engine_mid_reply_hands_the_rest_to_the_cpu_voice_and_back_when_it_runs(
    running_engine: EngineProcess,
) -> None:
    assert running_engine.proc is not None
    pid = running_engine.proc.pid
    cpu_voice = CpuVoiceTTS()
    cpu_voice.prewarm()
    orpheus = OrpheusTTS(
        OrpheusOptions(address=running_engine.address, silence_timeout_s=0.25, ping_timeout_s=0.25)
    )
    chain = FallbackTTS(orpheus, cpu_voice, FallbackOptions(probe_interval_s=0.2))
    pieces: list[tuple[float, str]] = []
    chain.piece_listeners.append(lambda p: pieces.append((time.monotonic(), p)))
    await chain.warm_up()
    assert not chain.using_fallback
    stopped_at: float | None = None
    try:
        stream = chain.stream(conn_options=NO_RETRY)
        assert isinstance(stream, _FallbackStream)
        stream.push_text(REPLY)
        stream.end_input()
        engine_s = cpu_s = 0.0
        first_cpu_at: float | None = None
        async for ev in stream:
            if stopped_at is None:
                engine_s += ev.frame.duration
                if engine_s >= 0.2:  # the engine is speaking: freeze it mid-reply
                    os.kill(pid, signal.SIGSTOP)
                    stopped_at = time.monotonic()
            elif stream.voice is cpu_voice:
                first_cpu_at = first_cpu_at or time.monotonic()
                cpu_s += ev.frame.duration
        await stream.aclose()
        assert stopped_at is not None and first_cpu_at is not None, "the reply never switched"
        assert stream.voice is cpu_voice and chain.using_fallback
        # heard within a second of the stall (the engine's audio already delivered plays meanwhile)
        print(f"stall -> first CPU-voice frame: {first_cpu_at - stopped_at:.3f} s")
        assert first_cpu_at - stopped_at < 1.0, first_cpu_at - stopped_at
        # no lost words: what the engine fully spoke, then what the CPU voice was given, is the whole reply
        assert stream.resumed_after is not None
        given = " ".join(p for t, p in pieces if t >= stopped_at)
        assert words(stream.resumed_after) + words(given) == words(REPLY)
        assert cpu_s > 2.0  # the rest was spoken, not just a word

        started = time.monotonic()
        voice, seconds = await _speak(chain, "Is there anything else I can help with?")
        assert voice is cpu_voice and seconds > 0.5  # the next reply too, without waiting on the engine
        assert time.monotonic() - started < 10.0
    finally:
        os.kill(pid, signal.SIGCONT)
    assert await _wait_for(lambda: not chain.using_fallback, 10.0), "did not switch back after SIGCONT"
    voice, seconds = await _speak(chain, "And the engine is back.")
    assert voice is orpheus and seconds > 0
    await asyncio.sleep(0)
    await orpheus.aclose()


def test_liveness_probe_asks_capacity_and_fails_a_frozen_engine(running_engine: EngineProcess) -> None:
    assert running_engine.proc is not None
    assert check(running_engine.address, timeout_s=3.0) is None
    os.kill(running_engine.proc.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        problem = check(running_engine.address, timeout_s=0.5)
        assert problem is not None and "frozen" in problem
        assert time.monotonic() - started < 1.5  # the deadline holds
    finally:
        os.kill(running_engine.proc.pid, signal.SIGCONT)
    assert check(running_engine.address, timeout_s=3.0) is None
