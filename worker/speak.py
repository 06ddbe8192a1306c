"""The speaking side of an agent: its reply's words and audio on their way to the room.

`FillerAgent` is the base class of Parley's agents (worker/agent.py): it gives a `FillerController`
(caches/controller.py) a look at each reply's text and first audio, so a cached filler can cover a late
reply. Speaking asks the cache; the cache never holds the agent.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any

from livekit.agents import Agent, llm
from livekit.agents.voice import ModelSettings

from caches import FillerController


class FillerAgent(Agent):
    """An `Agent` with the two hooks a `FillerController` needs; set `agent.fillers` once it exists."""

    def __init__(self, *, fillers: FillerController | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fillers = fillers

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        if self.fillers is not None:
            self.fillers.on_user_turn_completed()

    def tts_node(self, text: AsyncIterable[str], model_settings: ModelSettings) -> Any:
        if self.fillers is None:
            return Agent.default.tts_node(self, text, model_settings)
        frames = Agent.default.tts_node(self, self.fillers.watch_reply_text(text), model_settings)
        return self.fillers.watch_reply_audio(frames)
