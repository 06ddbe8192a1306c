"""The worker's host speech engine: a real engine process, killed and restarted under a real client."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from plugins.whisper.engine_client import SpeechClientOptions, SpeechEngineClient
from plugins.whisper.model import PRIORITY_FINAL, PRIORITY_PARTIAL, DecodeRequest
from worker.speech_engine import HostSpeechEngine, HostSpeechEngineOptions

pytestmark = pytest.mark.slow


@pytest.fixture
def host_engine(tmp_path: Path) -> Iterator[HostSpeechEngine]:
    engine = HostSpeechEngine(
        HostSpeechEngineOptions(address=f"unix://{tmp_path}/stt.sock", cpu_threads=1, workers=1, secret="k")
    )
    engine.start()
    yield engine
    engine.close()


def words(speech_audio: Path, name: str) -> np.ndarray:
    data, _ = sf.read(str(speech_audio / "asr" / f"{name}.wav"), dtype="float32")
    return np.asarray(data, dtype=np.float32)


async def test_killed_engine_is_restarted_and_a_waiting_final_is_decoded(
    host_engine: HostSpeechEngine, speech_audio: Path
) -> None:
    client = SpeechEngineClient(SpeechClientOptions(host_engine.address, secret="k", wait_s=30, retry_s=0.05))
    changes: list[tuple[bool, float]] = []
    client.add_listener(lambda down: changes.append((down, time.monotonic())))
    audio = words(speech_audio, "a01")
    before = await client.transcribe(audio, DecodeRequest(priority=PRIORITY_FINAL, window_s=10))
    assert "pizza" in before.text.lower()
    first_pid = host_engine.pid
    assert first_pid is not None
    os.kill(first_pid, signal.SIGKILL)  # mid-call: the engine dies without a word
    await asyncio.sleep(0.05)
    with pytest.raises(Exception, match="speech engine"):  # a partial does not wait
        await client.transcribe(audio, DecodeRequest(priority=PRIORITY_PARTIAL, window_s=10))
    after = await client.transcribe(audio, DecodeRequest(priority=PRIORITY_FINAL, window_s=10))
    done = time.monotonic()
    assert after.text == before.text
    assert host_engine.restarts == 1 and host_engine.pid != first_pid
    assert done - host_engine.ready_at < 2.0, "transcripts again within 2 s of the restart"
    assert [down for down, _ in changes] == [True, False]  # one outage: one hold line
    await client.aclose()


def test_close_stops_the_engine_and_leaves_no_socket(tmp_path: Path) -> None:
    engine = HostSpeechEngine(HostSpeechEngineOptions(address=f"unix://{tmp_path}/e.sock", workers=1))
    engine.start()
    pid = engine.pid
    assert pid is not None and (tmp_path / "e.sock").exists()
    engine.close()
    assert not (tmp_path / "e.sock").exists()  # it closed itself (stdin closed), not killed
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_process_group_sigterm_leaves_the_supervised_engine_to_the_worker(tmp_path: Path) -> None:
    """`kill -TERM -<worker group>` reaches the engine too; it must not die (and be restarted) under a
    worker that is itself shutting down: the worker stops it."""
    engine = HostSpeechEngine(HostSpeechEngineOptions(address=f"unix://{tmp_path}/g.sock", workers=1))
    engine.start()
    try:
        pid = engine.pid
        assert pid is not None
        os.kill(pid, signal.SIGTERM)
        time.sleep(0.5)
        assert engine.pid == pid and engine.restarts == 0
        os.kill(pid, 0)  # still alive
    finally:
        engine.close()
