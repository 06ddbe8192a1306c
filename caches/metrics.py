"""Counters for the phrase cache and the fillers: hit rate, filler rate, first audible audio per turn."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class CacheMetrics:
    lookups: int = 0
    hits: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record_lookup(self, hit: bool) -> None:
        with self._lock:
            self.lookups += 1
            self.hits += int(hit)

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else 0.0

    def as_dict(self) -> dict[str, float]:
        return {"cache_lookups": self.lookups, "cache_hits": self.hits, "cache_hit_rate": self.hit_rate}


@dataclass
class TurnRecord:
    """One user turn as the caller heard it. Times are `time.time()` seconds; None = did not happen."""

    index: int
    user_stopped_at: float  # end of the caller's speech (VAD), when known, else the turn commit
    committed_at: float
    filler_text: str | None = None
    filler_started_at: float | None = None  # first filler frame handed to the audio output
    reply_ready_at: float | None = None  # the reply's first TTS audio was ready (before any queueing)
    reply_started_at: float | None = None  # first frame of the real reply at the audio output
    failed: bool = False  # the reply failed and an apology was played instead

    @property
    def first_audible_ms(self) -> float | None:
        """End of caller speech → first agent audio, counting a filler."""
        starts = [t for t in (self.filler_started_at, self.reply_started_at) if t is not None]
        return 1000.0 * (min(starts) - self.user_stopped_at) if starts else None

    @property
    def queued_ms(self) -> float | None:
        """Reply audio ready → at the output: what the speech queue (and a filler or gate) added."""
        if self.reply_ready_at is None or self.reply_started_at is None:
            return None
        return 1000.0 * (self.reply_started_at - self.reply_ready_at)

    @property
    def reply_ms(self) -> float | None:
        """End of caller speech → first audio of the real reply (fillers not counted)."""
        if self.reply_started_at is None:
            return None
        return 1000.0 * (self.reply_started_at - self.user_stopped_at)

    def as_dict(self) -> dict[str, object]:
        return {
            "turn": self.index,
            "filler": self.filler_text is not None,
            "first_audible_ms": self.first_audible_ms,
            "reply_ms": self.reply_ms,
            "queued_ms": self.queued_ms,
            "failed": self.failed,
        }


@dataclass
class FillerMetrics:
    turns: list[TurnRecord] = field(default_factory=list)
    fillers: int = 0  # late-reply acknowledgements
    hold_lines: int = 0  # tool-wait lines
    apologies: int = 0
    # (start, end) in time.monotonic() seconds of each filler or hold line, from its first frame handed to the
    # audio output; lets a harness tell filler audio from reply audio on its own timeline
    filler_windows: list[tuple[float, float]] = field(default_factory=list)

    @property
    def filler_rate(self) -> float:
        """Share of user turns that got a late-reply filler."""
        return sum(t.filler_text is not None for t in self.turns) / len(self.turns) if self.turns else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "turns": len(self.turns),
            "fillers": self.fillers,
            "hold_lines": self.hold_lines,
            "apologies": self.apologies,
            "filler_rate": self.filler_rate,
            "per_turn": [t.as_dict() for t in self.turns],
        }
