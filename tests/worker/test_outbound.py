"""Outbound calls (worker/outbound.py): the request in the job metadata, dialling and its outcomes, and what
the agent does once the answer detector has decided. The SIP API is a test double here (livekit-sip, which
answers CreateSIPParticipant, cannot be installed on this machine); the room-level behaviour is in
tests/e2e/test_outbound_call.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from livekit import api

from tests.answer_audio import PHONE, answer, beep, quiet, said, sit
from worker.call_report import CallIdentity, CallLog
from worker.outbound import (
    AnswerHandling,
    OutboundCall,
    OutboundError,
    dial,
    handle_answer,
    outbound_request,
)


def test_the_request_is_read_from_the_job_metadata() -> None:
    call = outbound_request(json.dumps({"outbound": {"number": "+1 (555) 123-4567", "trunk": "ST_abc"}}))
    assert call is not None and call.number == "+15551234567" and call.trunk == "ST_abc" and call.dials
    assert call.identity == "callee" and call.voicemail is None
    already_dialled = outbound_request('{"outbound": {"identity": "phone-7"}}')
    assert already_dialled is not None and not already_dialled.dials and already_dialled.identity == "phone-7"


@pytest.mark.parametrize("metadata", [None, "", "not json", "[1, 2]", '{"caller": "web"}', "{broken"])
def test_other_metadata_is_an_inbound_call(metadata: str | None) -> None:
    assert outbound_request(metadata) is None


@pytest.mark.parametrize(
    ("outbound", "where"),
    [
        ({"number": "call me"}, "number"),
        ({"number": "+12"}, "number"),
        ({"number": "+15551234567", "trunk": "ST bad/id"}, "trunk"),
        ({"number": "+15551234567", "colour": "red"}, "colour"),
        ({"identity": "a b"}, "identity"),
        ({"number": "+15551234567", "from_number": "front desk"}, "from_number"),
        ({"number": "+15551234567", "dtmf": "12; rm -rf"}, "dtmf"),
        ({"number": "+15551234567", "ring_timeout_s": 900}, "ring_timeout_s"),
        ("+15551234567", "outbound"),
    ],
)
def test_a_malformed_request_is_one_line_naming_the_field(outbound: Any, where: str) -> None:
    with pytest.raises(OutboundError) as e:
        outbound_request(json.dumps({"outbound": outbound}))
    assert str(e.value).startswith(f"outbound call: {where}") and "\n" not in str(e.value)
    assert "Value error" not in str(e.value)


def test_the_command_line_says_in_one_line_why_no_call_was_placed(monkeypatch: pytest.MonkeyPatch) -> None:
    from worker.outbound import main

    monkeypatch.delenv("PARLEY_SIP_OUTBOUND_TRUNK", raising=False)
    with pytest.raises(SystemExit, match=r"^error: not a phone number"):
        main(["call me", "--trunk", "ST_x"])
    with pytest.raises(SystemExit, match=r"^error: no outbound SIP trunk"):
        main(["+15551234567"])
    monkeypatch.setenv("LIVEKIT_URL", "ws://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("LIVEKIT_API_SECRET", "a-test-secret-long-enough-for-hmac-sha256")
    from worker.settings import use_settings

    use_settings(None)  # settings read before this test must not keep the short dev secret
    try:
        with pytest.raises(SystemExit, match=r"^error: the call was not placed: ") as e:
            main(["+15551234567", "--trunk", "ST_x"])
    finally:
        use_settings(None)  # nor may later tests keep this test's unreachable LiveKit
    assert "\n" not in str(e.value)


class _SipDouble:
    """Stands in for livekit-sip behind LiveKit's SIP API: answers, or fails with a SIP status."""

    def __init__(self, status: int | None = None, error: Exception | None = None) -> None:
        self.status, self.error = status, error
        self.requests: list[api.CreateSIPParticipantRequest] = []

    async def create_sip_participant(self, request: api.CreateSIPParticipantRequest) -> object:
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        if self.status is not None:
            meta = {"sip_status_code": str(self.status), "sip_status": "Busy Here"}
            raise api.SipCallError("unavailable", "call failed", status=503, metadata=meta)
        return object()


class _Api:
    def __init__(self, sip: _SipDouble) -> None:
        self.sip = sip


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(None, "answered"), (486, "busy"), (480, "no_answer"), (603, "declined"), (500, "failed")],
)
async def test_dialling_waits_for_the_answer_and_names_the_outcome(status: int | None, outcome: str) -> None:
    sip = _SipDouble(status)
    call = OutboundCall(
        number="+15551234567", ring_timeout_s=20, from_number="+1 555 000 1111", dtmf="ww204#"
    )
    result = await dial(_Api(sip), "room-1", call, "ST_trunk")  # type: ignore[arg-type]
    assert result.outcome == outcome and result.sip_status == status
    (req,) = sip.requests
    assert req.wait_until_answered and req.sip_call_to == "+15551234567" and req.sip_trunk_id == "ST_trunk"
    assert req.room_name == "room-1" and req.participant_identity == "callee"
    assert req.ringing_timeout.seconds == 20 and req.sip_number == "+15550001111" and req.dtmf == "ww204#"


