"""The whole pipeline through a real AgentSession (offline harness: scripted mic, real-time loudspeaker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.call import run_one
from tests.conftest import SHORT_REPLIES
from worker.settings import load_settings

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def llm_url(embedded_llm_url: str) -> str:
    return embedded_llm_url


async def test_parley_call_answers_every_turn(llm_url: str, speech_audio: Path) -> None:
    turns = sorted((speech_audio / "conversation").glob("*.wav"))[:2]
    res = await run_one("parley", load_settings(**SHORT_REPLIES), llm_url, turns)
    assert res.greeting_first_audio_ms is not None
    assert not res.errors, res.errors
    for tr in res.turns:
        assert not tr.error, tr.error
        assert tr.v2v_ms is not None and tr.v2v_ms > 0
        assert tr.reply_text.strip()
    heard = " ".join(t.user_text.lower() for t in res.turns)
    assert "cleaning" in heard and "wednesday" in heard


async def test_stock_pipeline_runs_the_same_script(llm_url: str, speech_audio: Path) -> None:
    turns = sorted((speech_audio / "conversation").glob("*.wav"))[:1]
    res = await run_one("stock", load_settings(**SHORT_REPLIES), llm_url, turns)
    assert res.turns[0].v2v_ms is not None
    assert "cleaning" in res.turns[0].user_text.lower()


async def test_dead_llm_gets_a_spoken_apology_and_the_call_goes_on(speech_audio: Path) -> None:
    turns = sorted((speech_audio / "conversation").glob("*.wav"))[:2]
    res = await run_one("parley", load_settings(**SHORT_REPLIES), "http://127.0.0.1:9/v1", turns)
    for tr in res.turns:
        assert tr.v2v_ms is not None, "the caller heard nothing"
        assert "sorry" in tr.reply_text.lower()


async def test_a_listed_word_reaches_the_agent_spelled_as_listed(llm_url: str, tmp_path: Path) -> None:
    """The `stt_vocabulary` option through the worker's own pipeline and a real AgentSession: the caller's
    turn, as the LLM reads it, spells the drug as listed (without it tiny.en writes "listen-op role")."""
    import numpy as np
    import soundfile as sf

    from tests.answer_audio import RATE, quiet, said

    wav = tmp_path / "refill.wav"
    sf.write(wav, np.concatenate([quiet(0.5), said("I need a refill of my Lisinopril."), quiet(0.5)]), RATE)
    settings = load_settings(stt_vocabulary="Okonkwo, Lisinopril, Harrowgate Road", **SHORT_REPLIES)
    res = await run_one("parley", settings, llm_url, [wav])
    assert not res.errors, res.errors
    assert "Lisinopril" in res.turns[0].user_text
