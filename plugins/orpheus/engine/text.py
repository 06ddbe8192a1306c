"""Text in, validated speakable pieces and prompt ids out.

Orpheus is prompted with ids, not strings: `[start_of_human] + tokenizer("{voice}: {text}") +
[eot, end_of_human, start_of_ai, start_of_speech]` (DESIGN §2). Re-tokenizing a string that already holds
the special tokens would add a second BOS, so the specials are appended as ids. Hostile input (control
characters, emoji, other scripts, unknown tags, huge text) is cleaned or refused with a one-line `TextError`,
never a traceback.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from plugins.orpheus.engine import ids
from plugins.spoken_words import normalize
from plugins.text_chunker import ChunkerOptions, split_text

VOICES = {"en": ("tara", "leah", "jess", "leo", "dan", "mia", "zac", "zoe")}
LANGUAGES = ("en", "ko")  # ko: multilingual research checkpoints; their voice names come with the checkpoint
_VOICE_NAME = re.compile(r"^[^\W\d_][\w-]{0,31}$")
EMOTIVE_TAGS = ("laugh", "chuckle", "sigh", "cough", "sniffle", "groan", "yawn", "gasp")
_TAG = re.compile(r"<\s*/?\s*([A-Za-z_][\w-]*)\s*/?\s*>")
_MAX_WORD = 40
_LONG_WORD = re.compile(rf"\S{{{_MAX_WORD + 1},}}")
_SCRIPTS = {"en": ("LATIN",), "ko": ("HANGUL", "LATIN", "CJK")}


class TextError(ValueError):
    """Input that cannot be spoken; the message is one line, safe to show to a caller."""


@dataclass(frozen=True)
class TextOptions:
    language: str = "en"
    max_chars: int = 5000  # longer input is refused (a runaway LLM reply, not a sentence)
    unknown_tags: str = "drop"  # "drop" (remove, keep talking) or "error"
    words_per_second_min: float = 2.0  # slowest plausible speech, for max_tokens
    max_tokens_margin_s: float = 2.0
    tag_seconds: float = 1.5  # a laugh or sigh takes time too
    max_tokens_cap: int = 8190  # keeps one utterance under the model context
    chunker: ChunkerOptions = field(
        default_factory=lambda: ChunkerOptions(first_min_words=3, min_words=5, max_words=40)
    )


def validate_voice(voice: str, language: str = "en") -> str:
    """English voices are checked by name; other languages' checkpoints name their own voices, so only
    the form is checked there (one word, ≤ 32 characters)."""
    if language not in LANGUAGES:
        raise TextError(f"unsupported language {language!r}; one of {', '.join(LANGUAGES)}")
    voices = VOICES.get(language)
    if voices is not None and voice not in voices:
        raise TextError(f"unknown voice {voice!r} for {language}; one of {', '.join(voices)}")
    if not isinstance(voice, str) or not _VOICE_NAME.match(voice):
        raise TextError(f"bad voice name {str(voice)[:40]!r}")
    return voice


@functools.lru_cache(maxsize=8192)
def _allowed_char(ch: str, scripts: tuple[str, ...]) -> bool:
    """Cached: a reply repeats a few dozen characters, and 128 streams opening at once each check ~500."""
    cat = unicodedata.category(ch)
    if cat.startswith("L"):
        name = unicodedata.name(ch, "")
        return any(name.startswith(s) for s in scripts)
    if cat.startswith(("N", "P", "Z")) or cat in ("Sc", "Sm"):
        return True
    return ch in "°%&@+"


def clean_text(text: str, options: TextOptions = TextOptions()) -> str:
    """Normalise Unicode, drop what no voice can say, check tags, spell out numbers. May raise TextError."""
    if not isinstance(text, str):
        raise TextError("text must be a string")
    if len(text) > options.max_chars:
        raise TextError(f"text too long ({len(text)} characters; at most {options.max_chars})")
    text = unicodedata.normalize("NFKC", text)
    scripts = _SCRIPTS.get(options.language, ("LATIN",))

    def tag(m: re.Match[str]) -> str:
        name = m.group(1).lower()
        if name in EMOTIVE_TAGS:
            return f" <{name}> "
        if options.unknown_tags == "error":
            raise TextError(f"unknown tag <{m.group(1)}>; allowed: {', '.join(EMOTIVE_TAGS)}")
        return " "

    parts = []
    last = 0
    for m in _TAG.finditer(text):
        parts.append(_strip_chars(text[last : m.start()], scripts))
        parts.append(tag(m))
        last = m.end()
    parts.append(_strip_chars(text[last:], scripts))
    out = normalize("".join(parts), options.language)
    out = _LONG_WORD.sub(lambda m: m.group(0)[:_MAX_WORD], out)  # a 3 000-letter "word" is not speech
    return re.sub(r"\s+", " ", out).strip()


def _strip_chars(s: str, scripts: tuple[str, ...]) -> str:
    s = s.replace("<", " ").replace(">", " ")
    return "".join(
        ch if _allowed_char(ch, scripts) else (" " if ch.isspace() or ch in "\t\r\n" else "") for ch in s
    )


def has_words(text: str) -> bool:
    return any(ch.isalpha() for ch in _TAG.sub(" ", text))


def speakable_pieces(text: str, options: TextOptions = TextOptions()) -> list[str]:
    """Whole text → cleaned sentence/clause pieces, tags kept with their words. Raises TextError if none."""
    if not text or not text.strip():
        raise TextError("empty text")
    cleaned = clean_text(text, options)
    pieces = [p for p in split_text(cleaned, options.chunker) if has_words(p)]
    if not pieces:
        raise TextError("nothing speakable in text (no words in a supported script)")
    return pieces


def prompt_ids(voice: str, text: str, encode: Callable[[str], Sequence[int]]) -> list[int]:
    """The exact Orpheus prompt as ids. `encode` may or may not add BOS; the result has exactly one."""
    body = list(encode(f"{voice}: {text}"))
    if not body or body[0] != ids.BOS:
        body.insert(0, ids.BOS)
    while len(body) > 1 and body[1] == ids.BOS:  # never two BOS
        del body[1]
    return [ids.START_OF_HUMAN, *body, ids.EOT, ids.END_OF_HUMAN, ids.START_OF_AI, ids.START_OF_SPEECH]


def max_tokens_for(text: str, options: TextOptions = TextOptions()) -> int:
    """Token budget from text length: slow speech (2 words/s) plus tags plus a margin, whole frames."""
    words = len(_TAG.sub(" ", text).split())
    tags = len(_TAG.findall(text))
    seconds = words / options.words_per_second_min + tags * options.tag_seconds + options.max_tokens_margin_s
    frames = math.ceil(seconds * ids.TOKENS_PER_SECOND / ids.FRAME_TOKENS)
    return min(frames * ids.FRAME_TOKENS, options.max_tokens_cap // ids.FRAME_TOKENS * ids.FRAME_TOKENS)
