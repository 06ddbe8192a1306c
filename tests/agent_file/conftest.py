"""Shared doubles for the agent tests. The only double is the LLM (an LLM that calls tools is a boundary
this machine cannot reach: the embedded 135M model does not call tools reliably); the session, tools, HTTP
server and TTS are real."""

from __future__ import annotations

import time
from typing import Any

from simulator.audio_io import Loudspeaker as RealTimeSpeaker  # noqa: F401 (the tests' speaker)
from simulator.fakes import ScriptedLLM


class ToolCallingLLM(ScriptedLLM):
    """The scripted LLM (simulator/fakes.py) as a tool caller: each caller turn asks for `tool` with
    `arguments`; once the tool's answer is in the context it says `reply_prefix` + that answer."""

    def __init__(self, tool: str, arguments: dict[str, Any], reply_prefix: str = "Here it is. ") -> None:
        super().__init__(reply_prefix + "{output}", tool=tool, tool_arguments=arguments, delay_s=0.01)

    @property
    def arguments(self) -> dict[str, Any]:
        """What the next tool request carries (a test may change it between turns)."""
        return self.tool_arguments

    @arguments.setter
    def arguments(self, value: dict[str, Any]) -> None:
        self.tool_arguments = dict(value)


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
