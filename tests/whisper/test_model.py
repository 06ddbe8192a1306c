"""Model resolution, the one-line errors, and the runner's scheduling (priorities, no event-loop blocking)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from plugins.whisper.model import (
    PRIORITY_FINAL,
    PRIORITY_PARTIAL,
    DecodeRequest,
    DecodeResult,
    ModelOptions,
    WhisperModelError,
    WhisperModelRunner,
    bundled_model_path,
    download_model,
    encoder_frames,
    max_new_tokens,
    resolve_model_path,
    shared_runner,
)


def test_bundled_model_is_the_offline_default() -> None:
    path = resolve_model_path("tiny.en")
    assert path == bundled_model_path()
    assert (path / "model.bin").is_file()
    assert resolve_model_path("") == path
    # download_model is a no-op for the bundled model and for local folders (download-files on any host)
    assert download_model("tiny.en", progress=False) == path
    assert download_model(str(path), progress=False) == path


def test_local_folder_is_used_as_is(tmp_path: Path) -> None:
    assert resolve_model_path(str(bundled_model_path())) == bundled_model_path()
    with pytest.raises(WhisperModelError, match="not a CTranslate2 Whisper folder"):
        resolve_model_path(str(tmp_path))


def test_unknown_or_missing_models_give_one_line_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(WhisperModelError, match="unknown Whisper model") as e:
        resolve_model_path("tiny.xx")
    assert "\n" not in str(e.value)
    with pytest.raises(WhisperModelError, match="not downloaded; run the worker's download-files") as e:
        resolve_model_path("small.en", download_root=str(tmp_path))
    assert "\n" not in str(e.value)


def test_short_window_and_token_budget() -> None:
    assert encoder_frames(3 * 16000, 10) == 1000  # the window asked for
    assert encoder_frames(12 * 16000, 10) == 1700  # audio + 5 s of padding
    assert encoder_frames(26 * 16000, 10) is None  # Whisper's standard 30 s
    assert encoder_frames(3 * 16000, 30) is None
    assert max_new_tokens(16000 * 3) == 40
    assert max_new_tokens(16000 * 100) == 440


def test_shared_runner_is_one_per_options() -> None:
    a = shared_runner(ModelOptions(cpu_threads=1))
    assert shared_runner(ModelOptions(cpu_threads=1)) is a
    assert shared_runner(ModelOptions(cpu_threads=2)) is not a


class RecordingRunner(WhisperModelRunner):
    """The real scheduler with the model call replaced by a timed stand-in that records the order."""

    def __init__(self) -> None:
        super().__init__(ModelOptions(num_workers=1))
        self.order: list[str] = []
        self.gate = threading.Event()

    def decode(self, audio: np.ndarray, request: DecodeRequest) -> DecodeResult:
        self.gate.wait(5)
        self.order.append(request.initial_prompt or "")
        time.sleep(0.01)
        return DecodeResult((), "en", len(audio) / 16000, 0.01)


async def test_final_decodes_jump_the_queue_and_the_loop_stays_free() -> None:
    runner = RecordingRunner()
    audio = np.zeros(1600, dtype=np.float32)

    def req(name: str, priority: int) -> DecodeRequest:
        return DecodeRequest(initial_prompt=name, priority=priority)

    first = asyncio.create_task(runner.transcribe(audio, req("a", PRIORITY_PARTIAL)))
    await asyncio.sleep(0.05)  # "a" is now running (blocked on the gate)
    rest = [
        asyncio.create_task(runner.transcribe(audio, req("b", PRIORITY_PARTIAL))),
        asyncio.create_task(runner.transcribe(audio, req("c", PRIORITY_PARTIAL))),
        asyncio.create_task(runner.transcribe(audio, req("final", PRIORITY_FINAL))),
    ]
    ticks = 0
    for _ in range(5):  # the event loop keeps running while the model is busy
        await asyncio.sleep(0.01)
        ticks += 1
    assert ticks == 5 and not first.done()
    runner.gate.set()
    await asyncio.gather(first, *rest)
    assert runner.order == ["a", "final", "b", "c"]
    # a cancelled request that has not started is skipped
    runner.gate.clear()
    busy = asyncio.create_task(runner.transcribe(audio, req("busy", PRIORITY_PARTIAL)))
    await asyncio.sleep(0.05)
    dropped = asyncio.create_task(runner.transcribe(audio, req("dropped", PRIORITY_PARTIAL)))
    await asyncio.sleep(0.01)
    dropped.cancel()
    runner.gate.set()
    await busy
    await asyncio.sleep(0.05)
    assert "dropped" not in runner.order
    runner.close()
    with pytest.raises(WhisperModelError, match="closed"):
        await runner.transcribe(audio, req("late", PRIORITY_FINAL))
