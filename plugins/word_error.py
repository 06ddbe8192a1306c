"""How transcripts are compared: word and character error rates that count recognition errors, not formatting.

Whisper writes "$25", "3.30" and "12th" where references say "twenty five dollars", "three thirty" and
"twelfth". Both sides go through `compare_form` (lower case, numbers written out as plugins/spoken_words.py
says them, punctuation stripped) before words are compared. `cer` compares characters instead (Korean has
no agreed word split: "예약할게요" or "예약 할게요"): spaces and punctuation removed, Unicode-normalised,
numbers written out (Korean: Sino-Korean readings, native ones before counters, phone numbers digit by digit).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from plugins.spoken_words import (
    KO_DIGITS,
    digit_words,
    korean_number,
    number_words,
    ordinal_words,
    year_words,
)

_WER_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents")}
_WER_TITLES = {"dr": "doctor", "mr": "mister", "mrs": "missus", "ms": "miss"}
_WER_CURRENCIES["£"] = ("pound", "pounds", "penny", "pence")


def _currency(m: re.Match[str]) -> str:
    one, many, sub_one, sub_many = _WER_CURRENCIES[m.group(1)]
    whole = int(m.group(2).replace(",", ""))
    words = number_words(whole) + " " + (one if whole == 1 else many)
    scale = m.group(4)
    if scale:
        words = number_words(whole) + " " + scale.lower() + " " + many
    cents = m.group(3)
    if cents:
        c = int(cents.ljust(2, "0"))
        if c:
            words += " " + number_words(c) + " " + (sub_one if c == 1 else sub_many)
    return f" {words} "


def _time(m: re.Match[str]) -> str:
    hour, minute = int(m.group(1)), int(m.group(2))
    if minute == 0:
        return f" {number_words(hour)} o'clock "
    if minute < 10:
        return f" {number_words(hour)} oh {number_words(minute)} "
    return f" {number_words(hour)} {number_words(minute)} "


def _ordinal(m: re.Match[str]) -> str:
    return f" {ordinal_words(int(m.group(1)))} "


def _decimal(m: re.Match[str]) -> str:
    whole = number_words(int(m.group(1).replace(",", "")))
    return f" {whole} point {digit_words(m.group(2))} "


def _cardinal(m: re.Match[str]) -> str:
    """Plain numbers. Whisper writes codes said digit by digit ("three one nine seven") as "3197": a bare
    run of 4+ digits is read digit by digit, except round thousands and years (1900-2099)."""
    raw = m.group(0)
    n = int(raw.replace(",", ""))
    if "," in raw or len(raw) < 4 or (len(raw) == 4 and n % 1000 == 0):
        return f" {number_words(n)} "
    if len(raw) == 4 and 1900 <= n <= 2099:
        return f" {year_words(n)} "
    return " " + " ".join(number_words(int(d)) for d in raw) + " "


_WER_NUM = r"\d{1,3}(?:,\d{3})+|\d+"
_WER_RULES: tuple[tuple[re.Pattern[str], object], ...] = (
    (
        re.compile(r"([$€£])\s?(" + _WER_NUM + r")(?:\.(\d{1,2}))?(?:\s?(thousand|million|billion)\b)?"),
        _currency,
    ),
    (re.compile(r"\b(\d{1,2})[:.]([0-5]\d)\b(?!\.\d)"), _time),
    (re.compile(r"\b(\d+)(?:st|nd|rd|th)\b", re.IGNORECASE), _ordinal),
    (re.compile(r"\b(\d+)%"), lambda m: f" {number_words(int(m.group(1)))} percent "),
    (re.compile(r"\b(" + _WER_NUM + r")\.(\d+)\b"), _decimal),
    (re.compile(_WER_NUM), _cardinal),
)


def compare_form(text: str) -> str:
    """Lower-case words with numbers spelled out and punctuation removed, one space between words."""
    t = text.lower().replace("&", " and ")
    t = re.sub(r"\b([ap])\.\s?m\b\.?", r"\1m", t)  # "p.m." -> "pm"
    t = re.sub(r"\b(dr|mr|mrs|ms)\b\.?", lambda m: _WER_TITLES[m.group(1)], t)
    for pattern, repl in _WER_RULES:
        t = pattern.sub(repl, t)  # type: ignore[call-overload]
    t = re.sub(r"['’]", "", t)  # "I'm" -> "im", "o'clock" -> "oclock" on both sides
    t = re.sub(r"[^\w\s]|_", " ", t)
    return " ".join(t.split())


def edit_distance(ref: Sequence[str], hyp: Sequence[str]) -> int:
    """Levenshtein distance (substitutions + deletions + insertions) over words, or characters of a str."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def wer(refs: Sequence[str], hyps: Sequence[str]) -> float:
    """Corpus WER (total edits / total reference words) after normalising both sides."""
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    edits = words = 0
    for ref, hyp in zip(refs, hyps, strict=True):
        r, h = compare_form(ref).split(), compare_form(hyp).split()
        edits += edit_distance(r, h)
        words += len(r)
    return edits / words if words else 0.0


_KO_NATIVE_ONES = ["", "한", "두", "세", "네", "다섯", "여섯", "일곱", "여덟", "아홉"]
_KO_NATIVE_TENS = ["", "열", "스물", "서른", "마흔", "쉰", "예순", "일흔", "여든", "아흔"]
_KO_NATIVE_COUNTERS = ("시", "명", "개", "살", "마리", "잔", "병", "장", "그릇")


def korean_native_number(n: int) -> str:
    """Native Korean reading of 1-99 as said before a counter ("세 시", "두 명", "스무 살")."""
    tens, ones = divmod(n, 10)
    if n == 20:
        return "스무"
    return _KO_NATIVE_TENS[tens] + _KO_NATIVE_ONES[ones]


_KO_DIGIT_RUN = re.compile(r"\d[\d,]*")


def _ko_compare_number(m: re.Match[str]) -> str:
    """Digits as a Korean caller says them: phone and account numbers digit by digit ("010-1234" =
    공일공 일이삼사: a leading zero or a hyphen beside the run), 1-99 before a counter natively ("3시" =
    세 시), anything else as a Sino-Korean number ("5만" = 오만, "15일" = 십오일)."""
    raw, text = m.group(0), m.string
    beside_hyphen = text[m.start() - 1 : m.start()] == "-" or text[m.end() : m.end() + 1] == "-"
    if "," not in raw and (beside_hyphen or (raw.startswith("0") and len(raw) > 1)):
        return "".join("공" if d == "0" else KO_DIGITS[int(d)] for d in raw)
    n = int(raw.replace(",", ""))
    if 0 < n < 100 and text[m.end() :].lstrip().startswith(_KO_NATIVE_COUNTERS):
        return korean_native_number(n)
    return korean_number(n)


def cer_form(text: str, language: str = "en") -> str:
    """The characters a CER compares: NFKC, numbers written out, case folded, no spaces or punctuation."""
    t = unicodedata.normalize("NFKC", text)
    if language == "ko":
        t = _KO_DIGIT_RUN.sub(_ko_compare_number, t.replace("%", "퍼센트"))
    elif language == "en":
        t = compare_form(t)
    return re.sub(r"[\W_]+", "", t.casefold())


def cer(refs: Sequence[str], hyps: Sequence[str], language: str = "en") -> float:
    """Corpus character error rate (total character edits / total reference characters) on `cer_form`."""
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    edits = chars = 0
    for ref, hyp in zip(refs, hyps, strict=True):
        r, h = cer_form(ref, language), cer_form(hyp, language)
        edits += edit_distance(r, h)
        chars += len(r)
    return edits / chars if chars else 0.0
