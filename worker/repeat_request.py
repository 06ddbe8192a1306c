"""Ask the caller to repeat when the recogniser heard speech but kept no words, instead of staying silent.

A caller on a bad line, or one the model cannot read, can say a whole sentence and get no transcript (the
hallucination guard drops words Whisper barely believes, and loops). No transcript means no turn, so no
reply: the caller waits in silence. The STT tells its `unheard_listeners` (plugins/whisper/guard.py
`unintelligible`); this says REPEAT, and never nags:

- only when nothing the caller said this turn was understood (an unreadable fragment inside a turn whose
  other words were heard is answered by the reply to those words);
- only after `grace_s` of quiet (a caller who goes on speaking, or whose next words are understood, is not
  asked: on the turn corpus's dev split 2 of 240 real utterances had an unreadable fragment, both mid-turn);
- not while the agent talks, not twice within `min_gap_s`, at most `max_in_a_row` before a turn is heard.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .agent import REPEAT

log = logging.getLogger("parley.repeat")


@dataclass(frozen=True)
class RepeatOptions:
    grace_s: float = 1.5
    min_gap_s: float = 8.0
    max_in_a_row: int = 2


class RepeatRequester:
    """The decision, apart from the session: `say(line)` speaks, `agent_state()` is LiveKit's agent state."""

    def __init__(
        self,
        say: Callable[[str], None],
        agent_state: Callable[[], str],
        language: str = "en",
        options: RepeatOptions | None = None,
    ) -> None:
        self._say = say
        self._agent_state = agent_state
        self._line = REPEAT.get(language, REPEAT["en"])
        self._opts = options or RepeatOptions()
        self._last = float("-inf")
        self._heard_this_turn = False
        self._activity = 0  # bumped by anything that makes a pending request moot
        self._pending: asyncio.Task[None] | None = None
        self.in_a_row = 0
        self.asked = 0

    def on_unheard(self, speech_s: float) -> None:
        if self._heard_this_turn or (self._pending is not None and not self._pending.done()):
            return
        self._pending = asyncio.ensure_future(self._ask_after_grace(speech_s, self._activity))

    async def _ask_after_grace(self, speech_s: float, activity: int) -> None:
        await asyncio.sleep(self._opts.grace_s)
        if activity != self._activity or self._heard_this_turn:
            return  # the caller went on, or was understood
        if self._agent_state() not in ("listening", "idle"):
            return  # the agent is talking or thinking already
        now = time.monotonic()
        if now - self._last < self._opts.min_gap_s or self.in_a_row >= self._opts.max_in_a_row:
            return
        try:
            self._say(self._line)
        except Exception as e:  # a session not started or already closing
            log.info("repeat request not said", extra={"reason": str(e)[:200]})
            return
        self._last, self.in_a_row, self.asked = now, self.in_a_row + 1, self.asked + 1
        log.info("not understood: asked to repeat", extra={"speech_s": round(speech_s, 2)})

    def on_transcribed(self, ev: Any) -> None:
        if getattr(ev, "is_final", False) and str(getattr(ev, "transcript", "")).strip():
            self._heard_this_turn, self.in_a_row = True, 0
            self._activity += 1

    def on_user_state(self, ev: Any) -> None:
        if getattr(ev, "new_state", None) == "speaking":
            self._activity += 1

    def on_agent_state(self, ev: Any) -> None:
        if getattr(ev, "new_state", None) == "speaking":
            self._heard_this_turn = False  # the caller's next words start a new turn
            self._activity += 1

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()


def attach_repeat_request(
    session: Any, stt_model: Any, language: str = "en", options: RepeatOptions | None = None
) -> RepeatRequester | None:
    """Wire it to the session; None when the STT cannot tell (not Parley's Whisper)."""
    listeners = getattr(stt_model, "unheard_listeners", None)
    if listeners is None:
        return None
    requester = RepeatRequester(
        # in the conversation too, like the hold line: the LLM's next reply knows it was said
        say=lambda line: session.say(line, allow_interruptions=True, add_to_chat_ctx=True),
        agent_state=lambda: str(getattr(session, "agent_state", "listening")),
        language=language,
        options=options,
    )
    listeners.append(requester.on_unheard)
    session.on("user_input_transcribed", requester.on_transcribed)
    session.on("user_state_changed", requester.on_user_state)
    session.on("agent_state_changed", requester.on_agent_state)

    def on_close(_ev: Any) -> None:
        requester.close()
        if requester.on_unheard in listeners:
            listeners.remove(requester.on_unheard)

    session.on("close", on_close)
    return requester
