"""Shared doubles for the agent tests. The only double is the LLM (an LLM that calls tools is a boundary
this machine cannot reach: the embedded 135M model does not call tools reliably); the session, tools, HTTP
server and TTS are real."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents.voice import io

from simulator.fakes import ScriptedLLM


class ToolCallingLLM(ScriptedLLM):
    """The scripted LLM (simulator/fakes.py) as a tool caller: each caller turn asks for `tool` with
    `arguments`; once the tool's answer is in the context it says `reply_prefix` + that answer."""

    def __init__(self, tool: str, arguments: dict[str, Any], reply_prefix: str = "Here it is. ") -> None:
        super().__init__(reply_prefix + "{output}", tool=tool, tool_arguments=arguments, delay_s=0.01)


class RealTimeSpeaker(io.AudioOutput):
    """An audio output that plays in real time and notes when each segment started (monotonic)."""

    def __init__(self, sample_rate: int = 24_000) -> None:
        super().__init__(
            label="test", capabilities=io.AudioOutputCapabilities(pause=False), sample_rate=sample_rate
        )
        self.starts: list[float] = []
        self.samples: list[int] = []
        self._open = False
        self._tasks: set[asyncio.Task[None]] = set()

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if not self._open:
            self._open = True
            self.starts.append(time.monotonic())
            self.samples.append(0)
            self.on_playback_started(created_at=time.time())
        self.samples[-1] += frame.samples_per_channel
        _ = np.frombuffer(frame.data, np.int16)

    def flush(self) -> None:
        super().flush()
        if self._open:
            self._open = False
            duration = self.samples[-1] / self.sample_rate
            task = asyncio.create_task(self._finish(duration))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _finish(self, duration: float) -> None:
        await asyncio.sleep(duration)
        self.on_playback_finished(playback_position=duration, interrupted=False)

    def clear_buffer(self) -> None:
        if self._open:
            self._open = False
            self.on_playback_finished(playback_position=0.0, interrupted=True)


def commit_caller_turn(session: Any, text: str) -> None:
    """Commit a caller turn through the framework's own end-of-turn path (what VAD/STT trigger in a call):
    it runs `Agent.on_user_turn_completed`, then schedules the reply."""
    from livekit.agents.voice.audio_recognition import _EndOfTurnInfo, _EndOfTurnMetrics

    now = time.time()
    metrics = _EndOfTurnMetrics(
        started_speaking_at=now - 1.0, stopped_speaking_at=now, transcription_delay=0.0, end_of_turn_delay=0.0
    )
    info = _EndOfTurnInfo(skip_reply=False, new_transcript=text, transcript_confidence=1.0, metrics=metrics)
    activity = session._activity
    assert activity is not None and activity.on_end_of_turn(info)
