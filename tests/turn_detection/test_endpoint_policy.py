import itertools

import pytest

from turn_detection.endpoint_policy import EndpointOptions, combine, decide, delay_for
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


def test_trailing_conjunction_overrides_a_confident_audio_model() -> None:
    cue = TextCue(0.05, "trailing_conjunction")
    assert combine(cue, 0.99, OPTS) == cue.completeness
    assert decide(cue, 0.99, OPTS).delay == OPTS.max_delay


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
        {"audio_weight": 1.5},
    ],
)
def test_bad_options_are_rejected(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        EndpointOptions(**kwargs)
