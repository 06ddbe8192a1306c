"""A small booking service for the dental-clinic example agent: free slots, book, move, cancel; in memory.

    python -m examples.booking_service [--port 8765]                  # serve until Ctrl-C
    python -m examples.booking_service [--port 8765] -- CMD ARGS...   # serve while CMD runs, then print
                                                                    # the bookings (what `make demo` does)

Every endpoint takes and returns JSON: POST /slots {dentist?, day?}, POST /book {name, dentist, slot,
service?}, POST /move {booking_id or name, slot}, POST /cancel {booking_id or name}, GET /state (a caller
on the phone knows their name, not a booking id). A slot is written
"YYYY-MM-DD HH:MM" (the clinic's local time); a bad request gets HTTP 400 and {"error": "..."}.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from aiohttp import web

DENTISTS = ("Dr. Morgan", "Dr. Patel")
HOURS = (9, 10, 11, 13, 14, 15, 16)
DAYS_AHEAD = 14
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


@dataclass
class Booking:
    booking_id: str
    name: str
    dentist: str
    slot: str
    service: str


@dataclass
class Calendar:
    """Open slots for each dentist on working days from `start`, and the bookings made so far."""

    start: dt.date
    bookings: dict[str, Booking] = field(default_factory=dict)
    next_id: int = 1

    def all_slots(self) -> list[tuple[str, str]]:
        out = []
        for i in range(DAYS_AHEAD):
            day = self.start + dt.timedelta(days=i)
            if day.weekday() >= 5:
                continue
            for hour in HOURS:
                for dentist in DENTISTS:
                    out.append((dentist, f"{day.isoformat()} {hour:02d}:00"))
        return out

    def taken(self) -> set[tuple[str, str]]:
        return {(b.dentist, b.slot) for b in self.bookings.values()}

    def free(
        self, dentist: str | None = None, day: str | None = None, limit: int = 6
    ) -> list[dict[str, str]]:
        taken = self.taken()
        want_day = _match_day(day, self.start) if day else None
        out = []
        for d, slot in self.all_slots():
            if (d, slot) in taken or (dentist and _dentist(dentist) != d):
                continue
            if want_day is not None and not want_day(dt.date.fromisoformat(slot[:10])):
                continue
            out.append({"dentist": d, "slot": slot, "spoken": _spoken(slot)})
            if len(out) >= limit:
                break
        return out

    def book(self, name: str, dentist: str, slot: str, service: str) -> Booking:
        who = _dentist(dentist)
        if (who, slot) not in set(self.all_slots()):
            raise ValueError(f"{who} has no slot {slot!r}; ask /slots for free ones")
        if (who, slot) in self.taken():
            raise ValueError(f"{who} is already booked at {slot}")
        booking = Booking(f"B{self.next_id:03d}", name, who, slot, service)
        self.next_id += 1
        self.bookings[booking.booking_id] = booking
        return booking

    def move(self, booking_id: str, slot: str) -> Booking:
        b = self._get(booking_id)
        if (b.dentist, slot) not in set(self.all_slots()) or (b.dentist, slot) in self.taken():
            raise ValueError(f"{b.dentist} is not free at {slot!r}")
        b.slot = slot
        return b

    def cancel(self, booking_id: str) -> Booking:
        return self.bookings.pop(self._get(booking_id).booking_id)

    def _get(self, booking_id: str) -> Booking:
        b = self.bookings.get(booking_id.strip().upper())
        if b is None:
            raise ValueError(f"no booking {booking_id!r}")
        return b

    def find(self, body: dict[str, Any]) -> str:
        """The booking a request names: its booking_id, else the (only) booking under `name`."""
        if body.get("booking_id"):
            return _req(body, "booking_id")
        name = " ".join(_req(body, "name").lower().split())
        ids = [b.booking_id for b in self.bookings.values() if " ".join(b.name.lower().split()) == name]
        if len(ids) != 1:
            raise ValueError(f"{'no' if not ids else 'more than one'} booking under that name")
        return ids[0]


def _dentist(name: str) -> str:
    """'morgan', 'Dr Morgan', 'doctor morgan' → 'Dr. Morgan'."""
    key = name.lower().replace("doctor", "").replace("dr.", "").replace("dr ", "").strip()
    for d in DENTISTS:
        if d.lower().split()[-1] == key:
            return d
    raise ValueError(f"unknown dentist {name!r}; the clinic has {', '.join(DENTISTS)}")


def _match_day(day: str, start: dt.date) -> Any:
    """A filter for 'YYYY-MM-DD', a weekday name, 'this week' or 'next week' (relative to `start`)."""
    text = day.strip().lower()
    try:
        want = dt.date.fromisoformat(text)
        return lambda d: d == want
    except ValueError:
        pass
    if text in WEEKDAYS:
        return lambda d: d.weekday() == WEEKDAYS.index(text)
    monday = start - dt.timedelta(days=start.weekday())
    if "next" in text and "week" in text:
        return lambda d: monday + dt.timedelta(days=7) <= d < monday + dt.timedelta(days=14)
    if "week" in text:
        return lambda d: d < monday + dt.timedelta(days=7)
    raise ValueError(f"day must be YYYY-MM-DD, a weekday, 'this week' or 'next week' (got {day!r})")


def _spoken(slot: str) -> str:
    when = dt.datetime.fromisoformat(slot)
    hour = when.hour % 12 or 12
    return f"{when.strftime('%A %B')} {when.day} at {hour} {'a.m.' if when.hour < 12 else 'p.m.'}"


def make_app(calendar: Calendar) -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        try:
            body = await request.json() if request.can_read_body else {}
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            route = request.match_info["action"]
            if route == "slots":
                result: Any = {"free": calendar.free(body.get("dentist"), body.get("day"))}
            elif route == "book":
                b = calendar.book(
                    _req(body, "name"),
                    _req(body, "dentist"),
                    _req(body, "slot"),
                    body.get("service") or "checkup",
                )
                result = {"booked": asdict(b)}
            elif route == "move":
                result = {"moved": asdict(calendar.move(calendar.find(body), _req(body, "slot")))}
            elif route == "cancel":
                result = {"cancelled": asdict(calendar.cancel(calendar.find(body)))}
            else:
                raise web.HTTPNotFound()
        except (ValueError, json.JSONDecodeError) as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response(result)

    async def state(_: web.Request) -> web.Response:
        return web.json_response(state_of(calendar))

    app = web.Application()
    app.router.add_get("/state", state)
    app.router.add_post("/{action}", handle)
    return app


def _req(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key} is required")
    return value.strip()


def state_of(calendar: Calendar) -> dict[str, Any]:
    return {"bookings": [asdict(b) for b in calendar.bookings.values()]}


def format_state(calendar: Calendar) -> str:
    if not calendar.bookings:
        return "booking service: no bookings"
    lines = [f"booking service: {len(calendar.bookings)} booking(s)"]
    lines += [
        f"  {b.booking_id}  {b.slot}  {b.dentist:10s}  {b.service}  ({b.name})"
        for b in calendar.bookings.values()
    ]
    return "\n".join(lines)


async def serve(port: int, command: list[str], start: dt.date) -> int:
    calendar = Calendar(start=start)
    runner = web.AppRunner(make_app(calendar))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print(f"booking service on http://127.0.0.1:{port} (in memory)", flush=True)
    code = 0
    try:
        if command:
            proc = await asyncio.create_subprocess_exec(*command)
            code = await proc.wait()
        else:
            await asyncio.Event().wait()
    finally:
        print(format_state(calendar), flush=True)
        await runner.cleanup()
    return code


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(
        prog="python -m examples.booking_service", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument(
        "--start", type=dt.date.fromisoformat, default=dt.date.today(), help="first day (YYYY-MM-DD)"
    )
    args = ap.parse_args(argv)
    try:
        return asyncio.run(serve(args.port, command, args.start))
    except KeyboardInterrupt:
        return 130
    except (OSError, subprocess.SubprocessError) as e:
        print(f"error: booking service: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
