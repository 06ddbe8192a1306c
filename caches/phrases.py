"""The phrase set (caches/phrases.yaml): lines worth pre-synthesising, per language, kind and voice."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import yaml

PhraseKind = Literal["greeting", "acknowledgement", "hold", "apology", "goodbye", "reprompt"]
KINDS: tuple[PhraseKind, ...] = ("greeting", "acknowledgement", "hold", "apology", "goodbye", "reprompt")
DEFAULT_PHRASES_PATH = Path(__file__).with_name("phrases.yaml")


class PhraseSetError(ValueError):
    """The phrase file is missing or malformed (the message is one line naming the problem)."""


@dataclass(frozen=True)
class Phrase:
    text: str
    kind: PhraseKind
    language: str


@dataclass(frozen=True)
class PhraseSet:
    """Default lines per (language, kind), plus per-voice replacements of whole kinds."""

    defaults: dict[str, dict[PhraseKind, tuple[str, ...]]]
    voice_overrides: dict[str, dict[str, dict[PhraseKind, tuple[str, ...]]]]

    @property
    def languages(self) -> tuple[str, ...]:
        return tuple(self.defaults)

    def for_voice(self, voice: str, language: str) -> list[Phrase]:
        """Every phrase to cache for this voice and language, in file order, without duplicates."""
        if language not in self.defaults:
            raise PhraseSetError(f"no phrases for language {language!r}; known: {', '.join(self.defaults)}")
        kinds = dict(self.defaults[language])
        kinds.update(self.voice_overrides.get(voice, {}).get(language, {}))
        out: list[Phrase] = []
        seen: set[str] = set()
        for kind in KINDS:
            for text in kinds.get(kind, ()):
                if text not in seen:
                    seen.add(text)
                    out.append(Phrase(text=text, kind=kind, language=language))
        return out


def load_phrases(path: Path | str | None = None) -> PhraseSet:
    """Read and validate a phrase file; raises PhraseSetError with a one-line reason."""
    path = Path(path) if path is not None else DEFAULT_PHRASES_PATH
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise PhraseSetError(f"cannot read phrase file {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise PhraseSetError(f"phrase file {path} is not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("languages"), dict):
        raise PhraseSetError(f"phrase file {path}: expected a mapping with a 'languages' key")
    defaults = {str(lang): _kinds(body, f"languages.{lang}") for lang, body in raw["languages"].items()}
    overrides: dict[str, dict[str, dict[PhraseKind, tuple[str, ...]]]] = {}
    for voice, langs in (raw.get("voices") or {}).items():
        if not isinstance(langs, dict):
            raise PhraseSetError(f"phrase file {path}: voices.{voice} must be a mapping of languages")
        overrides[str(voice)] = {str(lang): _kinds(b, f"voices.{voice}.{lang}") for lang, b in langs.items()}
    return PhraseSet(defaults=defaults, voice_overrides=overrides)


def _kinds(body: Any, where: str) -> dict[PhraseKind, tuple[str, ...]]:
    if not isinstance(body, dict):
        raise PhraseSetError(f"{where} must be a mapping of kind -> list of phrases")
    out: dict[PhraseKind, tuple[str, ...]] = {}
    for kind, lines in body.items():
        if kind not in KINDS:
            raise PhraseSetError(f"{where}: unknown kind {kind!r}; known: {', '.join(KINDS)}")
        if not isinstance(lines, list) or not all(isinstance(x, str) and x.strip() for x in lines):
            raise PhraseSetError(f"{where}.{kind} must be a list of non-empty strings")
        out[cast(PhraseKind, kind)] = tuple(_clean(lines))
    return out


def _clean(lines: Iterable[str]) -> list[str]:
    return [" ".join(x.split()) for x in lines]
