"""The end-of-call report: what it says (from livekit-agents' own event objects), who it names, and how it
is delivered to a real HTTP receiver on loopback (`worker.call_report_receiver`, or a receiver that fails
the way real backends do)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from livekit.agents.llm import ChatMessage, FunctionCall, FunctionCallOutput
from livekit.agents.voice.events import (
    CloseEvent,
    CloseReason,
    ConversationItemAddedEvent,
    FunctionToolsExecutedEvent,
)
from livekit.rtc import EventEmitter

from worker.call_report import (
    SIGNATURE_HEADER,
    CallIdentity,
    CallLog,
    CallReporter,
    CallReportOptions,
    send_report,
    signature,
    verify_signature,
)
from worker.call_report_receiver import make_app
from worker.measurement import TurnLatency

PHONE = CallIdentity(
    job_id="AJ_1",
    room="_+15550001111_abc",
    agent="bike-shop",
    profile="telephony",
    phone=True,
    sip_call_id="SCL_9",
    caller_number="+15550001111",
)
REPLIES = [
    TurnLatency(turn=0, e2e_ms=120.0),
    TurnLatency(turn=1, e2e_ms=610.0),
    TurnLatency(turn=2, e2e_ms=540.0),
]


def said(session: EventEmitter[Any], role: str, text: str, interrupted: bool = False) -> None:
    item = ChatMessage(role=role, content=[text], interrupted=interrupted)  # type: ignore[arg-type]
    session.emit("conversation_item_added", ConversationItemAddedEvent(item=item))


def tool_ran(session: EventEmitter[Any], name: str, ok: bool = True) -> None:
    call = FunctionCall(call_id="c1", name=name, arguments="{}")
    out = FunctionCallOutput(call_id="c1", name=name, output="done", is_error=not ok)
    session.emit(
        "function_tools_executed",
        FunctionToolsExecutedEvent(function_calls=[call], function_call_outputs=[out]),
    )


def closed(session: EventEmitter[Any], reason: CloseReason) -> None:
    session.emit("close", CloseEvent(reason=reason))


def a_call(identity: CallIdentity = PHONE) -> tuple[EventEmitter[Any], CallLog]:
    session: EventEmitter[Any] = EventEmitter()
    log = CallLog(identity)
    log.attach(session)
    said(session, "assistant", "Hi, you've reached the shop.")
    said(session, "user", "My bike is ready yet? It's order 4471.")
    tool_ran(session, "order_status")
    said(session, "assistant", "Yes, it is ready since noon.", interrupted=True)
    said(session, "user", "Great, thanks.")
    return session, log


def test_a_call_the_caller_hung_up_reads_as_such_and_carries_no_words_by_default() -> None:
    session, log = a_call()
    closed(session, CloseReason.PARTICIPANT_DISCONNECTED)
    r = log.report(REPLIES, include_transcript=False)
    assert r["ended_by"] == "caller_hung_up" and r["channel"] == "phone" and r["turn_profile"] == "telephony"
    assert (r["caller_turns"], r["agent_lines"], r["agent_lines_interrupted"]) == (2, 2, 1)
    assert r["tools"] == [{"name": "order_status", "ok": True}]
    # the greeting (turn 0) is not a reply; p50 / p95 over the two answers
    assert r["reply_latency_ms"] == {"p50": 540.0, "p95": 610.0, "replies": 2}
    assert [x["turn"] for x in r["replies"]] == [1, 2]
    text = json.dumps(r)
    for personal in ("4471", "bike is ready", "+15550001111", "_+15550001111_abc"):
        assert personal not in text, personal
    assert r["room"].startswith("#") and r["sip_call_id"] == "SCL_9"


def test_with_the_transcript_the_report_names_the_caller_and_keeps_every_line_in_order() -> None:
    session, log = a_call()
    closed(session, CloseReason.PARTICIPANT_DISCONNECTED)
    r = log.report(REPLIES, include_transcript=True)
    assert r["room"] == PHONE.room and r["caller_number"] == "+15550001111"
    lines = r["transcript"]
    assert [(x["role"], x.get("interrupted", False)) for x in lines] == [
        ("agent", False),
        ("caller", False),
        ("agent", True),
        ("caller", False),
    ]
    assert lines[1]["text"] == "My bike is ready yet? It's order 4471." and r["transcript_truncated"] is False
    assert all(0 <= x["at_s"] < 60 for x in lines)
    cut = log.report(REPLIES, include_transcript=True, max_transcript_chars=40)
    assert cut["transcript_truncated"] is True and len(cut["transcript"]) == 1


@pytest.mark.parametrize(
    ("parley", "tools", "reason", "expected"),
    [
        ("silence", [("end_call", True)], CloseReason.PARTICIPANT_DISCONNECTED, "silence"),
        ("time_limit", [], CloseReason.USER_INITIATED, "time_limit"),
        ("transferred", [("transfer_call", True)], CloseReason.PARTICIPANT_DISCONNECTED, "transferred"),
        # the tool asked for a transfer that never went through: the caller hung up later
        ("", [("transfer_call", True)], CloseReason.PARTICIPANT_DISCONNECTED, "caller_hung_up"),
        ("", [("end_call", True)], CloseReason.USER_INITIATED, "agent_ended_call"),
        ("", [], CloseReason.JOB_SHUTDOWN, "worker_shutdown"),
        ("", [], CloseReason.ERROR, "error"),
        ("", [], None, "unknown"),
    ],
)
def test_who_ended_the_call(
    parley: str, tools: list[tuple[str, bool]], reason: CloseReason | None, expected: str
) -> None:
    session, log = a_call()
    for name, ok in tools:
        tool_ran(session, name, ok)
    if parley == "transferred":
        log.note_transferred()
    elif parley:
        log.note_ended_by(parley)
    if reason is not None:
        closed(session, reason)
    assert log.ended_by() == expected


def test_options_refuse_a_url_that_is_not_http() -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        CallReportOptions(url="file:///etc/passwd")


def test_options_refuse_transcripts_unsigned_or_in_clear() -> None:
    with pytest.raises(ValueError, match="must be signed"):
        CallReportOptions(url="https://crm.example/hook", include_transcript=True)
    with pytest.raises(ValueError, match="https://"):
        CallReportOptions(url="http://crm.example/hook", secret="s", include_transcript=True)
    CallReportOptions(url="https://crm.example/hook", secret="s", include_transcript=True)
    CallReportOptions(url="http://127.0.0.1:8787/report", secret="s", include_transcript=True)
    CallReportOptions(url="http://crm.example/hook")  # no words in it: allowed (the worker warns if unsigned)


def test_a_signature_verifies_with_its_secret_only_and_only_while_fresh() -> None:
    body = b'{"a":1}'
    now = int(time.time())
    assert verify_signature("s3", signature("s3", body, now), body)
    assert not verify_signature("other", signature("s3", body, now), body)
    assert not verify_signature("s3", signature("s3", body, now), b'{"a":2}')
    assert not verify_signature("s3", signature("s3", body, now - 3600), body)
    assert not verify_signature("s3", "garbage", body)


# --- delivery, over real HTTP on loopback ------------------------------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(app: web.Application) -> AsyncIterator[str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_a_signed_report_reaches_the_receiver(tmp_path: Path) -> None:
    out = tmp_path / "reports.jsonl"
    session, log = a_call()
    closed(session, CloseReason.PARTICIPANT_DISCONNECTED)
    async for base in serve(make_app(out, secret="s3cret")):
        reporter = CallReporter(PHONE, CallReportOptions(url=f"{base}/report", secret="s3cret"))
        reporter.log = log
        assert await reporter.finish(REPLIES) is True
        assert await reporter.finish(REPLIES) is True  # one report per call: not sent twice
        wrong = CallReportOptions(url=f"{base}/report", secret="not-it", attempts=3)
        assert await send_report(wrong, {"x": 1}) is False  # 401: refused, not retried
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(docs) == 1 and docs[0]["ended_by"] == "caller_hung_up" and docs[0]["version"] == 1


async def test_a_replayed_report_is_refused_within_the_signature_window(tmp_path: Path) -> None:
    out = tmp_path / "reports.jsonl"
    session, log = a_call()
    closed(session, CloseReason.PARTICIPANT_DISCONNECTED)
    report = log.report(REPLIES, include_transcript=False)
    assert len(report["report_id"]) == 32 and log.report(REPLIES, False)["report_id"] != report["report_id"]
    async for base in serve(make_app(out, secret="s3cret")):
        opts = CallReportOptions(url=f"{base}/report", secret="s3cret")
        assert await send_report(opts, report) is True
        body = json.dumps(report, separators=(",", ":"), ensure_ascii=False).encode()
        headers = {SIGNATURE_HEADER: signature("s3cret", body, int(time.time()))}
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{base}/report", data=body, headers=headers) as replay:
                assert replay.status == 409  # a valid signature, a fresh t, the same report: refused
            no_id = json.dumps({"x": 1}).encode()
            headers = {SIGNATURE_HEADER: signature("s3cret", no_id, int(time.time()))}
            async with http.post(f"{base}/report", data=no_id, headers=headers) as bare:
                assert bare.status == 400
        assert await send_report(opts, report) is True  # the sender's own retry of a kept report
    assert len(out.read_text().splitlines()) == 1


async def test_a_failing_receiver_is_retried_and_a_refusing_one_is_not() -> None:
    seen: list[str] = []

    async def flaky(request: web.Request) -> web.Response:
        seen.append(request.path)
        if request.path == "/busy" and seen.count("/busy") < 3:
            return web.Response(status=503)
        if request.path == "/moved":
            raise web.HTTPFound("/elsewhere")
        if request.path == "/bad":
            return web.Response(status=400)
        assert SIGNATURE_HEADER not in request.headers  # no secret set: unsigned
        return web.Response(status=200)

    app = web.Application()
    app.router.add_route("POST", "/{name}", flaky)
    async for base in serve(app):
        opts = CallReportOptions(url=f"{base}/busy", attempts=3, deadline_s=5)
        assert await send_report(opts, {"x": 1}) is True
        assert seen.count("/busy") == 3
        assert await send_report(CallReportOptions(url=f"{base}/bad"), {"x": 1}) is False
        assert seen.count("/bad") == 1
        assert await send_report(CallReportOptions(url=f"{base}/moved"), {"x": 1}) is False
        assert "/elsewhere" not in seen  # redirects are not followed


async def test_a_dead_receiver_costs_one_warning_within_the_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a port nothing listens on: bind one, then close it
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    opts = CallReportOptions(url=f"http://127.0.0.1:{port}/hook?token=abc123", deadline_s=1.5)
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="parley.call_report"):
        assert await send_report(opts, {"x": 1}) is False
    assert time.monotonic() - t0 < 3.0
    warnings = [r for r in caplog.records if r.name == "parley.call_report"]
    assert len(warnings) == 1 and "\n" not in warnings[0].getMessage()
    assert "abc123" not in warnings[0].getMessage() and "/hook" not in warnings[0].getMessage()


async def test_with_a_prometheus_port_every_ending_is_counted_url_or_not() -> None:
    from prometheus_client import REGISTRY, generate_latest

    from worker.call_report import CallEndMetrics

    def count() -> float:
        value = REGISTRY.get_sample_value(
            "parley_calls_ended_total", {"ended_by": "silence", "channel": "phone"}
        )
        return value or 0.0

    before = count()
    session, log = a_call()
    log.note_ended_by("silence")
    closed(session, CloseReason.USER_INITIATED)
    first, again = CallEndMetrics(), CallEndMetrics()  # one set per process, however many calls
    assert first.ended is again.ended
    reporter = CallReporter(PHONE, None, again)  # no URL: counted, nothing sent
    reporter.log = log
    assert await reporter.finish(REPLIES) is False
    assert await reporter.finish(REPLIES) is False  # counted once
    assert count() == before + 1
    assert b'parley_call_duration_seconds_count{channel="phone"}' in generate_latest(REGISTRY)


def test_the_worker_refuses_to_start_sending_transcripts_unsigned_and_warns_when_unsigned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from pydantic import SecretStr

    from worker.settings import SettingsError, load_settings
    from worker.startup import check_call_report

    base = load_settings()

    def with_report(url: str, secret: str = "", transcript: bool = False) -> Any:
        update = {"call_report_url": url, "call_report_secret": SecretStr(secret)}
        return base.model_copy(update={**update, "call_report_transcript": transcript})

    with pytest.raises(SettingsError, match="must be signed"):
        check_call_report(with_report("https://crm.example/hook", transcript=True))
    with pytest.raises(SettingsError, match="https://"):
        check_call_report(with_report("http://crm.example/hook", "s3", transcript=True))
    with caplog.at_level(logging.WARNING, logger="parley.worker"):
        check_call_report(with_report("https://crm.example/hook", "s3", transcript=True))
        assert not caplog.records
        check_call_report(with_report("https://crm.example/hook"))
    assert [r.getMessage() for r in caplog.records] == [
        "call reports are unsigned: set PARLEY_CALL_REPORT_SECRET so the receiver can check them"
    ]
