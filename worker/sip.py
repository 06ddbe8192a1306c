"""Telephony for callers who arrive through LiveKit SIP: who is on the phone, keypad digits, and two tools
(hang up politely, transfer) the LLM can call.

A phone line is 8 kHz narrow-band with more line noise and slower turn-taking than a browser, so SIP
callers get the telephony turn profile; everything else about the call is the same pipeline.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from livekit import api, rtc
from livekit.agents import RunContext, ToolError, function_tool, get_job_context
from livekit.agents.llm import FunctionTool

log = logging.getLogger("parley.sip")

# Attributes livekit-sip sets on the caller's participant.
ATTR_CALL_ID = "sip.callID"
ATTR_CALL_STATUS = "sip.callStatus"
ATTR_TRUNK_NUMBER = "sip.trunkPhoneNumber"
ATTR_PHONE_NUMBER = "sip.phoneNumber"  # the caller's number: personal, never logged

TELEPHONY_SAMPLE_RATE = 8000
WEB_SAMPLE_RATE = 16000
DTMF_KEYS = frozenset("0123456789*#ABCD")

TurnProfile = Literal["web", "telephony"]


# --- who is calling -------------------------------------------------------------------------------------


def is_sip_participant(participant: rtc.Participant) -> bool:
    return participant.kind == rtc.ParticipantKind.PARTICIPANT_KIND_SIP


@dataclass(frozen=True)
class SipCall:
    """What the worker may know about a phone caller (the caller's number is PII and kept out)."""

    identity: str
    call_id: str
    status: str
    trunk_number: str

    @classmethod
    def from_participant(cls, participant: rtc.Participant) -> SipCall | None:
        if not is_sip_participant(participant):
            return None
        attrs = participant.attributes
        return cls(
            identity=participant.identity,
            call_id=attrs.get(ATTR_CALL_ID, ""),
            status=attrs.get(ATTR_CALL_STATUS, ""),
            trunk_number=attrs.get(ATTR_TRUNK_NUMBER, ""),
        )


def pick_turn_profile(setting: str, participant: rtc.Participant | None) -> TurnProfile:
    """`auto` follows the caller: telephony for SIP callers, web for everyone else."""
    if setting in ("web", "telephony"):
        return setting  # type: ignore[return-value]
    if setting != "auto":
        raise ValueError(f"turn profile must be auto, web or telephony (got {setting!r})")
    return "telephony" if participant is not None and is_sip_participant(participant) else "web"


def input_sample_rate(profile: TurnProfile) -> int:
    """Phone audio carries nothing above 4 kHz: taking it at 8 kHz saves resampling work."""
    return TELEPHONY_SAMPLE_RATE if profile == "telephony" else WEB_SAMPLE_RATE


# --- keypad digits -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DtmfOptions:
    submit_key: str = "#"  # ends the entry at once
    clear_key: str = "*"  # starts the entry over
    max_digits: int = 16
    inter_digit_timeout_s: float = 3.0  # an entry also ends after this long without a key


@dataclass
class DtmfCollector:
    """Collects keypad presses into one entry. Pure logic: time is passed in."""

    options: DtmfOptions = field(default_factory=DtmfOptions)
    digits: str = ""
    last_key_at: float | None = None

    def feed(self, key: str, now: float) -> str | None:
        """Add one key; returns the finished entry when this key completes one."""
        key = key.strip().upper()
        if key not in DTMF_KEYS:
            log.warning("ignored an unknown DTMF key")
            return None
        if key == self.options.clear_key:
            self.digits, self.last_key_at = "", None
            return None
        if key == self.options.submit_key:
            return self._finish()
        self.digits += key
        self.last_key_at = now
        if len(self.digits) >= self.options.max_digits:
            return self._finish()
        return None

    def poll(self, now: float) -> str | None:
        """The entry, when the caller stopped typing for the inter-digit timeout."""
        idle = now - self.last_key_at if self.last_key_at is not None else 0.0
        if self.digits and idle >= self.options.inter_digit_timeout_s:
            return self._finish()
        return None

    def _finish(self) -> str | None:
        entry, self.digits, self.last_key_at = self.digits, "", None
        return entry or None


OnDigits = Callable[[str], Awaitable[None] | None]


class DtmfHandler:
    """Feeds the room's `sip_dtmf_received` events from one caller into a collector; calls on_digits."""

    def __init__(self, room: rtc.Room, on_digits: OnDigits, options: DtmfOptions | None = None) -> None:
        self._room = room
        self._on_digits = on_digits
        self._collector = DtmfCollector(options or DtmfOptions())
        self._caller: str | None = None
        self._timer: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def attach(self, caller_identity: str | None = None) -> None:
        """Listen to keypad events (from caller_identity only, when given)."""
        self._caller = caller_identity
        self._room.on("sip_dtmf_received", self._on_dtmf)

    async def aclose(self) -> None:
        self._room.off("sip_dtmf_received", self._on_dtmf)
        for t in [self._timer, *self._tasks]:
            if t is not None:
                t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _on_dtmf(self, ev: rtc.SipDTMF) -> None:
        if self._caller and (ev.participant is None or ev.participant.identity != self._caller):
            return
        entry = self._collector.feed(ev.digit, time.monotonic())
        if entry:
            self._deliver(entry)
        elif self._collector.digits:
            self._restart_timer()

    def _restart_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.create_task(self._timeout())

    async def _timeout(self) -> None:
        await asyncio.sleep(self._collector.options.inter_digit_timeout_s)
        entry = self._collector.poll(time.monotonic())
        if entry:
            self._deliver(entry)

    def _deliver(self, entry: str) -> None:
        async def run() -> None:
            try:
                res = self._on_digits(entry)
                if res is not None:
                    await res
            except Exception as err:  # a bad handler must not end the call
                log.warning("DTMF handler failed: %s", err)

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def dtmf_as_user_input(session: Any) -> OnDigits:
    """An on_digits callback that hands the entry to the LLM as what the caller typed."""

    def on_digits(entry: str) -> None:
        session.interrupt()
        session.generate_reply(user_input=f"(typed on the phone keypad: {' '.join(entry)})")

    return on_digits


# --- tools ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TelephonyToolOptions:
    goodbye: str = "Thank you for calling. Goodbye!"
    transfer_message: str = "One moment, I'm transferring your call now."
    transfer_failed: str = "Sorry, I couldn't transfer the call. Is there anything else I can help with?"
    # Spoken name the LLM may choose → SIP transfer target ("tel:+15550100" or "sip:desk@pbx.example").
    transfer_targets: Mapping[str, str] = field(default_factory=dict)
    play_dialtone: bool = False
    # told once livekit-sip has taken the transfer (the end-of-call report says `transferred`)
    on_transferred: Callable[[], None] | None = field(default=None, compare=False)


def resolve_transfer_target(targets: Mapping[str, str], name: str) -> str:
    """The target for a spoken destination name; a ToolError the LLM can read when there is none."""
    wanted = " ".join(name.lower().split())
    for key, target in targets.items():
        if " ".join(key.lower().split()) == wanted:
            return target
    choices = ", ".join(sorted(targets)) or "none configured"
    raise ToolError(f"unknown destination {name!r}; choose one of: {choices}")


def find_sip_caller(room: rtc.Room) -> rtc.RemoteParticipant | None:
    for p in room.remote_participants.values():
        if is_sip_participant(p):
            return p
    return None


async def hang_up(lkapi: api.LiveKitAPI, room_name: str) -> None:
    """Delete the room: every caller is disconnected (livekit-sip sends BYE to the phone)."""
    try:
        await lkapi.room.delete_room(api.DeleteRoomRequest(room=room_name))
    except api.TwirpError as err:
        if err.code != api.TwirpErrorCode.NOT_FOUND:
            raise


def _after_playout(handle: Any, job: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run job once a speech handle has played out (a tool must not await its own turn's speech)."""
    loop = asyncio.get_running_loop()

    def _done(_: object) -> None:
        loop.create_task(job())

    handle.add_done_callback(_done)


def end_call_tool(options: TelephonyToolOptions | None = None) -> FunctionTool:
    opts = options or TelephonyToolOptions()

    async def end_call(ctx: RunContext) -> None:
        job_ctx = get_job_context()
        room_name = job_ctx.room.name

        async def finish() -> None:
            log.info("ending the call after the goodbye")
            try:
                await hang_up(job_ctx.api, room_name)
            except Exception as err:
                log.warning("could not delete room on hang-up: %s", err)
            ctx.session.shutdown()

        goodbye = ctx.session.say(opts.goodbye, allow_interruptions=False)
        _after_playout(goodbye, finish)
        return None

    return function_tool(
        end_call,
        name="end_call",
        description=(
            "Hang up the phone call after saying goodbye. Call only when the caller clearly says they "
            "are done (for example 'that's all, bye'). Say nothing yourself: the goodbye is spoken for you."
        ),
    )


def transfer_call_tool(options: TelephonyToolOptions) -> FunctionTool | None:
    """None when no transfer targets are configured (the LLM then never sees a transfer tool)."""
    if not options.transfer_targets:
        return None
    opts = options
    names = ", ".join(sorted(opts.transfer_targets))

    async def transfer_call(ctx: RunContext, destination: str) -> str | None:
        target = resolve_transfer_target(opts.transfer_targets, destination)
        job_ctx = get_job_context()
        caller = find_sip_caller(job_ctx.room)
        if caller is None:
            raise ToolError("this caller is not on a phone line, so the call cannot be transferred")
        room_name, identity = job_ctx.room.name, caller.identity

        async def transfer() -> None:
            try:
                await job_ctx.api.sip.transfer_sip_participant(
                    api.TransferSIPParticipantRequest(
                        room_name=room_name,
                        participant_identity=identity,
                        transfer_to=target,
                        play_dialtone=opts.play_dialtone,
                    )
                )
                log.info("call transferred", extra={"destination": destination})
                if opts.on_transferred is not None:
                    opts.on_transferred()
            except Exception as err:
                log.warning("transfer failed: %s", err)
                ctx.session.say(opts.transfer_failed)

        notice = ctx.session.say(opts.transfer_message, allow_interruptions=False)
        _after_playout(notice, transfer)
        return None

    return function_tool(
        transfer_call,
        name="transfer_call",
        description=(
            "Transfer the phone call to a person or department when the caller asks for one. "
            f"destination must be one of: {names}."
        ),
    )


DTMF_CODES = {**{str(d): d for d in range(10)}, "*": 10, "#": 11, "A": 12, "B": 13, "C": 14, "D": 15}
# A menu choice or an extension is a few keys; a caller steering the LLM must not make the agent sit on
# the line pressing thousands of them (each takes gap_s), so a longer string is refused, not cut.
MAX_DTMF_KEYS = 20


def dtmf_digits(keys: str, max_keys: int = MAX_DTMF_KEYS) -> list[str]:
    """The keys of a DTMF string (spaces and dashes ignored); a ToolError the LLM can read on a bad key."""
    if len(keys) > 4 * max_keys:
        raise ToolError(f"at most {max_keys} keys at a time")
    digits = [k for k in keys.upper() if k not in " -,"]
    bad = sorted({k for k in digits if k not in DTMF_CODES})
    if bad or not digits:
        raise ToolError(f"keys must be digits 0-9, * or # (got {keys[:40]!r})")
    if len(digits) > max_keys:
        raise ToolError(f"at most {max_keys} keys at a time (got {len(digits)})")
    return digits


def send_dtmf_tool(gap_s: float = 0.25, max_keys: int = MAX_DTMF_KEYS) -> FunctionTool:
    """Press phone keys on the caller's line (navigating a phone menu, entering an extension)."""

    async def send_dtmf(ctx: RunContext, keys: str) -> str:
        digits = dtmf_digits(keys, max_keys)
        room = get_job_context().room
        for digit in digits:
            await room.local_participant.publish_dtmf(code=DTMF_CODES[digit], digit=digit)
            await asyncio.sleep(gap_s)
        log.info("sent DTMF", extra={"keys": len(digits)})
        return f"pressed {' '.join(digits)}"

    return function_tool(
        send_dtmf,
        name="send_dtmf",
        description=(
            "Press keys on the phone keypad (digits 0-9, * and #), for example to choose a menu option; "
            f"at most {max_keys} keys per call."
        ),
    )


def telephony_tools(options: TelephonyToolOptions | None = None) -> list[FunctionTool]:
    """The tools a SIP call gets: end_call always, transfer_call when targets are configured."""
    opts = options or TelephonyToolOptions()
    tools = [end_call_tool(opts)]
    transfer = transfer_call_tool(opts)
    if transfer is not None:
        tools.append(transfer)
    return tools
