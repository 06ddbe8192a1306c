"""No transcripts or secrets in the logs unless a setting says so."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from benchmarks.call import build_parley
from simulator.offline import run_call
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


@pytest.mark.parametrize("log_transcripts", [False, True])
async def test_transcripts_are_logged_only_when_enabled(
    embedded_llm_url: str,
    speech_audio: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    log_transcripts: bool,
) -> None:
    monkeypatch.setenv("PARLEY_LOG_TRANSCRIPTS", str(log_transcripts).lower())
    monkeypatch.setenv("PARLEY_LLM_API_KEY", "sk-very-secret-value")
    caplog.set_level(logging.INFO)
    session, agent, _ = build_parley(load_settings(), embedded_llm_url)
    res = await run_call("parley", session, agent, [speech_audio / "conversation" / "c1.wav"])
    assert "cleaning" in res.turns[0].user_text.lower()  # the words were heard...
    text = _logged(caplog.records)
    assert "sk-very-secret-value" not in text
    if log_transcripts:
        assert "cleaning" in text  # ...and logged when asked
    else:
        assert "cleaning" not in text and "teeth" not in text  # ...and never logged otherwise
