"""Tool calls a small model writes as text: made into real calls, never spoken.

Small local models (SmolLM2, Qwen2.5-Coder 0.5B on llama.cpp) return no parsed `tool_calls`; they write the
call as JSON in the reply, `{"name": "find_slots", "arguments": {...}}` (sometimes in a code fence, doubled
braces or `<tool_call>` tags), and the voice then reads it aloud (issue 63). This filter holds reply text from
the first `{`, `<tool_call>` or code fence on; at the end a held call naming one of the agent's tools becomes
a real tool-call chunk (its arguments are then validated like any other call), and any other JSON-looking
text is dropped. Text before it, and text that only contains a brace, is passed through.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Collection
from typing import Any

from livekit.agents import llm

log = logging.getLogger("parley.agent")

_OPENERS = ("{", "```", "<tool_call>")


def _hold_at(text: str) -> int:
    """Where tool-call text may start in `text` (-1 if nowhere)."""
    found = [i for i in (text.find(o) for o in _OPENERS) if i >= 0]
    return min(found) if found else -1


def parse_tool_text(text: str, tool_names: Collection[str]) -> list[tuple[str, dict[str, Any]]]:
    """Every `{"name": ..., "arguments": {...}}` (or "function"/"parameters") in text naming a known tool."""
    body = text.replace("<tool_call>", " ").replace("</tool_call>", " ")
    body = re.sub(r"```(?:json)?", " ", body)
    if "{{" in body:  # the 1.5B's doubled braces (a nested object's "}}" alone is ordinary JSON)
        body = body.replace("{{", "{").replace("}}", "}")
    calls = []
    decoder = json.JSONDecoder()
    i = body.find("{")
    while i >= 0:
        try:
            obj, end = decoder.raw_decode(body, i)
        except json.JSONDecodeError:
            i = body.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            name = obj.get("name") or obj.get("function")
            args = obj.get("arguments", obj.get("parameters", {}))
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except json.JSONDecodeError:
                    args = None
            if isinstance(name, str) and name in tool_names and isinstance(args, dict):
                calls.append((name, args))
        i = body.find("{", end)
    return calls


def tool_names(tools: Collection[Any]) -> set[str]:
    return {str(t.id) for t in tools if getattr(t, "id", None)}


def _looks_like_code(text: str) -> bool:
    return bool(re.search(r'[{\[]\s*"|```|<tool_call>|"\s*:', text))


async def tool_calls_from_text(chunks: AsyncIterable[Any], tool_names: Collection[str]) -> AsyncIterator[Any]:
    """The LLM stream with tool calls written as text turned into tool-call chunks (see the module doc)."""
    held = ""
    async for chunk in chunks:
        text = chunk if isinstance(chunk, str) else None
        if isinstance(chunk, llm.ChatChunk) and chunk.delta and chunk.delta.content:
            text = chunk.delta.content
            if chunk.delta.tool_calls or chunk.usage is not None:  # keep the rest of the chunk
                yield llm.ChatChunk(
                    id=chunk.id,
                    delta=llm.ChoiceDelta(role="assistant", tool_calls=chunk.delta.tool_calls),
                    usage=chunk.usage,
                )
        if text is None:
            yield chunk
            continue
        if held:
            held += text
            continue
        at = _hold_at(text)
        if at < 0:
            yield text
            continue
        if at > 0:
            yield text[:at]
        held = text[at:]
    if not held:
        return
    calls = parse_tool_text(held, tool_names)
    for name, args in calls:
        log.info("tool call written as text; calling it", extra={"tool": name})
        call = llm.FunctionToolCall(
            name=name, arguments=json.dumps(args), call_id=f"text_{uuid.uuid4().hex[:12]}"
        )
        yield llm.ChatChunk(id=call.call_id, delta=llm.ChoiceDelta(role="assistant", tool_calls=[call]))
    if not calls and not _looks_like_code(held):
        yield held  # a brace in ordinary text
    elif not calls:
        log.warning("reply held back: it was code or a call to no known tool")
