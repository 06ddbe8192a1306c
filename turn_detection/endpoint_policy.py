"""Endpoint policy: how long to keep listening after the caller goes quiet.

Two signals meet here — how finished the transcript reads (text cues) and LiveKit's local audio end-of-turn
model v1-mini (prosody: falling pitch, drawn-out syllables) — and become one end-of-turn probability and one
delay, counted from the end of the last speech: short when the turn is clearly complete, long on hesitation.

The audio model is read the way LiveKit reads it: against its own per-language "unlikely" threshold
(livekit-agents `inference/eot/languages.py`), so a score at the threshold is neutral evidence. Both signals
are added as log-odds; neither overrides the other, but strong text evidence (a trailing "the") outweighs a
confident audio model and the reverse. Pure logic: no livekit, no model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .text_cues import TextCue

V1_MINI_THRESHOLDS: dict[str, float] = {"en": 0.36, "ko": 0.40}
"""v1-mini's per-language unlikely thresholds, as shipped in livekit-agents 1.8.9 (LOCAL_LANGUAGES)."""


def v1_mini_threshold(language: str | None) -> float:
    """The shipped threshold for a language, read from livekit-agents when it is importable."""
    lang = (language or "en").split("-")[0].lower()
    try:
        from livekit.agents.inference.eot.languages import LOCAL_LANGUAGES

        return float(LOCAL_LANGUAGES.get(lang, LOCAL_LANGUAGES["en"]))
    except Exception:  # livekit-agents moved the table: the copy above has the same values
        return V1_MINI_THRESHOLDS.get(lang, V1_MINI_THRESHOLDS["en"])


@dataclass(frozen=True)
class EndpointOptions:
    """Delays are seconds after the last speech; probabilities are end-of-turn probabilities."""

    min_delay: float = 0.2
    """Delay when the turn is clearly complete."""
    hesitation_delay: float = 1.3
    """Delay at `unlikely_p`; the delay rises linearly from `min_delay` at `confident_p` down to here."""
    max_delay: float = 2.0
    """Delay when the turn is clearly unfinished (trailing "and", "um", "for ..."); also the hard ceiling."""
    confident_p: float = 0.7
    unlikely_p: float = 0.3
    audio_weight: float = 1.0
    """Weight of the audio model's log-odds against the text's (0 = text alone; the telephony profile trusts
    the audio model less: v1-mini was trained on wideband audio)."""
    sequence_delay: float = 1.0
    """Least delay after a digit group, spelled letters or an open list: callers read them out in chunks."""
    final_wait: float = 1.0
    """How long after the speech to wait for the STT's final text of it before judging the older text
    (a cough or a word the STT drops never brings one)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_delay <= self.hesitation_delay <= self.max_delay:
            raise ValueError("endpoint delays must satisfy 0 <= min_delay <= hesitation_delay <= max_delay")
        if not 0.0 <= self.unlikely_p < self.confident_p <= 1.0:
            raise ValueError("endpoint probabilities must satisfy 0 <= unlikely_p < confident_p <= 1")
        if not 0.0 <= self.final_wait <= 5.0:
            raise ValueError("final_wait must be within [0, 5] seconds")
        if not 0.0 <= self.audio_weight <= 3.0:
            raise ValueError("audio_weight must be within [0, 3]")
        if not 0.0 <= self.sequence_delay <= self.max_delay:
            raise ValueError("sequence_delay must be within [0, max_delay]")


@dataclass(frozen=True)
class EndpointDecision:
    probability: float
    delay: float
    reason: str


def _logit(p: float) -> float:
    p = min(1.0 - 1e-4, max(1e-4, p))
    return math.log(p / (1.0 - p))


def audio_evidence(audio_probability: float, threshold: float) -> float:
    """v1-mini's score as a probability centred on its own threshold: 0.5 at the threshold, piecewise
    linear to 0 and 1, so the same score means the same thing in every language."""
    a = min(1.0, max(0.0, audio_probability))
    if a < threshold:
        return 0.5 * a / threshold
    return 0.5 + 0.5 * (a - threshold) / (1.0 - threshold)


def combine(
    cue: TextCue, audio_probability: float | None, opts: EndpointOptions, language: str | None = None
) -> float:
    """One end-of-turn probability: text and (when available) audio evidence added as log-odds."""
    if audio_probability is None or opts.audio_weight == 0.0:
        return cue.completeness
    evidence = audio_evidence(audio_probability, v1_mini_threshold(language))
    z = _logit(cue.completeness) + opts.audio_weight * _logit(evidence)
    return 1.0 / (1.0 + math.exp(-z))


def delay_for(probability: float, opts: EndpointOptions) -> float:
    """Map an end-of-turn probability to a wait after the last speech."""
    if probability >= opts.confident_p:
        return opts.min_delay
    if probability < opts.unlikely_p:
        return opts.max_delay
    span = (opts.confident_p - probability) / (opts.confident_p - opts.unlikely_p)
    return opts.min_delay + (opts.hesitation_delay - opts.min_delay) * span


def decide(
    cue: TextCue, audio_probability: float | None, opts: EndpointOptions, language: str | None = None
) -> EndpointDecision:
    p = combine(cue, audio_probability, opts, language)
    delay = delay_for(p, opts)
    if cue.sequence:
        delay = max(delay, opts.sequence_delay)
    return EndpointDecision(probability=p, delay=delay, reason=cue.reason)
