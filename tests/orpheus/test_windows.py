"""Windowed SNAC decode vs full decode: exact tiling, first audio at 21 tokens, seams, tail, leading gate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from plugins.orpheus.engine import ids
from plugins.orpheus.engine.snac_decoder import SnacDecoder, full_decode, load_snac
from plugins.orpheus.engine.windows import GateOptions, LeadingSilenceGate, plan_window


def stream_windows(n: int, arrival: list[int], want: list[int] | None = None) -> list:  # type: ignore[type-arg]
    """Simulate frames arriving (cumulative counts) with the engine's planning; return windows in order."""
    out, emitted, i = [], 0, 0
    avail = 0
    while True:
        finished = avail >= n
        w = plan_window(emitted, avail, finished, max_emit=(want[i % len(want)] if want else 4))
        i += 1
        if w is not None:
            out.append(w)
            emitted = w.emit_to
            continue
        if finished:
            return out
        avail = min(n, arrival.pop(0) if arrival else n)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 9, 30])
@pytest.mark.parametrize("pattern", ["one_by_one", "bursts", "all_at_once"])
def test_windows_tile_every_frame_exactly_once(n: int, pattern: str) -> None:
    arrival = {"one_by_one": list(range(1, n + 1)), "bursts": list(range(3, n + 3, 3)), "all_at_once": [n]}[
        pattern
    ]
    wins = stream_windows(n, list(arrival), want=[1, 4, 2, 3])
    emitted = [f for w in wins for f in range(w.emit_from, w.emit_to)]
    assert emitted == list(range(n)), "no frame dropped or repeated"
    for w in wins:
        assert w.start == max(0, w.emit_from - 2), "two frames of left context (or the exact left edge)"
        assert w.frames <= 8
        assert w.end == n or w.end - w.emit_to == 2, "two frames of look-ahead unless it is the exact tail"


def test_first_audio_after_three_frames_from_frame_zero() -> None:
    assert plan_window(0, 2, finished=False) is None
    w = plan_window(0, 3, finished=False)
    assert w is not None and (w.start, w.end, w.emit_from, w.emit_to) == (0, 3, 0, 1)
    assert 3 * ids.FRAME_TOKENS == 21
    w = plan_window(0, 2, finished=True)  # a 2-frame utterance is not silent
    assert w is not None and (w.emit_from, w.emit_to) == (0, 2)


@pytest.fixture(scope="module")
def snac(test_model: Path):  # type: ignore[no-untyped-def]
    return load_snac(test_model / "snac")


def test_windowed_decode_matches_full_decode(snac) -> None:  # type: ignore[no-untyped-def]
    """Noise blocks are off in the test model, so the only differences are seams and int16 rounding."""
    dec = SnacDecoder(snac)
    rng = np.random.default_rng(7)
    n = 16
    frames = rng.integers(0, 4096, (n, 7)).astype(np.int16)
    ref = full_decode(snac, frames)
    wins = stream_windows(n, list(range(1, n + 1)), want=[1, 2, 4])
    pcm = dec.decode([frames[w.start : w.end] for w in wins])
    parts = []
    for w, p in zip(wins, pcm, strict=True):
        assert isinstance(p, np.ndarray) and p.dtype == np.int16 and p.size == w.frames * ids.FRAME_SAMPLES
        parts.append(p[(w.emit_from - w.start) * 2048 : (w.emit_to - w.start) * 2048])
    out = np.concatenate(parts).astype(np.float32) / 32767.0
    assert out.size == ref.size == n * ids.FRAME_SAMPLES
    rms = float(np.sqrt((ref**2).mean()))
    err = float(np.sqrt(((out - ref) ** 2).mean())) / rms * 100
    assert err < 0.05, f"windowed decode differs from full decode by {err:.4f} % RMS"
    # the window that starts at frame 0 is exact at the left edge; the tail window exact at the end
    first = full_decode(snac, frames[:3])[:2048]
    assert np.abs(first - ref[:2048]).max() < 2e-3 * max(1e-6, float(np.abs(ref).max()))


