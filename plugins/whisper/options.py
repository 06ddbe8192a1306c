"""Options for the Whisper STT and the language check (no livekit import: settings code can use them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .guard import GuardOptions
from .model import ModelOptions
from .speech_gate import GateOptions

LANGUAGES = ("en", "ko", "auto")


class WhisperConfigError(ValueError):
    """A configuration that cannot work (e.g. Korean with an English-only model); one line."""


@dataclass(frozen=True)
class StreamingOptions:
    first_partial_speech_s: float = 0.2
    """Speech heard (pre-roll not counted) before an utterance's first partial: its words are what a
    barge-in is judged on. A short "wait" or "stop" is one word in 0.2 s; 0.3 s stopped the agent ~90 ms
    later on the dev split's interruptions (p50 453 vs 359 ms)."""
    partial_interval_s: float = 0.3
    """New audio between partials until one has given words (a first partial heard too little speech):
    the agent talks on over the caller until a partial has a word."""
    later_partial_interval_s: float = 1.0
    """New audio needed between partials once one has given words (captions, long-turn commits). Each
    re-decode costs a core for ~0.2 s on a 2-core machine, and one still running when the caller stops slows
    the settle decode beside it: in the room, 1.0 s instead of 0.5 s halved the decodes per call (30 -> 17).
    Until a partial has words the first cadence holds: a barge-in is judged on them."""
    partial_beam_size: int = 1
    partial_window_s: int = 10
    """Encoder window for partials (see DecodeRequest.window_s): cheap, slightly less accurate."""
    final_window_s: int = 10
    """Encoder window for settle/final decodes and `recognize()` (the window grows to the audio + 5 s for
    longer utterances). On 120 dev-split corpus files, one thread: 10 s WER 28.7 % / decode p50 188 ms,
    15 s 28.8 % / 287 ms, 8 s 29.7 % / 170 ms. The final is on the critical path of every turn."""
    partial_load_factor: float = 2.0
    """Partials wait at least this many times the recent decode time, so a slow or busy machine re-decodes
    less often instead of falling behind."""
    final_beam_size: int = 1
    """Beam for the pause/final decode; more costs latency on CPU."""
    min_speech_s: float = 0.2
    """Utterances with less detected speech produce no transcript."""
    settle_s: float = 0.064
    """Silence after speech that starts the speculative whole-utterance decode (its text becomes PREFLIGHT at
    the gate's pause and FINAL at the flush if the caller says nothing more)."""
    style_prompt: str = ""
    """Text in front of every decode's prompt. Whisper writes what it hears in the style of its prompt: one
    with fillers and backchannels ("Um, uh, mm-hmm.") keeps them instead of dropping or mishearing them.
    Empty here; the worker passes "Um, uh, mm-hmm, uh-huh." for English (fewer open clauses cut off on the
    test split, "Mm-hmm" no longer heard as "Mama"; benchmarks/RESULTS.md, "End of turn"). A short fragment
    it makes tiny.en write twice is kept once by the guard."""
    vocabulary: tuple[str, ...] = ()
    """The business's own words (names, brands, drugs, streets), put after the style prompt in every decode's
    prompt so Whisper spells them as listed (vocabulary.py; `check_vocabulary` cleans and caps them)."""
    context_gap_s: float = 0.0
    """An utterance starting within this long after the previous FINAL is one turn with it (a hesitation
    split it): its settle/final decode takes the turn's earlier audio in front. 0 (default here; the worker
    uses 3 s) decodes every utterance alone. On the dev split's 140 hesitation files flushed at every VAD
    end (`benchmarks.stt --fragments --speed 2`, tiny.en, style prompt): alone 37.0 % WER, with 3 s and
    `whole_turn` 28.7 % (59 files better, 15 worse), whole files decoded at once 31.4 %; flush -> FINAL
    p50/p95 24/93 -> 52/241 ms at double speed (benchmarks/RESULTS.md). Keeping only the new words instead
    (2026-11-23): 38.4 -> 37.3 %, digit groups worse, and a second decode when the parts did not line up."""
    whole_turn: bool = False
    """With `context_gap_s`: an utterance that continues the turn is decoded with the turn's earlier audio
    in front and the whole reading is kept: its PREFLIGHT/FINAL carry it in their metadata
    (`stream.TURN_TEXT`, for a consumer that replaces the turn's text with it, as Parley's turn hooks do),
    and their own text is the end of it after the earlier FINAL (what a transcript display appends). No
    second decode when the two readings do not line up; a reading with no more letters than the earlier
    FINAL (Whisper skipped the start) is not used. Tell the STT when the agent answers
    (`WhisperSTT.new_turn()`), so a caller's next words never carry the answered turn's audio."""
    context_max_s: float = 8.0
    """At most this much earlier audio goes in front (the decode window grows with the audio)."""
    commit_after_s: float = 12.0
    """Utterance length after which whole confirmed sentences are committed and trimmed."""
    max_utterance_s: float = 25.0
    """Hard cap: commit whatever is confirmed (or everything) so a decode stays inside the 30 s window."""
    gate: GateOptions = field(default_factory=GateOptions)
    guard: GuardOptions = field(default_factory=GuardOptions)


@dataclass(frozen=True)
class WhisperSTTOptions:
    model: ModelOptions = field(default_factory=ModelOptions)
    language: str = "en"
    """en, ko or auto (auto and ko need a multilingual model)."""
    streaming: StreamingOptions = field(default_factory=StreamingOptions)


def check_language(language: str, *, multilingual: bool, model_name: str) -> str | None:
    """Validate the language setting against the model; returns the code to decode with (None = detect)."""
    if language not in LANGUAGES:
        raise WhisperConfigError(f"STT language must be one of {', '.join(LANGUAGES)} (got {language!r})")
    if language != "en" and not multilingual:
        raise WhisperConfigError(
            f"STT model {model_name!r} is English-only but the language is {language!r}; "
            "use a multilingual model (e.g. 'base') or language 'en'"
        )
    return None if language == "auto" else language
