"""The Parley agent: speech-shaped instructions, a bounded context, and a reply that stays short.

Small LLMs ignore "be brief" (DESIGN §8: 900-token replies), so the reply is also cut here after a sentence
budget; an LLM failure becomes a short spoken apology instead of dead air.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from livekit import rtc
from livekit.agents import APIError, llm, stt
from livekit.agents.voice import Agent, ModelSettings

from turn_detection import TurnHandling

from .context import ContextOptions, bound_context
from .speak import FillerAgent
from .tool_text import tool_calls_from_text, tool_names

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

OUTBOUND_GREETING = {  # the agent placed the call: it says who it is in the agent file's own greeting
    "en": "Hi there, this is an automated assistant calling. Do you have a minute?",
    "ko": "안녕하세요, 자동 안내 전화입니다. 잠시 통화 괜찮으실까요?",
}

REPEAT = {  # the LLM answered the caller with nothing at all: never leave dead air
    "en": "Sorry, could you say that again?",
    "ko": "죄송해요, 다시 한 번 말씀해 주시겠어요?",
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
    max_words: int | None = 45  # ~15 s of speech: a reply that runs on without a full stop ends here
    context: ContextOptions = field(default_factory=ContextOptions)
    instructions: str | None = None  # None = the built-in speech instructions for `language`
    greeting: str | None = None  # None = the built-in greeting; "" = do not greet

    @property
    def spoken_instructions(self) -> str:
        return self.instructions or INSTRUCTIONS.get(self.language, INSTRUCTIONS["en"])

    @property
    def spoken_greeting(self) -> str:
        return self.greeting if self.greeting is not None else GREETING.get(self.language, GREETING["en"])


def say_line(agent: Any, text: str, **kwargs: Any) -> Any:
    """Say a fixed line, from the phrase cache when it holds it (no synthesis delay); the SpeechHandle, or
    None for an empty line."""
    if not text:
        return None
    cached = agent.greeting_audio(text) if getattr(agent, "greeting_audio", None) else None
    if cached is not None:
        return agent.session.say(text, audio=cached, **kwargs)
    return agent.session.say(text, **kwargs)


def _sentence_ends(text: str) -> Iterator[int]:
    """Index of each sentence-ending mark: one followed by a space or the end of the text, not a decimal
    point like 3.30's."""
    for i, ch in enumerate(text):
        if ch in _SENTENCE_END:
            nxt = text[i + 1 : i + 2]
            if ch == "." and nxt.isdigit():
                continue
            if nxt == "" or nxt.isspace():
                yield i


def count_sentence_ends(text: str) -> int:
    """Sentence ends in text, ignoring decimals like 3.30 (a period followed by a digit)."""
    return sum(1 for _ in _sentence_ends(text))


async def limit_reply(
    chunks: AsyncIterable[object], max_sentences: int, max_words: int | None = None
) -> AsyncIterator[str | llm.ChatChunk]:
    """Pass text through until `max_sentences` sentences are complete (or `max_words` words, for a model
    that runs on without a full stop), then stop the LLM stream.

    Tool calls and usage ride along as chunks without their text, so a SIP call's end_call/transfer tools
    still run and token usage is still counted."""
    seen = ""
    ends = 0  # sentence ends in `seen`, carried from chunk to chunk
    async for chunk in chunks:
        if isinstance(chunk, str):
            text: str | None = chunk
        elif isinstance(chunk, llm.ChatChunk):
            delta = chunk.delta
            if (delta and delta.tool_calls) or chunk.usage is not None:
                yield llm.ChatChunk(
                    id=chunk.id,
                    delta=llm.ChoiceDelta(role="assistant", tool_calls=delta.tool_calls) if delta else None,
                    usage=chunk.usage,
                )
            text = delta.content if delta else None
        else:
            continue  # flush markers carry no speech
        if not text:
            continue
        sent = len(seen)
        before, seen = ends, seen + text
        ends = count_sentence_ends(seen + " ")
        cut = None
        if ends >= max_sentences > before:
            cut = _cut_after_sentences(seen, max_sentences)
        elif max_words is not None and len(seen.split()) > max_words:
            cut = _cut_at_words(seen, max_words)
        if cut is not None:
            if len(cut) > sent:
                yield cut[sent:]
            return
        yield text


