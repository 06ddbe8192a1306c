"""Transcript normalisation and word error rate, shared by the speech benchmarks.

Whisper writes "$25", "3.30" and "12th" where the references say "twenty five dollars", "three thirty" and
"twelfth". Both sides go through `normalize` (lower case, numbers, currency, ordinals and times written out as
words, punctuation stripped) before words are compared, so WER counts recognition errors, not formatting.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# one spelling of numbers for the whole project: the engine's (what Parley says is what WER expects)
from plugins.orpheus.engine.normalize import number_words as number_to_words
from plugins.orpheus.engine.normalize import ordinal_words as ordinal_to_words

_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents")}
_TITLES = {"dr": "doctor", "mr": "mister", "mrs": "missus", "ms": "miss"}
_CURRENCIES["£"] = ("pound", "pounds", "penny", "pence")


def _digits_after_point(digits: str) -> str:
    return " ".join(number_to_words(int(d)) for d in digits)


def _currency(m: re.Match[str]) -> str:
    one, many, sub_one, sub_many = _CURRENCIES[m.group(1)]
    whole = int(m.group(2).replace(",", ""))
    words = number_to_words(whole) + " " + (one if whole == 1 else many)
    scale = m.group(4)
    if scale:
        words = number_to_words(whole) + " " + scale.lower() + " " + many
    cents = m.group(3)
    if cents:
        c = int(cents.ljust(2, "0"))
        if c:
            words += " " + number_to_words(c) + " " + (sub_one if c == 1 else sub_many)
    return f" {words} "


def _time(m: re.Match[str]) -> str:
    hour, minute = int(m.group(1)), int(m.group(2))
    if minute == 0:
        return f" {number_to_words(hour)} o'clock "
    if minute < 10:
        return f" {number_to_words(hour)} oh {number_to_words(minute)} "
    return f" {number_to_words(hour)} {number_to_words(minute)} "


def _ordinal(m: re.Match[str]) -> str:
    return f" {ordinal_to_words(int(m.group(1)))} "


def _decimal(m: re.Match[str]) -> str:
    whole = number_to_words(int(m.group(1).replace(",", "")))
    return f" {whole} point {_digits_after_point(m.group(2))} "


def _year(n: int) -> str:
    if 2000 <= n < 2010:
        return number_to_words(n)
    high, low = divmod(n, 100)
    return (
        number_to_words(high)
        + " "
        + ("hundred" if low == 0 else ("oh " if low < 10 else "") + number_to_words(low))
    )


def _cardinal(m: re.Match[str]) -> str:
    """Plain numbers. Whisper writes codes said digit by digit ("eight two four six") as "8246": a bare
    run of 4+ digits is read digit by digit, except round thousands and years (1900-2099)."""
    raw = m.group(0)
    n = int(raw.replace(",", ""))
    if "," in raw or len(raw) < 4 or (len(raw) == 4 and n % 1000 == 0):
        return f" {number_to_words(n)} "
    if len(raw) == 4 and 1900 <= n <= 2099:
        return f" {_year(n)} "
    return " " + " ".join(number_to_words(int(d)) for d in raw) + " "


_NUM = r"\d{1,3}(?:,\d{3})+|\d+"
_RULES: tuple[tuple[re.Pattern[str], object], ...] = (
    (re.compile(r"([$€£])\s?(" + _NUM + r")(?:\.(\d{1,2}))?(?:\s?(thousand|million|billion)\b)?"), _currency),
    (re.compile(r"\b(\d{1,2})[:.]([0-5]\d)\b(?!\.\d)"), _time),
    (re.compile(r"\b(\d+)(?:st|nd|rd|th)\b", re.IGNORECASE), _ordinal),
    (re.compile(r"\b(\d+)%"), lambda m: f" {number_to_words(int(m.group(1)))} percent "),
    (re.compile(r"\b(" + _NUM + r")\.(\d+)\b"), _decimal),
    (re.compile(_NUM), _cardinal),
)


def normalize(text: str) -> str:
    """Lower-case words with numbers spelled out and punctuation removed, one space between words."""
    t = text.lower().replace("&", " and ")
    t = re.sub(r"\b([ap])\.\s?m\b\.?", r"\1m", t)  # "p.m." -> "pm"
    t = re.sub(r"\b(dr|mr|mrs|ms)\b\.?", lambda m: _TITLES[m.group(1)], t)
    for pattern, repl in _RULES:
        t = pattern.sub(repl, t)  # type: ignore[call-overload]
    t = re.sub(r"['’]", "", t)  # "I'm" -> "im", "o'clock" -> "oclock" on both sides
    t = re.sub(r"[^\w\s]|_", " ", t)
    return " ".join(t.split())


def edit_distance(ref: Sequence[str], hyp: Sequence[str]) -> int:
    """Word-level Levenshtein distance (substitutions + deletions + insertions)."""
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
        r, h = normalize(ref).split(), normalize(hyp).split()
        edits += edit_distance(r, h)
        words += len(r)
    return edits / words if words else 0.0
