"""HTTP tools through a real AgentSession: the webhook is a real aiohttp server on loopback, the TTS the real
CPU voice; only the LLM is a double (ToolCallingLLM: an LLM that calls tools, see conftest)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from livekit.agents.voice import AgentSession

from plugins.cpu_voice import CpuVoiceTTS
from worker.agent import AgentOptions, ParleyAgent
from worker.agent_file import HttpToolRuntime, http_tools, parse_agent

from .conftest import RealTimeSpeaker, ToolCallingLLM

pytestmark = pytest.mark.slow
SECRET = "s3cr3t-token-value-9f2c"


@pytest.fixture
async def webhook() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    released = asyncio.Event()  # set at teardown so a hanging handler does not hold the server's shutdown

    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append({"path": request.path, "body": body, "auth": request.headers.get("Authorization")})
        if request.path == "/slow":
            await asyncio.sleep(1.5)
        if request.path == "/fail":
            return web.json_response({"error": "down"}, status=500)
        if request.path == "/hang":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(released.wait(), 30)
        return web.json_response({"order": body.get("order"), "status": "ships tomorrow"})

    app = web.Application()
    app.router.add_post("/{name}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}", seen
    released.set()
    await runner.cleanup()


def spec_for(url: str, **tool: Any) -> Any:
    return parse_agent(
        {
            "name": "shop",
            "greeting": None,
            "tools": [
                {
                    "type": "http",
                    "name": "lookup_order",
                    "description": "Look up an order.",
                    "parameters": {"type": "object", "properties": {"order": {"type": "string"}}},
                    "url": url,
                    "headers": {"Authorization": "Bearer ${PARLEY_TOOL_SHOP_TOKEN}"},
                    "hold": "Let me look that up.",
                    "failure": "Sorry, the order system is not answering.",
                    **tool,
                }
            ],
        }
    )


class TextTap(ParleyAgent):
    """ParleyAgent that notes every text it speaks through the TTS (say() lines and replies)."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.spoken: list[str] = []

    def tts_node(self, text: Any, model_settings: Any) -> Any:
        async def tap() -> AsyncIterator[str]:
            parts = []
            async for t in text:
                parts.append(t)
                yield t
            self.spoken.append("".join(parts).strip())

        return super().tts_node(tap(), model_settings)


async def call(url: str, llm_: ToolCallingLLM, runtime: HttpToolRuntime, **tool: Any):
    spec = spec_for(url, **tool)
    session = AgentSession(llm=llm_, tts=CpuVoiceTTS(voice="heart"), user_away_timeout=None)
    speaker = RealTimeSpeaker()
    session.output.audio = speaker
    agent = TextTap(AgentOptions(greeting=""), tools=http_tools(spec.http_tools, runtime))
    await session.start(agent, record=False)
    return session, agent, speaker


async def turn(session: AgentSession, text: str) -> None:
    handle = session.generate_reply(user_input=text)
    await asyncio.wait_for(handle.wait_for_playout(), 30)
    for _ in range(200):  # the reply after the tool answer is a second speech
        await asyncio.sleep(0.05)
        if session.agent_state == "listening" and not session._activity._speech_q:  # type: ignore[union-attr]
            break
    await asyncio.sleep(0.2)


async def test_tool_answer_goes_back_to_the_llm_and_is_spoken(webhook, monkeypatch, caplog) -> None:
    base, seen = webhook
    monkeypatch.setenv("PARLEY_TOOL_SHOP_TOKEN", SECRET)
    caplog.set_level(logging.DEBUG)
    llm_ = ToolCallingLLM("lookup_order", {"order": "A17"}, reply_prefix="Your order: ")
    rt = HttpToolRuntime()
    session, agent, _ = await call(f"{base}/fast", llm_, rt)
    try:
        await turn(session, "Where is my order A17?")
        assert seen == [{"path": "/fast", "body": {"order": "A17"}, "auth": f"Bearer {SECRET}"}]
        outputs = [i for i in llm_.requests[-1].items if i.type == "function_call_output"]
        assert outputs and '"status": "ships tomorrow"' in outputs[-1].output
        assert any("ships tomorrow" in s for s in agent.spoken), agent.spoken
        assert rt.calls[-1][1].outcome == "ok" and "Let me look that up." not in agent.spoken
    finally:
        await session.aclose()
        await rt.aclose()
    assert SECRET not in caplog.text  # the header value is never logged


async def test_slow_tool_gets_the_hold_line_first(webhook, monkeypatch) -> None:
    base, _ = webhook
    monkeypatch.setenv("PARLEY_TOOL_SHOP_TOKEN", SECRET)
    llm_ = ToolCallingLLM("lookup_order", {"order": "B2"})
    rt = HttpToolRuntime()
    session, agent, speaker = await call(f"{base}/slow", llm_, rt, hold_after_ms=200)
    try:
        await turn(session, "Where is order B2?")
        assert agent.spoken[0] == "Let me look that up.", agent.spoken
        assert any("ships tomorrow" in s for s in agent.spoken[1:])
        timing = rt.calls[-1][1]
        assert timing.hold_at is not None and timing.outcome == "ok"
        assert speaker.starts[0] >= timing.hold_at  # the hold line is what was heard first
    finally:
        await session.aclose()
        await rt.aclose()


@pytest.mark.parametrize(("path", "timeout_s"), [("/fail", 5.0), ("/hang", 0.5)], ids=["http-500", "timeout"])
async def test_failing_tool_is_an_apology_and_the_call_goes_on(
    webhook, monkeypatch, caplog, path: str, timeout_s: float
) -> None:
    base, seen = webhook
    monkeypatch.setenv("PARLEY_TOOL_SHOP_TOKEN", SECRET)
    caplog.set_level(logging.DEBUG)
    llm_ = ToolCallingLLM("lookup_order", {"order": "C3"})
    rt = HttpToolRuntime()
    session, agent, _ = await call(f"{base}{path}", llm_, rt, timeout_s=timeout_s, hold_after_ms=5000)
    try:
        await turn(session, "Where is order C3?")
        assert agent.spoken == ["Sorry, the order system is not answering."]
        assert rt.calls[-1][1].outcome == ("timeout" if path == "/hang" else "failed")
        await turn(session, "Okay, try again please.")  # the call goes on: the next turn is handled
        assert len(seen) == 2 and len(llm_.requests) >= 2
    finally:
        await session.aclose()
        await rt.aclose()
    assert SECRET not in caplog.text


async def test_missing_header_variable_fails_the_call_not_the_session(webhook, monkeypatch) -> None:
    base, seen = webhook
    monkeypatch.delenv("PARLEY_TOOL_SHOP_TOKEN", raising=False)
    llm_ = ToolCallingLLM("lookup_order", {"order": "D4"})
    rt = HttpToolRuntime()
    session, agent, _ = await call(f"{base}/fast", llm_, rt)
    try:
        await turn(session, "Where is order D4?")
        assert seen == [] and agent.spoken == ["Sorry, the order system is not answering."]
    finally:
        await session.aclose()
        await rt.aclose()
