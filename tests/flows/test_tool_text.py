"""Tool calls written as text by a small model: made into calls, never passed on to the voice; the JSON
samples are the shapes SmolLM2 and Qwen2.5-Coder wrote in issue 63's calls."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from worker.tool_text import parse_tool_text, tool_calls_from_text

TOOLS = {"find_slots", "book_appointment"}


async def _run(*parts: str) -> list[Any]:
    async def stream() -> AsyncIterator[str]:
        for p in parts:
            yield p

    return [c async for c in tool_calls_from_text(stream(), TOOLS)]


async def test_a_call_written_as_json_becomes_a_call_and_is_not_spoken() -> None:
    out = await _run("Let me check. ", '{"name": "find_slots", ', '"arguments": {"day": "2026-12-08"}}')
    assert out[0] == "Let me check. "
    calls = [c.delta.tool_calls[0] for c in out[1:]]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("find_slots", {"day": "2026-12-08"})]


def test_doubled_braces_fences_and_tags_are_read() -> None:
    text = '```json\n{{"name": "book_appointment", "parameters": {{"name": "Alex"}}}}\n```'
    assert parse_tool_text(text, TOOLS) == [("book_appointment", {"name": "Alex"})]
    tagged = '<tool_call>{"function": "find_slots", "arguments": "{\\"day\\": \\"friday\\"}"}</tool_call>'
    assert parse_tool_text(tagged, TOOLS) == [("find_slots", {"day": "friday"})]


async def test_json_naming_no_tool_is_dropped_and_plain_braces_pass() -> None:
    assert await _run('{"name": "delete_everything", "arguments": {}}') == []
    assert await _run("Smile {wide} please.") == ["Smile ", "{wide} please."]
