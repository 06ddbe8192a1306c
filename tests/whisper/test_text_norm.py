"""The shared WER normalisation: formatting differences must not count as recognition errors."""

from __future__ import annotations

import pytest

from plugins.spoken_words import number_words, ordinal_words
from plugins.word_error import cer, cer_form, compare_form, edit_distance, wer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Please transfer $25 to my savings account.",
            "please transfer twenty five dollars to my savings account",
        ),
        ("Next Tuesday at 3.30.", "next tuesday at three thirty"),
        ("Next Tuesday at 3:30 p.m.", "next tuesday at three thirty pm"),
        ("at 3:05", "at three oh five"),
        ("at 4:00", "at four oclock"),
        ("the 12th of March", "the twelfth of march"),
        ("the 1st, 2nd, 3rd and 21st", "the first second third and twenty first"),
        ("It costs $1,250.50", "it costs one thousand two hundred fifty dollars fifty cents"),
        ("$1", "one dollar"),
        ("£5", "five pounds"),
        ("50% off", "fifty percent off"),
        ("3.5 miles", "three point five miles"),
        ("I'm locked out", "im locked out"),
        ("twenty-five", "twenty five"),
        ("David Chen, and I'm", "david chen and im"),
        ("  Hello,   World! ", "hello world"),
        ("My account number is 8246.", "my account number is eight two four six"),
        ("in 2024", "in twenty twenty four"),
        ("in 1999 and 2005", "in nineteen ninety nine and two thousand five"),
        ("about 3000 miles, or 10,500", "about three thousand miles or ten thousand five hundred"),
        ("with Dr. Morgan and Mr Smith", "with doctor morgan and mister smith"),
        ("", ""),
    ],
)
def test_normalize(text: str, expected: str) -> None:
    assert compare_form(text) == expected


def test_number_words() -> None:
    assert number_words(0) == "zero"
    assert number_words(105) == "one hundred five"
    assert number_words(2024) == "two thousand twenty four"
    assert number_words(3_000_001) == "three million one"
    assert ordinal_words(12) == "twelfth"
    assert ordinal_words(40) == "fortieth"
    assert ordinal_words(103) == "one hundred third"


def test_both_sides_normalised_before_counting() -> None:
    refs = ["Please transfer twenty five dollars.", "Schedule it at three thirty"]
    hyps = ["please transfer $25", "Schedule it at 3.30."]
    assert wer(refs, hyps) == 0.0


def test_wer_counts_substitutions_deletions_insertions() -> None:
    assert edit_distance(["a", "b", "c"], ["a", "x", "c", "d"]) == 2
    assert wer(["one two three four"], ["one three four five"]) == pytest.approx(0.5)
    assert wer([], []) == 0.0
    with pytest.raises(ValueError):
        wer(["a"], [])


def test_cer_ignores_spaces_punctuation_and_unicode_forms() -> None:
    assert cer(["예약을 바꾸고 싶어요."], ["예약을 바꾸고싶어요"], "ko") == 0.0  # Korean word splits vary
    assert cer(["ＡＢＣ"], ["abc"]) == 0.0  # NFKC: full-width letters are the same letters
    assert cer(["abcd"], ["abxd"]) == pytest.approx(0.25)
    assert cer(["한글"], [""], "ko") == 1.0
    assert cer([], []) == 0.0
    with pytest.raises(ValueError):
        cer(["a"], [])


@pytest.mark.parametrize(
    ("written", "spoken"),
    [
        ("010-1234-5678", "공일공 일이삼사 오육칠팔"),
        ("5만 원", "오만 원"),
        ("50,000원", "오만 원"),
        ("3시 30분", "세 시 삼십 분"),
        ("2명", "두 명"),
        ("90년 3월 15일", "구십 년 삼월 십오일"),
    ],
)
def test_korean_cer_reads_digits_as_said(written: str, spoken: str) -> None:
    assert cer_form(written, "ko") == cer_form(spoken, "ko")


def test_english_cer_writes_numbers_out() -> None:
    assert cer(["Send twenty five dollars."], ["send $25"]) == 0.0
