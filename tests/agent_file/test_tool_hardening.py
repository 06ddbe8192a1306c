"""HTTP tools against a hostile caller or webhook: no redirects, a size cap, charset fallback, schema-checked
arguments, the failure line on every error class, no caller data in the logs, and header variables only
under the tools' prefix. The webhooks are real aiohttp servers on loopback; the TTS is the real CPU voice;
only the LLM is a double (ToolCallingLLM: an LLM that calls tools, see conftest)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from livekit.agents.voice import AgentSession

from plugins.cpu_voice import CpuVoiceTTS
from worker.agent import AgentOptions
from worker.agent_file import AgentFileError, HttpToolRuntime, http_tools, parse_agent
from worker.agent_file.__main__ import check
from worker.agent_file.http_tools import (
    ToolEnvError,
    ToolHTTPError,
    call_webhook,
    decode_body,
    resolve_headers,
)
from worker.agent_file.runtime import check_tool_env
from worker.agent_file.tool_args import ToolArgumentError, validate_arguments
from worker.settings import SettingsError

from .conftest import RealTimeSpeaker, ToolCallingLLM
from .test_http_tools import TextTap, turn

SECRET = "s3cr3t-token-value-9f2c"
FAILURE = "Sorry, the order system is not answering."
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(handler: Handler) -> tuple[str, web.AppRunner]:
    app = web.Application()
    app.router.add_route("*", "/{name}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return f"http://127.0.0.1:{port}", runner


@pytest.fixture
async def hooks() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler) -> str:
        base, runner = await serve(handler)
        runners.append(runner)
        return base

    yield start
    for r in runners:
        await r.cleanup()


def tool(url: str, **over: Any) -> Any:
    raw = {
        "type": "http",
        "name": "lookup_order",
        "description": "Look up an order.",
        "parameters": {
            "type": "object",
            "properties": {
                "order": {"type": "string", "maxLength": 12},
                "when": {"type": "string", "enum": ["today", "tomorrow"]},
                "count": {"type": "integer", "minimum": 1},
            },
            "required": ["order"],
        },
        "url": url,
        "headers": {"Authorization": "Bearer ${PARLEY_TOOL_SHOP_TOKEN}"},
        "hold": "Let me look that up.",
        "failure": FAILURE,
        "hold_after_ms": 5000,
        **over,
    }
    return parse_agent({"name": "shop", "greeting": None, "tools": [raw]})


# --- the webhook exchange itself ---------------------------------------------------------------------


async def test_redirect_is_not_followed_so_headers_and_body_stay_home(hooks) -> None:
    inner: list[dict[str, Any]] = []

    async def internal(request: web.Request) -> web.Response:
        inner.append({"auth": request.headers.get("Authorization"), "body": await request.text()})
        return web.json_response({"admin": True})

    internal_base = await hooks(internal)

    async def redirector(_: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(f"{internal_base}/admin")

    base = await hooks(redirector)
    spec = tool(f"{base}/orders").http_tools[0]
    async with aiohttp.ClientSession() as client:
        with pytest.raises(ToolHTTPError, match="redirects are not followed"):
            await call_webhook(client, spec, {"order": "A1"}, {"Authorization": f"Bearer {SECRET}"})
    assert inner == []


async def test_answer_larger_than_the_tools_cap_is_refused(hooks) -> None:
    async def big(_: web.Request) -> web.Response:
        return web.Response(body=b'{"x": "' + b"a" * 100_000 + b'"}', content_type="application/json")

    base = await hooks(big)
    async with aiohttp.ClientSession() as client:
        with pytest.raises(ToolHTTPError, match="larger than 65536 bytes"):
            await call_webhook(client, tool(f"{base}/o").http_tools[0], {"order": "A1"}, {})
        roomy = tool(f"{base}/o", max_response_bytes=200_000).http_tools[0]
        assert len((await call_webhook(client, roomy, {"order": "A1"}, {}))["x"]) == 100_000


def test_answer_bytes_decode_with_a_charset_fallback() -> None:
    assert decode_body("café".encode("latin-1"), "latin-1") == "café"
    assert decode_body(b"caf\xe9", "utf-8") == "caf\ufffd"  # bad bytes for the declared charset
    assert decode_body(b"ok", "no-such-charset") == "ok"
    assert decode_body("ü".encode(), None) == "ü"


def test_get_arguments_cannot_override_the_urls_own_query() -> None:
    with pytest.raises(AgentFileError, match="'order' is also fixed in the url's query"):
        tool("http://127.0.0.1:9/o?order=fixed", method="GET")
    assert tool("http://127.0.0.1:9/o?order=fixed", method="POST").http_tools


# --- arguments ---------------------------------------------------------------------------------------


def test_arguments_are_checked_against_the_schema_and_unknown_keys_dropped() -> None:
    schema = tool("http://127.0.0.1:9/o").http_tools[0].parameters
    assert validate_arguments(schema, {"order": "A1", "booking_id": "someone-elses"}) == {"order": "A1"}
    assert validate_arguments(schema, {"order": "A1", "when": None}) == {"order": "A1"}
    bad = [
        ({"when": "today"}, "missing required argument order"),
        ({"order": 17}, "argument order must be string"),
        ({"order": "x" * 13}, "argument order is longer than 12 characters"),
        ({"order": "A1", "when": "yesterday"}, "argument when must be one of 'today', 'tomorrow'"),
        ({"order": "A1", "count": 0}, "argument count must be at least 1"),
        ({"order": "A1", "count": True}, "argument count must be integer"),
        (["A1"], "arguments must be a JSON object"),
    ]
    for args, message in bad:
        with pytest.raises(ToolArgumentError) as err:
            validate_arguments(schema, args)
        assert str(err.value) == message and "\n" not in message
    # a string the schema leaves unbounded is still capped
    loose = {"type": "object", "properties": {"note": {"type": "string"}}}
    with pytest.raises(ToolArgumentError, match="longer than 500"):
        validate_arguments(loose, {"note": "n" * 501})


# --- header variables ---------------------------------------------------------------------------------


def test_header_variables_are_limited_to_the_tool_prefix(tmp_path: Path, monkeypatch) -> None:
    spec = tool("http://127.0.0.1:9/o", headers={"X-Key": "${LIVEKIT_API_SECRET}"})
    env = {"LIVEKIT_API_SECRET": "lk-secret"}
    with pytest.raises(ToolEnvError, match="LIVEKIT_API_SECRET does not start with PARLEY_TOOL_"):
        resolve_headers(spec.http_tools[0], env)
    assert resolve_headers(spec.http_tools[0], env, prefix="LIVEKIT_") == {"X-Key": "lk-secret"}
    with pytest.raises(SettingsError, match="LIVEKIT_API_SECRET must start with PARLEY_TOOL_"):
        check_tool_env(spec, "PARLEY_TOOL_")
    agent = tmp_path / "a.yaml"
    agent.write_text(
        "name: a\ntools:\n  - {type: http, name: t, description: d, url: 'http://127.0.0.1:9/',"
        " headers: {X-Key: '${LIVEKIT_API_SECRET}'}}\n"
    )
    code, line = check(str(agent))
    assert code == 1 and "must start with PARLEY_TOOL_" in line


# --- through a real session ---------------------------------------------------------------------------


async def session_with(spec: Any, llm_: ToolCallingLLM, rt: HttpToolRuntime) -> tuple[AgentSession, TextTap]:
    session = AgentSession(llm=llm_, tts=CpuVoiceTTS(voice="heart"), user_away_timeout=None)
    session.output.audio = RealTimeSpeaker()
    agent = TextTap(AgentOptions(greeting=""), tools=http_tools(spec.http_tools, rt))
    await session.start(agent, record=False)
    return session, agent


pytestmark = pytest.mark.slow


async def test_bad_arguments_get_one_line_back_to_the_llm_and_never_reach_the_webhook(
    hooks, monkeypatch
) -> None:
    seen: list[Any] = []

    async def hook(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return web.json_response({"status": "ok"})

    base = await hooks(hook)
    monkeypatch.setenv("PARLEY_TOOL_SHOP_TOKEN", SECRET)
    llm_ = ToolCallingLLM("lookup_order", {"order": "x" * 5000, "cancel_booking": "B-99"})
    rt = HttpToolRuntime()
    session, _ = await session_with(tool(f"{base}/o"), llm_, rt)
    try:
        await turn(session, "Look up my order please.")
        assert seen == []
        outputs = [i for i in llm_.requests[-1].items if i.type == "function_call_output"]
        assert outputs and outputs[-1].is_error
        assert "argument order is longer than 12 characters" in outputs[-1].output
        assert rt.calls[-1][1].outcome == "bad_arguments"
        llm_.arguments = {"order": "A17", "cancel_booking": "B-99"}
        await turn(session, "It is A17.")
        assert seen == [{"order": "A17"}]  # the undeclared key was dropped
    finally:
        await session.aclose()
        await rt.aclose()


@pytest.mark.parametrize("case", ["header-injection", "undecodable-json", "redirect-loop"])
async def test_every_error_class_says_the_failure_line_and_logs_no_caller_data(
    hooks, monkeypatch, caplog, case: str
) -> None:
    async def hook(request: web.Request) -> web.StreamResponse:
        if case == "redirect-loop":
            raise web.HTTPFound(str(request.rel_url))
        # declared UTF-8, not UTF-8 and not JSON: decoded with replacement and handed over as text
        return web.Response(body=b"\xff\xfe{bad", content_type="application/json", charset="utf-8")

    base = await hooks(hook)
    # a header value with a line break makes aiohttp raise ValueError before anything is sent
    token = "x\r\nX-Injected: 1" if case == "header-injection" else SECRET
    monkeypatch.setenv("PARLEY_TOOL_SHOP_TOKEN", token)
    caplog.set_level(logging.DEBUG)
    order = "ZQ-CALLER-71"
    llm_ = ToolCallingLLM("lookup_order", {"order": order})
    rt = HttpToolRuntime()
    session, agent = await session_with(tool(f"{base}/o", method="GET"), llm_, rt)
    try:
        await turn(session, "Where is my order?")
        if case == "undecodable-json":
            assert rt.calls[-1][1].outcome == "ok"
            assert any("\ufffd" in s or "bad" in s for s in agent.spoken), agent.spoken
        else:
            assert agent.spoken == [FAILURE], agent.spoken
            assert rt.calls[-1][1].outcome == "failed"
            failed = [r for r in caplog.records if r.getMessage().startswith("tool failed")]
            assert failed and failed[-1].__dict__["error"] in ("ValueError", "ToolHTTPError")
        await asyncio.sleep(0)
    finally:
        await session.aclose()
        await rt.aclose()
    ours = " ".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records if r.name.startswith("parley"))
    assert "tool call" in ours and order not in ours and SECRET not in ours
