"""The engine end to end in-process: real frame assembly, windows, batcher and SNAC; torch or scripted ids."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.core import EngineFull, EngineOptions, OrpheusEngine
from plugins.orpheus.engine.factory import EngineConfig, build_engine
from plugins.orpheus.engine.snac_decoder import SnacDecoder, load_snac
from plugins.orpheus.engine.text import TextError, TextOptions
from tests.orpheus.scripted import ScriptedBackend, frame_ids, random_frames

NO_GATE = EngineOptions(trim_leading_silence=False)


class Collect:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.events: list[dict[str, Any]] = []
        self.done = asyncio.Event()
        self.first = asyncio.Event()

    def on_audio(self, pcm: bytes) -> None:
        self.chunks.append(pcm)

    def on_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        if event["type"] == "first_audio":
            self.first.set()
        if event["type"] in ("done", "error"):
            self.done.set()

    @property
    def samples(self) -> int:
        return sum(len(c) for c in self.chunks) // 2

    @property
    def final(self) -> dict[str, Any]:
        return self.events[-1]


def scripted_engine(
    test_model: Path, script: list[int], options: EngineOptions = NO_GATE, **kw: Any
) -> OrpheusEngine:
    return OrpheusEngine(ScriptedBackend(script, **kw), SnacDecoder(load_snac(test_model / "snac")), options)


async def test_exact_frames_out_bad_tokens_resynced_and_only_128258_stops(test_model: Path) -> None:
    script = [
        *random_frames(3, seed=1),
        *[ids.PAD, 49158, ids.EOT],  # junk and wrong stop ids: ignored
        *random_frames(2, seed=2)[:5],  # a cut frame: dropped, no drift
        *random_frames(4, seed=3),
        ids.END_OF_SPEECH,
        *random_frames(5, seed=4),  # nothing after the stop
    ]
    eng = scripted_engine(test_model, script)
    await eng.start()
    sink = Collect()
    s = eng.open_stream(sink)
    s.push_text("Hello there, this is a test.")
    s.end()
    await asyncio.wait_for(sink.done.wait(), 30)
    assert sink.final["type"] == "done" and sink.final["reason"] == "completed"
    assert sink.final["frames"] == 7
    assert sink.samples == 7 * ids.FRAME_SAMPLES, "every frame exactly once, none after the stop"
    assert sink.final["bad_tokens"] >= 4 and sink.final["dropped_partial_frames"] == 1
    assert [e["type"] for e in sink.events] == ["first_audio", "mark", "done"]  # end() is a flush too
    await eng.close()


async def test_a_mark_follows_the_last_audio_of_each_flush(test_model: Path) -> None:
    """Client pushes a piece and flushes, twice: mark 1 comes once piece 1's audio is all out, mark 2 after
    piece 2's; a client that loses the engine between them knows piece 1 was heard in full."""
    eng = scripted_engine(test_model, [*random_frames(3, seed=5), ids.END_OF_SPEECH])
    await eng.start()
    sink = Collect()
    marks: list[tuple[int, int]] = []  # (flushes, samples sent by then)
    on_event = sink.on_event

    def note(event: dict[str, Any]) -> None:
        if event["type"] == "mark":
            marks.append((event["flushes"], sink.samples))
        on_event(event)

    sink.on_event = note  # type: ignore[method-assign]
    s = eng.open_stream(sink)
    s.push_text("The first piece, ")
    s.flush()
    s.push_text("and the second piece.")
    s.flush()
    s.end()
    await asyncio.wait_for(sink.done.wait(), 30)
    per_piece = 3 * ids.FRAME_SAMPLES
    assert marks == [(1, per_piece), (2, 2 * per_piece), (3, 2 * per_piece)]  # the end's empty flush: 3
    assert sink.final["type"] == "done"
    await eng.close()


async def test_short_utterances_are_not_silent(test_model: Path) -> None:
    for n in (1, 2, 3):
        eng = scripted_engine(test_model, [*random_frames(n), ids.END_OF_SPEECH])
        await eng.start()
        pcm = await eng.synthesize("Hi there.")
        assert pcm.size == n * ids.FRAME_SAMPLES
        await eng.close()


