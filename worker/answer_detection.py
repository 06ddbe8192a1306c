"""Who answered an outbound call: a person, or an answering machine whose beep says when to speak.

A person picks up with a short line ("Hello?", "Hi, this is Sam.") and then waits for the caller. A machine
plays a longer greeting and then a beep, and records what comes after the beep. So the detector listens
from the moment the call is answered and decides one of:

- `person`: a short greeting followed by a pause (the person is waiting): greet now.
- `silence`: nobody said anything for `initial_silence_s`: greet now (some people answer silently).
- `beep`: a steady tone ended: an answering machine is recording, leave the message now.
- `long_greeting`: a greeting too long for a person ended with no beep after `machine_silence_s`: greet
  (a person after all, or a machine without a beep, which records the greeting), unless its words are a
  voicemail greeting's (`sounds_like_voicemail`, read by the caller of `feed` from one decode of it): then the
  machine is recording, and the message is left (`voicemail_words`).

- `not_in_service`: the three rising tones of a special information tone (SIT) that precede a carrier's
  recording ("the number you have dialed is not in service"): hang up, leave nothing.

After a `person` or `silence` decision it keeps listening until the line has been quiet for `late_beep_s`:
a machine whose greeting pauses between sentences, or whose beep comes late, reads as a person at first,
and the caller of `feed` then stops its greeting and leaves the message when the beep comes.

Frame by frame (32 ms, 8 or 16 kHz): speech is Silero VAD's (the model LiveKit's plugin ships, run here
directly) or, without it, frame energy above an adaptive noise floor. A tone frame is one where a single
narrow peak between 350 and 3000 Hz holds nearly all of the band's power, holding its pitch from frame to
frame; a vowel spreads its power over several harmonics and glides.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from typing import Any, Literal

import numpy as np

AnswerKind = Literal["person", "silence", "beep", "long_greeting", "voicemail_words", "not_in_service"]


@dataclass(frozen=True)
class AnswerOptions:
    """Seconds of call audio after the answer; chosen on the answer corpus's dev split."""

    initial_silence_s: float = 2.5
    """Nobody speaks for this long after the answer: greet."""
    person_max_greeting_s: float = 2.2
    """A greeting with more speech than this (seconds) is a machine's until shown otherwise."""
    person_end_silence_s: float = 0.6
    """After a short greeting, this much silence means the person waits for us."""
    machine_silence_s: float = 1.5
    """After a long greeting, this much silence without a beep: greet anyway."""
    late_beep_s: float = 4.0
    """After deciding `person` or `silence`, listen for a beep until the line has been quiet this long."""
    min_speech_s: float = 0.15
    """Less speech than this (a click, a breath) does not count as someone speaking."""
    min_beep_s: float = 0.16
    """A steady tone at least this long is a beep."""
    beep_gap_s: float = 0.2
    """After a beep, wait this long for a second one (double beeps) before the machine is recording."""
    tone_purity: float = 0.95
    """Share of the 300-3000 Hz band's power in one narrow peak for a frame to start a tone."""
    tone_hold_purity: float = 0.9
    """The share that keeps a tone going at the same pitch (line noise dilutes a beep's frames)."""
    speech_margin_db: float = 9.0
    """A frame is loud (speech without the VAD, or a candidate tone) this far above the noise floor."""
    vad_threshold: float = 0.5
    """Silero's speech probability from which a frame is speech (LiveKit's activation threshold)."""

    def __post_init__(self) -> None:
        for name in (
            "initial_silence_s",
            "person_max_greeting_s",
            "person_end_silence_s",
            "machine_silence_s",
        ):
            if not 0.0 < getattr(self, name) <= 30.0:
                raise ValueError(f"{name} must be within (0, 30] seconds")
        if not 0.0 < self.tone_hold_purity <= self.tone_purity < 1.0:
            raise ValueError("tone purities must satisfy 0 < tone_hold_purity <= tone_purity < 1")
        if not 0.0 <= self.late_beep_s <= 30.0 or not 0.0 < self.min_beep_s <= 2.0:
            raise ValueError("late_beep_s must be within [0, 30] and min_beep_s within (0, 2] seconds")