def _cut_at_words(text: str, n: int) -> str:
    """The first `n` words of text (as written, spacing kept)."""
    return text[: list(re.finditer(r"\S+", text))[n - 1].end()]


def _cut_after_sentences(text: str, n: int) -> str:
    for count, i in enumerate(_sentence_ends(text), 1):
        if count == n:
            return text[: i + 1]
    return text


class ParleyAgent(FillerAgent):
    def __init__(self, options: AgentOptions, **kwargs: object) -> None:
        self.options = options
        self.base_instructions = options.spoken_instructions
        super().__init__(instructions=self.base_instructions, **kwargs)  # type: ignore[arg-type]
        self.turns: TurnHandling | None = None  # set per call by worker.pipeline.build_call
        self.greeting_audio: Callable[[str], AsyncIterable[rtc.AudioFrame] | None] | None = None
        self.greet_on_enter = True  # an outbound call greets once it knows who answered (worker/outbound.py)

    @property
    def greeting(self) -> str:
        return self.options.spoken_greeting

    async def on_enter(self) -> None:
        """Greet at once; from the phrase cache when it holds the line (no synthesis delay)."""
        if self.greet_on_enter:
            say_line(self, self.greeting)

    def stt_node(  # type: ignore[override]
        self, audio: AsyncIterable[rtc.AudioFrame], model_settings: ModelSettings
    ) -> AsyncIterable[stt.SpeechEvent | str] | Any:
        """Through the turn hooks: they feed the audio end-of-turn model and drop backchannels said over
        the agent, so "mm-hmm" never interrupts it."""
        if self.turns is None:
            return Agent.default.stt_node(self, audio, model_settings)
        return self.turns.hooks.stt_node(self, audio, model_settings)

    def reply_context(self, chat_ctx: llm.ChatContext) -> llm.ChatContext:
        """What the LLM is sent for a reply to `chat_ctx` (the prompt warm-up must send the same prefix)."""
        return bound_context(chat_ctx, self.base_instructions, self.options.context)

    async def llm_node(  # type: ignore[override]
        self, chat_ctx: llm.ChatContext, tools: list[llm.Tool], model_settings: ModelSettings
    ) -> AsyncIterator[str | llm.ChatChunk]:
        bounded = self.reply_context(chat_ctx)
        spoke = acted = False
        try:
            stream = tool_calls_from_text(
                Agent.default.llm_node(self, bounded, tools, model_settings), tool_names(tools)
            )
            async for out in limit_reply(stream, self.options.max_sentences, self.options.max_words):
                if isinstance(out, str):
                    spoke = spoke or bool(out.strip())
                else:
                    acted = acted or bool(out.delta and out.delta.tool_calls)
                yield out
        except APIError as e:
            log.warning("llm failed; apologising", extra={"error": str(e)[:200]})
            if not spoke:
                yield APOLOGY.get(self.options.language, APOLOGY["en"])
            return
        if not spoke and not acted and _answering_the_caller(chat_ctx):
            log.warning("llm returned an empty reply; asking the caller to repeat")
            yield REPEAT.get(self.options.language, REPEAT["en"])


def _answering_the_caller(chat_ctx: llm.ChatContext) -> bool:
    """True when the last thing in the context is the caller speaking (not a tool result the LLM may
    rightly leave unanswered)."""
    for item in reversed(chat_ctx.items):
        if item.type == "message":
            return item.role == "user"
        if item.type in ("function_call", "function_call_output"):
            return False
    return False
