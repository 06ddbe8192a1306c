"""Did the caller hear the whole reply? A listener transcribes what reached the caller and checks it against
what the agent meant to say.

A caller counts a reply cut off, or words that never arrived, as failures, just as an apology. Latency
figures cannot show them: a reply whose last sentence was lost (a voice that stopped, a false interruption
that never resumed, an underrun that swallowed a word) still has a fast first word. So after a call each
reply's audio, as the caller received it, is transcribed by a Whisper `Listener` (by default the
multilingual base, not the model that transcribes callers) and aligned with the reply's text (what the LLM
handed the voice; `worker/turn_marks.py`):

- `words_heard`: the share of the reply's words found, in order, in what the listener wrote (replies the
  caller stopped by talking over them are counted apart, as `stopped_by_caller`);
- `cut_off`: the reply's last `TAIL_WORDS` words (Korean: `TAIL_CHARS` characters) all missing while the
  words before them were heard, and the caller did not talk over it (a barge-in rightly stops a reply);
- `unheard`: under half of the words up to where the reply stopped found: the listener could not make out
  even what reached the caller.

The listener is a proxy with its own errors (~5 % WER on the CPU voice), which is why a cut-off needs
several words in a row missing at the end, not one. It runs after the calls, so it takes no CPU from them.
"""

from __future__ import annotations

import argparse
import difflib
import re
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from plugins.word_error import cer_form, compare_form

LISTEN_RATE = 16_000
TAIL_WORDS = 3
TAIL_CHARS = 6
UNHEARD_SHARE = 0.5
MIN_UNITS = 4
"""Replies shorter than this (in words; Korean: characters / 2) are too short to call cut off."""
FAR_BLOCK = 3
"""Units a match needs to count as heard when it lies more than the tail past what was heard before it."""
LEAD_S = 0.1
"""The window opens this long before the reply's first audible sample (its first word's onset)."""

_HANGUL = re.compile(r"[\uac00-\ud7a3]")


class Listener:
    """Whisper as the caller's ear: greedy decoding, optionally primed with the business's vocabulary."""

    def __init__(self, model: str = "base", cpu_threads: int = 0) -> None:
        from faster_whisper import WhisperModel

        from plugins.whisper.weights import resolve_model_path

        self.model_name = model
        self.model = WhisperModel(
            str(resolve_model_path(model)), device="cpu", compute_type="int8", cpu_threads=cpu_threads
        )

    def hear(self, audio: np.ndarray, language: str = "en", prompt: str | None = None) -> str:
        """What the listener writes for 16 kHz float32 audio."""
        segments, _ = self.model.transcribe(
            audio,
            language=language,
            beam_size=1,
            temperature=0.0,
            initial_prompt=prompt,
            condition_on_previous_text=False,
            vad_filter=False,
        )
        return " ".join(s.text.strip() for s in segments).strip()


def language_of(text: str) -> str:
    """'ko' for a reply written in Hangul, else 'en' (the two languages Parley's voices speak)."""
    return "ko" if _HANGUL.search(text) else "en"


def units(text: str, language: str) -> list[str]:
    """What is compared: words (numbers spelled out, punctuation out), or Korean's characters."""
    if language == "ko":
        return list(cer_form(text, "ko"))
    return compare_form(text).split()


@dataclass(frozen=True)
class HeardReply:
    said: int
    """Units (words; Korean: characters) in the reply's text."""
    found: int
    """Of those, how many the listener wrote, in order."""
    heard_to: int
    """One past the last unit found: where the caller stopped hearing the reply."""
    interrupted: bool
    heard_text: str

    @property
    def words_heard(self) -> float:
        return self.found / self.said if self.said else 1.0

    @property
    def unheard(self) -> bool:
        # even the part before where it stopped was mostly not made out (a garbled voice, not a lost end)
        return (
            not self.interrupted
            and self.said >= MIN_UNITS
            and self.found < UNHEARD_SHARE * max(self.heard_to, MIN_UNITS)
        )

    def cut_off(self, tail: int) -> bool:
        return (
            not self.interrupted
            and not self.unheard
            and self.said >= max(MIN_UNITS, tail + 1)
            and self.said - self.heard_to >= tail
        )

    def as_json(self, language: str) -> dict[str, Any]:
        tail = TAIL_CHARS if language == "ko" else TAIL_WORDS
        return {
            **asdict(self),
            "words_heard": round(self.words_heard, 3),
            "cut_off": self.cut_off(tail),
            "unheard": self.unheard,
            "language": language,
        }


def judge(said_text: str, heard_text: str, interrupted: bool = False) -> dict[str, Any]:
    """Align the reply's text with what the listener wrote (longest matching blocks, in order)."""
    language = language_of(said_text)
    tail = TAIL_CHARS if language == "ko" else TAIL_WORDS
    said, heard = units(said_text, language), units(heard_text, language)
    blocks = difflib.SequenceMatcher(None, said, heard, autojunk=False).get_matching_blocks()
    found = sum(b.size for b in blocks)
    heard_to = 0
    for b in blocks:
        # a short match far past the rest ("you're", "on the" of another reply said after this one stopped)
        # is chance; a reply heard on after a few lost words matches on for longer
        if b.size and (b.size >= FAR_BLOCK or b.a - heard_to <= tail):
            heard_to = b.a + b.size
    reply = HeardReply(len(said), found, heard_to, interrupted, heard_text)
    return reply.as_json(language)


