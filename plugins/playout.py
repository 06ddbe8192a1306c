"""When will the listener run out of audio? A streaming TTS asks this to cut the LLM's text early.

Pieces normally end at clause or sentence boundaries. When the LLM writes more slowly than the voice speaks
(a small model on cores shared with other calls), the listener can finish the audio it has while the next
clause is still half-written; waiting for the comma is then dead air. The clock tracks how much audio has
been sent (played out in real time from when it was sent) and how long a piece takes to synthesise, so the
stream knows when it must cut at the last complete word instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from plugins.text_chunker import SpeechChunker


@dataclass(frozen=True)
class PlayoutOptions:
    margin_s: float = 0.12  # cut this long before synthesis would otherwise finish too late
    poll_s: float = 0.025  # how often a stream checks the clock while it waits for text
    min_words: int = 2  # never cut fewer words than this on their own
    first_synth_s: float = 0.15  # synthesis time assumed until one has been measured


class PlayoutClock:
    def __init__(self, options: PlayoutOptions | None = None) -> None:
        self.options = options or PlayoutOptions()
        self.dry_at = 0.0  # monotonic time the listener runs out; 0 = nothing sent yet
        self.synth_s = self.options.first_synth_s

    def sent(self, seconds: float, now: float | None = None) -> None:
        """`seconds` of audio left for the listener; it plays after whatever is still queued."""
        now = time.monotonic() if now is None else now
        self.dry_at = max(now, self.dry_at) + seconds

    def synthesized(self, took_s: float) -> None:
        """A piece took `took_s` to synthesise (a smoothed estimate; one slow piece counts for a while)."""
        self.synth_s = max(took_s, 0.7 * self.synth_s + 0.3 * took_s)

    def running_dry(self, now: float | None = None) -> bool:
        """True once the next piece must start synthesising now to be ready in time (or already is late)."""
        if self.dry_at == 0.0:
            return False  # before the first audio the first-piece rule decides
        now = time.monotonic() if now is None else now
        return self.dry_at - now <= self.synth_s + self.options.margin_s


async def cut_before_dry(
    clock: PlayoutClock,
    chunker: SpeechChunker,
    pieces: asyncio.Queue[str | None],
    busy: Callable[[], bool] = lambda: False,
) -> None:
    """Run beside a streaming TTS until cancelled: when the listener is about to run out, nothing is queued
    (and the voice is not `busy` with a piece), speak the complete words the LLM has written so far."""
    while True:
        await asyncio.sleep(clock.options.poll_s)
        if not busy() and pieces.empty() and clock.running_dry():
            words = chunker.take_words(clock.options.min_words)
            if words:
                pieces.put_nowait(words)
