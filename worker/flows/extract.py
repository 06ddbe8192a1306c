"""The second reader of a slot: the LLM under a JSON schema, for an answer the parsers could not read.

Asked only for the slot the agent just asked for, with the caller's words, today's date and the slot's type;
the server may only write `{"value": ...}` (llama.cpp's `response_format` json_schema; an enum slot's
values are the schema's enum), so even a 135M model cannot write a speech or a tool call here. What it
returns is read again by the slot's own parser: the LLM may rephrase ("the day after Christmas" →
"2026-12-26"), never decide.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from .clock import date_line
from .engine import Extractor
from .spec import SlotSpec

log = logging.getLogger("parley.flow")

_HINT = {
    "date": "the day as YYYY-MM-DD",
    "time": "the time as HH:MM, 24-hour clock",
    "weekday": "the weekday in English, lower case",
    "name": "the person's full name",
    "phone": "the phone number's digits",
    "email": "the email address",
    "enum": "one of the allowed values",
    "text": "the answer in a few words",
}


def slot_schema(slot: SlotSpec) -> dict[str, Any]:
    value: dict[str, Any] = {"type": "string", "maxLength": 60}
    if slot.type == "enum":
        value = {"type": "string", "enum": [*slot.values, "unknown"]}
    return {"type": "object", "properties": {"value": value}, "required": ["value"]}


def llm_extractor(client: Any, model: str, timezone: str, timeout_s: float = 3.0) -> Extractor:
    """An extractor on an OpenAI-compatible client (`openai.AsyncClient`); None back on any failure."""

    async def extract(text: str, name: str, slot: SlotSpec) -> str | None:
        messages = [
            {
                "role": "system",
                "content": f"{date_line(timezone)} Read {_HINT[slot.type]} from what the caller said, "
                'for the field "' + name + '". Write "unknown" if it is not there.',
            },
            {"role": "user", "content": text},
        ]
        try:
            resp = await client.chat.completions.create(
                model=model,
                messages=messages,
                temperature=0,
                max_tokens=32,
                timeout=timeout_s,
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "slot", "schema": slot_schema(slot), "strict": True},
                },
            )
            value = json.loads(resp.choices[0].message.content or "{}").get("value")
        except Exception as e:  # an extractor that fails leaves the slot to be asked again
            log.warning("slot extraction failed", extra={"error": type(e).__name__})
            return None
        if not isinstance(value, str) or value.strip().lower() in ("", "unknown"):
            return None
        return value.strip()

    return extract
