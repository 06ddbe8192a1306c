"""A flow in an agent file is checked at load: one line names what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from worker.agent_file import AgentFileError, parse_agent

TOOL = {"type": "http", "name": "book", "description": "Book.", "url": "http://127.0.0.1:1/book"}


def _agent(**task: Any) -> dict[str, Any]:
    base = {
        "when": ["book"],
        "slots": {"day": {"type": "date", "ask": "Which day?"}},
        "confirm": "On {day}?",
        "tool": "book",
        "arguments": {"slot": "{day}"},
        "done": "Booked for {day}.",
        "failure": "Taken.",
    }
    return {"name": "a", "tools": [TOOL], "flow": {"tasks": {"book": {**base, **task}}}}


def test_a_good_flow_loads() -> None:
    spec = parse_agent(_agent())
    assert spec.flow is not None and spec.timezone == "UTC"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tool": "nope"}, "flow.tasks.book.tool: no http tool named 'nope'"),
        ({"done": "Booked for {when}."}, "{when} in 'Booked for {when}.' is not a slot of this task"),
        ({"retry": ["time"]}, "retry names an unknown slot 'time'"),
        ({"slots": {"who": {"type": "enum", "ask": "Who?"}}}, "an enum slot needs values"),
        ({"slots": {"who": {"type": "colour", "ask": "?"}}}, "flow.tasks.book.slots.who.type"),
    ],
)
def test_a_bad_flow_is_one_line(change: dict[str, Any], message: str) -> None:
    with pytest.raises(AgentFileError, match=None) as err:
        parse_agent(_agent(**change))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_an_unknown_time_zone_is_refused() -> None:
    with pytest.raises(AgentFileError, match="unknown time zone 'Mars/Base'"):
        parse_agent({**_agent(), "timezone": "Mars/Base"})
