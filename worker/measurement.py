"""The measurement core: what counts as voiced audio, the room topics the worker reports on, and the typed
records that travel on them.

The worker sends (`worker/turn_marks.py`); the call simulator and the benchmarks read (`simulator/`,
`benchmarks/`). Everything that decides a latency figure lives here once, so the sender and the readers
cannot drift apart: the −50 dBFS rule over 10 ms windows, and where in a reply the answer starts.
No livekit import: a record is plain data and JSON.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

MARKS_TOPIC = "parley.marks"  # per-turn marks on the host's monotonic clock (benchmarks read these)
METRICS_TOPIC = "parley.metrics"  # per-reply latency summary (the call page shows it)
VOICED_DBFS = -50.0  # a 10 ms window whose RMS is above this is voiced
WINDOW_S = 0.01
VOICED_AMPLITUDE = 32768 * 10 ** (VOICED_DBFS / 20)  # the same level as a sample amplitude (int16 scale)
ANSWER_MIN_WORDS = 3  # a reply's answer starts at its first piece with this many words

USER_MARKS = ("vad_end", "end_of_turn", "stt_final")
REPLY_MARKS = (
    "llm_request",
    "llm_first_token",
    "tts_text",
    "tts_first_audio",
    "published_first",
    "published_first_voiced",
    "answer_published",
)


class MarkFormatError(ValueError):
    """A message on a Parley topic that is not one of its records."""


# --- voiced audio ----------------------------------------------------------------------------------------


def voiced_windows(pcm: np.ndarray, sample_rate: int, threshold_dbfs: float = VOICED_DBFS) -> np.ndarray:
    """Boolean per 10 ms window of int16 PCM: RMS above the threshold. Audio shorter than one window is
    judged as one window (a short frame is still heard)."""
    pcm = np.asarray(pcm)
    if pcm.size == 0:
        return np.zeros(0, dtype=bool)
    win = max(1, int(sample_rate * WINDOW_S))
    n = len(pcm) // win
    if n == 0:
        x = pcm.astype(np.float64)[None, :] / 32768.0
    else:
        x = pcm[: n * win].reshape(n, win).astype(np.float64) / 32768.0
    rms = np.sqrt(np.mean(x * x, axis=1) + 1e-20)
    return np.asarray(20 * np.log10(rms) > threshold_dbfs)


def voiced_mask(data: Any, sample_rate: int = 24_000, threshold_dbfs: float = VOICED_DBFS) -> np.ndarray:
    """`voiced_windows` of raw int16 bytes (an `rtc.AudioFrame.data`)."""
    return voiced_windows(np.frombuffer(data, dtype=np.int16), sample_rate, threshold_dbfs)


def frame_voiced(data: Any, sample_rate: int = 24_000) -> bool:
    """Any 10 ms window of the frame voiced."""
    return bool(voiced_mask(data, sample_rate).any())


def first_voiced_sample(pcm: np.ndarray, sample_rate: int) -> int | None:
    """Index of the first sample of the first voiced window, or None for silence."""
    v = np.flatnonzero(voiced_windows(pcm, sample_rate))
    return int(v[0] * int(sample_rate * WINDOW_S)) if v.size else None


def last_voiced_sample(pcm: np.ndarray, sample_rate: int) -> int | None:
    """Index just after the last voiced window, or None for silence."""
    v = np.flatnonzero(voiced_windows(pcm, sample_rate))
    return int((v[-1] + 1) * int(sample_rate * WINDOW_S)) if v.size else None


def first_voiced_at(
    chunks: list[tuple[float, np.ndarray]], sample_rate: int, after: float, before: float
) -> float | None:
    """Wall time of the first voiced window in timed chunks (start time, PCM) that start in [after, before):
    how a listener hears "the agent spoke" on a recorded track."""
    for start, pcm in chunks:
        if start < after or start >= before:
            continue
        idx = first_voiced_sample(pcm, sample_rate)
        if idx is not None:
            return start + idx / sample_rate
    return None


# --- where the answer starts -------------------------------------------------------------------------------


def answer_offset_s(pieces: list[tuple[str, float]]) -> float:
    """Seconds into a reply's audio where the answer starts: the first piece that holds ≥ 3 words (0 when
    none does: then the whole reply is short, and its first voiced audio is the answer)."""
    offset = 0.0
    for text, seconds in pieces:
        if len(text.split()) >= ANSWER_MIN_WORDS:
            return offset
        offset += seconds
    return 0.0


def answer_heard(
    chunks: list[tuple[float, np.ndarray]],
    sample_rate: int,
    first_voiced: float,
    into_s: float,
    before: float,
) -> float | None:
    """When the listener heard the answer: the reply's first voiced audio as it arrived (at or after
    `first_voiced`, the moment the agent handed it out), then `into_s` further into the reply (the room plays
    it out in real time, so the answer arrives that much later). The one rule offline and room share."""
    first = first_voiced_at(chunks, sample_rate, first_voiced, before)
    if first is None or into_s <= 0.0:
        return first
    return first_voiced_at(chunks, sample_rate, first + into_s - WINDOW_S, before)


# --- the records on the topics -----------------------------------------------------------------------------


@dataclass(frozen=True)
class UserMark:
    """A caller-side event the agent saw: the VAD's end of speech, the end-of-turn decision, a final."""

    mark: str  # one of USER_MARKS
    t: float
    kind: Literal["user"] = "user"


