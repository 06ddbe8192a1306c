"""The end-of-call report: one JSON document per call, POSTed to your URL when the call ends.

Hosted voice stacks tell the operator's backend how each call went (Vapi's end-of-call report, Retell's
`call_ended` webhook); this is Parley's. It carries what a CRM or a dashboard needs without reading logs:
when the call started and ended, how it ended (the caller hung up, the agent ended it, a transfer, a silent
line, the time limit, a worker shutdown, an error), how many turns each side took, each reply's latency as
the agent measured it, and which tools ran and which failed. Only with the file's `report.transcript: true`
does it carry personal data: what each side said, the room's name and a phone caller's number. Otherwise
the room name is hashed as in the logs and no words leave the host.

Delivery: `POST` of `application/json`, no redirects, signed when a secret is set (`X-Parley-Signature:
t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, so the receiver can check who sent it and refuse
an old replay; each report's signed `report_id` is new, so a receiver refuses a replay within the window
too, with 409, which the sender takes as delivered), retried after a connection error, a timeout, 408, 429
or a 5xx, all within a deadline that fits the job's shutdown (LiveKit gives a job process 10 s). A report
with transcripts must be signed and go to an https:// URL (http:// only to a loopback receiver); an
unsigned one costs a warning when the worker starts (issue 66). A report that cannot be sent costs one warning
line and nothing else: the call has already ended. With a Prometheus port the same ending is counted
(`parley_calls_ended_total{ended_by, channel}`, `parley_call_duration_seconds{channel}`), URL or not.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp

from .log_privacy import label
from .measurement import TurnLatency
from .settings import is_loopback

log = logging.getLogger("parley.call_report")

REPORT_VERSION = 1
SIGNATURE_HEADER = "X-Parley-Signature"
MAX_TRANSCRIPT_CHARS = 200_000  # a longer call's transcript is cut at the end, and says so

EndedBy = Literal[
    "caller_hung_up",
    "agent_ended_call",
    "transferred",
    "silence",
    "time_limit",
    "worker_shutdown",
    "error",
    "voicemail",
    "busy",
    "no_answer",
    "declined",
    "failed",
    "not_in_service",
    "unknown",
]
PARLEY_ENDINGS = (
    "silence",
    "time_limit",
    "transferred",
    "voicemail",
    "busy",
    "no_answer",
    "declined",
    "failed",
    "not_in_service",
)
"""Endings Parley knows first-hand: a silent line, the time limit, a transfer that went through, a voicemail
message left, an outbound call nobody answered (busy, no answer, declined, failed to dial) or that reached a
not-in-service tone."""


@dataclass(frozen=True)
class CallReportOptions:
    url: str
    secret: str = ""
    include_transcript: bool = False  # words, the room's name and a phone caller's number
    timeout_s: float = 3.0  # one attempt
    attempts: int = 3
    deadline_s: float = 8.0  # every attempt together: inside the job's 10 s shutdown
    max_transcript_chars: int = MAX_TRANSCRIPT_CHARS

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"the call report URL must start with http:// or https:// (got {self.url!r})")
        if self.attempts < 1 or self.timeout_s <= 0 or self.deadline_s <= 0:
            raise ValueError("attempts must be >= 1, timeout_s and deadline_s > 0")
        if self.include_transcript and not self.secret:
            raise ValueError("a call report with transcripts must be signed: set PARLEY_CALL_REPORT_SECRET")
        if (
            self.include_transcript
            and self.url.startswith("http://")
            and not is_loopback(urlsplit(self.url).hostname or "")
        ):
            raise ValueError(
                "a call report with transcripts goes to an https:// URL (http:// only on loopback)"
            )


@dataclass(frozen=True)
class CallIdentity:
    """Who and what the call was, as the worker knows it when the caller joins."""

    job_id: str
    room: str
    agent: str
    profile: str  # the turn profile: web | telephony
    phone: bool
    direction: str = "inbound"  # "outbound": the agent placed the call (worker/outbound.py)
    sip_call_id: str = ""
    caller_number: str = ""  # personal: sent only with include_transcript


@dataclass
class _Line:
    role: Literal["caller", "agent"]
    text: str
    at_s: float
    interrupted: bool = False


@dataclass
class _ToolRun:
    name: str
    ok: bool


@dataclass
class CallLog:
    """What the report says, gathered from one session's events."""

    identity: CallIdentity
    clock: Callable[[], float] = time.time
    started_at: float = 0.0
    ended_at: float | None = None
    lines: list[_Line] = field(default_factory=list)
    tools: list[_ToolRun] = field(default_factory=list)
    close_reason: str = ""
    close_error: str = ""
    ended_by_parley: str = ""  # set by Parley's own endings (the idle watch)

    def __post_init__(self) -> None:
        self.started_at = self.started_at or self.clock()

    def attach(self, session: Any) -> None:
        session.on("conversation_item_added", self._on_item)
        session.on("function_tools_executed", self._on_tools)
        session.on("close", self._on_close)

    def note_ended_by(self, reason: str) -> None:
        """Parley ended the call itself (`silence`, `time_limit`): that, not the close that follows."""
        self.ended_by_parley = reason

    def note_transferred(self) -> None:
        """livekit-sip took the transfer (the tool only asks for it after a line: it may still fail)."""
        self.ended_by_parley = "transferred"

    # --- events ----------------------------------------------------------------------------------------
    def _on_item(self, ev: Any) -> None:
        item = ev.item
        if getattr(item, "type", "") != "message" or item.role not in ("user", "assistant"):
            return
        text = item.text_content or ""
        if not text.strip():
            return
        self.lines.append(
            _Line(
                role="caller" if item.role == "user" else "agent",
                text=text,
                at_s=round(max(0.0, getattr(item, "created_at", self.clock()) - self.started_at), 2),
                interrupted=bool(getattr(item, "interrupted", False)),
            )
        )

    def _on_tools(self, ev: Any) -> None:
        for call, output in zip(ev.function_calls, ev.function_call_outputs, strict=False):
            self.tools.append(_ToolRun(name=call.name, ok=not getattr(output, "is_error", False)))

    def _on_close(self, ev: Any) -> None:
        self.ended_at = self.clock()
        reason = getattr(ev, "reason", "")
        self.close_reason = str(getattr(reason, "value", reason) or "")
        error = getattr(ev, "error", None)
        if error is not None:
            self.close_error = type(getattr(error, "error", error)).__name__

    # --- the report ------------------------------------------------------------------------------------
    def ended_by(self) -> EndedBy:
        """Parley's own ending first (PARLEY_ENDINGS), then the end_call tool, then why the session closed."""
        if self.ended_by_parley in PARLEY_ENDINGS:
            return self.ended_by_parley  # type: ignore[return-value]
        if "end_call" in {t.name for t in self.tools if t.ok}:
            return "agent_ended_call"
        return {
            "participant_disconnected": "caller_hung_up",
            "user_initiated": "agent_ended_call",
            "task_completed": "agent_ended_call",
            "job_shutdown": "worker_shutdown",
            "error": "error",
        }.get(self.close_reason, "unknown")  # type: ignore[return-value]

    def report(
        self,
        replies: Sequence[TurnLatency],
        include_transcript: bool,
        max_transcript_chars: int = MAX_TRANSCRIPT_CHARS,
    ) -> dict[str, Any]:
        ended = self.ended_at or self.clock()
        ident = self.identity
        answered = [r for r in replies if r.turn > 0]  # turn 0 is the greeting
        e2e = sorted(r.e2e_ms for r in answered if r.e2e_ms is not None)
        body: dict[str, Any] = {
            "version": REPORT_VERSION,
            "report_id": uuid.uuid4().hex,  # signed with the body: a receiver refuses a second copy
            "job_id": ident.job_id,
            "room": ident.room if include_transcript else label(ident.room),
            "agent": ident.agent,
            "channel": "phone" if ident.phone else "web",
            "direction": ident.direction,
            "turn_profile": ident.profile,
            "started_at": _iso(self.started_at),
            "ended_at": _iso(ended),
            "duration_s": round(max(0.0, ended - self.started_at), 2),
            "ended_by": self.ended_by(),
            "close_reason": self.close_reason or None,
            "error": self.close_error or None,
            "caller_turns": sum(1 for line in self.lines if line.role == "caller"),
            "agent_lines": sum(1 for line in self.lines if line.role == "agent"),
            "agent_lines_interrupted": sum(1 for line in self.lines if line.interrupted),
            "tools": [asdict(t) for t in self.tools],
            # agent-side figures (LiveKit's e2e_latency: end of the caller's speech to the reply's first
            # audio handed out); the caller hears each ~0.1 s later through the network
            "reply_latency_ms": {"p50": _pct(e2e, 50), "p95": _pct(e2e, 95), "replies": len(e2e)},
            "replies": [_reply(r) for r in answered],
        }
        if ident.phone:
            body["sip_call_id"] = ident.sip_call_id or None
        if include_transcript:
            if ident.phone:
                body["caller_number"] = ident.caller_number or None
            body["transcript"], body["transcript_truncated"] = self._transcript(max_transcript_chars)
        return body

    def _transcript(self, max_chars: int) -> tuple[list[dict[str, Any]], bool]:
        out: list[dict[str, Any]] = []
        used = 0
        for line in self.lines:
            if used + len(line.text) > max_chars:
                return out, True
            used += len(line.text)
            out.append({k: v for k, v in asdict(line).items() if k != "interrupted" or v})
        return out, False


