"""What an outbound call hears from the answer on, made for tests: lines the CPU voice says, beeps, quiet,
joined and put through a G.711 line at 8 kHz with a little line noise."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from simulator.call_script import RATE, render_line
from simulator.phone_line import phone_line

PHONE = 8000


@cache
def voice() -> Any:
    from plugins.cpu_voice.voice import CpuVoice

    return CpuVoice(voice="heart")


def said(text: str) -> np.ndarray:
    """The line at 16 kHz in [-1, 1], no silence around it, at about -20 dBFS."""
    pcm = render_line(voice(), text, 0.0, 0.0).astype(np.float32) / 32768.0
    return pcm * 0.1 / (float(np.sqrt(np.mean(pcm**2))) + 1e-9)


def beep(hz: float, seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.1 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def quiet(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), np.float32)


def answer(*pieces: np.ndarray, snr_db: float = 25.0) -> tuple[np.ndarray, list[float]]:
    """What the agent hears from the answer on: the pieces with line noise, through a G.711 line at 8 kHz;
    and the time each piece ends."""
    audio = np.concatenate(pieces)
    noise = np.random.default_rng(3).standard_normal(len(audio)).astype(np.float32)
    audio = audio + noise * 0.1 * 10 ** (-snr_db / 20)
    heard = phone_line(audio, RATE)[:: RATE // PHONE]  # phone_line hands back 16 kHz of an 8 kHz line
    return heard, list(np.cumsum([len(p) / RATE for p in pieces]))


SIT = ((913.8, 0.274), (1370.6, 0.274), (1776.7, 0.38))
"""A special information tone (ITU-T E.180): before a carrier's "not in service" recording."""


def sit() -> np.ndarray:
    return np.concatenate([beep(hz, seconds) for hz, seconds in SIT])
