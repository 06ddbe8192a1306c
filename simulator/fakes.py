"""Test doubles, named as such, for the one boundary the tests cannot reach for real: an LLM that calls tools
or answers on a script (a hosted API). Everything else in a test is the real part: the microphone and the
loudspeaker are `simulator.audio_io`'s, the models are the packaged ones.

`ScriptedLLM` covers every scripted LLM the tests and benchmarks need:

- a fixed reply, optionally after a delay and streamed word by word at an LLM's pace;
- a failure (`fail=True`: the request raises a non-retryable connection error);
- a tool-calling turn (`tool=`): each caller turn first asks for the tool, and once the tool's answer is the
  newest item in the context, says `reply` (with `{output}` filled from the tool's answer);
- a script of steps (`steps=`): request n answers with step n (the last repeats); a step is a list of pieces,
  each text, `tool:NAME` (a call with no arguments) or `pause:S` (the LLM stalls S seconds there).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

from livekit.agents import APIConnectionError, APIConnectOptions, llm
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS


class ScriptedLLM(llm.LLM):
    """Test double for the LLM endpoint (see the module docstring for what it can be told to do)."""

    def __init__(
        self,
        reply: str = "Sure.",
        *,
        delay_s: float = 0.0,
        word_delay_s: float = 0.0,
        fail: bool = False,
        tool: str | None = None,
        tool_arguments: dict[str, Any] | None = None,
        steps: Sequence[Sequence[str]] | None = None,
    ) -> None:
        super().__init__()
        self.reply, self.delay_s, self.word_delay_s, self.fail = reply, delay_s, word_delay_s, fail
        self.tool, self.tool_arguments = tool, dict(tool_arguments or {})
        self.steps = [list(s) for s in steps] if steps else None
        self.requests: list[llm.ChatContext] = []  # a copy of every request's context
        self.tool_called_at: list[float] = []  # monotonic time of each tool request
        self.answered_at: float | None = None  # last reply after a tool's answer
        self.finished_at: float | None = None  # loop time the last reply's final word was sent

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list | None = None,  # type: ignore[type-arg]
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        **_: object,
    ) -> llm.LLMStream:
        step = None
        if self.steps is not None:
            step = self.steps[min(len(self.requests), len(self.steps) - 1)]
        self.requests.append(chat_ctx.copy())
        return _ScriptedStream(self, step, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)


def _tool_output(ctx: llm.ChatContext) -> str | None:
    """The tool's answer when it is the newest message or tool output in the context (the caller has not
    spoken since), else None."""
    last = next((i for i in reversed(ctx.items) if i.type in ("message", "function_call_output")), None)
    return str(last.output) if last is not None and last.type == "function_call_output" else None


class _ScriptedStream(llm.LLMStream):
    def __init__(self, owner: ScriptedLLM, step: list[str] | None, **kw: Any) -> None:
        super().__init__(owner, **kw)
        self._owner = owner
        self._step = step

    def _send(self, delta: llm.ChoiceDelta) -> None:
        self._event_ch.send_nowait(llm.ChatChunk(id=uuid.uuid4().hex, delta=delta))

    def _call(self, name: str, arguments: dict[str, Any]) -> None:
        self._owner.tool_called_at.append(time.monotonic())
        call = llm.FunctionToolCall(name=name, arguments=json.dumps(arguments), call_id=uuid.uuid4().hex)
        self._send(llm.ChoiceDelta(role="assistant", tool_calls=[call]))

    async def _say(self, text: str) -> None:
        for i, word in enumerate(text.split(" ")):
            if self._owner.word_delay_s:
                await asyncio.sleep(self._owner.word_delay_s)
            self._send(llm.ChoiceDelta(role="assistant", content=word if i == 0 else " " + word))
        self._owner.finished_at = asyncio.get_running_loop().time()

    async def _run(self) -> None:
        owner = self._owner
        if owner.delay_s:
            await asyncio.sleep(owner.delay_s)
        if owner.fail:
            raise APIConnectionError("scripted LLM down", retryable=False)
        if self._step is not None:
            for piece in self._step:
                if piece.startswith("tool:"):
                    self._call(piece[5:], {})
                elif piece.startswith("pause:"):
                    await asyncio.sleep(float(piece[6:]))
                else:
                    self._send(llm.ChoiceDelta(role="assistant", content=piece))
            return
        if owner.tool is None:
            await self._say(owner.reply)
            return
        output = _tool_output(self._chat_ctx)
        if output is None:
            self._call(owner.tool, owner.tool_arguments)
            return
        owner.answered_at = time.monotonic()
        await self._say(owner.reply.replace("{output}", _in_words(output)))


def _in_words(output: str) -> str:
    """A tool's JSON answer as a capable LLM would say it (its values in words), never the raw JSON: Parley
    drops JSON-looking reply text before the voice (worker/tool_text.py)."""
    try:
        value = json.loads(output)
    except json.JSONDecodeError:
        return output
    if isinstance(value, dict):
        return ", ".join(f"{k.replace('_', ' ')} {_in_words(json.dumps(v))}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_in_words(json.dumps(v)) for v in value)
    return str(value)
