"""Offline audio I/O and a scripted STT for driving a real AgentSession without a server.

ScriptedMic plays a prepared 16 kHz caller track in real time; PacedSpeaker plays the agent's audio in real
time, reports playback start/finish and supports pause (so LiveKit's false-interruption resume is on);
ScriptedSTT is a streaming STT that finds the caller's speech bursts by energy and emits, per burst, the
interim/final text of a script — the words are scripted, the timing comes from the audio.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from dataclasses import dataclass

import numpy as np
from livekit import rtc
from livekit.agents import APIConnectOptions, stt
from livekit.agents.language import LanguageCode
from livekit.agents.voice import io

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


class PacedSpeaker(io.AudioOutput):
    def __init__(self, sample_rate: int = 24000) -> None:
        super().__init__(
            label="paced-speaker",
            capabilities=io.AudioOutputCapabilities(pause=True),
            sample_rate=sample_rate,
        )
        self._queue: deque[rtc.AudioFrame | None] = deque()  # None marks the end of a segment
        self._wake = asyncio.Event()
        self._playing = asyncio.Event()
        self._playing.set()
        self._in_segment = False
        self._position = 0.0
        self.pauses = 0
        self.resumes = 0
        self.finished: list[tuple[float, bool]] = []
        self._task = asyncio.create_task(self._run())

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        self._queue.append(frame)
        self._wake.set()

    def flush(self) -> None:
        super().flush()
        self._queue.append(None)
        self._wake.set()

    def clear_buffer(self) -> None:
        self._queue.clear()
        if self._in_segment:
            self._finish(interrupted=True)

    def pause(self) -> None:
        self.pauses += 1
        self._playing.clear()

    def resume(self) -> None:
        if not self._playing.is_set():
            self.resumes += 1
        self._playing.set()

    def _finish(self, *, interrupted: bool) -> None:
        self._in_segment = False
        position, self._position = self._position, 0.0
        self.finished.append((position, interrupted))
        self.on_playback_finished(playback_position=position, interrupted=interrupted)

    async def _run(self) -> None:
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._playing.wait()
            if not self._queue:
                continue
            item = self._queue.popleft()
            if item is None:
                if self._in_segment:
                    self._finish(interrupted=False)
                continue
            if not self._in_segment:
                self._in_segment = True
                self.on_playback_started(created_at=time.time())
            await asyncio.sleep(item.duration)
            if self._in_segment:
                self._position += item.duration

    async def aclose(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


@dataclass(frozen=True)
class ScriptLine:
    interim: str
    final: str


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
    FINAL_AFTER_S = 0.1

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
            elif active:
                silence += dur
                if line and silence >= self.FINAL_AFTER_S and line.final:
                    self._event(stt.SpeechEventType.FINAL_TRANSCRIPT, line.final)
                    line = None
                if silence >= self.GAP_S:
                    active = False
                    self._event(stt.SpeechEventType.END_OF_SPEECH)
