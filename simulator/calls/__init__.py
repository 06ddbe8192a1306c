"""Scripted calls kept in the repository as text, rendered to audio by the CPU voice (deterministic: fixed
voice and seed), into the folder layout benchmarks.call plays: NN-name.wav (16 kHz mono) + turns.json.

    python -m simulator.calls reschedule --out out/calls/reschedule

A turn is `text`, or `parts` said with `gap_ms` of silence between them (a hesitation, a number read in
groups); `start`/`delay_ms` follow simulator/call_plan.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
CALLER_RATE = 16_000
LEAD_S = 0.2  # silence before and after each turn, as a microphone would give
TAIL_S = 0.3
PEAK = 10 ** (-3 / 20)


def spec_path(name: str) -> Path:
    path = HERE / f"{name}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in HERE.glob("*.json")))
        raise ValueError(f"no call {name!r} (known: {known})")
    return path


def _speak(voice: Any, text: str) -> np.ndarray:
    import soxr

    pcm24 = voice.synthesize(text).astype(np.float32) / 32768.0
    return np.asarray(soxr.resample(pcm24, voice.sample_rate, CALLER_RATE), np.float32)


def render(spec_file: Path, out: Path) -> Path:
    """Render a call spec into `out` (WAVs + turns.json) and return `out`."""
    import soundfile as sf

    from plugins.cpu_voice.voice import CpuVoice

    spec = json.loads(spec_file.read_text())
    voice = CpuVoice(voice=spec.get("voice", "heart"), seed=0)  # heart: the voice that ships offline
    out.mkdir(parents=True, exist_ok=True)
    turns = []
    for i, turn in enumerate(spec["turns"], start=1):
        parts = turn.get("parts") or [turn["text"]]
        gap = np.zeros(int(CALLER_RATE * turn.get("gap_ms", 0) / 1000), np.float32)
        audio: list[np.ndarray] = [np.zeros(int(CALLER_RATE * LEAD_S), np.float32)]
        for j, part in enumerate(parts):
            if j:
                audio.append(gap)
            audio.append(_speak(voice, part))
        audio.append(np.zeros(int(CALLER_RATE * TAIL_S), np.float32))
        pcm = np.concatenate(audio)
        pcm *= PEAK / max(float(np.abs(pcm).max()), 1e-6)  # peak −3 dBFS, like ../shared/audio
        name = f"{i:02d}-{turn['name']}.wav"
        sf.write(str(out / name), np.clip(pcm, -1, 1), CALLER_RATE, subtype="PCM_16")
        turns.append(
            {
                "file": name,
                "text": " ".join(parts),
                "start": turn.get("start", "after_reply"),
                "delay_ms": turn.get("delay_ms"),
                "expect": turn.get("expect", []),
            }
        )
    (out / "turns.json").write_text(json.dumps(turns, indent=1))
    return out
