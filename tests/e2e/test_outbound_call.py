"""Outbound calls through a real room (worker/outbound.py): the agent is dispatched with an outbound
request naming the callee, who is already in the room (as when your backend dialled them; dialling through
a SIP trunk needs livekit-sip, which this machine cannot install). The scripted callee speaks first, as
whoever answers a phone does: a person's "Hello?" gets the outbound greeting, an answering machine's
greeting and beep get the voicemail message after the beep, and then the agent ends the call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from simulator.call_script import RATE, render_line
from simulator.livekit_stack import E2EStack
from simulator.room_runner import LiveKitCallOptions, run_caller
from tests.answer_audio import voice
from tests.e2e.conftest import WORKER_CMD, WORKER_ENV, record_figure, start_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

GREETING = "Hi, this is the clinic calling about your visit."
MESSAGE = "Hello, this is the clinic. Please call us back today."
OUTBOUND = json.dumps({"outbound": {"identity": "caller"}})  # the scripted caller's identity
HI_MARIA = "Hi Maria, this is the clinic calling about Tuesday."  # this call's own greeting


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2EStack]:
    env = dict(WORKER_ENV)
    cmd = [*WORKER_CMD, "--set", f"outbound_greeting={GREETING}", "--set", f"voicemail_message={MESSAGE}"]
    out = tmp_path_factory.mktemp("outbound-stack")
    s = start_stack(out, with_worker=True, worker_env=env, worker_cmd=cmd)
    try:
        yield s
    finally:
        s.close()


def test_a_person_who_answers_hears_this_calls_greeting(stack: E2EStack, tmp_path: Path) -> None:
    hello = tmp_path / "hello.wav"
    sf.write(hello, render_line(voice(), "Hello?", 0.3, 0.2), RATE, subtype="PCM_16")
    outbound = {
        "identity": "caller",
        "greeting": HI_MARIA,
        "context": "Maria's cleaning is on Tuesday at 3 pm.",
    }
    opts = LiveKitCallOptions(
        out_dir=tmp_path, dispatch_metadata=json.dumps({"outbound": outbound}), answers=True
    )
    record = run_caller(stack, [hello], tmp_path / "call", opts)
    said = [t.text.strip() for t in record.transcripts if t.who == "agent" and t.text.strip()]
    assert said and said[0] == HI_MARIA, said
    assert MESSAGE not in said
    (turn,) = record.turns
    heard = record.agent.first_voiced_after(turn.last_voiced)
    assert heard is not None, "the greeting was not heard"
    # the detector waits out the pause after a pick-up line; nothing is said over the person
    assert heard - turn.last_voiced > 0.3, heard - turn.last_voiced
    record_figure("outbound_greeting_after_hello_s", round(heard - turn.last_voiced, 3))


def test_an_answering_machine_gets_the_message_after_its_beep(stack: E2EStack, tmp_path: Path) -> None:
    greeting = render_line(
        voice(), "Hi, you have reached Sam. I can't take your call, please leave a message.", 0.3, 0.0
    )
    t = np.arange(int(0.5 * RATE)) / RATE
    beep = (0.3 * 32767 * np.sin(2 * np.pi * 1000 * t)).astype(np.int16)
    pieces = [greeting, np.zeros(int(0.6 * RATE), np.int16), beep, np.zeros(int(0.3 * RATE), np.int16)]
    machine = tmp_path / "machine.wav"
    sf.write(machine, np.concatenate(pieces), RATE, subtype="PCM_16")
    beep_ends_after = sum(len(p) for p in pieces[:3]) / RATE
    opts = LiveKitCallOptions(out_dir=tmp_path, dispatch_metadata=OUTBOUND, answers=True, stay_s=30)
    record = run_caller(stack, [machine], tmp_path / "call", opts)
    lines = [t for t in record.transcripts if t.who == "agent" and t.text.strip()]
    message = [t for t in lines if t.text.strip() == MESSAGE]
    assert message, [t.text for t in lines]
    (turn,) = record.turns
    beep_end = turn.start + beep_ends_after
    heard = record.agent.first_voiced_after(message[0].opened)
    assert heard is not None and heard >= beep_end, (heard, beep_end)  # the recording has all of it
    assert record.hung_up is not None and record.hung_up > heard, "the agent did not end the call"
    record_figure("voicemail_message_after_beep_s", round(heard - beep_end, 3))