@dataclass(frozen=True)
class AnswerDecision:
    kind: AnswerKind
    at_s: float
    """Seconds of call audio after the answer when the decision was made."""
    voiced_s: float
    """Seconds of speech heard before it (a beep's frames are not speech)."""
    beep_hz: float | None = None


VOICEMAIL_WORDS = {
    "en": re.compile(
        r"\b(leave\W+(\w+\W+){0,3}?(message|voicemail|name|number)"
        r"|(after|at) the (tone|beep)|record your message|voice ?mail|mailbox"
        r"|not available|unavailable|(can'?t|cannot|unable to) (talk|come to|take|answer|get to)"
        r"|you('ve| have) reached|missed your call|get back to you|away from (my|the|our) (desk|phone|office)"
        r"|not (at )?home)\b"
    ),
    "ko": re.compile(r"(메시지|음성 ?사서함|삐 소리|받을 수 없|연결이 되지 않|녹음)"),
}
"""What answering machines say and people picking up do not: a voicemail greeting names the message, the
tone, the mailbox, or that nobody can come to the phone."""


def sounds_like_voicemail(text: str, language: str = "en") -> bool:
    """Whether a greeting's words are an answering machine's."""
    pattern = VOICEMAIL_WORDS.get(language.split("-")[0].lower())
    return bool(pattern and pattern.search(text.lower()))


LOW_HZ, PEAK_LOW_HZ, HIGH_HZ = 300.0, 350.0, 3000.0  # below 350 Hz a line's filtered rumble piles up
FLOOR_WINDOW_S = 2.0
FLOOR_MIN_FRAMES = 3
MIN_LEVEL_DBFS = -55.0  # quieter than this is never speech, whatever the floor
BEEP_DRIFT_HZ = 30.0  # a beep holds its pitch to a bin or two; a vowel's strongest harmonic glides
NOISE_RATE = 0.1  # how fast the noise spectrum follows the line (about a third of a second)
FRAMES = {8000: 256, 16000: 512}  # Silero's window: 32 ms

SpeechGate = Callable[[np.ndarray, bool], bool]
"""(one frame in [-1, 1], whether it is loud) -> whether it is speech."""


def energy_gate(frame: np.ndarray, loud: bool) -> bool:
    """Speech = loud; for when Silero is not installed (a steady noise that swells reads as speech)."""
    return loud


@cache
def _silero_session() -> Any:
    """One ONNX session per process: each detector keeps its own recurrent state, the weights are shared."""
    from livekit.plugins.silero import onnx_model

    return onnx_model.new_inference_session(True)


def silero_gate(rate: int, threshold: float = 0.5) -> SpeechGate:
    """Silero VAD from livekit-plugins-silero's own ONNX file, one 32 ms window per frame."""
    from livekit.plugins.silero import onnx_model

    model = onnx_model.OnnxModel(onnx_session=_silero_session(), sample_rate=rate)

    def gate(frame: np.ndarray, loud: bool) -> bool:
        return model(frame) >= threshold

    return gate


def default_gate(rate: int, threshold: float = 0.5) -> SpeechGate:
    try:
        return silero_gate(rate, threshold)
    except ImportError:
        return energy_gate


