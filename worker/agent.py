"""The Parley agent: the one place Parley's behaviour lives, the same for its built-in agent and for a
developer's own LiveKit `Agent` (a Python entry point), which it holds and runs as its own (issue 62).

Small LLMs ignore "be brief" (DESIGN §8: 900-token replies), so the reply is also cut here after a sentence
budget; an LLM failure becomes a short spoken apology instead of dead air.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import re
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from livekit import rtc
from livekit.agents import APIError, RunContext, llm, stt
from livekit.agents.llm.chat_context import Instructions
from livekit.agents.llm.utils import prepare_function_arguments
from livekit.agents.voice import Agent, ModelSettings

from caches import FillerController
from turn_detection import TurnHandling

from .context import ContextOptions, bound_context
from .flows.clock import today_in, with_date
from .flows.engine import Flow
from .flows.spec import FlowSpec
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
    timezone: str = "UTC"  # today's date in a developer's instructions and a flow's "tomorrow" are read here

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


FlowTool = Callable[[dict[str, Any]], Awaitable[Any]]  # one tool a flow calls with its arguments

_HOOKS = (  # the Agent methods a developer may override: run as this agent's own, inside Parley's
    "on_enter",
    "on_exit",
    "on_user_turn_completed",
    "on_user_turn_exceeded",
    "stt_node",
    "llm_node",
    "tts_node",
    "transcription_node",
    "realtime_audio_output_node",
)
_DECLARED = ("flow", "timezone")  # what a developer's agent may declare for Parley to read


class ParleyAgent(Agent):
    """The agent a call runs: Parley's behaviour around the agent being served.

    Without `own`, that is Parley's built-in agent (the options' instructions and the given tools). With
    `own`, a developer's LiveKit `Agent` (a Python entry point) is held, not changed: its instructions, tools,
    chat context and models are this agent's, and its hooks and nodes (`on_enter`, `llm_node`, ...) run as
    this agent's own, so `self.session` in them is the call's session and its other methods and attributes
    are read through. What Parley adds is the same for both: the greeting (unless `own` has an `on_enter`),
    fillers, turn hooks, a bounded context, tool calls written as text made into calls, the sentence budget,
    an apology when the LLM fails, "say that again" on an empty reply, and the flow when one is declared
    (`flow`, or a `flow` attribute on `own`; its tools are `flow_tools` by name, else this agent's tools).
    """

    def __init__(
        self,
        options: AgentOptions,
        own: Agent | None = None,
        *,
        tools: Sequence[llm.Tool] = (),
        flow: FlowSpec | None = None,
        flow_tools: Mapping[str, FlowTool] | None = None,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        declared = _declared(own)
        flow = flow or declared.get("flow")
        timezone = declared.get("timezone") or options.timezone
        self.own = own
        self.options = replace(options, timezone=timezone)
        self._own_hooks: dict[str, Callable[..., Any]] = {}
        instructions: str | Instructions = options.spoken_instructions
        models: dict[str, Any] = {}
        own_tools: list[llm.Tool | llm.Toolset] = []
        if own is not None:
            _check_own(own)
            self._own_hooks = {
                name: fn.__get__(self)
                for name in _HOOKS
                if (fn := getattr(type(own), name)) is not getattr(Agent, name)
            }
            instructions = own.instructions
            if isinstance(instructions, str):
                instructions = with_date(instructions, timezone)
            own_tools = _tools_of(own, self)
            models = {
                "chat_ctx": own.chat_ctx,
                "stt": own.stt,
                "vad": own.vad,
                "llm": own.llm,
                "tts": own.tts,
            }
        merged = {t.id: t for t in [*own_tools, *tools]}  # a tool given twice (same name) is kept once
        super().__init__(instructions=instructions, tools=list(merged.values()), **models)
        self.base_instructions = (
            instructions if isinstance(instructions, str) else instructions.render_static(modality="audio")
        )
        self.turns: TurnHandling | None = None  # set per call by worker.pipeline.build_call
        self.fillers: FillerController | None = None  # set per call when there is a phrase cache
        self.greeting_audio: Callable[[str], AsyncIterable[rtc.AudioFrame] | None] | None = None
        self.greet_on_enter = True  # an outbound call greets once it knows who answered (worker/outbound.py)
        self._flow_tools = dict(flow_tools or {})
        self._on_close = on_close
        self.flow: Flow | None = None
        if flow is not None:
            self._check_flow_tools(flow)
            self.flow = Flow(flow, self._call_flow_tool, today=today_in(timezone))

    def __getattr__(self, name: str) -> Any:
        """The developer's own attributes and methods (only reached for names this agent lacks): their hooks
        run on this agent, so `self.<their attribute>` must resolve here."""
        own = self.__dict__.get("own")
        if (
            own is None or name.startswith("__") or name in _agent_state()
        ):  # Agent's own: never the developer's
            raise AttributeError(name)
        if name in vars(own):
            return vars(own)[name]
        attr = inspect.getattr_static(type(own), name)  # AttributeError when it has none either
        return attr.__get__(self, type(own)) if hasattr(attr, "__get__") else attr

    @property
    def greeting(self) -> str:
        return self.options.spoken_greeting

    @property
    def plain_llm_replies(self) -> bool:
        """Replies come from the LLM through the default node (what the prompt warm-up can read ahead for)."""
        return (
            self.flow is None
            and "llm_node" not in self._own_hooks
            and type(self).llm_node is ParleyAgent.llm_node
        )

    async def on_enter(self) -> None:
        """The developer's on_enter, else the greeting (from the phrase cache when it holds the line)."""
        if (own := self._own_hooks.get("on_enter")) is not None:
            await own()
        elif self.greet_on_enter:
            say_line(self, self.greeting)

    async def on_exit(self) -> None:
        try:
            if (own := self._own_hooks.get("on_exit")) is not None:
                await own()
        finally:
            if self._on_close is not None:
                await self._on_close()

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        if self.fillers is not None:
            self.fillers.on_user_turn_completed()
        if (own := self._own_hooks.get("on_user_turn_completed")) is not None:
            await own(turn_ctx, new_message)

    def stt_node(  # type: ignore[override]
        self, audio: AsyncIterable[rtc.AudioFrame], model_settings: ModelSettings
    ) -> AsyncIterable[stt.SpeechEvent | str] | Any:
        """Through the turn hooks: they feed the audio end-of-turn model and drop backchannels said over
        the agent, so "mm-hmm" never interrupts it."""
        if self.turns is not None:
            return self.turns.hooks.stt_node(self, audio, model_settings)
        if (own := self._own_hooks.get("stt_node")) is not None:
            return own(audio, model_settings)
        return Agent.default.stt_node(self, audio, model_settings)

    async def on_user_turn_exceeded(self, ev: Any) -> None:
        if (own := self._own_hooks.get("on_user_turn_exceeded")) is not None:
            await own(ev)
            return
        await super().on_user_turn_exceeded(ev)

    def realtime_audio_output_node(
        self, audio: AsyncIterable[rtc.AudioFrame], model_settings: ModelSettings
    ) -> Any:
        if (own := self._own_hooks.get("realtime_audio_output_node")) is not None:
            return own(audio, model_settings)
        return Agent.default.realtime_audio_output_node(self, audio, model_settings)

    def transcription_node(self, text: AsyncIterable[Any], model_settings: ModelSettings) -> Any:
        if (own := self._own_hooks.get("transcription_node")) is not None:
            return own(text, model_settings)
        return Agent.default.transcription_node(self, text, model_settings)

    def tts_node(self, text: AsyncIterable[str], model_settings: ModelSettings) -> Any:
        """The reply's words and first audio pass the FillerController, so a cached filler can cover a late
        reply (caches/controller.py): speaking asks the cache, the cache never holds the agent."""
        own = self._own_hooks.get("tts_node")
        if self.fillers is not None:
            text = self.fillers.watch_reply_text(text)
        frames = (
            _stream(own(text, model_settings)) if own else Agent.default.tts_node(self, text, model_settings)
        )
        return frames if self.fillers is None else self.fillers.watch_reply_audio(frames)

    def reply_context(self, chat_ctx: llm.ChatContext) -> llm.ChatContext:
        """What the LLM is sent for a reply to `chat_ctx` (the prompt warm-up must send the same prefix)."""
        return bound_context(chat_ctx, self.base_instructions, self.options.context)

    async def llm_node(  # type: ignore[override]
        self, chat_ctx: llm.ChatContext, tools: list[llm.Tool], model_settings: ModelSettings
    ) -> AsyncIterator[str | llm.ChatChunk]:
        if self.flow is not None:  # the flow says the line; it calls its tools itself, none is written
            text = last_caller_text(chat_ctx)
            if text is not None:
                yield await self.flow.respond(text)
            return
        bounded = self.reply_context(chat_ctx)
        own = self._own_hooks.get("llm_node")
        source = (
            _stream(own(bounded, tools, model_settings))
            if own is not None
            else Agent.default.llm_node(self, bounded, tools, model_settings)
        )
        spoke = acted = False
        try:
            stream = tool_calls_from_text(source, tool_names(tools))
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

    # --- the flow's tools ---------------------------------------------------------------------------

    def _flow_tool(self, name: str) -> llm.FunctionTool | llm.RawFunctionTool | None:
        for tool in self.tools:
            if isinstance(tool, (llm.FunctionTool, llm.RawFunctionTool)) and tool.info.name == name:
                return tool
        return None

    def _check_flow_tools(self, flow: FlowSpec) -> None:
        for name, task in flow.tasks.items():
            if task.tool not in self._flow_tools and self._flow_tool(task.tool) is None:
                raise ValueError(f"flow.tasks.{name}.tool: the agent has no tool named {task.tool!r}")

    async def _call_flow_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """An agent file's HTTP tool as the flow calls it (`flow_tools`), else the agent's own tool with the
        same argument check as a call the LLM asks for; a tool that raises refused."""
        if (named := self._flow_tools.get(name)) is not None:
            return await named(arguments)
        tool = self._flow_tool(name)
        assert tool is not None  # checked when the flow was set
        call = llm.FunctionCall(call_id=f"flow_{name}", name=name, arguments=json.dumps(arguments))
        speech = self.session.current_speech
        ctx = RunContext(session=self.session, speech_handle=speech, function_call=call) if speech else None
        args, kwargs = prepare_function_arguments(fnc=tool, json_arguments=arguments, call_ctx=ctx)
        out = tool(*args, **kwargs)
        return await out if inspect.isawaitable(out) else out


def _declared(own: Agent | None) -> dict[str, Any]:
    """What a developer's agent declares for Parley: a `flow` (worker.flows.FlowSpec) and its `timezone`."""
    if own is None:
        return {}
    found = {name: getattr(own, name) for name in _DECLARED if getattr(own, name, None) is not None}
    if "flow" in found and not isinstance(found["flow"], FlowSpec):
        raise ValueError(
            f"{type(own).__name__}.flow: expected a worker.flows.FlowSpec, got {type(found['flow']).__name__}"
        )
    if "timezone" in found:
        try:
            ZoneInfo(str(found["timezone"]))
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"{type(own).__name__}.timezone: unknown time zone {found['timezone']!r}"
            ) from None
    return found


