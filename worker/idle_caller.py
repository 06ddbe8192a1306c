"""A caller who has gone quiet is asked if they are still there, then the call ends; so does a call that
reaches its time limit. A line left open (a phone put down without hanging up, a browser tab left behind)
otherwise holds one of the host's call slots, and its LLM slot, until someone notices.

livekit-agents marks the caller "away" once caller and agent have both been silent for `user_away_timeout`
(it holds the count while a tool runs and until the caller's track is subscribed). On each "away" this asks
a reprompt line; after `reprompts` of them with no caller turn between, it says goodbye and ends the call.
A caller who answers (a committed turn) starts the count again; one who talks over the silence goodbye keeps
the call. At `max_call_s` the call ends after the agent's current line, with a goodbye nobody can talk over.
No livekit import beyond the session's events, so the policy reads top to bottom.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

log = logging.getLogger("parley.idle")

EndReason = Literal["silence", "time_limit"]


class SayLine(Protocol):
    def __call__(self, text: str, *, allow_interruptions: bool) -> Any: ...


@dataclass(frozen=True)
class IdleOptions:
    reprompt_after_s: float = 15.0
    """Both sides silent this long: the caller is away (livekit-agents' own default); 0 = never ask or end."""
    reprompts: int = 2
    """Lines asked before the goodbye; 0 = say goodbye at the first silence."""
    max_call_s: float = 3600.0
    """The call ends after the agent's current line once it is this old; 0 = no limit."""

    def __post_init__(self) -> None:
        if self.reprompt_after_s < 0 or self.max_call_s < 0:
            raise ValueError("reprompt_after_s and max_call_s must be >= 0 (0 = off)")
        if self.reprompts < 0:
            raise ValueError("reprompts must be >= 0")

    @property
    def user_away_timeout(self) -> float | None:
        """The AgentSession argument: None turns livekit-agents' away state off."""
        return self.reprompt_after_s if self.reprompt_after_s > 0 else None


class IdleCallerWatch:
    """One per call: attach before `session.start`."""

    def __init__(
        self,
        session: Any,
        opts: IdleOptions,
        *,
        say: SayLine,
        reprompt_lines: Sequence[str],
        goodbye_lines: Sequence[str],
        end_call: Callable[[], Awaitable[None]],
        on_end: Callable[[EndReason], None] | None = None,
    ) -> None:
        if not reprompt_lines or not goodbye_lines:
            raise ValueError("the idle watch needs at least one reprompt line and one goodbye line")
        self.session = session
        self.opts = opts
        self._say = say
        self._reprompts = itertools.cycle(reprompt_lines)
        self._goodbyes = itertools.cycle(goodbye_lines)
        self._end_call = end_call
        self._on_end = on_end  # told why, before the call ends (the end-of-call report)
        self.asked = 0
        """Reprompts since the caller's last turn."""
        self.ended: EndReason | None = None
        self._ending = False
        self._limit: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def attach(self) -> None:
        s = self.session
        s.on("user_state_changed", self._on_user_state)
        s.on("agent_state_changed", self._on_agent_state)
        s.on("conversation_item_added", self._on_item)
        s.on("close", self._on_close)

    # --- events ----------------------------------------------------------------------------------------
    def _on_agent_state(self, _ev: Any) -> None:
        # the first state change means the session runs: the time limit counts from here
        if self._limit is None and self.opts.max_call_s > 0 and not self._ending:
            loop = asyncio.get_running_loop()
            self._limit = loop.call_later(self.opts.max_call_s, self._finish, "time_limit")

    def _on_item(self, ev: Any) -> None:
        item = ev.item
        if getattr(item, "type", "") == "message" and item.role == "user":
            self.asked = 0

    def _on_user_state(self, ev: Any) -> None:
        if ev.new_state != "away" or self._ending or self.opts.reprompt_after_s <= 0:
            return
        if self.asked >= self.opts.reprompts:
            self._finish("silence")
            return
        self.asked += 1
        log.info("caller silent: asking if they are still there", extra={"reprompt": self.asked})
        handle = self._say(next(self._reprompts), allow_interruptions=True)
        # the caller stays "away" until they speak, so the framework would not count again by itself
        handle.add_done_callback(lambda _h: self.session.reset_away_timer())

    def _on_close(self, _ev: Any) -> None:
        if self._limit is not None:
            self._limit.cancel()

    # --- ending ----------------------------------------------------------------------------------------
    def _finish(self, reason: EndReason) -> None:
        if self._ending:
            return
        self._ending = True
        if self._limit is not None:
            self._limit.cancel()
        log.info("ending the call", extra={"reason": reason})
        # a caller who talks over the silence goodbye has come back; the time limit is final
        handle = self._say(next(self._goodbyes), allow_interruptions=reason == "silence")

        def done(h: Any) -> None:
            if reason == "silence" and h.interrupted:
                log.info("caller spoke over the goodbye: the call goes on")
                self._ending, self.asked = False, 0
                return
            self.ended = reason
            if self._on_end is not None:
                self._on_end(reason)
            task = asyncio.get_running_loop().create_task(self._end())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        handle.add_done_callback(done)

    async def _end(self) -> None:
        try:
            await self._end_call()
        except Exception as err:  # the session still closes below
            log.warning("could not end the call cleanly: %s", err)
        with contextlib.suppress(Exception):
            self.session.shutdown()


async def end_room_call() -> None:
    """Delete the call's room, which disconnects the caller (livekit-sip sends the phone a BYE); nothing
    when the session runs outside a LiveKit job (the offline harness), where closing the session is all."""
    from livekit.agents import get_job_context

    from .sip import hang_up

    try:
        job = get_job_context()
    except RuntimeError:
        return
    await hang_up(job.api, job.room.name)
