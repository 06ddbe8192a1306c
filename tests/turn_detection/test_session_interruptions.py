"""Backchannels, barge-in and false-interruption resume through a real AgentSession (no server).

The session runs with Parley's turn handling (Silero VAD, ParleyTurnDetector, VAD interruption with the
backchannel filter in the STT node), a real-time scripted mic carrying synthesized caller speech, a pausable
real-time speaker and a scripted STT (words from the script, timing from the audio).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import pytest
import soxr
from livekit import rtc
from livekit.agents import Agent, AgentSession, StopResponse
from livekit.agents.voice import SpeechHandle

from plugins.cpu_voice.voice import CpuVoice
from turn_detection import Profile, TurnOptions, build_turn_handling
from worker.duck import Duck

from .session_io import MIC_RATE, PacedSpeaker, ScriptedMic, ScriptedSTT, ScriptLine

pytestmark = pytest.mark.slow

AGENT_RATE = 24000
AGENT_SPEECH_S = 4.5


@pytest.fixture(scope="module")
def voice() -> CpuVoice:
    return CpuVoice()


def caller_track(voice: CpuVoice, lines: list[tuple[float, str]], total_s: float = 9.0) -> np.ndarray:
    """Silence with the synthesized `text` starting at each offset (seconds after the session starts)."""
    track = np.zeros(int(total_s * MIC_RATE), dtype=np.int16)
    for at, text in lines:
        speech = soxr.resample(voice.synthesize(text), AGENT_RATE, MIC_RATE).astype(np.int16)
        i = int(at * MIC_RATE)
        track[i : i + len(speech)] = speech[: len(track) - i]
    return track


async def agent_audio() -> AsyncIterator[rtc.AudioFrame]:
    """The agent's 'speech': a quiet tone; what it sounds like does not matter to turn taking."""
    n = AGENT_RATE // 50
    t = np.arange(int(AGENT_SPEECH_S * AGENT_RATE)) / AGENT_RATE
    pcm = (0.1 * np.sin(2 * np.pi * 220 * t) * 32767).astype(np.int16)
    for i in range(0, len(pcm), n):
        yield rtc.AudioFrame(pcm[i : i + n].tobytes(), AGENT_RATE, 1, len(pcm[i : i + n]))


class RecordingAgent(Agent):
    def __init__(self, setup) -> None:  # type: ignore[no-untyped-def]
        super().__init__(instructions="test agent")
        self.setup = setup
        self.user_turns: list[str] = []

    async def stt_node(self, audio, model_settings):  # type: ignore[no-untyped-def]
        async for ev in self.setup.hooks.stt_node(self, audio, model_settings):
            yield ev

    async def on_user_turn_completed(self, turn_ctx, new_message) -> None:  # type: ignore[no-untyped-def]
        self.user_turns.append(new_message.text_content or "")
        raise StopResponse()


async def run_call(
    track: np.ndarray,
    script: list[ScriptLine],
    options: TurnOptions,
    duck_db: float | None = None,
    hold_s: float | None = None,
) -> dict:
    setup = build_turn_handling(options, Profile.WEB)
    session = AgentSession(stt=ScriptedSTT(script), **setup.session_kwargs)
    duck = None if duck_db is None else Duck(duck_db, hold_s, setup.hooks)
    setup.attach(session)
    false_interruptions: list[bool] = []
    user_states: list[str] = []
    session.on("user_state_changed", lambda ev: user_states.append(ev.new_state))
    session.on("agent_false_interruption", lambda ev: false_interruptions.append(ev.resumed))
    said: list[SpeechHandle] = []  # the reply's handle, once it exists
    reply_ended_at_final: list[bool] = []

    @session.on("user_input_transcribed")
    def _on_transcript(ev) -> None:  # type: ignore[no-untyped-def]
        if ev.is_final and said:
            reply_ended_at_final.append(said[0].interrupted)

    mic = ScriptedMic(track)
    speaker = PacedSpeaker(
        duck=duck,
        caller_speaking=lambda: session.user_state == "speaking",
    )
    session.input.audio = mic
    session.output.audio = speaker
    agent = RecordingAgent(setup)
    await session.start(agent)
    try:
        handle = session.say("Let me read you the full list of our opening hours.", audio=agent_audio())
        said.append(handle)
        await asyncio.wait_for(handle.wait_for_playout(), timeout=20)
        await asyncio.sleep(1.0)  # let a trailing user turn commit
        return {
            "interrupted": handle.interrupted,
            "finished": list(speaker.finished),
            "pauses": speaker.pauses,
            "resumes": speaker.resumes,
            "paused_s": speaker.paused_s,
            "ducks": speaker.ducks,
            "ducked_s": speaker.ducked_s,
            "first_duck": speaker.first_duck,
            "first_stop": speaker.first_stop,
            "user_turns": list(agent.user_turns),
            "ignored": setup.hooks.backchannels_ignored,
            "false_interruptions": false_interruptions,
            "user_states": user_states,
            "reply_ended_at_final": reply_ended_at_final,
            "agent_line": setup.hooks.agent_line,
        }
    finally:
        await session.aclose()
        await speaker.aclose()


