"""Hallucination guard: Whisper invents text for silence and noise; this decides what to throw away.

Checks, cheapest first: on each decoded segment the model's own no-speech probability, log-probability and
gzip compression ratio (long loops compress far too well); on the text, repetition loops (`cut_loop`: short
loops and scripts whose bytes gzip reads differently slip past the ratio), a sentence written twice in a row
(`drop_repeated_sentences`), and a blocklist of the phrases
Whisper is known to produce from nothing (subtitle credits, "thanks for watching", music notes). Phrases a
caller might really say ("thank you", "bye") are only dropped when the audio evidence is weak.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .model import DecodeResult, Segment

# Never plausible from a caller talking to a voice agent, per language (keys as `phrase_key` writes them).
PHANTOM_PHRASES: dict[str, frozenset[str]] = {
    "en": frozenset(
        {
            "thanks for watching",
            "thank you for watching",
            "thanks for watching and see you next time",
            "please subscribe",
            "subscribe to my channel",
            "like and subscribe",
            "dont forget to like and subscribe",
            "see you in the next video",
            "subtitles by the amaraorg community",
            "transcription by castingwords",
            "translated by",
            "www mooji org",
            "music",
            "applause",
            "laughter",
            "silence",
            "blank audio",
            "no speech",
        }
    ),
    # Whisper's Korean inventions on silence come from broadcast/video subtitles: sign-offs and credits.
    "ko": frozenset(
        {
            "시청해주셔서 감사합니다",
            "시청해 주셔서 감사합니다",
            "시청 해주셔서 감사합니다",
            "구독과 좋아요 부탁드립니다",
            "구독 좋아요 부탁드립니다",
            "구독과 좋아요",
            "좋아요와 구독 부탁드립니다",
            "다음 영상에서 만나요",
            "자막 제공",
            "음악",
            "박수",
        }
    ),
}
# Real replies sometimes, but also the commonest inventions on near-silence: need good evidence.
WEAK_PHRASES: dict[str, frozenset[str]] = {
    "en": frozenset(
        {"thank you", "thanks", "you", "bye", "bye bye", "okay", "oh", "so", "i", "uh", "um", "hmm"}
    ),
    "ko": frozenset({"감사합니다", "네", "음", "어", "아", "안녕히 계세요", "안녕하세요"}),
}

_ANNOTATION = re.compile(r"\[[^\]]*\]|\([^)]*\)|\*[^*]*\*|[♪♫♬]+")


@dataclass(frozen=True)
class GuardOptions:
    no_speech_threshold: float = 0.6
    """Drop a segment above this no-speech probability when its log-probability is also poor."""
    logprob_threshold: float = -0.8
    no_speech_hard: float = 0.9
    """Drop above this no-speech probability whatever the log-probability."""
    min_logprob: float = -1.6
    """Drop segments the model itself barely believes."""
    max_compression_ratio: float = 2.4
    weak_phrase_min_speech_s: float = 0.35
    """A weak phrase needs at least this much detected speech and a confident decode to survive."""
    weak_phrase_min_logprob: float = -0.5
    unheard_min_speech_s: float = 1.0
    """`unintelligible`: speech at least this long that the guard emptied is a caller not understood."""


def phrase_key(text: str) -> str:
    """Case-folded letters and digits of any script, single-spaced, for blocklist lookups.

    Unicode-aware on purpose: a key of ASCII letters only is empty for Hangul, and an empty key reads as
    "nothing was said".
    """
    t = re.sub(r"['’]", "", text.casefold())
    return " ".join(re.sub(r"[\W_]+", " ", t).split())


def _phrase_sets(language: str) -> tuple[frozenset[str], frozenset[str]]:
    """Phantom and weak phrases to check: the decode's language, plus English (Whisper's default inventions
    turn up in any language)."""
    lang = (language or "en").split("-")[0].lower()
    phantom = PHANTOM_PHRASES["en"] | PHANTOM_PHRASES.get(lang, frozenset())
    weak = WEAK_PHRASES["en"] | WEAK_PHRASES.get(lang, frozenset())
    return phantom, weak


def _segment_ok(seg: Segment, opts: GuardOptions) -> bool:
    if seg.no_speech_prob >= opts.no_speech_hard:
        return False
    if seg.no_speech_prob > opts.no_speech_threshold and seg.avg_logprob < opts.logprob_threshold:
        return False
    if seg.avg_logprob < opts.min_logprob:
        return False
    return seg.compression_ratio <= opts.max_compression_ratio


_TOKEN = re.compile(r"[^\W_]+")
_INNER_LOOP = re.compile(r"(\w{1,8}?)\1{2,}")
LOOP_REPEATS = 4
"""A stretch of one to `LOOP_MAX_WORDS` words said this many times in a row, running to the end of the
decode, is a loop. Whisper does not come back from a loop: it runs to the token budget, so the stretch ends
the text ("the the the the", "그가, 그가, 그가, 그가, 그가"). People repeat too, but fewer times or with
more words after ("no, no, no, that's not what I said", "thank you, thank you, thank you so much"):
those are kept whole."""
LOOP_MAX_WORDS = 4
DIGIT_LOOP_REPEATS = 6
"""Digits said one by one repeat for real ("my PIN is 1, 1, 1, 1"), so a digit-only stretch needs more."""
INNER_LOOP_MIN_CHARS = 6
"""Inside one word (scripts written without spaces, or a loop glued together: "ㅋㅋㅋㅋㅋㅋ",
"감사합니다감사합니다감사합니다"), a stretch repeated three times and at least this long; words that double a
syllable ("하하하", "반짝반짝") are shorter or repeat twice. Words holding a digit are numbers ("1111",
"100000") and are left to the check above."""


def _word_loop_start(words: list[re.Match[str]]) -> int | None:
    keys = [w.group(0).casefold() for w in words]
    for i in range(len(keys)):
        for n in range(1, LOOP_MAX_WORDS + 1):
            unit = keys[i : i + n]
            if len(unit) < n:
                break
            repeats = 1
            while keys[i + repeats * n : i + (repeats + 1) * n] == unit:
                repeats += 1
            rest = keys[i + repeats * n :]
            runs_to_end = len(rest) < n and rest == unit[: len(rest)]  # a loop may stop mid-stretch
            need = DIGIT_LOOP_REPEATS if all(k.isdigit() for k in unit) else LOOP_REPEATS
            if repeats >= need and runs_to_end:
                return words[i].start()
    return None


def _inner_loop_start(words: list[re.Match[str]]) -> int | None:
    for w in words:
        word = w.group(0)
        if len(word) < INNER_LOOP_MIN_CHARS or any(c.isdigit() for c in word):
            continue
        for m in _INNER_LOOP.finditer(word):
            if m.end() - m.start() >= INNER_LOOP_MIN_CHARS:
                return w.start() + m.start()
    return None


def cut_loop(text: str) -> str:
    """`text` up to where a repetition loop starts ("" when it starts with one), whatever the language.

    Words are runs of letters or digits of any script, compared case-folded; punctuation between repeats
    ("4-4-4", "그가, 그가") does not hide a loop. Whisper does not come back from a loop, so what precedes it
    is the decode's last trustworthy text.
    """
    words = list(_TOKEN.finditer(text))
    starts = [s for s in (_word_loop_start(words), _inner_loop_start(words)) if s is not None]
    if not starts:
        return text
    return text[: min(starts)].rstrip(" ,.;:!?-–—…、。，")


_SENTENCE = re.compile(r"[^.!?。！？]+(?:[.!?。！？]+|$)")
REPEATED_SENTENCE_MIN_WORDS = 2


def drop_repeated_sentences(text: str) -> str:
    """`text` with a sentence that repeats the one before it, or its start, word for word (case and
    punctuation aside) dropped. A primed decode can write a short utterance twice ("Great, thank you. Great,
    thank you.") or start it again at the end of its audio ("Hello, I'd like a later booking. Hello, I'd
    like"): a loop the audio ran out on. A caller who really says a sentence twice loses nothing the agent
    needs. One-word sentences ("No. No.") are kept: they are how people insist."""
    out: list[str] = []
    last: list[str] = []
    for m in _SENTENCE.finditer(text):
        sentence = m.group(0).strip()
        if not sentence:
            continue
        key = [w.casefold() for w in _TOKEN.findall(sentence)]
        if len(key) >= REPEATED_SENTENCE_MIN_WORDS and key == last[: len(key)]:
            continue
        out.append(sentence)
        last = key
    return " ".join(out)


PROMPT_ECHO_MIN_WORDS = 3
"""A decode that is only a stretch of its prompt this long or longer is Whisper copying its context."""


def clean_text(
    result: DecodeResult,
    *,
    speech_s: float,
    opts: GuardOptions = GuardOptions(),
    prompt: str | None = None,
) -> str:
    """The text worth showing for a decode, or "" when it looks invented.

    `speech_s` is how much of the audio the speech gate classed as speech. The phrase lists follow the
    decode's language (`result.language`). `prompt` is the text the decode was primed with: Whisper fed a
    noise tail after a primed decode writes the prompt out again ("She can't hear very well." twice).
    """
    kept = [s for s in result.segments if _segment_ok(s, opts)]
    text = " ".join(_ANNOTATION.sub(" ", s.text).strip() for s in kept)
    text = drop_repeated_sentences(cut_loop(" ".join(text.split())))
    key = phrase_key(text)
    phantom, weak = _phrase_sets(result.language)
    if not key or key in phantom:
        return ""
    if prompt and len(key.split()) >= PROMPT_ECHO_MIN_WORDS and f" {key} " in f" {phrase_key(prompt)} ":
        return ""
    if key in weak:
        logprob = min(s.avg_logprob for s in kept)
        if speech_s < opts.weak_phrase_min_speech_s or logprob < opts.weak_phrase_min_logprob:
            return ""
    return text


def unintelligible(
    result: DecodeResult, text: str, *, speech_s: float, opts: GuardOptions = GuardOptions()
) -> bool:
    """True when the caller spoke (the speech gate heard at least `unheard_min_speech_s`, and Whisper wrote
    words it took for speech) but the guard kept nothing: too unsure, or a loop. The caller is then owed a
    request to repeat, not silence. Noise is not this: Whisper gives it a high no-speech probability, and
    the inventions it writes for noise are phantom phrases, not low-confidence words."""
    if text or speech_s < opts.unheard_min_speech_s:
        return False
    worded = [s for s in result.segments if phrase_key(s.text)]
    if not worded or min(s.no_speech_prob for s in worded) > opts.no_speech_threshold:
        return False
    key = phrase_key(" ".join(s.text for s in worded))
    phantom, _ = _phrase_sets(result.language)
    return key not in phantom