class ToneTracker:
    """Steady narrow-band tones in a stream of frames: reports one when it ends."""

    def __init__(self, rate: int, frame: int, opts: AnswerOptions) -> None:
        self._opts = opts
        n = 2 * frame  # two frames: 16 Hz bins
        self._window = np.hanning(n).astype(np.float32)
        self._freqs = np.fft.rfftfreq(n, 1.0 / rate)
        top = min(HIGH_HZ, rate / 2 - 100)
        self._band = (self._freqs >= LOW_HZ) & (self._freqs <= top)
        self._peaks = (self._freqs >= PEAK_LOW_HZ) & (self._freqs <= top)
        self._prev = np.zeros(frame, np.float32)
        self._noise = np.zeros(len(self._freqs))  # the line's noise spectrum, from quiet frames
        self._run_s = 0.0
        self._run_hz: float | None = None
        self._frame_s = frame / rate

    def tone_hz(self, x: np.ndarray, loud: bool = True) -> float | None:
        """The frame's tone frequency, or None when it is not a tone frame: one that starts a tone, or one
        at the running tone's pitch that keeps it going. Quiet frames teach it the line's noise spectrum,
        which is taken off a loud frame's before its purity is read (noise spreads over the whole band)."""
        buf = np.concatenate([self._prev, x])
        self._prev = x
        power = np.abs(np.fft.rfft(buf * self._window)) ** 2
        if not loud:
            self._noise += NOISE_RATE * (power - self._noise)
            return None
        power = np.maximum(power - self._noise, 0.0)
        total = float(power[self._band].sum())
        if total <= 0.0:
            return None
        k = int(np.argmax(power * self._peaks))
        purity = float(power[max(0, k - 2) : k + 3].sum()) / total
        hz = float(self._freqs[k])
        if purity >= self._opts.tone_purity:
            return hz
        holds = self._run_hz is not None and abs(hz - self._run_hz) <= BEEP_DRIFT_HZ
        return hz if holds and purity >= self._opts.tone_hold_purity else None

    @property
    def in_tone(self) -> bool:
        return self._run_hz is not None

    def update(self, tone_hz: float | None) -> tuple[float, float] | None:
        """Feed one frame's tone reading; returns (frequency, seconds) when a tone long enough for a beep
        just ended."""
        steady = (
            tone_hz is not None and self._run_hz is not None and abs(tone_hz - self._run_hz) <= BEEP_DRIFT_HZ
        )
        if steady:
            self._run_s += self._frame_s
            return None
        ended = (
            (self._run_hz, self._run_s)
            if self._run_hz is not None and self._run_s >= self._opts.min_beep_s
            else None
        )
        self._run_hz, self._run_s = (tone_hz, self._frame_s) if tone_hz is not None else (None, 0.0)
        return ended


SIT_BANDS_HZ = ((880.0, 1010.0), (1340.0, 1460.0), (1740.0, 1810.0))
"""The special information tone's three segments (ITU-T E.180/Q.35: 913.8 or 985.2, 1370.6 or 1428.5,
1776.7 Hz), each 274 or 380 ms, back to back."""


def is_sit(tones: list[tuple[float, float, float]]) -> bool:
    """Whether the last three tones heard, (Hz, seconds, when it ended), are a special information tone."""
    if len(tones) < 3:
        return False
    last = tones[-3:]
    for (hz, seconds, _), (low, high) in zip(last, SIT_BANDS_HZ, strict=True):
        if not (low <= hz <= high and 0.15 <= seconds <= 0.5):
            return False
    return all(b[2] - b[1] - a[2] <= 0.1 for a, b in pairwise(last))


