"""Text cues for end of turn: does this transcript read like a finished thought or a speaker mid-clause?

Grammar, not vocabulary: each language has a table of closed word classes (articles, prepositions,
conjunctions, auxiliaries, hesitation sounds; Korean connective endings and particles) and the cue looks at
how the transcript ends. Open-class words (nouns, verbs) are never listed, so no rule can name a sentence.
Sequences a caller reads out in chunks (digit groups, spelled letters, list items) are flagged as such: the
endpoint policy holds longer after them. The cue is evidence, not a verdict: endpoint_policy combines it with
the audio model. Pure logic: no livekit, no model, so the rules are tested on strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Language = Literal["en", "ko"]

_HANGUL = re.compile(r"[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]")
_WORD = re.compile(r"[\w'’]+(?:-[\w'’]+)*", re.UNICODE)
_SENTENCE_END = re.compile(r"[.?!]\s+")
_NOT_A_GROUP = re.compile(r"[$£€%]|^\d{1,2}[:.]\d{2}$")
_PLAIN_NUMBER = re.compile(r"^[$£€]?\d+(?:[:.,]\d+)*(?:%|st|nd|rd|th)?$")
"""One number as the recogniser writes an amount, a time or a count: "20", "10:30", "$5", "17th"."""


@dataclass(frozen=True)
class LanguageTable:
    """Closed word classes of one language, as they matter at the end of an utterance."""

    fillers: frozenset[str]
    """Hesitation sounds: last = the speaker is still thinking."""
    conjunctions: frozenset[str]
    """Coordinators and subordinators: last = a clause is still to come."""
    determiners: frozenset[str]
    """Articles and possessives: never end a phrase."""
    subject_pronouns: frozenset[str]
    prepositions: frozenset[str]
    """Last = usually an object to come, but English strands them ("who am I speaking with?")."""
    auxiliaries: frozenset[str]
    """Last = a verb to come, unless it closes an elliptical answer after a pronoun ("yes, I do")."""
    wh_words: frozenset[str]
    stall_phrases: tuple[str, ...]
    """Said to hold the floor while thinking ("let me think", "hold on"): more is coming."""
    openers: frozenset[str]
    """Discourse markers that open a turn ("well", "so"): alone, the turn has not started yet."""
    short_replies: frozenset[str]
    """Answers and backchannels that are whole turns on their own."""
    number_words: frozenset[str]
    list_joiners: frozenset[str]
    """Words that introduce the last item of a list ("and", "or")."""
    whole_number_digits: frozenset[int] = frozenset()
    """Digit counts of the numbers callers read out in groups here (phone numbers, payment cards): once the
    digits read in a row add up to one of these, the sequence is over and the caller is waiting for us."""


EN = LanguageTable(
    fillers=frozenset({"um", "umm", "uh", "uhh", "er", "erm", "ah", "hmm", "hm", "mm", "mmm", "eh"}),
    conjunctions=frozenset(
        {"and", "but", "or", "nor", "because", "cause", "cuz", "although", "unless", "whether", "if", "than"}
        | {"plus", "whereas", "so", "as", "while", "until", "till", "since", "that"}
    ),
    determiners=frozenset({"a", "an", "the", "my", "your", "our", "their", "its", "every"}),
    subject_pronouns=frozenset({"i", "we", "they", "he", "she"}),
    prepositions=frozenset(
        {"to", "for", "at", "with", "of", "from", "about", "into", "onto", "between", "towards", "toward"}
        | {"per", "via", "against", "across", "behind", "beside", "within", "upon", "without", "during"}
    ),
    auxiliaries=frozenset(
        {"is", "are", "was", "were", "be", "been", "am", "do", "does", "did", "have", "has", "had", "can"}
        | {"could", "would", "will", "shall", "should", "may", "might", "must", "gonna", "wanna"}
    ),
    wh_words=frozenset({"who", "what", "when", "where", "which", "why", "how", "whose"}),
    stall_phrases=(
        "let me think",
        "let me see",
        "let me check",
        "let me look",
        "let me find",
        "hold on",
        "hang on",
        "one moment",
        "one second",
        "one sec",
        "just a second",
        "just a moment",
        "just a minute",
        "give me a second",
        "give me a moment",
        "give me a minute",
        "bear with me",
        "wait a second",
        "wait a moment",
    ),
    openers=frozenset({"well", "so", "okay so", "anyway", "now", "actually", "and then"}),
    short_replies=frozenset(
        {"yes", "yeah", "yep", "yup", "no", "nope", "okay", "ok", "sure", "right", "correct", "thanks"}
        | {"bye", "goodbye", "hello", "hi", "great", "perfect", "fine", "exactly", "mm-hmm", "uh-huh"}
        | {"alright", "absolutely", "definitely", "true", "cool", "gotcha", "indeed"}
    ),
    number_words=frozenset(
        {"zero", "oh", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}
        | {"double", "triple", "hundred", "thousand"}
    ),
    list_joiners=frozenset({"and", "or", "nor", "plus"}),
    # none: how many digits a finished number has is not a word class (a phone number's length differs by
    # country and a code's by issuer); after a sequence the text model's score sets the hold
    whole_number_digits=frozenset(),
)

# --- Korean -------------------------------------------------------------------------------------------------
# Korean marks clause ends with verb endings: connective endings (-고, -는데, -서, -면, -지만 ...) and
# dangling case particles mean more is coming; sentence-final endings (-요, -다, -까 ...) close the turn.
KO_CONNECTIVE_ENDINGS = (
    "는데", "은데", "인데", "지만", "니까", "거나", "어서", "아서", "해서", "고서", "면서", "려고", "도록",
    "다가", "는지", "은지", "든지", "고", "서", "면", "며",
)  # fmt: skip
KO_PARTICLES = (
    "은", "는", "이", "가", "을", "를", "에", "에서", "로", "으로", "와", "과", "하고", "도", "의", "랑",
    "이랑", "한테", "께", "부터", "까지", "보다", "처럼", "만",
)  # fmt: skip
KO_FINAL_ENDINGS = (
    "요", "다", "까", "죠", "지요", "네", "래", "자", "세요", "니다", "습니다", "어", "아", "야", "지", "군",
    "구나", "걸",
)  # fmt: skip
KO = LanguageTable(
    fillers=frozenset({"음", "어", "그", "저", "아", "뭐", "저기", "막", "그니까", "그러니까"}),
    conjunctions=frozenset({"그리고", "그래서", "근데", "그런데", "그러면", "그럼", "하지만", "또"}),
    determiners=frozenset({"이", "그", "저", "제", "내", "우리"}),
    subject_pronouns=frozenset(),
    prepositions=frozenset(),
    auxiliaries=frozenset(),
    wh_words=frozenset(),
    stall_phrases=("잠깐만요", "잠시만요", "잠깐만", "잠시만", "글쎄요", "글쎄", "어디 보자", "있잖아요"),
    openers=frozenset({"그러니까", "그게", "저기요"}),
    short_replies=frozenset(
        {"네", "예", "응", "아니요", "아뇨", "아니", "좋아요", "그래요", "맞아요", "괜찮아요", "감사합니다"}
        | {"고마워요", "네네", "알겠습니다", "알겠어요", "그렇죠", "맞습니다"}
    ),
    number_words=frozenset(
        {"영", "공", "일", "이", "삼", "사", "오", "육", "칠", "팔", "구", "십", "하나", "둘", "셋", "넷"}
    ),
    list_joiners=frozenset({"그리고", "또는", "아니면", "하고"}),
    whole_number_digits=frozenset({9, 10, 11, 16}),  # Seoul landlines, mobile numbers (010-xxxx-xxxx), cards
)

TABLES: dict[str, LanguageTable] = {"en": EN, "ko": KO}

SEQUENCE_REASONS = frozenset({"digit_group", "spelled_letters", "open_list"})
"""Reasons after which a caller reading out a sequence may go on: the endpoint policy holds longer."""
WHOLE_SEQUENCE_REASONS = frozenset({"whole_number"})
"""Reasons after which a sequence read out in chunks is complete: as many digits as a phone or card number
has."""
NUMBER_END_REASONS = WHOLE_SEQUENCE_REASONS | {"closing_number"}
"""Reasons for a transcript that ends in a number the caller has finished saying: a whole phone or card
number, or one short number closing a sentence ("We are a group of 20.", "It was about three."). A small
language model reads any number at the end as unfinished (more digits, a unit or "pm" may follow)."""


@dataclass(frozen=True)
class TextCue:
    """How finished the transcript reads: `completeness` in [0, 1] and a short machine-readable reason."""

    completeness: float
    reason: str

    @property
    def sequence(self) -> bool:
        return self.reason in SEQUENCE_REASONS


def detect_language(text: str, default: Language = "en") -> Language:
    """Hangul anywhere means Korean; otherwise the default (callers pass the STT's language when known)."""
    return "ko" if _HANGUL.search(text) else default


def text_cue(text: str, language: Language | None = None, *, sequences: bool = True) -> TextCue:
    """Score how complete a (possibly partial) user transcript reads. `sequences=False` (the agent asked
    for no number, spelling, date or list: turn_detection/dialogue.py) reads digits, letters and commas at
    the end as the words they are, not as a sequence read out in chunks."""
    stripped = text.strip()
    if not stripped:
        return TextCue(0.5, "empty")
    lang = language or detect_language(stripped)
    if lang == "ko":
        return _korean_cue(stripped)
    return _english_cue(stripped, EN, sequences)


def _last_sentence(text: str) -> str:
    parts = _SENTENCE_END.split(text)
    return parts[-1] if parts[-1].strip() else text


def _ends_with_phrase(words: list[str], phrases: tuple[str, ...]) -> bool:
    joined = " ".join(words)
    return any(joined == p or joined.endswith(" " + p) for p in phrases)


def _is_stall(sentence: list[str], phrases: tuple[str, ...]) -> bool:
    """The last sentence ends with a stall phrase, or is a short one built on it ("hold on a second")."""
    if _ends_with_phrase(sentence, phrases):
        return True
    joined = f" {' '.join(sentence)} "
    return len(sentence) <= 6 and any(f" {p} " in joined for p in phrases)


def _is_number(word: str, table: LanguageTable) -> bool:
    return any(ch.isdigit() for ch in word) or word in table.number_words


_TAKES_A_NUMBER = frozenset(
    {"about", "above", "after", "around", "at", "before", "below", "by", "for", "from", "in", "of", "on"}
    | {"over", "past", "than", "till", "to", "under", "until", "within", "near", "like", "between"}
)
"""English prepositions that take a number as their whole object ("at 11", "after two", "under 30"),
beside the auxiliaries ("is 15"). After a determiner or an adjective a number usually waits for its noun
("my last four | digits"), so those are not closing numbers."""


def _closing_number(tail: str, table: LanguageTable) -> bool:
    """One short number closes the sentence as a preposition's object or a copula's complement ("at 11.",
    "a group of 20.", "My son is 15."); digit groups and spellings were read by the sequence cue before."""
    tokens = [t.strip(".,!?;:\"'").lower() for t in tail.split()]
    if len(tokens) < 2:
        return False
    last, previous = tokens[-1], tokens[-2]
    number = _PLAIN_NUMBER.match(last) is not None or last in table.number_words
    return number and (previous in _TAKES_A_NUMBER or previous in table.auxiliaries)


def _is_letter(token: str) -> bool:
    """A spelled letter ("K") or letters joined by hyphens ("K-O-W")."""
    return all(len(p) == 1 and p.isalpha() for p in token.split("-"))


# digits each word adds; "double"/"triple" repeat the digit after them, so they add one or two more
_DIGIT_WORDS = {"zero": 1, "oh": 1, "one": 1, "two": 1, "three": 1, "four": 1, "five": 1, "six": 1}
_DIGIT_WORDS |= {"seven": 1, "eight": 1, "nine": 1, "double": 1, "triple": 2}
_DIGIT_WORDS |= {w: 1 for w in ("영", "공", "일", "이", "삼", "사", "오", "육", "칠", "팔", "구")}


def trailing_digits(tokens: list[str]) -> int:
    """How many digits were read in a row at the end ("555-214. 8 8 3 9" -> 10; "five five five" -> 3).
    "double"/"triple" repeat the next digit: "double eight" is two digits."""
    count = 0
    for token in reversed(tokens):
        word = token.lower().strip(".,!?;:")
        digits = sum(c.isdigit() for c in word)
        if digits and all(c.isdigit() or c in "-." for c in word):
            count += digits
        elif word in _DIGIT_WORDS:
            count += _DIGIT_WORDS[word]
        else:
            break
    return count


def _whole_number(tokens: list[str], table: LanguageTable) -> bool:
    return trailing_digits(tokens) in table.whole_number_digits


def _sequence_cue(tail: str, words_raw: list[str], table: LanguageTable) -> TextCue | None:
    """Digit groups, spelled letters and list items at the end of the transcript."""
    last_raw = words_raw[-1]
    token = tail.split()[-1].rstrip(".,!?;:")
    if _NOT_A_GROUP.search(token):
        return None  # an amount or a clock time is one whole answer, not a group read out in parts
    previous = words_raw[-2] if len(words_raw) > 1 else ""
    if previous.lower() in table.list_joiners and len(words_raw) > 2:
        previous = words_raw[-3]  # "3 and 9": still numbers read in a row
    if _is_number(last_raw.lower(), table) and (
        _is_number(previous.lower(), table)
        or sum(c.isdigit() for c in last_raw) >= 3
        or (any(c.isdigit() for c in last_raw) and not tail.endswith((".", "?", "!")))
    ):
        # numbers read in a row, or a chunk of three or more digits, is a sequence that may go on; one short
        # number the recogniser closed with a full stop ("at 2.", "for 4.") is a time or an amount: an answer
        if _whole_number(tail.split(), table):
            return TextCue(0.8, "whole_number")
        return TextCue(0.35, "digit_group")
    hyphenated = "-" in last_raw
    if _is_letter(last_raw) and (hyphenated or (last_raw.isupper() and _is_letter(previous))):
        return TextCue(0.35, "spelled_letters")
    # "eggs, milk, bread" with no "and"/"or" before the last item: the list is still open
    items = [i.strip() for i in _last_sentence(tail).rstrip(".!").split(",")]
    short = all(0 < len(i.split()) <= 3 for i in items[-2:])
    chatty = any(w.lower() in table.short_replies for i in items for w in _WORD.findall(i))
    if len(items) >= 3 and short and not chatty:
        first = items[-1].split()[0].lower()
        if first not in table.list_joiners:
            return TextCue(0.35, "open_list")
    return None


def _english_cue(text: str, table: LanguageTable, sequences: bool = True) -> TextCue:
    words_raw = _WORD.findall(text)
    if not words_raw:
        return TextCue(0.5, "no_words")
    words = [w.lower().replace("’", "'") for w in words_raw]
    last = words[-1]
    tail = text.rstrip()
    question = tail.endswith("?")
    sentence = [w.lower() for w in _WORD.findall(_last_sentence(tail))]
    if last in table.fillers:
        return TextCue(0.05, "trailing_filler")
    if sentence and _is_stall(sentence, table.stall_phrases):
        return TextCue(0.1, "stall_phrase")
    if " ".join(sentence) in table.openers:
        return TextCue(0.1, "opener_only")
    if len(sentence) <= 3 and sentence and all(w in table.short_replies for w in sentence):
        return TextCue(0.92, "short_reply")
    if last in table.determiners or (last in table.conjunctions and not _closes_idiom(words)):
        return TextCue(0.05, "trailing_function_word")
    if last in table.subject_pronouns:
        return TextCue(0.08, "trailing_subject")
    seq = _sequence_cue(tail, words_raw, table) if sequences else None
    if seq is not None:
        return seq
    if last in table.prepositions:
        # English strands a preposition only after wh-movement: "who am I speaking with?" is whole,
        # "is it possible to?" is a yes/no question cut before its verb
        stranded = question and bool(sentence) and sentence[0] in table.wh_words
        return TextCue(0.7 if stranded else 0.2, "trailing_preposition")
    if last in table.auxiliaries:
        # "yes, I do" / "it is" / "we can": an elliptical answer after a pronoun is finished
        if len(words) > 1 and words[-2] in table.subject_pronouns | {"you", "it", "that", "there", "this"}:
            return TextCue(0.8, "elliptical_answer")
        return TextCue(0.6 if question else 0.15, "trailing_auxiliary")
    if last in table.wh_words and not question:
        return TextCue(0.2, "trailing_wh_word")
    if tail.endswith(("...", "…", "-", "—", ",", ";", ":")):
        return TextCue(0.2, "trailing_pause_mark")
    # a closing number reads as the sentence it closes; its own reason only so the language model is not
    # asked about it (endpoint_policy: lm_skips)
    closing = tail.endswith((".", "!", "?")) and _closing_number(tail, table)
    if question:
        return TextCue(0.92, "closing_number" if closing else "question")
    if tail.endswith((".", "!")):
        return TextCue(0.78, "closing_number" if closing else "closed_sentence")
    return TextCue(0.6, "unpunctuated")


def _closes_idiom(words: list[str]) -> bool:
    """Conjunction-like words that close common clauses: "I think so", "and so on", "more than that"."""
    last = words[-1]
    if last == "so" and len(words) > 1:
        return words[-2] in {"think", "hope", "guess", "believe", "suppose", "said", "say", "so", "do"}
    if last == "that":  # demonstrative pronoun ("I'll take that") far more often than a trailing "that"
        return len(words) > 1 and words[-2] not in {"so", "said", "think", "know", "hope", "is", "was"}
    if last in {"since", "as"} and len(words) > 1:
        return words[-2] in {"ever", "well", "long"}
    if last == "while" and len(words) > 1:  # "for a while", "once in a while"
        return words[-2] in {"a", "little", "long"}
    return False


def _korean_cue(text: str) -> TextCue:
    table = KO
    tail = text.rstrip()
    core = tail.rstrip(".?!,…~ ")
    tokens = core.split()
    if not tokens:
        return TextCue(0.5, "no_words")
    last = tokens[-1]
    if last in table.fillers:
        return TextCue(0.05, "trailing_filler")
    if _ends_with_phrase(tokens, table.stall_phrases):
        return TextCue(0.1, "stall_phrase")
    if len(tokens) <= 2 and all(t in table.short_replies for t in tokens):
        return TextCue(0.92, "short_reply")
    if last in table.conjunctions:
        return TextCue(0.05, "trailing_function_word")
    if tail.endswith(("...", "…", ",")):
        return TextCue(0.2, "trailing_pause_mark")
    if any(c.isdigit() for c in last) or (
        len(tokens) > 1 and all(t in table.number_words for t in tokens[-2:])
    ):
        if _whole_number(tokens, table):
            return TextCue(0.8, "whole_number")
        return TextCue(0.35, "digit_group")
    if tail.endswith("?"):
        return TextCue(0.92, "question")
    if last.endswith(KO_FINAL_ENDINGS) and len(last) >= 2:
        return TextCue(0.85 if tail.endswith((".", "!")) else 0.75, "final_ending")
    if last.endswith(KO_CONNECTIVE_ENDINGS):
        return TextCue(0.1, "connective_ending")
    if len(last) >= 2 and last.endswith(KO_PARTICLES):
        return TextCue(0.1, "trailing_particle")
    if tail.endswith((".", "!")):
        return TextCue(0.75, "closed_sentence")
    return TextCue(0.55, "unpunctuated")
