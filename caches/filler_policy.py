"""When to mask a late reply with a short cached line, and which line — pure logic, no livekit, no clock.

Rules (each one a reason a machine sounds like a machine when broken):
- only when the reply's first audio is predicted late (recent replies were slower than the threshold) or
  observed late (the threshold passed and no reply audio is ready);
- never while the caller is speaking;
- never twice in a row: not right after another filler with no real speech between, and not in two
  consecutive turns;
- never the same line within `no_repeat_turns` turns;
- a tool-call wait may get a longer hold line, but only after `hold_gap_ms` of silence since the last filler;
- an apology is not a filler: it is always allowed, but not the same apology twice in a row.
"""

from __future__ import annotations

import random
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class FillerOptions:
    late_threshold_ms: float = 600.0  # a reply later than this gets a filler
    predict: bool = True  # play at once when recent replies were late (no waiting for the threshold)
    history: int = 5  # recent reply latencies used for the prediction (median)
    min_history: int = 2  # fewer observations than this → no prediction, only observation
    no_repeat_turns: int = 4  # a line is not reused within this many turns
    min_turn_gap: int = 1  # turns without a filler required between two filler turns (1 = never consecutive)
    hold_gap_ms: float = 2500.0  # tool waits: silence since the last filler before a hold line
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.late_threshold_ms < 0 or self.hold_gap_ms < 0:
            raise ValueError("filler thresholds must be >= 0 ms")
        if self.history < 1 or self.min_history < 1 or self.no_repeat_turns < 0 or self.min_turn_gap < 0:
            raise ValueError("filler history/turn counts must be positive")


class Plan(StrEnum):
    NOW = "now"  # play a filler at once (predicted late)
    WATCH = "watch"  # wait for the threshold, then play if no reply audio is ready
    SKIP = "skip"  # no filler this turn


@dataclass(frozen=True)
class Decision:
    plan: Plan
    reason: str
    deadline_ms: float = 0.0  # for WATCH: ms after the turn commit to check again


class FillerPolicy:
    """One per call. Feed it turn events; ask it what to do."""

    def __init__(self, opts: FillerOptions | None = None) -> None:
        self.opts = opts or FillerOptions()
        self._rng = random.Random(self.opts.seed)
        self._turn = 0
        self._latencies: deque[float] = deque(maxlen=self.opts.history)
        self._used_at: dict[str, int] = {}  # line → turn it was last played
        self._last_filler_turn: int | None = None
        self._last_filler_at_ms: float | None = None
        self._filler_since_speech = False  # the last thing said was a filler
        self._last_apology: str | None = None

    @property
    def turn(self) -> int:
        return self._turn

    # --- events -------------------------------------------------------------------------------------
    def start_turn(self) -> None:
        """A caller turn was committed (a reply is on its way)."""
        self._turn += 1

    def observe_reply_latency(self, ms: float) -> None:
        """Turn end → first reply audio of a finished turn (fillers not counted); drives the prediction."""
        if ms >= 0:
            self._latencies.append(float(ms))

    def on_reply_audio(self) -> None:
        """Real (non-filler) speech reached the caller."""
        self._filler_since_speech = False

    def on_filler_played(self, text: str, now_ms: float) -> None:
        self._used_at[text] = self._turn
        self._last_filler_turn = self._turn
        self._last_filler_at_ms = now_ms
        self._filler_since_speech = True

    # --- decisions ----------------------------------------------------------------------------------
    def predicted_latency_ms(self) -> float | None:
        if len(self._latencies) < self.opts.min_history:
            return None
        return statistics.median(self._latencies)

    def on_commit(
        self, *, user_speaking: bool, reply_ready: bool = False, filler_ms: float = 0.0
    ) -> Decision:
        """Right after a caller turn is committed: play now, watch the threshold, or stay quiet.

        A filler plays to its end before the reply (speeches queue), so playing one at once only pays when
        the reply is predicted later than the threshold plus the filler itself (`filler_ms`): otherwise it
        would hold back a reply that was about to start."""
        if reply_ready:
            return Decision(Plan.SKIP, "reply audio already ready")
        if blocked := self._blocked(user_speaking):
            return Decision(Plan.SKIP, blocked)
        predicted = self.predicted_latency_ms()
        late = self.opts.late_threshold_ms + max(0.0, filler_ms)
        if self.opts.predict and predicted is not None and predicted >= late:
            return Decision(Plan.NOW, f"predicted late ({predicted:.0f} ms)")
        return Decision(Plan.WATCH, "watching", deadline_ms=self.opts.late_threshold_ms)

    def at_deadline(
        self, *, user_speaking: bool, reply_ready: bool, reply_synthesising: bool = False
    ) -> bool:
        """The threshold passed: play only if the reply has neither audio nor text at the voice yet. Once the
        LLM's first words reach the voice, the reply's audio is one synthesis away, and a filler started
        then would make it wait for the filler's end."""
        return not reply_ready and not reply_synthesising and self._blocked(user_speaking) is None

    def allow_hold_line(self, *, user_speaking: bool, now_ms: float) -> bool:
        """A tool call is still running: may a hold line play now?"""
        if user_speaking:
            return False
        last = self._last_filler_at_ms
        return last is None or now_ms - last >= self.opts.hold_gap_ms

    def choose(self, candidates: Sequence[str]) -> str | None:
        """A line not used within `no_repeat_turns` turns (random among those), or None."""
        fresh = [
            c for c in candidates if self._turn - self._used_at.get(c, -(10**9)) > self.opts.no_repeat_turns
        ]
        return self._rng.choice(fresh) if fresh else None

    def choose_apology(self, candidates: Sequence[str]) -> str | None:
        options = [c for c in candidates if c != self._last_apology] or list(candidates)
        if not options:
            return None
        self._last_apology = self._rng.choice(options)
        return self._last_apology

    def _blocked(self, user_speaking: bool) -> str | None:
        if user_speaking:
            return "caller is speaking"
        if self._filler_since_speech:
            return "last thing said was a filler"
        last = self._last_filler_turn
        if last is not None and self._turn - last <= self.opts.min_turn_gap:
            return "filler in a recent turn"
        return None