async def test_backchannels_do_not_interrupt_the_agent(voice: CpuVoice) -> None:
    track = caller_track(voice, [(1.2, "Yeah."), (2.6, "Okay.")])
    script = [ScriptLine("yeah", "Yeah."), ScriptLine("okay", "Okay.")]
    r = await run_call(track, script, TurnOptions())
    assert not r["interrupted"]
    # the caller's voice ducks the agent at once (barge-in within 300 ms); each backchannel resumes it
    assert r["resumes"] >= 1 and r["false_interruptions"] and all(r["false_interruptions"])
    assert r["finished"][-1][1] is False and r["finished"][-1][0] == pytest.approx(AGENT_SPEECH_S, abs=0.3)
    assert r["user_turns"] == []
    assert r["ignored"] == 2
    # the whole reply reached the chat context: the caller's next turn is scored after it
    assert r["agent_line"] == "Let me read you the full list of our opening hours."


async def test_a_ducked_reply_has_no_hole_where_the_caller_backchannelled(voice: CpuVoice) -> None:
    # the worker's room output ducks instead of pausing (worker/livekit_patches.py); the speaker does the same
    track = caller_track(voice, [(1.2, "Yeah."), (2.6, "Okay.")])
    script = [ScriptLine("yeah", "Yeah."), ScriptLine("okay", "Okay.")]
    r = await run_call(track, script, TurnOptions(), duck_db=-18.0)
    assert not r["interrupted"] and r["user_turns"] == []
    assert r["ducks"] >= 1 and r["ducked_s"] > 0.1  # the caller's voice ducked it ...
    assert r["paused_s"] == 0.0  # ... and never silenced it
    assert r["finished"][-1] == (pytest.approx(AGENT_SPEECH_S, abs=0.3), False)


async def test_a_ducked_reply_is_still_cut_by_a_barge_in(voice: CpuVoice) -> None:
    track = caller_track(voice, [(1.2, "Wait, stop.")])
    r = await run_call(track, [ScriptLine("wait", "Wait, stop.")], TurnOptions(), duck_db=-18.0)
    assert r["interrupted"] and r["user_turns"] == ["Wait, stop."]
    assert r["first_duck"] is not None and r["first_stop"] is not None
    assert r["first_duck"] < r["first_stop"]  # ducked at the voice, cut at the words
    assert r["finished"][-1][1] is True


async def test_a_caller_who_talks_on_is_silenced_unless_their_words_are_a_backchannel(
    voice: CpuVoice,
) -> None:
    # past the hold, words that read as listening keep the reply on, ducked; words that take the floor
    # silence it at their first interim, before their FINAL comes
    track = caller_track(voice, [(1.2, "Okay, sure, alright.")])
    script = [ScriptLine("okay sure", "Okay, sure, alright.", final_after_s=0.8)]
    listening = await run_call(track, script, TurnOptions(), duck_db=-18.0, hold_s=0.4)
    assert not listening["interrupted"] and listening["paused_s"] == 0.0 and listening["ducks"] >= 1
    track = caller_track(voice, [(1.2, "Wait, I need to stop you there.")])
    script = [ScriptLine("wait i need", "Wait, I need to stop you there.", final_after_s=0.8)]
    taking = await run_call(track, script, TurnOptions(), duck_db=-18.0, hold_s=5.0)
    assert taking["interrupted"]
    assert taking["first_stop"] - taking["first_duck"] < 1.0  # the interim, not the 5 s hold


