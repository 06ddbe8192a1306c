"""The trade-off sweep of benchmarks.turns: re-timing recorded decisions with a delay knob."""

from __future__ import annotations

from typing import Any

from benchmarks import turn_sweep


def _decision(speech_end: float, delay: float, next_start: float | None) -> dict[str, Any]:
    return {"ready": speech_end + 0.3, "speech_end": speech_end, "delay": delay, "next_start": next_start}


def _cases() -> tuple[list[dict[str, Any]], dict[str, float]]:
    # a hesitation: the caller pauses at 1.0 s for 1.0 s (speaks again at 2.0 s), ends at 3.0 s
    pause = {
        "file": "p.wav",
        "kind": "pause",
        "clause": "open",
        "commits": [_decision(3.0, 0.2, None)],
        "held": [_decision(1.0, 1.2, 2.0)],
    }
    done = {"file": "d.wav", "kind": "done", "clause": "", "commits": [_decision(2.0, 0.2, None)], "held": []}
    return [pause, done], {"p.wav": 3.0, "d.wav": 2.0}


def test_a_shorter_knob_turns_a_held_hesitation_into_a_cutoff() -> None:
    cases, last = _cases()
    at_run = turn_sweep.point(cases, last, 1.0)
    assert at_run.open_cutoff_rate == 0.0 and at_run.done_p50_ms == 300.0  # ready 0.3 s after the speech
    snappy = turn_sweep.point(cases, last, 0.5)  # 1.2 s * 0.5 = 0.6 s < the 1.0 s pause: cut off
    assert snappy.open_cutoff_rate == 1.0
    slow = turn_sweep.point(cases, last, 4.0)  # 0.2 s * 4 = 0.8 s after the finished turn
    assert slow.done_p50_ms == 800.0 and slow.done_held_over_1500ms_rate == 0.0


def test_summary_figures_pick_the_best_point_within_each_limit() -> None:
    cases, last = _cases()
    pts = turn_sweep.curve(cases, last, (0.5, 1.0, 4.0))
    assert turn_sweep.p50_at_cutoff(pts) == 300.0  # knob 1.0: no cut-offs at 300 ms
    assert turn_sweep.cutoff_at_p50(pts, 250.0) is None  # nothing reaches 250 ms
    assert turn_sweep.summary(pts)["cutoffs_at_400ms"] == 0.0


def test_a_missed_turn_is_not_a_finished_delay() -> None:
    cases, last = _cases()
    miss = turn_sweep.point(cases, last, 20.0)  # 0.2 s * 20 = 4 s: past the 3 s miss window
    assert miss.missed_rate > 0 and miss.done_p50_ms is None


def test_failures_count_every_cutoff_every_late_answer_and_every_missed_turn() -> None:
    cases, last = _cases()
    complete = {**cases[0], "file": "c.wav", "clause": "complete"}  # a pause of another kind counts too
    cases, last = [*cases, complete], {**last, "c.wav": 3.0}
    assert turn_sweep.failures(cases, last, 1.0).total == 0
    snappy = turn_sweep.failures(cases, last, 0.5)
    assert (snappy.cut_offs, snappy.held, snappy.missed) == (2, 0, 0)
    late = turn_sweep.failures(cases, last, 9.0)  # 0.2 s * 9 = 1.8 s after the finished turn: held
    assert late.held == 1 and late.done_p50_ms == 1800.0
    assert turn_sweep.failures(cases, last, 20.0).missed == 3  # past the 3 s window: every turn missed
