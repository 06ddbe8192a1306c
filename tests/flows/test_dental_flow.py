"""The flow of examples/dental_clinic.yaml, turn by turn: it asks for what is missing, reads back, books on
"yes", takes corrections and everything in one breath, answers off-path questions, moves and cancels."""

from __future__ import annotations

import asyncio

from examples.booking_service import Calendar
from worker.flows import Flow


async def talk(flow: Flow, *turns: str) -> list[str]:
    return [await flow.respond(t) for t in turns]


def booked(calendar: Calendar) -> list[tuple[str, str, str, str]]:
    return [(b.name, b.dentist, b.slot, b.service) for b in calendar.bookings.values()]


async def test_the_demo_call_books(dental_flow: Flow, calendar: Calendar) -> None:
    lines = await talk(
        dental_flow,
        "Hello, could Doctor Morgan see me for a teeth cleaning in the coming days?",
        "Tuesday morning at nine would be great. My name is Alex Kim.",
        "Perfect, thank you. That's all.",
    )
    assert "Morgan" in lines[0] and "day" in lines[0].lower()
    assert "Tuesday" in lines[1] and "Shall I book it?" in lines[1]
    assert booked(calendar) == [("Alex Kim", "Dr. Morgan", "2026-12-08 09:00", "cleaning")]
    assert "booked" in lines[2] and "Thanks for calling" in lines[2]


async def test_asks_for_each_missing_slot_in_turn(dental_flow: Flow, calendar: Calendar) -> None:
    lines = await talk(
        dental_flow, "I'd like to make an appointment.", "A checkup.", "Patel.", "Thursday.", "Ten."
    )
    assert "cleaning, a checkup or a filling" in lines[0]
    assert "Dr. Morgan or Dr. Patel" in lines[1]
    assert "Which day" in lines[2]
    assert "what time" in lines[3]
    assert "your name" in lines[4]
    lines = await talk(dental_flow, "It's Sam Rivera.", "Yes please.")
    assert "Shall I book it?" in lines[0]
    assert booked(calendar) == [("Sam Rivera", "Dr. Patel", "2026-12-10 10:00", "checkup")]


async def test_a_correction_replaces_the_value_before_booking(dental_flow: Flow, calendar: Calendar) -> None:
    await talk(dental_flow, "Hi, this is Dana Fox, I need a filling with Dr. Patel on Wednesday at 2 pm.")
    line = await dental_flow.respond("Actually, make it Friday.")
    assert "Friday" in line and "Wednesday" not in line
    await dental_flow.respond("Yes.")
    assert booked(calendar) == [("Dana Fox", "Dr. Patel", "2026-12-11 14:00", "filling")]


async def test_no_then_a_change(dental_flow: Flow, calendar: Calendar) -> None:
    await talk(dental_flow, "My name is Lee Chan, a cleaning with Dr. Morgan tomorrow at ten please.")
    assert (await dental_flow.respond("No.")) == "Sure, what should I change?"
    line = await dental_flow.respond("Eleven o'clock instead.")
    assert "11 a.m." in line
    await dental_flow.respond("That's right.")
    assert booked(calendar) == [("Lee Chan", "Dr. Morgan", "2026-12-08 11:00", "cleaning")]


async def test_an_off_path_question_is_answered_and_the_question_asked_again(dental_flow: Flow) -> None:
    first = await dental_flow.respond("What are your opening hours?")
    assert "Monday to Friday" in first and "anything else" in first
    await dental_flow.respond("Can I book a cleaning with Dr. Morgan?")
    line = await dental_flow.respond("How much does a cleaning cost?")
    assert "ninety dollars" in line and "Which day" in line


async def test_a_taken_slot_is_refused_and_asked_again(dental_flow: Flow, calendar: Calendar) -> None:
    calendar.book("Someone", "Dr. Morgan", "2026-12-08 09:00", "checkup")
    await talk(dental_flow, "This is Alex Kim, a cleaning with Dr. Morgan on Tuesday at nine.")
    line = await dental_flow.respond("Yes.")
    assert "is already booked on Tuesday December 8 at 9 a.m." in line and "what time" in line
    await talk(dental_flow, "Ten then.", "Yes.")
    assert ("Alex Kim", "Dr. Morgan", "2026-12-08 10:00", "cleaning") in booked(calendar)


