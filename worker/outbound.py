"""Outbound calls: the agent phones someone through a LiveKit SIP trunk, greets the person who answers, or
leaves its message on their answering machine after the beep.

A call is placed by dispatching the agent into a new room with job metadata naming the number
(`python -m worker.outbound +15551234567`, or your backend's own CreateAgentDispatch):

    {"outbound": {"number": "+15551234567", "trunk": "ST_...", "voicemail": "..."}}

The job dials with CreateSIPParticipant and waits for the answer; a busy line, no answer or a refusal ends
the job with that outcome in the end-of-call report. Once answered, the agent's greeting waits for
`worker.answer_detection` to say who picked up; the session hears nothing until then, so a machine's
greeting is never answered. `{"outbound": {"identity": "..."}}` without a number skips the dialling: your
backend has dialled the callee into the room as that participant.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import secrets
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import aiohttp
import numpy as np
from livekit import api, rtc
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .answer_detection import AnswerDecision, AnswerDetector, AnswerOptions, sounds_like_voicemail

log = logging.getLogger("parley.outbound")

DialOutcome = Literal["answered", "busy", "no_answer", "declined", "failed"]
_DIGITS = re.compile(r"^\+?[1-9][0-9]{6,14}$")
_SEPARATORS = re.compile(r"[\s().-]")
MAX_GREETING_S = 30.0  # of a greeting kept for its one decode
BUSY, NO_ANSWER, DECLINED = {486, 600}, {408, 480, 487}, {603, 403}


class OutboundError(ValueError):
    """A malformed outbound request: one line naming the field."""


class OutboundCall(BaseModel):
    """What the job metadata's `outbound` object may hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    number: str | None = None
    """The number to dial (E.164, separators allowed); none: the callee is already in the room."""
    trunk: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The outbound SIP trunk's id (PARLEY_SIP_OUTBOUND_TRUNK when unset)."""
    from_number: str | None = None
    """The number the callee sees (one of the trunk's numbers; the trunk's default when unset)."""
    dtmf: str | None = Field(default=None, pattern=r"^[0-9*#w]{1,32}$")
    """Keys sent once the call connects, "w" a half-second wait: an extension behind a switchboard."""
    identity: str = Field(default="callee", pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    """The callee's participant identity in the room."""
    ring_timeout_s: float = Field(default=30.0, ge=5.0, le=120.0)
    greeting: str | None = Field(default=None, min_length=1, max_length=1000)
    """This call's greeting to a person ("Hi Maria, …"; the agent's `outbound.greeting` when unset)."""
    voicemail: str | None = Field(default=None, max_length=1000)
    """This call's voicemail message (the agent's `outbound.voicemail` when unset; "" = leave none)."""
    context: str | None = Field(default=None, min_length=1, max_length=2000)
    """What this call is about, for the LLM ("Maria's cleaning is on Tuesday at 3 pm; confirm or move it")."""

    @field_validator("number", "from_number")
    @classmethod
    def _number(cls, v: str | None) -> str | None:
        if v is None:
            return v
        digits = _SEPARATORS.sub("", v)
        if not _DIGITS.match(digits):
            raise ValueError("not a phone number (7-15 digits, an optional leading +)")
        return digits

    @property
    def dials(self) -> bool:
        return self.number is not None


def outbound_request(metadata: str | None) -> OutboundCall | None:
    """The job's outbound request, None for an ordinary (inbound) job; OutboundError when the metadata asks
    for an outbound call in a way that cannot be followed."""
    if not metadata or not metadata.strip().startswith("{"):
        return None
    try:
        body = json.loads(metadata)
    except json.JSONDecodeError:
        return None  # someone else's metadata, not ours
    if not isinstance(body, dict) or "outbound" not in body:
        return None
    try:
        return OutboundCall.model_validate(body["outbound"])
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "outbound"
        raise OutboundError(f"outbound call: {where}: {_reason(e)}") from None


def _reason(e: ValidationError) -> str:
    return str(e.errors()[0]["msg"]).removeprefix("Value error, ")


@dataclass(frozen=True)
class DialResult:
    outcome: DialOutcome
    sip_status: int | None = None
    detail: str = ""

    @property
    def answered(self) -> bool:
        return self.outcome == "answered"


def outcome_of(sip_status: int | None) -> DialOutcome:
    if sip_status in BUSY:
        return "busy"
    if sip_status in NO_ANSWER:
        return "no_answer"
    if sip_status in DECLINED:
        return "declined"
    return "failed"


async def dial(lkapi: api.LiveKitAPI, room: str, call: OutboundCall, trunk: str) -> DialResult:
    """Ring the number into `room` and wait until it answers (or does not)."""
    from google.protobuf.duration_pb2 import Duration

    request = api.CreateSIPParticipantRequest(
        sip_trunk_id=trunk,
        sip_call_to=call.number or "",
        sip_number=call.from_number or "",
        dtmf=call.dtmf or "",
        room_name=room,
        participant_identity=call.identity,
        participant_name="callee",
        wait_until_answered=True,
        ringing_timeout=Duration(seconds=round(call.ring_timeout_s)),
    )
    try:
        await lkapi.sip.create_sip_participant(request)
    except api.SipCallError as e:
        return DialResult(outcome_of(e.sip_status_code), e.sip_status_code, e.sip_status or "")
    except (TimeoutError, api.TwirpError, OSError) as e:
        return DialResult("failed", None, f"{type(e).__name__}: {e}"[:200])
    return DialResult("answered")


# --- after the answer --------------------------------------------------------------------------------------


async def callee_audio(participant: rtc.RemoteParticipant, rate: int) -> AsyncIterable[np.ndarray]:
    """The callee's microphone as int16 mono at `rate`."""
    stream = rtc.AudioStream.from_participant(
        participant=participant,
        track_source=rtc.TrackSource.SOURCE_MICROPHONE,
        sample_rate=rate,
        num_channels=1,
    )
    try:
        async for event in stream:
            yield np.frombuffer(event.frame.data, dtype=np.int16)
    finally:
        await stream.aclose()


def prefetch(frames: AsyncIterable[np.ndarray]) -> AsyncIterable[np.ndarray]:
    """Start reading `frames` now and hold them until they are asked for: the callee's "Hello?" comes the
    moment the call is answered, while the session is still being built, and must not be lost."""
    queue: asyncio.Queue[np.ndarray | None] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for x in frames:
                queue.put_nowait(x)
        finally:
            queue.put_nowait(None)

    task = asyncio.get_running_loop().create_task(pump())

    async def drain() -> AsyncIterator[np.ndarray]:
        try:
            while (x := await queue.get()) is not None:
                yield x
        finally:
            task.cancel()

    return drain()


@dataclass
class AnswerHandling:
    """What to do once the detector has decided: the session-facing side, given as callables so the logic
    can be tested without a room."""

    greet: Callable[[], Any]
    """Say the greeting; returns something with `interrupt()` (a SpeechHandle) or None."""
    listen: Callable[[bool], None]
    """Turn the session's hearing of the callee on or off."""
    leave_message: Callable[[], Awaitable[None]]
    """Stop anything being said, say the voicemail message (if any), wait for it, end the call."""
    hang_up: Callable[[str], Awaitable[None]]
    """End the call at once, saying why (`not_in_service`)."""
    transcribe: Callable[[np.ndarray, int], Awaitable[str]] | None = None
    """One decode of int16 audio at a rate: a long greeting that ended without a beep is read once, and
    left the message if its words are a voicemail greeting's (None: greeted)."""
    language: str = "en"


async def handle_answer(
    audio: AsyncIterable[np.ndarray], rate: int, handling: AnswerHandling, opts: AnswerOptions | None = None
) -> AnswerDecision | None:
    """Listen from the answer until the detector is done; greet a person, leave the message on a machine.
    Returns the decision that ended it (a beep's, or the greeting's), None if the callee left first."""
    detector = AnswerDetector(rate, opts)
    handling.listen(False)
    greeting: Any = None
    heard: list[np.ndarray] = []  # the greeting, for one decode when it ends without a beep
    kept, keep = 0, int(MAX_GREETING_S * rate)
    frames = aiter(audio)
    try:
        async for samples in frames:
            if detector.decision is None and kept < keep:
                heard.append(samples)
                kept += len(samples)
            for decision in detector.feed(samples):
                if decision.kind == "long_greeting" and await _voicemail_words(heard, rate, handling):
                    decision = replace(decision, kind="voicemail_words")
                if decision.kind == "not_in_service":
                    log.info("number not in service: hanging up")
                    await handling.hang_up("not_in_service")
                    return decision
                if decision.kind in ("beep", "voicemail_words"):
                    log.info("answering machine: leaving the message", extra={"by": decision.kind})
                    if greeting is not None:
                        greeting.interrupt()
                    await handling.leave_message()
                    return decision
                log.info("answered", extra={"by": decision.kind, "at_s": decision.at_s})
                handling.listen(True)
                greeting = handling.greet()
            if detector.done:
                break
    finally:
        closing = getattr(frames, "aclose", None)
        if closing is not None:
            await closing()  # stop reading the callee's audio: the session hears them from here on
        if greeting is None and detector.decision is None:
            handling.listen(True)  # the callee left, or the stream ended: leave the session as it was
    return detector.decision


async def _voicemail_words(heard: list[np.ndarray], rate: int, handling: AnswerHandling) -> bool:
    if handling.transcribe is None or not heard:
        return False
    try:
        text = await handling.transcribe(np.concatenate(heard).astype(np.int16), rate)
    except Exception as e:  # no words: the call goes on as if a person answered
        log.warning("greeting not transcribed: %s", type(e).__name__)
        return False
    return sounds_like_voicemail(text, handling.language)


# --- the job's side ----------------------------------------------------------------------------------------


async def add_call_context(agent: Any, context: str) -> None:
    """The request's `context` after the agent's instructions, for this call only."""
    combined = f"{agent.instructions}\n\nAbout this call (you placed it): {context}"
    await agent.update_instructions(combined)
    if hasattr(agent, "base_instructions"):  # ParleyAgent bounds its context around these
        agent.base_instructions = combined


async def prepare_lines(tts: Any, texts: list[str], into: dict[str, list[rtc.AudioFrame]]) -> None:
    """Synthesise the lines the phrase cache lacks (a call's own greeting, a message from the request) while
    the detector listens, into `into` as each is done: the greeting or the message then starts with no
    synthesis delay. A line that fails is left out (it is synthesised when said)."""
    for text in texts:
        try:
            async with tts.synthesize(text) as stream:
                into[text] = [ev.frame async for ev in stream]
        except Exception as e:  # the line is still said, synthesised then
            log.warning("outbound line not prepared: %s", type(e).__name__)


async def _replay(frames: list[rtc.AudioFrame]) -> AsyncIterator[rtc.AudioFrame]:
    for frame in frames:
        yield frame


def answer_handling(
    session: Any,
    agent: Any,
    greeting: str,
    message: str,
    end_call: Callable[[str], Awaitable[None]],
    prepared: dict[str, list[rtc.AudioFrame]] | None = None,
    language: str = "en",
) -> AnswerHandling:
    """The session-facing actions of an outbound call: `greeting` to a person, `message` to a machine
    ("" = none), then `end_call(why)`. A line in `prepared` plays from there, else from the phrase cache."""
    from .agent import say_line

    ready = prepared if prepared is not None else {}

    def speak(text: str, **kwargs: Any) -> Any:
        if text in ready:
            return session.say(text, audio=_replay(ready[text]), **kwargs)
        return say_line(agent, text, **kwargs)

    def listen(on: bool) -> None:
        session.input.set_audio_enabled(on)

    async def leave_message() -> None:
        listen(False)
        session.interrupt(force=True)  # the greeting, or a reply begun to the machine's greeting
        handle = speak(message, allow_interruptions=False) if message else None
        if handle is not None:
            await handle
        await end_call("voicemail")

    async def transcribe(pcm: np.ndarray, rate: int) -> str:
        frame = rtc.AudioFrame(pcm.tobytes(), rate, 1, len(pcm))
        event = await session.stt.recognize(frame, language=language)
        return event.alternatives[0].text if event.alternatives else ""

    return AnswerHandling(
        greet=lambda: speak(greeting),
        listen=listen,
        leave_message=leave_message,
        hang_up=end_call,
        transcribe=transcribe if getattr(session, "stt", None) is not None else None,
        language=language,
    )


# --- placing a call ------------------------------------------------------------------------------------


async def place_call(
    lkapi: api.LiveKitAPI, agent_name: str, call: OutboundCall, room: str | None = None
) -> api.AgentDispatch:
    """Dispatch the agent into a fresh room with the call in its metadata; the job dials."""
    name = room or f"call-{secrets.token_hex(6)}"
    metadata = json.dumps({"outbound": call.model_dump(exclude_none=True)})
    return await lkapi.agent_dispatch.create_dispatch(
        api.CreateAgentDispatchRequest(agent_name=agent_name, room=name, metadata=metadata)
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m worker.outbound NUMBER [--trunk ST_..] [--voicemail TEXT]`: the agent calls NUMBER."""
    from .settings import get_settings

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("number")
    ap.add_argument("--trunk", help="outbound SIP trunk id (default PARLEY_SIP_OUTBOUND_TRUNK)")
    ap.add_argument("--voicemail", help="the message to leave on a machine ('' = none)")
    ap.add_argument("--room", help="room name (default: a new random one)")
    args = ap.parse_args(argv)
    try:
        call = OutboundCall(number=args.number, trunk=args.trunk, voicemail=args.voicemail)
    except ValidationError as e:
        raise SystemExit(f"error: {_reason(e)}") from None
    settings = get_settings()
    if not (call.trunk or settings.sip_outbound_trunk):
        raise SystemExit("error: no outbound SIP trunk: pass --trunk or set PARLEY_SIP_OUTBOUND_TRUNK")

    async def run() -> api.AgentDispatch:
        lkapi = api.LiveKitAPI(
            settings.livekit_url, settings.livekit_api_key, settings.livekit_api_secret.get_secret_value()
        )
        try:
            return await place_call(lkapi, settings.agent_name, call, args.room)
        finally:
            await lkapi.aclose()

    try:
        dispatch = asyncio.run(run())
    except (api.TwirpError, aiohttp.ClientError, OSError, TimeoutError) as e:
        raise SystemExit(f"error: the call was not placed: {type(e).__name__}: {e}"[:300]) from None
    print(f"calling: agent {settings.agent_name} dispatched to room {dispatch.room}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
