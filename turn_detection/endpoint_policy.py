"""Endpoint policy: how long to keep listening after the caller goes quiet.

Two signals meet here — how finished the transcript reads (text cues) and LiveKit's local audio end-of-turn
model (prosody: falling pitch, drawn-out syllables) — and become one end-of-turn probability and one delay,
counted from the end of the last speech: short when the turn is clearly complete, long on hesitation.
Pure logic: no livekit, no model.
"""

from __future__ import annotations

from dataclasses import dataclass

from .text_cues import TextCue


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
    audio_weight: float = 0.4
    """Share of the audio model in the combined probability when the text is not decisive."""
    decisive_text: float = 0.12
    """Text completeness at or below this overrides the audio model (a trailing "for" is unambiguous)."""
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
        if not 0.0 <= self.audio_weight <= 1.0:
            raise ValueError("audio_weight must be within [0, 1]")


@dataclass(frozen=True)
class EndpointDecision:
    probability: float
    delay: float
    reason: str


def combine(cue: TextCue, audio_probability: float | None, opts: EndpointOptions) -> float:
    """One end-of-turn probability from the text cue and (when available) the audio model."""
    if audio_probability is None or cue.completeness <= opts.decisive_text:
        return cue.completeness
    audio = min(1.0, max(0.0, audio_probability))
    return (1.0 - opts.audio_weight) * cue.completeness + opts.audio_weight * audio


def delay_for(probability: float, opts: EndpointOptions) -> float:
    """Map an end-of-turn probability to a wait after the last speech."""
    if probability >= opts.confident_p:
        return opts.min_delay
    if probability < opts.unlikely_p:
        return opts.max_delay
    span = (opts.confident_p - probability) / (opts.confident_p - opts.unlikely_p)
    return opts.min_delay + (opts.hesitation_delay - opts.min_delay) * span


def decide(cue: TextCue, audio_probability: float | None, opts: EndpointOptions) -> EndpointDecision:
    p = combine(cue, audio_probability, opts)
    return EndpointDecision(probability=p, delay=delay_for(p, opts), reason=cue.reason)
