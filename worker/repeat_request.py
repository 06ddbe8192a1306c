"""Ask the caller to repeat when the recogniser heard speech but kept no words, instead of staying silent.

A caller on a bad line, or one the model cannot read, can say a whole sentence and get no transcript (the
hallucination guard drops words Whisper barely believes, and loops). No transcript means no turn, so no
reply: the caller waits in silence. The STT tells its `unheard_listeners` (plugins/whisper/guard.py
`unintelligible`); this says REPEAT once, and never nags: not while the agent is talking or the caller is,
not twice within `min_gap_s`, and at most `max_in_a_row` times before a turn is understood again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from .agent import REPEAT

log = logging.getLogger("parley.repeat")


@dataclass(frozen=True)
class RepeatOptions:
    min_gap_s: float = 8.0
    max_in_a_row: int = 2


class RepeatRequester:
    def __init__(self, session: Any, language: str = "en", options: RepeatOptions | None = None) -> None:
        self._session = session
        self._line = REPEAT.get(language, REPEAT["en"])
        self._opts = options or RepeatOptions()
        self._last = float("-inf")
        self.in_a_row = 0
        self.asked = 0

    def on_unheard(self, speech_s: float) -> None:
        now = time.monotonic()
        s = self._session
        if getattr(s, "agent_state", "listening") not in ("listening", "idle"):
            return  # the agent is talking or thinking: the caller was heard over it, not ignored
        if getattr(s, "user_state", "listening") == "speaking":
            return  # already saying more: let them finish
        if now - self._last < self._opts.min_gap_s or self.in_a_row >= self._opts.max_in_a_row:
            return
        try:
            # in the conversation too, like the hold line: the LLM's next reply knows it was said
            s.say(self._line, allow_interruptions=True, add_to_chat_ctx=True)
        except Exception as e:  # a session not started or already closing
            log.info("repeat request not said", extra={"reason": str(e)[:200]})
            return
        self._last, self.in_a_row, self.asked = now, self.in_a_row + 1, self.asked + 1
        log.info("not understood: asked to repeat", extra={"speech_s": round(speech_s, 2)})

    def on_transcribed(self, ev: Any) -> None:
        if getattr(ev, "is_final", False) and str(getattr(ev, "transcript", "")).strip():
            self.in_a_row = 0


def attach_repeat_request(
    session: Any, stt_model: Any, language: str = "en", options: RepeatOptions | None = None
) -> RepeatRequester | None:
    """Wire it to the session; None when the STT cannot tell (not Parley's Whisper)."""
    listeners = getattr(stt_model, "unheard_listeners", None)
    if listeners is None:
        return None
    requester = RepeatRequester(session, language, options)
    listeners.append(requester.on_unheard)
    session.on("user_input_transcribed", requester.on_transcribed)
    session.on("close", lambda _ev: listeners.remove(requester.on_unheard))
    return requester
