"""Text cues for end of turn: does this transcript read like a finished thought or a speaker mid-clause?

A trailing "and", "so", "because", "um", a dangling preposition or an unfinished subordinate clause means the
caller is still talking; a question or a closed sentence means they are probably done. English and Korean word
lists. Pure logic: no livekit, no model, so the rules are tested on strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Language = Literal["en", "ko"]

_HANGUL = re.compile(r"[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]")
_WORD = re.compile(r"[\w']+", re.UNICODE)

# --- English ------------------------------------------------------------
EN_FILLERS = frozenset({"um", "umm", "uh", "uhh", "er", "erm", "ah", "hmm", "hm", "mm", "like"})
EN_CONJUNCTIONS = frozenset(
    {
        "and",
        "but",
        "or",
        "so",
        "because",
        "cause",
        "cuz",
        "then",
        "plus",
        "although",
        "though",
        "while",
        "whether",
        "unless",
        "until",
        "since",
        "whose",
        "as",
        "than",
        "nor",
    }
)
# Hang a clause open when last, unless the caller asked a question ("where?", "when is it?").
EN_OPEN_WORDS = frozenset({"if", "when", "which", "who", "where", "also"})
_SO_VERBS = frozenset({"think", "hope", "guess", "believe", "suppose", "said", "say", "so"})
EN_FUNCTION_WORDS = frozenset(
    {
        # prepositions
        "to",
        "for",
        "at",
        "in",
        "on",
        "with",
        "of",
        "from",
        "by",
        "about",
        "into",
        "onto",
        "after",
        "before",
        "between",
        "through",
        "during",
        "without",
        "around",
        "near",
        "over",
        "under",
        "towards",
        "toward",
        "per",
        "via",
        "against",
        "across",
        "behind",
        "beside",
        "besides",
        "within",
        "upon",
        # articles, determiners, possessives
        "a",
        "an",
        "the",
        "my",
        "your",
        "our",
        "their",
        "his",
        "her",
        "its",
        "this",
        "these",
        "those",
        "some",
        "any",
        "every",
        "each",
        "another",
        # auxiliaries, copulas, modals
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "can",
        "could",
        "would",
        "will",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "gonna",
        "wanna",
        "i'm",
        "it's",
        "that's",
        "there's",
        "i'd",
        "i'll",
        "we're",
        "you're",
        "we'd",
        # subject pronouns left hanging
        "i",
        "we",
        "they",
        "he",
        "she",
    }
)
EN_SUBORDINATORS = frozenset(
    {
        "whether",
        "if",
        "because",
        "that",
        "which",
        "who",
        "when",
        "where",
        "while",
        "although",
        "unless",
        "until",
        "since",
        "so",
        "and",
        "but",
        "how",
        "what",
        "why",
    }
)
EN_SHORT_ANSWERS = frozenset(
    {
        "yes",
        "yeah",
        "yep",
        "no",
        "nope",
        "okay",
        "ok",
        "sure",
        "thanks",
        "thank",
        "right",
        "correct",
        "bye",
        "goodbye",
        "hello",
        "hi",
        "great",
        "perfect",
        "fine",
        "done",
        "exactly",
    }
)

# --- Korean ------------------------------------------------------------
# Connective verb endings (-고, -는데, -서, -면, -지만 ...) and particles left dangling mean more is coming.
KO_CONNECTIVE_ENDINGS = (
    "는데",
    "은데",
    "ㄴ데",
    "인데",
    "지만",
    "니까",
    "으니까",
    "거나",
    "어서",
    "아서",
    "해서",
    "고서",
    "면서",
    "려고",
    "으려고",
    "도록",
    "다가",
    "는지",
    "은지",
    "든지",
    "고",
    "서",
    "면",
    "으면",
    "며",
    "나",
)
KO_PARTICLES = (
    "은",
    "는",
    "이",
    "가",
    "을",
    "를",
    "에",
    "에서",
    "로",
    "으로",
    "와",
    "과",
    "하고",
    "도",
    "의",
    "랑",
    "이랑",
    "한테",
    "께",
    "부터",
    "까지",
    "보다",
    "처럼",
    "만",
)
KO_FILLERS = frozenset(
    {
        "음",
        "어",
        "그",
        "저",
        "아",
        "그러니까",
        "그래서",
        "근데",
        "그런데",
        "그리고",
        "뭐",
        "저기",
        "있잖아",
        "그니까",
        "막",
    }
)
KO_SHORT_ANSWERS = frozenset(
    {
        "네",
        "예",
        "응",
        "아니요",
        "아뇨",
        "아니",
        "좋아요",
        "그래요",
        "맞아요",
        "괜찮아요",
        "감사합니다",
        "고마워요",
        "네네",
        "알겠습니다",
    }
)
KO_FINAL_ENDINGS = (
    "요",
    "다",
    "까",
    "죠",
    "지요",
    "네",
    "래",
    "자",
    "세요",
    "니다",
    "습니다",
    "어",
    "아",
    "야",
    "지",
    "군",
    "구나",
    "걸",
)


@dataclass(frozen=True)
class TextCue:
    """How finished the transcript reads: `completeness` in [0, 1] and a short machine-readable reason."""

    completeness: float
    reason: str


def detect_language(text: str, default: Language = "en") -> Language:
    """Hangul anywhere means Korean; otherwise the default (callers pass the STT's language when known)."""
    return "ko" if _HANGUL.search(text) else default


def text_cue(text: str, language: Language | None = None) -> TextCue:
    """Score how complete a (possibly partial) user transcript reads."""
    stripped = text.strip()
    if not stripped:
        return TextCue(0.5, "empty")
    lang = language or detect_language(stripped)
    if lang == "ko":
        return _korean_cue(stripped)
    return _english_cue(stripped)


def _english_cue(text: str) -> TextCue:
    words = [w.lower() for w in _WORD.findall(text)]
    if not words:
        return TextCue(0.5, "no_words")
    last = words[-1]
    tail = text.rstrip()
    trailing_ellipsis = tail.endswith(("...", "…", "-", "—"))
    if last in EN_FILLERS:
        return TextCue(0.05, "trailing_filler")
    if len(words) == 1 and tail.endswith("?"):
        return TextCue(0.95, "question")
    if last in EN_CONJUNCTIONS and not (last == "so" and len(words) > 1 and words[-2] in _SO_VERBS):
        return TextCue(0.05, "trailing_conjunction")
    if last in EN_OPEN_WORDS and not tail.endswith("?"):
        return TextCue(0.1, "trailing_open_word")
    if last in EN_FUNCTION_WORDS:
        return TextCue(0.08, "trailing_function_word")
    if trailing_ellipsis:
        return TextCue(0.15, "trailing_ellipsis")
    if len(words) <= 2 and all(w in EN_SHORT_ANSWERS for w in words):
        return TextCue(0.9, "short_answer")
    # a subordinate clause opened in the last few words with nothing after it but a noun phrase:
    # "can you check whether my package" — the verb of that clause has not come yet
    for back in (2, 3):
        if len(words) > back and words[-back - 1] in EN_SUBORDINATORS and not _has_verb(words[-back:]):
            return TextCue(0.2, "open_subordinate_clause")
    if tail.endswith(","):
        return TextCue(0.2, "trailing_comma")
    if tail.endswith("?"):
        return TextCue(0.95, "question")
    if tail.endswith((".", "!")):
        return TextCue(0.85, "closed_sentence")
    return TextCue(0.65, "unpunctuated")


_VERBISH = re.compile(r".*(ed|ing|en)$")
_COMMON_VERBS = frozenset(
    {
        "is",
        "are",
        "was",
        "were",
        "be",
        "do",
        "does",
        "did",
        "has",
        "have",
        "had",
        "go",
        "goes",
        "went",
        "come",
        "comes",
        "came",
        "work",
        "works",
        "open",
        "opens",
        "close",
        "closes",
        "ship",
        "ships",
        "arrive",
        "arrives",
        "get",
        "gets",
        "got",
        "can",
        "will",
        "would",
        "could",
        "should",
        "need",
        "needs",
        "want",
        "wants",
        "know",
        "see",
        "say",
        "said",
        "take",
        "make",
        "made",
        "help",
        "call",
        "pay",
        "paid",
        "it's",
        "i'm",
        "that's",
        "there's",
        "they're",
        "we're",
        "you're",
        "isn't",
        "aren't",
        "wasn't",
        "doesn't",
        "don't",
        "didn't",
        "won't",
        "can't",
    }
)


def _has_verb(words: list[str]) -> bool:
    return any(w in _COMMON_VERBS or (len(w) > 4 and _VERBISH.match(w)) for w in words)


def _korean_cue(text: str) -> TextCue:
    tail = text.rstrip()
    core = tail.rstrip(".?!,…~ ")
    tokens = core.split()
    if not tokens:
        return TextCue(0.5, "no_words")
    last = tokens[-1]
    if tail.endswith(("...", "…", ",")):
        return TextCue(0.15, "trailing_pause_mark")
    if len(tokens) <= 2 and all(t in KO_SHORT_ANSWERS for t in tokens):
        return TextCue(0.9, "short_answer")
    if last in KO_FILLERS:
        return TextCue(0.05, "trailing_filler")
    if tail.endswith("?"):
        return TextCue(0.95, "question")
    if last.endswith(KO_FINAL_ENDINGS) and len(last) >= 2:
        return TextCue(0.85 if tail.endswith((".", "!")) else 0.75, "final_ending")
    if last.endswith(KO_CONNECTIVE_ENDINGS):
        return TextCue(0.1, "connective_ending")
    if len(last) >= 2 and last.endswith(KO_PARTICLES):
        return TextCue(0.1, "trailing_particle")
    if tail.endswith((".", "!")):
        return TextCue(0.8, "closed_sentence")
    return TextCue(0.55, "unpunctuated")
