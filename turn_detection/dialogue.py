"""What the agent's last line asked the caller for, read from its wording.

Why: a caller reading out a phone number, spelling a name, giving a date or listing items pauses between
chunks, and the policy holds such turns longer (`sequence_delay`). The same digits or commas in an answer to
anything else ("we drove 40 000 miles since 2019.") are a finished sentence, and holding them made finished
turns wait 2.6 s (issue 65). So the longer hold applies when the agent's question asked for a sequence.
A rule on the question's wording, by word class (what is asked for, not any corpus's phrasing): nouns that
name a sequence (number, code, spelling, date, list ...) and the verbs that ask for one (spell, list, read
out). Pure logic: no livekit.
"""

from __future__ import annotations

import enum
import re

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[a-z]+")


class Asked(enum.Enum):
    NUMBER = "number"
    SPELLING = "spelling"
    DATE = "date"
    LIST = "list"
    OTHER = "other"


_NUMBER_NOUNS = frozenset(
    {"number", "numbers", "digits", "digit", "code", "pin", "postcode", "zip", "extension", "phone", "mobile"}
    | {"account", "card", "iban", "reference", "serial", "licence", "license", "plate", "id", "passport"}
)
_SPELLING = frozenset({"spell", "spelling", "spelled", "spelt", "letters", "letter", "email", "username"})
_SPELLING |= {"address", "postcode", "name", "surname"}
_REQUESTS = frozenset({"please", "tell", "give", "read", "spell", "list", "say", "enter", "type"})
"""Words of a request made without a question mark ("Please read me the code.")."""
_DATE_NOUNS = frozenset({"date", "dates", "birthday", "born", "birth", "expiry", "expiration"})
_LIST_ASKS = ("what else", "anything else", "which ones", "which days", "which items", "what items")


def asked_for(line: str) -> Asked:
    """What the agent's last question (its last sentence with a "?", else its last sentence) asks for."""
    sentences = [s for s in _SENTENCE_END.split(line.strip()) if s]
    if not sentences:
        return Asked.OTHER
    questions = [s for s in sentences if s.rstrip().endswith("?")]
    text = (questions or sentences)[-1].lower()
    words = set(_WORD.findall(text))
    if not questions and not words & _REQUESTS:
        return Asked.OTHER  # a statement asks for nothing ("your account is up to date.")
    if words & _SPELLING:
        return Asked.SPELLING
    if words & _DATE_NOUNS:
        return Asked.DATE
    if words & _NUMBER_NOUNS:
        return Asked.NUMBER
    if "list" in words or any(a in text for a in _LIST_ASKS):
        return Asked.LIST
    return Asked.OTHER


def expects_sequence(line: str) -> bool | None:
    """Whether the caller's answer to `line` may be a sequence read out in chunks; None when the agent has
    said nothing yet (the caller speaks first: anything may come, so sequences keep their hold)."""
    if not line.strip():
        return None
    return asked_for(line) is not Asked.OTHER
