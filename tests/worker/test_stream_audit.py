"""A call's end checks that every speech stream it opened is closed (the room load's `leaked_streams`)."""

from __future__ import annotations

import asyncio
import json
import logging
from types import SimpleNamespace

import pytest

from benchmarks.load_room import stream_audits
from plugins.cpu_voice import CpuVoiceTTS
from worker.call import audit_open_streams, open_streams


class _ClosedSession:
    """Stands in for an AgentSession the framework has already closed (its aclose is a no-op)."""

    async def aclose(self) -> None:
        return None


def _audit_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == "call ended"]


async def test_a_synthesis_stream_left_open_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    tts = CpuVoiceTTS()
    comp = SimpleNamespace(stt=None, tts=tts)
    stream = tts.stream()
    stream.push_text("Hello there, this reply is still being spoken when the call ends.")
    stream.flush()
    first = await asyncio.wait_for(stream.__anext__(), timeout=30)  # synthesis is under way
    assert first.frame.samples_per_channel > 0
    assert open_streams(comp) == {"open_stt_streams": 0, "open_tts_streams": 1}

    with caplog.at_level(logging.INFO, logger="parley.worker"):
        await audit_open_streams(_ClosedSession(), comp)
    [leak] = _audit_records(caplog)
    assert leak.levelno == logging.WARNING and leak.open_tts_streams == 1  # type: ignore[attr-defined]
    assert leak.voice_cpu_s > 0  # type: ignore[attr-defined]  # what the voice cost the call, counted apart

    await stream.aclose()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="parley.worker"):
        await audit_open_streams(_ClosedSession(), comp)
    [clean] = _audit_records(caplog)
    assert clean.levelno == logging.INFO and clean.open_tts_streams == 0  # type: ignore[attr-defined]


def test_the_load_benchmark_reads_the_audit_lines_of_the_worker_log() -> None:
    lines = [
        json.dumps({"message": "call started", "level": "INFO"}),
        json.dumps({"message": "call ended", "open_stt_streams": 0, "open_tts_streams": 0}),
        "not json: a line from a child process",
        json.dumps(
            {"message": "call ended", "open_stt_streams": 1, "open_tts_streams": 2, "voice_cpu_s": 1.5}
        ),
        json.dumps({"message": "call ended", "level": "INFO"}),  # another logger's line of the same text
    ]
    audits = stream_audits("\n".join(lines))
    assert audits == [
        {"open_stt_streams": 0, "open_tts_streams": 0},
        {"open_stt_streams": 1, "open_tts_streams": 2, "voice_cpu_s": 1.5},
    ]
    assert stream_audits("") == []
