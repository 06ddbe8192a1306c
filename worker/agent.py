"""The Parley agent: speech-shaped instructions, a bounded context, and a reply that stays short.

Small LLMs ignore "be brief" (DESIGN §8: 900-token replies), so the reply is also cut here after a sentence
budget; an LLM failure becomes a short spoken apology instead of dead air.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from livekit import rtc
from livekit.agents import APIError, llm, stt
from livekit.agents.voice import Agent, ModelSettings

from caches import FillerAgent
from turn_detection import TurnHandling

from .context import ContextOptions, bound_context

log = logging.getLogger("parley.agent")

INSTRUCTIONS = {
    "en": (
        "You are Parley, a friendly voice assistant on a phone call. Everything you write is spoken aloud. "
        "Answer in one or two short sentences. Use plain words: no lists, no markdown, no emoji, no symbols. "
        "Say numbers, dates, times and prices as words, for example 'ten thirty' or 'twenty five dollars'. "
        "Ask at most one question at a time. If you did not understand, ask the caller to repeat."
    ),
    "ko": (
        "당신은 전화 통화 중인 친절한 음성 비서 Parley입니다. 당신이 쓰는 모든 말은 소리 내어 읽힙니다. "
        "한두 개의 짧은 문장으로 답하세요. 목록, 마크다운, 이모지, 기호를 쓰지 마세요. "
        "숫자, 날짜, 시간, 가격은 말로 풀어 쓰세요. 한 번에 하나의 질문만 하세요."
    ),
}

GREETING = {
    "en": "Hi, thanks for calling. How can I help you today?",
    "ko": "안녕하세요, 전화 주셔서 감사합니다. 무엇을 도와드릴까요?",
}

APOLOGY = {
    "en": "Sorry, I'm having trouble thinking right now. Could you say that again?",
    "ko": "죄송합니다, 잠시 문제가 있었어요. 다시 한 번 말씀해 주시겠어요?",
}

_SENTENCE_END = (".", "!", "?", "…", "。", "?", "!")


@dataclass(frozen=True)
class AgentOptions:
    language: str = "en"
    max_sentences: int = 3
    context: ContextOptions = field(default_factory=ContextOptions)
    instructions: str | None = None  # None = the built-in speech instructions for `language`
    greeting: str | None = None  # None = the built-in greeting; "" = do not greet


def count_sentence_ends(text: str) -> int:
    """Sentence ends in text, ignoring decimals like 3.30 (a period followed by a digit)."""
    n = 0
    for i, ch in enumerate(text):
        if ch in _SENTENCE_END:
            nxt = text[i + 1 : i + 2]
            if ch == "." and nxt.isdigit():
                continue
            if nxt == "" or nxt.isspace():
                n += 1
    return n


async def limit_sentences(chunks: AsyncIterable[object], max_sentences: int) -> AsyncIterator[str]:
    """Pass text through until `max_sentences` sentences are complete, then stop the LLM stream."""
    seen = ""
    async for chunk in chunks:
        if isinstance(chunk, str):
            text: str | None = chunk
        elif isinstance(chunk, llm.ChatChunk) and chunk.delta:
            text = chunk.delta.content
        else:
            continue  # flush markers and tool-call chunks carry no speech
        if not text:
            continue
        before = count_sentence_ends(seen + " ")
        seen += text
        if count_sentence_ends(seen + " ") >= max_sentences > before:
            # cut right after the sentence end that reached the budget
            cut = _cut_after_sentences(seen, max_sentences)
            tail = cut[len(seen) - len(text) :]
            if tail:
                yield tail
            return
        yield text


def _cut_after_sentences(text: str, n: int) -> str:
    count = 0
    for i, ch in enumerate(text):
        if ch in _SENTENCE_END:
            nxt = text[i + 1 : i + 2]
            if ch == "." and nxt.isdigit():
                continue
            if nxt == "" or nxt.isspace():
                count += 1
                if count == n:
                    return text[: i + 1]
    return text


class ParleyAgent(FillerAgent):
    def __init__(self, options: AgentOptions, **kwargs: object) -> None:
        self.options = options
        self.base_instructions = options.instructions or INSTRUCTIONS.get(
            options.language, INSTRUCTIONS["en"]
        )
        super().__init__(instructions=self.base_instructions, **kwargs)  # type: ignore[arg-type]
        self.turns: TurnHandling | None = None  # set per call by worker.pipeline.build_call
        self.greeting_audio: Callable[[str], AsyncIterable[rtc.AudioFrame] | None] | None = None

    @property
    def greeting(self) -> str:
        if self.options.greeting is not None:
            return self.options.greeting
        return GREETING.get(self.options.language, GREETING["en"])

    async def on_enter(self) -> None:
        """Greet at once; from the phrase cache when it holds the line (no synthesis delay)."""
        if not self.greeting:
            return
        audio = self.greeting_audio(self.greeting) if self.greeting_audio else None
        if audio is not None:
            self.session.say(self.greeting, audio=audio)
        else:
            self.session.say(self.greeting)

    def stt_node(  # type: ignore[override]
        self, audio: AsyncIterable[rtc.AudioFrame], model_settings: ModelSettings
    ) -> AsyncIterable[stt.SpeechEvent | str] | Any:
        """Through the turn hooks: they feed the audio end-of-turn model and drop backchannels said over
        the agent, so "mm-hmm" never interrupts it."""
        if self.turns is None:
            return Agent.default.stt_node(self, audio, model_settings)
        return self.turns.hooks.stt_node(self, audio, model_settings)

    async def llm_node(  # type: ignore[override]
        self, chat_ctx: llm.ChatContext, tools: list[llm.Tool], model_settings: ModelSettings
    ) -> AsyncIterator[str]:
        bounded = bound_context(chat_ctx, self.base_instructions, self.options.context)
        produced = False
        try:
            stream = Agent.default.llm_node(self, bounded, tools, model_settings)
            async for text in limit_sentences(stream, self.options.max_sentences):
                produced = True
                yield text
        except APIError as e:
            log.warning("llm failed; apologising", extra={"error": str(e)[:200]})
            if not produced:
                yield APOLOGY.get(self.options.language, APOLOGY["en"])