async def test_move_and_cancel_by_name(dental_flow: Flow, calendar: Calendar) -> None:
    calendar.book("Jordan Lee", "Dr. Patel", "2026-12-09 10:00", "checkup")
    calendar.book("Robin Shaw", "Dr. Morgan", "2026-12-10 13:00", "cleaning")
    await talk(
        dental_flow, "I need to move my appointment, the name is Jordan Lee.", "Friday at 3 pm.", "Yes."
    )
    await talk(dental_flow, "I'd also like to cancel an appointment for Robin Shaw.", "Yes.")
    assert booked(calendar) == [("Jordan Lee", "Dr. Patel", "2026-12-11 15:00", "checkup")]


async def test_a_spelled_surname_wins_over_the_heard_one(dental_flow: Flow, calendar: Calendar) -> None:
    await talk(
        dental_flow, "A checkup with Dr. Patel on Thursday at nine.", "Alex Kym, that's K-I-M.", "Yes."
    )
    assert booked(calendar)[0][0] == "Alex Kim"


async def test_nothing_is_booked_without_a_yes(dental_flow: Flow, calendar: Calendar) -> None:
    await talk(
        dental_flow, "This is Alex Kim, a cleaning with Dr. Morgan on Tuesday at nine.", "Hmm, let me think."
    )
    assert booked(calendar) == []


async def test_a_slot_said_before_the_task_is_clear_counts(dental_flow: Flow, calendar: Calendar) -> None:
    first = await dental_flow.respond(
        "Hello, conductor Morgan C. Me."
    )  # a recogniser's "could Doctor Morgan see me"
    assert "Dr. Morgan" in first
    line = await dental_flow.respond("For a teeth cleaning in the coming days.")
    assert "a cleaning with Dr. Morgan" in line and "Which day" in line
    await talk(dental_flow, "Tuesday at nine, I'm Alex Kim.", "Yes.")
    assert booked(calendar) == [("Alex Kim", "Dr. Morgan", "2026-12-08 09:00", "cleaning")]


async def test_a_booking_outlives_a_dropped_reply(dental_flow: Flow, calendar: Calendar) -> None:
    """A preemptive reply the framework cancels mid-call: the booking stands, is made once, and the next
    turn says it was made."""
    await talk(dental_flow, "This is Alex Kim, a cleaning with Dr. Morgan on Tuesday at nine.")
    reply = asyncio.ensure_future(dental_flow.respond("Perfect, thank you."))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    reply.cancel()
    line = await dental_flow.respond("Perfect, thank you. That's all.")
    assert "You're booked with Dr. Morgan on Tuesday December 8 at 9 a.m." in line and ".." not in line
    assert booked(calendar) == [("Alex Kim", "Dr. Morgan", "2026-12-08 09:00", "cleaning")]


async def test_a_reply_made_but_never_said_is_said_when_the_turn_is_read_again(
    dental_flow: Flow, calendar: Calendar
) -> None:
    """A preemptive reply on the turn's first words books, then the framework drops it and asks again with
    the final transcript: the caller hears that the booking was made (once), not the offer to book."""
    now = [100.0]
    dental_flow.clock = lambda: now[0]
    await talk(dental_flow, "This is Ben Carter, a checkup with Dr. Morgan on Monday at two.")
    first = await dental_flow.respond("Yep.")
    now[0] += 1.0
    again = await dental_flow.respond("Yep. That's right.")
    assert "You're booked with Dr. Morgan on Monday December 14 at 2 p.m." in again and again == first
    assert booked(calendar) == [("Ben Carter", "Dr. Morgan", "2026-12-14 14:00", "checkup")]


async def test_a_later_turn_that_starts_the_same_is_a_new_turn(dental_flow: Flow, calendar: Calendar) -> None:
    """After the outcome was heard (seconds later), "yes, ..." answers "anything else?"."""
    now = [100.0]
    dental_flow.clock = lambda: now[0]
    await talk(dental_flow, "This is Ben Carter, a checkup with Dr. Morgan on Monday at two.", "Yes.")
    now[0] += 8.0
    line = await dental_flow.respond("Yes, I also need to cancel an appointment.")
    assert "cancel the appointment for Ben Carter" in line and "booked" not in line