async def test_a_sip_service_that_is_not_there_is_a_failed_call_not_a_crash() -> None:
    err = api.TwirpError("unavailable", "no SIP service", status=503)
    result = await dial(_Api(_SipDouble(error=err)), "r", OutboundCall(number="+15551234567"), "ST_t")  # type: ignore[arg-type]
    assert result.outcome == "failed" and "no SIP service" in result.detail


class _Speech:
    def __init__(self) -> None:
        self.interrupted = False

    def interrupt(self) -> None:
        self.interrupted = True


class _Call:
    """Records what handle_answer asks of the session."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.greeting = _Speech()

    def handling(self) -> AnswerHandling:
        async def leave_message() -> None:
            self.events.append("message")

        async def hang_up(why: str) -> None:
            self.events.append(f"hang_up:{why}")

        def greet() -> _Speech:
            self.events.append("greet")
            return self.greeting

        return AnswerHandling(
            greet=greet,
            listen=lambda on: self.events.append(f"listen={on}"),
            leave_message=leave_message,
            hang_up=hang_up,
        )


async def _frames(audio: np.ndarray, step: int = 80) -> AsyncIterator[np.ndarray]:
    """10 ms frames of int16, as the room delivers them."""
    pcm = (audio * 32767).astype(np.int16)
    for i in range(0, len(pcm), step):
        yield pcm[i : i + step]
        await asyncio.sleep(0)


async def test_a_person_is_greeted_and_heard_from_then_on() -> None:
    audio, _ = answer(quiet(0.5), said("Hello?"), quiet(6.0))
    call = _Call()
    decision = await handle_answer(_frames(audio), PHONE, call.handling())
    assert decision is not None and decision.kind == "person"
    assert call.events == ["listen=False", "listen=True", "greet"]


async def test_a_late_beep_stops_the_greeting_and_leaves_the_message() -> None:
    audio, _ = answer(quiet(0.3), said("Leave a message."), quiet(1.4), beep(1400, 0.4), quiet(3.0))
    call = _Call()
    decision = await handle_answer(_frames(audio), PHONE, call.handling())
    assert decision is not None and decision.kind == "beep"
    assert call.events == ["listen=False", "listen=True", "greet", "message"]
    assert call.greeting.interrupted


async def test_a_number_not_in_service_is_hung_up_on_without_a_word() -> None:
    audio, _ = answer(quiet(0.3), sit(), said("The number you have dialed is not in service."), quiet(2.0))
    call = _Call()
    decision = await handle_answer(_frames(audio), PHONE, call.handling())
    assert decision is not None and decision.kind == "not_in_service"
    assert call.events == ["listen=False", "hang_up:not_in_service"]


async def test_a_callee_who_leaves_before_a_decision_leaves_the_session_listening() -> None:
    audio, _ = answer(quiet(0.5))
    call = _Call()
    assert await handle_answer(_frames(audio), PHONE, call.handling()) is None
    assert call.events == ["listen=False", "listen=True"]


async def test_a_calls_context_follows_the_agents_instructions_for_that_call_only() -> None:
    from worker.agent import AgentOptions, ParleyAgent
    from worker.outbound import add_call_context

    agent, other = ParleyAgent(AgentOptions(instructions="You are Sam.")), ParleyAgent(AgentOptions())
    await add_call_context(agent, "Maria's cleaning is on Tuesday at 3 pm.")
    assert agent.instructions.startswith("You are Sam.") and agent.instructions.endswith("Tuesday at 3 pm.")
    assert agent.base_instructions == agent.instructions  # what the bounded context keeps verbatim
    assert "Maria" not in other.instructions
    with pytest.raises(OutboundError, match="outbound call: context"):
        outbound_request(json.dumps({"outbound": {"identity": "x", "context": "x" * 2001}}))


def test_the_report_says_how_an_outbound_call_ended() -> None:
    ident = CallIdentity(
        job_id="j", room="r", agent="a", profile="telephony", phone=True, direction="outbound"
    )
    log = CallLog(ident, clock=lambda: 100.0)
    log.note_ended_by("voicemail")
    report = log.report([], include_transcript=False)
    assert report["ended_by"] == "voicemail" and report["direction"] == "outbound"
    for ending in ("busy", "no_answer", "declined", "failed", "not_in_service"):
        log.note_ended_by(ending)
        assert log.report([], include_transcript=False)["ended_by"] == ending


class _Job:
    """The parts of a JobContext the dialling step reads (a test double: no room is needed to dial)."""

    def __init__(self, metadata: str, sip: _SipDouble) -> None:
        self.job = type("Job", (), {"id": "AJ_1", "metadata": metadata})()
        self.room = type("Room", (), {"name": "call-1"})()
        self.api = _Api(sip)
        self.stopped: list[str] = []

    def shutdown(self, reason: str = "") -> None:
        self.stopped.append(reason)


async def test_a_busy_line_ends_the_job_with_a_report_saying_so(tmp_path: Path) -> None:
    from tests.worker.test_call_report import serve
    from worker.call_report_receiver import make_app
    from worker.outbound_call import outbound_dial
    from worker.settings import load_settings

    out = tmp_path / "reports.jsonl"
    async for base in serve(make_app(out, secret="")):
        settings = load_settings(call_report_url=f"{base}/report", sip_outbound_trunk="ST_default")
        job = _Job(json.dumps({"outbound": {"number": "+15551234567"}}), _SipDouble(486))
        assert await outbound_dial(job, settings) == (False, None)  # type: ignore[arg-type]
    assert job.api.sip.requests[0].sip_trunk_id == "ST_default" and job.stopped == ["outbound call: busy"]
    (report,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert (report["ended_by"], report["direction"], report["channel"]) == ("busy", "outbound", "phone")


async def test_the_dialling_step_goes_on_only_for_an_answered_or_inbound_call() -> None:
    from worker.outbound_call import outbound_dial
    from worker.settings import load_settings

    settings = load_settings()
    answered = _Job(json.dumps({"outbound": {"number": "+15551234567", "trunk": "ST_t"}}), _SipDouble())
    go_on, call = await outbound_dial(answered, settings)  # type: ignore[arg-type]
    assert go_on and call is not None and call.identity == "callee" and not answered.stopped
    assert await outbound_dial(_Job("", _SipDouble()), settings) == (True, None)  # type: ignore[arg-type]
    no_trunk = _Job(json.dumps({"outbound": {"number": "+15551234567"}}), _SipDouble())
    assert await outbound_dial(no_trunk, settings) == (False, None)  # type: ignore[arg-type]
    assert no_trunk.stopped and not no_trunk.api.sip.requests
    bad = _Job(json.dumps({"outbound": {"number": "nope"}}), _SipDouble())
    assert await outbound_dial(bad, settings) == (False, None)  # type: ignore[arg-type]
    assert bad.stopped[0].startswith("outbound call: number")


async def test_audio_from_the_answer_on_is_kept_until_it_is_read_and_stops_when_closed() -> None:
    from worker.outbound import prefetch

    made: list[int] = []
    stopped = asyncio.Event()

    async def source() -> AsyncIterator[np.ndarray]:
        try:
            for i in range(1000):
                made.append(i)
                yield np.full(80, i, np.int16)
                await asyncio.sleep(0)
        finally:
            stopped.set()

    frames = prefetch(source())
    for _ in range(20):  # the session is being built: nothing reads yet
        await asyncio.sleep(0)
    assert len(made) >= 10  # already being read
    got = []
    async for x in frames:
        got.append(int(x[0]))
        if len(got) == 15:
            break
    assert got == list(range(15))  # nothing lost, in order
    await frames.aclose()  # type: ignore[attr-defined]
    await asyncio.wait_for(stopped.wait(), 1.0)


async def test_lines_missing_from_the_cache_are_synthesised_while_the_detector_listens() -> None:
    from plugins.cpu_voice.tts import CpuVoiceTTS
    from worker.outbound import prepare_lines

    class _Broken:
        def synthesize(self, text: str) -> Any:
            raise RuntimeError("engine gone")

    prepared: dict[str, Any] = {}
    await prepare_lines(CpuVoiceTTS(voice="heart"), ["Hi Maria.", "Please call us back."], prepared)
    assert set(prepared) == {"Hi Maria.", "Please call us back."}
    assert all(sum(f.samples_per_channel for f in frames) > 1000 for frames in prepared.values())
    await prepare_lines(_Broken(), ["Hello."], prepared)  # said later, synthesised then
    assert "Hello." not in prepared


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("Hi, you've reached Ben. I can't take your call, please leave a message.", ["message"]),
        ("Good afternoon, Lakeside Veterinary, this is Jen speaking, how can I help you?", ["greet"]),
        (None, ["greet"]),  # the decode failed: greeted, as before
    ],
)
async def test_a_long_greeting_without_a_beep_is_read_once_for_a_voicemails_words(
    words: str | None, expected: list[str]
) -> None:
    greeting = said(
        "Good afternoon, you have reached the front desk of the Lakeside clinic, how are you today?"
    )
    audio, _ = answer(quiet(0.3), greeting, quiet(3.0))
    call, decoded = _Call(), []

    async def transcribe(pcm: np.ndarray, rate: int) -> str:
        decoded.append(len(pcm) / rate)
        if words is None:
            raise RuntimeError("speech engine down")
        return words

    handling = call.handling()
    handling.transcribe = transcribe
    decision = await handle_answer(_frames(audio), PHONE, handling)
    assert decision is not None
    assert [e for e in call.events if not e.startswith("listen")] == expected
    assert decision.kind == ("voicemail_words" if expected == ["message"] else "long_greeting")
    (seconds,) = decoded  # one decode, of the greeting heard up to the decision
    assert seconds == pytest.approx(decision.at_s, abs=0.1)
