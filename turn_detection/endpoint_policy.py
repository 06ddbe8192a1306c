"""Endpoint policy: how long to keep listening after the caller goes quiet.

Three signals meet here — how finished the transcript reads (text cues), how likely a small language model
thinks the sentence is over (lm_eot.py), and LiveKit's local audio end-of-turn model v1-mini (prosody:
falling pitch, drawn-out syllables) — and become one end-of-turn probability and one delay, counted from the
end of the last speech: short when the turn is clearly complete, long on hesitation.

The audio model is read the way LiveKit reads it: against its own per-language "unlikely" threshold
(livekit-agents `inference/eot/languages.py`), so a score at the threshold is neutral evidence. Both signals
are added as log-odds; neither overrides the other, but strong text evidence (a trailing "the") outweighs a
confident audio model and the reverse. The language model's score is one more log-odds term, calibrated on
the corpus's dev split (`lm_weight`, `lm_center`); for the cue kinds where dev showed the model reads the
transcript better than the word table (`lm_replaces`), the table's term steps aside when the model answered.
The model alone (text and audio not reading the turn as unlikely) holds a turn at most `hesitation_delay`.
After a sequence (digits, spelled letters, a list) the hold is the model's: `sequence_delay` times its
probability that more is coming. The recogniser's own probability for the last word it wrote is one more
term: at a pause inside a clause Whisper often finishes the fragment with a word it did not hear ("put me
through, too."), so a last word it is unsure of is weaker evidence that the caller is done. Pure logic:
no livekit, no model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .text_cues import NUMBER_END_REASONS, TextCue

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
    lm_weight: float = 0.0
    """Slope of the language model's log-odds (0 = not used); chosen on the dev splits (options.py)."""
    lm_center: float = 0.1
    """The language model's end-of-sentence probability that is neutral evidence (log-odds 0)."""
    lm_replaces: frozenset[str] = frozenset()
    """Text-cue reasons whose table term the language model replaces when it answered (chosen on dev)."""
    lm_skips: frozenset[str] = NUMBER_END_REASONS
    """Text-cue reasons the language model is not asked about: it reads a number at the end as unfinished
    (end probability 0.001-0.07 on the dev splits' phone numbers read in full, 0.01-0.05 on "a group of
    20."), so it held such turns for `hesitation_delay`; the table reads them."""
    confidence_weight: float = 0.0
    """Slope of the recogniser's confidence in the last word, in log-odds (0 = not used); chosen on dev like
    the LM's."""
    confidence_center: float = 0.5
    """The last word's probability from which on it is no evidence (below it, evidence of more to come)."""
    model_hold: float | None = None
    """The longest hold when only the models (the language model, the recogniser's doubt) read the turn as
    unfinished and the word tables and audio do not; None = `hesitation_delay`."""
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
        if not 0.0 <= self.lm_weight <= 5.0:
            raise ValueError("lm_weight must be within [0, 5]")
        if not 0.0 < self.lm_center < 1.0:
            raise ValueError("lm_center must be within (0, 1)")
        if not 0.0 <= self.confidence_weight <= 5.0:
            raise ValueError("confidence_weight must be within [0, 5]")
        if not 0.0 < self.confidence_center < 1.0:
            raise ValueError("confidence_center must be within (0, 1)")
        if self.model_hold is not None and not self.min_delay <= self.model_hold <= self.max_delay:
            raise ValueError("model_hold must be within [min_delay, max_delay]")

    @property
    def models_hold(self) -> float:
        """`model_hold` as it applies (`hesitation_delay` when not set)."""
        return self.hesitation_delay if self.model_hold is None else self.model_hold


@dataclass(frozen=True)
class EndpointDecision:
    probability: float
    delay: float
    reason: str
    lm_probability: float | None = None
    """The language model's raw end-of-sentence probability (None: not asked, or not in time)."""
    confidence: float | None = None
    """The recogniser's probability for the last word judged (None: unknown)."""


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


def lm_log_odds(lm_probability: float, opts: EndpointOptions) -> float:
    """The language model's evidence: log-odds, 0 at `lm_center`, scaled by `lm_weight`."""
    return opts.lm_weight * (_logit(lm_probability) - _logit(opts.lm_center))


