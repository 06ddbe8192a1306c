"""Interruption policy: is what the caller said over the agent a backchannel or a real barge-in?

"mm-hmm", "yeah", "okay", "right" (Korean "네", "응") while the agent talks are the caller listening, not
taking the floor, and must not stop the agent. "wait", "stop", "no, ...", a question or anything with real
content is a barge-in. Unknown speech counts as a barge-in: cutting the agent off wrongly costs a repeat,
talking over a caller who wants the floor costs the call. Pure logic: no livekit.

One exception to "unknown is a barge-in": a short sound the recogniser was unsure of. Whisper has no words for
a hum, so it spells an "mm-hmm" as whatever words lie nearest ("Mama.", "in a month.", "and then them."), and
it is unsure of them; a caller who takes the floor says words it is sure of ("wait", "no", a date), or says
more than a breath's worth. So words with no barge-in word in them, from under `SHORT_SOUND_S` of speech, that
the recogniser gave a mean probability under `UNSURE_P`, are read as listening (`Overlap` carries the two
measures; without them the text alone decides).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from .text_cues import Language, detect_language

_TOKEN = re.compile(r"[\w']+(?:-[\w']+)*", re.UNICODE)
_HUM = r"(?:h*m+h*m*|u+h+|a+h+|o+h+)"
_VOCALISATION = re.compile(rf"^{_HUM}(?:-(?:{_HUM}|h+u+h+))*$")
"""A non-lexical sound however Whisper spells it ("M-M-M", "mmhmm", "ahh", "uh-huh"): listening, not words.
Spelled-out hums are open-ended, so they are matched by shape instead of listed."""


SHORT_SOUND_S = 0.9
"""Voice shorter than this (from the first speech window to the last, as the STT's gate measures it) can be
a hum the recogniser spelled as words. Chosen on the barge-in corpus's dev splits: backchannels' voice lasted
0.32-1.09 s as the gate measures it (the misread ones at most 0.75 s of labelled speech, which the gate
reads ~0.1 s longer), interruptions with no barge-in word in them at least 1.1 s."""
UNSURE_P = 0.65
"""Mean word probability under which such a short sound's words are taken as the recogniser's guess. On the
dev splits misread backchannels had 0.24-0.63 (one 0.79); a short interruption ("Wait, wait.", "Stop,
please.") 0.7-0.77, and those carry a barge-in word anyway."""


@dataclass(frozen=True)
class Overlap:
    """What the recogniser can say about the sound besides its words (None: not known)."""

    speech_s: float | None = None
    """How long the caller's voice lasted."""
    word_probability: float | None = None
    """The recogniser's mean probability for the words it wrote."""

    @property
    def unsure_short_sound(self) -> bool:
        return (
            self.speech_s is not None
            and self.word_probability is not None
            and self.speech_s < SHORT_SOUND_S
            and self.word_probability < UNSURE_P
        )


class OverlapVerdict(enum.Enum):
    EMPTY = "empty"  # nothing recognisable yet: wait for words before deciding anything
    BACKCHANNEL = "backchannel"  # the caller is listening: keep talking
    BARGE_IN = "barge_in"  # the caller takes the floor: stop


EN_BACKCHANNELS = frozenset(
    {
        "mm",
        "mmm",
        "mhm",
        "mm-hmm",
        "mm-hm",
        "mhmm",
        "hmm",
        "hm",
        "uh-huh",
        "uh-hum",
        "uhhuh",
        "uh",
        "um",
        "yeah",
        "yea",
        "yep",
        "yup",
        "yes",
        "ya",
        "okay",
        "ok",
        "k",
        "right",
        "alright",
        "all",
        "sure",
        "i",
        "see",
        "got",
        "it",
        "gotcha",
        "cool",
        "great",
        "nice",
        "good",
        "fine",
        "perfect",
        "wow",
        "oh",
        "ah",
        "aha",
        "true",
        "exactly",
        "totally",
        "definitely",
        "absolutely",
        "makes",
        "sense",
        "sounds",
        "huh",
        "indeed",
        "fair",
        "enough",
        "thanks",
        "thank",
        "you",
    }
)
# Phrases made only of backchannel words that still mean "listening" ("i see", "got it", "sounds good",
# "all right", "makes sense", "thank you"). A lone "i" or "all" is not a backchannel, so whole utterances
# are checked against these shapes rather than word by word.
EN_BACKCHANNEL_PHRASES = frozenset(
    {
        "i see",
        "got it",
        "gotcha",
        "sounds good",
        "sounds great",
        "all right",
        "makes sense",
        "thank you",
        "thanks",
        "oh okay",
        "oh ok",
        "ah okay",
        "okay okay",
        "yeah yeah",
        "yes yes",
        "right right",
        "uh huh",
        "mm hmm",
        "mhm mhm",
        "okay great",
        "okay cool",
        "oh nice",
        "fair enough",
        "oh wow",
        "i got it",
        "okay got it",
        "yeah right",
        "oh i see",
        "ah i see",
        "oh right",
        "ok ok",
        "yeah okay",
        "okay yeah",
        "yeah sure",
        "sure sure",
        "oh yeah",
        "very good",
        "that's right",
        "that makes sense",
        "uh huh uh huh",
        "mm hmm mm hmm",
    }
)
EN_SINGLE_BACKCHANNELS = EN_BACKCHANNELS - {
    "i",
    "all",
    "got",
    "it",
    "see",
    "makes",
    "sense",
    "sounds",
    "enough",
    "fair",
    "thank",
    "you",
}
# Discourse markers that carry no content of their own: before a backchannel they do not make it a bid for
# the floor ("so, okay", "and, mm-hmm", "well, right"); alone, or before anything else, they count as words.
EN_LEADING_MARKERS = frozenset({"so", "and", "well"})
# Words that always mean the caller wants the floor, even alone.
EN_BARGE_IN_WORDS = frozenset(
    {
        "wait",
        "stop",
        "no",
        "nope",
        "hold",
        "hang",
        "sorry",
        "excuse",
        "pardon",
        "actually",
        "but",
        "what",
        "hey",
        "cancel",
        "quiet",
    }
)

KO_BACKCHANNELS = frozenset(
    {
        "네",
        "예",
        "응",
        "어",
        "음",
        "아",
        "네네",
        "예예",
        "응응",
        "그래",
        "그래요",
        "그렇죠",
        "그렇구나",
        "맞아",
        "맞아요",
        "맞습니다",
        "알겠어요",
        "알겠습니다",
        "알았어",
        "좋아요",
        "좋아",
        "오",
        "아하",
        "흠",
        "그렇군요",
        "네에",
        "으응",
        "어어",
        "음음",
        "아아",
        "진짜",
        "정말",
    }
)
KO_BARGE_IN_WORDS = frozenset(
    {
        "잠깐",
        "잠깐만",
        "잠깐만요",
        "아니",
        "아니요",
        "아뇨",
        "그만",
        "멈춰",
        "멈춰요",
        "스톱",
        "근데",
        "저기요",
        "여보세요",
        "뭐라고요",
        "뭐라고",
        "다시",
    }
)


def _tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


def classify_overlap(
    text: str, language: Language | None = None, sound: Overlap | None = None
) -> OverlapVerdict:
    """Classify what the caller said while the agent was speaking (interim or final transcript)."""
    stripped = text.strip()
    tokens = _tokens(stripped)
    if not tokens:
        return OverlapVerdict.EMPTY
    lang = language or detect_language(stripped)
    classify = _classify_korean if lang == "ko" else _classify_english
    verdict = classify(stripped, tokens)
    unsure_hum = sound is not None and sound.unsure_short_sound
    if verdict is OverlapVerdict.BARGE_IN and unsure_hum and not _asks_for_floor(stripped, tokens, lang):
        return OverlapVerdict.BACKCHANNEL
    return verdict


def _asks_for_floor(text: str, tokens: list[str], lang: Language) -> bool:
    """Words that take the floor however briefly or unsurely said: a barge-in word or a question."""
    if lang == "ko":
        if any(t in KO_BARGE_IN_WORDS or t.startswith(("잠깐", "아니", "그만", "멈춰")) for t in tokens):
            return True
    elif any(t in EN_BARGE_IN_WORDS for t in tokens):
        return True
    return text.rstrip().endswith("?") and len(tokens) > 1


def _classify_english(text: str, tokens: list[str]) -> OverlapVerdict:
    if _asks_for_floor(text, tokens, "en"):
        return OverlapVerdict.BARGE_IN  # "right?" is a backchannel; "is it open on sunday?" is not
    lead = 0
    while lead < len(tokens) - 1 and tokens[lead] in EN_LEADING_MARKERS:
        lead += 1
    tokens = tokens[lead:]
    normalised = " ".join(t.replace("-", " ") for t in tokens)
    if normalised in EN_BACKCHANNEL_PHRASES:
        return OverlapVerdict.BACKCHANNEL
    if len(tokens) <= 3 and all(t in EN_SINGLE_BACKCHANNELS or _VOCALISATION.match(t) for t in tokens):
        return OverlapVerdict.BACKCHANNEL
    return OverlapVerdict.BARGE_IN


def _classify_korean(text: str, tokens: list[str]) -> OverlapVerdict:
    if _asks_for_floor(text, tokens, "ko"):
        return OverlapVerdict.BARGE_IN
    if len(tokens) <= 3 and all(t in KO_BACKCHANNELS for t in tokens):
        return OverlapVerdict.BACKCHANNEL
    return OverlapVerdict.BARGE_IN
