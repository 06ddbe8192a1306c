"""Tune the language-model end-of-turn term on the corpus's DEV split (never on test).

    python scripts/tune_lm_eot.py --result out/bench/lm0_dev_web.json --labels out/corpus/dev/web/labels.json
    python scripts/tune_lm_eot.py --joint --result A.json --labels A/labels.json --result B.json --labels ...
    python scripts/tune_lm_eot.py --model-hold --result A.json --labels A/labels.json --result B.json ...

Reads a `benchmarks.turns --json` result of the parley pipeline (every decision it made, with the text cue's
completeness, v1-mini's score and the LM's score) and reports two things:

1. The log-loss fit. The LM term of endpoint_policy by logistic regression, the text and audio terms held as
   they are (an offset): log-odds(turn over) = text + audio_weight * audio + lm_weight * (logit(lm_p) -
   logit(lm_center)). A decision is labelled "turn over" when it was made after the caller's last speech
   segment, "more to come" when the caller spoke again after it. Per text-cue reason (the word table's case
   types), whether dropping the table's term for the LM lowers that reason's log-loss.
2. The trade-off grid (what the profiles use). Each candidate (lm_weight, lm_center, confident_p,
   unlikely_p, hesitation_delay, lm_replaces) re-decides every recorded decision and the delay knob sweeps
   (benchmarks/turn_sweep.py); the candidate with the fewest open-clause cut-offs wins among those whose
   finished-turn p50 stays within `--budget-ms`, with at most 2 % missed and at most `--max-held` of the
   finished turns held over 1.5 s. The log-loss fit alone is not used: on dev it gave a weight of 0.13
   whose term mostly shifted every decision, which the trade-off measures as worse.

`--model-hold` grids only `EndpointOptions.model_hold` (how long the models alone may hold a turn), the rest
as the profile holds it, by every failure a caller counts over all the runs given.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import turn_sweep
from turn_detection.endpoint_policy import EndpointOptions, audio_evidence, decide, v1_mini_threshold
from turn_detection.options import PROFILES, Profile
from turn_detection.text_cues import TextCue

MIN_SAMPLES = 6


@dataclass(frozen=True)
class Sample:
    reason: str
    text_logit: float
    audio_logit: float
    lm_logit: float
    over: bool


def _logit(p: float) -> float:
    p = min(1 - 1e-4, max(1e-4, p))
    return math.log(p / (1 - p))


def last_ends(labels: list[dict]) -> dict[str, float]:
    """Each file's last spoken word, from the split's labels."""
    return {lab["file"]: float(lab["speech_segments_s"][-1][1]) for lab in labels}


def runs_failures(
    runs: list[tuple[dict, list[dict]]], lasts: list[dict[str, float]], opts: EndpointOptions
) -> list[turn_sweep.Failures]:
    """Every failure a caller counts in each run, its decisions re-made under `opts`."""
    return [turn_sweep.failures(redecide(r, opts), last) for (r, _), last in zip(runs, lasts, strict=True)]


def load_samples(result: dict, labels: list[dict], audio_weight: float) -> list[Sample]:
    last_end = last_ends(labels)
    out: list[Sample] = []
    for case in result["cases"]:
        if case["kind"] not in ("pause", "done") or case["file"] not in last_end:
            continue
        for d in case["commits"] + case["held"]:
            if d.get("lm_p") is None or d.get("text_p") is None or d.get("speech_end") is None:
                continue
            audio = 0.0
            if d.get("audio_p") is not None and audio_weight > 0:
                audio = audio_weight * _logit(audio_evidence(d["audio_p"], v1_mini_threshold("en")))
            out.append(
                Sample(
                    reason=d["reason"],
                    text_logit=_logit(d["text_p"]),
                    audio_logit=audio,
                    lm_logit=_logit(d["lm_p"]),
                    over=d["speech_end"] >= last_end[case["file"]] - 0.3,
                )
            )
    return out


def fit(samples: list[Sample], replaces: frozenset[str], iters: int = 50) -> tuple[float, float]:
    """(slope, intercept) of the LM term by Newton's method, the other terms as an offset."""
    x = np.array([s.lm_logit for s in samples])
    off = np.array([(0.0 if s.reason in replaces else s.text_logit) + s.audio_logit for s in samples])
    y = np.array([1.0 if s.over else 0.0 for s in samples])
    w = np.zeros(2)
    design = np.stack([x, np.ones_like(x)], axis=1)
    for _ in range(iters):
        p = 1 / (1 + np.exp(-(design @ w + off)))
        grad = design.T @ (y - p) - 1e-3 * w
        hess = (design * (p * (1 - p))[:, None]).T @ design + 1e-3 * np.eye(2)
        w += np.linalg.solve(hess, grad)
    return float(w[0]), float(w[1])


