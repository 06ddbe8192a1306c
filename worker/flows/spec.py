"""The `flow:` section of an agent file: the tasks the agent finishes (book, move, cancel, ...), the slots
each needs, the tool it calls once they are filled and confirmed, and the facts it answers off the path.

Lines are templates: `{slot}` is the slot's spoken form ("Tuesday December 8", "9 a.m."); in a tool's
`arguments` it is the machine form ("2026-12-08", "09:00"). Every placeholder must name a slot of its task.
"""

from __future__ import annotations

import re
import string
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SlotType = Literal["date", "time", "weekday", "name", "phone", "email", "enum", "text"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SlotSpec(_Strict):
    type: SlotType
    ask: str = Field(min_length=1)  # the question when the slot is missing
    said: str = "{value}"  # how a filled slot is played back ("with {value}", "on {value}")
    values: dict[str, list[str]] = Field(default_factory=dict)  # enum: value -> other ways to say it
    required: bool = True

    @model_validator(mode="after")
    def _enum(self) -> SlotSpec:
        if self.type == "enum" and not self.values:
            raise ValueError("an enum slot needs values")
        if self.type != "enum" and self.values:
            raise ValueError("values are for enum slots only")
        return self


class TaskSpec(_Strict):
    when: list[str] = Field(min_length=1)  # words that start this task ("book", "appointment", ...)
    slots: dict[str, SlotSpec] = Field(min_length=1)
    confirm: str  # asked once every required slot is filled
    tool: str  # the HTTP tool called on "yes"
    arguments: dict[str, str]  # tool argument -> template
    done: str  # said after the tool succeeded
    failure: str  # said when the tool refused; then the `retry` slots are asked again
    retry: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _placeholders(self) -> TaskSpec:
        names = set(self.slots)
        lines = [self.confirm, self.done, self.failure, *self.arguments.values()]
        lines += [s.ask for s in self.slots.values()] + [s.said for s in self.slots.values()]
        for line in lines:
            for field in placeholders(line):
                if field not in names and field != "value":
                    raise ValueError(f"{{{field}}} in {line!r} is not a slot of this task")
        unknown = [r for r in self.retry if r not in names]
        if unknown:
            raise ValueError(f"retry names an unknown slot {unknown[0]!r}")
        return self


class AnswerSpec(_Strict):
    about: list[str] = Field(min_length=1)  # words of a question this answers ("open", "hours", "price")
    say: str = Field(min_length=1)


class FlowSpec(_Strict):
    tasks: dict[str, TaskSpec] = Field(min_length=1)
    answers: list[AnswerSpec] = Field(default_factory=list)
    offer: str = "How can I help you today?"  # no task yet and nothing to answer
    anything_else: str = "Is there anything else I can help with?"
    change: str = "Sure, what should I change?"
    unknown: str = "I'm not sure about that, but the front desk can tell you."
    goodbye: str = "Thanks for calling. Goodbye!"

    @field_validator("tasks")
    @classmethod
    def _names(cls, v: dict[str, TaskSpec]) -> dict[str, TaskSpec]:
        for name in v:
            if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
                raise ValueError(f"{name!r} is not a task name: lower-case letters, digits and _")
        return v


def placeholders(template: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(template) if f]


def check_flow(flow: FlowSpec, tool_names: set[str]) -> None:
    """The agent-file level check: each task's tool is one of the file's HTTP tools (ValueError)."""
    for name, task in flow.tasks.items():
        if task.tool not in tool_names:
            raise ValueError(f"flow.tasks.{name}.tool: no http tool named {task.tool!r}")
