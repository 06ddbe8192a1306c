"""The Python entry point: PARLEY_AGENT=package.module:make_agent serves the developer's own Agent (its tools,
its on_enter) through a real AgentSession, held by Parley's agent with its reply budget and filler hook around
it; what Parley cannot serve is refused with one line."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from livekit.agents import Agent
from livekit.agents.voice import AgentSession

from examples.python_agent import FrontDesk
from plugins.cpu_voice import CpuVoiceTTS
from tests.worker import python_agents
from worker.pipeline import build_agent
from worker.settings import SettingsError, load_settings

from .conftest import RealTimeSpeaker, ToolCallingLLM, commit_caller_turn

pytestmark = pytest.mark.slow


class CountingFillers:
    """Stands in for the FillerController: counts the hooks Parley calls on the developer's agent."""

    def __init__(self) -> None:
        self.turns = 0
        self.watched = 0

    def on_user_turn_completed(self) -> None:
        self.turns += 1

    def watch_reply_text(self, text: Any) -> Any:
        return text

    def watch_reply_audio(self, frames: Any) -> Any:
        self.watched += 1
        return frames


async def test_entry_point_serves_the_developers_agent(monkeypatch) -> None:
    settings = load_settings(agent="examples.python_agent:make_agent", llm_max_sentences=1)
    agent = build_agent(settings)
    assert isinstance(agent.own, FrontDesk)  # held, not changed
    assert [t.info.name for t in agent.tools] == ["opening_hours"]  # its own tool is kept
    fillers = CountingFillers()
    agent.fillers = fillers

    llm_ = ToolCallingLLM("opening_hours", {"weekday": "Thursday"}, reply_prefix="We are. Truly. ")
    session = AgentSession(llm=llm_, tts=CpuVoiceTTS(voice="heart"), user_away_timeout=None)
    session.output.audio = RealTimeSpeaker()
    replies: list[str] = []
    session.on(
        "conversation_item_added",
        lambda ev: (
            replies.append(ev.item.text_content)
            if ev.item.type == "message" and ev.item.role == "assistant"
            else None
        ),
    )
    await session.start(agent, record=False)
    try:
        for _ in range(100):  # its own on_enter greeting
            if replies:
                break
            await asyncio.sleep(0.05)
        assert replies[:1] == ["Hi, you've reached the bike shop. How can I help?"]
        commit_caller_turn(session, "Are you open on Thursday?")
        for _ in range(300):
            if len(replies) >= 2:
                break
            await asyncio.sleep(0.05)
        outputs = [i for i in llm_.requests[-1].items if i.type == "function_call_output"]
        assert outputs and outputs[-1].output == "open 9-19"  # the developer's tool ran
        assert replies[1].strip() == "We are."  # Parley's sentence budget (1) applies to its reply
        assert fillers.turns == 1 and fillers.watched >= 1
    finally:
        await session.aclose()


def test_file_with_entry_adds_its_tools_to_the_developers_agent(tmp_path) -> None:
    path = tmp_path / "shop.yaml"
    path.write_text(
        "name: bike-shop\nentry: examples.python_agent:make_agent\ngreeting: null\n"
        "tools:\n  - {type: http, name: stock, description: Parts in stock., url: 'http://127.0.0.1:9/stock'}\n"
    )
    settings = load_settings(agent=str(path))
    agent = build_agent(settings)
    assert isinstance(agent.own, FrontDesk)
    from worker.agent_file import call_tools

    agent = build_agent(settings, call_tools(settings, phone=False))
    assert sorted(t.info.name for t in agent.tools) == ["opening_hours", "stock"]


class UsesSuper(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Be brief.")

    async def on_enter(self) -> None:
        await super().on_enter()


class TakesParleysName(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Be brief.")
        self.options = {"loud": True}


class FlowWithoutItsTool(Agent):
    flow = python_agents.DENTAL.flow

    def __init__(self) -> None:
        super().__init__(instructions="Be brief.")


def make_uses_super() -> Agent:
    return UsesSuper()


def make_takes_parleys_name() -> Agent:
    return TakesParleysName()


def make_flow_without_its_tool() -> Agent:
    return FlowWithoutItsTool()


@pytest.mark.parametrize(
    ("factory", "line"),
    [
        ("make_uses_super", "UsesSuper.on_enter uses super()"),
        ("make_takes_parleys_name", "TakesParleysName.options: the name is Parley's own"),
        (
            "make_flow_without_its_tool",
            "flow.tasks.book.tool: the agent has no tool named 'book_appointment'",
        ),
    ],
)
def test_an_agent_parley_cannot_serve_is_refused_with_one_line(factory: str, line: str) -> None:
    settings = load_settings(agent=f"tests.agent_file.test_entry_point:{factory}")
    with pytest.raises(SettingsError, match=re.escape(line)) as err:
        build_agent(settings)
    assert "\n" not in str(err.value)


def test_check_names_what_the_first_call_would_refuse() -> None:
    from worker.agent_file.__main__ import check

    code, line = check("tests.agent_file.test_entry_point:make_uses_super")
    assert code == 1 and "UsesSuper.on_enter uses super()" in line and "\n" not in line
    assert check("examples.python_agent:make_agent") == (0, "ok: examples.python_agent:make_agent")
