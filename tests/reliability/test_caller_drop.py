"""The caller hangs up mid-sentence: the session ends cleanly and nothing is left running."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchmarks.call import build_parley
from simulator.audio_io import Loudspeaker, ScriptedMic
from simulator.offline import load_turn
from tests.conftest import SHORT_REPLIES
from worker.settings import load_settings

pytestmark = pytest.mark.slow


async def test_hang_up_mid_utterance_leaves_no_streams_or_tasks(
    embedded_llm_url: str, speech_audio: Path
) -> None:
    session, agent, comp = build_parley(load_settings(**SHORT_REPLIES), embedded_llm_url)
    baseline = {t for t in asyncio.all_tasks() if not t.done()}
    mic, speaker = ScriptedMic(), Loudspeaker()
    session.input.audio = mic
    session.output.audio = speaker
    await session.start(agent, record=False)
    await asyncio.sleep(1.0)  # greeting plays
    assert speaker.track.first_voiced_after(0) is not None, "the agent never greeted the caller"
    pcm = load_turn(speech_audio / "conversation" / "c1.wav")
    mic.play(pcm[: len(pcm) // 2])  # half a sentence, then the line goes dead
    await asyncio.sleep(1.5)
    mic.close()
    await asyncio.wait_for(session.aclose(), 10)
    await speaker.aclose()

    def left() -> list[asyncio.Task[object]]:
        return [
            t
            for t in asyncio.all_tasks()
            if not t.done() and t not in baseline and t is not asyncio.current_task()
        ]

    # an end-of-turn score asked just before the hang-up may still be in flight (its answer is cached for
    # the process's next call); it is bounded by the scorer's HTTP timeout. A task still there after that
    # never ends: a leak.
    await asyncio.sleep(1.0)  # what the close sets off has started by now
    bound = comp.eot_lm.opts.request_timeout_s if comp.eot_lm is not None else 0.0
    for _ in range(int(bound / 0.1)):
        if not left():
            break
        await asyncio.sleep(0.1)
    assert comp.tts.active_streams == 0
    assert not left(), [t.get_name() for t in left()]


async def test_hang_up_while_the_agent_speaks(embedded_llm_url: str, speech_audio: Path) -> None:
    session, agent, comp = build_parley(load_settings(**SHORT_REPLIES), embedded_llm_url)
    mic, speaker = ScriptedMic(), Loudspeaker()
    session.input.audio = mic
    session.output.audio = speaker
    await session.start(agent, record=False)
    await asyncio.sleep(1.0)
    await mic.play(load_turn(speech_audio / "conversation" / "c1.wav"))
    for _ in range(300):  # until the reply is being spoken
        if speaker.track.first_voiced_after(speaker.segment_starts[-1] if speaker.segment_starts else 0) and (
            len(speaker.segment_starts) >= 2
        ):
            break
        await asyncio.sleep(0.05)
    assert len(speaker.segment_starts) >= 2, "the agent never started its reply before the hang-up"
    mic.close()
    await asyncio.wait_for(session.aclose(), 10)
    await speaker.aclose()
    await asyncio.sleep(0.5)
    assert comp.tts.active_streams == 0
