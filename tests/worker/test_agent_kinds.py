"""The same agent-behaviour tests for both kinds of agent Parley serves (issue 62): its built-in agent from
an agent file (examples/dental_clinic.yaml) and a developer's Python entry point (python_agents.py), each
built as the worker builds it and run through a real AgentSession with the real booking service over HTTP.
The LLM is the scripted stand-in at the hosted-API boundary (simulator/fakes.py)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from livekit.agents import AgentSession

from examples.booking_service import Calendar, make_app
from simulator.fakes import ScriptedLLM
from worker.agent import APOLOGY, GREETING, REPEAT, ParleyAgent
from worker.agent_file import call_tools
from worker.pipeline import build_agent
from worker.settings import load_settings

from . import python_agents

ROOT = Path(__file__).resolve().parents[2]
TODAY = dt.date(2026, 12, 7)  # a Monday
KINDS = ["file", "python"]


@pytest.fixture
async def service(unused_tcp_port: int, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Calendar]:
    calendar = Calendar(start=TODAY)
    runner = web.AppRunner(make_app(calendar))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", unused_tcp_port).start()
    monkeypatch.setattr(python_agents, "BOOKING_URL", f"http://127.0.0.1:{unused_tcp_port}")
    yield calendar
    await runner.cleanup()


def agent_of(kind: str, tmp_path: Path, *, flow: bool = False, **options: Any) -> ParleyAgent:
    """The agent a call gets: from a copy of the dental agent file pointed at the test's booking service
    (its flow kept or left out), or from the Python entry point."""
    if kind == "python":
        entry = "make_flow_receptionist" if flow else "make_receptionist"
        settings = load_settings(agent=f"tests.worker.python_agents:{entry}", **options)
    else:
        raw = yaml.safe_load((ROOT / "examples/dental_clinic.yaml").read_text())
        raw["variables"]["booking"] = python_agents.BOOKING_URL
        if not flow:
            del raw["flow"]
        path = tmp_path / ("dental_flow.yaml" if flow else "dental.yaml")
        path.write_text(yaml.safe_dump(raw))
        settings = load_settings(agent=str(path), **options)
    agent = build_agent(settings, call_tools(settings, phone=False))
    if agent.flow is not None:
        agent.flow.today = TODAY
    return agent


def said(session: AgentSession) -> list[str]:
    return [
        (m.text_content or "").strip()
        for m in session.history.items
        if m.type == "message" and m.role == "assistant"
    ]


@pytest.mark.parametrize("kind", KINDS)
async def test_greets_first(kind: str, tmp_path: Path) -> None:
    agent = agent_of(kind, tmp_path)
    expected = GREETING["en"] if kind == "python" else python_agents.DENTAL.greeting_text
    async with AgentSession(llm=ScriptedLLM(fail=True)) as session:
        await session.start(agent)
        for _ in range(100):
            if said(session):
                break
            await asyncio.sleep(0.02)
        assert said(session) == [expected]


@pytest.mark.parametrize("kind", KINDS)
async def test_context_is_bounded(kind: str, tmp_path: Path) -> None:
    agent = agent_of(kind, tmp_path, context_recent_turns=2)
    fake = ScriptedLLM(reply="Sure.")
    async with AgentSession(llm=fake) as session:
        await session.start(agent)
        for i in range(8):
            await session.run(user_input=f"question number {i}")
    sent = fake.requests[-1].items
    system = [m.text_content or "" for m in sent if m.type == "message" and m.role == "system"]
    users = [m.text_content for m in sent if m.type == "message" and m.role == "user"]
    assert system[0].startswith(agent.base_instructions[:40]) and "Today is" in system[0]
    assert any("Earlier in this call" in s for s in system[1:])
    assert "question number 7" in users and len(users) <= 3


@pytest.mark.parametrize("kind", KINDS)
async def test_apologises_when_the_llm_fails(kind: str, tmp_path: Path) -> None:
    async with AgentSession(llm=ScriptedLLM(fail=True)) as session:
        await session.start(agent_of(kind, tmp_path))
        result = await session.run(user_input="Can I book a cleaning?")
    replies = [e.item.text_content for e in result.events if e.type == "message"]
    assert [r.strip() for r in replies if r] == [APOLOGY["en"]]


@pytest.mark.parametrize("kind", KINDS)
async def test_an_empty_reply_asks_the_caller_to_repeat(kind: str, tmp_path: Path) -> None:
    async with AgentSession(llm=ScriptedLLM(steps=[["", "  "]])) as session:
        await session.start(agent_of(kind, tmp_path))
        result = await session.run(user_input="hello?")
    replies = [e.item.text_content for e in result.events if e.type == "message"]
    assert [r.strip() for r in replies if r] == [REPEAT["en"]]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_tool_call_written_as_text_runs_and_is_not_spoken(
    kind: str, tmp_path: Path, service: Calendar
) -> None:
    call = '{"name": "book_appointment", "arguments": {"name": "Alex Kim", "dentist": "Dr. Morgan", '
    call += '"slot": "2026-12-08 09:00", "service": "cleaning"}}'
    fake = ScriptedLLM(steps=[["Let me book that. ", call], ["You're booked for Tuesday at nine."]])
    async with AgentSession(llm=fake) as session:
        await session.start(agent_of(kind, tmp_path))
        await session.run(user_input="Book me with Dr. Morgan tomorrow at nine, I'm Alex Kim.")
    booking = next(iter(service.bookings.values()))
    assert (booking.name, booking.dentist, booking.slot) == ("Alex Kim", "Dr. Morgan", "2026-12-08 09:00")
    assert all("{" not in s and "book_appointment" not in s for s in said(session)), said(session)
    assert said(session)[-1] == "You're booked for Tuesday at nine."


@pytest.mark.parametrize("kind", KINDS)
async def test_a_flow_books_the_call(kind: str, tmp_path: Path, service: Calendar) -> None:
    agent = agent_of(kind, tmp_path, flow=True)
    never = ScriptedLLM(fail=True)
    replies: list[str] = []
    async with AgentSession(llm=never) as session:
        await session.start(agent)
        for text in (
            "Hi, could Doctor Morgan see me for a teeth cleaning?",
            "Tuesday morning at nine, and my name is Alex Kim.",
            "Yes, that's all, thanks.",
        ):
            result = await session.run(user_input=text)
            replies += [e.item.text_content for e in result.events if e.type == "message"]
    assert never.requests == []  # the flow answered, not the LLM
    assert "Morgan" in replies[0] and "Shall I book it?" in replies[1] and "booked" in replies[2]
    booking = next(iter(service.bookings.values()))
    assert (booking.name, booking.dentist, booking.slot) == ("Alex Kim", "Dr. Morgan", "2026-12-08 09:00")
