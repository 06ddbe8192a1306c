"""The host speech engine with the real bundled tiny.en: batching, scheduling, its server, its client."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from plugins import wire
from plugins.whisper.batch import batch_key
from plugins.whisper.engine import DecodeDropped, EngineJob, SpeechEngine, SpeechEngineOptions
from plugins.whisper.engine_client import SpeechClientOptions, SpeechEngineClient, SpeechEngineUnavailable
from plugins.whisper.engine_server import SpeechServer, SpeechServerOptions
from plugins.whisper.model import (
    PRIORITY_FINAL,
    PRIORITY_PARTIAL,
    PRIORITY_PAUSE,
    DecodeRequest,
    DecodeResult,
    ModelOptions,
    WhisperModelRunner,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runner() -> Iterator[WhisperModelRunner]:
    r = WhisperModelRunner(ModelOptions(cpu_threads=1, num_workers=1))
    r.load()
    yield r


def speech(speech_audio: Path, name: str, seconds: float = 8.0) -> np.ndarray:
    data, sr = sf.read(str(speech_audio / "asr" / f"{name}.wav"), dtype="float32")
    assert sr == 16000
    return np.asarray(data[: int(seconds * sr)], dtype=np.float32)


@pytest.mark.parametrize("prompt", [None, "Um, uh, mm-hmm, uh-huh."])
def test_batched_decode_gives_what_single_decodes_give(
    runner: WhisperModelRunner, speech_audio: Path, prompt: str | None
) -> None:
    """With or without a style prompt (the worker's English default puts one on every decode)."""
    req = DecodeRequest(window_s=10, initial_prompt=prompt, priority=PRIORITY_PAUSE)  # words are read
    items = [(speech(speech_audio, f"a0{i}"), req) for i in (1, 2, 3, 4)]
    assert len({batch_key(len(a), r) for a, r in items}) == 1
    single = [runner.decode(a, r) for a, r in items]
    batched = runner.decode_batch(items)
    assert [b.text for b in batched] == [s.text for s in single]
    assert all(s.text for s in single)
    for s, b in zip(single, batched, strict=True):
        assert b.confidence == pytest.approx(s.confidence, abs=1e-3)
        assert b.segments[0].end == pytest.approx(s.segments[0].end)
        assert [w.text for w in b.words] == [w.text for w in s.words]
        assert s.words and s.text.strip().endswith(" ".join(w.text for w in s.words))  # the last words
        assert all(0.0 < w.probability <= 1.0 for w in s.words)
        assert b.last_word_probability == pytest.approx(s.last_word_probability, abs=1e-3)
    partial = runner.decode(items[0][0], replace(req, priority=PRIORITY_PARTIAL))
    assert partial.text and partial.words == ()  # nobody reads a partial's words: none are computed


def test_timestamps_decode_alone_and_only_one_prompt_shares_a_batch() -> None:
    audio = np.zeros(16000 * 3, dtype=np.float32)
    assert batch_key(len(audio), DecodeRequest(with_timestamps=True)) is None
    styled = batch_key(len(audio), DecodeRequest(initial_prompt="Um, uh."))
    assert styled is not None and styled == batch_key(len(audio), DecodeRequest(initial_prompt="Um, uh."))
    assert styled != batch_key(len(audio), DecodeRequest(initial_prompt="Um, uh. And earlier words"))
    assert styled != batch_key(len(audio), DecodeRequest())
    assert batch_key(len(audio), DecodeRequest(window_s=6)) == batch_key(
        len(audio), DecodeRequest(window_s=8)
    )


def _job(
    audio: np.ndarray, priority: int, stream: str, log: list[tuple[str, object]], name: str
) -> EngineJob:
    def done(result: DecodeResult | None, error: BaseException | None) -> None:
        log.append((name, result.text if result is not None else error))

    return EngineJob(audio, DecodeRequest(priority=priority, window_s=10), stream, done)


def test_finals_first_and_a_queued_partial_is_superseded(speech_audio: Path) -> None:
    engine = SpeechEngine(
        WhisperModelRunner(ModelOptions(cpu_threads=1, num_workers=1)), SpeechEngineOptions(max_batch=1)
    )
    a = speech(speech_audio, "a01", 3.0)
    log: list[tuple[str, object]] = []
    # queued before the engine runs, so the order they are taken in is the scheduler's alone
    engine.submit(_job(a, PRIORITY_PARTIAL, "s1", log, "s1-partial"))
    engine.submit(_job(a, PRIORITY_PARTIAL, "s2", log, "s2-partial"))
    engine.submit(_job(a, PRIORITY_FINAL, "s3", log, "s3-final"))
    engine.submit(_job(a, PRIORITY_FINAL, "s1", log, "s1-final"))  # supersedes s1's queued partial
    assert log[0][0] == "s1-partial" and isinstance(log[0][1], DecodeDropped)
    assert log[0][1].reason == "superseded"
    engine.start()
    try:
        for _ in range(200):
            if len(log) == 4:
                break
            import time

            time.sleep(0.05)
        assert [n for n, _ in log] == ["s1-partial", "s3-final", "s1-final", "s2-partial"]
        assert all(isinstance(t, str) and t for _, t in log[1:])
        assert engine.stats.superseded == 1 and engine.stats.decoded == 3
    finally:
        engine.close()


def test_concurrent_requests_share_batches(speech_audio: Path) -> None:
    engine = SpeechEngine(
        WhisperModelRunner(ModelOptions(cpu_threads=1, num_workers=1)), SpeechEngineOptions(max_batch=8)
    )
    a = speech(speech_audio, "a02", 4.0)
    log: list[tuple[str, object]] = []
    for i in range(6):  # different lengths, one encoder window (4 s + 5 s of padding < 10 s)
        engine.submit(_job(a[: int(16000 * (3.5 + i * 0.1))], PRIORITY_PARTIAL, f"s{i}", log, f"s{i}"))
    engine.start()
    try:
        import time

        for _ in range(200):
            if len(log) == 6:
                break
            time.sleep(0.05)
        assert all(isinstance(t, str) and t for _, t in log)
        assert engine.stats.batches == 1 and engine.stats.max_batch_seen == 6
    finally:
        engine.close()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[SpeechServer]:
    engine = SpeechEngine(
        WhisperModelRunner(ModelOptions(cpu_threads=1, num_workers=1)), SpeechEngineOptions(max_batch=4)
    )
    server = SpeechServer(engine, SpeechServerOptions(address=f"unix://{tmp_path}/stt.sock", secret="s3cret"))
    await server.start()
    yield server
    await server.close()


def client_for(server: SpeechServer, secret: str = "s3cret", **kw: float) -> SpeechEngineClient:
    # the wire, not the deadlines, is tested here (those: tests/worker/test_speech_engine.py); a busy
    # 2-core host can take seconds per decode
    kw = {"deadline_floor_s": 30.0, "wait_s": 60.0, **kw}
    return SpeechEngineClient(SpeechClientOptions(server.options.address, secret=secret, **kw))  # type: ignore[arg-type]


async def test_client_transcribes_through_the_engine(
    served: SpeechServer, runner: WhisperModelRunner, speech_audio: Path
) -> None:
    client = client_for(served)
    assert (await asyncio.to_thread(client.probe))["model"] == "tiny.en"
    assert client.multilingual is False
    audio = speech(speech_audio, "a03")
    request = DecodeRequest(priority=PRIORITY_FINAL, window_s=10)
    got = await client.transcribe(audio, request)
    # the wire carries int16: the same audio rounded the same way decodes to the same words
    pcm16 = (np.clip(audio, -1, 1) * 32767).astype(np.int16).astype(np.float32) / 32768.0
    alone = runner.decode(pcm16, request)
    assert got.text == alone.text
    # each word's probability crosses the wire (the end-of-turn policy reads the last one)
    assert [w.text for w in got.words] == [w.text for w in alone.words]
    assert got.last_word_probability == pytest.approx(alone.last_word_probability, abs=1e-3)
    timed = await client.transcribe(audio, DecodeRequest(with_timestamps=True, initial_prompt="pizza"))
    assert timed.text and timed.segments
    await client.aclose()


async def _raw(server: SpeechServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_unix_connection(server.path, limit=wire.MAX_FRAME)


async def _reply(reader: asyncio.StreamReader) -> dict[str, object]:
    kind, payload = await asyncio.wait_for(wire.read_frame(reader), 10)
    assert kind == wire.KIND_JSON
    return wire.parse_json(payload)


async def test_wrong_secret_is_refused_and_closed(served: SpeechServer) -> None:
    reader, writer = await _raw(served)
    writer.write(wire.json_frame({"op": "hello", "id": 1, "secret": "wrong"}))
    reply = await _reply(reader)
    assert reply["code"] == "unauthorized"
    assert await asyncio.wait_for(reader.read(), 5) == b""
    with pytest.raises(SpeechEngineUnavailable, match="refused"):
        await asyncio.to_thread(client_for(served, secret="nope").probe)


async def test_bad_messages_get_one_line_errors_and_the_engine_stays_up(
    served: SpeechServer, speech_audio: Path
) -> None:
    reader, writer = await _raw(served)
    writer.write(wire.json_frame({"op": "hello", "id": 1, "secret": "s3cret"}))
    assert (await _reply(reader))["ok"] is True
    bad = [
        struct.pack(">IB", 9, ord("J")) + b"not json",
        wire.json_frame({"op": "decode", "rid": 5, "beam_size": "wide"}),
        wire.json_frame({"op": "decode", "rid": 6, "window_s": 99}),
        wire.audio_frame(7, b"\x00\x01"),  # audio with no decode before it
        wire.json_frame({"op": "nonsense"}),
    ]
    for frame in bad:
        writer.write(frame)
        reply = await _reply(reader)
        assert reply["op"] == "error" and reply["code"] == "bad_request"
        assert "\n" not in str(reply["message"])
    # the same connection still decodes
    audio = (speech(speech_audio, "a04", 3.0) * 32767).astype(np.int16).tobytes()
    writer.write(wire.json_frame({"op": "decode", "rid": 8, "priority": 0}) + wire.audio_frame(8, audio))
    reply = await _reply(reader)
    assert reply["op"] == "result" and reply["segments"]
    # an oversized frame breaks the framing: one error, that connection closes, the engine serves others
    writer.write(struct.pack(">IB", wire.MAX_FRAME + 10, ord("A")))
    reply = await _reply(reader)
    assert reply["code"] == "bad_request" and "out of range" in str(reply["message"])
    assert await asyncio.wait_for(reader.read(), 5) == b""
    client = client_for(served)
    assert (await client.transcribe(speech(speech_audio, "a04", 3.0), DecodeRequest(priority=0))).text
    await client.aclose()


async def test_a_client_that_disconnects_cancels_its_queued_work(
    served: SpeechServer, speech_audio: Path
) -> None:
    reader, writer = await _raw(served)
    writer.write(wire.json_frame({"op": "hello", "id": 1, "secret": "s3cret"}))
    await _reply(reader)
    audio = (speech(speech_audio, "a05", 8.0) * 32767).astype(np.int16).tobytes()
    n = 24
    for rid in range(1, n + 1):  # different streams, so none supersedes another
        msg = {"op": "decode", "rid": rid, "stream": f"s{rid}", "priority": 2, "with_timestamps": True}
        writer.write(wire.json_frame(msg) + wire.audio_frame(rid, audio))
    await writer.drain()
    for _ in range(100):
        if served.engine.stats.submitted >= n:
            break
        await asyncio.sleep(0.02)
    writer.close()
    for _ in range(100):
        if served.engine.queued() == 0:
            break
        await asyncio.sleep(0.05)
    stats = served.engine.stats
    assert stats.cancelled > 0
    assert stats.decoded + stats.cancelled <= n and stats.decoded < n


async def test_a_cancelled_decode_is_cancelled_on_the_engine(
    served: SpeechServer, speech_audio: Path
) -> None:
    client = client_for(served)
    audio = speech(speech_audio, "a06", 8.0)
    tasks = [
        asyncio.create_task(client.transcribe(audio, DecodeRequest(with_timestamps=True, stream_id=f"x{i}")))
        for i in range(6)
    ]
    await asyncio.sleep(0.3)
    for t in tasks[1:]:
        t.cancel()
    assert (await tasks[0]).text
    for _ in range(100):
        if served.engine.queued() == 0:
            break
        await asyncio.sleep(0.05)
    assert served.engine.stats.cancelled >= 1
    await client.aclose()


async def test_partials_fail_fast_and_finals_wait_when_no_engine(tmp_path: Path) -> None:
    client = SpeechEngineClient(
        SpeechClientOptions(f"unix://{tmp_path}/none.sock", wait_s=0.3, retry_s=0.05, model_name="tiny.en")
    )
    seen: list[bool] = []
    client.add_listener(seen.append)
    audio = np.zeros(16000, dtype=np.float32)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(SpeechEngineUnavailable):
        await client.transcribe(audio, DecodeRequest(priority=PRIORITY_PARTIAL))
    assert loop.time() - t0 < 0.2 and seen == []
    with pytest.raises(SpeechEngineUnavailable):
        await client.transcribe(audio, DecodeRequest(priority=PRIORITY_FINAL))
    assert loop.time() - t0 >= 0.3 and seen == [True]
    assert client.multilingual is False  # not reachable: the model's name says English-only


def test_a_final_never_waits_in_a_batch_of_partials(speech_audio: Path) -> None:
    engine = SpeechEngine(
        WhisperModelRunner(ModelOptions(cpu_threads=1, num_workers=1)), SpeechEngineOptions(max_batch=8)
    )
    a = speech(speech_audio, "a03", 3.0)
    log: list[tuple[str, object]] = []
    for i in range(3):
        engine.submit(_job(a, PRIORITY_PARTIAL, f"p{i}", log, f"p{i}"))
    engine.submit(_job(a, PRIORITY_FINAL, "f", log, "final"))
    engine.submit(_job(a, PRIORITY_FINAL, "g", log, "final2"))
    engine.start()
    try:
        import time

        for _ in range(200):
            if len(log) == 5:
                break
            time.sleep(0.05)
        assert [n for n, _ in log][:2] == ["final", "final2"]  # the finals' batch, alone, first
        assert engine.stats.batches == 2 and engine.stats.max_batch_seen == 3
    finally:
        engine.close()


async def test_engine_socket_goes_in_a_private_folder_and_refuses_a_shared_one(tmp_path: Path) -> None:
    """The speech engine binds like the TTS engine: its folder made 0700 before bind; a folder anyone may
    write to is refused in one line (another user could have put their own socket there first)."""
    from plugins.local_socket import SocketDirError

    def engine() -> SpeechEngine:
        return SpeechEngine(
            WhisperModelRunner(ModelOptions(cpu_threads=1, num_workers=1)), SpeechEngineOptions()
        )

    private = tmp_path / "run" / "parley" / "stt.sock"
    server = SpeechServer(engine(), SpeechServerOptions(address=f"unix://{private}"))
    await server.start()
    try:
        assert (private.parent.stat().st_mode & 0o777) == 0o700 and private.is_socket()
        assert (private.stat().st_mode & 0o777) == 0o600  # the worker runs as the engine's user
    finally:
        await server.close()
    for mode, who in ((0o777, "everyone"), (0o770, "its group")):
        shared = tmp_path / f"shared-{mode:o}"
        shared.mkdir()
        shared.chmod(mode)
        server = SpeechServer(engine(), SpeechServerOptions(address=f"unix://{shared / 'stt.sock'}"))
        with pytest.raises(SocketDirError, match=f"writable by {who}"):
            await server.start()
        await server.close()
