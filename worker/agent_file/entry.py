"""The Python entry point: `PARLEY_AGENT=package.module:make_agent` returns the developer's own LiveKit
`Agent` (their tools, their logic), and Parley serves it with its own turn handling, fillers and reply budget.

The factory's agent is given Parley's hooks by a mixin placed in front of its class (`served_agent`), so every
method the developer wrote still runs (through `super()`), wrapped by what Parley adds around it.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterable, Callable, Sequence
from typing import Any

from livekit import rtc
from livekit.agents import llm
from livekit.agents.voice import Agent, ModelSettings

from ..agent import AgentOptions, limit_reply, say_line
from ..tool_text import tool_calls_from_text, tool_names


class AgentEntryError(ValueError):
    """The entry point cannot be imported or did not return an Agent (one line)."""


def load_factory(entry: str) -> Callable[[], Agent]:
    """`package.module:callable` → the callable (not yet called)."""
    module_name, _, attr = entry.partition(":")
    if not module_name or not attr:
        raise AgentEntryError(f"agent entry {entry!r}: expected package.module:callable")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:
        raise AgentEntryError(f"agent entry {entry!r}: cannot import {module_name} ({e})") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise AgentEntryError(f"agent entry {entry!r}: {module_name} has no callable {attr!r}")
    return fn  # type: ignore[no-any-return]


def make_user_agent(entry: str) -> Agent:
    agent = load_factory(entry)()
    if not isinstance(agent, Agent):
        raise AgentEntryError(f"agent entry {entry!r}: returned {type(agent).__name__}, not a livekit Agent")
    return agent


class ParleyServed:
    """Mixin: Parley's hooks around a developer's Agent. Attributes are set per call by the pipeline."""

    options: AgentOptions
    turns: Any
    fillers: Any
    greeting_audio: Callable[[str], AsyncIterable[rtc.AudioFrame] | None] | None

    @property
    def greeting(self) -> str:
        return self.options.spoken_greeting

    def stt_node(self, audio: AsyncIterable[rtc.AudioFrame], model_settings: ModelSettings) -> Any:
        if self.turns is None:
            return super().stt_node(audio, model_settings)  # type: ignore[misc]
        return self.turns.hooks.stt_node(self, audio, model_settings)

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        if self.fillers is not None:
            self.fillers.on_user_turn_completed()
        await super().on_user_turn_completed(turn_ctx, new_message)  # type: ignore[misc]

    def tts_node(self, text: AsyncIterable[str], model_settings: ModelSettings) -> Any:
        if self.fillers is None:
            return super().tts_node(text, model_settings)  # type: ignore[misc]
        watch_text = getattr(self.fillers, "watch_reply_text", None)  # fillers without it still work
        text = watch_text(text) if watch_text is not None else text
        frames = super().tts_node(text, model_settings)  # type: ignore[misc]
        return self.fillers.watch_reply_audio(frames)

    def llm_node(
        self, chat_ctx: llm.ChatContext, tools: list[llm.Tool], model_settings: ModelSettings
    ) -> Any:
        out = super().llm_node(chat_ctx, tools, model_settings)  # type: ignore[misc]
        if isinstance(out, AsyncIterable):  # a streamed reply keeps to the sentence budget
            out = tool_calls_from_text(out, tool_names(tools))  # a call written as text is not spoken
            return limit_reply(out, self.options.max_sentences, self.options.max_words)
        return out


class _ParleyGreets:
    """Mixin for a developer's Agent that has no on_enter of its own: Parley greets (from cache)."""

    async def on_enter(self) -> None:
        if getattr(self, "greet_on_enter", True):
            say_line(self, self.greeting)  # type: ignore[attr-defined]


def served_agent(agent: Agent, options: AgentOptions, tools: Sequence[llm.Tool] = ()) -> Agent:
    """Give a developer's Agent Parley's hooks (in place) and add Parley's tools (phone built-ins, the agent
    file's HTTP tools) to its own."""
    cls = type(agent)
    bases: tuple[type, ...] = (ParleyServed, cls)
    if cls.on_enter is Agent.on_enter:
        bases = (_ParleyGreets, *bases)
    agent.__class__ = type(f"Parley{cls.__name__}", bases, {})
    served: Any = agent
    served.options, served.turns, served.fillers, served.greeting_audio = options, None, None, None
    if tools:
        # Agent.update_tools is async; before the agent runs it only does this (livekit-agents 1.8.9)
        merged = {t.id: t for t in [*agent.tools, *tools] if isinstance(t, llm.Tool)}
        others = [t for t in agent.tools if not isinstance(t, llm.Tool)]
        served._tools = [*merged.values(), *others]
        served._chat_ctx = served._chat_ctx.copy(tools=served._tools)
    return agent


def is_entry(value: str) -> bool:
    """`module:callable` rather than a file path."""
    head, sep, tail = value.partition(":")
    return bool(sep) and tail.isidentifier() and all(p.isidentifier() for p in head.split("."))


__all__ = ["AgentEntryError", "ParleyServed", "is_entry", "load_factory", "served_agent"]
