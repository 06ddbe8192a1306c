"""An agent file's flow as a Parley agent: the flow answers in the LLM's place inside the agent's `llm_node`
(worker/agent.py), so the session, turn handling, fillers, phrase cache and TTS are the same as for every
Parley agent. The flow calls the file's HTTP tools itself (validated as any LLM-requested call), so no tool
call is ever written as text, let alone spoken."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from livekit.agents import Agent, llm

from ..agent import AgentOptions, FlowTool, ParleyAgent
from ..agent_file.http_tools import HttpToolRuntime, call_webhook, resolve_headers
from ..agent_file.spec import HttpToolSpec
from ..agent_file.tool_args import validate_arguments
from .spec import FlowSpec


def http_flow_tools(specs: Sequence[HttpToolSpec], runtime: HttpToolRuntime) -> dict[str, FlowTool]:
    """The flow's way to call the agent file's HTTP tools: the same schema check, headers and limits as a
    call the LLM asks for (worker/agent_file/http_tools.py), without the hold line."""

    def caller(spec: HttpToolSpec) -> FlowTool:
        async def call(arguments: dict[str, Any]) -> Any:
            args = validate_arguments(spec.parameters, arguments)
            headers = resolve_headers(spec, prefix=runtime.env_prefix)
            return await call_webhook(runtime.client(), spec, args, headers)

        return call

    return {s.name: caller(s) for s in specs}


def make_flow_agent(
    flow_spec: FlowSpec | None,
    timezone: str,
    http_specs: Sequence[HttpToolSpec],
    runtime: HttpToolRuntime,
    options: AgentOptions,
    tools: Sequence[llm.Tool] = (),
    own: Agent | None = None,
) -> ParleyAgent:
    """A Parley agent whose replies come from a flow (the file's, else the one `own` declares) that calls the
    file's HTTP tools through `runtime`, this call's own pool, closed with the agent."""
    return ParleyAgent(
        replace(options, timezone=timezone),
        own,
        tools=tools,
        flow=flow_spec,
        flow_tools=http_flow_tools(http_specs, runtime),
        on_close=runtime.aclose,
    )
