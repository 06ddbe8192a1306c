import itertools

import pytest

from turn_detection.endpoint_policy import (
    EndpointOptions,
    audio_evidence,
    combine,
    decide,
    delay_for,
    v1_mini_threshold,
)
from turn_detection.options import Profile, TurnOptions, params_for
from turn_detection.text_cues import TextCue

OPTS = EndpointOptions(min_delay=0.2, hesitation_delay=1.3, max_delay=2.0, confident_p=0.7, unlikely_p=0.3)


def test_delay_falls_as_probability_rises() -> None:
    ps = [i / 20 for i in range(21)]
    delays = [delay_for(p, OPTS) for p in ps]
    assert all(a >= b for a, b in itertools.pairwise(delays))
    assert delays[0] == OPTS.max_delay and delays[-1] == OPTS.min_delay
    assert OPTS.min_delay < delay_for(0.5, OPTS) < OPTS.hesitation_delay


def test_clearly_complete_turn_gets_the_short_delay() -> None:
    d = decide(TextCue(0.95, "question"), 0.8, OPTS)
    assert d.delay == OPTS.min_delay and d.probability >= OPTS.confident_p


@pytest.mark.parametrize("profile", list(Profile))
def test_strong_text_outweighs_a_confident_audio_model_without_erasing_it(profile: Profile) -> None:
    opts = params_for(profile, TurnOptions()).endpoint
    cue = TextCue(0.05, "trailing_function_word")
    assert combine(cue, 0.2, opts) < combine(cue, 0.9, opts) < opts.unlikely_p
    assert decide(cue, 0.9, opts).delay == opts.max_delay


def test_strong_audio_outweighs_a_mildly_open_text() -> None:
    cue = TextCue(0.35, "trailing_preposition")
    assert combine(cue, 0.99, OPTS) > cue.completeness > combine(cue, 0.05, OPTS)


def test_audio_is_read_against_v1_minis_own_language_threshold() -> None:
    assert v1_mini_threshold("en") == pytest.approx(0.36)
    assert v1_mini_threshold("ko") == pytest.approx(0.40)
    assert v1_mini_threshold("ko-KR") == pytest.approx(0.40)
    for lang in ("en", "ko"):
        t = v1_mini_threshold(lang)
        assert audio_evidence(t, t) == pytest.approx(0.5)
        # a score at the threshold is neutral: the text decides alone
        assert combine(TextCue(0.6, "x"), t, OPTS, lang) == pytest.approx(0.6)
    # the same raw score is weaker evidence of an ended turn in Korean (higher threshold)
    assert combine(TextCue(0.6, "x"), 0.38, OPTS, "ko") < combine(TextCue(0.6, "x"), 0.38, OPTS, "en")


def test_sequences_hold_at_least_the_sequence_delay() -> None:
    d = decide(TextCue(0.35, "digit_group"), 0.99, OPTS)
    assert d.delay >= OPTS.sequence_delay > OPTS.min_delay
    assert decide(TextCue(0.35, "trailing_preposition"), 0.99, OPTS).delay < OPTS.sequence_delay


def test_the_language_model_does_not_hold_a_number_read_in_full() -> None:
    # SmolLM2 reads any digit string as unfinished; a whole phone number must not wait hesitation_delay
    opts = EndpointOptions(min_delay=0.2, hesitation_delay=1.3, max_delay=2.5, lm_weight=1.0, lm_center=0.2)
    whole = decide(TextCue(0.8, "whole_number"), 0.5, opts, "en", lm_probability=0.002)
    assert whole.delay == opts.min_delay
    # the same score still holds a closed sentence it doubts
    assert decide(TextCue(0.78, "closed_sentence"), 0.5, opts, "en", lm_probability=0.002).delay > 1.0


def test_the_language_model_does_not_hold_a_sentence_closed_by_a_number() -> None:
    # "We are a group of 20." scored 0.011 on dev: the model expects more digits or a unit after any number
    opts = EndpointOptions(min_delay=0.2, hesitation_delay=1.3, max_delay=2.5, lm_weight=1.0, lm_center=0.2)
    cue = TextCue(0.78, "closing_number")
    assert decide(cue, 0.7, opts, "en", lm_probability=0.011).delay < 0.5
    assert decide(cue, 0.7, opts, "en", lm_probability=0.011).lm_probability == 0.011  # kept for the logs
    doubted = decide(TextCue(0.78, "closed_sentence"), 0.7, opts, "en", lm_probability=0.011)
    assert doubted.delay > 1.0


def test_audio_model_moves_an_ambiguous_text() -> None:
    cue = TextCue(0.65, "unpunctuated")
    assert decide(cue, 0.05, OPTS).delay > decide(cue, 0.95, OPTS).delay


def test_missing_audio_model_uses_text_alone() -> None:
    assert combine(TextCue(0.6, "x"), None, OPTS) == 0.6


def test_probability_at_the_unlikely_threshold_matches_livekit_rule() -> None:
    # LiveKit uses max_delay only for probability < threshold; the detector must agree at the boundary
    assert delay_for(OPTS.unlikely_p, OPTS) == pytest.approx(OPTS.hesitation_delay)
    assert delay_for(OPTS.unlikely_p - 1e-6, OPTS) == OPTS.max_delay


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_delay": 1.0, "hesitation_delay": 0.5},
        {"max_delay": 0.1},
        {"unlikely_p": 0.8, "confident_p": 0.7},
        {"audio_weight": 3.5},
        {"sequence_delay": 3.0},
        {"confidence_weight": -1.0},
        {"confidence_center": 1.0},
    ],
)
def test_bad_options_are_rejected(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        EndpointOptions(**kwargs)


def test_a_doubtful_last_word_is_evidence_of_more_and_a_sure_one_is_none() -> None:
    opts = EndpointOptions(confidence_weight=1.0, confidence_center=0.4)
    cue = TextCue(0.6, "statement")
    base = combine(cue, None, opts)
    assert combine(cue, None, opts, confidence=0.4) == pytest.approx(base)
    assert combine(cue, None, opts, confidence=None) == pytest.approx(base)
    assert combine(cue, None, opts, confidence=0.1) < base
    # sure of the word is not sure the clause is over: a trailing preposition stays as open as it reads
    assert combine(cue, None, opts, confidence=0.99) == pytest.approx(base)
    off = EndpointOptions(confidence_weight=0.0)
    assert combine(cue, None, off, confidence=0.05) == pytest.approx(combine(cue, None, off))


def test_garbled_words_wait_longer_but_never_past_the_hesitation_delay() -> None:
    """A finished-looking sentence the recogniser is unsure of ("the bus war.") is weaker evidence."""
    opts = EndpointOptions(confidence_weight=2.0, confidence_center=0.5, hesitation_delay=1.0, max_delay=2.5)
    cue = TextCue(0.8, "closed_sentence")
    sure = decide(cue, None, opts, confidence=0.8)
    unsure = decide(cue, None, opts, confidence=0.05)
    assert sure.delay == opts.min_delay
    assert opts.min_delay < unsure.delay <= opts.hesitation_delay
    assert unsure.confidence == 0.05
