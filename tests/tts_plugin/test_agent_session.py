"""The plugin inside a real AgentSession (no room): a streamed LLM reply is spoken, and barge-in stops the
engine's work for it."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from livekit.agents import APIConnectOptions, llm
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS
from livekit.agents.voice import Agent, AgentSession

from plugins.cpu_voice import CpuVoiceTTS
from plugins.fallback_tts import FallbackTTS
from plugins.orpheus.client import EngineClient
from plugins.orpheus.tts import OrpheusOptions, OrpheusTTS
from simulator.audio_io import Loudspeaker

from .conftest import EngineProcess

REPLY = "Sure, I can book that for you. It is a lovely evening for dinner, and the patio has space."


class TokenLLM(llm.LLM):
    """Streams a fixed reply word by word at an LLM's pace."""

    def __init__(self, reply: str, delay_s: float = 0.03) -> None:
        super().__init__()
        self.reply, self.delay_s = reply, delay_s
        self.finished_at: float | None = None

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list | None = None,  # type: ignore[type-arg]
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        **_: object,
    ) -> llm.LLMStream:
        return _TokenStream(self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)


class _TokenStream(llm.LLMStream):
    async def _run(self) -> None:
        scripted: TokenLLM = self._llm  # type: ignore[assignment]
        words = scripted.reply.split(" ")
        for i, word in enumerate(words):
            await asyncio.sleep(scripted.delay_s)
            delta = llm.ChoiceDelta(role="assistant", content=word if i == 0 else " " + word)
            self._event_ch.send_nowait(llm.ChatChunk(id=uuid.uuid4().hex, delta=delta))
        scripted.finished_at = asyncio.get_running_loop().time()


async def _engine_streams(address: str) -> int:
    client = EngineClient(address)
    await client.connect()
    try:
        return int((await client.capacity())["active_streams"])
    finally:
        await client.close()


@pytest.mark.slow
async def test_reply_is_spoken_and_barge_in_cancels_the_engine(running_engine: EngineProcess) -> None:
    orpheus = OrpheusTTS(OrpheusOptions(address=running_engine.address))
    chain = FallbackTTS(orpheus, CpuVoiceTTS())
    loop = asyncio.get_running_loop()
    first_piece_at: list[float] = []
    chain.piece_listeners.append(lambda _p: first_piece_at.append(loop.time()))
    await chain.warm_up()
    token_llm = TokenLLM(REPLY)
    session = AgentSession(llm=token_llm, tts=chain, user_away_timeout=None)
    speaker = Loudspeaker(24000)
    session.output.audio = speaker
    await session.start(Agent(instructions="Be brief."), record=False)
    try:
        handle = session.generate_reply(user_input="Can I book a table for tonight?")
        for _ in range(600):
            if speaker.track.chunks:
                break
            await asyncio.sleep(0.05)
        assert speaker.track.chunks, "no reply audio reached the output"
        for _ in range(100):
            if token_llm.finished_at is not None:
                break
            await asyncio.sleep(0.02)
        assert first_piece_at and token_llm.finished_at is not None
        assert first_piece_at[0] < token_llm.finished_at  # the first piece left while the LLM was writing
        assert await _engine_streams(running_engine.address) == 1
        handle.interrupt()  # barge-in
        await asyncio.wait_for(handle.wait_for_playout(), 10)
        for _ in range(100):
            if await _engine_streams(running_engine.address) == 0:
                break
            await asyncio.sleep(0.02)
        assert await _engine_streams(running_engine.address) == 0
        assert not chain.using_fallback and chain.active_streams == 0 and orpheus.active_streams == 0
    finally:
        await session.aclose()
        await orpheus.aclose()


async def test_say_of_a_cached_line_needs_no_engine(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """session.say() of a cached greeting plays the cached clip; there is no engine at this address."""
    import numpy as np

    from caches import CachedPhrase, PhraseCache

    clip = (np.sin(np.arange(24000 // 2) * 0.05) * 8000).astype(np.int16)
    text = "Hello! How can I help you today?"
    cache = PhraseCache([CachedPhrase(text, "greeting", "tara", "en", "test", 24000, clip)])
    orpheus = OrpheusTTS(OrpheusOptions(address=f"unix://{tmp_path}/none.sock"), phrase_cache=cache)
    session = AgentSession(tts=orpheus, user_away_timeout=None)
    speaker = Loudspeaker(24000)
    session.output.audio = speaker
    await session.start(Agent(instructions="Be brief."), record=False)
    try:
        await asyncio.wait_for(session.say(text).wait_for_playout(), 10)
        played = np.concatenate([pcm for _, pcm in speaker.track.chunks])
        assert played.size >= clip.size * 0.9
        assert cache.metrics.hits == 1
    finally:
        await session.aclose()
        await orpheus.aclose()