def log_loss(samples: list[Sample], slope: float, icept: float, replaces: frozenset[str]) -> float:
    total = 0.0
    for s in samples:
        z = (0.0 if s.reason in replaces else s.text_logit) + s.audio_logit + slope * s.lm_logit + icept
        p = 1 / (1 + math.exp(-z))
        total -= math.log(p if s.over else 1 - p + 1e-12)
    return total / max(1, len(samples))


def calibrate(samples: list[Sample]) -> dict:
    slope, icept = fit(samples, frozenset())
    replaces: set[str] = set()
    per_reason: dict[str, dict] = {}
    for reason in sorted({s.reason for s in samples}):
        rs = [s for s in samples if s.reason == reason]
        labels = {s.over for s in rs}
        keep = log_loss(rs, slope, icept, frozenset())
        drop = log_loss(rs, slope, icept, frozenset({reason}))
        per_reason[reason] = {
            "n": len(rs),
            "over": sum(s.over for s in rs),
            "log_loss_table": round(keep, 3),
            "log_loss_lm": round(drop, 3),
        }
        if len(rs) >= MIN_SAMPLES and len(labels) == 2 and drop < keep:
            replaces.add(reason)
    slope, icept = fit(samples, frozenset(replaces))
    center = 1 / (1 + math.exp(icept / slope)) if slope > 0 else 0.5
    return {
        "lm_weight": round(slope, 3),
        "lm_center": round(center, 4),
        "lm_replaces": sorted(replaces),
        "samples": len(samples),
        "per_reason": per_reason,
        "log_loss": round(log_loss(samples, slope, icept, frozenset(replaces)), 4),
    }


def redecide(result: dict, opts: EndpointOptions) -> list[dict[str, Any]]:
    """The run's cases with every decision re-made under `opts` (its recorded text cue, audio and LM)."""
    cases = copy.deepcopy([c for c in result["cases"] if c["kind"] != "noise"])
    for c in cases:
        for d in c["commits"] + c["held"]:
            if d.get("text_p") is None:
                continue
            cue = TextCue(d["text_p"], d["reason"])
            x = decide(cue, d.get("audio_p"), opts, "en", d.get("lm_p"), d.get("confidence"))
            d["delay"], d["probability"] = x.delay, x.probability
    return cases


def best_point(
    result: dict, last: dict[str, float], opts: EndpointOptions, budget_ms: float, max_held: float
) -> turn_sweep.CurvePoint | None:
    pts = turn_sweep.curve(redecide(result, opts), last, turn_sweep.SCALES)
    ok = [
        p
        for p in pts
        if p.done_p50_ms is not None
        and p.open_cutoff_rate is not None
        and p.done_p50_ms <= budget_ms
        and p.missed_rate <= 0.02
        and (p.done_held_over_1500ms_rate or 0.0) <= max_held
    ]
    return min(ok, key=lambda p: (p.open_cutoff_rate, p.done_p50_ms)) if ok else None


def grid(result: dict, labels: list[dict], base: EndpointOptions, budget_ms: float, max_held: float) -> dict:
    last = last_ends(labels)
    without = best_point(result, last, replace(base, lm_weight=0.0), budget_ms, max_held)
    rows: list[tuple[float, dict]] = []
    for w, c, cp, up, hd in itertools.product(
        (0.5, 1.0, 2.0), (0.05, 0.1, 0.2), (0.6, 0.7), (0.3, 0.4, 0.5), (1.0, 1.3, 1.6, 2.0)
    ):
        if up >= cp:
            continue
        opts = replace(base, lm_weight=w, lm_center=c, confident_p=cp, unlikely_p=up, hesitation_delay=hd)
        p = best_point(result, last, opts, budget_ms, max_held)
        if p is not None and p.open_cutoff_rate is not None:
            cand = {"lm_weight": w, "lm_center": c, "confident_p": cp, "unlikely_p": up}
            rows.append((p.open_cutoff_rate, {**cand, "hesitation_delay": hd, "point": p.__dict__}))
    rows.sort(key=lambda r: r[0])
    return {"without_lm": None if without is None else without.__dict__, "best": [r[1] for r in rows[:5]]}


