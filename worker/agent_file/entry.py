"""The Python entry point: `PARLEY_AGENT=package.module:make_agent` returns the developer's own LiveKit
`Agent` (their tools, their logic); Parley's agent (worker/agent.py `ParleyAgent`) holds it and serves it with
the same behaviour as the built-in agent."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from livekit.agents.voice import Agent


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


def is_entry(value: str) -> bool:
    """`module:callable` rather than a file path."""
    head, sep, tail = value.partition(":")
    return bool(sep) and tail.isidentifier() and all(p.isidentifier() for p in head.split("."))


__all__ = ["AgentEntryError", "is_entry", "load_factory", "make_user_agent"]