@dataclass(frozen=True)
class SpeechStart:
    """A speech's first voiced frame was handed to the room (the caller may talk over it from now)."""

    speech_id: str
    source: str  # "reply" | "say"
    t: float
    kind: Literal["speech_start"] = "speech_start"


@dataclass(frozen=True)
class SpeechReport:
    """One finished speech (a reply, or a `say`: greeting, filler, hold line) and its marks."""

    speech_id: str
    source: str
    marks: dict[str, float] = field(default_factory=dict)  # REPLY_MARKS, monotonic seconds
    offsets_s: dict[str, float] = field(default_factory=dict)  # the same marks, seconds into its audio
    text: str = ""
    words: int = 0
    spoken_s: float = 0.0
    interrupted: bool = False
    pieces: list[tuple[str, float]] = field(default_factory=list)
    silences_s: list[tuple[float, float]] = field(default_factory=list)
    answered_words: int = 0
    """Words of the caller's turn in what the reply's LLM was sent (a count, not the words: no transcript
    leaves the worker this way); fewer than the caller said is a reply to a fragment."""
    kind: Literal["speech"] = "speech"

    def answer_into_s(self) -> float:
        """Seconds from the reply's first voiced audio to its answer."""
        if "answer_published" in self.offsets_s:
            return self.offsets_s["answer_published"] - self.offsets_s.get("published_first_voiced", 0.0)
        return answer_offset_s(self.pieces)


Mark = UserMark | SpeechStart | SpeechReport


@dataclass(frozen=True)
class TurnLatency:
    """One reply's latency as the framework's own metrics give it (agent side), for the call page."""

    turn: int
    e2e_ms: float | None = None
    stt_final_ms: float | None = None
    end_of_turn_ms: float | None = None
    llm_ttft_ms: float | None = None
    tts_ttfb_ms: float | None = None
    v2v_ms: float | None = None
    interrupted: bool = False

    def to_json(self) -> bytes:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None}).encode()


def mark_message(mark: Mark) -> dict[str, Any]:
    """The JSON object a mark travels as (pairs as lists, exactly as a reader will see them)."""
    message: dict[str, Any] = json.loads(json.dumps(asdict(mark)))
    return message


def parse_mark(message: dict[str, Any]) -> Mark:
    """A mark from its JSON object; MarkFormatError for anything else."""
    try:
        kind = message["kind"]
        if kind == "user":
            return UserMark(mark=str(message["mark"]), t=float(message["t"]))
        if kind == "speech_start":
            return SpeechStart(str(message.get("speech_id", "")), str(message["source"]), float(message["t"]))
        if kind == "speech":
            return SpeechReport(
                speech_id=str(message.get("speech_id", "")),
                source=str(message["source"]),
                marks={str(k): float(v) for k, v in message.get("marks", {}).items()},
                offsets_s={str(k): float(v) for k, v in message.get("offsets_s", {}).items()},
                text=str(message.get("text", "")),
                words=int(message.get("words", 0)),
                spoken_s=float(message.get("spoken_s", 0.0)),
                interrupted=bool(message.get("interrupted", False)),
                pieces=[(str(p), float(s)) for p, s in message.get("pieces", [])],
                silences_s=[(float(o), float(d)) for o, d in message.get("silences_s", [])],
                answered_words=int(message.get("answered_words", 0)),
            )
    except (KeyError, TypeError, ValueError) as e:
        raise MarkFormatError(f"malformed {MARKS_TOPIC} message ({type(e).__name__})") from None
    raise MarkFormatError(f"unknown {MARKS_TOPIC} message kind {message.get('kind')!r}")


def decode_mark(data: bytes) -> Mark:
    """A mark from the bytes of a data packet."""
    try:
        message = json.loads(data)
    except ValueError:
        raise MarkFormatError(f"malformed {MARKS_TOPIC} message (not JSON)") from None
    if not isinstance(message, dict):
        raise MarkFormatError(f"malformed {MARKS_TOPIC} message (not an object)")
    return parse_mark(message)
