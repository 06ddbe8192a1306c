from __future__ import annotations

import itertools

import pytest

from caches import FillerOptions, FillerPolicy, Plan

ACKS = ["Okay.", "Sure.", "Right.", "Got it.", "Let me see.", "One moment."]


def policy(**kw) -> FillerPolicy:
    return FillerPolicy(FillerOptions(seed=1, **kw))


def test_first_turn_watches_the_threshold() -> None:
    p = policy(late_threshold_ms=600)
    p.start_turn()
    d = p.on_commit(user_speaking=False)
    assert d.plan is Plan.WATCH and d.deadline_ms == 600


def test_observed_late_plays_observed_on_time_does_not() -> None:
    p = policy()
    p.start_turn()
    assert p.at_deadline(user_speaking=False, reply_ready=False)
    assert not p.at_deadline(user_speaking=False, reply_ready=True)


def test_no_filler_once_the_reply_is_being_synthesised() -> None:
    """Its words reached the voice: audio is one synthesis away, and a filler would make it wait."""
    p = policy()
    p.start_turn()
    assert not p.at_deadline(user_speaking=False, reply_ready=False, reply_synthesising=True)


def test_prediction_counts_the_filler_own_length() -> None:
    """A filler played at once must end before the predicted reply, or it delays a reply that was ready."""
    p = policy(late_threshold_ms=600, min_history=1)
    p.observe_reply_latency(900)
    p.start_turn()
    assert p.on_commit(user_speaking=False, filler_ms=500).plan is Plan.WATCH
    assert p.on_commit(user_speaking=False, filler_ms=250).plan is Plan.NOW


def test_reply_already_ready_skips() -> None:
    p = policy()
    p.start_turn()
    assert p.on_commit(user_speaking=False, reply_ready=True).plan is Plan.SKIP


def test_never_while_the_caller_speaks() -> None:
    p = policy()
    p.start_turn()
    assert p.on_commit(user_speaking=True).plan is Plan.SKIP
    assert not p.at_deadline(user_speaking=True, reply_ready=False)
    assert not p.allow_hold_line(user_speaking=True, now_ms=1e6)


def test_predicted_late_plays_at_once_after_enough_history() -> None:
    p = policy(late_threshold_ms=600, min_history=2, history=3)
    p.observe_reply_latency(900)
    p.start_turn()
    assert p.on_commit(user_speaking=False).plan is Plan.WATCH  # one observation is not a prediction
    p.observe_reply_latency(800)
    p.start_turn()
    d = p.on_commit(user_speaking=False)
    assert d.plan is Plan.NOW and "predicted" in d.reason
    # fast replies bring the median back under the threshold (history is a window of 3)
    for _ in range(2):
        p.observe_reply_latency(200)
    p.start_turn()
    assert p.on_commit(user_speaking=False).plan is Plan.WATCH
    assert p.predicted_latency_ms() == 200


def test_prediction_can_be_turned_off() -> None:
    p = policy(predict=False)
    for _ in range(5):
        p.observe_reply_latency(2000)
    p.start_turn()
    assert p.on_commit(user_speaking=False).plan is Plan.WATCH


def test_never_twice_in_a_row_across_turns() -> None:
    p = policy(min_turn_gap=1)
    p.start_turn()
    p.on_filler_played("Okay.", now_ms=0)
    p.on_reply_audio()
    p.start_turn()
    d = p.on_commit(user_speaking=False)
    assert d.plan is Plan.SKIP and "recent turn" in d.reason
    assert not p.at_deadline(user_speaking=False, reply_ready=False)
    p.start_turn()
    assert p.on_commit(user_speaking=False).plan is Plan.WATCH


def test_never_right_after_a_filler_without_real_speech_between() -> None:
    p = policy(min_turn_gap=0)
    p.start_turn()
    p.on_filler_played("Okay.", now_ms=0)
    p.start_turn()  # the reply never played (caller barged in over the filler)
    assert p.on_commit(user_speaking=False).plan is Plan.SKIP
    p.on_reply_audio()
    assert p.on_commit(user_speaking=False).plan is Plan.WATCH


def test_same_line_not_within_n_turns() -> None:
    p = policy(no_repeat_turns=3)
    played: list[str] = []
    for turn in range(1, 13):
        p.start_turn()
        line = p.choose(ACKS[:2])
        if line is not None:
            p.on_filler_played(line, now_ms=turn * 10_000)
            played.append((turn, line))  # type: ignore[arg-type]
    last_turn: dict[str, int] = {}
    for turn, line in played:  # type: ignore[misc]
        if line in last_turn:
            assert turn - last_turn[line] > 3
        last_turn[line] = turn
    assert len(played) >= 4  # two lines and a 3-turn window still allow fillers regularly


def test_choose_returns_none_when_every_line_is_recent() -> None:
    p = policy(no_repeat_turns=5)
    p.start_turn()
    p.on_filler_played("Okay.", now_ms=0)
    p.start_turn()
    assert p.choose(["Okay."]) is None
    assert p.choose(["Okay.", "Sure."]) == "Sure."
    assert p.choose([]) is None


def test_choice_is_varied() -> None:
    p = policy(no_repeat_turns=0)
    seen = set()
    for _ in range(60):
        p.start_turn()
        seen.add(p.choose(ACKS))
    assert len(seen) >= 4


def test_hold_lines_need_a_gap_after_the_last_filler() -> None:
    p = policy(hold_gap_ms=2500)
    p.start_turn()
    assert p.allow_hold_line(user_speaking=False, now_ms=0)
    p.on_filler_played("Let me see.", now_ms=1000)
    assert not p.allow_hold_line(user_speaking=False, now_ms=2000)
    assert p.allow_hold_line(user_speaking=False, now_ms=3600)


def test_apology_not_the_same_twice_in_a_row() -> None:
    p = policy()
    lines = ["Sorry A.", "Sorry B."]
    picks = [p.choose_apology(lines) for _ in range(10)]
    assert all(a != b for a, b in itertools.pairwise(picks))
    assert p.choose_apology(["Only."]) == "Only."
    assert p.choose_apology(["Only."]) == "Only."  # a single line is still said
    assert p.choose_apology([]) is None


@pytest.mark.parametrize(
    "kw", [{"late_threshold_ms": -1}, {"history": 0}, {"min_history": 0}, {"no_repeat_turns": -1}]
)
def test_bad_options_are_rejected(kw: dict) -> None:
    with pytest.raises(ValueError):
        FillerOptions(**kw)
