"""FillerController through a real AgentSession (no server): custom audio output, the real CPU voice as TTS,
and a scripted LLM whose first token can be made late or fail (the one thing these tests must control)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest
from livekit.agents import Agent, RunContext, function_tool
from livekit.agents.voice import AgentSession, SpeechHandle
from livekit.agents.voice.audio_recognition import _EndOfTurnInfo, _EndOfTurnMetrics
from livekit.agents.voice.events import SpeechCreatedEvent

from caches import (
    BuildOptions,
    CacheStore,
    FillerController,
    FillerControllerOptions,
    FillerOptions,
    FillerPolicy,
    Phrase,
    PhraseCache,
    build_cache,
)
from plugins.cpu_voice import CpuVoiceTTS
from simulator.audio_io import Loudspeaker
from simulator.fakes import ScriptedLLM

pytestmark = pytest.mark.slow

OUT_RATE = 48_000  # not the voice's 24 kHz: frames must be served resampled
PHRASES = [
    Phrase("Hi, thanks for calling. How can I help you today?", "greeting", "en"),
    Phrase("Okay.", "acknowledgement", "en"),
    Phrase("Let me see.", "acknowledgement", "en"),
    Phrase("One moment.", "acknowledgement", "en"),
    Phrase("Let me check that for you.", "hold", "en"),
    Phrase("Sorry, something went wrong. Could you say that again?", "apology", "en"),
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("phrase-cache")

    async def build() -> None:
        tts = CpuVoiceTTS(voice="heart")
        report = await build_cache(CacheStore(root), tts, PHRASES, BuildOptions("heart", "en", "fp"))
        assert report.ok

    asyncio.run(build())
    return root


@pytest.fixture
def cache(cache_dir) -> PhraseCache:
    return PhraseCache.load(cache_dir, voice="heart", language="en", sample_rates=[OUT_RATE])


def clip_samples(cache: PhraseCache, kind: str) -> set[int]:
    """Length of each clip of a kind at the output rate, padded to whole 20 ms frames."""
    spf = OUT_RATE // 50
    return {-(-len(p.pcm_at(OUT_RATE)) // spf) * spf for p in cache.phrases(kind, "heart", "en")}


class WatchedAgent(Agent):
    """A LiveKit agent with the two hooks a FillerController needs (Parley's own agent, worker/agent.py, has
    them too): the caller's turn ended, and each reply's text and audio on their way to the voice. Its LLM
    failures reach the controller, which then plays the cached apology."""

    def __init__(self, controller: FillerController, **kwargs: Any) -> None:
        super().__init__(instructions="Be brief.", **kwargs)
        self.fillers = controller

    async def on_user_turn_completed(self, turn_ctx: Any, new_message: Any) -> None:
        self.fillers.on_user_turn_completed()

    def tts_node(self, text: Any, model_settings: Any) -> Any:
        frames = Agent.default.tts_node(self, self.fillers.watch_reply_text(text), model_settings)
        return self.fillers.watch_reply_audio(frames)


async def start(cache: PhraseCache, llm_: ScriptedLLM, threshold_ms: float = 300, **policy_kw):
    session = AgentSession(llm=llm_, tts=CpuVoiceTTS(voice="heart"), user_away_timeout=None)
    speaker = Loudspeaker(OUT_RATE)
    session.output.audio = speaker
    policy = FillerPolicy(FillerOptions(late_threshold_ms=threshold_ms, seed=3, **policy_kw))
    controller = FillerController(
        session, cache, policy, FillerControllerOptions(voice="heart", language="en")
    )
    agent = WatchedAgent(controller)
    controller.attach()
    await session.start(agent, record=False)
    return session, speaker, controller


def end_caller_turn(session: AgentSession, text: str) -> list[SpeechHandle]:
    """Commit a caller turn through the framework's own end-of-turn path (what VAD/STT trigger in a call):
    it runs `Agent.on_user_turn_completed`, then schedules the reply. Returns the reply handles as created."""
    replies: list[SpeechHandle] = []

    def on_created(ev: SpeechCreatedEvent) -> None:
        if ev.source == "generate_reply":
            replies.append(ev.speech_handle)

    session.on("speech_created", on_created)
    now = time.time()
    metrics = _EndOfTurnMetrics(
        started_speaking_at=now - 1.0, stopped_speaking_at=now, transcription_delay=0.0, end_of_turn_delay=0.0
    )
    info = _EndOfTurnInfo(skip_reply=False, new_transcript=text, transcript_confidence=1.0, metrics=metrics)
    activity = session._activity
    assert activity is not None and activity.on_end_of_turn(info)
    return replies


async def caller_turn(session: AgentSession, text: str = "Hello?") -> None:
    replies = end_caller_turn(session, text)
    for _ in range(400):
        if replies:
            break
        await asyncio.sleep(0.01)
    assert replies, "the framework scheduled no reply"
    await asyncio.wait_for(replies[0].wait_for_playout(), 20)
    await asyncio.sleep(0.05)


async def test_greeting_plays_from_cache(cache: PhraseCache) -> None:
    session, speaker, controller = await start(cache, ScriptedLLM("Sure thing."))
    try:
        handle = controller.greet()
        assert handle is not None
        await asyncio.wait_for(handle.wait_for_playout(), 20)
        assert len(speaker.segments) == 1
        assert speaker.samples(0) in clip_samples(cache, "greeting")
        played = np.concatenate(speaker.segments[0][1])
        greeting = cache.pick("greeting", "heart", "en")
        assert greeting is not None
        assert np.array_equal(played[: len(greeting.pcm_at(OUT_RATE))], greeting.pcm_at(OUT_RATE))
        assert controller.greet("A greeting nobody cached.") is None
    finally:
        await session.aclose()


async def test_the_session_closing_unsubscribes_the_controller(cache: PhraseCache) -> None:
    session, _speaker, controller = await start(cache, ScriptedLLM("Sure thing."))
    subscribed = [event for event, listener in controller._listeners() if listener in session._events[event]]
    assert len(subscribed) == 6
    await session.aclose()
    assert not any(listener in session._events.get(event, {}) for event, listener in controller._listeners())


async def test_late_reply_gets_a_filler_first(cache: PhraseCache) -> None:
    session, speaker, controller = await start(
        cache, ScriptedLLM("Sure thing.", delay_s=1.2), threshold_ms=300
    )
    try:
        await caller_turn(session)
        assert len(speaker.segments) == 2, "a filler, then the reply"
        assert speaker.samples(0) in clip_samples(cache, "acknowledgement")
        assert speaker.samples(1) not in clip_samples(cache, "acknowledgement")
        rec = controller.metrics.turns[0]
        assert rec.filler_text is not None and controller.metrics.fillers == 1
        assert rec.first_audible_ms is not None and rec.reply_ms is not None
        assert rec.first_audible_ms < rec.reply_ms
        assert controller.metrics.filler_rate == 1.0
        ((a, b),) = controller.metrics.filler_windows
        assert 0.1 < b - a < 2.0
    finally:
        await session.aclose()


async def test_no_filler_once_the_reply_words_reach_the_voice(cache: PhraseCache) -> None:
    """A filler plays to its end before the reply: started once the reply is being voiced, it delays it."""
    llm_ = ScriptedLLM(
        steps=[["Sure,", "pause:0.8", " Tuesday at ten works for us."]]
    )  # a stall after one word
    session, speaker, controller = await start(cache, llm_, threshold_ms=300)
    try:
        await caller_turn(session)
        assert len(speaker.segments) == 1, "the reply alone"
        assert speaker.samples(0) not in clip_samples(cache, "acknowledgement")
        assert controller.metrics.fillers == 0
    finally:
        await session.aclose()


async def test_prompt_reply_gets_no_filler(cache: PhraseCache) -> None:
    session, speaker, controller = await start(
        cache, ScriptedLLM("Sure thing.", delay_s=0.0), threshold_ms=3000
    )
    try:
        await caller_turn(session)
        assert len(speaker.segments) == 1
        assert speaker.samples(0) not in clip_samples(cache, "acknowledgement")
        assert controller.metrics.fillers == 0 and controller.metrics.turns[0].filler_text is None
        assert controller.metrics.turns[0].reply_ms is not None
    finally:
        await session.aclose()


async def test_never_two_turns_in_a_row(cache: PhraseCache) -> None:
    session, speaker, controller = await start(
        cache, ScriptedLLM("Sure thing.", delay_s=0.8), threshold_ms=200, predict=False
    )
    try:
        await caller_turn(session, "One.")
        await caller_turn(session, "Two.")
        await caller_turn(session, "Three.")
        fillers = [t.filler_text is not None for t in controller.metrics.turns]
        assert fillers == [True, False, True]
        assert len(speaker.segments) == 5
        texts = [t.filler_text for t in controller.metrics.turns if t.filler_text]
        assert texts[0] != texts[1], "the same line is not reused within N turns"
    finally:
        await session.aclose()


async def test_failed_llm_plays_a_cached_apology(cache: PhraseCache) -> None:
    session, speaker, controller = await start(
        cache, ScriptedLLM("Sure thing.", fail=True), threshold_ms=2000
    )
    try:
        end_caller_turn(session, "Hello?")
        for _ in range(200):
            if controller.metrics.apologies and speaker.segments:
                break
            await asyncio.sleep(0.05)
        await asyncio.wait_for(speaker.idle.wait(), 20)  # the real-time speaker has played it all
        assert controller.metrics.apologies == 1
        assert controller.metrics.fillers == 0, "a failed reply is not masked with a filler"
        assert [
            speaker.samples(i) in clip_samples(cache, "apology") for i in range(len(speaker.segments))
        ] == [True]
        assert controller.metrics.turns[0].failed
    finally:
        await session.aclose()


async def test_tool_wait_hold_line(cache: PhraseCache) -> None:
    session, speaker, controller = await start(cache, ScriptedLLM("Sure thing."))
    try:
        handle = controller.tool_filler(0)
        assert handle is not None
        await asyncio.wait_for(handle.wait_for_playout(), 20)
        assert speaker.samples(0) in clip_samples(cache, "hold")
        assert controller.tool_filler(1) is None, "no second hold line right after the first"
        assert controller.metrics.hold_lines == 1
        assert len(controller.metrics.filler_windows) == 1
    finally:
        await session.aclose()


async def test_no_filler_when_the_caller_starts_speaking_during_the_wait(cache: PhraseCache) -> None:
    session, speaker, controller = await start(
        cache, ScriptedLLM("Sure thing.", delay_s=1.0), threshold_ms=400
    )
    try:
        replies = end_caller_turn(session, "Hello?")
        await asyncio.sleep(0.1)
        session._update_user_state("speaking")  # what VAD reports when the caller talks again
        await asyncio.sleep(0.6)  # past the threshold
        assert controller.metrics.fillers == 0
        session._update_user_state("listening")
        await asyncio.wait_for(replies[0].wait_for_playout(), 20)
        assert controller.metrics.fillers == 0
        assert all(
            speaker.samples(i) not in clip_samples(cache, "acknowledgement")
            for i in range(len(speaker.segments))
        )
    finally:
        await session.aclose()


async def test_predicted_late_reply_gets_a_filler_at_once(cache: PhraseCache) -> None:
    # a prompt LLM and a long threshold: only the prediction can make this filler play
    session, speaker, controller = await start(
        cache, ScriptedLLM("Sure thing.", delay_s=0.0), threshold_ms=5000, min_history=1
    )
    controller.policy.observe_reply_latency(6000)  # earlier replies in this call were slow
    try:
        await caller_turn(session)
        rec = controller.metrics.turns[0]
        assert rec.filler_text is not None, "predicted late: the filler does not wait for the threshold"
        assert speaker.samples(0) in clip_samples(cache, "acknowledgement")
        assert rec.filler_started_at is not None and rec.reply_started_at is not None
        assert rec.filler_started_at < rec.reply_started_at
    finally:
        await session.aclose()


async def test_missing_tts_hook_turns_late_fillers_off(cache: PhraseCache) -> None:
    """A plain Agent (no watch_reply_audio): after the first reply the controller stops guessing."""
    session = AgentSession(
        llm=ScriptedLLM("Sure thing."), tts=CpuVoiceTTS(voice="heart"), user_away_timeout=None
    )
    session.output.audio = Loudspeaker(OUT_RATE)
    policy = FillerPolicy(FillerOptions(late_threshold_ms=200, min_turn_gap=0, seed=1))
    controller = FillerController(
        session, cache, policy, FillerControllerOptions(voice="heart", language="en")
    )
    controller.attach()
    await session.start(Agent(instructions="Be brief."), record=False)
    try:
        for text in ("One.", "Two."):
            controller.on_user_turn_completed()
            await asyncio.wait_for(session.generate_reply(user_input=text).wait_for_playout(), 20)
            await asyncio.sleep(0.05)
        assert [t.filler_text is not None for t in controller.metrics.turns] == [True, False]
    finally:
        await session.aclose()


async def test_tool_call_wait_gets_a_hold_line(cache: PhraseCache) -> None:
    """A real tool call through the framework; the tool wraps its wait in ctx.with_filler(tool_filler)."""
    holder: dict[str, FillerController] = {}

    @function_tool
    async def slow_lookup(ctx: RunContext) -> str:
        """Look up the order (slow)."""
        async with ctx.with_filler(holder["c"].tool_filler, delay=0.2):
            await asyncio.sleep(2.5)
        return "The order ships tomorrow."

    session = AgentSession(
        llm=ScriptedLLM("Sure thing.", tool="slow_lookup"),
        tts=CpuVoiceTTS(voice="heart"),
        user_away_timeout=None,
    )
    speaker = Loudspeaker(OUT_RATE)
    session.output.audio = speaker
    policy = FillerPolicy(FillerOptions(late_threshold_ms=300, hold_gap_ms=500, seed=2))
    controller = FillerController(
        session, cache, policy, FillerControllerOptions(voice="heart", language="en")
    )
    holder["c"] = controller
    agent = WatchedAgent(controller, tools=[slow_lookup])
    controller.attach()
    await session.start(agent, record=False)
    try:
        replies = end_caller_turn(session, "Where is my order?")
        for _ in range(400):
            if len(replies) >= 2 or (replies and replies[0].done() and len(speaker.segments) >= 3):
                break
            await asyncio.sleep(0.05)
        for h in replies:
            await asyncio.wait_for(h.wait_for_playout(), 20)
        await asyncio.sleep(0.1)
        kinds = []
        for i in range(len(speaker.segments)):
            n = speaker.samples(i)
            kinds.append(
                "ack"
                if n in clip_samples(cache, "acknowledgement")
                else "hold"
                if n in clip_samples(cache, "hold")
                else "reply"
            )
        assert kinds == ["ack", "hold", "reply"], kinds
        assert controller.metrics.hold_lines == 1 and controller.metrics.fillers == 1
    finally:
        await session.aclose()
