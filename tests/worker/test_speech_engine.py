"""The worker's host speech engine: a real engine process, killed and restarted under a real client."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from plugins.whisper.engine_client import SpeechClientOptions, SpeechEngineClient
from plugins.whisper.model import PRIORITY_FINAL, PRIORITY_PARTIAL, DecodeRequest
from worker.speech_engine import HostSpeechEngine, HostSpeechEngineOptions, ask_capacity

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


class DeafFirst(HostSpeechEngine):
    """The first engine is the fault double tests/worker/deaf_engine.py (answers `hello`, never decodes);
    the keeper's restarts start the real one."""

    spawned = 0
    busy = False

    def _command(self) -> list[str]:
        self.spawned += 1
        if self.spawned == 1:
            flags = ["--busy"] if self.busy else []
            return [sys.executable, "-m", "tests.worker.deaf_engine", *flags, "--address", self.address]
        return super()._command()


async def _final_through_a_frozen_engine(
    engine: HostSpeechEngine, audio: np.ndarray, freeze: Any, thaw: Any = None
) -> tuple[float, float, str, list[bool]]:
    """A turn's partial, the engine frozen (`freeze()`), the caller's final: (seconds from the final to the
    hold, seconds from `thaw()` or the keeper's restart to the transcript, the transcript, outage changes)."""
    client = SpeechEngineClient(SpeechClientOptions(engine.address, secret="k", wait_s=30, retry_s=0.05))
    changes: list[tuple[bool, float]] = []
    client.add_listener(lambda down: changes.append((down, time.monotonic())))
    partial = DecodeRequest(priority=PRIORITY_PARTIAL, window_s=10)
    with contextlib.suppress(Exception):  # the deaf double never answers it
        await asyncio.wait_for(client.transcribe(audio[: len(audio) // 2], partial), 0.8)
    freeze()
    task = asyncio.create_task(client.transcribe(audio, DecodeRequest(priority=PRIORITY_FINAL, window_s=10)))
    sent = time.monotonic()
    thawed = 0.0
    if thaw is not None:
        await asyncio.sleep(2.0)
        thawed = time.monotonic()
        thaw()
    result = await task
    done = time.monotonic()
    await client.aclose()
    assert changes and changes[0][0], "the caller was told to hold"
    back = thawed or engine.ready_at
    return changes[0][1] - sent, done - back, result.text, [down for down, _ in changes]


async def test_a_stopped_engine_means_one_hold_line_and_the_transcript_after_sigcont(
    host_engine: HostSpeechEngine, speech_audio: Path
) -> None:
    audio = words(speech_audio, "a01")
    pid = host_engine.pid
    assert pid is not None
    hold_s, back_s, text, changes = await _final_through_a_frozen_engine(
        host_engine, audio, lambda: os.kill(pid, signal.SIGSTOP), lambda: os.kill(pid, signal.SIGCONT)
    )
    assert hold_s <= 1.5, f"hold line {hold_s:.2f} s after the caller's turn ended"
    assert back_s <= 2.0, f"transcript {back_s:.2f} s after SIGCONT"
    assert "pizza" in text.lower() and changes == [True, False]
    assert host_engine.restarts == 0  # thawed before the keeper's stall_s: the same engine answered


async def test_a_stopped_engine_is_restarted_by_its_keeper(tmp_path: Path, speech_audio: Path) -> None:
    engine = HostSpeechEngine(
        HostSpeechEngineOptions(
            address=f"unix://{tmp_path}/stt.sock", cpu_threads=1, workers=1, secret="k", stall_s=2.0
        )
    )
    engine.start()
    try:
        pid = engine.pid
        assert pid is not None
        hold_s, back_s, text, changes = await _final_through_a_frozen_engine(
            engine, words(speech_audio, "a01"), lambda: os.kill(pid, signal.SIGSTOP)
        )
        assert engine.restarts == 1 and engine.pid != pid
    finally:
        engine.close()
    assert hold_s <= 1.5, f"hold line {hold_s:.2f} s after the caller's turn ended"
    assert back_s <= 2.0, f"transcript {back_s:.2f} s after the restart"
    assert "pizza" in text.lower() and changes == [True, False]


async def test_an_engine_that_answers_hello_but_never_decodes_is_restarted(
    tmp_path: Path, speech_audio: Path
) -> None:
    engine = DeafFirst(
        HostSpeechEngineOptions(address=f"unix://{tmp_path}/stt.sock", cpu_threads=1, workers=1, stall_s=2.0)
    )
    engine.start()
    try:
        path = str(tmp_path / "stt.sock")
        assert ask_capacity(path, "", 2.0)["stalled_s"] == 0.0  # it answers: a process check sees nothing
        hold_s, back_s, text, changes = await _final_through_a_frozen_engine(
            engine, words(speech_audio, "a01"), lambda: None
        )
        assert engine.restarts == 1 and engine.spawned == 2
    finally:
        engine.close()
    assert hold_s <= 1.5, f"hold line {hold_s:.2f} s after the caller's turn ended"
    assert back_s <= 2.0, f"transcript {back_s:.2f} s after the restart"
    assert "pizza" in text.lower() and changes == [True, False]


def test_the_liveness_probe_needs_a_real_decode(
    host_engine: HostSpeechEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deploy.healthcheck import check

    monkeypatch.setenv("PARLEY_ENGINE_SECRET", "k")
    assert check(host_engine.address) is None
    deaf = DeafFirst(HostSpeechEngineOptions(address=f"unix://{tmp_path}/deaf.sock", stall_s=60.0))
    deaf.start()
    try:
        problem = check(deaf.address, timeout_s=1.0)  # hello and capacity answered: a decode is not
    finally:
        deaf.close()
    assert problem is not None and "no decode answer within 1.0 s" in problem


async def test_an_engine_that_is_slow_but_working_is_not_restarted(tmp_path: Path) -> None:
    """A starved host's engine finishes nothing within stall_s but burns CPU: a restart would only cost
    every call its decodes and the host a model load, so the keeper leaves it alone."""
    engine = DeafFirst(HostSpeechEngineOptions(address=f"unix://{tmp_path}/stt.sock", stall_s=1.0))
    engine.busy = True
    engine.start()
    try:
        client = SpeechEngineClient(SpeechClientOptions(engine.address, wait_s=60))
        task = asyncio.create_task(
            client.transcribe(np.zeros(16000, np.float32), DecodeRequest(priority=PRIORITY_FINAL))
        )
        await asyncio.sleep(5.0)  # five times stall_s with a decode that never ends
        assert engine.spawned == 1 and engine.restarts == 0 and not task.done()  # not even begun
        task.cancel()
        await client.aclose()
    finally:
        engine.close()


async def test_a_slow_engine_is_given_twice_its_recent_answers_before_a_hold_line(
    host_engine: HostSpeechEngine, speech_audio: Path
) -> None:
    """A starved host answers in seconds: that is slowness the caller already lives with, not an outage,
    so no hold line until twice the slowest recent answer has passed."""
    client = SpeechEngineClient(SpeechClientOptions(host_engine.address, secret="k", wait_s=30))
    changes: list[bool] = []
    client.add_listener(changes.append)
    audio = words(speech_audio, "a01")
    pid = host_engine.pid
    assert pid is not None

    async def paused(request: DecodeRequest, stop_s: float) -> str:
        task = asyncio.create_task(client.transcribe(audio, request))
        await asyncio.sleep(0.05)
        os.kill(pid, signal.SIGSTOP)
        await asyncio.sleep(stop_s)
        os.kill(pid, signal.SIGCONT)
        return (await task).text

    assert "pizza" in (await paused(DecodeRequest(priority=PRIORITY_PARTIAL, window_s=10), 1.8)).lower()
    assert "pizza" in (await paused(DecodeRequest(priority=PRIORITY_FINAL, window_s=10), 2.5)).lower()
    assert changes == []  # the floor (1.35 s for this audio) alone would have said a hold line
    await client.aclose()
