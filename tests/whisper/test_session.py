"""Integration: a real AgentSession (Silero VAD, VAD turn detection) feeding the streaming STT from a
scripted microphone, no room and no server. Checks the session receives interim and final transcripts and
STT usage metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from livekit.agents import Agent, AgentSession, metrics
from livekit.agents.voice.events import UserInputTranscribedEvent
from livekit.plugins import silero

from plugins.whisper.stt import WhisperSTT
from plugins.word_error import compare_form
from simulator.audio_io import ScriptedMic

pytestmark = pytest.mark.slow


async def test_agent_session_gets_interim_and_final_transcripts(speech_audio: Path) -> None:
    wav = speech_audio / "asr" / "a07.wav"
    pcm, sr = sf.read(str(wav), dtype="int16")
    assert sr == 16000
    whisper = WhisperSTT()
    whisper.prewarm()
    usage: list[float] = []

    def on_metrics(m: metrics.STTMetrics) -> None:
        usage.append(m.audio_duration)

    whisper.on("metrics_collected", on_metrics)
    session: AgentSession = AgentSession(
        stt=whisper,
        vad=silero.VAD.load(),
        turn_handling={
            "turn_detection": "vad",
            "interruption": {"enabled": False, "mode": "vad"},
            "preemptive_generation": {"enabled": False},
            "endpointing": {"min_delay": 0.3, "max_delay": 1.5},
        },
    )
    transcripts: list[UserInputTranscribedEvent] = []
    got_final = asyncio.Event()

    def on_transcribed(ev: UserInputTranscribedEvent) -> None:
        transcripts.append(ev)
        if ev.is_final and ev.transcript:
            got_final.set()

    session.on("user_input_transcribed", on_transcribed)
    mic = ScriptedMic()  # 20 ms frames at real-time pace: the turn, then digital silence
    session.input.audio = mic
    await session.start(Agent(instructions="Listen."), record=False)
    mic.play(np.concatenate([np.zeros(8000, dtype=np.int16), pcm]))
    try:
        await asyncio.wait_for(got_final.wait(), timeout=30)
    finally:
        mic.close()
        await session.aclose()

    finals = [t.transcript for t in transcripts if t.is_final and t.transcript]
    assert compare_form(finals[0]) == compare_form(wav.with_suffix(".txt").read_text())
    first_final = next(i for i, t in enumerate(transcripts) if t.is_final)
    assert any(not t.is_final and t.transcript for t in transcripts[:first_final]), "no interim before final"
    assert usage and sum(usage) > 3.0  # RECOGNITION_USAGE became STT metrics
