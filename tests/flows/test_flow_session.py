"""The dental flow through a real AgentSession and the real booking service over HTTP: the agent's replies
come from the flow, the booking lands in the service, and the LLM is never asked (the ScriptedLLM stand-in
is there only because a session needs one; it fails the test if called)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from livekit.agents import AgentSession

from examples.booking_service import Calendar, make_app
from simulator.fakes import ScriptedLLM
from worker.agent import AgentOptions
from worker.agent_file import HttpToolRuntime, parse_agent
from worker.agent import ParleyAgent
from worker.flows.agent import make_flow_agent

from .conftest import ROOT, TODAY


@pytest.fixture
async def service(unused_tcp_port: int) -> AsyncIterator[tuple[str, Calendar]]:
    calendar = Calendar(start=TODAY)
    runner = web.AppRunner(make_app(calendar))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", unused_tcp_port).start()
    yield f"http://127.0.0.1:{unused_tcp_port}", calendar
    await runner.cleanup()


def dental_agent(base_url: str, runtime: HttpToolRuntime) -> ParleyAgent:
    raw = yaml.safe_load((ROOT / "examples/dental_clinic.yaml").read_text())
    raw["variables"]["booking"] = base_url
    spec = parse_agent(raw, Path("dental_clinic.yaml"))
    assert spec.flow is not None
    agent = make_flow_agent(spec.flow, spec.timezone, spec.http_tools, runtime, AgentOptions(greeting=""))
    agent.flow.today = TODAY
    return agent


async def test_a_booking_call_through_a_session(service: tuple[str, Calendar]) -> None:
    base_url, calendar = service
    runtime = HttpToolRuntime()
    never = ScriptedLLM(fail=True)
    said: list[Any] = []
    async with AgentSession(llm=never) as session:
        await session.start(dental_agent(base_url, runtime))
        for text in (
            "Hi, could Doctor Morgan see me for a teeth cleaning?",
            "Tuesday morning at nine, and my name is Alex Kim.",
            "Yes, that's all, thanks.",
        ):
            result = await session.run(user_input=text)
            said += [e.item.text_content for e in result.events if e.type == "message"]
    await runtime.aclose()
    assert never.requests == []
    assert "Morgan" in said[0] and "Shall I book it?" in said[1] and "booked" in said[2]
    booking = next(iter(calendar.bookings.values()))
    assert (booking.name, booking.dentist, booking.slot) == ("Alex Kim", "Dr. Morgan", "2026-12-08 09:00")
