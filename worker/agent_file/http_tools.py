"""HTTP tools: a webhook from the agent file becomes a LiveKit function tool the LLM can call.

The LLM's arguments go out as JSON (POST/PUT/PATCH) or as the query string (GET/DELETE); the JSON answer goes
back to the LLM. While a call runs longer than `hold_after_ms` the caller hears a hold line (from the phrase
cache when it is there); a call that fails or times out makes the agent say the tool's failure line and the
call goes on. Header values are read from the environment at call time and never logged.

The LLM's arguments are untrusted (a caller can steer the LLM): they are checked against the tool's schema
first (`tool_args`). The webhook's answer is untrusted too: redirects are not followed (they would carry the
headers and body to another, maybe internal, address), and at most `max_response_bytes` are read. Logs name
the error class only, never the URL, query or body (caller data).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from livekit.agents import RunContext, StopResponse, ToolError, function_tool
from livekit.agents.llm import RawFunctionTool

from .spec import DEFAULT_TOOL_ENV_PREFIX, HttpToolSpec
from .tool_args import ToolArgumentError, validate_arguments

log = logging.getLogger("parley.tools")

_ENV_REF = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)\}")
_MAX_ANSWER_CHARS = 4000  # what goes back into the LLM's context


class ToolEnvError(ValueError):
    """A header names an environment variable that is not set, or one outside the tools' prefix."""


class ToolHTTPError(RuntimeError):
    """The webhook answered with an error status, a redirect or too big a body."""


@dataclass
class ToolTimings:
    """Per call, for benchmarks: when the LLM's call started, the webhook's own time, the hold line."""

    started: float = 0.0
    request_ms: float | None = None  # the HTTP exchange itself
    total_ms: float | None = None  # the whole tool function
    hold_at: float | None = None  # when the hold line was queued (monotonic)
    outcome: str = ""


@dataclass
class HttpToolRuntime:
    """What every HTTP tool of one process shares: one connection pool and a place to record timings."""

    session: aiohttp.ClientSession | None = None
    env_prefix: str = DEFAULT_TOOL_ENV_PREFIX  # header ${VAR}s must start with it (PARLEY_TOOL_ENV_PREFIX)
    on_call: Callable[[str, ToolTimings], None] | None = None
    calls: list[tuple[str, ToolTimings]] = field(default_factory=list)

    def client(self) -> aiohttp.ClientSession:
        if self.session is None or self.session.closed:
            self.session = aiohttp.ClientSession()
        return self.session

    async def aclose(self) -> None:
        if self.session is not None:
            await self.session.close()

    def record(self, name: str, t: ToolTimings) -> None:
        self.calls.append((name, t))
        del self.calls[:-100]
        if self.on_call is not None:
            self.on_call(name, t)


def resolve_headers(
    spec: HttpToolSpec, environ: dict[str, str] | None = None, prefix: str = DEFAULT_TOOL_ENV_PREFIX
) -> dict[str, str]:
    """Header values with ${VAR} filled from the environment (ToolEnvError names a missing variable).
    Only variables starting with `prefix` may be read, so a tool can never send LIVEKIT_API_SECRET."""
    env = os.environ if environ is None else environ

    def one(m: re.Match[str]) -> str:
        if not m.group(1).startswith(prefix):
            raise ToolEnvError(f"tool {spec.name}: {m.group(1)} does not start with {prefix}")
        if m.group(1) not in env:
            raise ToolEnvError(f"tool {spec.name}: environment variable {m.group(1)} is not set")
        return env[m.group(1)]

    return {k: _ENV_REF.sub(one, v) for k, v in spec.headers.items()}


async def call_webhook(
    client: aiohttp.ClientSession, spec: HttpToolSpec, args: dict[str, Any], headers: dict[str, str]
) -> Any:
    """One HTTP exchange; the decoded JSON answer (or the text, for a non-JSON answer)."""
    timeout = aiohttp.ClientTimeout(total=spec.timeout_s)
    common: dict[str, Any] = {"headers": headers, "timeout": timeout, "allow_redirects": False}
    if spec.method in ("GET", "DELETE"):
        query = {k: v if isinstance(v, str) else json.dumps(v) for k, v in args.items() if v is not None}
        req = client.request(spec.method, spec.url, params=query, **common)
    else:
        req = client.request(spec.method, spec.url, json=args, **common)
    async with req as resp:
        if 300 <= resp.status < 400:
            raise ToolHTTPError(f"HTTP {resp.status}: redirects are not followed")
        if resp.status >= 400:
            raise ToolHTTPError(f"HTTP {resp.status}")
        raw = await read_capped(resp.content, spec.max_response_bytes)
        body = decode_body(raw, resp.charset)
    try:
        return json.loads(body) if body.strip() else {}
    except json.JSONDecodeError:
        return body


