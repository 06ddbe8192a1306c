"""Korean turns through a real AgentSession: real Korean speech (espeak-ng) through the real VAD, the v1-mini
audio model and Parley's detector with its Korean tables and v1-mini's Korean threshold.

The words come from ScriptedSTT, a test double at the one boundary this machine cannot reach: no multilingual
Whisper model is available offline (tiny.en is English-only), so the STT's text is scripted while its timing
still comes from the audio.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import numpy as np
import pytest
import soundfile as sf
import soxr
from livekit.agents import AgentSession

from turn_detection import Profile, TurnOptions, build_turn_handling

from .session_io import MIC_RATE, PacedSpeaker, ScriptedMic, ScriptedSTT, ScriptLine
from .test_session_interruptions import RecordingAgent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng (scripts/setup_system.sh)"),
]


def korean_speech(text: str) -> np.ndarray:
    import io

    wav = subprocess.run(["espeak-ng", "-v", "ko", "--stdout", text], check=True, capture_output=True).stdout
    audio, sr = sf.read(io.BytesIO(wav), dtype="float32")
    audio = soxr.resample(audio, sr, MIC_RATE)
    return (audio / np.max(np.abs(audio)) * 0.5 * 32767).astype(np.int16)


def silence(s: float) -> np.ndarray:
    return np.zeros(int(s * MIC_RATE), dtype=np.int16)


async def _turns(track: np.ndarray, script: list[ScriptLine]) -> list[str]:
    setup = build_turn_handling(TurnOptions(language="ko"), Profile.WEB)
    session = AgentSession(stt=ScriptedSTT(script, language="ko"), **setup.session_kwargs)
    setup.attach(session)
    session.input.audio = ScriptedMic(track)
    speaker = PacedSpeaker()
    session.output.audio = speaker
    agent = RecordingAgent(setup)
    await session.start(agent)
    try:
        await asyncio.sleep(len(track) / MIC_RATE + 1.0)
    finally:
        await session.aclose()
        await speaker.aclose()
    return agent.user_turns


async def test_a_korean_turn_commits_and_a_connective_ending_holds_it_open() -> None:
    first, second = "예약을 내일로 바꾸고", "싶어요."
    done = "전화번호가 어떻게 되세요?"
    track = np.concatenate(
        [
            silence(0.4),
            korean_speech(first),
            silence(1.0),  # mid-sentence pause after a connective ending (-고): not the end of the turn
            korean_speech(second),
            silence(3.0),
            korean_speech(done),
            silence(3.0),
        ]
    )
    script = [ScriptLine(first, first), ScriptLine(second, second), ScriptLine(done, done)]
    turns = await _turns(track, script)
    assert len(turns) == 2, turns
    assert first in turns[0] and second in turns[0]
    assert turns[1] == done
