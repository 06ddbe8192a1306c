"""Cut a streamed LLM reply into speakable pieces.

The first piece leaves as soon as a clause allows (a comma after a few words is enough), so the voice can
start while the LLM is still writing; later pieces end at sentence or clause boundaries. A period only ends
a piece once the next character shows it is not inside "3.30" or "e.g."; emotive tags (`<laugh>`) stay with
their words. No livekit import: both TTS plugins and the engine use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SENTENCE_END = ".!?…"
_CLAUSE_END = ",;:—"
_ABBREVIATIONS = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "st",
    "vs",
    "etc",
    "e.g",
    "i.e",
    "jr",
    "sr",
    "no",
    "approx",
    "dept",
    "inc",
    "ltd",
    "co",
    "mt",
}
_TAG = re.compile(r"<[a-z]+>")
_TRAILING_TAG = re.compile(r"\s*<[a-z]+>\s*$")


@dataclass(frozen=True)
class ChunkerOptions:
    first_min_words: int = 3  # a first clause or sentence shorter than this waits for more
    min_words: int = 5  # later pieces: clause cuts only after this many words
    max_words: int = 30  # hard cut at a space past this many words (run-on LLM output)
    first_max_words: int = 6
    """The first piece, too: the voice starts on a whole piece, and the embedded LLM writes a word per ~20 ms
    on 2 cores, so each word of the first piece delays the caller's first audio (room, fixture call: with a
    10-word cap, first text -> first audio p50 215 ms; with 6, 137 ms)."""


def _word_count(text: str) -> int:
    return len(_TAG.sub(" ", text).split())


class SpeechChunker:
    """Feed text deltas with `push`; each call returns the pieces that became complete."""

    def __init__(self, options: ChunkerOptions | None = None) -> None:
        self._opt = options or ChunkerOptions()
        self._buf = ""
        self._emitted = 0

    def push(self, delta: str) -> list[str]:
        self._buf += delta
        pieces: list[str] = []
        while True:
            cut = self._find_cut()
            if cut is None:
                break
            piece, self._buf = self._buf[:cut].strip(), self._buf[cut:].lstrip()
            if piece and _word_count(piece) > 0:
                pieces.append(piece)
                self._emitted += 1
            elif piece:  # a lone tag: keep it with what follows
                self._buf = piece + " " + self._buf
                break
        return pieces

    def take_words(self, min_words: int = 2) -> str | None:
        """Cut now, at the last complete word, even mid-clause: for when the listener is about to run out
        of audio and the LLM has not reached a clause end yet. A word still being written stays, and so
        does a trailing emotive tag (it belongs to the words after it)."""
        buf = self._buf
        end = max(buf.rfind(" "), buf.rfind("\n"))
        if end <= 0:
            return None
        tag = _TRAILING_TAG.search(buf[:end])
        if tag:
            end = tag.start()
        head = buf[:end].strip()
        if head.count("<") > head.count(">") or _word_count(head) < min_words:
            return None  # inside an emotive tag, or too little to say on its own
        self._buf = buf[end:].lstrip()
        self._emitted += 1
        return head

    def flush(self) -> list[str]:
        """End of input: whatever is left is the last piece."""
        rest, self._buf = self._buf.strip(), ""
        if rest and _word_count(rest) > 0:
            self._emitted += 1
            return [rest]
        return []

    def _find_cut(self) -> int | None:
        buf = self._buf
        first = self._emitted == 0
        min_clause_words = self._opt.first_min_words if first else self._opt.min_words
        words_seen = 0
        in_word = False
        for i, ch in enumerate(buf):
            if ch.isspace():
                in_word = False
            elif not in_word:
                in_word = True
                words_seen += 1
            if i + 1 >= len(buf):
                return None  # need one character of look-ahead to judge a boundary
            nxt = buf[i + 1]
            if ch in _SENTENCE_END and nxt.isspace():
                if ch == "." and self._is_abbreviation(buf[: i + 1]):
                    continue
                # a first sentence shorter than a clause ("Sure." "Hello!") joins what follows: on its own
                # it is an opener the caller hears before the answer, not the answer
                if _word_count(buf[: i + 1]) >= (min_clause_words if first else 1):
                    return i + 1
            elif (
                ch in _CLAUSE_END
                and nxt.isspace()
                and _word_count(buf[: i + 1]) >= min_clause_words
                and not (ch == "," and buf[i - 1 : i].isdigit() and buf[i + 2 : i + 3].isdigit())
            ):
                return i + 1
            elif ch.isspace() and words_seen >= (self._opt.first_max_words if first else self._opt.max_words):
                return i
        return None

    @staticmethod
    def _is_abbreviation(text: str) -> bool:
        last = text.rstrip(".").split()[-1:] or [""]
        word = last[0].lower().lstrip("(\"'")
        return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha() and word not in {"a", "i"})


def split_text(text: str, options: ChunkerOptions | None = None) -> list[str]:
    """Whole text → pieces, with the same rules as streaming."""
    chunker = SpeechChunker(options)
    return chunker.push(text + " ") + chunker.flush()
