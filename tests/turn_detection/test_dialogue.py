"""What the agent asked for decides whether digits, letters and commas at the end are a sequence."""

from __future__ import annotations

import pytest

from turn_detection.dialogue import Asked, asked_for, expects_sequence
from turn_detection.text_cues import text_cue


@pytest.mark.parametrize(
    ("line", "asked"),
    [
        ("Thanks. And which mobile number should the courier text?", Asked.NUMBER),
        ("Please read me the serial on the back of the meter.", Asked.NUMBER),
        ("Could you spell your surname for me?", Asked.SPELLING),
        ("What's your date of birth?", Asked.DATE),
        ("Great. What else would you like to add?", Asked.LIST),
        ("How did you find the new flat?", Asked.OTHER),
        ("Your account number ends in nine.", Asked.OTHER),  # a statement asks for nothing
    ],
)
def test_the_agents_question_is_read_by_what_it_asks_for(line: str, asked: Asked) -> None:
    assert asked_for(line) is asked


def test_digits_hold_as_a_sequence_only_after_a_question_that_asks_for_one() -> None:
    said = "We have driven 40 000 miles since 2019"
    assert expects_sequence("") is None  # the caller speaks first: anything may come
    asked = text_cue(said, "en", sequences=expects_sequence("What's the odometer number?") is not False)
    not_asked = text_cue(said, "en", sequences=expects_sequence("How has the car been?") is not False)
    assert asked.sequence and not not_asked.sequence
    assert not_asked.completeness > asked.completeness