async def test_same_words_interrupt_when_the_filter_is_off(voice: CpuVoice) -> None:
    # control: the policy, not the script, is what keeps the agent talking
    track = caller_track(voice, [(1.2, "Yeah.")])
    r = await run_call(track, [ScriptLine("yeah", "Yeah.")], TurnOptions(ignore_backchannels=False))
    assert r["interrupted"]
    assert r["user_turns"] == ["Yeah."]


async def test_barge_in_stops_the_agent_and_keeps_the_words(voice: CpuVoice) -> None:
    track = caller_track(voice, [(1.2, "Wait, stop.")])
    r = await run_call(track, [ScriptLine("wait", "Wait, stop.")], TurnOptions())
    assert r["interrupted"]
    assert r["finished"][-1][1] is True and r["finished"][-1][0] < 2.9
    assert r["user_turns"] == ["Wait, stop."]


async def test_a_barge_in_ends_the_paused_reply_before_the_session_hears_its_words(voice: CpuVoice) -> None:
    # livekit-agents only pauses the reply on the caller's voice; left to itself it interrupts the reply in a
    # task after the FINAL, so the turn's preflight could not start the next reply (session_hooks.py)
    track = caller_track(voice, [(1.2, "Could we do Thursday instead?")])
    script = [ScriptLine("could we", "Could we do Thursday instead?")]
    r = await run_call(track, script, TurnOptions())
    assert r["reply_ended_at_final"] == [True]
    assert r["interrupted"] and r["false_interruptions"] == []
    assert r["user_turns"] == ["Could we do Thursday instead?"]


async def test_a_final_that_comes_late_still_ends_the_reply_it_paused(voice: CpuVoice) -> None:
    # a busy host: the recogniser's FINAL comes 1.6 s after the caller stopped, past the 1 s after which the
    # agent used to resume over them; the reply waits for it (up to resume_ceiling_s) and the words decide
    track = caller_track(voice, [(1.2, "Could we do Thursday instead?")])
    script = [ScriptLine("could we", "Could we do Thursday instead?", final_after_s=1.6)]
    r = await run_call(track, script, TurnOptions())
    assert r["false_interruptions"] == [], "the agent resumed over a caller it had not read yet"
    assert r["interrupted"]
    assert r["user_turns"] == ["Could we do Thursday instead?"]


async def test_a_repeated_word_kept_once_ends_the_paused_reply(voice: CpuVoice) -> None:
    # "Wait, wait." makes Whisper loop on the word and the guard keeps it once ("Wait.", whisper/guard.py):
    # one settled word over the paused reply is a barge-in like a sentence
    track = caller_track(voice, [(1.2, "Wait, wait.")])
    r = await run_call(track, [ScriptLine("wait", "Wait.")], TurnOptions())
    assert r["reply_ended_at_final"] == [True]
    assert r["interrupted"] and r["false_interruptions"] == []
    assert r["user_turns"] == ["Wait."]


async def test_background_voice_without_words_does_not_cut_the_greeting(voice: CpuVoice) -> None:
    # reversed speech: the VAD hears a voice (a TV, a colleague) but the STT gets no words out of it
    speech = caller_track(voice, [(0.0, "I would like to hear about the opening hours please.")], 3.0)
    track = np.zeros(int(9.0 * MIC_RATE), dtype=np.int16)
    track[int(1.2 * MIC_RATE) : int(4.2 * MIC_RATE)] = speech[::-1]
    r = await run_call(track, [ScriptLine("", "")], TurnOptions())
    assert "speaking" in r["user_states"]  # the VAD did fire: the policy, not the VAD, kept the agent talking
    assert not r["interrupted"] and r["resumes"] >= 1  # ducked for the voice, resumed: no words
    assert r["finished"][-1][1] is False
    assert r["user_turns"] == []


async def test_false_interruption_resumes_the_agent(voice: CpuVoice) -> None:
    # words appear (the agent pauses) but the utterance turns out to be a backchannel: resume, not restart
    track = caller_track(voice, [(1.2, "Yeah, right. Okay.")])
    r = await run_call(track, [ScriptLine("so the", "Yeah, right.")], TurnOptions())
    assert r["pauses"] >= 1 and r["resumes"] >= 1
    assert r["false_interruptions"] and all(r["false_interruptions"])  # every pause taken back
    assert not r["interrupted"]
    assert r["finished"][-1][1] is False and r["finished"][-1][0] == pytest.approx(AGENT_SPEECH_S, abs=0.3)
    assert r["user_turns"] == []
