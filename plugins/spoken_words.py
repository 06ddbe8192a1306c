"""Text as the voices say it: `normalize(text, language)` turns text into words a TTS model can say.

Numbers, currency, dates, times, units and abbreviations are spelled out. Orpheus reads digits and symbols
badly ("$25" may come out as "dollar two five"), so the engine speaks words only. English is complete; Korean
gets Sino-Korean numbers (the common reading for prices, dates and counts) and otherwise passes through.
Emotive tags (`<laugh>`) are left untouched. The number words here are also what transcripts are compared
in (plugins/word_error.py), so "$25" is "twenty five dollars" for both.
"""

from __future__ import annotations

import re

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


def digit_words(s: str) -> str:
    return " ".join(_ONES[int(d)] for d in s)


def _decimal_words(int_part: str, frac: str) -> str:
    whole = number_words(int(int_part.replace(",", "") or "0"))
    return f"{whole} point {digit_words(frac)}" if frac else whole


def year_words(y: int) -> str:
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
            f"{_MONTHS[int(m.group(2)) - 1]} {ordinal_words(int(m.group(3)))}, {year_words(int(m.group(1)))}"
            if 1 <= int(m.group(2)) <= 12 and 1 <= int(m.group(3)) <= 31
            else m.group(0)
        ),
        text,
    )
    text = _RE_MONTH_DAY.sub(
        lambda m: (
            f"{m.group(1)} {ordinal_words(int(m.group(2)))}"
            + (f", {year_words(int(m.group(3)))}" if m.group(3) else "")
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
    text = _RE_YEAR.sub(lambda m: year_words(int(m.group(1))), text)
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


KO_DIGITS = ["영", "일", "이", "삼", "사", "오", "육", "칠", "팔", "구"]


def korean_number(n: int) -> str:
    """Sino-Korean reading of a non-negative integer (일, 십, 백, 천, 만, 억, 조). Past 조's range (10^16
    and up: no one says such a number as one amount) the digits are read one by one, as for an account
    number, so any digit string an LLM or a recogniser writes can be spoken and compared."""
    if n == 0:
        return "영"
    if n >= 10**16:
        return "".join("공" if d == "0" else KO_DIGITS[int(d)] for d in str(n))
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
            out += ("" if d == 1 else KO_DIGITS[d]) + name
    if n:
        out += KO_DIGITS[n]
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
