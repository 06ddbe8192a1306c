"""The dental example's flow against the example booking service's real calendar (in process, no HTTP)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from examples.booking_service import Calendar
from worker.agent_file import load_agent_file
from worker.flows import Flow

ROOT = Path(__file__).resolve().parents[2]
TODAY = dt.date(2026, 12, 7)  # a Monday


def calendar_caller(calendar: Calendar) -> Any:
    """The booking tools of examples/dental_clinic.yaml, answered by the calendar the service serves."""

    async def call(name: str, args: dict[str, Any]) -> Any:
        if name == "book_appointment":
            return calendar.book(
                args["name"], args["dentist"], args["slot"], args.get("service") or "checkup"
            )
        if name == "move_appointment":
            return calendar.move(calendar.find(args), args["slot"])
        if name == "cancel_appointment":
            return calendar.cancel(calendar.find(args))
        raise AssertionError(f"unexpected tool {name}")

    return call


@pytest.fixture
def calendar() -> Calendar:
    return Calendar(start=TODAY)


@pytest.fixture
def dental_flow(calendar: Calendar) -> Flow:
    spec = load_agent_file(ROOT / "examples/dental_clinic.yaml")
    assert spec.flow is not None
    return Flow(spec.flow, calendar_caller(calendar), today=TODAY)
