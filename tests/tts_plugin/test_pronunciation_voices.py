"""Pronunciations through the real voices: hibari and the Orpheus engine get the respelling, the call's
transcript keeps the written word, and the phrase cache never plays a clip made with another respelling."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from livekit.agents import APIConnectOptions
from livekit.agents.voice import Agent, AgentSession

from caches import BuildOptions, CacheStore, Phrase, PhraseCache, build_cache
from plugins.cpu_voice import CpuVoice, CpuVoiceTTS
from plugins.orpheus.client import ClientStream
from plugins.orpheus.tts import OrpheusOptions, OrpheusTTS
from plugins.pronunciation import check_pronunciations
from simulator.audio_io import Loudspeaker
from simulator.fakes import ScriptedLLM

from .conftest import EngineProcess

pytestmark = pytest.mark.slow

SAID = check_pronunciations({"Nguyen": "win", "Okonkwo": "oh-konk-woh"})
REPLY = "Doctor Nguyen can see you on Tuesday, and Doctor Okonkwo on Friday."
NO_RETRY = APIConnectOptions(max_retry=0, timeout=30.0)


class HeardVoice(CpuVoice):
    """The real hibari voice, noting each text it is asked to say (what the caller hears)."""

    def __init__(self) -> None:
        super().__init__("heart")
        self.texts: list[str] = []

    def synthesize(self, text: str, trim: bool = True) -> np.ndarray:
        self.texts.append(text)
        return super().synthesize(text, trim)


@pytest.fixture(scope="module")
def heard() -> HeardVoice:
    return HeardVoice()


async def test_the_cpu_voice_says_the_respelling(heard: HeardVoice) -> None:
    plain = CpuVoiceTTS(voice="heart", engine=heard)
    listed = CpuVoiceTTS(voice="heart", engine=heard, pronunciations=SAID)
    pieces: list[str] = []
    listed.piece_listeners.append(pieces.append)
    respelled = await listed.synth_piece("Ask for Doctor Nguyen.")
    assert respelled == heard.synthesize("Ask for Doctor win.").tobytes()  # the same audio as the respelling
    assert respelled != await plain.synth_piece("Ask for Doctor Nguyen.")  # and not the spelling-rule reading
    assert pieces == ["Ask for Doctor Nguyen."]  # listeners (marks, benchmarks) see the written piece


async def test_a_call_hears_the_respelling_and_keeps_the_written_name(heard: HeardVoice) -> None:
    """A real AgentSession speaking a streamed LLM reply: the voice was asked for the respellings, the chat
    history (what the LLM sees next turn, the transcript) has the names as written."""
    heard.texts.clear()
    session = AgentSession(
        llm=ScriptedLLM(REPLY, word_delay_s=0.01),
        tts=CpuVoiceTTS(voice="heart", engine=heard, pronunciations=SAID),
        user_away_timeout=None,
    )
    speaker = Loudspeaker(24000)
    session.output.audio = speaker
    await session.start(Agent(instructions="Be brief."), record=False)
    try:
        handle = session.generate_reply(user_input="Who can see me this week?")
        await asyncio.wait_for(handle.wait_for_playout(), 60)
    finally:
        await session.aclose()
    spoken = " ".join(heard.texts)
    assert "win" in spoken and "oh-konk-woh" in spoken and "Nguyen" not in spoken and "Okonkwo" not in spoken
    assert speaker.track.chunks, "no reply audio reached the caller"
    said = [m.text_content for m in session.history.items if getattr(m, "role", "") == "assistant"]
    assert said and "Doctor Nguyen" in said[-1] and "Okonkwo" in said[-1] and "win" not in said[-1]


async def test_the_engine_gets_the_respelling_and_reports_the_written_text(
    running_engine: EngineProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a real engine server: what goes over the socket is respelled, what the stream says it has
    voiced (kept by an interrupted reply, handed to the fallback voice) is as written."""
    sent: list[dict[str, Any]] = []
    real_send = ClientStream._send

    def spy(self: ClientStream, msg: dict[str, Any]) -> None:
        sent.append(msg)
        real_send(self, msg)

    monkeypatch.setattr(ClientStream, "_send", spy)
    voice = OrpheusTTS(OrpheusOptions(address=running_engine.address, pronunciations=SAID))
    try:
        stream = voice.synthesize(REPLY, conn_options=NO_RETRY)
        frames = [ev.frame async for ev in stream]
        assert frames
        texts = " ".join(m["text"] for m in sent if m.get("op") == "text")
        assert "Doctor win" in texts and "oh-konk-woh" in texts and "Nguyen" not in texts
        voiced = stream.voiced_text()
        assert "Doctor Nguyen" in voiced and "win" not in voiced
        assert "".join(REPLY.split()).startswith("".join(voiced.split()))  # pieces joined as written
        await stream.aclose()
    finally:
        await voice.aclose()


async def test_a_cached_clip_is_played_only_with_the_respelling_it_was_made_with(tmp_path, heard) -> None:  # type: ignore[no-untyped-def]
    greeting = Phrase("Thanks for calling Doctor Nguyen's office.", "greeting", "en")
    plain_line = Phrase("One moment.", "hold", "en")
    tts = CpuVoiceTTS(voice="heart", engine=heard, pronunciations=SAID)
    opts = BuildOptions(voice="heart", language="en", fingerprint="fp", pronunciations=SAID)
    report = await build_cache(CacheStore(tmp_path), tts, [greeting, plain_line], opts)
    assert report.ok and len(report.synthesised) == 2

    same = PhraseCache.load(tmp_path, voice="heart", language="en", pronunciations=SAID)
    assert same.contains(greeting.text, "heart", "en") and same.contains(plain_line.text, "heart", "en")
    changed = check_pronunciations({"Nguyen": "noo-yen"})
    moved = PhraseCache.load(tmp_path, voice="heart", language="en", pronunciations=changed)
    assert not moved.contains(greeting.text, "heart", "en")  # made with "win": spoken live instead
    assert moved.contains(plain_line.text, "heart", "en")  # no listed word: any list may play it
    filtered = PhraseCache.load(tmp_path, voice="heart", language="en", fingerprint="fp", pronunciations=SAID)
    assert len(filtered) == 2  # the model filter compares the model, not the respelling

    rebuilt = await build_cache(
        CacheStore(tmp_path),
        CpuVoiceTTS(voice="heart", engine=heard, pronunciations=changed),
        [greeting, plain_line],
        BuildOptions(voice="heart", language="en", fingerprint="fp", pronunciations=changed),
    )
    assert rebuilt.synthesised == [greeting.text] and rebuilt.reused == [plain_line.text]


def test_both_cpu_voices_tell_which_respellings_change_nothing(heard: HeardVoice) -> None:
    """hibari and espeak-ng read the written word and its respelling to phonemes: a word they already say as
    respelled is named (an owner can drop it), a name they say wrongly is not."""
    from plugins.cpu_voice.espeak import EspeakVoice
    from plugins.pronunciation import read_alike

    listed = check_pronunciations({"Nguyen": "win", "Synthroid": "SIN-throyd"})
    for voice in (heard, EspeakVoice("espeak-en")):
        assert read_alike(listed, voice.phonemes) == ["Synthroid"], voice
