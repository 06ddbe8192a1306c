"""Answer detection on outbound calls: does the agent greet a person promptly, and leave its message on a
machine right after the beep?

Reads a folder of the answer corpus (`scripts/make_answer_corpus.py`: WAVs from the moment of answer, and
`labels.json`), runs `worker.answer_detection` over each file as the worker does (20 ms frames, in order),
and counts what a caller would count:

- a person greeted: after how long their pick-up line ended (p50 / p95), and how many heard a voicemail
  message instead (a failure);
- a machine that beeps: the message started after the beep ended (delay p50 / p95), never before it (the
  recording would miss the first words), and never not at all (a greeting said to a machine is a failure);
  a beep heard after the agent had begun its greeting counts as recovered (the greeting is stopped);
- a machine without a beep is greeted (nothing marks when it records); reported, not a failure.

    python scripts/make_answer_corpus.py
    python -m benchmarks.answer --data out/corpus-answer/dev --json out/answer-dev.json
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from worker.answer_detection import (
    AnswerDecision,
    AnswerOptions,
    SpeechGate,
    default_gate,
    detect,
    energy_gate,
)

BEEP_SLACK_S = 0.06  # a decision within three frames of the labelled beep end is at the beep's end


@dataclass
class FileResult:
    file: str
    kind: str  # person | person_long | machine
    outcome: str  # greeted | message | greeted_then_message | nothing
    first: str | None  # the first decision's kind
    delay_s: float | None  # person: greeting after their line ended; machine: message after the beep ended
    beeps: bool = False  # the file holds a beep
    failure: str | None = None


def judge(name: str, label: dict[str, Any], decisions: list[AnswerDecision]) -> FileResult:
    kinds = [d.kind for d in decisions]
    first = decisions[0] if decisions else None
    beep = next((d for d in decisions if d.kind == "beep"), None)
    if first is None:
        outcome = "nothing"
    elif first.kind == "beep":
        outcome = "message"
    else:
        outcome = "greeted_then_message" if beep is not None else "greeted"
    beep_end = label.get("beep_end_s")
    res = FileResult(name, label["kind"], outcome, first.kind if first else None, None, beep_end is not None)
    if label["kind"].startswith("person"):
        if beep is not None:
            res.failure = "message_to_person"
        elif first is None:
            res.failure = "never_greeted"
        else:
            res.delay_s = round(first.at_s - label["speech_end_s"], 3)
            if res.delay_s < 0:
                res.failure = "greeted_over_person"
        return res
    if beep_end is None:  # no beep: greeting it is the expected outcome
        if "beep" in kinds:
            res.failure = "message_without_beep"  # a tone that was not there
        return res
    if beep is None:
        res.failure = "greeted_machine"
        return res
    res.delay_s = round(beep.at_s - beep_end, 3)
    if res.delay_s < -BEEP_SLACK_S:
        res.failure = "message_before_beep"
    return res


def _pct(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None}
    return {
        "p50": round(float(np.percentile(values, 50)), 3),
        "p95": round(float(np.percentile(values, 95)), 3),
    }


def summarise(results: list[FileResult]) -> dict[str, Any]:
    def of(*kinds: str) -> list[FileResult]:
        return [r for r in results if r.kind in kinds]

    persons, machines = of("person", "person_long"), of("machine")
    beeping = [r for r in machines if r.beeps]
    failures: dict[str, int] = {}
    for r in results:
        if r.failure:
            failures[r.failure] = failures.get(r.failure, 0) + 1
    return {
        "files": len(results),
        "failures": sum(failures.values()),
        "failures_by_kind": failures,
        "person_greet_delay_s": _pct([r.delay_s for r in of("person") if r.delay_s is not None]),
        "person_long_greet_delay_s": _pct([r.delay_s for r in of("person_long") if r.delay_s is not None]),
        "persons": len(persons),
        "machines_with_beep": len(beeping),
        "machines_without_beep": len(machines) - len(beeping),
        "message_after_beep_s": _pct(
            [r.delay_s for r in machines if r.delay_s is not None and not r.failure]
        ),
        "late_beeps_recovered": sum(1 for r in machines if r.outcome == "greeted_then_message"),
    }


def run(data: Path, opts: AnswerOptions, gate: str = "silero") -> tuple[dict[str, Any], list[FileResult]]:
    """`gate`: what tells speech from silence, Silero VAD (the worker's) or frame energy (its fallback)."""
    labels = json.loads((data / "labels.json").read_text())
    results = []
    for name, label in sorted(labels.items()):
        audio, rate = sf.read(str(data / name), dtype="float32")
        speech: SpeechGate = energy_gate if gate == "energy" else default_gate(rate, opts.vad_threshold)
        results.append(judge(name, label, detect(audio, rate, opts, speech)))
    return summarise(results), results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="a split of the answer corpus")
    ap.add_argument("--json", type=Path, help="write the summary and every file's result here")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an AnswerOptions field (repeatable), e.g. --set person_end_silence_s=0.8",
    )
    ap.add_argument("--gate", choices=("silero", "energy"), default="silero", help="speech detector")
    args = ap.parse_args(argv)
    names = {f.name for f in fields(AnswerOptions)}
    overrides: dict[str, float] = {}
    for item in args.set:
        name, _, value = item.partition("=")
        if name not in names:
            ap.error(f"--set {item!r}: no such option; one of {', '.join(sorted(names))}")
        overrides[name] = float(value)
    opts = AnswerOptions(**overrides)
    summary, results = run(args.data, opts, args.gate)
    print(json.dumps(summary, indent=1))
    for r in results:
        if r.failure:
            print(f"  {r.failure}: {r.file} (first decision {r.first}, delay {r.delay_s})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        body = {
            "options": asdict(opts),
            "gate": args.gate,
            "summary": summary,
            "files": [asdict(r) for r in results],
        }
        args.json.write_text(json.dumps(body, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