def reply_windows(turns: list[Any], end: float) -> list[tuple[int, float, float, bool] | None]:
    """Per turn: (index, start, end, stopped) of the audio that carries its reply, or None.

    The window opens at the first agent audio the caller heard after the turn and closes when the caller's
    next turn said after a reply ends: a reply runs on over a backchannel ("mm-hmm") said during it, and
    one that runs into the caller's next words is still heard. `stopped`: the caller stopped the reply, by
    a turn said over it or by going on with the turn it began in (agent voice heard inside the turn), and
    the worker's marks say no reply speech after the turn played to its end (without marks, a turn said
    over the reply is taken to have stopped it). A reply the worker stopped with nobody talking is not
    `stopped`: its missing end counts as cut off."""
    out: list[tuple[int, float, float, bool] | None] = []
    for i, tr in enumerate(turns):
        later = turns[i + 1 :]
        if not tr.reply_text.strip() or tr.first_audible_ms is None:
            out.append(None)
            continue
        start = tr.speech_end + tr.first_audible_ms / 1000 - LEAD_S
        stop = next((t.speech_end for t in later if t.start == "after_reply"), end)
        barged = bool(later) and later[0].start == "during_reply"
        went_on = (tr.spoke_over_ms or 0.0) > 0.0
        stopped = barged if tr.completed_reply is None else tr.completed_reply == "" and (barged or went_on)
        out.append((i, start, stop, stopped) if stop > start else None)
    return out


def said_text(tr: Any) -> str:
    """The reply a listener should hear in full: the last one that played to its end, when the worker's
    marks say which (a reply begun in a pause and stopped when the caller went on is not it)."""
    return tr.completed_reply or tr.reply_text


def listen_call(res: Any, listener: Listener) -> None:
    """Set `heard` on each turn of a finished call (a `simulator.offline.CallResult`) that got a reply."""
    track = res.speaker.track
    for window in reply_windows(res.turns, res.end):
        if window is None:
            continue
        i, start, stop, barged = window
        tr = res.turns[i]
        audio = track.render(start, LISTEN_RATE, stop - start)[: int((stop - start) * LISTEN_RATE)]
        text = said_text(tr)
        tr.heard = judge(text, listener.hear(audio, language_of(text)), interrupted=barged)


def _cut_turn(t: dict[str, Any]) -> dict[str, Any]:
    keep: dict[str, Any] = {k: t[k] for k in ("call", "run", "file") if k in t}
    return {
        **keep,
        "reply_text": t.get("completed_reply") or t["reply_text"],
        "heard": t["heard"]["heard_text"],
    }


def replies_heard(turns: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the caller heard of the replies, over turns as JSON (None when no listener ran)."""
    listened = [t["heard"] for t in turns if t.get("heard")]
    if not listened:
        return None
    judged = [h for h in listened if not h["interrupted"]]
    said = sum(h["said"] for h in judged)
    return {
        "replies": len(judged),
        "stopped_by_caller": len(listened) - len(judged),
        "words_heard": round(sum(h["found"] for h in judged) / said, 3) if said else None,
        "cut_off": sum(1 for h in judged if h["cut_off"]),
        "unheard": sum(1 for h in judged if h["unheard"]),
        "cut_off_turns": [_cut_turn(t) for t in turns if t.get("heard") and t["heard"]["cut_off"]],
    }


def add_listen_arguments(ap: argparse.ArgumentParser, when: str) -> None:
    """`--listen MODEL` (default base) and `--no-listen`, for the benchmarks that place calls."""
    ap.add_argument(
        "--listen",
        default="base",
        metavar="MODEL",
        help=f"{when}: a Whisper model checks what the caller heard of each reply (`replies_heard`: "
        "replies cut off, words lost; benchmarks/heard.py)",
    )
    ap.add_argument("--no-listen", dest="listen", action="store_const", const="", help="skip the listener")


def listen_runs(results: list[Any], model: str) -> bool:
    """Listen to every call's replies with one listener. False, after one printed line, when none can load:
    a missing or broken model must not cost the calls' own report."""
    try:
        listener = Listener(model)
    except Exception as e:
        print(f"no listener ({model}: {type(e).__name__}: {str(e)[:120]}); replies not checked", flush=True)
        return False
    for res in results:
        listen_call(res, listener)
    return True


def describe(summary: dict[str, Any] | None) -> str:
    """One line for the console: what the caller heard of the replies."""
    if not summary:
        return "heard: no replies checked"
    share = summary["words_heard"]
    line = (
        f"heard: {share * 100:.0f} % of the replies' words at the caller"
        if share is not None
        else "heard: no reply words"
    )
    line += f"; {summary['cut_off']} of {summary['replies']} replies cut off, {summary['unheard']} unheard"
    line += f" ({summary['stopped_by_caller']} stopped by the caller, not judged)"
    for t in summary["cut_off_turns"]:
        line += f"\n  cut off: {t.get('file', '?')}: said {t['reply_text'][:80]!r}, heard {t['heard'][:80]!r}"
    return line
