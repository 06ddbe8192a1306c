"""Text as it is spoken, in one place: what the TTS says, how transcripts are compared, and how phrases are
keyed. Three jobs, one set of number rules, so "$25" is "twenty five dollars" for all of them.

- `normalize(text, language)`: text → words a TTS model can say (numbers, currency, dates, times, units and
  abbreviations spelled out). Orpheus reads digits and symbols badly ("$25" may come out as "dollar two
  five"), so the engine speaks words only. English is complete; Korean gets Sino-Korean numbers (the
  common reading for prices, dates and counts) and otherwise passes through. Emotive tags (`<laugh>`) are
  left untouched.
- `compare_form(text)` and `wer`: Whisper writes "$25", "3.30" and "12th" where references say "twenty five
  dollars", "three thirty" and "twelfth". Both sides go through `compare_form` (lower case, numbers written
  out, punctuation stripped) before words are compared, so WER counts recognition errors, not formatting.
  `cer` compares characters instead (Korean has no agreed word split: "예약할게요" or "예약 할게요"):
  spaces and punctuation removed, Unicode-normalised, numbers written out (Korean: Sino-Korean readings,
  native ones before counters, phone numbers digit by digit).
- `phrase_key(text)`: the canonical form of a cached phrase, so "Sure." and " sure " hit the same audio. Case,
  width, quote style, spacing and a trailing full stop do not change how a phrase is spoken; a question or
  exclamation mark does, so those are kept.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

# --- what the TTS says ----------------------------------------------------------------------------------

_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (1000, "thousand"))
_ORDINAL_IRREGULAR = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_CURRENCIES = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", "", ""),
    "₩": ("won", "won", "", ""),
}
_UNITS = {
    "km": ("kilometer", "kilometers"),
    "m": ("meter", "meters"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "kg": ("kilogram", "kilograms"),
    "g": ("gram", "grams"),
    "mg": ("milligram", "milligrams"),
    "lb": ("pound", "pounds"),
    "lbs": ("pound", "pounds"),
    "mi": ("mile", "miles"),
    "ft": ("foot", "feet"),
    "in": ("inch", "inches"),
    "l": ("liter", "liters"),
    "ml": ("milliliter", "milliliters"),
    "mph": ("mile per hour", "miles per hour"),
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "kb": ("kilobyte", "kilobytes"),
    "mb": ("megabyte", "megabytes"),
    "gb": ("gigabyte", "gigabytes"),
    "tb": ("terabyte", "terabytes"),
    "ms": ("millisecond", "milliseconds"),
    "s": ("second", "seconds"),
    "h": ("hour", "hours"),
    "min": ("minute", "minutes"),
    "hz": ("hertz", "hertz"),
    "khz": ("kilohertz", "kilohertz"),
    "°c": ("degree Celsius", "degrees Celsius"),
    "°f": ("degree Fahrenheit", "degrees Fahrenheit"),
    "%": ("percent", "percent"),
}
_ABBREVIATIONS = {
    "mr.": "mister",
    "mrs.": "missus",
    "ms.": "miz",
    "dr.": "doctor",
    "prof.": "professor",
    "st.": "saint",
    "jr.": "junior",
    "sr.": "senior",
    "vs.": "versus",
    "etc.": "et cetera",
    "e.g.": "for example",
    "i.e.": "that is",
    "approx.": "approximately",
    "no.": "number",
    "dept.": "department",
    "mt.": "mount",
    "ave.": "avenue",
    "&": "and",
    "@": "at",
    "+": "plus",
}


def number_words(n: int) -> str:
    """Cardinal English words for an integer (negative allowed)."""
    if n < 0:
        return "minus " + number_words(-n)
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + ("" if ones == 0 else " " + _ONES[ones])
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return _ONES[hundreds] + " hundred" + ("" if rest == 0 else " " + number_words(rest))
    for value, name in _SCALES:
        if n >= value:
            high, rest = divmod(n, value)
            return number_words(high) + " " + name + ("" if rest == 0 else " " + number_words(rest))
    raise AssertionError("unreachable")


def ordinal_words(n: int) -> str:
    words = number_words(n).split(" ")
    last = words[-1]
    if last in _ORDINAL_IRREGULAR:
        last = _ORDINAL_IRREGULAR[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return " ".join([*words[:-1], last])


def _digits(s: str) -> str:
    return " ".join(_ONES[int(d)] for d in s)


def _decimal_words(int_part: str, frac: str) -> str:
    whole = number_words(int(int_part.replace(",", "") or "0"))
    return f"{whole} point {_digits(frac)}" if frac else whole


def _year_words(y: int) -> str:
    if 2000 <= y < 2010 or y % 1000 == 0 or y < 1100:
        return number_words(y)
    high, low = divmod(y, 100)
    if low == 0:
        return number_words(high) + " hundred"
    return number_words(high) + (" oh " + _ONES[low] if low < 10 else " " + number_words(low))


def _time_words(h: int, m: int, suffix: str) -> str:
    hour = number_words(h)
    if m == 0:
        core = hour + (" o'clock" if not suffix else "")
    elif m < 10:
        core = f"{hour} oh {_ONES[m]}"
    else:
        core = f"{hour} {number_words(m)}"
    if suffix:
        core += " " + " ".join(suffix.replace(".", "").lower())
    return core


def _money(symbol: str, amount: str, scale: str) -> str:
    one, many, sub_one, sub_many = _CURRENCIES[symbol]
    whole_s, _, frac = amount.replace(",", "").partition(".")
    whole = int(whole_s or "0")
    if scale:
        return f"{_decimal_words(whole_s, frac)} {scale.lower()} {many}"
    words = f"{number_words(whole)} {one if whole == 1 else many}"
    cents = int((frac + "00")[:2]) if frac else 0
    if cents and sub_one:
        words += f" and {number_words(cents)} {sub_one if cents == 1 else sub_many}"
    return words


_RE_MONEY = re.compile(
    r"([$€£¥₩])\s?(\d[\d,]*(?:\.\d+)?)(?:\s?(thousand|million|billion|trillion|[kKmMbB])\b)?"
)
_RE_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_RE_MONTH_DAY = re.compile(r"\b(" + "|".join(_MONTHS) + r")\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(\d{4})\b)?")
_RE_TIME = re.compile(r"\b(\d{1,2}):(\d{2})(?:\s?([AaPp]\.?[Mm]\.?))?(?![\d:])")
_RE_HOUR_AMPM = re.compile(r"\b(\d{1,2})\s?([AaPp]\.?[Mm]\.?)(?=\W|$)")
_RE_ORDINAL = re.compile(r"\b(\d+)(st|nd|rd|th)\b")
_RE_PERCENT = re.compile(r"(-?\d[\d,]*(?:\.\d+)?)\s?%")
_UNIT_ALT = "|".join(sorted((re.escape(u) for u in _UNITS if u != "%"), key=len, reverse=True))
_RE_UNIT = re.compile(r"((?<![\w-])-?\d[\d,]*(?:\.\d+)?)\s?(" + _UNIT_ALT + r")(?![\w/])", re.IGNORECASE)
_RE_YEAR = re.compile(r"\b(1[1-9]\d\d|20\d\d)\b(?!\s*(?:" + _UNIT_ALT + r")\b)")
_RE_NUMBER = re.compile(r"(?<![\w.])(-?)(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\w])")
_RE_ABBR = re.compile(
    r"(?<!\w)("
    + "|".join(re.escape(a) for a in sorted(_ABBREVIATIONS, key=len, reverse=True))
    + r")(?=\s|$)",
    re.IGNORECASE,
)
_SCALE_SUFFIX = {"k": "thousand", "m": "million", "b": "billion"}


def normalize_en(text: str) -> str:
    """Spell out everything an English voice should not read symbol by symbol."""
    text = _RE_MONEY.sub(
        lambda m: _money(
            m.group(1), m.group(2), _SCALE_SUFFIX.get((m.group(3) or "").lower(), m.group(3) or "")
        ),
        text,
    )
    text = _RE_ISO_DATE.sub(
        lambda m: (
            f"{_MONTHS[int(m.group(2)) - 1]} {ordinal_words(int(m.group(3)))}, {_year_words(int(m.group(1)))}"
            if 1 <= int(m.group(2)) <= 12 and 1 <= int(m.group(3)) <= 31
            else m.group(0)
        ),
        text,
    )
    text = _RE_MONTH_DAY.sub(
        lambda m: (
            f"{m.group(1)} {ordinal_words(int(m.group(2)))}"
            + (f", {_year_words(int(m.group(3)))}" if m.group(3) else "")
        ),
        text,
    )
    text = _RE_TIME.sub(
        lambda m: (
            _time_words(int(m.group(1)), int(m.group(2)), m.group(3) or "")
            if int(m.group(1)) < 24 and int(m.group(2)) < 60
            else m.group(0)
        ),
        text,
    )
    text = _RE_HOUR_AMPM.sub(lambda m: _time_words(int(m.group(1)), 0, m.group(2)), text)
    text = _RE_ORDINAL.sub(lambda m: ordinal_words(int(m.group(1))), text)
    text = _RE_PERCENT.sub(lambda m: _number_text(m.group(1)) + " percent", text)
    text = _RE_UNIT.sub(lambda m: _unit(m.group(1), m.group(2)), text)
    text = _RE_YEAR.sub(lambda m: _year_words(int(m.group(1))), text)
    text = _RE_NUMBER.sub(
        lambda m: ("minus " if m.group(1) else "") + _decimal_words(m.group(2), m.group(3) or ""), text
    )
    text = _RE_ABBR.sub(lambda m: _ABBREVIATIONS[m.group(1).lower()], text)
    return text


def _number_text(s: str) -> str:
    if s.startswith("-"):
        return "minus " + _number_text(s[1:])
    whole, _, frac = s.partition(".")
    return _decimal_words(whole, frac)


def _unit(amount: str, unit: str) -> str:
    one, many = _UNITS[unit.lower()]
    return f"{_number_text(amount)} {one if amount == '1' else many}"


_KO_DIGITS = ["영", "일", "이", "삼", "사", "오", "육", "칠", "팔", "구"]


def korean_number(n: int) -> str:
    """Sino-Korean reading of a non-negative integer (일, 십, 백, 천, 만, 억, 조). Past 조's range (10^16
    and up: no one says such a number as one amount) the digits are read one by one, as for an account
    number, so any digit string an LLM or a recogniser writes can be spoken and compared."""
    if n == 0:
        return "영"
    if n >= 10**16:
        return "".join("공" if d == "0" else _KO_DIGITS[int(d)] for d in str(n))
    parts = []
    for value, name in ((10**12, "조"), (10**8, "억"), (10**4, "만"), (1, "")):
        chunk, n = divmod(n, value)
        if chunk:
            parts.append(_ko_below_10000(chunk, omit_one=name == "만") + name)
    return " ".join(parts)


def _ko_below_10000(n: int, omit_one: bool) -> str:
    out = ""
    for value, name in ((1000, "천"), (100, "백"), (10, "십")):
        d, n = divmod(n, value)
        if d:
            out += ("" if d == 1 else _KO_DIGITS[d]) + name
    if n:
        out += _KO_DIGITS[n]
    if omit_one and out == "일":
        return ""
    return out


_RE_KO_NUMBER = re.compile(r"\d[\d,]*")


def normalize_ko(text: str) -> str:
    text = text.replace("%", " 퍼센트").replace("₩", "")
    return _RE_KO_NUMBER.sub(lambda m: korean_number(int(m.group(0).replace(",", ""))), text)


def normalize(text: str, language: str = "en") -> str:
    if language == "ko":
        return normalize_ko(text)
    return normalize_en(text)


# --- how transcripts are compared ------------------------------------------------------------------------

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
    return f" {whole} point {_digits(m.group(2))} "


def _cardinal(m: re.Match[str]) -> str:
    """Plain numbers. Whisper writes codes said digit by digit ("three one nine seven") as "3197": a bare
    run of 4+ digits is read digit by digit, except round thousands and years (1900-2099)."""
    raw = m.group(0)
    n = int(raw.replace(",", ""))
    if "," in raw or len(raw) < 4 or (len(raw) == 4 and n % 1000 == 0):
        return f" {number_words(n)} "
    if len(raw) == 4 and 1900 <= n <= 2099:
        return f" {_year_words(n)} "
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
        return "".join("공" if d == "0" else _KO_DIGITS[int(d)] for d in raw)
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


# --- how cached phrases are keyed -------------------------------------------------------------------------

_QUOTES = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "–": "-", "—": "-", "…": "..."})
_SPACE = re.compile(r"\s+")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.!?;:])")
_TRAILING_STOPS = re.compile(r"[.。]+$")


def phrase_key(text: str) -> str:
    """Canonical form of a phrase for cache keys (idempotent)."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    text = _SPACE.sub(" ", text).strip()
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    text = _TRAILING_STOPS.sub("", text).strip()
    return text
