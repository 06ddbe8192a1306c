"""No transcripts or secrets in the logs unless a setting says so."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from benchmarks.call import build_parley
from simulator.offline import run_call
from tests.conftest import SHORT_REPLIES
from worker.settings import load_settings

pytestmark = pytest.mark.slow


def _logged(records: list[logging.LogRecord]) -> str:
    parts = []
    for r in records:
        parts.append(r.getMessage())
        parts.extend(
            str(v)
            for k, v in r.__dict__.items()
            if k not in logging.LogRecord("", 0, "", 0, "", (), None).__dict__
        )
    return "\n".join(parts).lower()


async def test_transcripts_are_logged_only_when_enabled(
    embedded_llm_url: str,
    speech_audio: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two calls at once, one with the setting on: only its words reach the log (each call says different
    words, so the log shows whose were written)."""
    monkeypatch.setenv("PARLEY_LLM_API_KEY", "sk-very-secret-value")
    caplog.set_level(logging.INFO)
    sessions = []
    for enabled in (True, False):
        monkeypatch.setenv("PARLEY_LOG_TRANSCRIPTS", str(enabled).lower())
        sessions.append(build_parley(load_settings(**SHORT_REPLIES), embedded_llm_url)[:2])
    turns = [speech_audio / "conversation" / "c1.wav", speech_audio / "conversation" / "c2.wav"]
    logged, quiet = await asyncio.gather(
        *(
            run_call("parley", session, agent, [turn])
            for (session, agent), turn in zip(sessions, turns, strict=True)
        )
    )
    assert "cleaning" in logged.turns[0].user_text.lower()  # the words were heard...
    assert "wednesday" in quiet.turns[0].user_text.lower()
    assert "sk-very-secret-value" not in _logged(caplog.records)
    lines = [
        (r.__dict__["role"], r.__dict__["text"]) for r in caplog.records if r.name == "parley.transcripts"
    ]
    users = [text.lower() for role, text in lines if role == "user"]
    # ...and logged when asked, never otherwise: only the logged caller's lines, and no more replies than a
    # greeting plus one per caller line (that call's own reply may name any day, so whose lines is counted)
    assert users and "cleaning" in " ".join(users), lines
    assert not any("wednesday" in text or "lunch" in text for text in users), lines
    assert sum(role == "assistant" for role, _ in lines) <= len(users) + 1, lines
    others = _logged([r for r in caplog.records if r.name != "parley.transcripts"])
    assert "wednesday" not in others and "lunch" not in others
