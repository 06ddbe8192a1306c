"""A pronunciation list for the voices: how to say the business's own words ("Nguyen" → "win").

Every voice reads a name it has never seen by spelling rules, so "Nguyen" comes out as "nuh-goo-yen" and
"Wojciechowski" as something no Wojciechowski answers to. An agent lists the words it cares about with a
respelling the voice reads as ordinary words; each piece of a reply is rewritten just before it is sent to
the voice, so the caller hears the respelling while the transcript, the chat history and what an interrupted
reply keeps all stay as written.

A respelling is plain words a voice reads as it reads any text: "win", "oh-KONK-woh". In a hyphenated
word the syllable in capitals marks the stress for the people who write and read the list; the voices get
it in lower case (a voice spells a word in capitals out letter by letter), so it tells them nothing. A word
without hyphens is sent as written ("ABC" stays letters).

Matching is whole words: "Okonkwo's" is rewritten, "Okonkwoville" is not. It ignores case, except for a
term written all in capitals ("IT", "US", "SQL"), which matches only in capitals, so "it" and "us" stay as
they are. Of two listed terms that overlap, the longer wins ("Pellingham Road" before "Pellingham").

Cached phrases (greetings, fillers) record which respelling they were made with (`tag`), so a clip made
before the list changed is never played; it is spoken live until the cache is rebuilt.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

MAX_ENTRIES = 200
MAX_WRITTEN_CHARS = 40
MAX_SPOKEN_CHARS = 80
_TAG_PREFIX = "|say="
ALIKE_TOLERANCE = 0.2  # at most one sound in five differs: the same reading, give or take a vowel
_NOT_A_SOUND = re.compile(r"[\sˈˌ',.\-_:|]")


class PronunciationError(ValueError):
    """A pronunciation list that cannot be used; the message is one line."""


def _clean(value: object, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise PronunciationError(f"{what} must be text (got {type(value).__name__})")
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        raise PronunciationError(f"{what} {value[:40]!r} holds a control character")
    text = " ".join(value.split())
    if not any(ch.isalnum() for ch in text):
        raise PronunciationError(f"{what} {value[:40]!r} has no letters")
    if len(text) > limit:
        raise PronunciationError(f"{what} {text[:40]!r}… is over {limit} characters")
    return text


def _pattern(written: str) -> str:
    words = r"\s+".join(re.escape(w) for w in written.split())
    return rf"(?<!\w){words}(?!\w)"


@dataclass(frozen=True)
class Pronunciations:
    """Written term → respelling, checked (`check_pronunciations`); empty = say everything as written."""

    entries: tuple[tuple[str, str], ...] = ()

    @cached_property
    def _rule(self) -> tuple[re.Pattern[str], list[str]] | None:
        """One alternation, longer terms first (the longer of two overlapping terms wins); group i → says[i].
        One pass, so a respelling is never rewritten again by another entry."""
        if not self.entries:
            return None
        order = [(w, _voiced(s)) for w, s in sorted(self.entries, key=lambda e: -len(e[0]))]
        alternatives = [f"({_pattern(w)})" if _all_capitals(w) else f"((?i:{_pattern(w)}))" for w, _ in order]
        return re.compile("|".join(alternatives)), [s for _, s in order]

    def __bool__(self) -> bool:
        return bool(self.entries)

    def speak(self, text: str) -> str:
        """`text` as the voice should read it: every listed term replaced by its respelling."""
        if self._rule is None:
            return text
        pattern, says = self._rule
        return pattern.sub(lambda m: says[(m.lastindex or 1) - 1], text)

    def tag(self, text: str) -> str:
        """What a cached clip of `text` must record: "" when no listed term is in it, else a short digest
        of the respelled text (appended to the clip's model fingerprint)."""
        spoken = self.speak(text)
        if spoken == text:
            return ""
        return _TAG_PREFIX + hashlib.sha256(spoken.encode()).hexdigest()[:12]


def _voiced(respelling: str) -> str:
    """What the voice reads: hyphenated words in lower case (their capitals only mark the stress)."""
    return " ".join(w.lower() if "-" in w else w for w in respelling.split())


def tag_of(fingerprint: str) -> str:
    """The respelling tag a cached clip's fingerprint carries ("" when it was made as written)."""
    at = fingerprint.rfind(_TAG_PREFIX)
    return fingerprint[at:] if at >= 0 else ""


def _all_capitals(written: str) -> bool:
    letters = [ch for ch in written if ch.isalpha()]
    return len(letters) > 1 and all(ch.isupper() for ch in letters)


def check_pronunciations(pairs: Mapping[str, str] | Iterable[tuple[str, str]]) -> Pronunciations:
    """Cleaned, checked entries (spaces collapsed); one-line `PronunciationError` for what cannot be used."""
    items = list(pairs.items()) if isinstance(pairs, Mapping) else list(pairs)
    if len(items) > MAX_ENTRIES:
        raise PronunciationError(f"{len(items)} pronunciations listed; at most {MAX_ENTRIES}")
    seen: dict[str, str] = {}
    entries: list[tuple[str, str]] = []
    for written_raw, spoken_raw in items:
        written = _clean(written_raw, "pronounced word", MAX_WRITTEN_CHARS)
        spoken = _clean(spoken_raw, f"pronunciation of {written!r}", MAX_SPOKEN_CHARS)
        if any(ch in written for ch in "=;{}<>"):
            raise PronunciationError(f"pronounced word {written!r} holds one of = ; {{ }} < >")
        if any(ch in spoken for ch in "<>{};="):
            raise PronunciationError(
                f"pronunciation of {written!r} holds one of < > {{ }} ; =; write plain words"
            )
        key = written.casefold()
        if key in seen:
            raise PronunciationError(f"{written!r} is listed twice (as {seen[key]!r} too)")
        seen[key] = written
        entries.append((written, spoken))
    return Pronunciations(tuple(entries))


def parse_pronunciations(text: str) -> Pronunciations:
    """'Nguyen=win; Okonkwo=oh-konk-woh' (the setting's form) → checked entries; "" → none."""
    pairs: list[tuple[str, str]] = []
    for item in text.split(";"):
        if not item.strip():
            continue
        written, sep, spoken = item.partition("=")
        if not sep:
            raise PronunciationError(f"{item.strip()[:40]!r} is not 'word=how to say it'")
        pairs.append((written, spoken))
    return check_pronunciations(pairs)


def merge_pronunciations(first: Pronunciations, then: Pronunciations) -> Pronunciations:
    """One list: `then`'s entries replace `first`'s for the same word, the rest are kept (checked again)."""
    later = {w.casefold() for w, _ in then.entries}
    return check_pronunciations([*(e for e in first.entries if e[0].casefold() not in later), *then.entries])


def format_pronunciations(p: Pronunciations) -> str:
    """The setting's form, which `parse_pronunciations` reads back."""
    return "; ".join(f"{w}={s}" for w, s in p.entries)


def sound_distance(a: str, b: str) -> float:
    """Edit distance between two phoneme strings over the longer one's length; stress marks, spaces and
    hyphens ignored (a respelling's syllables are separate words to a voice, its own reading is one)."""
    x, y = _NOT_A_SOUND.sub("", a), _NOT_A_SOUND.sub("", b)
    if not x and not y:
        return 0.0
    row = list(range(len(y) + 1))
    for i, cx in enumerate(x, 1):
        diagonal, row[0] = row[0], i
        for j, cy in enumerate(y, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (cx != cy))
    return row[-1] / max(len(x), len(y))


def read_alike(
    p: Pronunciations, phonemes: Callable[[str], str], tolerance: float = ALIKE_TOLERANCE
) -> list[str]:
    """The listed words a voice (`phonemes`: its reading of a text) already says as their respellings say:
    listing them changes nothing but reading them syllable by syllable, which callers hear as choppier."""
    return [
        written
        for written, spoken in p.entries
        if sound_distance(phonemes(written), phonemes(_voiced(spoken))) <= tolerance
    ]
