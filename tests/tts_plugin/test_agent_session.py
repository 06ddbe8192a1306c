"""The plugin inside a real AgentSession (no room): a streamed LLM reply is spoken, and barge-in stops the
engine's work for it."""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents.voice import Agent, AgentSession

from plugins.cpu_voice import CpuVoiceTTS
from plugins.fallback_tts import FallbackTTS
from plugins.orpheus.client import EngineClient
from plugins.orpheus.tts import OrpheusOptions, OrpheusTTS
from simulator.audio_io import Loudspeaker
from simulator.fakes import ScriptedLLM

from .conftest import EngineProcess

REPLY = "Sure, I can book that for you. It is a lovely evening for dinner, and the patio has space."


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
    token_llm = ScriptedLLM(REPLY, word_delay_s=0.03)  # word by word at an LLM's pace
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