async def test_token_loop_is_cut(test_model: Path) -> None:
    loop = frame_ids([1, 2, 3, 4, 5, 6, 7]) + frame_ids([9, 9, 9, 9, 9, 9, 9])
    eng = scripted_engine(test_model, random_frames(5) + loop * 100, replace(NO_GATE, loop_frames=12))
    await eng.start()
    sink = Collect()
    s = eng.open_stream(sink)
    s.push_text("Hello there my friend.")
    s.end()
    await asyncio.wait_for(sink.done.wait(), 30)
    assert sink.final["loops_cut"] == 1
    assert sink.final["frames"] < 5 + 20
    await eng.close()


async def test_streams_queue_during_warm_up_and_admission_is_limited(test_model: Path) -> None:
    eng = scripted_engine(test_model, [*random_frames(4), ids.END_OF_SPEECH], replace(NO_GATE, max_streams=2))
    sinks = [Collect(), Collect()]
    streams = [eng.open_stream(k) for k in sinks]  # before start(): accepted, waiting for the models
    with pytest.raises(EngineFull, match="engine full: 2/2"):
        eng.open_stream(Collect())
    with pytest.raises(TextError, match="unknown voice"):
        eng.open_stream(Collect(), voice="nobody")
    for s in streams:
        s.push_text("Hello there friend.")
        s.end()
    await asyncio.sleep(0.05)
    assert not any(k.chunks for k in sinks)
    await eng.start()
    await asyncio.wait_for(asyncio.gather(*(k.done.wait() for k in sinks)), 30)
    assert all(k.samples == 4 * ids.FRAME_SAMPLES for k in sinks)
    assert eng.capacity()["active_streams"] == 0
    eng.open_stream(Collect())  # room again
    await eng.close()


async def test_cancel_stops_generation_at_once(test_model: Path) -> None:
    eng = scripted_engine(test_model, [*random_frames(400), ids.END_OF_SPEECH], step_s=0.01)
    await eng.start()
    sink = Collect()
    s = eng.open_stream(sink)
    s.push_text("A long sentence that would take a while to say.")
    s.flush()
    await asyncio.wait_for(sink.first.wait(), 30)
    s.cancel()
    assert eng.backend.active == 0
    assert sink.final == {"type": "done", "reason": "cancelled"}
    n = len(sink.chunks)
    await asyncio.sleep(0.1)
    assert len(sink.chunks) == n, "no audio after cancel"
    for _ in range(100):  # a window already in SNAC's hands frees its slot when that decode returns
        if len(eng._free) == len(eng._utt):
            break
        await asyncio.sleep(0.05)
    assert len(eng._free) == len(eng._utt), "every slot back in the pool"
    await eng.close()


@pytest.mark.slow
async def test_torch_backend_concurrent_streams_and_streamed_text(test_model: Path) -> None:
    short = TextOptions(words_per_second_min=8.0, max_tokens_margin_s=0.3)  # random weights never stop
    cfg = EngineConfig.for_test_model(test_model, engine=EngineOptions(max_streams=4, text=short))
    eng = build_engine(cfg)
    await eng.start()
    sinks = [Collect() for _ in range(4)]
    streams = [eng.open_stream(k, voice=v) for k, v in zip(sinks, ("tara", "leo", "zoe", "dan"), strict=True)]
    for i, s in enumerate(streams):
        for piece in ("Hello there, ", f"stream {i}. ", "How are", " you <laugh> today?"):
            s.push_text(piece)
        s.end()
    await asyncio.wait_for(asyncio.gather(*(k.done.wait() for k in sinks)), 120)
    for k in sinks:
        assert k.final["type"] == "done" and k.final["reason"] == "completed", k.final
        assert k.final["utterances"] >= 2
        assert k.events[0]["type"] == "first_audio" and k.events[0]["ttfb_ms"] > 0
        # samples = frames · 2048 minus what the leading gate trimmed
        trimmed = round(k.final["trimmed_ms"] * 24)
        assert abs(k.samples + trimmed - k.final["frames"] * ids.FRAME_SAMPLES) <= 24
        pcm = np.frombuffer(b"".join(k.chunks), dtype=np.int16)
        assert pcm.std() > 0
    assert eng.tokens_total >= 7 * sum(k.final["frames"] for k in sinks)
    await eng.close()
