"""An outbound call's job before and after the session starts: dial the number the job names (the call is
over when nobody answers), then greet whoever answered or leave the voicemail message after the beep.
Parsing the request, dialling and reading the answer live in `worker/outbound.py`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable
from typing import Any

from livekit.agents import JobContext

from .call_report import CallReporter
from .outbound import (
    OutboundCall,
    OutboundError,
    answer_handling,
    dial,
    handle_answer,
    outbound_request,
    prepare_lines,
)
from .reporting import call_reporter
from .settings import Settings
from .sip import hang_up

log = logging.getLogger("parley.worker")


async def outbound_dial(ctx: JobContext, settings: Settings) -> tuple[bool, OutboundCall | None]:
    """(whether the job goes on, its outbound call dialled and answered or None for an inbound job). The
    job is over after a malformed request or when nobody answered: both logged in one line, the latter
    also in the call report."""
    try:
        call = outbound_request(ctx.job.metadata)
    except OutboundError as e:
        log.error("%s", e)
        ctx.shutdown(str(e))
        return False, None
    if call is None or not call.dials:
        return True, call
    trunk = call.trunk or settings.sip_outbound_trunk
    if not trunk:
        log.error("outbound call: no SIP trunk: set PARLEY_SIP_OUTBOUND_TRUNK or outbound.trunk")
        ctx.shutdown("outbound call without a trunk")
        return False, None
    result = await dial(ctx.api, ctx.room.name, call, trunk)
    if result.answered:
        return True, call
    log.info("outbound call not answered", extra={"outcome": result.outcome, "sip_status": result.sip_status})
    reporter = call_reporter(ctx, settings, None, "telephony", outbound=True)
    if reporter is not None:
        reporter.log.note_ended_by(result.outcome)
        await reporter.finish([])
    ctx.shutdown(f"outbound call: {result.outcome}")
    return False, None


async def answer_outbound(
    ctx: JobContext,
    settings: Settings,
    call: OutboundCall,
    session: Any,
    agent: Any,
    audio: AsyncIterable[Any],
    rate: int,
    reporter: CallReporter | None,
) -> None:
    """Greet whoever answered, or leave the voicemail message after the beep and end the call (or end it at
    once on a not-in-service tone)."""
    from .agent import OUTBOUND_GREETING

    built_in = OUTBOUND_GREETING.get(settings.language, OUTBOUND_GREETING["en"])
    greeting = call.greeting or settings.outbound_greeting or built_in
    message = call.voicemail if call.voicemail is not None else settings.voicemail_message

    async def end_call(why: str) -> None:  # voicemail, not_in_service
        if reporter is not None:
            reporter.log.note_ended_by(why)
        await hang_up(ctx.api, ctx.room.name)

    cached = agent.greeting_audio if getattr(agent, "greeting_audio", None) else lambda _text: None
    lines = [t for t in (greeting, message) if t and cached(t) is None]
    prepared: dict[str, Any] = {}
    preparing = asyncio.create_task(prepare_lines(session.tts, lines, prepared)) if lines else None
    try:
        await handle_answer(
            audio,
            rate,
            answer_handling(session, agent, greeting, message, end_call, prepared, settings.language),
        )
    finally:
        if preparing is not None:
            preparing.cancel()
