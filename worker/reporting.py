"""Which end-of-call reporter a job gets and when it sends: `worker/call_report.py` writes the report."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from livekit.agents import JobContext

from .call_report import CallEndMetrics, CallIdentity, CallReporter, CallReportOptions
from .settings import Settings
from .sip import ATTR_PHONE_NUMBER, SipCall
from .turn_marks import RoomMetricsPublisher

log = logging.getLogger("parley.worker")


def report_sender(
    reporter: CallReporter, metrics: RoomMetricsPublisher
) -> Callable[[], Coroutine[None, None, None]]:
    async def send() -> None:  # at the job's shutdown, when every reply's figures are in
        await reporter.finish(metrics.replies)

    return send


def call_reporter(
    ctx: JobContext, settings: Settings, participant: Any, profile: str, outbound: bool = False
) -> CallReporter | None:
    """How this call ends, reported (worker/call_report.py): to PARLEY_CALL_REPORT_URL and, with a
    Prometheus port, counted; None when neither is set. `participant` is None for an outbound call nobody
    answered."""
    if not settings.call_report_url and not settings.prometheus_port:
        return None
    sip = SipCall.from_participant(participant) if participant is not None else None
    opts = None
    if settings.call_report_url:
        try:
            opts = CallReportOptions(
                url=settings.call_report_url,
                secret=settings.call_report_secret.get_secret_value(),
                include_transcript=settings.call_report_transcript,
            )
        except ValueError as e:  # refused at start (check_call_report); an agent file may set it later
            log.error("call report not sent: %s", e)
    identity = CallIdentity(
        job_id=ctx.job.id,
        room=ctx.room.name,
        agent=settings.agent_name,  # the agent file's name unless PARLEY_AGENT_NAME says otherwise
        profile=profile,
        phone=sip is not None or (outbound and participant is None),
        direction="outbound" if outbound else "inbound",
        sip_call_id=sip.call_id if sip else "",
        caller_number=participant.attributes.get(ATTR_PHONE_NUMBER, "") if sip else "",
    )
    return CallReporter(identity, opts, CallEndMetrics() if settings.prometheus_port else None)
