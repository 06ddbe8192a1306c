"""Hallucination guard: Whisper invents text for silence and noise; this decides what to throw away.

Checks, cheapest first: on each decoded segment the model's own no-speech probability, log-probability and
gzip compression ratio (long loops compress far too well); on the text, repetition loops (`loops.py`: short
loops and scripts whose bytes gzip reads differently slip past the ratio), a sentence written twice in a row
(`drop_repeated_sentences`), a whole decode that says one clause twice without conviction
(`echo_min_logprob`), and a blocklist of the phrases
Whisper is known to produce from nothing (subtitle credits, "thanks for watching", music notes). Phrases a
caller might really say ("thank you", "bye") are only dropped when the audio evidence is weak.

A decode that is one short stretch repeated from its first word is the one case where the text alone cannot
tell: Whisper loops like that on noise ("you you you", "Thank you. Thank you. …") and on a caller who
repeated a word ("Wait, wait." written "Wait, wait. Wait. Wait. …"). The audio decides (`_heard_saying`):
with evidence that a person said the stretch it is kept once ("Wait."), else the decode is dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .loops import LOOP_REPEATS, collapse_runs, cut_loop, echoes_itself, find_loop, leading_loop, said_once
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
_TOKEN = re.compile(r"[^\W_]+")
_SENTENCE = re.compile(r"[^.!?。！？]+(?:[.!?。！？]+|$)")


@dataclass(frozen=True)
class GuardOptions:
    no_speech_threshold: float = 0.6
    """Above this no-speech probability Whisper took the audio for no speech: a decode it emptied is noise,
    not a caller to ask again (`unintelligible`)."""
    logprob_threshold: float = -0.8
    no_speech_hard: float = 0.9
    """Drop above this no-speech probability whatever the log-probability."""
    unsure_no_speech: float = 0.15
    """Drop a segment above this no-speech probability when its log-probability is also under
    `logprob_threshold`: Whisper doubting both that it heard speech and what it heard. That is how tiny.en
    reads speech it cannot understand (Korean said to it: no-speech 0.13-0.37, log-probability -0.8 to -1.5,
    fluent English it invented). Calibrated on the dev splits' streaming FINALs (`benchmarks.stt
    --unreadable`): 16 of the 20 Korean FINALs that had English words lose them; 11 of 477 English FINALs
    do, 2 of them mostly right (0.10 took 24 and 5; 0.20 kept 9 Korean)."""
    min_logprob: float = -1.6
    """Drop segments the model itself barely believes."""
    max_compression_ratio: float = 2.4
    weak_phrase_min_speech_s: float = 0.35
    """A weak phrase needs at least this much detected speech and a confident decode to survive."""
    weak_phrase_min_logprob: float = -0.5
    loop_min_speech_s: float = 0.35
    """A decode that is one stretch repeated (a loop from its first word, or a segment over the compression
    ratio that repeats one sentence) keeps the stretch once only with this much detected speech (as for a
    weak phrase: noise the speech gate lets through is short)..."""
    loop_max_no_speech_prob: float = 0.5
    """...when Whisper rated each of its segments more likely speech than not (its no-speech probability is
    read before it writes a word, so the loop after it does not move it)..."""
    loop_s_per_word: float = 0.4
    """...and when the stretch said up to `LOOP_REPEATS` times at this many seconds a word could fill the
    speech heard. A one-word loop over 2 s of speech hid the caller's other words: the decode is dropped
    and the caller asked to repeat (`unintelligible`), not handed one word of it. The segment's
    log-probability is not used: the loop after the stretch sets its average (-0.45 to -1.0 on real "Wait,
    wait.")."""
    echo_min_logprob: float = -0.8
    """A decode that is one clause written twice or more (`loops.echoes_itself`: "I'm going to play the game,
    and I'm going to play the game.") is dropped below this log-probability: it is how tiny.en reads speech
    it cannot understand (Korean said to the English model: -0.9 to -1.4), and the caller is asked to repeat.
    Said with confidence it is a person repeating, or a primed decode written twice, and the repeat is
    dropped (`drop_repeated_sentences`)."""
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


def _believed(seg: Segment, opts: GuardOptions) -> bool:
    """The model's own verdict on a segment: speech, and words it believes (compression is checked apart)."""
    if seg.no_speech_prob >= opts.no_speech_hard:
        return False
    if seg.avg_logprob < opts.logprob_threshold and seg.no_speech_prob > opts.unsure_no_speech:
        return False
    return seg.avg_logprob >= opts.min_logprob


def _heard_saying(once: str, segs: list[Segment], speech_s: float, opts: GuardOptions) -> bool:
    """Whether the audio says a person spoke `once`, the stretch a looping decode repeats (see the
    `loop_*` options): enough speech, but no more than the stretch said a few times fills, and segments
    Whisper took for speech."""
    most_s = max(1, len(_TOKEN.findall(once))) * LOOP_REPEATS * opts.loop_s_per_word
    return (
        bool(segs)
        and opts.loop_min_speech_s <= speech_s <= most_s
        and max(s.no_speech_prob for s in segs) <= opts.loop_max_no_speech_prob
    )


def _segment_text(seg: Segment, speech_s: float, opts: GuardOptions) -> str:
    """A believed segment's text, annotations out. One over the compression ratio is a long loop: kept as
    its stretch said once when the whole segment repeats one stretch and the audio says a person said it
    ("Sorry. Sorry. Sorry. …" -> "Sorry."), else dropped ("")."""
    text = " ".join(_ANNOTATION.sub(" ", seg.text).split())
    if seg.compression_ratio <= opts.max_compression_ratio:
        return text
    loop = leading_loop(text)
    if loop is None or not _short(loop.unit):
        return ""  # not a short stretch again and again: something else went wrong in the segment
    once = said_once(text, loop)
    return once if _heard_saying(once, [seg], speech_s, opts) else ""


KEEP_ONCE_MAX_WORDS = 2
"""The longest looped stretch kept once. A caller who repeats to stop the agent repeats a word or two
("wait, wait", "no no no", "hold on"): that is the case the rule is for. A longer stretch Whisper loops on
is often a clause it finished with a word it did not hear, which kept once would read as a finished turn;
`benchmarks.turns` cannot show that effect (it never calls the guard), so longer loops are dropped as they
were before the rule."""


def _short(unit: str) -> bool:
    return len(_TOKEN.findall(unit)) <= KEEP_ONCE_MAX_WORDS


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
    terms: tuple[str, ...] = (),
) -> str:
    """The text worth showing for a decode, or "" when it looks invented.

    `speech_s` is how much of the audio the speech gate classed as speech: with the segments' own
    statistics it decides whether a decode that only repeats one stretch was a caller saying it (kept
    once) or an invention (dropped). The phrase lists follow the
    decode's language (`result.language`). `prompt` is the text the decode was primed with: Whisper fed a
    noise tail after a primed decode writes the prompt out again ("She can't hear very well." twice).
    `terms` are the vocabulary in that prompt: a decode that is one of them alone is a caller's answer
    ("Harrowgate Medical Center."), not an echo.
    """
    kept: list[Segment] = []
    texts: list[str] = []
    for s in result.segments:
        seg_text = _segment_text(s, speech_s, opts) if _believed(s, opts) else ""
        if seg_text:
            kept.append(s)
            texts.append(seg_text)
    text = " ".join(texts)
    loop = leading_loop(text)
    if loop is None:
        text = collapse_runs(cut_loop(text))
    else:  # the whole decode repeats one stretch: the caller said it, or Whisper invented it
        text = said_once(text, loop)
        text = text if _short(loop.unit) and _heard_saying(text, kept, speech_s, opts) else ""
    if kept and echoes_itself(text) and min(s.avg_logprob for s in kept) < opts.echo_min_logprob:
        return ""
    text = drop_repeated_sentences(text)
    key = phrase_key(text)
    phantom, weak = _phrase_sets(result.language)
    if not key or key in phantom:
        return ""
    if (
        prompt
        and len(key.split()) >= PROMPT_ECHO_MIN_WORDS
        and f" {key} " in f" {phrase_key(prompt)} "
        and key not in {phrase_key(t) for t in terms}
    ):
        return ""
    if key in weak:
        logprob = min(s.avg_logprob for s in kept)
        if speech_s < opts.weak_phrase_min_speech_s or logprob < opts.weak_phrase_min_logprob:
            return ""
    return text


def looped(result: DecodeResult, opts: GuardOptions = GuardOptions()) -> bool:
    """Whether the decode ran into a repetition loop (a segment over the compression ratio, text that ends
    in a loop, or one clause written twice): the failure Whisper's own remedy, decoding again another way,
    is for."""
    if any(s.compression_ratio > opts.max_compression_ratio for s in result.segments):
        return True
    return find_loop(result.text) is not None or echoes_itself(result.text)


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