def _reply(r: TurnLatency) -> dict[str, Any]:
    return {k: v for k, v in asdict(r).items() if v is not None and (k != "interrupted" or v)}


def _pct(sorted_values: Sequence[float], q: float) -> float | None:
    if not sorted_values:
        return None
    k = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return round(sorted_values[k], 1)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def signature(secret: str, body: bytes, t: int) -> str:
    """The `X-Parley-Signature` value: the receiver recomputes the HMAC over `<t>.<body>` with the shared
    secret, compares in constant time, and refuses a `t` older than a few minutes."""
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def verify_signature(secret: str, header: str, body: bytes, max_age_s: float = 300.0) -> bool:
    """A receiver's check of `X-Parley-Signature` (what `python -m worker.call_report_receiver` runs)."""
    try:
        fields = dict(part.split("=", 1) for part in header.split(","))
        t = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - t) > max_age_s:
        return False
    return hmac.compare_digest(signature(secret, body, t), f"t={t},v1={fields.get('v1', '')}")


def _where(url: str) -> str:
    """The URL as logged: scheme and host only (a path or query may hold a token)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}"


async def send_report(opts: CallReportOptions, report: dict[str, Any]) -> bool:
    """POST the report; True once the receiver answered 2xx. Never raises."""
    body = json.dumps(report, separators=(",", ":"), ensure_ascii=False).encode()
    headers = {"Content-Type": "application/json", "User-Agent": f"parley-call-report/{REPORT_VERSION}"}
    if opts.secret:
        headers[SIGNATURE_HEADER] = signature(opts.secret, body, int(time.time()))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + opts.deadline_s
    why = "no attempt made"
    async with aiohttp.ClientSession() as http:
        for attempt in range(1, opts.attempts + 1):
            left = deadline - loop.time()
            if left <= 0.1:
                why += " (deadline reached)"
                break
            try:
                timeout = aiohttp.ClientTimeout(total=min(opts.timeout_s, left))
                async with http.post(
                    opts.url, data=body, headers=headers, allow_redirects=False, timeout=timeout
                ) as resp:
                    if 200 <= resp.status < 300 or resp.status == 409:  # 409: it has this one already
                        return True
                    why = f"HTTP {resp.status}"
                    retry = resp.status in (408, 429) or resp.status >= 500
            except (aiohttp.ClientError, TimeoutError, OSError) as e:
                why, retry = type(e).__name__, True
            if not retry or attempt == opts.attempts:
                break
            await asyncio.sleep(min(0.5 * 2 ** (attempt - 1), max(0.0, deadline - loop.time())))
    log.warning("call report not delivered to %s: %s", _where(opts.url), why)
    return False


class CallEndMetrics:
    """Prometheus: calls ended, by how they ended and by channel, and their durations (one set per process,
    written to the worker's multiprocess directory like the turn-stage histograms)."""

    def __init__(self) -> None:
        from prometheus_client import REGISTRY, Counter, Histogram

        ended, duration = "parley_calls_ended", "parley_call_duration_seconds"
        self.ended: Any = REGISTRY._names_to_collectors.get(ended) or Counter(
            ended,
            "Calls ended, by how they ended (caller_hung_up, silence, error, ...)",
            ["ended_by", "channel"],
        )
        self.duration: Any = REGISTRY._names_to_collectors.get(duration) or Histogram(
            duration,
            "Call durations, from the caller joining to the call's end",
            ["channel"],
            buckets=(10, 30, 60, 120, 300, 600, 1200, 1800, 3600),
        )

    def observe(self, report: dict[str, Any]) -> None:
        self.ended.labels(ended_by=report["ended_by"], channel=report["channel"]).inc()
        self.duration.labels(channel=report["channel"]).observe(report["duration_s"])


class CallReporter:
    """One per call: gathers the log from the session; at the job's shutdown counts the call's end
    (Prometheus) and sends the report (a URL)."""

    def __init__(
        self,
        identity: CallIdentity,
        opts: CallReportOptions | None = None,
        metrics: CallEndMetrics | None = None,
    ) -> None:
        self.opts = opts
        self.metrics = metrics
        self.log = CallLog(identity)
        self.sent: bool | None = None  # None until the call was finished

    def attach(self, session: Any) -> None:
        self.log.attach(session)

    async def finish(self, replies: Sequence[TurnLatency]) -> bool:
        """Once per call, even if shutdown runs twice; True when a report was delivered."""
        if self.sent is not None:
            return self.sent
        self.sent = False
        opts = self.opts
        try:
            report = self.log.report(
                replies,
                opts.include_transcript if opts else False,
                opts.max_transcript_chars if opts else 0,
            )
            if self.metrics is not None:
                self.metrics.observe(report)
        except Exception as e:  # a bug here must not stop the job's other shutdown work
            log.warning("call report not built: %s: %s", type(e).__name__, e)
            return False
        if opts is not None:
            self.sent = await send_report(opts, report)
        return self.sent