def joint_grid(
    runs: list[tuple[dict, list[dict]]],
    base: EndpointOptions,
    budget_ms: float,
    max_held: float,
    objective: str,
) -> dict:
    """One setting for several dev runs at once (e.g. the main corpus and the held-out voice): the LM term,
    the band and the delays as the profile will hold them (no knob). `objective` "open": the mean
    open-clause cut-off rate among the settings that keep every run within the budget and `max_held`;
    "failures": everything a caller counts (cut off at any pause, a finished turn held over 1.5 s, a turn
    missed), summed over the runs, among the settings within the budget."""
    lasts = [last_ends(labels) for _, labels in runs]

    def points(opts: EndpointOptions) -> list[turn_sweep.CurvePoint]:
        return [
            turn_sweep.point(redecide(r, opts), last, 1.0) for (r, _), last in zip(runs, lasts, strict=True)
        ]

    def within(p: turn_sweep.CurvePoint) -> bool:
        return (
            p.done_p50_ms is not None
            and p.open_cutoff_rate is not None
            and p.done_p50_ms <= budget_ms
            and p.missed_rate <= 0.02
            and (p.done_held_over_1500ms_rate or 0.0) <= max_held
        )

    rows: list[tuple[float, float, dict]] = []

    def with_base(values: tuple[float, ...], now: float) -> list[float]:
        return sorted({*values, now})  # the profile's own value is always a candidate (telephony's differ)

    for w, c, cp, up, hd, md in itertools.product(
        (0.35, 0.5, 1.0, 1.5, 2.0),
        (0.05, 0.1, 0.2, 0.3, 0.4),
        with_base((0.6, 0.7), base.confident_p),
        with_base((0.4, 0.5), base.unlikely_p),
        with_base((1.0, 1.15, 1.3, 1.6), base.hesitation_delay),
        with_base((0.2, 0.23), base.min_delay),
    ):
        if up >= cp or not md <= hd <= base.max_delay:
            continue
        opts = replace(
            base, lm_weight=w, lm_center=c, confident_p=cp, unlikely_p=up, hesitation_delay=hd, min_delay=md
        )
        if objective == "failures":
            fails = runs_failures(runs, lasts, opts)
            if all(f.done_p50_ms is not None and f.done_p50_ms <= budget_ms for f in fails):
                cand = {"lm_weight": w, "lm_center": c, "confident_p": cp, "unlikely_p": up}
                cand |= {"hesitation_delay": hd, "min_delay": md, "failures": [f.__dict__ for f in fails]}
                rows.append((sum(f.total for f in fails), sum(f.done_p50_ms or 0.0 for f in fails), cand))
            continue
        pts = points(opts)
        if all(within(p) for p in pts):
            cand = {"lm_weight": w, "lm_center": c, "confident_p": cp, "unlikely_p": up}
            cand |= {"hesitation_delay": hd, "min_delay": md, "points": [p.__dict__ for p in pts]}
            rows.append(
                (
                    sum(p.open_cutoff_rate or 0.0 for p in pts) / len(pts),
                    sum(p.done_p50_ms or 0.0 for p in pts),
                    cand,
                )
            )
    rows.sort(key=lambda r: (r[0], r[1]))
    return {"profile_now": [p.__dict__ for p in points(base)], "best": [r[2] for r in rows[:8]]}


def confidence_grid(
    result: dict, labels: list[dict], base: EndpointOptions, budget_ms: float, max_held: float
) -> dict:
    """The recogniser's last-word probability as a term (the LM term as the profile has it): weight, centre
    and the band."""
    last = last_ends(labels)
    without = best_point(result, last, replace(base, confidence_weight=0.0), budget_ms, max_held)
    rows: list[tuple[float, float, dict]] = []
    for w, c, cp, up, hd in itertools.product(
        (0.5, 1.0, 2.0, 3.0), (0.3, 0.5, 0.6, 0.7, 0.8), (0.6, 0.7), (0.4, 0.5), (1.0, 1.15, 1.3)
    ):
        if up >= cp:
            continue
        opts = replace(
            base, confidence_weight=w, confidence_center=c, confident_p=cp, unlikely_p=up, hesitation_delay=hd
        )
        p = best_point(result, last, opts, budget_ms, max_held)
        if p is not None and p.open_cutoff_rate is not None and p.done_p50_ms is not None:
            cand = {"confidence_weight": w, "confidence_center": c, "confident_p": cp, "unlikely_p": up}
            rows.append(
                (p.open_cutoff_rate, p.done_p50_ms, {**cand, "hesitation_delay": hd, "point": p.__dict__})
            )
    rows.sort(key=lambda r: (r[0], r[1]))
    return {"without": None if without is None else without.__dict__, "best": [r[2] for r in rows[:8]]}


