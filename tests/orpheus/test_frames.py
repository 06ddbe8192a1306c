"""Token → frame assembly: strict per-position range checks, resync, stop id, loops, vectorised steps."""

from __future__ import annotations

import numpy as np
import pytest

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.frames import REASON_LENGTH, REASON_LOOP, REASON_STOP, FrameAssembler


def frame_tokens(codes: list[int]) -> list[int]:
    return [ids.audio_id(p, c) for p, c in enumerate(codes)]


def feed(asm: FrameAssembler, slot: int, tokens: list[int]):  # type: ignore[no-untyped-def]
    res = None
    for t in tokens:
        res = asm.push(np.array([slot]), np.array([t]))
    return res


def test_token_mapping_and_codebook_levels() -> None:
    assert ids.audio_id(0, 0) == 128266 and ids.audio_id(6, 4095) == 128266 + 7 * 4096 - 1
    with pytest.raises(ValueError):
        ids.audio_id(0, 4096)
    frames = np.array([[0, 1, 2, 3, 4, 5, 6], [10, 11, 12, 13, 14, 15, 16]])
    l0, l1, l2 = ids.frames_to_codes(frames)
    assert l0.tolist() == [0, 10]
    assert l1.tolist() == [1, 4, 11, 14]
    assert l2.tolist() == [2, 3, 5, 6, 12, 13, 15, 16]


def test_frames_assembled_in_order() -> None:
    asm = FrameAssembler(4, 100)
    asm.open(1, 700)
    codes = [[7 * f + p for p in range(7)] for f in range(3)]
    feed(asm, 1, [t for c in codes for t in frame_tokens(c)])
    assert asm.nframes[1] == 3
    assert asm.codes(1, 0, 3).tolist() == codes


def test_code_4096_is_rejected_not_let_through() -> None:
    """The reference decoders' `> 4096` check let code 4096 into SNAC's embedding (a CUDA assert)."""
    asm = FrameAssembler(2, 100)
    asm.open(0, 700)
    toks = frame_tokens([1, 2, 3, 4, 5, 6, 7])
    toks[3] = ids.AUDIO_BASE + 4096 * 3 + 4096  # "code 4096" at position 3 == position 4, code 0
    feed(asm, 0, toks)
    assert asm.nframes[0] == 0 and asm.bad_tokens[0] >= 1
    feed(asm, 0, [ids.AUDIO_END])  # one past the last audio id
    assert asm.bad_tokens[0] >= 2
    feed(asm, 0, frame_tokens([9] * 7))
    assert asm.nframes[0] == 1 and int(asm.frames[0, 0].max()) < 4096


def test_bad_token_resyncs_without_drift() -> None:
    """A dropped code drops its partial frame; every later frame stays in phase."""
    asm = FrameAssembler(2, 100)
    asm.open(0, 700)
    good = [[f * 10 + p for p in range(7)] for f in range(4)]
    toks = frame_tokens(good[0]) + frame_tokens(good[1])[:3] + [ids.PAD, 42] + frame_tokens(good[1])[4:]
    toks += frame_tokens(good[2]) + frame_tokens(good[3])
    feed(asm, 0, toks)
    assert asm.nframes[0] == 3
    assert asm.codes(0, 0, 3).tolist() == [good[0], good[2], good[3]]
    assert asm.dropped_partials[0] == 1


def test_position_zero_token_restarts_a_frame() -> None:
    asm = FrameAssembler(2, 100)
    asm.open(0, 700)
    toks = frame_tokens([1] * 7)[:4] + frame_tokens([2] * 7)  # frame cut short, next frame starts cleanly
    feed(asm, 0, toks)
    assert asm.nframes[0] == 1 and asm.codes(0, 0, 1).tolist() == [[2] * 7]


def test_stop_only_on_128258() -> None:
    asm = FrameAssembler(2, 100)
    asm.open(0, 700)
    for wrong_stop in (49158, ids.EOT, ids.END_OF_AI, ids.END_OF_HUMAN, ids.PAD):
        res = feed(asm, 0, [wrong_stop])
        assert res.ended.size == 0 and asm.live[0]
    feed(asm, 0, frame_tokens([3] * 7))
    res = feed(asm, 0, [ids.END_OF_SPEECH])
    assert res.ended.tolist() == [0] and res.reasons.tolist() == [REASON_STOP]
    feed(asm, 0, frame_tokens([4] * 7))  # nothing after the stop is taken
    assert asm.nframes[0] == 1


def test_frame_budget_ends_stream() -> None:
    asm = FrameAssembler(2, 100)
    asm.open(0, 14)
    res = feed(asm, 0, frame_tokens([1, 2, 3, 4, 5, 6, 7]) + frame_tokens([7, 6, 5, 4, 3, 2, 1]))
    assert res.reasons.tolist() == [REASON_LENGTH] and asm.nframes[0] == 2


@pytest.mark.parametrize("period", [1, 2, 3])
def test_token_loop_detected(period: int) -> None:
    asm = FrameAssembler(2, 500, loop_frames=20)
    asm.open(0, 7 * 400)
    rng = np.random.default_rng(period)
    speech = [rng.integers(0, 4096, 7).tolist() for _ in range(30)]
    feed(asm, 0, [t for f in speech for t in frame_tokens(f)])
    assert asm.live[0], "varied frames are not a loop"
    cycle = [rng.integers(0, 4096, 7).tolist() for _ in range(period)]
    ended_at = None
    for i in range(60):
        res = feed(asm, 0, frame_tokens(cycle[i % period]))
        if res.ended.size:
            ended_at = i
            assert res.reasons.tolist() == [REASON_LOOP]
            break
    assert ended_at is not None and ended_at <= 20 + period + 1


def test_one_vectorised_step_for_many_streams_equals_per_stream_feeding() -> None:
    rng = np.random.default_rng(0)
    n, steps = 64, 7 * 12
    tokens = np.zeros((steps, n), dtype=np.int64)
    for s in range(n):
        seq = [t for _ in range(12) for t in frame_tokens(rng.integers(0, 4096, 7).tolist())]
        for k in rng.choice(len(seq), 3, replace=False):  # sprinkle bad tokens
            seq[k] = int(rng.choice([ids.PAD, ids.AUDIO_END, 5, ids.AUDIO_BASE + 4096 * ((k + 3) % 7)]))
        tokens[:, s] = seq
    batched, single = FrameAssembler(n, 50), FrameAssembler(n, 50)
    for s in range(n):
        batched.open(s, 7 * 50)
        single.open(s, 7 * 50)
    slots = np.arange(n)
    for t in range(0, steps, 2):  # two steps per push: a slot appears twice, order must be kept
        batched.push(np.concatenate([slots, slots]), np.concatenate([tokens[t], tokens[t + 1]]))
    for s in range(n):
        feed(single, s, tokens[:, s].tolist())
    assert np.array_equal(batched.nframes, single.nframes)
    assert np.array_equal(batched.frames, single.frames)
    assert np.array_equal(batched.bad_tokens, single.bad_tokens)


def test_tokens_for_closed_slots_are_ignored() -> None:
    asm = FrameAssembler(3, 10)
    asm.open(0, 70)
    asm.close(0)
    res = asm.push(np.array([0, 1]), np.array(frame_tokens([1] * 7)[:2]))
    assert res.gained.size == 0 and asm.nframes.sum() == 0
