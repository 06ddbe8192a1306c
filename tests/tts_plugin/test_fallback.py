"""The engine → CPU voice chain through a real engine process: killed → CPU voice, restarted → Orpheus."""

from __future__ import annotations

import asyncio
import logging

import pytest
from livekit.agents import APIConnectOptions

from plugins.cpu_voice import CpuVoiceTTS
from plugins.fallback_tts import FallbackOptions, FallbackTTS, _FallbackStream
from plugins.orpheus.client import EngineClient
from plugins.orpheus.tts import OrpheusOptions, OrpheusTTS

from .conftest import EngineProcess

NO_RETRY = APIConnectOptions(max_retry=0, timeout=30.0)
SWITCH_LOG = "parley.tts.fallback"


@pytest.fixture(scope="module")
def cpu_voice() -> CpuVoiceTTS:
    voice = CpuVoiceTTS()
    voice.prewarm()
    return voice


async def _speak(chain: FallbackTTS, text: str) -> tuple[object, float]:
    """One reply through the chain: which voice spoke it and how many seconds of audio it made."""
    stream = chain.stream(conn_options=NO_RETRY)
    assert isinstance(stream, _FallbackStream)
    for i in range(0, len(text), 5):
        stream.push_text(text[i : i + 5])
    stream.end_input()
    seconds = sum([ev.frame.duration async for ev in stream])
    await stream.aclose()
    return stream.voice, seconds


async def _wait_for(cond, timeout_s: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    for _ in range(int(timeout_s / 0.05)):
        if cond():
            return True
        await asyncio.sleep(0.05)
    return cond()


@pytest.mark.slow
async def test_switches_when_killed_and_back_when_restarted(
    running_engine: EngineProcess, cpu_voice: CpuVoiceTTS, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=SWITCH_LOG)
    orpheus = OrpheusTTS(OrpheusOptions(address=running_engine.address))
    chain = FallbackTTS(orpheus, cpu_voice, FallbackOptions(probe_interval_s=0.2))
    pieces: list[str] = []
    chain.piece_listeners.append(pieces.append)
    await chain.warm_up()

    voice, seconds = await _speak(chain, "Hello, this is the engine speaking.")
    assert voice is orpheus and seconds > 0 and not chain.using_fallback

    running_engine.stop()  # the engine host dies between two replies
    voice, seconds = await _speak(chain, "Sorry, the line is noisy today.")
    assert voice is cpu_voice and seconds > 0.5  # replayed into the CPU voice: heard, not silence
    assert chain.using_fallback
    voice, _ = await _speak(chain, "Still here with you.")
    assert voice is cpu_voice  # no engine attempt while switched

    running_engine.start()
    assert await _wait_for(lambda: not chain.using_fallback, 10.0), "did not switch back after restart"
    voice, seconds = await _speak(chain, "And the engine is back.")
    assert voice is orpheus and seconds > 0

    switches = [r for r in caplog.records if r.name == SWITCH_LOG]
    assert len(switches) == 2, [r.getMessage() for r in switches]  # one line per switch, no tracebacks
    assert "switching to the CPU voice" in switches[0].getMessage() and switches[0].exc_info is None
    assert "switching back" in switches[1].getMessage()
    assert pieces[0] == "Hello, this is the engine speaking."  # listeners hear pieces from both voices
    assert "Sorry, the line is noisy today." in pieces
    assert chain.active_streams == 0 and orpheus.active_streams == 0
    await orpheus.aclose()


async def test_full_engine_sends_the_reply_to_the_cpu_voice(
    running_engine: EngineProcess, cpu_voice: CpuVoiceTTS, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=SWITCH_LOG)
    orpheus = OrpheusTTS(OrpheusOptions(address=running_engine.address))
    chain = FallbackTTS(orpheus, cpu_voice, FallbackOptions(probe_interval_s=0.1))
    await chain.warm_up()
    client = EngineClient(running_engine.address)
    await client.connect()
    held = [client.open_stream() for _ in range(running_engine.max_streams)]
    for s in held:
        await s.push_text("Keep this stream busy for a while, please.")
    voice, seconds = await _speak(chain, "Your order is on its way.")
    assert voice is cpu_voice and seconds > 0.5
    assert any("full" in r.getMessage() for r in caplog.records if r.name == SWITCH_LOG)
    for s in held:
        await s.cancel()
    await client.close()
    assert await _wait_for(lambda: not chain.using_fallback), "did not switch back once the engine had room"
    await orpheus.aclose()


def test_formats_must_match(cpu_voice: CpuVoiceTTS) -> None:
    orpheus = OrpheusTTS(OrpheusOptions(address="unix:///tmp/none.sock"))
    orpheus._sample_rate = 16000  # a primary at another rate cannot be spliced with the CPU voice
    with pytest.raises(ValueError, match="must match"):
        FallbackTTS(orpheus, cpu_voice)


async def test_a_refused_text_goes_to_the_cpu_voice_without_switching(
    running_engine: EngineProcess, cpu_voice: CpuVoiceTTS, caplog: pytest.LogCaptureFixture
) -> None:
    """The engine refuses this reply (unknown voice): the CPU voice speaks it; the next one tries Orpheus."""
    caplog.set_level(logging.INFO, logger=SWITCH_LOG)
    orpheus = OrpheusTTS(OrpheusOptions(address=running_engine.address, voice="nobody"))
    chain = FallbackTTS(orpheus, cpu_voice)
    voice, seconds = await _speak(chain, "Your order is on its way.")
    assert voice is cpu_voice and seconds > 0.5
    assert not chain.using_fallback and chain.switches == 0
    assert not [r for r in caplog.records if r.name == SWITCH_LOG]
    assert chain.order()[0] is orpheus
    await orpheus.aclose()