def test_one_bad_window_never_fails_the_batch(snac) -> None:  # type: ignore[no-untyped-def]
    dec = SnacDecoder(snac)
    good = np.zeros((3, 7), dtype=np.int16)
    bad = good.copy()
    bad[1, 2] = 4096
    out = dec.decode([good, bad, good[:2], np.zeros((0, 7), dtype=np.int16)])
    assert isinstance(out[0], np.ndarray) and isinstance(out[2], np.ndarray)
    assert isinstance(out[1], Exception) and isinstance(out[3], Exception)


def test_leading_silence_is_trimmed_with_pre_pad() -> None:
    gate = LeadingSilenceGate(24000, GateOptions(threshold_dbfs=-40, pre_pad_ms=20, max_trim_ms=1000))
    silence = np.zeros(2048 * 3, dtype=np.int16)
    voice = (np.sin(np.arange(2048) * 0.1) * 8000).astype(np.int16)
    assert gate.process(silence).size == 0
    out = gate.process(np.concatenate([np.zeros(1000, dtype=np.int16), voice]))
    pre_pad = 480
    assert gate.open and out.size == voice.size + pre_pad + (1000 - 1000 // 240 * 240)
    assert np.array_equal(out[-voice.size :], voice)
    assert gate.process(silence).size == silence.size  # once open, everything passes


def test_gate_gives_up_after_max_trim() -> None:
    gate = LeadingSilenceGate(24000, GateOptions(max_trim_ms=100))
    quiet = np.zeros(2048, dtype=np.int16)
    assert gate.process(quiet).size == 0 and not gate.open
    out = gate.process(quiet)  # 2 × 2048 samples > 100 ms: the gate opens and lets audio through
    assert gate.open and out.size >= 2048
    assert gate.trimmed <= 2400


@pytest.mark.gpu
def test_cuda_graph_decode_matches_cpu(snac) -> None:  # type: ignore[no-untyped-def]
    from plugins.orpheus.engine.snac_decoder import DecoderOptions

    cpu = SnacDecoder(snac)
    gpu = SnacDecoder(load_snac_copy(snac), DecoderOptions(device="cuda", cuda_graphs=True, max_batch=8))
    gpu.warm_up()
    rng = np.random.default_rng(3)
    windows = [rng.integers(0, 4096, (n, 7)).astype(np.int16) for n in (1, 3, 5, 8, 8, 2)]
    for a, b in zip(cpu.decode(windows), gpu.decode(windows), strict=True):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
        assert np.abs(a.astype(np.int32) - b.astype(np.int32)).max() <= 64  # TF32/cuDNN vs CPU rounding


def load_snac_copy(model):  # type: ignore[no-untyped-def]
    import copy

    return copy.deepcopy(model)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_snac_tracks_float32(snac, dtype: str) -> None:  # type: ignore[no-untyped-def]
    """SNAC at its share: the 8-frame window decoded in bf16/fp16 against fp32 (random weights), RMS error
    relative to the fp32 PCM's RMS under 5 %."""
    from plugins.orpheus.engine.snac_decoder import DecoderOptions

    rng = np.random.default_rng(4)
    windows = [rng.integers(0, 4096, (8, 7)).astype(np.int16) for _ in range(3)]
    ref = SnacDecoder(load_snac_copy(snac)).decode(windows)
    low = SnacDecoder(load_snac_copy(snac), DecoderOptions(dtype=dtype)).decode(windows)
    for a, b in zip(ref, low, strict=True):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
        err = np.sqrt(np.mean((a.astype(np.float64) - b) ** 2)) / np.sqrt(np.mean(a.astype(np.float64) ** 2))
        assert err < 0.05, err
    with pytest.raises(ValueError, match="dtype"):
        SnacDecoder(load_snac_copy(snac), DecoderOptions(dtype="int8"))
