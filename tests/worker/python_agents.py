"""Python entry-point agents for the agent-behaviour tests (test_agent_kinds.py): the example dental
receptionist written as a developer writes a LiveKit agent (instructions, `@function_tool` methods, a helper
method and state of its own), its tools calling the example booking service over HTTP. The flow variant
declares the same flow the agent file has. The test points `BOOKING_URL` at its own service."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
from livekit.agents import Agent, RunContext, ToolError, function_tool

from worker.agent_file import load_agent_file

BOOKING_URL = "http://127.0.0.1:8765"
DENTAL = load_agent_file(Path(__file__).resolve().parents[2] / "examples/dental_clinic.yaml")


class Receptionist(Agent):
    def __init__(self) -> None:
        super().__init__(instructions=DENTAL.instructions)
        self.booked: list[str] = []

    async def _post(self, action: str, body: dict[str, Any]) -> str:
        async with aiohttp.ClientSession() as http, http.post(f"{BOOKING_URL}/{action}", json=body) as r:
            out = await r.json()
        if r.status != 200:
            raise ToolError(out.get("error", f"booking service: {r.status}"))
        return json.dumps(out)

    @function_tool
    async def book_appointment(
        self, context: RunContext, name: str, dentist: str, slot: str, service: str = "checkup"
    ) -> str:
        """Book a free slot once the caller has agreed to it and given their name.

        Args:
            name: the caller's name
            dentist: Dr. Morgan or Dr. Patel
            slot: YYYY-MM-DD HH:MM
            service: cleaning, checkup or filling
        """
        out = await self._post("book", {"name": name, "dentist": dentist, "slot": slot, "service": service})
        self.booked.append(slot)
        return out


class FlowReceptionist(Receptionist):
    flow = DENTAL.flow
    timezone = DENTAL.timezone

    @function_tool
    async def move_appointment(self, name: str, slot: str) -> str:
        """Move the booking under a name to another free slot (YYYY-MM-DD HH:MM)."""
        return await self._post("move", {"name": name, "slot": slot})

    @function_tool
    async def cancel_appointment(self, name: str) -> str:
        """Cancel the booking under a name."""
        return await self._post("cancel", {"name": name})


def make_receptionist() -> Agent:
    return Receptionist()


def make_flow_receptionist() -> Agent:
    return FlowReceptionist()