def _check_own(own: Agent) -> None:
    """One line at load for a developer's agent Parley cannot run as its own: a method that uses `super()`
    (it would run on Parley's agent, not an instance of its class), or a name Parley's agent uses itself."""
    cls = type(own)
    mine = (set(dir(ParleyAgent)) - set(dir(Agent))) | _PARLEY_STATE
    for klass in cls.__mro__:
        if klass is object or klass.__module__.startswith("livekit."):
            continue  # LiveKit's own classes are not run as Parley's agent's methods
        for name, value in vars(klass).items():
            if name.startswith("__") and name != "__getattr__":
                continue
            code = getattr(value, "__code__", None)
            if code is not None and "__class__" in code.co_freevars:
                raise ValueError(
                    f"{klass.__name__}.{name} uses super(): Parley runs it as its own agent's method; "
                    f"call Agent.default.{name}(self, ...) or the method itself instead"
                )
            if name in mine and name not in _DECLARED:
                raise ValueError(f"{klass.__name__}.{name}: the name is Parley's own; rename it")
    clash = sorted(((set(vars(own)) - _agent_state()) & mine) - set(_DECLARED))
    if clash:
        raise ValueError(f"{cls.__name__}.{clash[0]}: the name is Parley's own; rename it")


_PARLEY_STATE = frozenset(  # ParleyAgent's instance attributes
    {"own", "options", "base_instructions", "turns", "fillers", "greeting_audio", "greet_on_enter", "flow"}
    | {"_own_hooks", "_flow_tools", "_on_close"}
)


