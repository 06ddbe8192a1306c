"""Offline audio I/O and a scripted STT for driving a real AgentSession without a server.

ScriptedMic plays a prepared 16 kHz caller track in real time; PacedSpeaker (simulator.session_audio) plays
the agent's audio in real time with pause support;
ScriptedSTT is a streaming STT that finds the caller's speech bursts by energy and emits, per burst, the
interim/final text of a script — the words are scripted, the timing comes from the audio.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import numpy as np
from livekit import rtc
from livekit.agents import APIConnectOptions, stt
from livekit.agents.language import LanguageCode
from livekit.agents.voice import io

from simulator.session_audio import PacedSpeaker

__all__ = ["MIC_RATE", "PacedSpeaker", "ScriptLine", "ScriptedMic", "ScriptedSTT"]

MIC_RATE = 16000
MIC_FRAME = 160  # 10 ms


class ScriptedMic(io.AudioInput):
    def __init__(self, track: np.ndarray) -> None:
        super().__init__(label="scripted-mic")
        self._track = track.astype(np.int16)
        self._i = 0
        self._t0: float | None = None

    async def __anext__(self) -> rtc.AudioFrame:
        if self._t0 is None:
            self._t0 = time.monotonic()
        self._i += MIC_FRAME
        wait = self._t0 + self._i / MIC_RATE - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        chunk = self._track[self._i - MIC_FRAME : self._i]
        if len(chunk) < MIC_FRAME:  # after the script: silence for as long as the session listens
            chunk = np.zeros(MIC_FRAME, dtype=np.int16)
        return rtc.AudioFrame(chunk.tobytes(), MIC_RATE, 1, MIC_FRAME)


@dataclass(frozen=True)
class ScriptLine:
    interim: str
    final: str
    final_after_s: float = 0.1
    """When the FINAL comes, in seconds of silence after the burst (a busy host's recogniser is late)."""


class ScriptedSTT(stt.STT):
    def __init__(self, script: list[ScriptLine], language: str = "en") -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=True, interim_results=True))
        self._script = script
        self.language = language

    async def _recognize_impl(self, buffer, *, language=None, conn_options=None):  # type: ignore[no-untyped-def]
        raise NotImplementedError("streaming only")

    def stream(self, *, language=None, conn_options=None):  # type: ignore[no-untyped-def]
        return _ScriptedStream(self, list(self._script), conn_options or APIConnectOptions())


class _ScriptedStream(stt.RecognizeStream):
    GAP_S = 0.35  # silence that ends a burst
    INTERIM_AFTER_S = 0.15

    def __init__(self, owner: ScriptedSTT, script: list[ScriptLine], conn: APIConnectOptions) -> None:
        super().__init__(stt=owner, conn_options=conn, sample_rate=MIC_RATE)
        self._owner = owner
        self._lines = script

    def _event(self, kind: stt.SpeechEventType, text: str = "") -> None:
        lang = LanguageCode(self._owner.language)
        alts = [stt.SpeechData(language=lang, text=text, confidence=1.0)] if text else []
        self._event_ch.send_nowait(stt.SpeechEvent(type=kind, alternatives=alts))

    async def _run(self) -> None:
        speech = silence = 0.0
        active = interim_sent = False
        line: ScriptLine | None = None
        async for item in self._input_ch:
            if isinstance(item, self._FlushSentinel):
                continue
            pcm = np.frombuffer(item.data, dtype=np.int16).astype(np.float32) / 32768
            loud = float(np.sqrt(np.mean(pcm**2))) > 0.01 if pcm.size else False
            dur = item.duration
            if loud:
                silence = 0.0
                if not active:
                    active, interim_sent, speech = True, False, 0.0
                    line = self._lines.pop(0) if self._lines else None
                    self._event(stt.SpeechEventType.START_OF_SPEECH)
                speech += dur
                if line and not interim_sent and speech >= self.INTERIM_AFTER_S:
                    interim_sent = True
                    self._event(stt.SpeechEventType.INTERIM_TRANSCRIPT, line.interim)
            elif active or line is not None:
                silence += dur
                if line and silence >= line.final_after_s and line.final:
                    self._event(stt.SpeechEventType.FINAL_TRANSCRIPT, line.final)
                    line = None
                if active and silence >= self.GAP_S:
                    active = False
                    self._event(stt.SpeechEventType.END_OF_SPEECH)
