"""When the agent asks the caller to repeat (worker/repeat_request.py): the decision, on a virtual session
made of two callables (what it says, the agent's state)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from worker.agent import REPEAT
from worker.repeat_request import RepeatOptions, RepeatRequester

FAST = RepeatOptions(grace_s=0.02, min_gap_s=0.0, max_in_a_row=2)


def requester(options: RepeatOptions = FAST, state: str = "listening", language: str = "en"):
    said: list[str] = []
    r = RepeatRequester(said.append, lambda: state, language=language, options=options)
    return r, said


async def settle() -> None:
    await asyncio.sleep(0.08)


def heard(text: str = "I'd like a cleaning.") -> SimpleNamespace:
    return SimpleNamespace(is_final=True, transcript=text)


async def test_unreadable_speech_gets_one_request_after_the_grace() -> None:
    r, said = requester()
    r.on_unheard(2.0)
    assert said == []  # not at once: the caller may go on
    await settle()
    assert said == [REPEAT["en"]]
    r2, said2 = requester(language="ko")
    r2.on_unheard(2.0)
    await settle()
    assert said2 == [REPEAT["ko"]]


async def test_a_caller_who_goes_on_or_is_understood_is_not_asked() -> None:
    r, said = requester()
    r.on_unheard(2.0)
    r.on_user_state(SimpleNamespace(new_state="speaking"))  # speaks again inside the grace
    await settle()
    r.on_transcribed(heard())  # understood words this turn: the reply answers them
    r.on_unheard(2.0)
    await settle()
    assert said == []
    r.on_transcribed(SimpleNamespace(is_final=False, transcript="partial"))  # interims change nothing
    r.on_agent_state(SimpleNamespace(new_state="speaking"))  # the agent answered: a new turn begins
    r.on_unheard(2.0)
    await settle()
    assert said == [REPEAT["en"]]


async def test_never_while_the_agent_talks_and_never_nags() -> None:
    r, said = requester(state="speaking")
    r.on_unheard(2.0)
    await settle()
    assert said == []
    r, said = requester()
    for _ in range(4):  # the caller keeps being unreadable: asked twice, then left alone
        r.on_unheard(2.0)
        await settle()
    assert said == [REPEAT["en"]] * 2 and r.in_a_row == 2
    r.on_transcribed(heard())
    r.on_agent_state(SimpleNamespace(new_state="speaking"))
    r.on_unheard(2.0)
    await settle()
    assert len(said) == 3  # understood once: asking may start again
    gap, said_gap = requester(RepeatOptions(grace_s=0.02, min_gap_s=60.0))
    gap.on_unheard(2.0)
    await settle()
    gap.on_unheard(2.0)
    await settle()
    assert len(said_gap) == 1  # not twice within min_gap_s


async def test_a_session_that_cannot_speak_is_a_logged_no() -> None:
    def broken(_line: str) -> None:
        raise RuntimeError("AgentSession isn't running")

    r = RepeatRequester(broken, lambda: "listening", options=FAST)
    r.on_unheard(2.0)
    await settle()
    assert r.asked == 0
