"""A caller who joins and says nothing, through a real room: the dispatched worker asks if they are still
there, says goodbye and ends the call, and the caller's connection goes with the room. Short timers
(`PARLEY_IDLE_REPROMPT_S`) so the test takes seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from caches import load_phrases
from simulator.room_runner import LiveKitCallOptions, run_caller
from tests.e2e.conftest import WORKER_CMD, WORKER_ENV, start_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EN = load_phrases().defaults["en"]


def test_a_silent_caller_is_asked_then_the_agent_ends_the_call(tmp_path: Path) -> None:
    env = {**WORKER_ENV, "PARLEY_IDLE_REPROMPT_S": "1.5", "PARLEY_IDLE_REPROMPTS": "1"}
    stack = start_stack(tmp_path / "stack", with_worker=True, worker_env=env, worker_cmd=WORKER_CMD)
    try:
        record = run_caller(stack, [], tmp_path / "call", LiveKitCallOptions(out_dir=tmp_path, stay_s=45))
    finally:
        stack.close()
    lines = [t for t in record.transcripts if t.who == "agent" and t.text.strip()]
    said = [t.text.strip() for t in lines]
    assert record.greeting_first_audio is not None, said
    assert record.hung_up is not None, f"the caller was still connected after 45 s: {said}"
    asked = [t for t in lines if t.text.strip() in EN["reprompt"]]
    assert len(asked) == 1 and said[-1] in EN["goodbye"] and lines[-1] is not asked[0], said
    # both were heard, not only written: agent audio after each line's transcript opened
    ask_at, bye_at = asked[0].opened, lines[-1].opened
    heard_ask = record.agent.first_voiced_after(ask_at)
    heard_bye = record.agent.first_voiced_after(bye_at)
    assert heard_ask is not None and heard_ask < bye_at, "the reprompt was not heard"
    assert heard_bye is not None and heard_bye < record.hung_up, "the goodbye was not heard"