class AnswerDetector:
    """Feed the callee's audio from the answer on; `feed` returns decisions as they are made: at most one
    greeting decision, and possibly a `beep` after it (see the module docstring)."""

    def __init__(self, rate: int, opts: AnswerOptions | None = None, gate: SpeechGate | None = None) -> None:
        if rate not in FRAMES:
            raise ValueError(f"answer detection needs 8 or 16 kHz audio (got {rate} Hz)")
        self.opts = opts or AnswerOptions()
        self.rate = rate
        self._frame = FRAMES[rate]
        self._frame_s = self._frame / rate
        self._gate = gate or default_gate(rate, self.opts.vad_threshold)
        self._pending = np.zeros(0, np.float32)
        self._levels: deque[float] = deque(maxlen=round(FLOOR_WINDOW_S / self._frame_s))
        self._tones = ToneTracker(rate, self._frame, self.opts)
        self._beep: tuple[float, float] | None = None  # (Hz, when it ended) while waiting for a second one
        self._tones_heard: list[tuple[float, float, float]] = []  # (Hz, seconds, when it ended)
        self._t = 0.0
        self._voiced_s = 0.0
        self._heard_speech = False
        self._silence_s = 0.0
        self.decision: AnswerDecision | None = None
        self.done = False

    def feed(self, samples: np.ndarray) -> list[AnswerDecision]:
        """Mono samples, int16 or float in [-1, 1]."""
        x = samples.astype(np.float32)
        if samples.dtype == np.int16:
            x /= 32768.0
        self._pending = np.concatenate([self._pending, x])
        out: list[AnswerDecision] = []
        while len(self._pending) >= self._frame and not self.done:
            frame, self._pending = self._pending[: self._frame], self._pending[self._frame :]
            d = self._step(frame)
            if d is not None:
                out.append(d)
        return out

    def _step(self, frame: np.ndarray) -> AnswerDecision | None:
        o = self.opts
        self._t += self._frame_s
        level = 10.0 * np.log10(float(np.mean(frame**2)) + 1e-12)
        loud = level > max(MIN_LEVEL_DBFS, self._floor() + o.speech_margin_db)
        tone_hz = self._tones.tone_hz(frame, loud)
        if tone_hz is None:  # a long beep or a tone sequence must not become the floor it is measured against
            self._levels.append(level)
        ended = self._tones.update(tone_hz)
        if ended is not None:
            self._beep = (ended[0], self._t)
            self._tones_heard = [*self._tones_heard[-2:], (ended[0], ended[1], self._t)]
            if is_sit(self._tones_heard):
                self.done = True
                return self._decide("not_in_service")
        if self._beep is not None:
            if self._tones.in_tone:
                self._beep = None  # a second beep: the machine records after that one
            elif self._t - self._beep[1] >= o.beep_gap_s:
                self.done = True
                return self._decide("beep", self._beep[0])
        speech = self._gate(frame, loud) and tone_hz is None
        if speech:
            self._voiced_s += self._frame_s
            self._heard_speech = self._voiced_s >= o.min_speech_s
        self._silence_s = 0.0 if speech or tone_hz is not None else self._silence_s + self._frame_s
        if self._beep is not None:
            return None  # waiting to hear whether a second beep follows
        if self.decision is not None:  # only a late beep is left to hear
            self.done = self._silence_s >= o.late_beep_s
            return None
        if not self._heard_speech:
            return self._decide("silence") if self._t >= o.initial_silence_s else None
        if self._voiced_s <= o.person_max_greeting_s:
            return self._decide("person") if self._silence_s >= o.person_end_silence_s else None
        if self._silence_s >= o.machine_silence_s:
            self.done = True  # a long greeting's machine has had its chance to beep
            return self._decide("long_greeting")
        return None

    def _floor(self) -> float:
        """The line's noise level: the 10th percentile of the last two seconds' frames that were not tones
        (quiet is assumed until there are a few)."""
        if len(self._levels) < FLOOR_MIN_FRAMES:
            return MIN_LEVEL_DBFS - self.opts.speech_margin_db
        return float(np.percentile(self._levels, 10))

    def _decide(self, kind: AnswerKind, beep_hz: float | None = None) -> AnswerDecision:
        decision = AnswerDecision(kind, round(self._t, 3), round(self._voiced_s, 3), beep_hz)
        if self.decision is None:
            self.decision = decision
        return decision


def detect(
    samples: np.ndarray, rate: int, opts: AnswerOptions | None = None, gate: SpeechGate | None = None
) -> list[AnswerDecision]:
    """Every decision over one recording of a call's answer (benchmarks and tests)."""
    return AnswerDetector(rate, opts, gate).feed(samples)
