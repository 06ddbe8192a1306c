"""Audio tokens → 7-token SNAC frames, for every stream at once (numpy, one call per generation step).

Each token is checked against the exact range of the position it claims: id = AUDIO_BASE + 4096·p + c with
0 ≤ c < 4096, and p must be the position the frame expects. A token that fails (a text token, pad, a code for
the wrong position) drops the partial frame and the stream waits for the next position-0 token: the phase is
taken from the ids themselves, so one bad token never shifts every later frame. Only END_OF_SPEECH stops a
stream. A stream also stops at its frame budget (from text length) or when its frames repeat in a short cycle
(a token loop). The work per step is a handful of array operations whatever the number of streams — per-token
Python would cap how many streams one CPU core can serve.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plugins.orpheus.engine import ids

REASON_NONE, REASON_STOP, REASON_LENGTH, REASON_LOOP = 0, 1, 2, 3
REASON_NAMES = {REASON_STOP: "stop", REASON_LENGTH: "length", REASON_LOOP: "loop"}
_LOOP_PERIODS = 4  # cycles of 1..4 frames count as a loop
_RING = 8


@dataclass
class StepResult:
    """What one `push` changed: slots that gained frames, and slots that ended (with reason codes)."""

    gained: np.ndarray
    ended: np.ndarray
    reasons: np.ndarray


class FrameAssembler:
    """Per-slot frame buffers in preallocated arrays; `push(slots, tokens)` handles a whole step."""

    def __init__(self, slots: int, max_frames: int, loop_frames: int = 36) -> None:
        self.max_frames = max_frames
        self.loop_frames = loop_frames
        self.frames = np.zeros((slots, max_frames, ids.FRAME_TOKENS), dtype=np.int16)
        self.nframes = np.zeros(slots, dtype=np.int64)
        self.frame_cap = np.zeros(slots, dtype=np.int64)
        self.pos = np.zeros(slots, dtype=np.int64)
        self.partial = np.zeros((slots, ids.FRAME_TOKENS), dtype=np.int16)
        self.live = np.zeros(slots, dtype=bool)
        self.reason = np.zeros(slots, dtype=np.int8)
        self.bad_tokens = np.zeros(slots, dtype=np.int64)
        self.dropped_partials = np.zeros(slots, dtype=np.int64)
        self.tokens_in = np.zeros(slots, dtype=np.int64)
        self._hash_ring = np.zeros((slots, _RING), dtype=np.int64)
        self._runs = np.zeros((slots, _LOOP_PERIODS), dtype=np.int64)
        rng = np.random.default_rng(0x5EED)
        self._hash_w = rng.integers(1, 2**61, size=ids.FRAME_TOKENS, dtype=np.int64)

    def open(self, slot: int, max_tokens: int) -> None:
        """Start a fresh utterance in `slot` with a budget of whole frames."""
        self.nframes[slot] = 0
        self.frame_cap[slot] = max(1, min(self.max_frames, max_tokens // ids.FRAME_TOKENS))
        self.pos[slot] = 0
        self.live[slot] = True
        self.reason[slot] = REASON_NONE
        self.bad_tokens[slot] = 0
        self.dropped_partials[slot] = 0
        self.tokens_in[slot] = 0
        self._runs[slot] = 0

    def close(self, slot: int) -> None:
        self.live[slot] = False

    def codes(self, slot: int, start: int, end: int) -> np.ndarray:
        return self.frames[slot, start:end]

    def push(self, slots: np.ndarray, tokens: np.ndarray) -> StepResult:
        """Feed tokens (any order, a slot may appear several times: kept in arrival order per slot)."""
        slots = np.asarray(slots, dtype=np.int64)
        tokens = np.asarray(tokens, dtype=np.int64)
        empty = np.zeros(0, dtype=np.int64)
        if slots.size == 0:
            return StepResult(empty, empty, np.zeros(0, dtype=np.int8))
        before = self.nframes[slots].copy()
        ended_parts: list[np.ndarray] = []
        if np.unique(slots).size == slots.size:
            ended_parts.append(self._round(slots, tokens))
        else:  # several tokens for one slot: process in rounds of distinct slots, arrival order kept
            order = np.argsort(slots, kind="stable")
            s_sorted = slots[order]
            starts = np.r_[0, np.flatnonzero(np.diff(s_sorted)) + 1]
            group_start = np.repeat(starts, np.diff(np.r_[starts, s_sorted.size]))
            rank = np.empty_like(order)
            rank[order] = np.arange(s_sorted.size) - group_start
            for r in range(int(rank.max()) + 1):
                sel = rank == r
                ended_parts.append(self._round(slots[sel], tokens[sel]))
        touched = np.unique(slots)
        gained = touched[self.nframes[touched] > self._before_lookup(slots, before, touched)]
        ended = np.unique(np.concatenate(ended_parts)) if ended_parts else empty
        return StepResult(gained, ended, self.reason[ended].copy())

    @staticmethod
    def _before_lookup(slots: np.ndarray, before: np.ndarray, touched: np.ndarray) -> np.ndarray:
        out = np.empty(touched.size, dtype=np.int64)
        idx = np.searchsorted(touched, slots)
        out[idx] = before  # every occurrence of a slot saw the same "before" value
        return out

    def _round(self, s: np.ndarray, t: np.ndarray) -> np.ndarray:
        """One token for each of a set of distinct slots. Returns the slots that ended in this round."""
        live = self.live[s]
        s, t = s[live], t[live]
        if s.size == 0:
            return s
        self.tokens_in[s] += 1
        stop = t == ids.END_OF_SPEECH
        rel = t - ids.AUDIO_BASE
        in_audio = (rel >= 0) & (rel < ids.CODEBOOK * ids.FRAME_TOKENS)
        tok_pos = np.where(in_audio, rel // ids.CODEBOOK, -1)
        code = np.where(in_audio, rel % ids.CODEBOOK, 0)
        expected = self.pos[s]
        ok = in_audio & (tok_pos == expected)

        # accepted codes
        so, po = s[ok], expected[ok]
        self.partial[so, po] = code[ok]
        self.pos[so] = po + 1
        done = so[po + 1 == ids.FRAME_TOKENS]
        if done.size:
            self._complete(done)

        # bad tokens: drop the partial frame, restart at this token if it is a position-0 code
        bad = ~ok & ~stop
        if bad.any():
            sb = s[bad]
            self.bad_tokens[sb] += 1
            self.dropped_partials[sb] += self.pos[sb] > 0
            restart = tok_pos[bad] == 0
            self.partial[sb[restart], 0] = code[bad][restart]
            self.pos[sb] = np.where(restart, 1, 0)

        ended = s[stop]
        if ended.size:
            self.dropped_partials[ended] += self.pos[ended] > 0
            self.pos[ended] = 0
            self.reason[ended] = REASON_STOP
            self.live[ended] = False
        if done.size:
            length = done[self.nframes[done] >= self.frame_cap[done]]
            looped = done[self._runs[done].max(axis=1) >= self.loop_frames]
            for group, why in ((looped, REASON_LOOP), (length, REASON_LENGTH)):
                group = group[self.live[group]]
                self.reason[group] = why
                self.live[group] = False
                ended = np.concatenate([ended, group])
        return ended

    def _complete(self, done: np.ndarray) -> None:
        n = self.nframes[done]
        frame = self.partial[done]
        self.frames[done, n] = frame
        h = (frame.astype(np.int64) * self._hash_w).sum(axis=1)
        for p in range(1, _LOOP_PERIODS + 1):
            prev = self._hash_ring[done, (n - p) % _RING]
            same = (prev == h) & (n >= p)
            self._runs[done, p - 1] = np.where(same, self._runs[done, p - 1] + 1, 0)
        self._hash_ring[done, n % _RING] = h
        self.nframes[done] = n + 1
        self.pos[done] = 0
