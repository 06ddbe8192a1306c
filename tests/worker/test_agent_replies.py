"""ParleyAgent's reply path through a real AgentSession: tool calls survive the sentence budget, silence after
a tool's answer is allowed, and a reply cut short is answered as one turn (what both kinds of agent share is
in test_agent_kinds.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from livekit.agents import AgentSession, function_tool, llm

from simulator.fakes import ScriptedLLM
from worker.agent import AgentOptions, ParleyAgent, limit_reply


def _agent(**kw: Any) -> ParleyAgent:
    return ParleyAgent(AgentOptions(greeting=""), **kw)


async def test_tool_call_after_text_still_runs() -> None:
    ended: list[bool] = []

    @function_tool
    async def end_call() -> str:
        """End the call."""
        ended.append(True)
        return "call ended"

    fake = ScriptedLLM(steps=[["Okay, goodbye.", "tool:end_call"], [""]])
    async with AgentSession(llm=fake) as session:
        await session.start(_agent(tools=[end_call]))
        result = await session.run(user_input="that's all, bye")
    result.expect.contains_function_call(name="end_call")
    assert ended == [True]


async def test_silence_after_a_tool_result_is_allowed() -> None:
    @function_tool
    async def note() -> str:
        """Take a note."""
        return "noted"

    fake = ScriptedLLM(steps=[["tool:note"], []])
    async with AgentSession(llm=fake) as session:
        await session.start(_agent(tools=[note]))
        result = await session.run(user_input="note that down")
    said = [e.item.text_content for e in result.events if e.type == "message" and e.item.role == "assistant"]
    assert said == []  # the follow-up after the tool output said nothing, and Parley did not fill it
    assert len(fake.requests) == 2


async def _chunks(items: list[llm.ChatChunk]) -> AsyncIterator[llm.ChatChunk]:
    for c in items:
        yield c


async def test_budget_passes_tool_calls_and_usage_without_their_text() -> None:
    call = llm.FunctionToolCall(name="end_call", arguments="{}", call_id="c1")
    usage = llm.CompletionUsage(completion_tokens=3, prompt_tokens=5, total_tokens=8)
    items = [
        llm.ChatChunk(id="1", delta=llm.ChoiceDelta(role="assistant", content="Bye.")),
        llm.ChatChunk(id="2", delta=llm.ChoiceDelta(role="assistant", content=" x", tool_calls=[call])),
        llm.ChatChunk(id="3", usage=usage),
    ]
    out = [o async for o in limit_reply(_chunks(items), 3)]
    assert [o for o in out if isinstance(o, str)] == ["Bye.", " x"]
    chunks = [o for o in out if isinstance(o, llm.ChatChunk)]
    assert chunks[0].delta is not None and chunks[0].delta.tool_calls == [call]
    assert chunks[0].delta.content is None
    assert chunks[1].usage == usage


async def test_a_reply_cut_short_by_the_caller_going_on_is_answered_as_one_turn() -> None:
    """The agent answers at a pause, the caller goes on and cuts it after a word or two: the next reply's
    LLM gets the caller's whole sentence as one message (worker/context.py join_cut_in)."""
    fake = ScriptedLLM(reply="Sounds good, we will see you both then.", word_delay_s=0.1)
    async with AgentSession(llm=fake) as session:
        await session.start(_agent())
        early = session.generate_reply(user_input="My sister can bring me over on,")
        while not fake.requests:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.15)  # a word or two of it out (one every 0.1 s)
        early.interrupt()
        await early
        await session.run(user_input="the ninth of June.")
    cut = next(m for m in session.history.items if m.type == "message" and m.role == "assistant")
    assert cut.interrupted and 0 < len((cut.text_content or "").split()) <= 3  # the history keeps it
    sent = [m for m in fake.requests[-1].items if m.type == "message" and m.role != "system"]
    assert [(m.role, m.text_content) for m in sent] == [
        ("user", "My sister can bring me over on, the ninth of June.")
    ]
