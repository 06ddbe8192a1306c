"""End of turn through a real AgentSession with Parley's streaming Whisper STT (manual flush path).

The caller hesitates mid-sentence for 1 s ("I'd like to book a table for, ... four people at seven."): the
session flushes the STT in the pause and gets a FINAL for the first half; the detector must hold the turn
open so the agent sees one whole sentence, not two.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import soxr
from livekit.agents import AgentSession

from plugins.cpu_voice.voice import CpuVoice
from turn_detection import Profile, TurnOptions, build_turn_handling

from .session_io import MIC_RATE, PacedSpeaker, ScriptedMic
from .test_session_interruptions import RecordingAgent

pytestmark = pytest.mark.slow

whisper = pytest.importorskip("plugins.whisper")


def _speech(voice: CpuVoice, text: str) -> np.ndarray:
    return soxr.resample(voice.synthesize(text), 24000, MIC_RATE).astype(np.int16)


def _words(text: str) -> list[str]:
    return "".join(c if c.isalnum() or c == " " else " " for c in text.lower()).split()


async def test_hesitation_mid_sentence_gives_one_turn() -> None:
    voice = CpuVoice()
    silence = lambda s: np.zeros(int(s * MIC_RATE), dtype=np.int16)  # noqa: E731
    track = np.concatenate(
        [
            silence(0.5),
            _speech(voice, "I'd like to book a table for,"),
            silence(1.0),
            _speech(voice, "four people at seven."),
            silence(4.0),
        ]
    )
    setup = build_turn_handling(TurnOptions(), Profile.WEB)
    stt = whisper.WhisperSTT()
    stt.prewarm()
    session = AgentSession(stt=stt, **setup.session_kwargs)
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
    assert len(agent.user_turns) == 1, agent.user_turns
    words = _words(agent.user_turns[0])
    assert {"table", "people"} <= set(words)
    assert words.index("table") < words.index("people")  # both halves, in order, in the one turn
    assert setup.detector.last_decision is not None
