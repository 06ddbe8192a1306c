"""`benchmarks.load --livekit --capacity`: how many concurrent calls this host holds.

N = 2, 3, 4, … concurrent calls, each N three runs of two minutes through the room (load_room.py);
`capacity` is the largest N whose runs all hold v2v p95 ≤ 1.5 s with no underrun. The sweep stops at the
first N with a failed run (more calls do not get faster); every run's summary is kept, so worker failures,
leaked streams and memory slope can be read next to the verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class CapacityOptions:
    start: int = 2
    max_calls: int = 8
    runs: int = 3
    minutes: float = 2.0
    p95_ms: float = 1500.0


SUMMARY_KEYS = (
    "calls",
    "turns",
    "errors",
    "apologies",
    "underruns",
    "v2v_ms",
    "leaked_streams",
    "rss_mb_per_call_max",
    "uss_mb_per_call_max",
    "rss_slope_mb_per_min",
    "rss_mb_engine",
    "cpu_cores",
)


def run_holds(report: dict[str, Any], opts: CapacityOptions) -> bool:
    """One run holds when its p95 is within the bound and nothing underran (and it had turns at all)."""
    p95 = (report.get("v2v_ms") or {}).get("p95")
    return (
        bool(report.get("turns")) and p95 is not None and p95 <= opts.p95_ms and report.get("underruns") == 0
    )


def capacity_of(runs: dict[int, list[dict[str, Any]]], opts: CapacityOptions) -> int | None:
    """The largest N, counting up from `opts.start`, whose `opts.runs` runs all hold (None: not even that)."""
    best = None
    for n in sorted(runs):
        reports = runs[n]
        if len(reports) < opts.runs or not all(run_holds(r, opts) for r in reports):
            break
        best = n
    return best


def sweep(
    run: Callable[[int, float], dict[str, Any]], opts: CapacityOptions = CapacityOptions()
) -> dict[str, Any]:
    """Run the sweep with `run(calls, minutes) -> load_room report`."""
    runs: dict[int, list[dict[str, Any]]] = {}
    for n in range(opts.start, opts.max_calls + 1):
        runs[n] = []
        for _ in range(opts.runs):
            report = run(n, opts.minutes)
            runs[n].append(report)
            if not run_holds(report, opts):
                break  # this N is out: the rest of its runs cannot change the verdict
        if capacity_of(runs, opts) != n:
            break
    return {
        "capacity": capacity_of(runs, opts),
        "criteria": asdict(opts),
        "runs": {
            str(n): [{k: r.get(k) for k in SUMMARY_KEYS} | {"holds": run_holds(r, opts)} for r in reports]
            for n, reports in runs.items()
        },
    }
