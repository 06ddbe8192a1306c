"""`benchmarks.machine_speed`: the timings a room benchmark records beside its figures, from real models."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import machine_speed


@pytest.mark.slow
def test_each_timing_comes_from_a_real_run_of_its_part() -> None:
    pcm = machine_speed._sentence()
    assert 2.0 < len(pcm) / 16000 < 5.0  # the 3 s sentence of the test speech, at 16 kHz
    decode = machine_speed.whisper_decode_ms(pcm.astype(np.float32) / 32768.0, runs=1)
    eot = machine_speed.audio_eot_ms(pcm, runs=2)
    cpu = machine_speed.cpu_ms(runs=1)
    assert decode is not None and eot is not None
    # ordered as the work is: a whole decode costs more than one v1-mini window on any machine
    assert decode > eot > 0.0 and cpu > 0.0
    silence = machine_speed.whisper_decode_ms(np.zeros(16000, dtype=np.float32), runs=1)
    assert silence is not None and silence > 0.0


def test_the_printed_line_names_what_was_measured_and_skips_what_was_not() -> None:
    speed = {
        "whisper_decode_ms": 512.4,
        "audio_eot_ms": None,
        "cpu_ms": 80.0,
        "cores": 2,
        "load_average_1m": 0.3,
    }
    line = machine_speed.describe(speed)
    assert line.startswith("machine speed: Whisper decode 512 ms, CPU workload 80 ms")
    assert "v1-mini" not in line and "2 cores" in line
