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
from plugins.whisper.stream import turn_text
from turn_detection import Profile, TurnOptions, build_turn_handling

from .session_io import MIC_RATE, PacedSpeaker, ScriptedMic
from .test_session_interruptions import RecordingAgent

pytestmark = pytest.mark.slow

whisper = pytest.importorskip("plugins.whisper")


def _speech(voice: CpuVoice, text: str) -> np.ndarray:
    return soxr.resample(voice.synthesize(text), 24000, MIC_RATE).astype(np.int16)


def _words(text: str) -> list[str]:
    return "".join(c if c.isalnum() or c == " " else " " for c in text.lower()).split()


@pytest.mark.parametrize("whole_turn", [False, True], ids=["fragment-finals", "whole-turn-finals"])
async def test_hesitation_mid_sentence_gives_one_turn(whole_turn: bool) -> None:
    """With whole-turn finals the second half's FINAL is the whole sentence decoded again; the turn hooks
    make it replace the first half's FINAL, so the agent still sees each word once."""
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
    streaming = whisper.StreamingOptions(context_gap_s=3.0 if whole_turn else 0.0, whole_turn=whole_turn)
    stt = whisper.WhisperSTT(whisper.WhisperSTTOptions(streaming=streaming))
    stt.prewarm()
    session = AgentSession(stt=stt, **setup.session_kwargs)
    setup.attach(session)
    whole_turns: list[str] = []
    setup.hooks.transcript_listeners.append(
        lambda ev: whole_turns.append(whole) if (whole := turn_text(ev)) else None
    )
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
    assert words.count("table") == 1, agent.user_turns  # the first half is not repeated
    assert bool(whole_turns) is whole_turn, whole_turns  # the second half came as the whole sentence
    assert words.index("table") < words.index("people")  # both halves, in order, in the one turn
    assert setup.detector.last_decision is not None
