"""A Python entry point: a LiveKit `Agent` of your own, served by Parley.

    PARLEY_AGENT=examples.python_agent:make_agent python worker.py dev

Write the agent as you would for LiveKit Agents (instructions, `@function_tool` methods, your own hooks).
Parley's agent (worker/agent.py) holds it and runs your hooks as its own, with the same turn handling,
fillers, bounded context, apology and reprompt as an agent file's; a `flow = FlowSpec(...)` class attribute
(worker.flows) makes it finish tasks step by step, calling your tools by name.
"""

from __future__ import annotations

from livekit.agents import Agent, RunContext, function_tool

OPENING_HOURS = {0: "9-17", 1: "9-17", 2: "9-17", 3: "9-19", 4: "9-15"}


class FrontDesk(Agent):
    def __init__(self) -> None:
        super().__init__(
            instructions=(
                "You answer the phone for a small bike repair shop. Everything you write is spoken: one or "
                "two short sentences, plain words. Use opening_hours when asked when the shop is open."
            )
        )

    async def on_enter(self) -> None:
        self.session.say("Hi, you've reached the bike shop. How can I help?")

    @function_tool
    async def opening_hours(self, context: RunContext, weekday: str) -> str:
        """Opening hours for one weekday.

        Args:
            weekday: monday, tuesday, ... sunday
        """
        names = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
        day = weekday.strip().lower()
        if day not in names:
            return f"unknown weekday {weekday!r}"
        hours = OPENING_HOURS.get(names.index(day))
        return f"open {hours}" if hours else "closed"


def make_agent() -> Agent:
    """Called once per call."""
    return FrontDesk()
