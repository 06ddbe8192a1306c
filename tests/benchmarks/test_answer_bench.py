"""benchmarks.answer: what counts as a failure when an outbound call is answered, and both detectors run
over a small answer folder (a person's "Hello?", a machine's greeting and beep) written like the corpus."""

from __future__ import annotations

import json
from pathlib import Path

import soundfile as sf

from benchmarks.answer import AsteriskAmd, judge, run
from tests.answer_audio import PHONE, answer, beep, quiet, said
from worker.answer_detection import AnswerDecision, AnswerOptions

PERSON = {"kind": "person", "speech_end_s": 1.0}
MACHINE = {"kind": "machine", "speech_end_s": 4.0, "beep_end_s": 5.0}
BEEPLESS = {"kind": "machine", "speech_end_s": 4.0}


def test_what_a_caller_would_count_as_a_failure() -> None:
    greet, message = AnswerDecision("person", 1.6, 0.5), AnswerDecision("beep", 5.27, 3.0)
    assert judge("p", PERSON, [greet]).failure is None and judge("p", PERSON, [greet]).delay_s == 0.6
    assert judge("p", PERSON, [message]).failure == "message_to_person"
    assert judge("p", PERSON, []).failure == "never_greeted"
    assert judge("m", MACHINE, [message]).failure is None
    late = judge("m", MACHINE, [greet, message])  # greeted over its greeting, then the beep: recovered
    assert late.failure is None and late.outcome == "greeted_then_message"
    assert judge("m", MACHINE, [AnswerDecision("beep", 4.5, 3.0)]).failure == "message_before_beep"
    assert judge("m", MACHINE, [AnswerDecision("long_greeting", 5.5, 3.0)]).failure == "greeted_machine"
    assert judge("m", BEEPLESS, [AnswerDecision("long_greeting", 5.5, 3.0)]).failure is None
    assert judge("m", BEEPLESS, [AnswerDecision("beep", 3.0, 2.0)]).failure == "message_over_greeting"
    intercept, gone = {"kind": "intercept", "speech_end_s": 5.0}, AnswerDecision("not_in_service", 1.3, 0.0)
    assert (
        judge("i", intercept, [gone]).failure is None and judge("i", intercept, [gone]).outcome == "hung_up"
    )
    assert judge("i", intercept, [message]).failure == "missed_intercept"
    assert judge("p", PERSON, [gone]).failure == "hung_up_on_answer"


def test_both_detectors_over_a_small_answer_folder(tmp_path: Path) -> None:
    hello, t_hello = answer(quiet(0.5), said("Hello?"), quiet(4.0))
    greeting = said("Hi, you have reached the Thompsons, we are not home right now, leave a message.")
    machine, t_machine = answer(quiet(0.3), greeting, quiet(0.5), beep(1000, 0.5), quiet(4.0))
    sf.write(tmp_path / "person_00_0.wav", hello, PHONE, subtype="ULAW")
    sf.write(tmp_path / "machine_00_0.wav", machine, PHONE, subtype="ULAW")
    labels = {
        "person_00_0.wav": {"kind": "person", "speech_end_s": t_hello[1]},
        "machine_00_0.wav": {"kind": "machine", "speech_end_s": t_machine[1], "beep_end_s": t_machine[3]},
    }
    (tmp_path / "labels.json").write_text(json.dumps(labels))
    parley, _ = run(tmp_path, AnswerOptions())
    assert parley["failures"] == 0 and parley["persons"] == 1 and parley["machines_with_beep"] == 1
    assert parley["message_after_beep_ms"]["p50"] is not None
    asterisk, results = run(tmp_path, AnswerOptions(), asterisk=AsteriskAmd())
    by_file = {r.file: r for r in results}
    assert by_file["person_00_0.wav"].outcome == "greeted"  # one word, then quiet: HUMAN
    # MACHINE (too many words), then WaitForSilence: the message only after 1.5 s of quiet past the beep
    assert by_file["machine_00_0.wav"].outcome == "message"
    assert asterisk["message_after_beep_ms"]["p50"] >= 1400