@functools.cache
def _agent_state() -> frozenset[str]:
    """The attributes every LiveKit Agent sets on itself (a developer's agent has them too)."""
    return frozenset(vars(Agent(instructions="")))


def _tools_of(own: Agent, agent: ParleyAgent) -> list[llm.Tool | llm.Toolset]:
    """The developer's tools; its `@function_tool` methods bound to Parley's agent, where its hooks run."""
    methods = {
        m.info.name: m
        for _, m in inspect.getmembers(type(own))
        if isinstance(m, (llm.FunctionTool, llm.RawFunctionTool))
    }
    kept = [
        t
        for t in own.tools
        if not (isinstance(t, (llm.FunctionTool, llm.RawFunctionTool)) and t.info.name in methods)
    ]
    return [*kept, *(m.__get__(agent, type(own)) for m in methods.values())]


async def _stream(out: Any) -> AsyncIterator[Any]:
    """A developer's node result as a stream: a node may return an async iterable, or a coroutine of one,
    of a single text or chunk, or of nothing."""
    if inspect.isawaitable(out):
        out = await out
    if out is None:
        return
    if isinstance(out, (str, llm.ChatChunk, rtc.AudioFrame)):
        yield out
        return
    async for item in out:
        yield item


def last_caller_text(chat_ctx: llm.ChatContext) -> str | None:
    """What the caller said since the agent last spoke: a turn the caller paused in can arrive as two
    messages ("could Doctor Morgan see me" ... "for a cleaning"), and the flow reads them as one."""
    parts: list[str] = []
    for item in reversed(chat_ctx.items):
        if item.type != "message":
            continue
        if item.role != "user":
            break
        parts.append(item.text_content or "")
    return " ".join(reversed(parts)).strip() or None


def _answering_the_caller(chat_ctx: llm.ChatContext) -> bool:
    """True when the last thing in the context is the caller speaking (not a tool result the LLM may
    rightly leave unanswered)."""
    for item in reversed(chat_ctx.items):
        if item.type == "message":
            return item.role == "user"
        if item.type in ("function_call", "function_call_output"):
            return False
    return False
