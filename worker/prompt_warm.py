"""Read the caller's words into the LLM's cache while they are still speaking.

With the history already cached in the call's slot of the embedded LLM (worker/llm_slots.py), what is left
of its time to first token is reading the new turn: the caller's words and the template around them, ~22
tokens, ~170 ms on 2 cores through the room, all of it after the transcript is final. Each interim
transcript is sent ahead as a one-token request on the same slot, with the context the reply will have;
the reply's request then shares the longest common prefix with it and reads only the words the interim did
not have yet. Requests never overlap (a newer interim waits for the next one), none is sent while the
agent speaks (the reply being spoken is not in the context yet), and a failure only costs the head start.

Once the agent's reply is in the context, one more request reads it (and the template that opens the next
turn) in the idle time before the caller's next words. That also covers the turn where the bounded context
folds its older turns into the summary (worker/context.py): the whole history after the instructions changes
there, and re-reading it (~500 tokens, ~1 s on 2 cores) used to land on that turn's first token.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from livekit.agents import llm, stt

log = logging.getLogger("parley.prompt_warm")


@dataclass(frozen=True)
class WarmOptions:
    min_new_words: int = 2
    """An interim is sent ahead once it holds this many words more than the last one sent."""


class PromptWarmer:
    """One per call. `model` writes one token at most (its own max tokens: the LiveKit plugin lets its
    options win over per-request ones); `build_context(text)` is the chat context the reply would get."""

    def __init__(
        self,
        model: llm.LLM,
        build_context: Callable[[str], llm.ChatContext],
        tools: Callable[[], list[Any]],
        options: WarmOptions | None = None,
    ) -> None:
        self._llm = model
        self._build = build_context
        self._tools = tools
        self._opt = options or WarmOptions()
        self._task: asyncio.Task[None] | None = None
        self._sent_words = 0
        self._finals: list[str] = []
        self.sent = 0  # requests sent (tests, logs)
        self.written_tokens = 0  # tokens the LLM wrote for them: one each at most, or the slot stays busy

    def attach(self, session: Any, hooks: Any) -> None:
        """Listen to the transcripts the session is given (`TurnHooks.transcript_listeners`)."""
        self._session = session
        self._hooks = hooks
        hooks.transcript_listeners.append(self.on_transcript)
        session.on("conversation_item_added", self._on_item)
        session.on("close", lambda _ev: self.close())

    def _on_item(self, ev: Any) -> None:
        role = getattr(ev.item, "role", "")
        if role == "user":  # the turn is committed: the next one starts afresh
            self._finals, self._sent_words = [], 0
        elif role == "assistant" and (self._task is None or self._task.done()):
            # the reply just joined the context: read it, and any fold it causes, before the caller speaks
            self._task = asyncio.create_task(self.warm(""), name="parley-prompt-warm-reply")

    def on_transcript(self, ev: stt.SpeechEvent) -> None:
        text = ev.alternatives[0].text.strip()
        if ev.type == stt.SpeechEventType.FINAL_TRANSCRIPT and text:
            self._finals.append(text)  # a hesitation split the turn: later parts follow this one
        if ev.type != stt.SpeechEventType.INTERIM_TRANSCRIPT or not text:
            return  # a preflight or final starts the reply's own request: never race it
        text = " ".join([*self._finals, text])
        words = len(text.split())
        if words < self._sent_words + self._opt.min_new_words:
            return
        if self._task is not None and not self._task.done():
            return
        if getattr(self._session, "agent_state", "") == "speaking":
            return
        self._sent_words = words
        self._task = asyncio.create_task(self.warm(text), name="parley-prompt-warm")

    async def warm(self, text: str) -> None:
        """One request for the context the reply would get if the caller stopped after `text` ("" = the
        next turn's context up to the caller's words)."""
        self.sent += 1
        try:
            ctx = self._build(text)
            async with self._llm.chat(chat_ctx=ctx, tools=self._tools()) as stream:
                async for chunk in stream:
                    if chunk.usage is not None:
                        self.written_tokens += chunk.usage.completion_tokens
        except asyncio.CancelledError:
            raise
        except Exception as e:  # only the head start is lost
            log.debug("prompt warm-up failed", extra={"error": str(e)[:200]})

    def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        with contextlib.suppress(ValueError, AttributeError):
            self._hooks.transcript_listeners.remove(self.on_transcript)
