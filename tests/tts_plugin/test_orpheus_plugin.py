"""OrpheusTTS through a real engine server process on CPU: streaming, whole texts, barge-in, engine fill."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from livekit.agents import APIConnectOptions, tts
from livekit.agents.metrics import TTSMetrics

from plugins.orpheus.capacity import configure_engine_fill, engine_fill, query_capacity
from plugins.orpheus.client import EngineClient
from plugins.orpheus.tts import DEFAULT_ADDRESS, EngineUnavailableError, OrpheusOptions, OrpheusTTS
from plugins.text_chunker import split_text

from .conftest import EngineProcess

REPLY = "Sure, I can help with that. Your table is booked for seven."
NO_RETRY = APIConnectOptions(max_retry=0, timeout=30.0)


def _tokens(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def _active_streams(address: str) -> int:
    client = EngineClient(address)
    await client.connect()
    try:
        return int((await client.capacity())["active_streams"])
    finally:
        await client.close()


@pytest.mark.slow
async def test_stream_speaks_llm_tokens_piece_by_piece(running_engine: EngineProcess) -> None:
    voice = OrpheusTTS(OrpheusOptions(address=running_engine.address))
    pieces: list[str] = []
    voice.piece_listeners.append(pieces.append)
    metrics: list[TTSMetrics] = []
    voice.on("metrics_collected", metrics.append)
    await voice.warm_up()
    stream = voice.stream(conn_options=NO_RETRY)
    assert isinstance(stream, tts.SynthesizeStream)
    for token in _tokens(REPLY):
        stream.push_text(token)
        await asyncio.sleep(0.005)  # an LLM's pace: the first piece must leave before the reply ends
    stream.end_input()
    frames = [ev.frame async for ev in stream]
    await stream.aclose()
    assert frames and all(f.sample_rate == 24000 and f.num_channels == 1 for f in frames)
    audio = np.concatenate([np.frombuffer(f.data, dtype=np.int16) for f in frames])
    assert audio.size > 24000 * 0.2 and np.abs(audio).max() > 0
    # the first piece follows the chunker's rule; later ones may leave early when the listener is about
    # to run out (plugins.playout: the random test model's audio can be short); every word goes once
    assert pieces[0] == split_text(REPLY)[0]
    assert " ".join(pieces).split() == REPLY.split()
    assert stream.engine_ttfb_ms is not None and stream.piece_sent_at is not None
    assert metrics and metrics[0].ttfb > 0  # _mark_started was called: TTFB metrics flow
    assert voice.active_streams == 0
    await voice.aclose()


@pytest.mark.slow
async def test_first_piece_leaves_before_the_reply_is_complete(running_engine: EngineProcess) -> None:
    voice = OrpheusTTS(OrpheusOptions(address=running_engine.address))
    sent = asyncio.Event()
    voice.piece_listeners.append(lambda _p: sent.set())
    await voice.warm_up()
    stream = voice.stream(conn_options=NO_RETRY)
    stream.push_text("Yes of course, let me ")
    await asyncio.wait_for(sent.wait(), 2.0)  # the first clause left while the sentence is still coming
    stream.push_text("check that for you.")
    stream.end_input()
    async for _ in stream:
        pass
    await stream.aclose()
    await voice.aclose()


@pytest.mark.slow
async def test_synthesize_whole_text(running_engine: EngineProcess) -> None:
    voice = OrpheusTTS(OrpheusOptions(address=running_engine.address))
    frame = await voice.synthesize("Hello there. Good to hear from you.", conn_options=NO_RETRY).collect()
    assert frame.sample_rate == 24000 and frame.samples_per_channel > 0
    await voice.aclose()


async def test_aclose_cancels_engine_work_at_once(running_engine: EngineProcess) -> None:
    voice = OrpheusTTS(OrpheusOptions(address=running_engine.address))
    await voice.warm_up()
    stream = voice.stream(conn_options=NO_RETRY)
    stream.push_text("This is a long reply that would take the engine many seconds to finish speaking. " * 3)
    stream.end_input()
    await anext(aiter(stream))  # audio is playing
    assert await _active_streams(running_engine.address) == 1
    await stream.aclose()  # barge-in
    for _ in range(100):  # the cancel op left with aclose; the engine drops the stream on receipt
        if await _active_streams(running_engine.address) == 0:
            break
        await asyncio.sleep(0.01)
    assert await _active_streams(running_engine.address) == 0
    assert voice.active_streams == 0
    await voice.aclose()


async def test_unreachable_engine_is_a_connection_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    voice = OrpheusTTS(OrpheusOptions(address=f"unix://{tmp_path}/none.sock"))
    with pytest.raises(EngineUnavailableError) as err:
        await voice.synthesize("Hello there.", conn_options=NO_RETRY).collect()
    assert err.value.code == "unreachable"
    assert await voice.probe() == "unreachable"
    await voice.aclose()


def test_bad_address_is_one_line() -> None:
    with pytest.raises(ValueError, match="engine address must be"):
        OrpheusTTS(OrpheusOptions(address="http://127.0.0.1:1"))


async def test_probe_reports_full(running_engine: EngineProcess) -> None:
    voice = OrpheusTTS(OrpheusOptions(address=running_engine.address))
    assert await voice.probe() is None
    client = EngineClient(running_engine.address)
    await client.connect()
    held = [client.open_stream() for _ in range(running_engine.max_streams)]
    for s in held:
        await s.push_text("Hold this stream open for a while please.")
    assert await voice.probe() == "full"
    for s in held:
        await s.cancel()
    await client.close()
    await voice.aclose()


def test_engine_fill_reads_capacity(running_engine: EngineProcess, tmp_path) -> None:  # type: ignore[no-untyped-def]
    cap = query_capacity(running_engine.address)
    assert cap["ready"] is True and cap["max_streams"] == running_engine.max_streams
    configure_engine_fill(running_engine.address)
    assert engine_fill() == pytest.approx(cap["load"])
    configure_engine_fill(f"unix://{tmp_path}/none.sock")
    assert engine_fill() == 1.0  # an engine that cannot be asked is reported full
    configure_engine_fill(f"unix://{tmp_path}/none.sock", unreachable_fill=0.5)
    assert engine_fill() == 0.5  # ... unless the CPU voice may take the calls
    configure_engine_fill("")


def test_keyword_constructor_uses_the_default_engine_address() -> None:
    """`python -m caches build --tts plugins.orpheus.tts:OrpheusTTS` calls the class with `voice=` only."""
    voice = OrpheusTTS(voice="leo")
    assert voice.options.voice == "leo" and voice.options.address == DEFAULT_ADDRESS
    assert (voice.sample_rate, voice.num_channels, voice.capabilities.streaming) == (24000, 1, True)


def test_underruns_count_gaps_after_first_audio() -> None:
    from benchmarks.tts import count_underruns

    assert count_underruns([(0.0, 0.1), (0.05, 0.1), (0.15, 0.1)]) == 0  # always ahead of playback
    assert count_underruns([(0.0, 0.1), (0.3, 0.1), (0.35, 0.1)]) == 1  # one gap of 0.2 s


@pytest.mark.slow
async def test_slow_llm_text_loses_no_words(running_engine: EngineProcess) -> None:
    """An LLM slower than speech: pieces may leave mid-clause (plugins.playout); every word goes once."""
    voice = OrpheusTTS(OrpheusOptions(address=running_engine.address))
    pieces: list[str] = []
    voice.piece_listeners.append(pieces.append)
    await voice.warm_up()
    stream = voice.stream(conn_options=NO_RETRY)
    words = ["let", "me", "look", "at", "the", "calendar", "for", "the", "first", "open", "morning"]
    stream.push_text("Sure, I can help. ")
    for w in words:
        await asyncio.sleep(0.1)
        stream.push_text(w + " ")
    stream.push_text("next week.")
    stream.end_input()
    frames = [ev.frame async for ev in stream]
    await stream.aclose()
    await voice.aclose()
    assert frames
    assert " ".join(pieces).split() == ["Sure,", "I", "can", "help.", *words, "next", "week."]


async def test_engine_audio_advances_the_playout_clock() -> None:
    from plugins.orpheus.client import EngineEvent
    from plugins.orpheus.tts import OrpheusOptions, _pump_audio
    from plugins.playout import PlayoutClock

    class OneSecondReply:
        """The engine side of one reply as the client hands it over (socket test double): 1 s of audio."""

        final_event = EngineEvent("done", {"reason": "completed"})
        left = 10

        async def next_item(self, _timeout_s: float) -> bytes | None:
            self.left -= 1
            return b"\x00\x00" * 2400 if self.left >= 0 else None  # 100 ms at 24 kHz

    class Emitter:
        def __init__(self) -> None:
            self.pushed = 0

        def push(self, data: bytes) -> None:
            self.pushed += len(data)

    clock, emitter = PlayoutClock(), Emitter()
    opts = OrpheusOptions(address="unix:///unused.sock")
    final = await _pump_audio(OneSecondReply(), emitter, lambda: None, opts, clock)  # type: ignore[arg-type]
    assert final.type == "done" and emitter.pushed == 48000
    assert 0.95 < clock.dry_at - time.monotonic() <= 1.0
