"""Today, where the agent works: every LLM request carries it (a model that is not told the date books
"2023-04-15"), and a flow reads "tomorrow" and "next Friday" against it."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo


def now_in(timezone: str) -> dt.datetime:
    return dt.datetime.now(ZoneInfo(timezone))


def today_in(timezone: str) -> dt.date:
    return now_in(timezone).date()


def date_line(timezone: str, now: dt.datetime | None = None) -> str:
    """ "Today is Monday, December 7, 2026 (2026-12-07); the time is 14:05 in Europe/London." """
    now = now or now_in(timezone)
    return (
        f"Today is {now.strftime('%A, %B')} {now.day}, {now.year} ({now.date().isoformat()}); "
        f"the time is {now.strftime('%H:%M')} in {timezone}."
    )


def with_date(instructions: str, timezone: str, now: dt.datetime | None = None) -> str:
    """The instructions with today's date last (the text before it stays a stable prompt prefix)."""
    return f"{instructions.rstrip()}\n{date_line(timezone, now)}"