async def read_capped(stream: aiohttp.StreamReader, limit: int) -> bytes:
    """The whole body, or ToolHTTPError as soon as it passes `limit` bytes (the rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(limit + 1 - size):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise ToolHTTPError(f"answer larger than {limit} bytes")
    return b"".join(chunks)


def decode_body(raw: bytes, charset: str | None) -> str:
    """The answer as text: its declared charset, else UTF-8; undecodable bytes become U+FFFD, not an error."""
    try:
        return raw.decode(charset or "utf-8")
    except (LookupError, UnicodeDecodeError):
        return raw.decode("utf-8", errors="replace")


def _answer(data: Any) -> str:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return text[:_MAX_ANSWER_CHARS]


def _say_line(ctx: RunContext, text: str, *, add_to_chat_ctx: bool) -> Any:
    """Say a line from the agent's phrase cache when it holds it, else through the TTS."""
    fillers = getattr(ctx.session.current_agent, "fillers", None)
    if fillers is not None:
        handle = fillers.say_cached(text, add_to_chat_ctx=add_to_chat_ctx)
        if handle is not None:
            return handle
    return ctx.session.say(text, add_to_chat_ctx=add_to_chat_ctx)


def _hold_line(ctx: RunContext, spec: HttpToolSpec) -> Any:
    if spec.hold:
        return _say_line(ctx, spec.hold, add_to_chat_ctx=False)
    fillers = getattr(ctx.session.current_agent, "fillers", None)
    if fillers is not None:  # any of the agent's cached hold phrases (the filler policy picks one)
        return fillers.tool_filler()
    return None


def http_tool(spec: HttpToolSpec, runtime: HttpToolRuntime | None = None) -> RawFunctionTool:
    """The LiveKit function tool for one HTTP tool spec."""
    rt = runtime or HttpToolRuntime()
    schema = {"name": spec.name, "description": spec.description, "parameters": spec.parameters}

    async def run(raw_arguments: dict[str, Any], context: RunContext) -> str:
        t = ToolTimings(started=time.monotonic())
        hold: asyncio.TimerHandle | None = None

        def play_hold() -> None:
            t.hold_at = time.monotonic()
            _hold_line(context, spec)

        try:
            try:
                args = validate_arguments(spec.parameters, raw_arguments)
            except ToolArgumentError as e:
                t.outcome = "bad_arguments"
                log.warning("tool arguments refused", extra={"tool": spec.name, "error": type(e).__name__})
                raise ToolError(str(e)) from None  # one line back to the LLM, which may call again
            headers = resolve_headers(spec, prefix=rt.env_prefix)
            hold = asyncio.get_running_loop().call_later(spec.hold_after_ms / 1000, play_hold)
            r0 = time.monotonic()
            data = await call_webhook(rt.client(), spec, args, headers)
            t.request_ms = (time.monotonic() - r0) * 1000
            t.outcome = "ok"
            return _answer(data)
        except ToolError:
            raise
        except Exception as e:  # every failure class gets the failure line; the call goes on
            t.outcome = "timeout" if isinstance(e, TimeoutError) else "failed"
            status = str(e).split(":")[0] if isinstance(e, ToolHTTPError) else None
            log.warning(
                "tool failed; saying its failure line",
                extra={
                    "tool": spec.name,
                    "error": type(e).__name__,
                    **({"status": status} if status else {}),
                },
            )
            _say_line(context, spec.failure, add_to_chat_ctx=True)
            raise StopResponse() from None  # the failure line is this turn's answer
        finally:
            if hold is not None:
                hold.cancel()
            t.total_ms = (time.monotonic() - t.started) * 1000
            log.info(
                "tool call",
                extra={"tool": spec.name, "outcome": t.outcome, "ms": round(t.total_ms, 1)},
            )
            rt.record(spec.name, t)

    return function_tool(run, raw_schema=schema)


def http_tools(specs: list[HttpToolSpec], runtime: HttpToolRuntime | None = None) -> list[RawFunctionTool]:
    """The function tools for an agent's HTTP tool specs, sharing one runtime (pool, env prefix)."""
    rt = runtime or HttpToolRuntime()
    return [http_tool(s, rt) for s in specs]
