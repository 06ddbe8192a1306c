"""A business's own words (staff names, brands, drugs, streets) told to Whisper before it listens.

Whisper conditions each decode on the text "before" the audio (its prompt) and spells what it hears the way
that text spells it: with "Okonkwo, Lisinopril" in the prompt it writes "Doctor Okonkwo" and "Lisinopril"
instead of "Doctor Akongo" and "list in April". So the vocabulary goes into every decode's prompt. The list is
the same for every call of an agent, which keeps decodes of different calls batchable in the host speech
engine (it batches requests with the same prompt).

The prompt shares Whisper's 223-token prompt budget with the style prompt and a long turn's committed text,
and faster-whisper keeps the end of an overlong prompt: hence the caps, checked with one-line errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .options import WhisperConfigError

MAX_TERMS = 60
MAX_TERM_CHARS = 40
MAX_VOCABULARY_CHARS = 500
"""The joined list: ~120-150 of Whisper's tokens for names and brands, leaving room for the rest."""

_BAD_CHARS = re.compile(r"[,\x00-\x1f\x7f]")


def check_vocabulary(terms: Iterable[str]) -> tuple[str, ...]:
    """The terms cleaned (spaces collapsed, duplicates dropped, order kept); one line if they cannot work."""
    out: dict[str, None] = {}
    for raw in terms:
        term = " ".join(str(raw).split())
        if not term:
            raise WhisperConfigError("STT vocabulary: an empty term")
        if _BAD_CHARS.search(str(raw).strip(" ")):
            raise WhisperConfigError(f"STT vocabulary: {term[:40]!r} holds a comma or a control character")
        if len(term) > MAX_TERM_CHARS:
            raise WhisperConfigError(f"STT vocabulary: {term[:40]!r}... is over {MAX_TERM_CHARS} characters")
        out.setdefault(term, None)
    if len(out) > MAX_TERMS:
        raise WhisperConfigError(f"STT vocabulary: {len(out)} terms, at most {MAX_TERMS}")
    if len(vocabulary_prompt(out)) > MAX_VOCABULARY_CHARS:
        raise WhisperConfigError(
            f"STT vocabulary: over {MAX_VOCABULARY_CHARS} characters in all; list fewer terms"
        )
    return tuple(out)


def parse_vocabulary(text: str) -> tuple[str, ...]:
    """A comma-separated list (the `stt_vocabulary` option's form), checked."""
    return check_vocabulary(t for t in text.split(",") if t.strip())


def vocabulary_prompt(terms: Iterable[str]) -> str:
    """The terms as prompt text: a plain comma list, the way they would appear in a transcript."""
    terms = list(terms)
    return ", ".join(terms) + "." if terms else ""


def with_vocabulary(style_prompt: str, terms: Iterable[str]) -> str:
    """The style prompt, then the vocabulary. On the dev split the order, a "Glossary:" label and one term
    per sentence all read the terms within 5 points of each other (49.6 % here, streamed)."""
    return " ".join(p for p in (style_prompt.strip(), vocabulary_prompt(terms)) if p)
