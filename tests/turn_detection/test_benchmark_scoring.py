"""benchmarks.turns: the commit rule replayed on the virtual clock, the scoring, and its CLI errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.turns import (
    Case,
    CaseResult,
    Commit,
    VadSegment,
    load_noise_cases,
    main,
    make_noise_files,
    phone_line,
    score,
    separability,
    simulate_turn,
    stock_decider,
    summarise,
)


class FixedTranscriber:
    """Words by request time, fixed latency: the clock logic without a model."""

    def __init__(self, texts: list[tuple[float, str]], latency: float) -> None:
        self._texts, self._latency = texts, latency

    def transcribe(self, key: str, audio: np.ndarray, t0: float, t1: float) -> tuple[str, float, float]:
        text = next((t for until, t in self._texts if t1 <= until), self._texts[-1][1])
        return text, self._latency, 0.6


def _case(kind: str, segments: list[tuple[float, float]]) -> Case:
    return Case(file=f"{kind}.wav", kind=kind, segments=segments, audio=np.zeros(16000 * 6, np.float32))


def _seg(start: float, end: float, eos_after: float = 0.2) -> VadSegment:
    return VadSegment(
        start=start, speech_end=end, eos=end + eos_after, silence_onset=end + 0.03, pred_at=None
    )


def _run(case: Case, segs: list[VadSegment], texts: list[tuple[float, str]], decider) -> list[Commit]:  # type: ignore[no-untyped-def]
    commits, _ = simulate_turn(
        case,
        segs,
        FixedTranscriber(texts, 0.3),  # type: ignore[arg-type]
        None,
        pipeline="t",
        stt_request=lambda s: s.silence_onset,
        audio_at=lambda s: None,
        decider=decider,
        prefix_s=0.3,
    )
    return commits


def test_hesitation_held_past_the_pause_is_not_a_cutoff() -> None:
    case = _case("pause", [(0.2, 1.6), (2.4, 3.5)])
    segs = [_seg(0.2, 1.6), _seg(2.4, 3.5)]
    texts = [(2.0, "I'd like a table for"), (9.0, "I'd like a table for four.")]
    commits = _run(
        case,
        segs,
        texts,
        lambda text, p, c, line: (0.1, 2.0 if text.endswith("for") else 0.2, "x", None, None),
    )
    res = score(case, "t", commits)
    assert not res.false_cutoff and not res.missed
    # transcript requested 30 ms after the speech, 300 ms to decode: the turn ends 330 ms after the words
    assert res.endpoint_delay_ms == pytest.approx(330, abs=1)
    assert res.decision_delay_ms == pytest.approx(0, abs=1)


def test_committing_inside_the_pause_is_a_false_cutoff() -> None:
    case = _case("pause", [(0.2, 1.6), (2.4, 3.5)])
    segs = [_seg(0.2, 1.6), _seg(2.4, 3.5)]
    commits = _run(case, segs, [(9.0, "words.")], lambda text, p, c, line: (0.9, 0.2, "x", None, None))
    res = score(case, "t", commits)
    assert res.false_cutoff and res.endpoint_delay_ms is None


def test_a_cut_off_says_whether_the_recogniser_misheard_the_parts_last_word() -> None:
    """The diagnosis behind open-clause cut-offs: did the policy read what the caller said?"""

    def cut(heard: str) -> CaseResult:
        case = Case(
            file="p.wav",
            kind="pause",
            segments=[(0.2, 1.6), (2.4, 3.5)],
            audio=np.zeros(16000, np.float32),
            clause="open",
            parts=["Could you put me through to", "billing, please?"],
        )
        return score(
            case, "t", [Commit(at=2.0, ready=1.9, text=heard, probability=0.9, delay=0.2, reason="")]
        )

    misheard, heard = cut("Could you put me through, too."), cut("Could you put me through to...")
    assert misheard.misheard_end is True and heard.misheard_end is False
    assert summarise([misheard, heard], [])["open_cutoffs_misheard_end"] == 0.5
    held = score(_case("pause", [(0.2, 1.6), (2.4, 3.5)]), "t", [])
    assert held.misheard_end is None  # no cut, nothing to diagnose


def test_no_commit_within_three_seconds_is_missed_and_noise_turns_are_counted() -> None:
    done = _case("done", [(0.2, 1.5)])
    late = score(done, "t", [Commit(at=5.0, ready=1.8, text="x", probability=0.1, delay=3.5, reason="x")])
    assert late.missed
    noise = score(
        _case("noise", []), "t", [Commit(at=1.0, ready=1.0, text="you", probability=1, delay=0, reason="")]
    )
    summary = summarise([late], [noise])
    assert summary["missed_rate"] == 1.0 and summary["noise_turns"] == 1


def test_failures_count_cut_offs_finished_turns_held_over_1_5_s_and_missed_turns() -> None:
    done = _case("done", [(0.2, 1.5)])

    def answered(at: float) -> CaseResult:
        return score(done, "t", [Commit(at=at, ready=1.8, text="x", probability=0.9, delay=0.2, reason="x")])

    cut = score(  # and nothing after it: a file fails once
        _case("pause", [(0.2, 1.6), (2.4, 3.5)]),
        "t",
        [Commit(at=2.0, ready=1.9, text="words.", probability=0.9, delay=0.2, reason="x")],
    )
    prompt, held, missed = answered(1.9), answered(3.2), answered(5.0)
    assert summarise([cut, prompt, held, missed], [])["failures"] == {
        "cut_offs": 1,
        "held_over_1500ms": 1,
        "missed": 1,
        "total": 3,
    }


def test_stock_rule_uses_livekit_thresholds() -> None:
    assert stock_decider("x", 0.2)[1] == 2.5  # below v1-mini's 0.36 for en: max_delay
    assert stock_decider("x", 0.8)[1] == 0.3


def test_generated_noise_files_load(tmp_path: Path) -> None:
    make_noise_files(tmp_path, seconds=1.0)
    cases = load_noise_cases(tmp_path)
    assert len(cases) >= 6 and all(c.kind == "noise" and not c.segments for c in cases)


def test_cli_reports_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err
    (tmp_path / "labels.json").write_text("{not json")
    assert main(["--data", str(tmp_path)]) == 2
    assert "bad labels.json" in capsys.readouterr().err


def test_separability_compares_a_finished_turns_last_decision_with_a_hesitations_first() -> None:
    def decided(kind: str, *scores: tuple[float, float, float]) -> CaseResult:
        commits = [
            Commit(at=float(i), ready=0.0, text="x", probability=c, delay=0, reason="", audio_p=a, text_p=t)
            for i, (c, a, t) in enumerate(scores)
        ]
        return CaseResult(file="f", kind=kind, pipeline="t", commits=commits)

    results = [
        decided("done", (0.2, 0.1, 0.9), (0.9, 0.8, 0.9)),  # only its last decision counts: 0.9 / 0.8 / 0.9
        decided("pause", (0.5, 0.8, 0.1), (0.99, 0.99, 0.99)),  # only its first: 0.5 / 0.8 / 0.1
    ]
    assert separability(results) == {"text": 1.0, "audio": 0.5, "lm": None, "combined": 1.0}
    assert separability([decided("done", (0.9, 0.9, 0.9))]) == dict.fromkeys(
        ("text", "audio", "lm", "combined")
    )


def test_reference_words_are_the_parts_spoken_in_the_span() -> None:
    case = Case(
        "f.wav",
        "pause",
        [(0.3, 1.2), (2.5, 3.1), (4.0, 4.6)],
        np.zeros(16000 * 5, np.float32),
        parts=["My number is five five five,", "one two three,", "four five six seven."],
    )
    assert case.reference_words(0.0, 1.4) == "My number is five five five,"
    assert case.reference_words(0.0, 3.3) == "My number is five five five, one two three,"
    # after a commit the next turn starts at the next speech, less the VAD's prefix padding
    assert case.reference_words(2.2, 4.8) == "one two three, four five six seven."
    unlabelled = Case("g.wav", "done", [(0.3, 1.2)], np.zeros(16000, np.float32))
    assert unlabelled.reference_words(0.0, 2.0) is None


def test_reference_text_judges_the_corpus_words_not_the_decode() -> None:
    case = Case(
        "f.wav",
        "pause",
        [(0.3, 1.2), (2.5, 3.1)],
        np.zeros(16000 * 5, np.float32),
        parts=["I bought it from", "your shop."],
    )
    segs = [VadSegment(0.3, 1.2, 1.4, 1.25, 1.4), VadSegment(2.5, 3.1, 3.3, 3.15, 3.3)]
    seen: list[str] = []

    def decider(
        text: str, audio_p: float | None, conf: float | None, line: str
    ) -> tuple[float, float, str, None, None]:
        seen.append(text)
        return 1.0, 0.2, "test", None, None

    kwargs = dict(
        pipeline="parley",
        stt_request=lambda s: s.silence_onset,
        audio_at=lambda s: None,
        decider=decider,
        prefix_s=0.3,
    )
    decoded = FixedTranscriber([(1.25, "I bought it, Tom."), (3.15, "your shop.")], 0.3)
    simulate_turn(case, segs, decoded, None, **kwargs)  # type: ignore[arg-type]
    simulate_turn(case, segs, decoded, None, reference_text=True, **kwargs)  # type: ignore[arg-type]
    assert seen[0] == "I bought it, Tom." and seen[2] == "I bought it from"


def _level(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x[1600:-1600] ** 2)))


def test_phone_line_keeps_the_voice_band_and_drops_the_rest() -> None:
    """The barge-in benchmark's SIP caller: what is outside 300-3400 Hz is gone, the voice band stays,
    with no more than mu-law's quantisation added."""
    t = np.arange(16_000) / 16_000
    for hz, kept in ((1000, True), (100, False), (6000, False)):
        tone = (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)
        out = phone_line(tone)
        assert out.dtype == np.float32 and len(out) == len(tone)
        ratio = _level(out) / _level(tone)
        assert (ratio > 0.9) if kept else (ratio < 0.05), (hz, ratio)
    tone = (0.3 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)
    error = _level(phone_line(tone) - tone) / _level(tone)
    assert 0.0 < error < 0.1  # mu-law at 8 bits: about 3 % of the signal, never an exact copy
