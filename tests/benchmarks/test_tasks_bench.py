"""benchmarks.tasks judges the booking service's state: the right bookings, and which changes were wrong."""

from __future__ import annotations

from pathlib import Path

from benchmarks.tasks import TASKS, booking_matches, load_task

ALEX = {"name": "Alex Kim", "dentist": "Dr. Morgan", "slot": "2026-12-08 09:00", "service": "cleaning"}
JO = {"name": "Jo Lee", "dentist": "Dr. Patel", "slot": "2026-12-09 10:00", "service": "checkup"}
WANT_ALEX = {
    "name": "alex kim",
    "dentist": "Dr. Morgan",
    "weekday": "tuesday",
    "hour": 9,
    "service": "cleaning",
}


def test_the_expected_booking_is_right_and_nothing_is_wrong() -> None:
    assert booking_matches([ALEX], {"bookings": [WANT_ALEX]}, []) == (True, 0)


def test_a_booking_at_another_hour_is_wrong() -> None:
    moved = {**ALEX, "slot": "2026-12-08 10:00"}
    assert booking_matches([moved], {"bookings": [WANT_ALEX]}, []) == (False, 1)


def test_a_cancel_not_made_fails_the_task_but_books_nothing_wrong() -> None:
    assert booking_matches([JO], {"bookings": []}, [JO]) == (False, 0)


def test_a_booking_cancelled_that_should_stay_is_wrong() -> None:
    want_jo = {"name": "Jo Lee", "dentist": "Dr. Patel", "weekday": "wednesday", "hour": 10}
    assert booking_matches([], {"bookings": [want_jo]}, [JO]) == (False, 1)


def test_the_task_sets_are_split_and_load() -> None:
    dev = sorted((TASKS / "dev").glob("*.yaml"))
    test = sorted((TASKS / "test").glob("*.yaml"))
    assert len(dev) + len(test) >= 24 and dev and test
    assert not {p.stem for p in dev} & {p.stem for p in test}
    for path in dev + test:
        task = load_task(Path(path))
        assert task["turns"] and "outcome" in task


def test_the_unseen_split_is_held_out_with_other_voices() -> None:
    """Calls written after dev and test, in caller voices neither used: a check on speech nobody fitted."""
    seen = [load_task(Path(p)) for s in ("dev", "test") for p in (TASKS / s).glob("*.yaml")]
    unseen_paths = sorted((TASKS / "unseen").glob("*.yaml"))
    unseen = [load_task(Path(p)) for p in unseen_paths]
    assert len(unseen) >= 8
    assert not {t["voice"] for t in seen} & {t["voice"] for t in unseen}
    lines = {str(turn) for t in seen for turn in t["turns"]}  # beyond "yes, that's right"
    assert not lines & {str(turn) for t in unseen for turn in t["turns"] if len(str(turn).split()) > 3}
