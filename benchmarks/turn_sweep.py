"""The cut-off / latency trade-off of an end-of-turn pipeline as its delay knob sweeps.

One operating point says little: any pipeline cuts fewer callers off if it waits longer. The curve says
whether it is *better*: fewer open-clause cut-offs at the same finished-turn latency. Each pipeline's run of
`benchmarks.turns` records every decision it made (the VAD's end of speech, when the transcript was ready,
the delay the policy chose, when the caller spoke again); the sweep re-times those decisions with the knob:
a decision commits at `max(ready, speech_end + knob * delay)` unless the caller spoke again first.

Knobs: `scale` multiplies every delay the policy chose (parley, stock, smart-turn); for `vad-only` the
recorded delay is 1 s and the knob is the silence timeout itself. Approximation: where a re-timed decision
holds a turn that the run committed, the next decision is the one the run made on the words after it (the
text of that fragment, not of the whole turn). The knob value of the run itself (1.0) is exact.

Figures: "endpoint p50 at 5 % cut-offs" (the lowest finished-turn p50 among knob values whose open-clause
cut-off rate is at most 5 %; None when none reaches it) and "cut-offs at 400 ms" (the lowest open-clause
cut-off rate among knob values whose finished-turn p50 is at most 400 ms); both only over knob values that
miss at most 2 % of the turns (no commit within 3 s of the last word).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MISS_AFTER_S = 3.0
HELD_MS = 1500.0
"""A finished turn answered later than this was held (the same ceiling as benchmarks.report.HELD_MS)."""
SCALES: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.15, 1.3, 1.5, 1.75, 2.0)
SCALES += (2.5, 3.0, 4.0, 6.0)
VAD_ONLY_DELAYS_S: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(1, 31))


@dataclass(frozen=True)
class CurvePoint:
    knob: float
    open_cutoff_rate: float | None
    done_p50_ms: float | None
    missed_rate: float
    done_p95_ms: float | None = None
    done_held_over_1500ms_rate: float | None = None
    """Finished turns whose endpoint came more than 1.5 s after their last word (the issue's ceiling)."""


def _commit_times(case: dict[str, Any], knob: float) -> list[float]:
    """When the case's turns commit with the knob applied to each recorded decision."""
    decisions = sorted(case["commits"] + case["held"], key=lambda d: d["ready"])
    out: list[float] = []
    for d in decisions:
        if d.get("speech_end") is None:
            continue
        at = max(float(d["ready"]), float(d["speech_end"]) + knob * float(d["delay"]))
        nxt = d.get("next_start")
        if nxt is None or float(nxt) >= at:
            out.append(at)
    return out


@dataclass(frozen=True)
class Outcome:
    """One file at one knob value."""

    case: dict[str, Any]
    early: bool
    """The turn was taken before the caller's last word (a cut-off, for a pause file)."""
    missed: bool
    done_ms: float | None
    """A finished turn's endpoint after its last word (None: cut off or missed, or not a finished turn)."""


def outcomes(cases: list[dict[str, Any]], last_ends: dict[str, float], knob: float) -> list[Outcome]:
    out: list[Outcome] = []
    for c in cases:
        last = last_ends.get(c["file"])
        if last is None or c["kind"] not in ("pause", "done"):
            continue
        times = _commit_times(c, knob)
        early = any(t < last for t in times)
        after = [t for t in times if t >= last]
        miss = not early and (not after or after[0] - last > MISS_AFTER_S)
        done = (after[0] - last) * 1000 if c["kind"] == "done" and not early and not miss else None
        out.append(Outcome(c, early, miss, done))
    return out


def point(cases: list[dict[str, Any]], last_ends: dict[str, float], knob: float) -> CurvePoint:
    """Open-clause cut-off rate, finished-turn p50 and missed rate at one knob value."""
    res = outcomes(cases, last_ends, knob)
    cut = [o.early for o in res if o.case["kind"] == "pause" and o.case.get("clause") == "open"]
    done = [o.done_ms for o in res if o.done_ms is not None]
    missed = [o.missed for o in res]
    return CurvePoint(
        knob=knob,
        open_cutoff_rate=round(sum(cut) / len(cut), 4) if cut else None,
        done_p50_ms=round(float(np.percentile(done, 50)), 1) if done else None,
        missed_rate=round(sum(missed) / len(missed), 4) if missed else 0.0,
        done_p95_ms=round(float(np.percentile(done, 95)), 1) if done else None,
        done_held_over_1500ms_rate=round(sum(d > HELD_MS for d in done) / len(done), 4) if done else None,
    )


@dataclass(frozen=True)
class Failures:
    """What a caller would count as a failure at one knob value: cut off at any pause, a finished turn
    answered more than 1.5 s late, a turn missed."""

    cut_offs: int
    held: int
    missed: int
    done_p50_ms: float | None

    @property
    def total(self) -> int:
        return self.cut_offs + self.held + self.missed


def failures(cases: list[dict[str, Any]], last_ends: dict[str, float], knob: float = 1.0) -> Failures:
    res = outcomes(cases, last_ends, knob)
    done = [o.done_ms for o in res if o.done_ms is not None]
    return Failures(
        cut_offs=sum(o.early for o in res if o.case["kind"] == "pause"),
        held=sum(d > HELD_MS for d in done),
        missed=sum(o.missed for o in res),
        done_p50_ms=round(float(np.percentile(done, 50)), 1) if done else None,
    )


def curve(
    cases: list[dict[str, Any]], last_ends: dict[str, float], knobs: tuple[float, ...]
) -> list[CurvePoint]:
    return [point(cases, last_ends, k) for k in knobs]


MAX_MISSED = 0.02
"""A knob value that misses more turns than this (the issue's target) is not a working setting."""


def p50_at_cutoff(points: list[CurvePoint], max_cutoff: float = 0.05) -> float | None:
    ok = [
        p.done_p50_ms
        for p in points
        if p.open_cutoff_rate is not None
        and p.open_cutoff_rate <= max_cutoff
        and p.done_p50_ms is not None
        and p.missed_rate <= MAX_MISSED
    ]
    return min(ok) if ok else None


def cutoff_at_p50(points: list[CurvePoint], max_p50_ms: float = 400.0) -> float | None:
    ok = [
        p.open_cutoff_rate
        for p in points
        if p.done_p50_ms is not None
        and p.done_p50_ms <= max_p50_ms
        and p.open_cutoff_rate is not None
        and p.missed_rate <= MAX_MISSED
    ]
    return min(ok) if ok else None


def summary(points: list[CurvePoint]) -> dict[str, Any]:
    return {
        "endpoint_p50_at_5pct_cutoffs_ms": p50_at_cutoff(points),
        "cutoffs_at_400ms": cutoff_at_p50(points),
        "curve": [p.__dict__ for p in points],
    }


def plot(curves: dict[str, list[CurvePoint]], out: Path, title: str) -> None:
    """One PNG: open-clause cut-off rate against finished-turn endpoint p50, one line per pipeline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, pts in curves.items():
        xy = [  # in knob order: a knob can move both figures, so sorting by latency would zig-zag
            (p.done_p50_ms, p.open_cutoff_rate * 100)
            for p in pts
            if p.done_p50_ms is not None and p.open_cutoff_rate is not None
        ]
        if xy:
            ax.plot([x for x, _ in xy], [y for _, y in xy], marker="o", markersize=3, label=name)
    ax.axhline(5, color="grey", linestyle=":", linewidth=1)
    ax.axvline(400, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("finished-turn endpoint p50 (ms)")
    ax.set_ylabel("open-clause cut-offs (%)")
    ax.set_xlim(0, 3000)
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
