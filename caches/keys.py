"""How cached phrases are keyed: `phrase_key(text)` is the canonical form of a phrase, so "Sure." and
" sure " hit the same audio. Case, width, quote style, spacing and a trailing full stop do not change how a
phrase is spoken; a question or exclamation mark does, so those are kept.
"""

from __future__ import annotations

import re
import unicodedata

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
