"""The duck's gain: full level untouched, a change ramps over one frame, out-of-range levels refused."""

import numpy as np
import pytest
from livekit import rtc

from worker.duck import Duck, gain_of


def _frame(value: int = 10_000, n: int = 480) -> rtc.AudioFrame:
    return rtc.AudioFrame(np.full(n, value, np.int16).tobytes(), 24_000, 1, n)


def _pcm(frame: rtc.AudioFrame) -> np.ndarray:
    return np.frombuffer(frame.data, np.int16)


def test_full_level_passes_the_frame_through() -> None:
    frame = _frame()
    assert Duck(-18.0).apply(frame) is frame


def test_ducking_ramps_down_over_one_frame_then_holds() -> None:
    duck = Duck(-20.0)
    duck.set(True)
    ramp = _pcm(duck.apply(_frame()))
    assert ramp[0] == 10_000 and ramp[-1] == pytest.approx(1000, abs=2)
    assert np.all(np.diff(ramp.astype(int)) <= 0)  # no step, no click
    assert np.all(_pcm(duck.apply(_frame())) == pytest.approx(1000, abs=1))
    duck.set(False)
    up = _pcm(duck.apply(_frame()))
    assert up[0] == pytest.approx(1000, abs=2) and up[-1] == 10_000
    assert duck.apply(_frame()) is not None and not duck.ducked


def test_gain_and_level_range() -> None:
    assert gain_of(0.0) == 1.0 and gain_of(-20.0) == pytest.approx(0.1)
    for bad in (3.0, -80.0):
        with pytest.raises(ValueError, match="duck level"):
            Duck(bad)


async def test_a_caller_who_talks_on_past_the_hold_silences_the_reply() -> None:
    import asyncio

    calls: list[str] = []
    duck = Duck(-18.0, hold_s=0.05)
    duck.start(lambda: calls.append("silenced"), lambda: True)
    duck.start(lambda: calls.append("twice"), lambda: True)  # already ducked: one timer
    await asyncio.sleep(0.1)
    assert calls == ["silenced"] and duck.ducked

    listening = Duck(-18.0, hold_s=0.05)  # the caller's voice ended within the hold: a backchannel
    listening.start(lambda: calls.append("listener"), lambda: False)
    resumed = Duck(-18.0, hold_s=0.05)  # resumed within the hold
    resumed.start(lambda: calls.append("resumed"), lambda: True)
    resumed.stop()
    await asyncio.sleep(0.1)
    assert calls == ["silenced"] and listening.ducked and not resumed.ducked


async def test_words_that_take_the_floor_silence_a_ducked_reply_at_once() -> None:
    calls: list[str] = []
    duck = Duck(-18.0, hold_s=10.0)
    duck.silence_now()  # not ducked: nothing to silence
    duck.start(lambda: calls.append("silenced"), lambda: True)
    duck.silence_now()
    duck.silence_now()  # once
    assert calls == ["silenced"]


class _Reader:
    """The duck's view of the turn hooks, set by hand (turn_detection.TurnHooks implements it for real)."""

    def __init__(self) -> None:
        self.floor_listeners: list = []
        self.listening = False
        self.taken = False

    def heard_listening_since(self, t: float) -> bool:
        return self.listening

    def floor_taken(self) -> bool:
        return self.taken


async def test_the_caller_s_words_decide_what_the_hold_does() -> None:
    import asyncio

    calls: list[str] = []
    reader = _Reader()
    reader.listening = True  # "okay, sure" so far: still listening past the hold
    duck = Duck(-18.0, hold_s=0.05, reader=reader)
    duck.start(lambda: calls.append("listening"), lambda: True)
    await asyncio.sleep(0.1)
    assert calls == [] and duck.ducked
    for listener in reader.floor_listeners:  # then words that take the floor
        listener()
    assert calls == ["listening"]

    early = _Reader()
    early.taken = True  # the words came before the voice paused the reply
    Duck(-18.0, hold_s=10.0, reader=early).start(lambda: calls.append("early"), lambda: True)
    assert calls == ["listening", "early"]
