"""The flow inside a LiveKit agent: the agent's `llm_node` asks the flow for the line to say, so the session,
turn handling, fillers, phrase cache and TTS are the same as for every Parley agent; only the reply's source
differs. The flow calls its tools itself (through the agent file's HTTP tool specs, validated as any
LLM-requested call), so no tool call is ever written as text, let alone spoken."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from livekit.agents import llm
from livekit.agents.voice import ModelSettings

from ..agent import AgentOptions, ParleyAgent
from ..agent_file.http_tools import HttpToolRuntime, call_webhook, resolve_headers
from ..agent_file.spec import HttpToolSpec
from ..agent_file.tool_args import validate_arguments
from .clock import today_in
from .engine import Flow, ToolCaller
from .spec import FlowSpec

log = logging.getLogger("parley.flow")


def http_caller(specs: Sequence[HttpToolSpec], runtime: HttpToolRuntime) -> ToolCaller:
    """The flow's way to call the agent file's HTTP tools: the same schema check, headers and limits as a
    call the LLM asks for (worker/agent_file/http_tools.py)."""
    by_name = {s.name: s for s in specs}

    async def call(name: str, arguments: dict[str, Any]) -> Any:
        spec = by_name[name]
        args = validate_arguments(spec.parameters, arguments)
        headers = resolve_headers(spec, prefix=runtime.env_prefix)
        return await call_webhook(runtime.client(), spec, args, headers)

    return call


class FlowAgent(ParleyAgent):
    """A Parley agent whose replies come from its flow (worker/flows/engine.py)."""

    def __init__(
        self, options: AgentOptions, flow: Flow, runtime: HttpToolRuntime | None = None, **kwargs: object
    ) -> None:
        super().__init__(options, **kwargs)
        self.flow = flow
        self.runtime = runtime  # the call's own HTTP pool, closed with the call

    async def on_exit(self) -> None:
        if self.runtime is not None:
            await self.runtime.aclose()

    async def llm_node(  # type: ignore[override]
        self, chat_ctx: llm.ChatContext, tools: list[llm.Tool], model_settings: ModelSettings
    ) -> AsyncIterator[str | llm.ChatChunk]:
        text = last_caller_text(chat_ctx)
        if text is None:
            return
        yield await self.flow.respond(text)


def last_caller_text(chat_ctx: llm.ChatContext) -> str | None:
    """What the caller said since the agent last spoke: a turn the caller paused in can arrive as two
    messages ("could Doctor Morgan see me" ... "for a cleaning"), and the flow reads them as one."""
    parts: list[str] = []
    for item in reversed(chat_ctx.items):
        if item.type != "message":
            continue
        if item.role != "user":
            break
        parts.append(item.text_content or "")
    return " ".join(reversed(parts)).strip() or None


def make_flow_agent(
    flow_spec: FlowSpec,
    timezone: str,
    http_specs: Sequence[HttpToolSpec],
    runtime: HttpToolRuntime,
    options: AgentOptions,
    tools: Sequence[llm.Tool] = (),
) -> FlowAgent:
    flow = Flow(flow_spec, http_caller(http_specs, runtime), today=today_in(timezone))
    return FlowAgent(options, flow, runtime, tools=list(tools))
