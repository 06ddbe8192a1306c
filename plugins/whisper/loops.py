"""Repetition loops in a decode's text, in any script: where one starts and what it repeats.

Whisper does not come back from a loop: once it writes a short stretch again and again it runs to the token
budget, so a loop ends the text ("the the the the", "그가, 그가, 그가, 그가, 그가"). What precedes a loop is
the decode's last trustworthy text (`cut_loop`). A loop that starts at the first word is either an invention
on noise ("you you you", "Thank you. Thank you. …") or a caller who really said the stretch once or twice
("Wait, wait." decoded as "Wait, wait. Wait. Wait. Wait. …"): `find_loop` gives the repeated stretch so the
guard can keep it once when the audio says a person spoke (`guard.clean_text`). Pure text: no model here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_TOKEN = re.compile(r"[^\W_]+")
_INNER_LOOP = re.compile(r"(\w{1,8}?)\1{2,}")
_TRAILING = " ,.;:!?-–—…、。，"
_SENTENCE_END = ".!?。！？"

LOOP_REPEATS = 4
"""A stretch of one to `LOOP_MAX_WORDS` words said this many times in a row, running to the end of the
decode, is a loop. People repeat too, but fewer times or with more words after ("no, no, no, that's not what
I said", "thank you, thank you, thank you so much"): those are kept whole."""
LOOP_MAX_WORDS = 4
DIGIT_LOOP_REPEATS = 6
"""Digits said one by one repeat for real ("my PIN is 1, 1, 1, 1"), so a digit-only stretch needs more."""
INNER_LOOP_MIN_CHARS = 6
"""Inside one word (scripts written without spaces, or a loop glued together: "ㅋㅋㅋㅋㅋㅋ",
"감사합니다감사합니다감사합니다"), a stretch repeated three times and at least this long; words that double a
syllable ("하하하", "반짝반짝") are shorter or repeat twice. Words holding a digit are numbers ("1111",
"100000") and are left to the check above."""


@dataclass(frozen=True)
class Loop:
    start: int
    """Where the loop starts in the text (the first character of its first stretch)."""
    unit: str
    """The repeated stretch as first written, inner punctuation kept ("Wait", "Oh, okay", "감사합니다")."""


def _stretches(keys: list[str]) -> Iterator[tuple[int, int, int]]:
    """(first word, words in the stretch, times said in a row) for every stretch of one to
    `LOOP_MAX_WORDS` words, in text order."""
    for i in range(len(keys)):
        for n in range(1, min(LOOP_MAX_WORDS, len(keys) - i) + 1):
            repeats = 1
            while keys[i + repeats * n : i + (repeats + 1) * n] == keys[i : i + n]:
                repeats += 1
            yield i, n, repeats


def _word_loop(text: str, words: list[re.Match[str]]) -> Loop | None:
    keys = [w.group(0).casefold() for w in words]
    for i, n, repeats in _stretches(keys):
        unit, rest = keys[i : i + n], keys[i + repeats * n :]
        runs_to_end = len(rest) < n and rest == unit[: len(rest)]  # a loop may stop mid-stretch
        need = DIGIT_LOOP_REPEATS if all(k.isdigit() for k in unit) else LOOP_REPEATS
        if repeats >= need and runs_to_end:
            return Loop(words[i].start(), text[words[i].start() : words[i + n - 1].end()])
    return None


def _inner_loop(words: list[re.Match[str]]) -> Loop | None:
    for w in words:
        word = w.group(0)
        if len(word) < INNER_LOOP_MIN_CHARS or any(c.isdigit() for c in word):
            continue
        for m in _INNER_LOOP.finditer(word):
            if m.end() - m.start() >= INNER_LOOP_MIN_CHARS:
                return Loop(w.start() + m.start(), m.group(1))
    return None


def find_loop(text: str) -> Loop | None:
    """The first repetition loop in `text`, or None.

    Words are runs of letters or digits of any script, compared case-folded; punctuation between repeats
    ("4-4-4", "그가, 그가") does not hide a loop.
    """
    words = list(_TOKEN.finditer(text))
    loops = [loop for loop in (_word_loop(text, words), _inner_loop(words)) if loop is not None]
    return min(loops, key=lambda loop: loop.start, default=None)


INNER_RUN_REPEATS = 8
"""A stretch said this many times in a row with more words after it is Whisper looping and coming back to
the audio ("447 902 902 902 … 902 9 1156", from a member number read in groups): written once. Nobody says
a stretch that often, digits included (a PIN's "1, 1, 1, 1" is four)."""


def collapse_runs(text: str) -> str:
    """`text` with every stretch repeated INNER_RUN_REPEATS times or more written once (a loop Whisper came
    back from; one that runs to the end of the text is `cut_loop`'s)."""
    while True:
        words = list(_TOKEN.finditer(text))
        keys = [w.group(0).casefold() for w in words]
        run = next(((i, n, r) for i, n, r in _stretches(keys) if r >= INNER_RUN_REPEATS), None)
        if run is None:
            return text
        i, n, repeats = run
        text = text[: words[i + n - 1].end()] + text[words[i + repeats * n - 1].end() :]


def cut_loop(text: str) -> str:
    """`text` up to where a repetition loop starts ("" when it starts with one), whatever the language."""
    loop = find_loop(text)
    return text if loop is None else text[: loop.start].rstrip(_TRAILING)


def leading_loop(text: str) -> Loop | None:
    """The loop when it starts at the text's first word (the whole text repeats one stretch), else None."""
    loop = find_loop(text)
    return loop if loop is not None and not text[: loop.start].strip(_TRAILING) else None


ECHO_MIN_WORDS = 3
"""The shortest stretch `echoes_itself` looks for: shorter ones ("no, no", "yes yes") are how people
insist, and `find_loop` judges them."""


def echoes_itself(text: str) -> bool:
    """Whether the whole text is one stretch of at least `ECHO_MIN_WORDS` words written again right after
    itself, once or more, with at most one word joining the copies, the last copy perhaps cut short ("I'm
    going to play the game, and I'm going to play the game."). Whisper writes this for speech it cannot read,
    and for a primed decode that ran out of audio; a person says it only to be heard again, and the caller
    of this decides by the decode's confidence."""
    keys = [w.group(0).casefold() for w in _TOKEN.finditer(text)]
    for n in range(ECHO_MIN_WORDS, len(keys) // 2 + 1):
        for period in (n, n + 1):  # the copies back to back, or joined by one word ("and", "but")
            if keys[period : period + n] != keys[:n]:
                continue
            if all(keys[i] == keys[i - period] for i in range(period + n, len(keys))):
                return True
    return False


def said_once(text: str, loop: Loop) -> str:
    """The loop's stretch written once as a sentence: its own end mark when the text gives one right after
    it ("Sorry. Sorry. …" -> "Sorry."), else a full stop ("Wait, wait, wait" -> "Wait.")."""
    after = text[loop.start + len(loop.unit) : loop.start + len(loop.unit) + 1]
    return loop.unit + (after if after and after in _SENTENCE_END else ".")