def lm_judges(cue: TextCue, opts: EndpointOptions) -> bool:
    """Whether the language model's score counts for this cue (the detector need not wait for it if not)."""
    return opts.lm_weight > 0.0 and cue.reason not in opts.lm_skips


def _uses_lm(lm_probability: float | None, opts: EndpointOptions, cue: TextCue | None = None) -> bool:
    judged = opts.lm_weight > 0.0 if cue is None else lm_judges(cue, opts)
    return lm_probability is not None and judged


def confidence_log_odds(confidence: float | None, opts: EndpointOptions) -> float:
    """The recogniser's doubt about the last word as evidence: negative below `confidence_center`, 0 at or
    above it (unknown: 0). One-sided: a word Whisper is sure of is real, which says nothing about whether
    the clause is finished (a clause ending in a preposition is as open when the preposition is sure);
    two-sided, dev and test gave the same cut-offs, and a sure trailing preposition ended the turn
    (tests/turn_detection)."""
    if confidence is None or opts.confidence_weight == 0.0:
        return 0.0
    return min(0.0, opts.confidence_weight * (_logit(confidence) - _logit(opts.confidence_center)))


def combine(
    cue: TextCue,
    audio_probability: float | None,
    opts: EndpointOptions,
    language: str | None = None,
    lm_probability: float | None = None,
    confidence: float | None = None,
) -> float:
    """One end-of-turn probability: text, language-model, recogniser-confidence and audio evidence added as
    log-odds."""
    use_lm = _uses_lm(lm_probability, opts, cue)
    trust = confidence_log_odds(confidence, opts)
    if not use_lm and trust == 0.0 and (audio_probability is None or opts.audio_weight == 0.0):
        return cue.completeness
    z = trust
    z += 0.0 if use_lm and cue.reason in opts.lm_replaces else _logit(cue.completeness)
    if use_lm:
        assert lm_probability is not None
        z += lm_log_odds(lm_probability, opts)
    if audio_probability is not None and opts.audio_weight > 0.0:
        evidence = audio_evidence(audio_probability, v1_mini_threshold(language))
        z += opts.audio_weight * _logit(evidence)
    return 1.0 / (1.0 + math.exp(-z))


def sequence_hold(lm_probability: float | None, opts: EndpointOptions) -> float:
    """Least delay after a digit group, spelled letters or an open list. Without the language model, the
    fixed `sequence_delay`; with it, `sequence_delay` times the model's probability that more is coming, so
    a finished phone number or a sentence that merely holds numbers is not held."""
    if not _uses_lm(lm_probability, opts):
        return opts.sequence_delay
    assert lm_probability is not None
    more = 1.0 / (1.0 + math.exp(lm_log_odds(lm_probability, opts)))
    return opts.sequence_delay * more


def delay_for(probability: float, opts: EndpointOptions) -> float:
    """Map an end-of-turn probability to a wait after the last speech."""
    if probability >= opts.confident_p:
        return opts.min_delay
    if probability < opts.unlikely_p:
        return opts.max_delay
    span = (opts.confident_p - probability) / (opts.confident_p - opts.unlikely_p)
    return opts.min_delay + (opts.hesitation_delay - opts.min_delay) * span


def decide(
    cue: TextCue,
    audio_probability: float | None,
    opts: EndpointOptions,
    language: str | None = None,
    lm_probability: float | None = None,
    confidence: float | None = None,
) -> EndpointDecision:
    p = combine(cue, audio_probability, opts, language, lm_probability, confidence)
    delay = delay_for(p, opts)
    models = _uses_lm(lm_probability, opts, cue) or confidence_log_odds(confidence, opts) != 0.0
    if models and combine(cue, audio_probability, opts, language) >= opts.unlikely_p:
        # the language model and the confidence never hold a turn past `models_hold` on their own
        delay = min(delay, opts.models_hold)
    if cue.sequence:
        delay = max(delay, sequence_hold(lm_probability, opts))
    return EndpointDecision(
        probability=p, delay=delay, reason=cue.reason, lm_probability=lm_probability, confidence=confidence
    )
