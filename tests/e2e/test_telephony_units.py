"""Fast unit tests for the telephony helpers, room latency messages and call tokens (no server)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest
from livekit import api, rtc
from livekit.agents import ToolError

from web.tokens import TokenOptions, TokenRequestError, issue_call_token
from worker.measurement import METRICS_TOPIC
from worker.sip import (
    DtmfCollector,
    DtmfOptions,
    SipCall,
    TelephonyToolOptions,
    input_sample_rate,
    is_sip_participant,
    pick_turn_profile,
    resolve_transfer_target,
    telephony_tools,
)
from worker.turn_marks import RoomMetricsPublisher, turn_latency

SIP = rtc.ParticipantKind.PARTICIPANT_KIND_SIP
STANDARD = rtc.ParticipantKind.PARTICIPANT_KIND_STANDARD


def participant(kind: int, attributes: dict[str, str] | None = None) -> rtc.Participant:
    return SimpleNamespace(kind=kind, identity="sip_caller", attributes=attributes or {})  # type: ignore[return-value]


def test_sip_callers_get_the_telephony_profile_at_8k() -> None:
    phone, browser = participant(SIP), participant(STANDARD)
    assert is_sip_participant(phone) and not is_sip_participant(browser)
    assert pick_turn_profile("auto", phone) == "telephony"
    assert pick_turn_profile("auto", browser) == "web"
    assert pick_turn_profile("auto", None) == "web"
    assert pick_turn_profile("telephony", browser) == "telephony"
    assert input_sample_rate("telephony") == 8000 and input_sample_rate("web") == 16000
    with pytest.raises(ValueError, match="turn profile"):
        pick_turn_profile("radio", phone)


def test_sip_call_info_keeps_the_callers_number_out() -> None:
    p = participant(SIP, {"sip.callID": "abc", "sip.callStatus": "active", "sip.phoneNumber": "+15550123"})
    call = SipCall.from_participant(p)
    assert call is not None and call.call_id == "abc" and call.status == "active"
    assert "+15550123" not in repr(call)
    assert SipCall.from_participant(participant(STANDARD)) is None


def test_dtmf_entry_ends_on_pound_max_digits_or_timeout() -> None:
    c = DtmfCollector(DtmfOptions(max_digits=4, inter_digit_timeout_s=2.0))
    assert [c.feed(k, t) for t, k in enumerate("12")] == [None, None]
    assert c.feed("#", 2) == "12"
    assert c.feed("#", 3) is None  # an empty entry is not delivered
    for t, k in enumerate("9876"):
        out = c.feed(k, t)
    assert out == "9876"
    c.feed("5", 10.0)
    assert c.poll(11.0) is None
    assert c.poll(12.5) == "5"
    c.feed("1", 20)
    c.feed("*", 20.5)  # clear
    assert c.feed("#", 21) is None
    assert c.feed("x", 22) is None and c.digits == ""  # unknown keys are ignored


def test_transfer_targets_resolve_by_spoken_name_or_explain() -> None:
    targets = {"Front Desk": "tel:+15550100", "billing": "sip:billing@pbx.test"}
    assert resolve_transfer_target(targets, "front  desk") == "tel:+15550100"
    with pytest.raises(ToolError, match=r"Front Desk, billing"):
        resolve_transfer_target(targets, "the manager")


def test_telephony_tools_are_function_tools() -> None:
    names = [t.info.name for t in telephony_tools()]
    assert names == ["end_call"]
    tools = telephony_tools(TelephonyToolOptions(transfer_targets={"front desk": "tel:+15550100"}))
    assert [t.info.name for t in tools] == ["end_call", "transfer_call"]
    assert "front desk" in (tools[1].info.description or "")


def test_turn_latency_combines_user_and_reply_metrics() -> None:
    user = SimpleNamespace(role="user", metrics={"transcription_delay": 0.21, "end_of_turn_delay": 0.4})
    reply = SimpleNamespace(
        role="assistant", interrupted=False, metrics={"e2e_latency": 0.9, "llm_node_ttft": 0.12}
    )
    lat = turn_latency(3, user, reply)
    assert (lat.turn, lat.stt_final_ms, lat.end_of_turn_ms, lat.llm_ttft_ms, lat.e2e_ms) == (
        3,
        210,
        400,
        120,
        900,
    )
    assert json.loads(lat.to_json()) == {
        "turn": 3,
        "e2e_ms": 900.0,
        "stt_final_ms": 210.0,
        "end_of_turn_ms": 400.0,
        "llm_ttft_ms": 120.0,
        "interrupted": False,
    }


class FakeRoom:
    def __init__(self) -> None:
        self.sent: list[tuple[bytes, str]] = []
        self.local_participant = self

    def isconnected(self) -> bool:
        return True

    async def publish_data(self, payload: bytes, *, reliable: bool, topic: str) -> None:
        self.sent.append((payload, topic))


async def test_publisher_numbers_turns_from_the_greeting() -> None:
    room = FakeRoom()
    pub = RoomMetricsPublisher(room)  # type: ignore[arg-type]
    handlers: dict[str, Any] = {}
    pub.attach(SimpleNamespace(on=lambda name, fn: handlers.setdefault(name, fn)))
    on_item = handlers["conversation_item_added"]
    say = lambda role, **m: on_item(SimpleNamespace(item=SimpleNamespace(role=role, metrics=m)))  # noqa: E731
    say("assistant")  # greeting
    say("user", transcription_delay=0.3)
    pub.note_v2v(850.0)
    say("assistant", e2e_latency=0.8)
    await pub.aclose()
    await asyncio.sleep(0)
    msgs = [json.loads(p) for p, topic in room.sent if topic == METRICS_TOPIC]
    assert [m["turn"] for m in msgs] == [0, 1]
    assert msgs[1]["v2v_ms"] == 850.0 and msgs[1]["stt_final_ms"] == 300.0


def test_call_token_is_scoped_to_one_room_with_the_agent_dispatched() -> None:
    opts = TokenOptions(api_key="k", api_secret="s" * 32, agent_name="parley", ttl_s=60)
    tok = issue_call_token(opts, room="r1", identity="alice")
    claims = api.TokenVerifier("k", "s" * 32).verify(tok.token)
    assert claims.video is not None and claims.video.room == "r1" and claims.video.room_join
    assert claims.identity == "alice"
    assert claims.room_config is not None
    assert [a.agent_name for a in claims.room_config.agents] == ["parley"]
    fresh = issue_call_token(opts)
    assert fresh.room.startswith("parley-") and fresh.room != issue_call_token(opts).room
    with pytest.raises(TokenRequestError, match="room must be"):
        issue_call_token(opts, room="../etc")
    no_agent = issue_call_token(TokenOptions("k", "s" * 32, agent_name=""), room="r2", identity="bob")
    assert not api.TokenVerifier("k", "s" * 32).verify(no_agent.token).room_config


class _PlayedLine:
    """A said line that has played out (add_done_callback runs at once)."""

    def add_done_callback(self, fn: Any) -> None:
        asyncio.get_running_loop().call_soon(fn, self)


async def test_a_transfer_that_went_through_is_told_and_a_failed_one_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The transfer tool says its line, then asks livekit-sip; only a transfer it took reaches the
    end-of-call report. livekit-sip cannot be installed here, so its API is a named double."""
    from worker import sip

    class SipApiDouble:
        def __init__(self, fail: bool) -> None:
            self.fail, self.requests = fail, []

        async def transfer_sip_participant(self, request: api.TransferSIPParticipantRequest) -> None:
            self.requests.append(request)
            if self.fail:
                raise api.TwirpError("unavailable", "the PBX refused the REFER", 503)

    caller = SimpleNamespace(kind=SIP, identity="sip_caller", attributes={})
    said: list[str] = []
    session = SimpleNamespace(say=lambda text, **_: said.append(text) or _PlayedLine())
    for fail in (False, True):
        told: list[bool] = []
        double = SipApiDouble(fail)
        job = SimpleNamespace(
            room=SimpleNamespace(name="call-1", remote_participants={"sip_caller": caller}),
            api=SimpleNamespace(sip=double),
        )
        monkeypatch.setattr(sip, "get_job_context", lambda job=job: job)
        opts = TelephonyToolOptions(
            transfer_targets={"front desk": "tel:+15550100"},
            on_transferred=lambda told=told: told.append(True),
        )
        tool = sip.transfer_call_tool(opts)
        assert tool is not None
        await tool(SimpleNamespace(session=session), destination="Front Desk")
        for _ in range(20):
            await asyncio.sleep(0.01)
        assert [r.transfer_to for r in double.requests] == ["tel:+15550100"]
        assert told == ([] if fail else [True])
    assert said[-1] == opts.transfer_failed  # the failed one says so, and the call goes on
