"""Local agreement: which words of a growing utterance's transcript have stopped changing.

Each re-decode of the utterance gives a hypothesis. Words at the start of two consecutive hypotheses that
agree are confirmed; the rest is tentative. The interim text is always the newest hypothesis, word for word
(its confirmed part in the newest spelling): when a decode rewrites confirmed words, the confirmed part
shrinks to what it still agrees with, so an interim never duplicates or drops a word. The same word keys line
up a turn decoded again whole with what already went out (`words_after`) and the words the guard kept with
the decode's scored words (`words_kept`). Pure logic (no model, no livekit) so the policy is tested on
scripted hypotheses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .model import Segment
from .words import Word

_SENTENCE_END = re.compile(r"[.?!][\"')\]]*$")


def word_key(word: str) -> str:
    """Compare words without case or punctuation: "Tuesday," agrees with "tuesday"."""
    return re.sub(r"[^\w']+", "", word.lower())


def common_prefix_len(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if word_key(x) != word_key(y):
            break
        n += 1
    return n


@dataclass(frozen=True)
class Interim:
    confirmed: str
    tentative: str

    @property
    def text(self) -> str:
        return f"{self.confirmed} {self.tentative}".strip()


class LocalAgreement:
    """Confirms the words that consecutive hypotheses of the same audio agree on."""

    def __init__(self) -> None:
        self._confirmed: list[str] = []
        self._previous: list[str] | None = None

    @property
    def confirmed_words(self) -> list[str]:
        return list(self._confirmed)

    def update(self, hypothesis: str) -> Interim:
        """Feed the newest whole-utterance hypothesis; get confirmed + tentative text back."""
        words = hypothesis.split()
        if self._previous is not None:
            agreed = common_prefix_len(self._previous, words)
            if agreed > len(self._confirmed) and common_prefix_len(self._confirmed, words) == len(
                self._confirmed
            ):
                # the newest surface form wins ("3" then "3.30" keeps the later spelling)
                self._confirmed = words[:agreed]
        self._previous = words
        kept = common_prefix_len(self._confirmed, words)
        if kept < len(self._confirmed):
            # the newest decode rewrote confirmed words (e.g. "we can" -> "we could go"): splicing the old
            # words onto the new tail would duplicate or drop words, so the newest decode wins and only what
            # it still agrees with stays confirmed
            self._confirmed = words[:kept]
        return Interim(" ".join(words[:kept]), " ".join(words[kept:]))

    def drop_prefix(self, n_words: int) -> None:
        """Forget the first n confirmed words (they were committed and their audio trimmed)."""
        self._confirmed = self._confirmed[n_words:]
        self._previous = self._previous[n_words:] if self._previous is not None else None

    def reset(self) -> None:
        self._confirmed = []
        self._previous = None


@dataclass(frozen=True)
class Commit:
    text: str
    end_s: float
    """Where the committed audio ends, relative to the decoded audio."""
    n_words: int


def find_sentence_commit(
    segments: Sequence[Segment], confirmed_words: Sequence[str], *, audio_s: float, min_keep_s: float = 1.0
) -> Commit | None:
    """The longest run of whole sentences at the start of a timestamped decode whose words are all confirmed.

    The last segment is never committed (its end is still moving), nor one ending within `min_keep_s` of the
    decoded audio's end (`audio_s`). Returns None when there is no such sentence.
    """
    if len(segments) < 2:
        return None
    words: list[str] = []
    best: Commit | None = None
    for seg in segments[:-1]:
        words += seg.text.split()
        if common_prefix_len(words, confirmed_words) < len(words):
            break
        if _SENTENCE_END.search(seg.text.strip()) and seg.end <= audio_s - min_keep_s:
            best = Commit(" ".join(words), seg.end, len(words))
    return best


def words_after(said: str, hypothesis: str, *, min_match: float = 0.6) -> str | None:
    """The words of `hypothesis` that follow `said`, when `hypothesis` is a decode of the audio of `said`
    and then more: the new words of a turn decoded whole after its first part went out.

    Aligns the two word sequences (case and punctuation ignored) and cuts after the hypothesis word matched
    to the last matched word of `said`. None when less than `min_match` of said's words are found in order:
    the decode heard the first part too differently to tell where the new words start.
    """
    import difflib

    said_words, hyp_words = said.split(), hypothesis.split()
    if not said_words:
        return hypothesis.strip()
    matcher = difflib.SequenceMatcher(
        None, [word_key(w) for w in said_words], [word_key(w) for w in hyp_words], autojunk=False
    )
    blocks = [b for b in matcher.get_matching_blocks() if b.size]
    if sum(b.size for b in blocks) < min_match * len(said_words):
        return None
    last = blocks[-1]
    # said's words after its last matched word were misheard in the new decode: skip as many hypothesis words
    unmatched_tail = len(said_words) - (last.a + last.size)
    cut = min(len(hyp_words), last.b + last.size + unmatched_tail)
    return " ".join(hyp_words[cut:])


def words_kept(text: str, decoded: str, words: Sequence[Word]) -> tuple[Word, ...]:
    """The scored words that belong to `text`, the part of a decode (`decoded`, scored `words` from its end)
    the hallucination guard kept.

    Text that holds the whole decode (and maybe committed sentences before it) ends with the decode's
    words. Text the guard shortened (a loop said once, a repeated sentence dropped) is the decode's first
    part, so its words are taken where they first occur among the scored ones: inside a loop Whisper grows
    surer with every repeat because it copies itself ("Mama." from a hum: 0.49 the first time, 0.98 the
    ninth), and the first reading is the one that measures the audio. () when they cannot be found."""
    said = [k for w in text.split() if (k := word_key(w))]
    if not words or not said:
        return ()
    if len(said) >= len([w for w in decoded.split() if word_key(w)]):
        return tuple(words[-min(len(said), len(words)) :])
    keys = [word_key(w.text) for w in words]
    for i in range(len(keys) - len(said) + 1):
        if keys[i : i + len(said)] == said:
            return tuple(words[i : i + len(said)])
    return ()
