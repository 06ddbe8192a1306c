"""The deterministic slot parsers on the phrasings callers use (dates read against a fixed Monday)."""

from __future__ import annotations

import datetime as dt

import pytest

from worker.flows import slots

MONDAY = dt.date(2026, 12, 7)
DENTISTS = {"Dr. Morgan": ["Morgan"], "Dr. Patel": ["Patel"]}


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("Tuesday morning at nine", "2026-12-08"),
        ("this Friday", "2026-12-11"),
        ("next Friday", "2026-12-18"),
        ("on Monday", "2026-12-14"),
        ("tomorrow at two", "2026-12-08"),
        ("December 9 at half past ten", "2026-12-09"),
        ("the 15th of December", "2026-12-15"),
        ("on the third", "2027-01-03"),
        ("2026-12-21", "2026-12-21"),
        ("sometime soon", None),
    ],
)
def test_dates(text: str, day: str | None) -> None:
    got = slots.parse_date(text, MONDAY)
    assert (got.isoformat() if got else None) == day


@pytest.mark.parametrize(
    ("text", "asked", "time"),
    [
        ("Tuesday morning at nine", False, "09:00"),
        ("at two", False, "14:00"),
        ("2 pm", False, "14:00"),
        ("ten thirty in the morning", True, "10:30"),
        ("half past ten", False, "10:30"),
        ("quarter to eleven", False, "10:45"),
        ("at 11:30", False, "11:30"),
        ("noon", False, "12:00"),
        ("ten o'clock, not nine", False, "10:00"),
        ("nine", False, None),  # a bare number is a time only when a time was asked for
        ("nine", True, "09:00"),
        ("December 9", True, None),
    ],
)
def test_times(text: str, asked: bool, time: str | None) -> None:
    got = slots.parse_time(text, asked=asked)
    assert (got.strftime("%H:%M") if got else None) == time


@pytest.mark.parametrize(
    ("text", "asked", "name"),
    [
        ("My name is Alex Kim.", False, "Alex Kim"),
        ("this is Dana Fox, I need a filling", False, "Dana Fox"),
        ("It's Sam Rivera.", True, "Sam Rivera"),
        ("Ben Carter.", True, "Ben Carter"),
        ("My name is Alex Kym, that's K-I-M.", False, "Alex Kim"),
        ("The name is Anna Novak, N O V A K.", False, "Anna Novak"),
        ("P, A, T, E, L", True, "Patel"),
        ("I'm looking for a cleaning", False, None),
        ("Ben Carter.", False, None),
    ],
)
def test_names(text: str, asked: bool, name: str | None) -> None:
    assert slots.parse_name(text, asked=asked) == name


def test_enum_matches_aliases_and_recogniser_slips_not_strangers() -> None:
    assert slots.match_enum("could Doctor Morgan see me", DENTISTS) == "Dr. Morgan"
    assert slots.match_enum("Can Dr. Patal do it", DENTISTS) == "Dr. Patel"
    assert slots.match_enum("with Dr. Morgen", DENTISTS) == "Dr. Morgan"
    assert slots.match_enum("with Dr. Smith", DENTISTS) is None


def test_yes_no_phone_email() -> None:
    assert slots.is_yes("Yep, that's right.") and not slots.is_yes("Hmm, let me think.")
    assert slots.is_no("No, not Tuesday.")
    assert slots.parse_phone("five five five, oh one two three four") == "55501234"
    assert slots.parse_phone("call me on 07700 900123") == "07700900123"
    assert slots.parse_email("alex dot kim at example dot com") == "alex.kim@example.com"
