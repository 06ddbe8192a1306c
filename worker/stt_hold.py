"""One hold line while the host speech engine is down, so a caller is not met with silence.

The speech engine client (plugins/whisper/engine_client.py) tells its listeners when a final decode first
has to wait for the engine (it is restarting) and when it answers again. A job process runs one call, so
its one client's outage is this call's: the agent says the hold line once per outage, and the caller's
words are transcribed when the engine is back.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("parley.stt.hold")

HOLD = {
    "en": "Sorry, one moment please.",
    "ko": "죄송해요, 잠시만 기다려 주세요.",
}


def attach_stt_hold(session: Any, stt_model: Any, language: str = "en") -> bool:
    """Say `HOLD` on the session when its speech engine goes down; False when STT runs in-process."""
    from plugins.whisper.engine_client import SpeechEngineClient

    client = getattr(stt_model, "transcriber", None)
    if not isinstance(client, SpeechEngineClient):
        return False
    line = HOLD.get(language, HOLD["en"])

    def on_change(down: bool) -> None:
        if not down:
            return
        try:
            # in the conversation too: it was said (the LLM's next reply knows it), and a benchmark reading
            # the transcript sees the worker's own line (simulator/call_plan.py agent_fixed_lines)
            session.say(line, allow_interruptions=True, add_to_chat_ctx=True)
        except Exception as e:  # a session not started or already closing: nothing to say it on
            log.info("hold line not said", extra={"reason": str(e)[:200]})
            return
        log.info("speech engine down: hold line said")

    remove = client.add_listener(on_change)
    session.on("close", lambda _ev: remove())
    return True
