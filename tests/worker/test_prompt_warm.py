"""Interim words read into the embedded LLM's cache early: which transcripts are sent, and that the reply's
request then finds them cached in the real llama.cpp server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from livekit.agents import llm, stt

from worker.llm_slots import SlotPool
from worker.pipeline import call_llm, load_llm
from worker.prompt_warm import PromptWarmer
from worker.settings import load_settings

from .test_llm_slots import _ask, _llm_only

E = stt.SpeechEventType
SYSTEM = [{"role": "system", "content": "You are the front desk of a small dental clinic. Answer briefly."}]


def _event(kind: stt.SpeechEventType, text: str) -> stt.SpeechEvent:
    return stt.SpeechEvent(type=kind, alternatives=[stt.SpeechData(language="en", text=text)])


class _Session:
    def __init__(self) -> None:
        self.agent_state = "listening"
        self.handlers: dict[str, Any] = {}

    def on(self, name: str, fn: Any) -> None:
        self.handlers[name] = fn


class _RecordingWarmer(PromptWarmer):
    """The real policy; `warm` records what would be sent instead of calling an LLM."""

    def __init__(self) -> None:
        super().__init__(model=None, build_context=lambda t: llm.ChatContext(), tools=list)  # type: ignore[arg-type]
        self.texts: list[str] = []

    async def warm(self, text: str) -> None:
        self.texts.append(text)
        await asyncio.sleep(0.05)


async def test_interims_are_sent_one_at_a_time_and_never_race_the_reply() -> None:
    warmer, session = _RecordingWarmer(), _Session()
    hooks = SimpleNamespace(transcript_listeners=[])
    warmer.attach(session, hooks)
    listen = hooks.transcript_listeners[0]
    listen(_event(E.INTERIM_TRANSCRIPT, "I'd"))  # one word: too little to be worth a request
    listen(_event(E.INTERIM_TRANSCRIPT, "I'd like to"))
    listen(_event(E.INTERIM_TRANSCRIPT, "I'd like to book a"))  # the first is still running: skipped
    await asyncio.sleep(0.1)
    listen(_event(E.INTERIM_TRANSCRIPT, "I'd like to book"))  # only one word more than the last sent
    listen(_event(E.PREFLIGHT_TRANSCRIPT, "I'd like to book a cleaning."))  # the reply's request starts
    listen(_event(E.FINAL_TRANSCRIPT, "I'd like to book a cleaning"))
    await asyncio.sleep(0.1)
    # a hesitation split the turn: the next part is sent behind the first part's final
    listen(_event(E.INTERIM_TRANSCRIPT, "with Dr. Lee"))
    await asyncio.sleep(0.1)
    session.agent_state = "speaking"  # the reply is not in the context yet: nothing to read ahead
    session.handlers["conversation_item_added"](SimpleNamespace(item=SimpleNamespace(role="user")))
    listen(_event(E.INTERIM_TRANSCRIPT, "wait, one more thing"))
    await asyncio.sleep(0.1)
    assert warmer.texts == ["I'd like to", "I'd like to book a cleaning with Dr. Lee"]
    session.handlers["close"](None)
    assert hooks.transcript_listeners == []


async def test_a_reply_joining_the_context_is_read_ahead_once() -> None:
    warmer, session = _RecordingWarmer(), _Session()
    warmer.attach(session, SimpleNamespace(transcript_listeners=[]))
    added = session.handlers["conversation_item_added"]
    added(SimpleNamespace(item=SimpleNamespace(role="assistant")))
    added(SimpleNamespace(item=SimpleNamespace(role="assistant")))  # the first is still running: skipped
    await asyncio.sleep(0.1)
    added(SimpleNamespace(item=SimpleNamespace(role="user")))  # the caller's turn: their reply's own request
    await asyncio.sleep(0.1)
    assert warmer.texts == [""]


@pytest.mark.slow
async def test_the_turn_that_folds_the_context_finds_it_cached(tmp_path: Path) -> None:
    """The reply after a fold (worker/context.py) re-reads the whole history after the instructions;
    the read-ahead after the previous reply does it in the idle time instead."""
    from worker.context import ContextOptions, bound_context
    from worker.llm_server import EmbeddedLLM, EmbeddedLLMOptions

    # short sampled replies: what each slot keeps cached is then the prompt this test compares, not up to 96
    # sampled tokens that differ run to run (at the default, one run of 3 read 139 vs 150 cached tokens)
    settings = load_settings(llm_max_tokens=16)
    instructions = SYSTEM[0]["content"]
    opt = ContextOptions(recent_turns=6, drop_step=4)
    history = llm.ChatContext()
    for i in range(4):  # the fourth reply makes 8 settled messages: the oldest four fold into the summary
        history.add_message(role="user", content=f"Question {i}: can I book a cleaning on day {i + 3}?")
        history.add_message(role="assistant", content=f"Yes, day {i + 3} at ten works. Anything else?")
    asked = history.copy()
    asked.items.pop()  # what the fourth reply's own request held (no fold yet)

    def context(text: str) -> llm.ChatContext:
        ctx = history.copy()
        ctx.add_message(role="user", content=text)
        return bound_context(ctx, instructions, opt)

    async def reply_cached(model: Any, text: str) -> int:
        cached = 0
        async with model.chat(chat_ctx=context(text)) as stream:
            async for chunk in stream:
                if chunk.usage is not None:
                    cached = chunk.usage.prompt_cached_tokens
        return cached

    assert len(context("").items) < len(history.items)  # the next turn does fold
    assert len(bound_context(asked, instructions, opt).items) == len(asked.items) + 1  # the last did not
    with EmbeddedLLM(EmbeddedLLMOptions(n_parallel=2)) as server:
        comp = _llm_only(settings, server.base_url, SlotPool(server.base_url, 2, root=tmp_path))
        slots: list[int] = []
        ahead, behind = call_llm(settings, comp, [], slots), call_llm(settings, comp, [], slots)
        for model in (ahead, behind):  # both slots hold the last reply's request, unfolded
            async with model.chat(chat_ctx=bound_context(asked, instructions, opt)) as stream:
                async for _ in stream:
                    pass
        reader = PromptWarmer(load_llm(settings, server.base_url, slot=slots[0], max_tokens=1), context, list)
        session = _Session()
        reader.attach(session, SimpleNamespace(transcript_listeners=[]))
        session.handlers["conversation_item_added"](SimpleNamespace(item=SimpleNamespace(role="assistant")))
        assert reader._task is not None
        await reader._task
        cached_ahead = await reply_cached(ahead, "Thanks, that is all.")
        cached_behind = await reply_cached(behind, "Thanks, that is all.")
    assert cached_ahead >= cached_behind + 40, (cached_ahead, cached_behind)


@pytest.mark.slow
async def test_the_reply_finds_the_interim_words_cached_in_its_slot(tmp_path: Path) -> None:
    from worker.llm_server import EmbeddedLLM, EmbeddedLLMOptions

    settings = load_settings()
    full = "I would like to book a cleaning appointment with Doctor Lee for next Tuesday morning."
    interim = "I would like to book a cleaning appointment with Doctor Lee"

    def context(text: str) -> llm.ChatContext:
        ctx = llm.ChatContext()
        for m in SYSTEM:
            ctx.add_message(role=m["role"], content=m["content"])  # type: ignore[arg-type]
        ctx.add_message(role="user", content=text)
        return ctx

    with EmbeddedLLM(EmbeddedLLMOptions(n_parallel=2)) as server:
        comp = _llm_only(settings, server.base_url, SlotPool(server.base_url, 2, root=tmp_path))
        slots: list[int] = []
        warmed, cold = call_llm(settings, comp, [], slots), call_llm(settings, comp, [], slots)
        warmers = [
            PromptWarmer(load_llm(settings, server.base_url, slot=s, max_tokens=1), context, list)
            for s in slots
        ]
        await warmers[0].warm(interim)
        await warmers[1].warm("Good morning.")  # the instructions only
        cached_warm = await _ask(warmed, full, SYSTEM)
        cached_cold = await _ask(cold, full, SYSTEM)
    assert slots == [0, 1]
    assert [w.written_tokens for w in warmers] == [1, 1]  # a long answer would hold the slot
    assert cached_warm >= cached_cold + 8  # the interim's words were read before the reply was asked
