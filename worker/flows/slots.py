"""Deterministic slot parsers: what a caller said → a date, a time, a name, one of a list, a phone, an email.

They run before any LLM (issue 63): a 135M model cannot be trusted to turn "Tuesday morning at nine" into a
date, and these rules cannot invent one. Each parser returns None when the text does not hold its kind, so
the flow asks for it instead of guessing. Times are read for a business: a bare "at two" is 2 p.m.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from collections.abc import Iterable, Mapping


def _wordlist(text: str) -> tuple[str, ...]:
    return tuple(text.split())


WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY_ALIASES = {"tues": 1, "weds": 2, "thurs": 3, "thur": 3}
MONTHS = _wordlist("january february march april may june july august september october november december")
_NUMBER_WORDS = _wordlist(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty"
)
_NUMBERS = {w: i for i, w in enumerate(_NUMBER_WORDS)}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50}
_ORDINAL_WORDS = _wordlist(
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
    "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth"
)
_ORDINALS = {w: i + 1 for i, w in enumerate(_ORDINAL_WORDS)}
_ORDINALS.update({"twenty-first": 21, "twenty-second": 22, "twenty-third": 23, "thirtieth": 30})

_YES = {"yes", "yeah", "yep", "yup", "sure", "correct", "right", "perfect", "great", "okay", "ok", "fine"}
_YES_PHRASES = ("sounds good", "please do", "go ahead", "that works", "that's right", "book it", "do it")
_NO = {"no", "nope", "nah", "wrong", "incorrect"}
_NO_PHRASES = ("not right", "that's not", "change it", "wait")


def words(text: str) -> list[str]:
    """Lower-case words, apostrophes and hyphens kept inside a word ("o'clock", "check-up")."""
    return re.findall(r"[a-z0-9]+(?:['’-][a-z0-9]+)*", text.lower().replace("’", "'"))


def _norm(text: str) -> str:
    return " " + " ".join(words(text)) + " "


# --- dates ----------------------------------------------------------------------------------------------


def parse_date(text: str, today: dt.date) -> dt.date | None:
    """A day from "today", "tomorrow", a weekday ("Tuesday", "this Friday", "next Friday"), "December 9",
    "the 9th" or 2026-12-09. A bare weekday is its next occurrence after today; "next" a weekday of the
    following week when the next occurrence falls in this one."""
    iso = re.search(r"\b(\d{4})-(\d{2})-(\d{2})\b", text)
    if iso:
        try:
            return dt.date(int(iso[1]), int(iso[2]), int(iso[3]))
        except ValueError:
            return None
    w = words(text)
    s = " ".join(w)
    if "day after tomorrow" in s:
        return today + dt.timedelta(days=2)
    if "tomorrow" in w:
        return today + dt.timedelta(days=1)
    if "today" in w:
        return today
    for i, token in enumerate(w):
        day = WEEKDAYS.index(token) if token in WEEKDAYS else _WEEKDAY_ALIASES.get(token)
        if day is None:
            continue
        ahead = (day - today.weekday()) % 7 or 7
        when = today + dt.timedelta(days=ahead)
        if i > 0 and w[i - 1] == "next" and when.isocalendar()[1] == today.isocalendar()[1]:
            when += dt.timedelta(days=7)
        return when
    return _month_day(w, today)


def _day_number(token: str) -> int | None:
    m = re.fullmatch(r"(\d{1,2})(?:st|nd|rd|th)?", token)
    if m:
        return int(m[1])
    return _ORDINALS.get(token)


def _month_day(w: list[str], today: dt.date) -> dt.date | None:
    """ "December 9", "9th of December", "the ninth" (this month, or next if it has passed)."""
    month = day = None
    for i, token in enumerate(w):
        if token in MONTHS:
            month = MONTHS.index(token) + 1
            after = _day_number(w[i + 1]) if i + 1 < len(w) else None
            before = _day_number(w[i - 2]) if i >= 2 and w[i - 1] == "of" else None
            before = before or (_day_number(w[i - 1]) if i >= 1 else None)
            day = after or before
            break
    if month is None:
        for i, token in enumerate(w):
            if i > 0 and w[i - 1] == "the" and (n := _day_number(token)) and not token.isdigit():
                day = n
                break
            if i > 0 and w[i - 1] == "the" and re.fullmatch(r"\d{1,2}(st|nd|rd|th)", token):
                day = int(re.sub(r"\D", "", token))
                break
    if day is None or not 1 <= day <= 31:
        return None
    year, month = today.year, month or today.month
    for _ in range(2):
        try:
            when = dt.date(year, month, day)
        except ValueError:
            return None
        if when >= today:
            return when
        month, year = (1, year + 1) if month == 12 else (month + 1, year)
    return None


def parse_weekday(text: str) -> str | None:
    for token in words(text):
        if token in WEEKDAYS:
            return token
        if token in _WEEKDAY_ALIASES:
            return WEEKDAYS[_WEEKDAY_ALIASES[token]]
    return None


# --- times ----------------------------------------------------------------------------------------------

_HOUR_WORD = "|".join(sorted((w for w, n in _NUMBERS.items() if 1 <= n <= 12), key=len, reverse=True))
_MINUTE_WORD = r"(?:oh five|fifteen|thirty|forty[- ]five|forty|forty-five|ten|twenty|fifty|o'clock)"
_TIME = re.compile(
    r"(?P<lead>\bat|\baround|\babout|\bby|\bfor|\bafter)?\s*"
    r"(?:(?P<half>half past|quarter past|quarter to)\s+)?"
    r"\b(?P<hour>\d{1,2}|" + _HOUR_WORD + r")"
    r"(?:(?::|\.|\s)(?P<min>\d{2})|\s+(?P<minw>" + _MINUTE_WORD + r"))?"
    r"\s*(?P<ampm>a\.?\s?m\.?|p\.?\s?m\.?|o'clock|in the (?:morning|afternoon|evening))?",
    re.IGNORECASE,
)


def parse_time(text: str, asked: bool = False) -> dt.time | None:
    """A time of day: "at nine", "9:30", "ten thirty", "2 pm", "half past ten", "noon". A bare number
    counts only after "at"/"around"/... or when the caller was just asked for a time (`asked`)."""
    low = text.lower().replace("’", "'")
    if re.search(r"\b(noon|midday)\b", low):
        return dt.time(12, 0)
    for m in _TIME.finditer(low):
        explicit = bool(m["lead"] or m["ampm"] or m["min"] or m["half"] or (m["minw"] == "o'clock"))
        if not (explicit or asked):
            continue
        if _inside_date(low, m.start("hour"), m.end("hour")):
            continue
        hour = int(m["hour"]) if m["hour"].isdigit() else _NUMBERS[m["hour"]]
        if not 0 <= hour <= 23:
            continue
        minute = int(m["min"]) if m["min"] else _minute_word(m["minw"])
        if minute is None or minute > 59:
            continue
        if m["half"]:
            hour, minute = {"half past": (hour, 30), "quarter past": (hour, 15)}.get(
                m["half"], (hour - 1, 45)
            )
        ampm = (m["ampm"] or "").replace(".", "").replace(" ", "")
        pm = ampm == "pm" or "afternoon" in ampm or "evening" in ampm
        morning = ampm == "am" or "morning" in ampm or re.search(r"\bmorning\b", low) is not None
        afternoon = pm or re.search(r"\b(afternoon|evening)\b", low) is not None
        if hour < 12 and afternoon:
            hour += 12
        elif hour == 12 and morning and ampm == "am":
            hour = 0
        elif hour < 12 and not morning and hour <= 7:
            hour += 12  # a business's "at two" is in the afternoon
        return dt.time(hour % 24, minute)
    return None


def _minute_word(w: str | None) -> int | None:
    if w is None or w == "o'clock":
        return 0
    w = w.replace("-", " ")
    table = {"oh five": 5, "ten": 10, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40}
    table.update({"forty five": 45, "fifty": 50})
    return table.get(w)


def _inside_date(text: str, start: int, end: int) -> bool:
    """The number is a day of a month ("December 9", "the 9th") or part of an ISO date."""
    before = text[:start].rstrip().split()
    after = text[end:]
    if re.match(r"(st|nd|rd|th)\b", after) or re.match(r"-\d", after) or text[:start].endswith("-"):
        return True
    return bool(before) and before[-1].strip(",.") in MONTHS


# --- names ----------------------------------------------------------------------------------------------

_INTRO_STRONG = re.compile(
    r"\b(?:my name is|my name's|the name is|name's|name is|under the name|under)\s+"
    r"(?P<name>[a-z][\w'-]*(?:\s+[a-z][\w'-]*){0,2})",
    re.IGNORECASE,
)
_INTRO_WEAK = re.compile(
    r"\b(?i:this is|it's|it is|i'm|i am|call me|for|under)\s+"
    r"(?P<name>[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2})"
)
_NOT_NAME = {
    *_wordlist(
        "a an the and or but so to for with at on in of is it i me my yes no yeah okay ok please thanks "
        "thank you hi hello hey just sorry sure fine good great calling looking wondering trying hoping free "
        "available actually about booking book appointment cleaning checkup filling doctor dr morning "
        "afternoon evening today tomorrow next this that week all"
    ),
    *WEEKDAYS,
    *MONTHS,
}
_SPELLED = re.compile(r"(?<![\w'’])(?:[A-Za-z][\s.,-]+){1,}[A-Za-z]\b")


def spelled_word(text: str) -> str | None:
    """A word spelled letter by letter ("K I M", "K-I-M", "P, A, T, E, L") → "Kim"; None if none."""
    best = None
    for m in _SPELLED.finditer(text):
        letters = re.findall(r"[A-Za-z]", m.group(0))
        tokens = re.split(r"[\s.,-]+", m.group(0).strip(" .,-"))
        if len(letters) >= 2 and all(len(t) == 1 for t in tokens if t):
            word = "".join(letters).capitalize()
            if not (word.lower() in ("am", "pm") and len(letters) == 2) and (
                best is None or len(word) > len(best)
            ):
                best = word
    return best


def parse_name(text: str, asked: bool = False) -> str | None:
    """A person's name: after "my name is", "this is Alex Kim", or the whole short answer when the caller
    was asked for it (`asked`); a surname spelled letter by letter replaces the heard one."""
    found = None
    for pattern in (_INTRO_STRONG, _INTRO_WEAK):
        m = pattern.search(text)
        if m:
            found = _clean_name(m["name"])
            if found:
                break
    if found is None and asked:
        body = re.sub(
            r"^\W*(?:(?:yes|yeah|sure|okay|ok|so|well|um|uh|it's|it is|that's|that is|this is|i'm|i am|"
            r"my name "
            r"is|my name's)\b\W*)*",
            "",
            text,
            flags=re.IGNORECASE,
        )
        found = _clean_name(re.split(r"[,.;!?]|\bthat's\b|\bspelled\b", body, flags=re.IGNORECASE)[0])
    spelled = spelled_word(text)
    if spelled:
        if found is None:
            return spelled if asked else None
        parts = found.split()
        if len(parts) > 1 or _similar(parts[-1], spelled) >= 0.5:
            parts[-1] = spelled
        else:
            parts.append(spelled)
        found = " ".join(parts)
    return found


def _clean_name(raw: str) -> str | None:
    out: list[str] = []
    for token in raw.split():
        t = token.strip(".,;!?")
        if not t or t.lower() in _NOT_NAME or not re.fullmatch(r"[A-Za-z][A-Za-z'-]*", t) or len(t) == 1:
            break
        out.append(t[0].upper() + t[1:].lower())
    return " ".join(out[:3]) or None


def _similar(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a.lower(), b.lower()).ratio()


# --- lists, yes/no, contact details -----------------------------------------------------------------------


def match_enum(text: str, values: Mapping[str, Iterable[str]], cutoff: float = 0.8) -> str | None:
    """The value whose name or alias the caller said; close misspellings count ("Dr. Morgen" → "Dr. Morgan",
    a recogniser's slip) for aliases of five letters or more. The earliest mention wins."""
    said = _norm(text)
    tokens = words(text)
    best: tuple[int, str] | None = None
    for value, aliases in values.items():
        for alias in (value, *aliases):
            a = " ".join(words(alias))
            if not a:
                continue
            pos = said.find(f" {a} ")
            if pos < 0 and len(a) >= 5:
                n = len(a.split())
                for i in range(len(tokens) - n + 1):
                    if _similar(" ".join(tokens[i : i + n]), a) >= cutoff:
                        pos = len(" ".join(tokens[:i]))
                        break
            if pos >= 0 and (best is None or pos < best[0]):
                best = (pos, value)
    return best[1] if best else None


def is_yes(text: str) -> bool:
    w = words(text)
    s = " ".join(w)
    return bool(set(w) & _YES) or any(p in s for p in _YES_PHRASES)


def is_no(text: str) -> bool:
    w = words(text)
    s = " ".join(w)
    return bool(set(w) & _NO) or any(p in s for p in _NO_PHRASES)


_DIGIT_WORDS = {w: str(n) for w, n in _NUMBERS.items() if n <= 9} | {"oh": "0"}


def parse_phone(text: str) -> str | None:
    """A phone number of 7 to 15 digits, said as digits or digit words ("five five five, oh one ...")."""
    digits = ""
    for token in re.findall(r"\d+|[a-z]+", text.lower()):
        if token.isdigit():
            digits += token
        elif token in _DIGIT_WORDS:
            digits += _DIGIT_WORDS[token]
        elif token == "double" or token == "plus":
            continue
        elif digits and len(digits) < 7:
            digits = ""
    return digits if 7 <= len(digits) <= 15 else None


def parse_email(text: str) -> str | None:
    """An email address, written or said ("alex dot kim at example dot com")."""
    t = text.lower()
    t = re.sub(r"\s+at\s+", "@", t)
    t = re.sub(r"\s+dot\s+", ".", t)
    m = re.search(r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}", t)
    return m.group(0) if m else None
