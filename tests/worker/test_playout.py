"""The playout clock, and the CPU voice speaking slow LLM text before its clause ends."""

from __future__ import annotations

import asyncio

from plugins.cpu_voice import CpuVoiceTTS
from plugins.playout import PlayoutClock, PlayoutOptions


def test_clock_counts_queued_audio_and_synthesis_time() -> None:
    clock = PlayoutClock(PlayoutOptions(margin_s=0.1, first_synth_s=0.2))
    assert not clock.running_dry(now=100.0)  # nothing sent: the first piece has its own rule
    clock.sent(1.0, now=100.0)
    clock.sent(0.5, now=100.2)  # queued behind the first second
    assert clock.dry_at == 101.5
    assert not clock.running_dry(now=101.1)
    assert clock.running_dry(now=101.2)  # 0.3 s left = synthesis 0.2 + margin 0.1
    assert clock.running_dry(now=102.0)  # already dry: still cut at once
    clock.sent(1.0, now=103.0)  # after a gap, audio plays from now
    assert clock.dry_at == 104.0


def test_one_slow_synthesis_raises_the_estimate_at_once_and_decays() -> None:
    clock = PlayoutClock(PlayoutOptions(first_synth_s=0.1))
    clock.synthesized(0.5)
    assert clock.synth_s == 0.5
    for _ in range(10):
        clock.synthesized(0.1)
    assert 0.1 <= clock.synth_s < 0.15


async def test_slow_llm_text_is_spoken_before_its_clause_ends() -> None:
    tts = CpuVoiceTTS()
    tts.prewarm()
    pieces: list[str] = []
    tts.piece_listeners.append(pieces.append)
    text = "let me look at the calendar for the first open morning next week and then"
    words = text.split(" ")
    stream = tts.stream()

    async def slow_llm() -> None:
        stream.push_text("Sure, I can help. ")
        for w in words:
            await asyncio.sleep(0.2)  # ~5 words/s arriving, no clause end for ~3 s
            stream.push_text(w + " ")
        stream.push_text("call you back.")
        stream.end_input()

    feeder = asyncio.create_task(slow_llm())
    frames = 0
    async for _audio in stream:
        frames += 1
    await feeder
    await stream.aclose()
    assert frames > 0
    assert pieces[0] == "Sure, I can help."
    # the words already written went out before the clause was complete, not as one piece at the end
    assert len(pieces) >= 3
    assert not pieces[1].endswith((".", ",", "!", "?"))
    assert " ".join(pieces).split() == ["Sure,", "I", "can", "help.", *words, "call", "you", "back."]