MODEL_HOLDS: tuple[float, ...] = (1.0, 1.15, 1.3, 1.45, 1.6, 1.8, 2.0, 2.25, 2.5)


def model_hold_grid(runs: list[tuple[dict, list[dict]]], base: EndpointOptions, budget_ms: float) -> dict:
    """The longest hold the models alone may ask for (`EndpointOptions.model_hold`), everything else as the
    profile holds it, ranked by every failure a caller counts summed over the runs (a longer hold saves
    cut-offs at long hesitations and holds finished turns the models misread: only the runs can say which
    weighs more). Settings whose finished-turn p50 passes the budget in any run are left out."""
    lasts = [last_ends(labels) for _, labels in runs]
    rows: list[dict] = []
    for hold in sorted({*MODEL_HOLDS, base.models_hold}):
        if not base.min_delay <= hold <= base.max_delay:
            continue
        opts = replace(base, model_hold=hold)
        fails = runs_failures(runs, lasts, opts)
        if all(f.done_p50_ms is not None and f.done_p50_ms <= budget_ms for f in fails):
            rows.append(
                {
                    "model_hold": hold,
                    "failures": sum(f.total for f in fails),
                    "runs": [f.__dict__ for f in fails],
                }
            )
    rows.sort(key=lambda r: (r["failures"], r["model_hold"]))
    return {"profile_now": base.models_hold, "by_failures": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--result",
        type=Path,
        action="append",
        required=True,
        help="benchmarks.turns --json output (dev split)",
    )
    ap.add_argument(
        "--labels", type=Path, action="append", required=True, help="the same split's labels.json"
    )
    ap.add_argument("--profile", choices=[p.value for p in Profile], default="web")
    ap.add_argument("--budget-ms", type=float, default=450.0, help="finished-turn p50 ceiling")
    ap.add_argument("--max-held", type=float, default=0.05, help="share of finished turns held over 1.5 s")
    ap.add_argument(
        "--confidence", action="store_true", help="grid the recogniser-confidence term instead of the LM's"
    )
    ap.add_argument(
        "--joint",
        action="store_true",
        help="one setting for every --result/--labels pair given (the delays as the profile holds them)",
    )
    ap.add_argument(
        "--model-hold",
        action="store_true",
        help="grid only the longest hold the models alone may ask for, by failures (with --joint or alone)",
    )
    ap.add_argument(
        "--objective",
        choices=("open", "failures"),
        default="open",
        help="--joint ranks by open-clause cut-offs (within --max-held) or by every failure a caller counts",
    )
    a = ap.parse_args(argv)
    if len(a.result) != len(a.labels) or (len(a.result) > 1 and not (a.joint or a.model_hold)):
        print(
            "error: give one --labels per --result; several pairs only with --joint or --model-hold",
            file=sys.stderr,
        )
        return 2
    try:
        runs = [
            (json.loads(r.read_text()), json.loads(lab.read_text()))
            for r, lab in zip(a.result, a.labels, strict=True)
        ]
    except (OSError, ValueError) as e:
        print(f"error: cannot read the inputs: {e}", file=sys.stderr)
        return 2
    if any("test" in (r.get("split") or []) for r, _ in runs):
        print("error: calibrate on the dev split only; this result holds test files", file=sys.stderr)
        return 2
    base = PROFILES[Profile(a.profile)].endpoint
    if a.model_hold:
        print(json.dumps(model_hold_grid(runs, base, a.budget_ms), indent=2))
        return 0
    if a.joint:
        print(json.dumps(joint_grid(runs, base, a.budget_ms, a.max_held, a.objective), indent=2))
        return 0
    result, labels = runs[0]
    if a.confidence:
        print(json.dumps(confidence_grid(result, labels, base, a.budget_ms, a.max_held), indent=2))
        return 0
    samples = load_samples(result, labels, base.audio_weight)
    if len(samples) < 20:
        print(f"error: only {len(samples)} decisions with an LM score; run benchmarks.turns with --eot-lm")
        return 2
    report = {
        "log_loss_fit": calibrate(samples),
        "trade_off": grid(result, labels, base, a.budget_ms, a.max_held),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
