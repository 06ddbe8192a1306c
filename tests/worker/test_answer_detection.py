"""Answer detection on outbound calls (worker/answer_detection.py), on speech the CPU voice renders, heard
through a phone line at 8 kHz: a person is greeted after their pick-up line, a machine's message starts
after its beep, never before it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.answer_audio import PHONE, answer, beep, quiet, said, sit
from worker.answer_detection import AnswerDetector, AnswerOptions, detect


def test_a_person_is_greeted_soon_after_their_hello() -> None:
    audio, t = answer(quiet(0.6), said("Hello?"), quiet(5.0))
    (decision,) = detect(audio, PHONE)
    assert decision.kind == "person"
    assert t[1] + 0.4 < decision.at_s < t[1] + 1.0, (decision, t)


def test_a_machine_gets_its_message_after_the_beep_not_before() -> None:
    greeting = said(
        "Hi, you have reached Alex. I can't come to the phone, please leave a message after the tone."
    )
    audio, t = answer(quiet(0.3), greeting, quiet(0.6), beep(1000, 0.5), quiet(5.0))
    decisions = detect(audio, PHONE)
    # the voice pauses between sentences long enough to read as a person at first: the agent may begin its
    # greeting over the machine's, and stops it for the message when the beep ends
    assert decisions[-1].kind == "beep" and all(d.kind == "person" for d in decisions[:-1]), decisions
    assert t[3] <= decisions[-1].at_s < t[3] + 0.4
    assert decisions[-1].beep_hz == pytest.approx(1000, abs=20)


def test_a_double_beep_is_waited_out() -> None:
    greeting = said("This is Sam. I am away from my desk, please leave a brief message.")
    pieces = (quiet(0.2), greeting, quiet(0.5), beep(850, 0.2), quiet(0.1), beep(850, 0.2), quiet(4.0))
    audio, t = answer(*pieces)
    decisions = detect(audio, PHONE)
    assert decisions[-1].kind == "beep" and decisions[-1].at_s >= t[5], (decisions, t)
    assert all(d.kind == "person" for d in decisions[:-1])


def test_a_short_machine_greeting_is_greeted_then_its_late_beep_is_heard() -> None:
    audio, t = answer(quiet(0.3), said("Leave a message."), quiet(1.4), beep(1400, 0.4), quiet(5.0))
    kinds = [(d.kind, d.at_s) for d in detect(audio, PHONE)]
    assert [k for k, _ in kinds] == ["person", "beep"], kinds
    assert kinds[1][1] >= t[3]


def test_a_number_not_in_service_is_known_by_its_three_tones() -> None:
    intercept = said("The number you have dialed is not in service. Please check the number and try again.")
    audio, t = answer(quiet(0.4), sit(), quiet(0.1), intercept, quiet(3.0))
    (decision,) = detect(audio, PHONE)
    assert decision.kind == "not_in_service" and t[1] < decision.at_s < t[1] + 0.2, (decision, t)
    # three beeps of one pitch, or tones in the wrong order, are not one
    again, _ = answer(quiet(0.4), beep(1776.7, 0.3), beep(1370.6, 0.3), beep(913.8, 0.3), quiet(3.0))
    assert "not_in_service" not in [d.kind for d in detect(again, PHONE)]


def test_nobody_speaking_is_greeted_after_the_initial_silence() -> None:
    audio, _ = answer(quiet(6.0))
    (decision,) = detect(audio, PHONE)
    assert decision.kind == "silence" and decision.at_s == pytest.approx(2.5, abs=0.05)


def test_a_long_greeting_without_a_beep_is_greeted_once_it_stops() -> None:
    greeting = said("Good afternoon, Lakeside Veterinary, this is Jen speaking, how can I help you today?")
    audio, t = answer(quiet(0.4), greeting, quiet(5.0))
    (decision,) = detect(audio, PHONE)
    assert decision.kind == "long_greeting" and t[1] + 1.3 < decision.at_s < t[1] + 2.0, (decision, t)


def test_speech_alone_is_never_taken_for_a_beep(speech_audio: Any) -> None:
    """Ten sentences said one after another, with pauses: vowels hold a pitch, but not like a beep."""
    import soundfile as sf

    lines = [sf.read(str(p), dtype="float32")[0] for p in sorted((speech_audio / "asr").glob("*.wav"))]
    pieces = [piece for line in lines for piece in (line, quiet(0.3))]
    audio, _ = answer(*pieces)
    det = AnswerDetector(PHONE, AnswerOptions(late_beep_s=30.0))
    assert all(d.kind != "beep" for d in det.feed(audio))


def test_frames_fed_in_any_sizes_decide_the_same() -> None:
    audio, _ = answer(quiet(0.3), said("Leave a message."), quiet(1.4), beep(1400, 0.4), quiet(5.0))
    whole = detect(audio, PHONE)
    det, pieces = AnswerDetector(PHONE), []
    for i in range(0, len(audio), 333):  # not a frame's multiple
        pieces += det.feed((audio[i : i + 333] * 32767).astype(np.int16))
    assert [(d.kind, d.at_s) for d in pieces] == [(d.kind, d.at_s) for d in whole]


def test_bad_settings_and_rates_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="8 or 16 kHz"):
        AnswerDetector(48000)
    with pytest.raises(ValueError, match="initial_silence_s"):
        AnswerOptions(initial_silence_s=0)
    with pytest.raises(ValueError, match="tone purities"):
        AnswerOptions(tone_purity=0.8, tone_hold_purity=0.9)


@pytest.mark.parametrize(
    ("text", "language", "machine"),
    [
        ("Hi, you've reached the Garcias. Leave us a message after the beep!", "en", True),
        ("The subscriber you have called is not available.", "en", True),
        ("Welcome to the voice mail box of extension two one four.", "en", True),
        ("Sorry I missed your call, I'll get back to you.", "en", True),
        ("Hello?", "en", False),
        ("Thanks for calling Riverside Books, this is Ana, what can I do for you?", "en", False),
        ("Hi, who's calling, please?", "en", False),
        ("지금은 전화를 받을 수 없습니다. 삐 소리 후에 메시지를 남겨 주세요.", "ko", True),
        ("여보세요?", "ko", False),
        ("Leave a message.", "fr", False),  # no list for the language: never a machine by its words
    ],
)
def test_a_voicemail_greeting_is_known_by_its_words(text: str, language: str, machine: bool) -> None:
    from worker.answer_detection import sounds_like_voicemail

    assert sounds_like_voicemail(text, language) is machine
